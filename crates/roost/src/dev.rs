//! `roost dev`: one process, a single-node cluster in `./.roost`, a default company and an
//! admin token, reused on every later start.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use roost_core::CredentialKind;
use roost_server::api::WORKER_JOIN_PREFIX;
use roost_server::auth::{load_or_create_token_file, ADMIN_TOKEN_PREFIX};
use roost_server::{Listeners, Server, ServerConfig};
use roost_worker::Stop;
use tokio::time::Instant;

use crate::stopping::{exit_now, watchdog, Signals, HARD_MARGIN};

#[derive(Args)]
pub struct DevArgs {
    /// Directory for data and the admin token
    #[arg(long, env = "ROOST_DEV_DIR", default_value = ".roost")]
    dir: PathBuf,
    #[arg(long, env = "ROOST_HTTP_LISTEN", default_value = "127.0.0.1:7480")]
    http_listen: String,
    #[arg(long, env = "ROOST_GRPC_LISTEN", default_value = "127.0.0.1:7481")]
    grpc_listen: String,
    /// The Raft service's listener. A dev node has no peers: any free loopback port.
    #[arg(long, env = "ROOST_PEER_LISTEN", default_value = "127.0.0.1:0")]
    peer_listen: String,
    /// Seconds a stopping `roost dev` (SIGTERM, SIGINT) may take: its agents finish (and are
    /// stopped if they do not), then the node stops
    #[arg(long, env = "ROOST_SHUTDOWN_GRACE_SECS", default_value_t = roost_server::DEFAULT_SHUTDOWN_GRACE_SECS)]
    shutdown_grace_secs: u64,
    /// Serve plaintext on a non-loopback address (refused otherwise: `roost dev` has no TLS);
    /// also ROOST_INSECURE_PLAINTEXT=1, read as `roost server` reads it
    #[arg(long)]
    insecure_plaintext: bool,
}

pub const TOKEN_FILE: &str = "admin-token";
/// The dev worker's join token, reused on every start.
pub const WORKER_TOKEN_FILE: &str = "worker-token";
/// The dev worker's credential, exchanged once for the join token above.
pub const WORKER_CREDENTIAL_FILE: &str = "worker-credential";

/// Creates `dir` 0700 if it is missing: it holds the admin token, the data and the agents' work.
fn private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Of a stopping `roost dev`'s grace, at most this much is left to the node once the worker
/// has stopped: no requests are in flight then and there is no leadership to hand over.
const NODE_STOP_RESERVE: Duration = Duration::from_secs(2);

/// `roost dev` serves plaintext (it has no TLS), so only on loopback unless told plainly, as
/// `roost server` without TLS (`config.rs`): its admin token and the dashboard's login would
/// cross the network in clear.
fn check_loopback(config: &ServerConfig) -> anyhow::Result<()> {
    let exposed = crate::config::plaintext_exposed(config);
    if exposed.is_empty() {
        return Ok(());
    }
    if config.insecure_plaintext {
        tracing::warn!(
            listen = %exposed.join(" "),
            "roost dev serving PLAINTEXT off loopback (--insecure-plaintext): the admin token \
             and agents' keys cross the network unencrypted"
        );
        return Ok(());
    }
    anyhow::bail!(
        "refusing to serve plaintext on {}: not a loopback address, and `roost dev` has no TLS. \
         Keep it on loopback (the default, 127.0.0.1), run `roost server` with [tls] for a node \
         other machines reach, or pass --insecure-plaintext (ROOST_INSECURE_PLAINTEXT=true) if \
         this network is already private and encrypted",
        exposed.join(" and ")
    )
}

