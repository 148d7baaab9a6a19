//! A server node's configuration (TOML, unknown keys refused).

use std::path::PathBuf;

use roost_raft::RaftTiming;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// This node's Raft id, unique in the cluster.
    pub node_id: u64,
    pub data_dir: PathBuf,
    /// Where to listen for the REST API and dashboard.
    pub http_listen: String,
    /// Where to listen for gRPC: clients and workers.
    pub grpc_listen: String,
    /// Where to listen for the other nodes (the Raft service and forwarded requests, only). With
    /// TLS, only a certificate from the cluster CA that names a node is served here.
    pub peer_listen: String,
    /// Addresses other nodes and clients use to reach this one (default: the listen addresses).
    pub advertise_http: Option<String>,
    pub advertise_grpc: Option<String>,
    pub advertise_peer: Option<String>,
    /// Form a single-node cluster on first start if this node was never part of one (ignored
    /// when `initial_members` is set).
    pub bootstrap: bool,
    /// The voters of a new cluster. The member with the lowest id forms the cluster on its
    /// first start; the others wait to be contacted. Leave empty to join with `roost cluster
    /// add-node` instead.
    pub initial_members: Vec<MemberConfig>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Worker threads of the node's async runtime (default: one per CPU). Where nodes share a
    /// machine, give each its share of the CPUs: three nodes on 2 cores served 10% more writes
    /// with one thread each than with two, which woke each other across cores for every
    /// handoff of a write (BENCHMARKS.md).
    pub runtime_threads: Option<usize>,
    pub raft: RaftTiming,
    pub workers: crate::workers::WorkerConfig,
    /// Rate limits, timeouts and connection caps of the listeners (`limits.rs`).
    pub limits: crate::limits::LimitsConfig,
    /// TLS for the REST and gRPC listeners and for connections to peers (`tls.rs`).
    pub tls: TlsConfig,
    /// Embeddings for hybrid memory search (`recall/`); none by default.
    pub recall: crate::recall::RecallConfig,
    /// Serve plaintext on a non-loopback address (refused otherwise): for a network that is
    /// already private and encrypted. A warning is logged at every start.
    pub insecure_plaintext: bool,
    /// Seconds a stopping node (SIGTERM, SIGINT) has to finish the requests in flight, hand
    /// its leadership over and stop Raft before it exits (`Server::shutdown`). 1 to
    /// [`MAX_SHUTDOWN_GRACE_SECS`].
    pub shutdown_grace_secs: u64,
}

/// How long a stopping node may take, unless configured.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 10;
/// The longest `shutdown_grace_secs`: supervisors kill a process that takes much longer
/// (Kubernetes after 30 s by default, systemd after 90 s), and a typo must not mean an hour.
pub const MAX_SHUTDOWN_GRACE_SECS: u64 = 600;

impl ServerConfig {
    pub fn shutdown_grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.shutdown_grace_secs)
    }

    /// Refuses a `shutdown_grace_secs` outside 1..=[`MAX_SHUTDOWN_GRACE_SECS`].
    pub fn validate_shutdown_grace(&self) -> Result<(), String> {
        if (1..=MAX_SHUTDOWN_GRACE_SECS).contains(&self.shutdown_grace_secs) {
            return Ok(());
        }
        Err(format!(
            "shutdown_grace_secs = {}: must be 1 to {MAX_SHUTDOWN_GRACE_SECS} seconds (how \
             long a stopping node lets requests in flight finish before it exits)",
            self.shutdown_grace_secs
        ))
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            node_id: 1,
            data_dir: PathBuf::from("roost-data"),
            http_listen: "127.0.0.1:7480".into(),
            grpc_listen: "127.0.0.1:7481".into(),
            peer_listen: "127.0.0.1:7482".into(),
            advertise_http: None,
            advertise_grpc: None,
            advertise_peer: None,
            bootstrap: true,
            initial_members: Vec::new(),
            max_body_bytes: 1024 * 1024,
            runtime_threads: None,
            raft: RaftTiming::default(),
            workers: crate::workers::WorkerConfig::default(),
            limits: crate::limits::LimitsConfig::default(),
            tls: TlsConfig::default(),
            recall: crate::recall::RecallConfig::default(),
            insecure_plaintext: false,
            shutdown_grace_secs: DEFAULT_SHUTDOWN_GRACE_SECS,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberConfig {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    /// The member's `peer_listen` (as the others reach it).
    pub peer_addr: String,
}

/// `[tls]`: PEM files used by every listener of this node. With `cert_file` and `key_file` the
/// REST API is HTTPS and gRPC is TLS; `ca_file` is the cluster CA (`roost cert init`): the peer
/// listener serves only certificates it signed that name a node, the node presents its own
/// certificate to peers, and a client or worker that presents a certificate must present one it
/// signed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl TlsConfig {
    /// Whether the listeners serve TLS (both files named; `validate` refuses one without the other).
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some() && self.key_file.is_some()
    }

    /// Refuses a half-configured `[tls]`.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => Err("tls.cert_file is set but tls.key_file is not".into()),
            (None, Some(_)) => Err("tls.key_file is set but tls.cert_file is not".into()),
            (None, None) if self.ca_file.is_some() => Err(
                "tls.ca_file is set but tls.cert_file and tls.key_file are not: a node with TLS \
                 needs its own certificate (roost cert issue node)"
                    .into(),
            ),
            (Some(_), Some(_)) if self.ca_file.is_none() => Err(
                "tls.ca_file is required with tls.cert_file: nodes check each other's \
                 certificates against the cluster CA (roost cert init)"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}
