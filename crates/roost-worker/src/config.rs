//! A worker's configuration (TOML, unknown keys refused).

use std::collections::BTreeMap;
use std::path::PathBuf;

use roost_tls::PemKind;
use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// Stable across restarts; the cluster knows the worker by it.
    pub worker_id: String,
    pub name: String,
    /// gRPC addresses (host:port) of any server nodes; the worker finds the leader.
    pub servers: Vec<String>,
    /// The REST base URL agents call (ROOST_API_URL / PAPERCLIP_API_URL).
    pub api_url: String,
    /// A worker join token (`roost worker token create`): needed only for the first start, when
    /// it is exchanged once for the worker's credential (`credential_file`).
    pub join_token: String,
    /// Where the worker keeps its credential (0600); default
    /// `<work_dir>/.roost-worker-credential`. Made at the first start.
    pub credential_file: Option<PathBuf>,
    pub slots: u32,
    pub labels: BTreeMap<String, String>,
    /// Where the worker keeps its files; agent processes run in per-task workspaces under it
    /// (`<work_dir>/workspaces/<agent>/<task>`, or the agent's `adapterConfig.cwd`).
    pub work_dir: PathBuf,
    /// Hours a workspace may sit unused before a run's start removes it; 0 keeps them all.
    pub workspace_retention_hours: u64,
    /// Where full run logs are kept (`<run id>.log`); default `<work_dir>/.roost-logs`.
    pub log_dir: Option<PathBuf>,
    /// Seconds between SIGTERM and SIGKILL when a run is stopped.
    pub grace_sec: u64,
    /// Seconds a stopping worker (SIGTERM, SIGINT) lets its agents finish and reports their
    /// results before it exits: agents still running near the end are stopped (SIGTERM, then
    /// SIGKILL) and reported `cancelled`. 1 to [`MAX_SHUTDOWN_GRACE_SECS`].
    pub shutdown_grace_secs: u64,
    /// Fraction of the lease after which a worker that cannot renew stops its agents, before
    /// the cluster can declare it lost.
    pub self_fence_fraction: f64,
    /// Write each agent's replicated memory into its home before a run and save its edits
    /// after (through `api_url`, with the run's key). Off only where no REST API serves.
    pub agent_memory: bool,
    /// TLS to the servers: with `ca_file` (the cluster CA) the worker connects with TLS and
    /// checks the servers against it; `cert_file` and `key_file` are the worker's certificate
    /// (`roost cert issue worker`), presented to the server.
    pub tls: WorkerTls,
    /// Prices per model (`[prices."<model>"]`), to cost a CLI run whose runtime reports tokens
    /// but no cost (Codex). A runtime's own cost (Claude Code's) is used as reported.
    pub prices: BTreeMap<String, Price>,
}

/// One model's price: US dollars per million tokens of each kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens not read from the cache.
    pub input: f64,
    /// Input tokens read from the cache.
    pub cached_input: f64,
    pub output: f64,
}

/// `[tls]` of a worker's config.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerTls {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl WorkerTls {
    /// tonic's TLS settings from the files (read again at each connection, so a renewed
    /// certificate is used from the next reconnect on); `None` without `ca_file`.
    pub fn client_config(&self) -> Result<Option<ClientTlsConfig>, crate::Error> {
        let Some(ca) = &self.ca_file else {
            return Ok(None);
        };
        let pem = |path: &PathBuf, setting: &str, kind| {
            roost_tls::read_checked_pem(path, setting, kind)
                .map_err(|e| crate::Error::Config(e.to_string()))
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem(
            ca,
            "tls.ca_file",
            PemKind::Certificates,
        )?));
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(
                    pem(cert, "tls.cert_file", PemKind::Certificates)?,
                    pem(key, "tls.key_file", PemKind::PrivateKey)?,
                ));
            }
            (None, None) => {}
            _ => {
                return Err(crate::Error::Config(
                    "tls.cert_file and tls.key_file go together".into(),
                ))
            }
        }
        Ok(Some(tls))
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            worker_id: String::new(),
            name: String::new(),
            servers: vec!["127.0.0.1:7481".into()],
            api_url: "http://127.0.0.1:7480".into(),
            join_token: String::new(),
            credential_file: None,
            slots: 4,
            labels: BTreeMap::new(),
            work_dir: PathBuf::from("."),
            workspace_retention_hours: 168,
            log_dir: None,
            grace_sec: 10,
            shutdown_grace_secs: DEFAULT_SHUTDOWN_GRACE_SECS,
            self_fence_fraction: 0.6,
            agent_memory: true,
            tls: WorkerTls::default(),
            prices: BTreeMap::new(),
        }
    }
}

