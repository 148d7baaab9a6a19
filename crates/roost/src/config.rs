//! `roost server`: configuration from defaults, then the TOML file, then `ROOST_*`
//! environment variables, then flags; `--check` stops after every check a start makes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use roost_server::{Listeners, ServerConfig};

#[derive(Args)]
pub struct ServerArgs {
    /// TOML config file (see deploy/roost-server.toml)
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    node_id: Option<u64>,
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long)]
    http_listen: Option<String>,
    #[arg(long)]
    grpc_listen: Option<String>,
    /// Where the other nodes reach this one's Raft service; config `peer_listen`
    #[arg(long)]
    peer_listen: Option<String>,
    /// Worker threads of the async runtime (default: one per CPU)
    #[arg(long)]
    runtime_threads: Option<usize>,
    /// This node's certificate (PEM, `roost cert issue node`); config `tls.cert_file`
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// This node's private key (PEM); config `tls.key_file`
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// The cluster CA (PEM, `roost cert init`); config `tls.ca_file`
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Serve plaintext on a non-loopback address (refused otherwise); config
    /// `insecure_plaintext`
    #[arg(long)]
    insecure_plaintext: bool,
    /// Seconds a stopping node (SIGTERM, SIGINT) may take: requests in flight, handing its
    /// leadership over, stopping Raft (default 10); config `shutdown_grace_secs`
    #[arg(long)]
    shutdown_grace_secs: Option<u64>,
    /// Load and check the configuration as a start would (TLS files included), print a
    /// summary and exit: 0 if a start would accept it, 1 with the start's error if not. Binds
    /// no socket and opens no data dir
    #[arg(long)]
    pub check: bool,
    /// With --check: print the summary as JSON
    #[arg(long, requires = "check")]
    pub json: bool,
}

/// The most runtime threads a config may ask for; far more than any machine has CPUs, and a
/// typo like `10000` would otherwise fail in the runtime's thread spawning, not here.
const MAX_RUNTIME_THREADS: usize = 1024;

