//! The service layer shared by REST and gRPC: authenticate, check, propose, read.
//!
//! Writes become [`Envelope`]s stamped here (time, fresh ids, the caller as actor) and go through
//! Raft; the state machine has the final word. Reads wait on a read barrier first, so a read
//! sees every write acknowledged before it started.

mod activity;
mod admin;
mod agent_revisions;
mod approvals;
mod attachments;
mod budgets;
mod cluster;
mod credentials;
mod documents;
mod events;
mod home;
mod interactions;
mod issue_list;
mod issues;
mod labels;
mod memory;
mod paperclip;
mod projects;
mod routines;
mod run_logs;
mod runs;
mod skills;
mod upload_slots;
mod views;
mod wakes;
mod workers;

use roost_core::{Command, Envelope, Outcome, Timestamp};
use roost_raft::RaftNode;
use roost_store::StateReader;

pub use activity::AuditReport;
pub use admin::{default_prefix, NewAgent};
pub use approvals::NewApproval;
pub use attachments::{AttachmentContent, NewAttachment};
pub use budgets::{
    monthly_budget_cents, parse_action, AgentSpend, BudgetOverview, CostEventRequest, CostSummary,
    NewBudgetPolicy, PolicyStatus,
};
pub use cluster::NewMember;
pub use credentials::{CredentialView, JoinTokenLimits};
pub use documents::{DocumentPut, Saved};
pub use events::{EventStream, StreamItem, KEEP_ALIVE};
pub use interactions::Asked;
pub use issues::{HeartbeatContext, IssueFilter};
pub use memory::MemoryScope;
pub use run_logs::{LogChunk, LogStream};
pub use views::RunView;
pub use wakes::{blocked_by, WakeFilter, WakeView, WakeupRequest, WakeupResult};
pub use workers::{WorkerView, WORKER_JOIN_PREFIX};

use crate::auth::{self, Caller};
use crate::error::ApiError;
use crate::live_logs::LiveLogs;

#[derive(Clone)]
pub struct Api {
    node: RaftNode,
    live_logs: LiveLogs,
    rate_limiter: crate::rate_limit::RateLimiter,
    metrics: crate::metrics::Metrics,
    /// Embeddings for hybrid memory search (`recall/`); `None`: lexical only.
    recall: Option<std::sync::Arc<crate::recall::Embedder>>,
    /// True once the node stops: long-lived streams (events) end then, so a stop does not
    /// wait out its grace for them. Its own sender until `with_stop` gives the server's.
    stop: tokio::sync::watch::Receiver<bool>,
    _own_stop: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    /// The REST listener serves TLS: the dashboard's cookie is then `Secure`.
    https: bool,
    /// What the worker plane knows and the state does not (open sessions, leases); set once it
    /// exists, after the API (`workers/mod.rs`).
    worker_plane: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn WorkerPlane>>>,
    /// Uploads this node reads at once, and each caller's share (`upload_slots.rs`).
    uploads: upload_slots::UploadSlots,
}

/// The leader's in-memory view of its workers, for `/metrics` and the workers views.
pub(crate) trait WorkerPlane: Send + Sync {
    /// Workers with a connection open to this node.
    fn connected_count(&self) -> usize;
    /// Workers this node relays to the leader (it follows: `workers/relay.rs`).
    fn relayed_count(&self) -> usize;
    /// How long `worker_id`'s lease still runs, if this node holds it (it leads).
    fn lease_left(&self, worker_id: &str) -> Option<std::time::Duration>;
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) fn now() -> Timestamp {
    Timestamp(chrono::Utc::now().timestamp_millis())
}

impl Api {
    pub fn new(node: RaftNode) -> Self {
        let (own_stop, stop) = tokio::sync::watch::channel(false);
        Api {
            https: false,
            stop,
            _own_stop: std::sync::Arc::new(own_stop),
            node,
            live_logs: LiveLogs::default(),
            rate_limiter: crate::rate_limit::RateLimiter::off(),
            metrics: crate::metrics::Metrics::default(),
            recall: None,
            worker_plane: std::sync::Arc::default(),
            uploads: upload_slots::UploadSlots::new(
                attachments::UPLOADS_AT_ONCE,
                attachments::UPLOADS_AT_ONCE_PER_CALLER,
            ),
        }
    }

    /// Gives the API its node's worker plane (only the first is kept: a node has one).
    pub(crate) fn attach_worker_plane(&self, plane: std::sync::Arc<dyn WorkerPlane>) {
        let _ = self.worker_plane.set(plane);
    }