pub async fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    roost_server::ServerConfig {
        shutdown_grace_secs: args.shutdown_grace_secs,
        ..ServerConfig::default()
    }
    .validate_shutdown_grace()
    .map_err(anyhow::Error::msg)?;
    let config = ServerConfig {
        shutdown_grace_secs: args.shutdown_grace_secs,
        data_dir: args.dir.join("data"),
        http_listen: args.http_listen.clone(),
        grpc_listen: args.grpc_listen.clone(),
        peer_listen: args.peer_listen.clone(),
        bootstrap: true,
        insecure_plaintext: args.insecure_plaintext
            || match std::env::var("ROOST_INSECURE_PLAINTEXT") {
                Ok(v) => crate::config::parse_bool("ROOST_INSECURE_PLAINTEXT", &v)?,
                Err(_) => false,
            },
        ..ServerConfig::default()
    };
    check_loopback(&config)?;
    let mut signals = Signals::install()?;
    private_dir(&args.dir)?;
    let listeners = Listeners::bind(&config)
        .await
        .context("cannot listen (is another roost running?)")?;
    let server = Server::start(&config, listeners).await?;
    let (token, fresh) = load_or_create_token_file(&args.dir.join(TOKEN_FILE), ADMIN_TOKEN_PREFIX)?;
    let api = server.api();
    api.ensure_admin_token(&token, "dev-admin")
        .await
        .context("cannot record the admin token")?;
    let company = api
        .ensure_default_company("My Company", "RST")
        .await
        .context("cannot create the default company")?;

    // An in-process worker, so agents with the `process` adapter run on this machine.
    let (join_token, _) =
        load_or_create_token_file(&args.dir.join(WORKER_TOKEN_FILE), WORKER_JOIN_PREFIX)?;
    api.ensure_token(&join_token, CredentialKind::WorkerJoin, "dev-worker")
        .await
        .context("cannot record the worker join token")?;
    let work_dir = args.dir.join("work");
    private_dir(&work_dir)?;
    let worker_config = roost_worker::WorkerConfig {
        worker_id: "dev-worker".into(),
        servers: vec![server.grpc_addr().to_string()],
        api_url: format!("http://{}", server.http_addr()),
        join_token,
        // Beside the token files, not in the work dir its agents run in.
        credential_file: Some(args.dir.join(WORKER_CREDENTIAL_FILE)),
        work_dir: work_dir.clone(),
        shutdown_grace_secs: args.shutdown_grace_secs,
        ..roost_worker::WorkerConfig::default()
    };
    let (stop_worker, stop_rx) = tokio::sync::watch::channel(Stop::Running);
    let mut worker = tokio::spawn(roost_worker::run_until(worker_config, stop_rx));

    let url = format!("http://{}", server.http_addr());
    let token_path = args.dir.join(TOKEN_FILE);
    let mut lines = Vec::new();
    lines.push(format!(
        "Roost dev is running: a single-node cluster with its data in {}",
        config.data_dir.display()
    ));
    lines.push(String::new());
    lines.push(format!("  API          {url}/api"));
    lines.push(format!("  gRPC         {}", server.grpc_addr()));
    lines.push(format!("  Admin token  {token}"));
    lines.push(format!(
        "               {} {}",
        if fresh {
            "new, saved in"
        } else {
            "reused from"
        },
        token_path.display()
    ));
    lines.push(format!(
        "  Company      {} ({})  id {}",
        company.name, company.issue_prefix, company.id
    ));
    lines.push(format!(
        "  Worker       dev-worker (process adapter), agents run in {}",
        work_dir.display()
    ));
    lines.push(String::new());
    lines.push("Next step, in another terminal:".to_string());
    lines.push(format!(
        "  export ROOST_TOKEN=$(cat {})",
        token_path.display()
    ));
    lines.push(format!(
        "  curl -s -H \"Authorization: Bearer $ROOST_TOKEN\" {url}/api/companies"
    ));
    lines.push(String::new());
    lines.push("Stop with Ctrl-C; the next `roost dev` starts where this one stopped.".to_string());
    // A closed stdout (the parent stopped reading) must not stop the server.
    let mut out = std::io::stdout().lock();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = out.flush();
    drop(out);

    // A node that can no longer serve (its Raft core stopped, a background task given up
    // on) exits non-zero, as `roost server` does, rather than answering 500s for good.
    let grace = config.shutdown_grace();
    let failed = tokio::select! {
        signal = signals.recv() => {
            let _ = writeln!(std::io::stderr(), "{signal}: stopping... (a second signal stops at once)");
            None
        }
        error = server.failed() => Some(error),
    };
    let started = Instant::now();
    let by = started + grace;
    watchdog("roost dev", grace + HARD_MARGIN);
    if let Some(error) = failed {
        let _ = stop_worker.send(Stop::Now);
        let _ = tokio::time::timeout_at(by, &mut worker).await;
        let _ = server.shutdown_by(by).await;
        return Err(error.into());
    }
    // The worker first, while the node still serves: its agents call the API to finish.
    let worker_by = by - (grace / 4).min(NODE_STOP_RESERVE);
    let _ = stop_worker.send(Stop::Drain { by: worker_by });
    let mut forced = false;
    let stopped = tokio::select! {
        joined = &mut worker => joined,
        signal = signals.recv() => {
            let _ = writeln!(std::io::stderr(), "{signal} again: stopping the agents now");
            forced = true;
            let _ = stop_worker.send(Stop::Now);
            tokio::select! {
                joined = &mut worker => joined,
                signal = signals.recv() => exit_now("roost dev", signal),
            }
        }
    };
    let clean = match stopped {
        Ok(Ok(stopped)) => stopped.clean(),
        Ok(Err(error)) => {
            tracing::error!(%error, "the dev worker failed");
            false
        }
        Err(error) => {
            tracing::error!(%error, "the dev worker's task failed");
            false
        }
    };
    let node_by = if forced {
        by.min(Instant::now() + NODE_STOP_RESERVE)
    } else {
        by
    };
    tokio::select! {
        stopped = server.shutdown_by(node_by) => stopped?,
        signal = signals.recv() => exit_now("roost dev", signal),
    }
    let _ = writeln!(
        std::io::stderr(),
        "stopped in {} ms",
        started.elapsed().as_millis()
    );
    Ok(if clean && !forced {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