/// Applies `ROOST_*` environment variables over `config`.
pub fn apply_env(
    config: &mut ServerConfig,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<()> {
    if let Some(v) = env("ROOST_NODE_ID") {
        config.node_id = v
            .parse()
            .with_context(|| format!("ROOST_NODE_ID={v} is not a node id"))?;
    }
    if let Some(v) = env("ROOST_DATA_DIR") {
        config.data_dir = PathBuf::from(v);
    }
    if let Some(v) = env("ROOST_HTTP_LISTEN") {
        config.http_listen = v;
    }
    if let Some(v) = env("ROOST_GRPC_LISTEN") {
        config.grpc_listen = v;
    }
    if let Some(v) = env("ROOST_PEER_LISTEN") {
        config.peer_listen = v;
    }
    if let Some(v) = env("ROOST_RUNTIME_THREADS") {
        config.runtime_threads = Some(
            v.parse()
                .with_context(|| format!("ROOST_RUNTIME_THREADS={v} is not a thread count"))?,
        );
    }
    if let Some(v) = env("ROOST_TLS_CERT_FILE") {
        config.tls.cert_file = Some(PathBuf::from(v));
    }
    if let Some(v) = env("ROOST_TLS_KEY_FILE") {
        config.tls.key_file = Some(PathBuf::from(v));
    }
    if let Some(v) = env("ROOST_TLS_CA_FILE") {
        config.tls.ca_file = Some(PathBuf::from(v));
    }
    if let Some(v) = env("ROOST_INSECURE_PLAINTEXT") {
        config.insecure_plaintext = parse_bool("ROOST_INSECURE_PLAINTEXT", &v)?;
    }
    if let Some(v) = env("ROOST_SHUTDOWN_GRACE_SECS") {
        config.shutdown_grace_secs = parse_grace_secs(&v)?;
    }
    if let Some(v) = env("ROOST_RECALL_EMBEDDINGS_URL") {
        config.recall.embeddings_url = (!v.is_empty()).then_some(v);
    }
    if let Some(v) = env("ROOST_RECALL_EMBEDDINGS_MODEL") {
        config.recall.embeddings_model = v;
    }
    if let Some(v) = env("ROOST_RECALL_API_KEY_ENV") {
        config.recall.api_key_env = (!v.is_empty()).then_some(v);
    }
    if let Some(v) = env("ROOST_RECALL_TIMEOUT_MS") {
        config.recall.timeout_ms = v.parse().with_context(|| {
            format!("ROOST_RECALL_TIMEOUT_MS={v} is not a whole number of milliseconds")
        })?;
    }
    if let Some(v) = env("ROOST_BOOTSTRAP") {
        config.bootstrap = match v.as_str() {
            "1" | "true" => true,
            "0" | "false" => false,
            _ => bail!("ROOST_BOOTSTRAP={v}: expected true or false"),
        };
    }
    Ok(())
}

pub fn load(args: &ServerArgs) -> anyhow::Result<ServerConfig> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?
        }
        None => ServerConfig::default(),
    };
    apply_env(&mut config, |k| std::env::var(k).ok())?;
    if let Some(v) = args.node_id {
        config.node_id = v;
    }
    if let Some(v) = &args.data_dir {
        config.data_dir = v.clone();
    }
    if let Some(v) = &args.http_listen {
        config.http_listen = v.clone();
    }
    if let Some(v) = &args.grpc_listen {
        config.grpc_listen = v.clone();
    }
    if let Some(v) = &args.peer_listen {
        config.peer_listen = v.clone();
    }
    if let Some(v) = args.runtime_threads {
        config.runtime_threads = Some(v);
    }
    if let Some(v) = &args.tls_cert {
        config.tls.cert_file = Some(v.clone());
    }
    if let Some(v) = &args.tls_key {
        config.tls.key_file = Some(v.clone());
    }
    if let Some(v) = &args.tls_ca {
        config.tls.ca_file = Some(v.clone());
    }
    if args.insecure_plaintext {
        config.insecure_plaintext = true;
    }
    if let Some(v) = args.shutdown_grace_secs {
        config.shutdown_grace_secs = v;
    }
    config
        .validate_shutdown_grace()
        .map_err(anyhow::Error::msg)?;
    if config.node_id == 0 {
        bail!("node_id must be at least 1");
    }
    config.tls.validate().map_err(anyhow::Error::msg)?;
    check_transport_security(&config)?;
    // Rate limits are on for `roost server` unless the config says otherwise (off in `roost dev`).
    config.limits = config.limits.with_server_defaults();
    config.limits.validate().map_err(anyhow::Error::msg)?;
    match config.runtime_threads {
        Some(0) => bail!("runtime_threads must be at least 1 (leave it out for one per CPU)"),
        Some(n) if n > MAX_RUNTIME_THREADS => bail!(
            "runtime_threads = {n} is more than {MAX_RUNTIME_THREADS}: a node's runtime needs \
             about one thread per CPU it may use"
        ),
        _ => {}
    }
    Ok(config)
}

/// The config a start runs with: [`load`], then what a start checks before it binds a socket
/// or opens the data dir (`preflight.rs`: addresses, Raft timing, TLS files).
pub fn load_checked(args: &ServerArgs) -> anyhow::Result<ServerConfig> {
    let config = load(args)?;
    crate::preflight::server(&config)?;
    Ok(config)
}

/// `roost server --check`: the summary of a config a start would accept (the caller prints
/// the error of one it would refuse, as a start does).
pub fn check(config: &ServerConfig, as_json: bool) -> ExitCode {
    crate::check::print(
        &crate::check::server_report(config),
        &crate::check::server_text(config),
        as_json,
    );
    ExitCode::SUCCESS
}

/// `ROOST_SHUTDOWN_GRACE_SECS`: whole seconds (the bounds are checked with the other sources).
pub fn parse_grace_secs(v: &str) -> anyhow::Result<u64> {
    v.trim()
        .parse()
        .with_context(|| format!("ROOST_SHUTDOWN_GRACE_SECS={v} is not a whole number of seconds"))
}