    pub(crate) fn worker_plane(&self) -> Option<&dyn WorkerPlane> {
        self.worker_plane.get().map(|p| p.as_ref())
    }

    /// This API with the server's stop signal (`lib.rs`).
    pub(crate) fn with_stop(mut self, stop: tokio::sync::watch::Receiver<bool>) -> Self {
        self.stop = stop;
        self
    }

    /// This API behind a TLS listener (`lib.rs`).
    pub(crate) fn with_https(mut self, https: bool) -> Self {
        self.https = https;
        self
    }

    /// Whether clients reach this node over TLS.
    pub(crate) fn https(&self) -> bool {
        self.https
    }

    /// The stop signal: true once the node stops.
    pub(crate) fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stop.clone()
    }

    /// This API with hybrid memory search over `recall`'s embeddings (`recall/`).
    pub(crate) fn with_recall(
        mut self,
        recall: Option<std::sync::Arc<crate::recall::Embedder>>,
    ) -> Self {
        self.recall = recall;
        self
    }

    /// The embeddings client, when `[recall]` names an endpoint.
    pub(crate) fn recall(&self) -> Option<&crate::recall::Embedder> {
        self.recall.as_deref()
    }

    /// This node's `/metrics` (`metrics.rs`).
    pub(crate) fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// This API with per-caller rate limits (`rate_limit.rs`).
    pub(crate) fn with_rate_limiter(mut self, limiter: crate::rate_limit::RateLimiter) -> Self {
        self.rate_limiter = limiter;
        self
    }

    /// Takes one request from the caller's credential's bucket (429 when it is empty); REST
    /// and gRPC call it right after authenticating.
    pub(crate) fn rate_limit(&self, caller: &Caller) -> Result<(), ApiError> {
        self.rate_limiter.check(caller)
    }

    pub fn node(&self) -> &RaftNode {
        &self.node
    }

    pub fn reader(&self) -> &StateReader {
        self.node.reader()
    }

    pub(crate) fn live_logs(&self) -> &LiveLogs {
        &self.live_logs
    }

    /// Resolves a bearer token (and run id) to a caller. A token this node does not know yet
    /// may have been created an instant ago through another node: before refusing it, the node
    /// catches up with the leader (a read barrier) and looks again.
    pub async fn authenticate(
        &self,
        token: Option<&str>,
        run_id: Option<&str>,
    ) -> Result<Caller, ApiError> {
        match auth::authenticate(self.reader(), token, run_id) {
            Err(ApiError::Unauthorized { .. }) if token.is_some() => {
                self.barrier().await?;
                auth::authenticate(self.reader(), token, run_id)
            }
            other => other,
        }
    }

    /// Proposes `command` as `caller` and waits for its committed outcome.
    pub(crate) async fn submit(
        &self,
        caller: &Caller,
        command: Command,
    ) -> Result<Outcome, ApiError> {
        // Out-of-range input is a 4xx here, before anything enters the log; apply checks again.
        roost_core::limits::check(&command)?;
        let envelope = Envelope {
            request_id: crate::request_id::current(),
            at: now(),
            actor: caller.actor.clone(),
            command,
            idempotency_key: caller.idempotency_key.clone(),
        };
        // A field no bound names (an id of megabytes) cannot make a big log entry either:
        // the node refuses a write past `roost_raft::MAX_WRITE_BYTES` before it proposes it.
        let command = envelope.command.name();
        let written = self.node.write(envelope).await?;
        // In the request's span (`rest/traced.rs`): the index finds the entry on every node.
        tracing::debug!(command, index = written.index, "committed");
        written.result.map_err(ApiError::Domain)
    }

    /// Waits until this node reflects every write acknowledged before the call.
    pub(crate) async fn barrier(&self) -> Result<(), ApiError> {
        self.node.linearizable_read().await.map_err(ApiError::from)
    }

    /// Whether this node can serve, check by check: its Raft core runs, it knows a leader, it
    /// has applied every committed write, and no background task was given up on (`health.rs`).
    pub async fn ready(&self, tasks: &crate::Supervisor) -> crate::Readiness {
        crate::health::readiness(&self.node, tasks).await
    }
}

/// Unwraps the outcome variant a command is known to produce. Another variant is a bug: its
/// kind is named, never its content (it may be another tenant's object).
macro_rules! expect_outcome {
    ($outcome:expr, $pattern:pat => $value:expr) => {
        match $outcome {
            $pattern => Ok($value),
            other => Err($crate::error::ApiError::internal(format!(
                "unexpected outcome of kind {}",
                other.kind()
            ))),
        }
    };
}
pub(crate) use expect_outcome;
