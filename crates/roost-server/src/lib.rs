//! A Roost server node: Raft over the SQLite store, the REST API (axum) and the gRPC API
//! (tonic), wired together and run until told to stop.

pub mod api;
pub mod auth;
mod config;
mod dashboard;
mod error;
mod grpc;
mod health;
mod http_serve;
pub mod limits;
mod live_logs;
mod metrics;
mod rate_limit;
pub mod recall;
mod request_id;
mod rest;
mod supervise;
#[cfg(test)]
mod surface_tests;
#[cfg(test)]
mod test_state;
mod tls;
pub mod workers;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use roost_raft::{NetworkFaults, NodeInfo, RaftNode, RaftService};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

pub use api::Api;
pub use config::{
    MemberConfig, ServerConfig, TlsConfig, DEFAULT_SHUTDOWN_GRACE_SECS, MAX_SHUTDOWN_GRACE_SECS,
};
pub use error::ApiError;
pub use health::{Check, Readiness};
/// The REST API's request parsing, for the fuzz targets (crates/roost-fuzz); not an API.
#[doc(hidden)]
pub use rest::fuzzing as rest_fuzzing;
pub use supervise::{Policy, Supervisor, TaskFailure};

/// Where the node that forms a multi-node cluster writes its first admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";

/// Sockets bound by the caller (the binary or a test harness), so ports are never raced.
pub struct Listeners {
    /// The REST API.
    pub http: TcpListener,
    /// gRPC for clients and workers.
    pub grpc: TcpListener,
    /// gRPC for the other nodes: the Raft service only.
    pub peer: TcpListener,
}