/// How long a stopping worker lets its agents finish, unless configured.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 10;
/// The longest `shutdown_grace_secs`: supervisors kill a process that takes much longer
/// (Kubernetes after 30 s by default, systemd after 90 s), and a typo must not mean an hour.
pub const MAX_SHUTDOWN_GRACE_SECS: u64 = 600;

/// Refuses a shutdown grace outside 1..=[`MAX_SHUTDOWN_GRACE_SECS`] seconds, naming `setting`.
pub fn check_shutdown_grace(setting: &str, secs: u64) -> Result<(), String> {
    if (1..=MAX_SHUTDOWN_GRACE_SECS).contains(&secs) {
        return Ok(());
    }
    Err(format!(
        "{setting} = {secs}: must be 1 to {MAX_SHUTDOWN_GRACE_SECS} seconds (how long a \
         stopping process lets running work finish before it stops it and exits)"
    ))
}

/// The credential file's name in the work dir when `credential_file` is not set.
pub const CREDENTIAL_FILE: &str = ".roost-worker-credential";

impl WorkerConfig {
    pub fn credential_file(&self) -> PathBuf {
        self.credential_file
            .clone()
            .unwrap_or_else(|| self.work_dir.join(CREDENTIAL_FILE))
    }

    pub fn shutdown_grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.shutdown_grace_secs)
    }

    pub fn log_dir(&self) -> PathBuf {
        self.log_dir
            .clone()
            .unwrap_or_else(|| self.work_dir.join(".roost-logs"))
    }

    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |m: &str| Err(crate::Error::Config(m.into()));
        if self.worker_id.is_empty() {
            return bad("worker_id is required");
        }
        if self.join_token.is_empty() && !self.credential_file().exists() {
            return Err(crate::Error::Config(format!(
                "join_token is required for the worker's first start ({} holds no credential \
                 yet)",
                self.credential_file().display()
            )));
        }
        if self.servers.is_empty() {
            return bad("name at least one server");
        }
        if self.slots == 0 {
            return bad("slots must be at least 1");
        }
        check_shutdown_grace("shutdown_grace_secs", self.shutdown_grace_secs)
            .map_err(crate::Error::Config)?;
        if !(0.1..=0.9).contains(&self.self_fence_fraction) {
            return bad("self_fence_fraction must be between 0.1 and 0.9");
        }
        for (model, p) in &self.prices {
            if ![p.input, p.cached_input, p.output]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0)
            {
                return Err(crate::Error::Config(format!(
                    "prices.\"{model}\": prices are US dollars per million tokens, 0 or more"
                )));
            }
        }
        if self.tls.ca_file.is_some() && self.tls.cert_file.is_none() {
            return bad(
                "tls.ca_file needs tls.cert_file and tls.key_file: a cluster with TLS admits a \
                 worker only with a worker certificate of its CA (`roost cert issue worker \
                 --name <name>`)",
            );
        }
        if self.tls.ca_file.is_none() && self.tls.cert_file.is_some() {
            return bad(
                "tls.cert_file needs tls.ca_file (the cluster CA the servers are checked against)",
            );
        }
        // Unreadable or malformed files are reported now, naming the file and the setting.
        self.tls.client_config()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_grace_defaults_to_ten_seconds_and_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = WorkerConfig {
            worker_id: "w".into(),
            join_token: "t".into(),
            work_dir: dir.path().to_path_buf(),
            ..WorkerConfig::default()
        };
        assert_eq!(config.shutdown_grace(), std::time::Duration::from_secs(10));
        assert!(config.validate().is_ok());
        for bad in [0, MAX_SHUTDOWN_GRACE_SECS + 1] {
            let config = WorkerConfig {
                shutdown_grace_secs: bad,
                ..config.clone()
            };
            let err = config.validate().expect_err("out of bounds").to_string();
            assert!(err.contains("shutdown_grace_secs"), "{err}");
        }
    }

    #[test]
    fn prices_are_read_per_model_and_unknown_keys_refused() {
        let text = r#"
            worker_id = "w"
            [prices."gpt-5-codex"]
            input = 1.25
            cached_input = 0.125
            output = 10.0
        "#;
        let config: WorkerConfig = toml::from_str(text).expect("prices");
        assert_eq!(
            config.prices["gpt-5-codex"],
            Price {
                input: 1.25,
                cached_input: 0.125,
                output: 10.0
            }
        );
        let typo = text.replace("cached_input", "cache_input");
        assert!(toml::from_str::<WorkerConfig>(&typo).is_err());
        let negative = WorkerConfig {
            join_token: "t".into(),
            prices: [(
                "m".to_string(),
                Price {
                    output: -1.0,
                    ..Price::default()
                },
            )]
            .into(),
            ..config
        };
        let err = negative.validate().expect_err("negative").to_string();
        assert!(err.contains("prices.\"m\""), "{err}");
    }
}