pub(crate) fn parse_bool(name: &str, v: &str) -> anyhow::Result<bool> {
    match v {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => bail!("{name}={v}: expected true or false"),
    }
}

/// Whether a listen address is on loopback only (`127.0.0.0/8`, `[::1]`, `localhost`).
fn is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    listen
        .rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

/// The listen addresses that other machines can reach and that would serve plaintext.
pub(crate) fn plaintext_exposed(config: &ServerConfig) -> Vec<&str> {
    if config.tls.enabled() {
        return Vec::new();
    }
    [
        &config.http_listen,
        &config.grpc_listen,
        &config.peer_listen,
    ]
    .into_iter()
    .filter(|l| !is_loopback(l))
    .map(String::as_str)
    .collect()
}

/// A node reachable from other machines serves TLS, or is told plainly that it may not.
fn check_transport_security(config: &ServerConfig) -> anyhow::Result<()> {
    let exposed = plaintext_exposed(config);
    if exposed.is_empty() {
        return Ok(());
    }
    if !config.insecure_plaintext {
        bail!(
            "refusing to serve plaintext on {}: not a loopback address. Configure TLS ([tls] \
             cert_file, key_file and ca_file, or --tls-cert, --tls-key and --tls-ca; `roost cert \
             init` makes a CA), or pass --insecure-plaintext (insecure_plaintext = true) if this \
             network is already private and encrypted",
            exposed.join(" and ")
        );
    }
    Ok(())
}