impl Listeners {
    /// Binds the three listen addresses of `config`.
    pub async fn bind(config: &ServerConfig) -> std::io::Result<Listeners> {
        let bind = |addr: &str, setting: &'static str| {
            let addr = addr.to_string();
            async move {
                TcpListener::bind(&addr)
                    .await
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{setting} = {addr}: {e}")))
            }
        };
        Ok(Listeners {
            http: bind(&config.http_listen, "http_listen").await?,
            grpc: bind(&config.grpc_listen, "grpc_listen").await?,
            peer: bind(&config.peer_listen, "peer_listen").await?,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Raft(#[from] roost_raft::Error),
    #[error("io error: {0}")]
    Io(#[from] std::io::Error),
    #[error("{context}: {source}")]
    Api {
        context: &'static str,
        source: ApiError,
    },
    #[error("TLS: {0}")]
    Tls(#[from] roost_tls::Error),
    #[error("config: {0}")]
    Config(String),
    #[error("server task failed: {0}")]
    Task(String),
    #[error("the Raft core stopped: {reason}; restart the node (it resumes from its data)")]
    RaftStopped { reason: String },
    #[error("a background task failed for good ({0}); restart the node")]
    TaskFailed(TaskFailure),
}

impl From<TaskFailure> for Error {
    fn from(failure: TaskFailure) -> Self {
        Error::TaskFailed(failure)
    }
}

/// A running node. Stop it with [`Server::shutdown`].
pub struct Server {
    api: Api,
    http_addr: SocketAddr,
    grpc_addr: SocketAddr,
    peer_addr: SocketAddr,
    stop: watch::Sender<bool>,
    /// Stops the peer listener, after Raft: a stopping leader hands its leadership over through
    /// it (the candidate's vote request arrives there).
    stop_peers: watch::Sender<bool>,
    /// http, grpc, the worker plane (`kill` finds it at index 2), the step-down watch, the
    /// leader-change counter (`metrics.rs`).
    tasks: Vec<JoinHandle<Result<(), Error>>>,
    peers: JoinHandle<Result<(), Error>>,
    supervisor: Supervisor,
    shutdown_grace: Duration,
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

impl Server {
    pub async fn start(config: &ServerConfig, listeners: Listeners) -> Result<Server, Error> {
        Self::start_inner(config, listeners, NetworkFaults::default()).await
    }

    /// As [`Server::start`], with network faults the test harness can inject.
    #[cfg(feature = "test-util")]
    pub async fn start_with_faults(
        config: &ServerConfig,
        listeners: Listeners,
        faults: NetworkFaults,
    ) -> Result<Server, Error> {
        Self::start_inner(config, listeners, faults).await
    }

    async fn start_inner(
        config: &ServerConfig,
        listeners: Listeners,
        faults: NetworkFaults,
    ) -> Result<Server, Error> {
        config.tls.validate().map_err(Error::Config)?;
        let node_tls = tls::NodeTls::load(&config.tls)?;
        let http_addr = listeners.http.local_addr()?;
        let grpc_addr = listeners.grpc.local_addr()?;
        let peer_addr = listeners.peer.local_addr()?;
        let info = NodeInfo {
            peer_addr: config
                .advertise_peer
                .clone()
                .unwrap_or_else(|| peer_addr.to_string()),
            grpc_addr: config
                .advertise_grpc
                .clone()
                .unwrap_or_else(|| grpc_addr.to_string()),
            http_addr: config
                .advertise_http
                .clone()
                .unwrap_or_else(|| http_addr.to_string()),
        };
        let node = RaftNode::start_with_peer_tls(
            config.node_id,
            info,
            &config.data_dir,
            &config.raft,
            faults,
            node_tls.as_ref().map(|t| t.peer.clone()),
        )
        .await?;
        let recall = recall::Embedder::from_config(&config.recall).map_err(Error::Config)?;
        let (stop, stop_rx) = watch::channel(false);
        let api = Api::new(node.clone())
            .with_rate_limiter(config.limits.rate_limiter())
            .with_recall(recall)
            .with_stop(stop_rx.clone())
            .with_https(node_tls.is_some());
        api.metrics().watch_data_dir(config.data_dir.clone());
        let supervisor = Supervisor::new(Policy::default());

        let router = rest::router(api.clone(), config.max_body_bytes, supervisor.clone());
        let http_stop = stopped(stop_rx.clone());
        let http = match &node_tls {
            // TLS: the handshake happens in `tls.rs`; axum serves the finished connections.
            Some(t) => {
                let listener = tls::TlsListener {
                    incoming: tls::accept(
                        listeners.http,
                        t.rest.clone(),
                        tls::Admit::Anyone,
                        stop_rx.clone(),
                    ),
                    local_addr: http_addr,
                };
                let limits = config.limits.clone();
                supervisor.spawn_critical("http server", stop_rx.clone(), async move {
                    http_serve::serve(listener, router, &limits, http_stop)
                        .await
                        .map_err(Error::Io)
                })
            }
            None => {
                let limits = config.limits.clone();
                supervisor.spawn_critical("http server", stop_rx.clone(), async move {
                    http_serve::serve(listeners.http, router, &limits, http_stop)
                        .await
                        .map_err(Error::Io)
                })
            }
        };

        let (stop_peers, stop_peers_rx) = watch::channel(false);
        let raft_service = RaftService::server(node.clone(), stop_peers_rx.clone());
        let control_service = grpc::control_service(api.clone());
        let cluster_service = grpc::cluster_service(api.clone());
        let worker_plane = workers::Workers::new(
            api.clone(),
            config.workers.clone(),
            config.limits.grpc_max_concurrent_streams,
        );
        let worker_service = roost_proto::v1::worker_server::WorkerServer::new(
            workers::WorkerService::new(worker_plane.clone(), node_tls.is_some()),
        )
        .max_decoding_message_size(grpc::MAX_REQUEST_BYTES)
        .max_encoding_message_size(grpc::MAX_REPLY_BYTES);
        // Workers that followers relay, on the peer listener: with TLS only nodes reach it.
        let relayed_workers = roost_proto::v1::worker_server::WorkerServer::new(
            workers::WorkerService::relayed(worker_plane.clone()),
        )
        .max_decoding_message_size(grpc::MAX_REQUEST_BYTES)
        .max_encoding_message_size(grpc::MAX_REPLY_BYTES);
        let duties = supervisor.spawn_critical("worker plane", stop_rx.clone(), {
            let (stop, supervisor) = (stop_rx.clone(), supervisor.clone());
            async move {
                let agent_timer = workers::AgentTimer::new(workers::Clock::system());
                worker_plane.run(agent_timer, supervisor, stop).await;
                Ok(())
            }
        });
        let leader_changes = tokio::spawn({
            let (node, metrics) = (node.clone(), api.metrics().clone());
            let stop = stop_rx.clone();
            async move {
                metrics::count_leader_changes(node, metrics, stop).await;
                Ok(())
            }
        });
        let step_down = tokio::spawn(step_down_on_failure(
            supervisor.clone(),
            node.clone(),
            stop_rx.clone(),
        ));
        let watch_replication = tokio::spawn({
            let (node, stop) = (node.clone(), stop_rx.clone());
            async move {
                roost_raft::watch_replication(node, stop).await;
                Ok(())
            }
        });
        // The standard services (grpc/standard.rs), on the client listener only: health, kept
        // on what `/readyz` answers, and reflection.
        let (health_reporter, health_service) = grpc::standard::health_service().await;
        let health = tokio::spawn({
            let (api, tasks, stop) = (api.clone(), supervisor.clone(), stop_rx.clone());
            async move {
                grpc::standard::report_health(health_reporter, api, tasks, stop).await;
                Ok(())
            }
        });
        let (reflection_v1, reflection_v1alpha) = grpc::standard::reflection_services();
        let grpc_router = config
            .limits
            .grpc_server(api.metrics(), Some(config.node_id))
            .add_service(control_service)
            .add_service(cluster_service)
            .add_service(worker_service)
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha);
        let grpc = supervisor.spawn_critical(
            "grpc server",
            stop_rx.clone(),
            serve_grpc(
                "grpc server",
                grpc_router,
                listeners.grpc,
                node_tls
                    .as_ref()
                    .map(|t| (t.grpc.clone(), tls::Admit::Anyone)),
                config.limits.clone(),
                stop_rx.clone(),
            ),
        );
        // The Raft service has a listener of its own: with TLS, only nodes of this cluster are
        // served there, so no client can append entries, vote or forward a write as anyone. The
        // workers followers relay arrive there too (`workers/relay.rs`).
        let peer_router = config
            .limits
            .grpc_server(api.metrics(), None)
            .initial_stream_window_size(Some(workers::RELAY_STREAM_WINDOW))
            .initial_connection_window_size(Some(workers::RELAY_CONNECTION_WINDOW))
            .add_service(raft_service)
            .add_service(relayed_workers);
        let peers = supervisor.spawn_critical(
            "peer server",
            stop_peers_rx.clone(),
            serve_grpc(
                "peer server",
                peer_router,
                listeners.peer,
                node_tls
                    .as_ref()
                    .map(|t| (t.peer_server.clone(), tls::Admit::Nodes)),
                config.limits.clone(),
                stop_peers_rx,
            ),
        );

        let forms_cluster = match config.initial_members.iter().map(|m| m.id).min() {
            Some(lowest) => lowest == config.node_id,
            None => config.bootstrap,
        };
        if forms_cluster {
            let members = if config.initial_members.is_empty() {
                BTreeMap::from([(config.node_id, node.info().clone())])
            } else {
                config
                    .initial_members
                    .iter()
                    .map(|m| {
                        (
                            m.id,
                            NodeInfo {
                                grpc_addr: m.grpc_addr.clone(),
                                http_addr: m.http_addr.clone(),
                                peer_addr: m.peer_addr.clone(),
                            },
                        )
                    })
                    .collect()
            };
            let formed = node.init_cluster(members).await?;
            let leader = node
                .wait_for_leader(config.raft.election_timeout_max() * 10 + Duration::from_secs(5))
                .await?;
            if formed && !config.initial_members.is_empty() {
                // A new multi-node cluster gets its first admin token, kept beside the data.
                let path = config.data_dir.join(ADMIN_TOKEN_FILE);
                let (token, _) = auth::load_or_create_token_file(&path, auth::ADMIN_TOKEN_PREFIX)?;
                api.ensure_admin_token(&token, "cluster-admin")
                    .await
                    .map_err(|source| Error::Api {
                        context: "recording the first admin token",
                        source,
                    })?;
                info!(path = %path.display(), "wrote the cluster's first admin token");
            }
            info!(node_id = config.node_id, leader, %http_addr, %grpc_addr, %peer_addr, "node serving");
        } else {
            info!(node_id = config.node_id, %http_addr, %grpc_addr, %peer_addr, "node serving; waiting to be part of a cluster");
        }
        Ok(Server {
            api,
            http_addr,
            grpc_addr,
            peer_addr,
            stop,
            stop_peers,
            tasks: vec![
                http,
                grpc,
                duties,
                step_down,
                leader_changes,
                health,
                watch_replication,
            ],
            peers,
            supervisor,
            shutdown_grace: config.shutdown_grace(),
        })
    }

    /// The supervisor of this node's background tasks (`supervise.rs`).
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// Resolves when this node can no longer serve: a background task was given up on (the
    /// node has stopped Raft and reports not ready), or its Raft core stopped on its own. Its
    /// host should then shut it down and exit non-zero, so a supervisor restarts it.
    pub fn failed(&self) -> impl Future<Output = Error> + Send + 'static {
        let (supervisor, node) = (self.supervisor.clone(), self.api.node().clone());
        async move {
            tokio::select! {
                // First: giving up on a task stops Raft too, and the task is the cause.
                biased;
                failure = supervisor.tripped() => Error::TaskFailed(failure),
                reason = node.stopped() => Error::RaftStopped { reason },
            }
        }
    }

    pub fn api(&self) -> &Api {
        &self.api
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// Stops at once, as close to a crash as a process can do to itself: request tasks are
    /// aborted mid-flight and Raft stops. (State is safe: every commit was fsynced.) A test
    /// hook: a process is killed from outside.
    #[cfg(feature = "test-util")]
    pub async fn kill(self) {
        // Open worker connections would outlive aborted listeners inside this process (a real
        // crash closes their connections): let the worker plane close them, briefly, first.
        let _ = self.stop.send(true);
        if let Some(duties) = self.tasks.get(2) {
            let _ = tokio::time::timeout(Duration::from_millis(200), async {
                while !duties.is_finished() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
        }
        let _ = self.stop_peers.send(true);
        for task in &self.tasks {
            task.abort();
        }
        self.peers.abort();
        self.api.node().shutdown().await;
    }

    /// How long [`Server::shutdown`] may take (`shutdown_grace_secs`).
    pub fn shutdown_grace(&self) -> Duration {
        self.shutdown_grace
    }

    /// Stops within the node's `shutdown_grace_secs`, as [`Server::shutdown_by`] does.
    pub async fn shutdown(self) -> Result<(), Error> {
        let by = tokio::time::Instant::now() + self.shutdown_grace;
        self.shutdown_by(by).await
    }

    /// Stops by `by`: stops accepting requests and lets those in flight finish, hands the
    /// leadership over if this node leads (`roost-raft/src/handover.rs`), stops Raft and
    /// commits `state.db`, then closes the peer listener. Requests still open near `by` are
    /// closed: SIGTERM from systemd or Kubernetes expects an exit in bounded time.
    pub async fn shutdown_by(self, by: tokio::time::Instant) -> Result<(), Error> {
        let _ = self.stop.send(true);
        let node = self.api.node().clone();
        let started = tokio::time::Instant::now();
        let left = by.saturating_duration_since(started);
        // Kept back from the requests for the hand-over and Raft's stop.
        let reserve = (left / 2).min(HANDOVER_RESERVE);
        let requests_by = by - reserve;
        let mut first_error = None;
        for mut task in self.tasks {
            match tokio::time::timeout_at(requests_by, &mut task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => first_error = first_error.or(Some(e)),
                Ok(Err(e)) => first_error = first_error.or(Some(Error::Task(e.to_string()))),
                Err(_) => {
                    tracing::warn!(
                        grace_ms = left.as_millis() as u64,
                        "requests still open when the shutdown grace ran out: closing them"
                    );
                    task.abort();
                }
            }
        }
        // Nothing is proposed here from now on; the followers catch up and one of them leads.
        node.stop_proposing();
        let handover =
            (by.saturating_duration_since(tokio::time::Instant::now()) / 2).min(HANDOVER_MAX);
        if let Some(leader) = node.hand_over_leadership(handover).await {
            info!(
                node_id = node.id(),
                leader,
                ms = started.elapsed().as_millis() as u64,
                "handed leadership over"
            );
        }
        // Even a stop whose grace is spent gives Raft a moment: it commits `state.db` last.
        let raft_by = by.max(tokio::time::Instant::now() + RAFT_STOP_MIN);
        if tokio::time::timeout_at(raft_by, node.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("the Raft core did not stop within the shutdown grace");
        }
        let _ = self.stop_peers.send(true);
        let mut peers = self.peers;
        let peers_by = tokio::time::Instant::now() + Duration::from_millis(200);
        if tokio::time::timeout_at(
            peers_by.min(by).max(tokio::time::Instant::now()),
            &mut peers,
        )
        .await
        .is_err()
        {
            peers.abort();
        }
        info!(
            node_id = node.id(),
            ms = started.elapsed().as_millis() as u64,
            "node stopped"
        );
        first_error.map_or(Ok(()), Err)
    }
}

/// At most this much of a stopping node's grace is kept from the requests in flight for the
/// hand-over of its leadership and the stop of Raft (a hand-over takes one election round
/// trip, tens of milliseconds on a LAN).
const HANDOVER_RESERVE: Duration = Duration::from_secs(3);
/// The longest a hand-over may take; past it the node stops anyway and the others elect
/// after its lease (a follower that cannot catch up in this long is not coming).
const HANDOVER_MAX: Duration = Duration::from_secs(3);
/// The least time Raft's stop gets, even when the grace is spent.
const RAFT_STOP_MIN: Duration = Duration::from_millis(500);

/// Serves a gRPC router on `listener` until `stop`: over TLS (handshakes in `tls.rs`, then
/// `admit`) when `tls` is given, else plaintext with the listener limits of `limits.rs`.
async fn serve_grpc(
    name: &'static str,
    router: limits::GrpcRouter,
    listener: TcpListener,
    tls: Option<(std::sync::Arc<roost_tls::rustls::ServerConfig>, tls::Admit)>,
    limits: limits::LimitsConfig,
    stop: watch::Receiver<bool>,
) -> Result<(), Error> {
    let stopping = stopped(stop.clone());
    match tls {
        // TLS: the handshake (and TCP_NODELAY) happens in `tls.rs`.
        Some((config, admit)) => {
            let rx = tls::accept(listener, config, admit, stop);
            router
                .serve_with_incoming_shutdown(tls::incoming(rx), stopping)
                .await
        }
        None => {
            // gRPC answers in several HTTP/2 frames; without TCP_NODELAY, Nagle's algorithm
            // and delayed ACKs hold each small reply ~40 ms.
            let incoming = limits.grpc_incoming(listener);
            router
                .serve_with_incoming_shutdown(incoming, stopping)
                .await
        }
    }
    .map_err(|e| Error::Task(format!("{name}: {e}")))
}

/// How long a stopping node takes at most unless configured (`shutdown_grace_secs`).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(DEFAULT_SHUTDOWN_GRACE_SECS);

/// Runs a node until `shutdown` completes.
pub async fn run(
    config: ServerConfig,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let server = Server::start(&config, listeners).await?;
    tokio::select! {
        () = shutdown => server.shutdown().await,
        // A node whose Raft core died, or whose tasks were given up on, would serve nothing
        // for good: exit with an error, so a supervisor restarts it from its data. (openraft
        // 0.9 can stop its core when a leader steps down while it starts sending a snapshot.)
        error = server.failed() => {
            tracing::error!(%error, "exiting");
            let _ = server.shutdown().await;
            Err(error)
        }
    }
}

/// When the supervisor gives up on a task, stops Raft: a leader whose duties cannot run must
/// let another node lead (openraft 0.9 has no leadership transfer; a stopped core is silent, so
/// the others elect a new leader within an election timeout).
async fn step_down_on_failure(
    supervisor: Supervisor,
    node: RaftNode,
    stop: watch::Receiver<bool>,
) -> Result<(), Error> {
    tokio::select! {
        failure = supervisor.tripped() => {
            tracing::error!(
                %failure,
                "a background task failed for good: stopping Raft so another node leads; \
                 this node reports not ready"
            );
            node.shutdown().await;
        }
        () = stopped(stop) => {}
    }
    Ok(())
}