/// Runs a node from `config` (read by [`load_checked`] before the runtime starts: it names the
/// runtime's threads).
pub async fn run_server(config: ServerConfig) -> anyhow::Result<ExitCode> {
    if config.insecure_plaintext && !config.tls.enabled() {
        tracing::warn!(
            http = %config.http_listen,
            grpc = %config.grpc_listen,
            peer = %config.peer_listen,
            "serving PLAINTEXT (insecure_plaintext): tokens, secrets and Raft traffic cross the \
             network unencrypted and the node-to-node service is unauthenticated"
        );
    }
    let wildcards = crate::preflight::unadvertised_wildcards(&config);
    if !wildcards.is_empty() {
        tracing::warn!(
            settings = wildcards.join(", "),
            "listening on every interface with no advertise_* address: the cluster records \
             this node at a wildcard address, which a node added later cannot dial"
        );
    }
    let mut signals = crate::stopping::Signals::install()?;
    let listeners = Listeners::bind(&config).await.context("cannot listen")?;
    let server = roost_server::Server::start(&config, listeners).await?;
    let grace = server.shutdown_grace();
    tokio::select! {
        signal = signals.recv() => {
            tracing::info!(
                signal,
                grace_secs = grace.as_secs(),
                "stopping (a second signal stops at once)"
            );
        }
        // A node whose Raft core died, or whose tasks were given up on, would serve nothing
        // for good: exit with an error, so a supervisor restarts it from its data. (openraft
        // 0.9 can stop its core when a leader steps down while it starts sending a snapshot.)
        error = server.failed() => {
            tracing::error!(%error, "exiting");
            crate::stopping::watchdog("roost server", grace + crate::stopping::HARD_MARGIN);
            let _ = server.shutdown().await;
            return Err(error.into());
        }
    }
    crate::stopping::watchdog("roost server", grace + crate::stopping::HARD_MARGIN);
    tokio::select! {
        stopped = server.shutdown() => stopped?,
        signal = signals.recv() => crate::stopping::exit_now("roost server", signal),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_file_values() {
        let mut config: ServerConfig =
            toml::from_str("node_id = 3\nhttp_listen = \"0.0.0.0:1\"").unwrap();
        apply_env(&mut config, |k| {
            (k == "ROOST_HTTP_LISTEN").then(|| "127.0.0.1:9".to_string())
        })
        .unwrap();
        assert_eq!(
            (config.node_id, config.http_listen.as_str()),
            (3, "127.0.0.1:9")
        );
    }

    #[test]
    fn unknown_config_keys_are_refused() {
        let err = toml::from_str::<ServerConfig>("node_idd = 3")
            .unwrap_err()
            .to_string();
        assert!(err.contains("node_idd"), "{err}");
    }

    /// A worker's lease renewal was called a heartbeat; configs written then still load, and a
    /// config giving both names is refused rather than picking one.
    #[test]
    fn the_workers_renew_interval_reads_its_old_name_too() {
        let new: ServerConfig = toml::from_str("[workers]\nrenew_interval_ms = 250").unwrap();
        let old: ServerConfig = toml::from_str("[workers]\nheartbeat_interval_ms = 250").unwrap();
        assert_eq!(new.workers.renew_interval_ms, 250);
        assert_eq!(old.workers, new.workers);
        let both = toml::from_str::<ServerConfig>(
            "[workers]\nrenew_interval_ms = 250\nheartbeat_interval_ms = 300",
        );
        assert!(both.is_err(), "{both:?}");
    }

    #[test]
    fn the_sample_configs_in_deploy_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                let is_worker = path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("roost-worker"));
                let parsed = if is_worker {
                    toml::from_str::<roost_worker::WorkerConfig>(&text).map(|_| ())
                } else {
                    toml::from_str::<ServerConfig>(&text).map(|_| ())
                };
                assert!(parsed.is_ok(), "{}: {:?}", path.display(), parsed.err());
                seen += 1;
            }
        }
        assert!(
            seen >= 4,
            "expected the sample configs in {}",
            dir.display()
        );
    }

    fn args_with_config(path: PathBuf) -> ServerArgs {
        ServerArgs {
            config: Some(path),
            node_id: None,
            data_dir: None,
            http_listen: None,
            grpc_listen: None,
            peer_listen: None,
            runtime_threads: None,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            insecure_plaintext: false,
            shutdown_grace_secs: None,
            check: false,
            json: false,
        }
    }

    #[test]
    fn runtime_threads_come_from_the_file_and_the_flag_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "runtime_threads = 3\n").unwrap();
        let mut args = args_with_config(path);
        assert_eq!(load(&args).unwrap().runtime_threads, Some(3));
        args.runtime_threads = Some(1);
        assert_eq!(load(&args).unwrap().runtime_threads, Some(1));
    }

    #[test]
    fn a_runtime_without_threads_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "runtime_threads = 0\n").unwrap();
        let err = load(&args_with_config(path)).unwrap_err().to_string();
        assert!(err.contains("runtime_threads"), "{err}");
    }

    #[test]
    fn tls_files_come_from_the_file_then_env_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "[tls]\nca_file = \"f-ca\"\ncert_file = \"f-cert\"\nkey_file = \"f-key\"\n",
        )
        .unwrap();
        let mut config: ServerConfig =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        apply_env(&mut config, |k| {
            (k == "ROOST_TLS_CERT_FILE").then(|| "e-cert".into())
        })
        .unwrap();
        assert_eq!(config.tls.cert_file, Some(PathBuf::from("e-cert")));
        assert_eq!(config.tls.ca_file, Some(PathBuf::from("f-ca")));
        let mut args = args_with_config(path);
        args.tls_key = Some(PathBuf::from("flag-key"));
        let loaded = load(&args).unwrap();
        assert_eq!(loaded.tls.key_file, Some(PathBuf::from("flag-key")));
    }

    #[test]
    fn half_a_tls_config_is_refused_naming_the_missing_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "[tls]\ncert_file = \"c.pem\"\nca_file = \"ca.pem\"\n",
        )
        .unwrap();
        let err = load(&args_with_config(path.clone()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.key_file"), "{err}");
        std::fs::write(
            &path,
            "[tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n",
        )
        .unwrap();
        let err = load(&args_with_config(path)).unwrap_err().to_string();
        assert!(err.contains("tls.ca_file"), "{err}");
    }

    #[test]
    fn plaintext_off_loopback_needs_insecure_plaintext() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        for (listen, refused) in [
            ("127.0.0.1:1", false),
            ("[::1]:1", false),
            ("localhost:1", false),
            ("0.0.0.0:1", true),
            ("[::]:1", true),
            ("node1.example:1", true),
        ] {
            std::fs::write(&path, format!("http_listen = \"{listen}\"\n")).unwrap();
            let mut args = args_with_config(path.clone());
            let result = load(&args);
            assert_eq!(result.is_err(), refused, "{listen}: {result:?}");
            if let Err(e) = result {
                assert!(e.to_string().contains("--insecure-plaintext"), "{e}");
            }
            args.insecure_plaintext = true;
            assert!(load(&args).is_ok(), "{listen} with --insecure-plaintext");
        }
    }

    #[test]
    fn shutdown_grace_comes_from_the_file_then_env_then_flag_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "shutdown_grace_secs = 20\n").unwrap();
        let mut args = args_with_config(path.clone());
        assert_eq!(load(&args).unwrap().shutdown_grace_secs, 20);
        let mut config: ServerConfig = toml::from_str("shutdown_grace_secs = 20").unwrap();
        apply_env(&mut config, |k| {
            (k == "ROOST_SHUTDOWN_GRACE_SECS").then(|| "7".into())
        })
        .unwrap();
        assert_eq!(config.shutdown_grace_secs, 7);
        args.shutdown_grace_secs = Some(3);
        assert_eq!(load(&args).unwrap().shutdown_grace_secs, 3);
        assert_eq!(
            ServerConfig::default().shutdown_grace_secs,
            roost_server::DEFAULT_SHUTDOWN_GRACE_SECS
        );
        for bad in [0, roost_server::MAX_SHUTDOWN_GRACE_SECS + 1] {
            args.shutdown_grace_secs = Some(bad);
            let err = load(&args).unwrap_err().to_string();
            assert!(
                err.contains("shutdown_grace_secs") && err.contains("seconds"),
                "{err}"
            );
        }
        assert!(
            apply_env(&mut config, |k| (k == "ROOST_SHUTDOWN_GRACE_SECS")
                .then(|| "10s".to_string()))
            .is_err()
        );
    }

    /// Node `id` of a three-node cluster on loopback (ports 7480+id, 7580+id, 7680+id).
    fn cluster_node(id: u64) -> String {
        let mut text = format!(
            "node_id = {id}\nhttp_listen = \"127.0.0.1:{}\"\ngrpc_listen = \"127.0.0.1:{}\"\n\
             peer_listen = \"127.0.0.1:{}\"\n",
            7480 + id,
            7580 + id,
            7680 + id
        );
        for m in 1..=3 {
            text += &format!(
                "[[initial_members]]\nid = {m}\nhttp_addr = \"127.0.0.1:{}\"\n\
                 grpc_addr = \"127.0.0.1:{}\"\npeer_addr = \"127.0.0.1:{}\"\n",
                7480 + m,
                7580 + m,
                7680 + m
            );
        }
        text
    }

    #[test]
    fn a_start_and_a_check_apply_the_peer_rules_after_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, cluster_node(2)).unwrap();
        let mut args = args_with_config(path);
        assert_eq!(load_checked(&args).unwrap().node_id, 2);
        // The flag moves node 2's peer listener away from where its member entry says it is.
        args.peer_listen = Some("127.0.0.1:9999".into());
        let err = load_checked(&args).unwrap_err().to_string();
        assert!(
            err.contains("peer_addr = 127.0.0.1:7682") && err.contains("127.0.0.1:9999"),
            "{err}"
        );
        args.peer_listen = None;
        args.node_id = Some(4);
        let err = load_checked(&args).unwrap_err().to_string();
        assert!(
            err.contains("node_id = 4 is not among initial_members"),
            "{err}"
        );
        // Only the loader's checks: `load` alone still takes it (the rules are a start's).
        assert!(load(&args).is_ok());
    }

    #[test]
    fn a_start_and_a_check_read_the_tls_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(
            &path,
            "[tls]\nca_file = \"missing-ca.pem\"\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n",
        )
        .unwrap();
        let args = args_with_config(path);
        assert!(load(&args).is_ok(), "the loader reads no file");
        let err = format!("{:#}", load_checked(&args).unwrap_err());
        assert!(
            err.starts_with("TLS: tls.cert_file = c.pem: cannot read it"),
            "{err}"
        );
        assert_eq!(err.matches("cannot read").count(), 1, "said once: {err}");
    }

    #[test]
    fn check_and_json_are_flags_of_roost_server() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            server: ServerArgs,
        }
        let cli =
            Cli::try_parse_from(["roost", "--config", "n.toml", "--check", "--json"]).unwrap();
        assert!(cli.server.check && cli.server.json);
        assert!(
            Cli::try_parse_from(["roost", "--json"]).is_err(),
            "--json needs --check"
        );
    }

    #[test]
    fn bad_env_values_are_errors() {
        let mut config = ServerConfig::default();
        assert!(apply_env(&mut config, |k| (k == "ROOST_NODE_ID")
            .then(|| "x".to_string()))
        .is_err());
        assert!(apply_env(&mut config, |k| (k == "ROOST_RUNTIME_THREADS")
            .then(|| "many".to_string()))
        .is_err());
    }

    #[test]
    fn rate_limits_are_on_for_roost_server_unless_the_file_turns_them_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.toml");
        std::fs::write(&path, "[limits]\nhttp_header_read_timeout_ms = 2000\n").unwrap();
        let config = load(&args_with_config(path.clone())).unwrap();
        assert_eq!(
            config.limits.requests_per_second,
            Some(roost_server::limits::SERVER_REQUESTS_PER_SECOND)
        );
        assert_eq!(config.limits.http_header_read_timeout_ms, 2000);
        std::fs::write(&path, "[limits]\nrequests_per_second = 0\n").unwrap();
        let off = load(&args_with_config(path.clone())).unwrap();
        assert_eq!(off.limits.requests_per_second, Some(0));
        std::fs::write(&path, "[limits]\nhttp_max_connections = 0\n").unwrap();
        let err = load(&args_with_config(path)).unwrap_err().to_string();
        assert!(err.contains("http_max_connections"), "{err}");
    }

    #[test]
    fn recall_comes_from_the_file_then_env_and_refuses_unknown_keys() {
        let mut config: ServerConfig = toml::from_str(
            "[recall]\nembeddings_url = \"http://127.0.0.1:11434/v1\"\n\
             embeddings_model = \"nomic-embed-text\"\ntimeout_ms = 900\n",
        )
        .unwrap();
        assert_eq!(config.recall.timeout_ms, 900);
        apply_env(&mut config, |k| match k {
            "ROOST_RECALL_EMBEDDINGS_MODEL" => Some("all-minilm".to_string()),
            "ROOST_RECALL_API_KEY_ENV" => Some("EMBED_KEY".to_string()),
            "ROOST_RECALL_TIMEOUT_MS" => Some("1500".to_string()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            (
                config.recall.embeddings_url.as_deref(),
                config.recall.embeddings_model.as_str(),
                config.recall.api_key_env.as_deref(),
                config.recall.timeout_ms
            ),
            (
                Some("http://127.0.0.1:11434/v1"),
                "all-minilm",
                Some("EMBED_KEY"),
                1500
            )
        );
        apply_env(&mut config, |k| {
            (k == "ROOST_RECALL_EMBEDDINGS_URL").then(String::new)
        })
        .unwrap();
        assert_eq!(config.recall.embeddings_url, None);
        assert!(apply_env(&mut config, |k| (k == "ROOST_RECALL_TIMEOUT_MS")
            .then(|| "soon".to_string()))
        .is_err());
        assert!(toml::from_str::<ServerConfig>("[recall]\nembedding_url = \"x\"\n").is_err());
    }
}
