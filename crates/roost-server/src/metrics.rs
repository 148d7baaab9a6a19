//! Prometheus `/metrics` for this node, in the text format (0.0.4): Raft progress, the write
//! path, REST requests by route template, aggregate state gauges and the process.
//!
//! The route is unauthenticated (as `/readyz`), so nothing here names a tenant: labels are
//! route templates, methods, status classes and status names, never a company, agent or
//! issue. Each `Api` owns its `Metrics`; nothing is process-global, so test nodes sharing a
//! process report only their own traffic.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use roost_core::approval::ApprovalStatus;
use roost_core::{
    AgentStatus, IncidentKind, IncidentStatus, IssueStatus, RunStatus, State as RoostState,
    WakeReason, WakeStatus, WorkerStatus,
};
use roost_raft::{HistogramSnapshot, RaftNode};
use tokio::sync::watch;

use crate::api::Api;

/// The content type of the Prometheus text format that `prometheus_text::encode` writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The route label of a request no route matched (any path: the raw one is not a label, it
/// would let a client grow the series without bound).
const UNMATCHED: &str = "unmatched";

/// REST latency bucket bounds in seconds.
const REQUEST_SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// How long a scrape waits for the Raft core's commit index before leaving it out.
const COMMITTED_WITHIN: Duration = Duration::from_millis(500);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: String,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrpcLabels {
    method: String,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GrpcMethodLabels {
    method: String,
}

fn request_histogram() -> Histogram {
    Histogram::new(REQUEST_SECONDS.iter().copied())
}

struct Inner {
    /// What is counted as it happens; the rest is read at scrape time ([`Snapshot`]).
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    grpc_requests: Family<GrpcLabels, Counter>,
    grpc_latency: Family<GrpcMethodLabels, Histogram, fn() -> Histogram>,
    leader_changes: Counter,
    leases_expired: Counter,
    /// The node's data directory, whose files' sizes a scrape reports.
    data_dir: OnceLock<std::path::PathBuf>,
}

/// This node's metrics: a cheap `Clone` handle owned by its [`Api`].
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency: Family<RouteLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(request_histogram);
        let grpc_requests = Family::<GrpcLabels, Counter>::default();
        let grpc_latency: Family<GrpcMethodLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(request_histogram);
        let leader_changes = Counter::default();
        let leases_expired = Counter::default();
        let mut registry = Registry::default();
        registry.register(
            "roost_http_requests",
            "REST requests answered, by method, route template and status class",
            requests.clone(),
        );
        registry.register(
            "roost_http_request_duration_seconds",
            "Seconds from a REST request's arrival to its response's head, by route template",
            latency.clone(),
        );
        registry.register(
            "roost_grpc_requests",
            "gRPC calls served (client and peer listeners), by full method and status code \
             (grpc/metered.rs says how the code is read)",
            grpc_requests.clone(),
        );
        registry.register(
            "roost_grpc_request_duration_seconds",
            "Seconds from a gRPC call's arrival to its response's head, by full method",
            grpc_latency.clone(),
        );
        registry.register(
            "roost_worker_leases_expired",
            "Workers this node, while leading, declared lost because their lease expired",
            leases_expired.clone(),
        );
        registry.register(
            "roost_raft_leader_changes",
            "Leaders this node has seen elected since it started (each new term with a known \
             leader counts once)",
            leader_changes.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                requests,
                latency,
                grpc_requests,
                grpc_latency,
                leader_changes,
                leases_expired,
                data_dir: OnceLock::new(),
            }),
        }
    }
}

impl Metrics {
    fn record(&self, method: &'static str, route: String, status: StatusCode, took: Duration) {
        self.inner
            .latency
            .get_or_create(&RouteLabels {
                route: route.clone(),
            })
            .observe(took.as_secs_f64());
        self.inner
            .requests
            .get_or_create(&RequestLabels {
                method,
                route,
                code: status_class(status),
            })
            .inc();
    }

    /// Counts a worker declared lost at its lease's expiry (`workers/mod.rs`).
    pub(crate) fn lease_expired(&self) {
        self.inner.leases_expired.inc();
    }

    /// Reports the sizes of the Raft log and the state machine files under `dir` (`lib.rs`).
    pub(crate) fn watch_data_dir(&self, dir: std::path::PathBuf) {
        let _ = self.inner.data_dir.set(dir);
    }

    /// Counts one gRPC call (`grpc/metered.rs`).
    pub(crate) fn record_grpc(&self, method: String, code: &'static str, took: Duration) {
        self.inner
            .grpc_latency
            .get_or_create(&GrpcMethodLabels {
                method: method.clone(),
            })
            .observe(took.as_secs_f64());
        self.inner
            .grpc_requests
            .get_or_create(&GrpcLabels { method, code })
            .inc();
    }

    /// The text exposition: the live series, then `snapshot`'s.
    fn encode(&self, snapshot: Snapshot) -> Result<String, fmt::Error> {
        let mut body = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut body, &self.inner.registry)?;
        let mut scrape = Registry::default();
        scrape.register_collector(Box::new(snapshot));
        prometheus_client::encoding::prometheus_text::encode(&mut body, &scrape)?;
        Ok(body)
    }
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        // Any other token a client sends would be a new series each.
        _ => "other",
    }
}

fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

/// The middleware in front of every REST route (`rest/mod.rs`): counts each request under its
/// route template, as matched before the handler ran.
pub(crate) async fn track(State(api): State<Api>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    api.metrics()
        .record(method, route, response.status(), started.elapsed());
    response
}

/// `GET /metrics`.
pub(crate) async fn scrape(State(api): State<Api>) -> Response {
    let snapshot = Snapshot::gather(&api).await;
    match api.metrics().encode(snapshot) {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded",
        )
            .into_response(),
    }
}

/// Counts leaders as this node sees them elected, until `stop`; `lib.rs` runs it beside the
/// server. openraft's metrics hold only the current leader, so a change between two scrapes
/// would be missed if the scrape compared them.
pub(crate) async fn count_leader_changes(
    node: RaftNode,
    metrics: Metrics,
    mut stop: watch::Receiver<bool>,
) {
    let mut raft = node.leadership_watch();
    let mut last: Option<(u64, u64)> = None;
    loop {
        let seen = {
            // Term and leader both from the saved vote: `current_leader` may name the new
            // leader before the vote with its term is saved, which would count one change twice.
            let m = raft.borrow_and_update();
            let leader = m.vote.leader_id();
            m.vote
                .is_committed()
                .then(|| leader.voted_for().map(|id| (leader.get_term(), id)))
                .flatten()
        };
        if seen.is_some() && seen != last {
            metrics.inner.leader_changes.inc();
            last = seen;
        }
        tokio::select! {
            changed = raft.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = stop.wait_for(|stop| *stop) => return,
        }
    }
}

/// What a scrape reads of the node, the state and the process.
#[derive(Debug, Default)]
struct Snapshot {
    term: u64,
    last_log_index: u64,
    /// `None` when the Raft core did not answer in time.
    committed_index: Option<u64>,
    applied_index: u64,
    snapshot_index: u64,
    purged_index: u64,
    is_leader: bool,
    members: usize,
    voters: usize,
    write_latency: Option<HistogramSnapshot>,
    batch_sizes: Option<HistogramSnapshot>,
    apply_latency: Option<HistogramSnapshot>,
    snapshot_builds: Option<HistogramSnapshot>,
    /// Bytes of `raft-log.db` and of `state.db`, each with its WAL.
    log_bytes: Option<u64>,
    state_bytes: Option<u64>,
    state: StateCounts,
    connected_workers: Option<usize>,
    relayed_workers: Option<usize>,
    open_fds: Option<u64>,
    resident_bytes: Option<u64>,
}

#[derive(Debug, Default)]
struct StateCounts {
    issues: Vec<(&'static str, u64)>,
    runs: Vec<(&'static str, u64)>,
    agents: Vec<(&'static str, u64)>,
    workers: Vec<(&'static str, u64)>,
    wakes_queued: u64,
    /// Every wake recorded, by what became of it and by why it was asked.
    wakes: Vec<(&'static str, u64)>,
    wake_reasons: Vec<(&'static str, u64)>,
    /// Cents reserved by live runs, and spent this UTC month, over every company.
    reserved_cents: u64,
    spent_month_cents: u64,
    incidents_open: Vec<(&'static str, u64)>,
    approvals_pending: u64,
    /// Closed issues held in `state.db` only (`roost_core::issue_map`).
    issues_in_state_db_only: u64,
}

/// How many of `items` have each of `all`'s values, in `all`'s order (zeros too, so a series
/// does not vanish when its last member moves on).
fn by_status<T: Copy + PartialEq>(
    all: &[T],
    name: fn(T) -> &'static str,
    items: impl Iterator<Item = T>,
) -> Vec<(&'static str, u64)> {
    let mut counts = vec![0u64; all.len()];
    for item in items {
        if let Some(i) = all.iter().position(|a| *a == item) {
            counts[i] += 1;
        }
    }
    all.iter().map(|a| name(*a)).zip(counts).collect()
}

impl StateCounts {
    /// Under the state's read lock, once per scrape: issues, runs and wakes from the counts
    /// apply keeps (`roost_core::tally`), which grow with history; agents, workers, live runs
    /// and incidents by one pass each, which stay few.
    fn read(s: &RoostState) -> StateCounts {
        StateCounts {
            issues: s
                .issue_status_counts()
                .of_each(IssueStatus::ALL, IssueStatus::as_str),
            runs: s
                .run_status_counts()
                .of_each(RunStatus::ALL, RunStatus::as_str),
            agents: by_status(
                AgentStatus::ALL,
                AgentStatus::as_str,
                s.agents.values().map(|a| a.status),
            ),
            workers: by_status(
                WorkerStatus::ALL,
                WorkerStatus::as_str,
                s.workers.values().map(|w| w.status),
            ),
            wakes_queued: s.queued_wakes().count() as u64,
            wakes: s
                .wake_counts()
                .0
                .of_each(WakeStatus::ALL, WakeStatus::as_str),
            wake_reasons: s
                .wake_counts()
                .1
                .of_each(WakeReason::ALL, WakeReason::as_str),
            reserved_cents: s
                .live_runs()
                .fold(0u64, |sum, r| sum.saturating_add(r.reserved_cents)),
            // From the spend index apply keeps per (scope, month): no pass over cost events.
            spent_month_cents: {
                let now = crate::api::now();
                s.companies.keys().fold(0u64, |sum, c| {
                    sum.saturating_add(s.spent_in(
                        roost_core::BudgetScopeType::Company,
                        c,
                        roost_core::BudgetWindow::CalendarMonthUtc,
                        now,
                    ))
                })
            },
            incidents_open: by_status(
                IncidentKind::ALL,
                IncidentKind::as_str,
                s.budget_incidents
                    .values()
                    .filter(|i| i.status == IncidentStatus::Open)
                    .map(|i| i.kind),
            ),
            approvals_pending: s
                .approvals
                .approvals
                .values()
                .filter(|a| a.status == ApprovalStatus::Pending)
                .count() as u64,
            issues_in_state_db_only: s.issues.cold_len() as u64,
        }
    }
}

impl Snapshot {
    async fn gather(api: &Api) -> Snapshot {
        let node = api.node();
        let committed_index = match tokio::time::timeout(
            COMMITTED_WITHIN,
            node.raft()
                .with_raft_state(|st| st.committed.map_or(0, |l| l.index)),
        )
        .await
        {
            Ok(Ok(index)) => Some(index),
            _ => None,
        };
        let mut snapshot = Snapshot {
            committed_index,
            write_latency: Some(node.write_stats().latency_seconds()),
            batch_sizes: Some(node.write_stats().batch_sizes()),
            apply_latency: Some(api.reader().stats().apply_seconds()),
            snapshot_builds: Some(api.reader().stats().snapshot_build_seconds()),
            log_bytes: api
                .metrics()
                .inner
                .data_dir
                .get()
                .map(|d| file_bytes(d, "raft-log.db")),
            state_bytes: api
                .metrics()
                .inner
                .data_dir
                .get()
                .map(|d| file_bytes(d, "state.db")),
            state: api.reader().read(StateCounts::read),
            connected_workers: api.worker_plane().map(|p| p.connected_count()),
            relayed_workers: api.worker_plane().map(|p| p.relayed_count()),
            open_fds: open_fds(),
            resident_bytes: resident_bytes(),
            ..Snapshot::default()
        };
        let raft = node.raft().metrics();
        let m = raft.borrow();
        snapshot.term = m.current_term;
        snapshot.last_log_index = m.last_log_index.unwrap_or(0);
        snapshot.applied_index = m.last_applied.map_or(0, |l| l.index);
        snapshot.snapshot_index = m.snapshot.map_or(0, |l| l.index);
        snapshot.purged_index = m.purged.map_or(0, |l| l.index);
        snapshot.is_leader = m.current_leader == Some(node.id());
        let membership = m.membership_config.membership();
        snapshot.members = membership.nodes().count();
        snapshot.voters = membership.voter_ids().count();
        snapshot
    }
}

/// The bytes of SQLite file `name` in `dir` with its write-ahead log.
fn file_bytes(dir: &std::path::Path, name: &str) -> u64 {
    [name.to_string(), format!("{name}-wal")]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// Open file descriptors, from `/proc/self/fd` (Linux; `None` elsewhere).
fn open_fds() -> Option<u64> {
    // The count includes the descriptor reading the directory, as Prometheus's own
    // `process_open_fds` does.
    std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|dir| dir.count() as u64)
}

/// Resident memory, from `VmRSS` in `/proc/self/status` (Linux; `None` elsewhere).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue + fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), fmt::Error> {
    let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

fn gauges(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: &[(&'static str, u64)],
) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (value, count) in values {
        let labels = [(label, *value)];
        ConstGauge::new(*count).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn histogram(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &HistogramSnapshot,
) -> Result<(), fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), fmt::Error> {
        let e = &mut e;
        gauge(
            e,
            "roost_raft_term",
            "This node's current Raft term",
            self.term,
        )?;
        gauge(
            e,
            "roost_raft_last_log_index",
            "The index of the last entry in this node's log",
            self.last_log_index,
        )?;
        if let Some(committed) = self.committed_index {
            gauge(
                e,
                "roost_raft_committed_index",
                "The highest log index this node knows to be committed",
                committed,
            )?;
        }
        gauge(
            e,
            "roost_raft_applied_index",
            "The index of the last entry this node applied to its state",
            self.applied_index,
        )?;
        gauge(
            e,
            "roost_raft_snapshot_index",
            "The last log index in this node's latest snapshot (0: none)",
            self.snapshot_index,
        )?;
        gauge(
            e,
            "roost_raft_purged_index",
            "The last log index purged from this node's log (0: none)",
            self.purged_index,
        )?;
        gauge(
            e,
            "roost_raft_is_leader",
            "1 when this node is the Raft leader, else 0",
            u64::from(self.is_leader),
        )?;
        gauge(
            e,
            "roost_raft_members",
            "Members of the cluster's configuration as this node knows it",
            self.members as u64,
        )?;
        gauge(
            e,
            "roost_raft_voters",
            "Voting members of the cluster's configuration as this node knows it",
            self.voters as u64,
        )?;
        if let Some(h) = &self.write_latency {
            histogram(
                e,
                "roost_write_latency_seconds",
                "Seconds from a write's proposal on this node (the leader) to its applied result, \
                 for writes that committed",
                h,
            )?;
        }
        if let Some(h) = &self.batch_sizes {
            histogram(
                e,
                "roost_write_batch_size",
                "Writes carried by each log entry this node proposed (group commit; 1 when a \
                 write went alone)",
                h,
            )?;
        }
        if let Some(h) = &self.apply_latency {
            histogram(
                e,
                "roost_apply_duration_seconds",
                "Seconds each batch of committed entries took to apply on this node (rules, \
                 in-memory state and rows)",
                h,
            )?;
        }
        if let Some(h) = &self.snapshot_builds {
            histogram(
                e,
                "roost_snapshot_build_duration_seconds",
                "Seconds each snapshot this node built took; the count is the snapshots built",
                h,
            )?;
        }
        for (name, help, bytes) in [
            (
                "roost_raft_log_bytes",
                "Bytes of this node's Raft log file (raft-log.db and its WAL)",
                self.log_bytes,
            ),
            (
                "roost_state_bytes",
                "Bytes of this node's state machine file (state.db and its WAL)",
                self.state_bytes,
            ),
        ] {
            if let Some(bytes) = bytes {
                gauge(e, name, help, bytes)?;
            }
        }
        let s = &self.state;
        gauges(
            e,
            "roost_issues",
            "Issues in the replicated state, by status",
            "status",
            &s.issues,
        )?;
        gauges(
            e,
            "roost_runs",
            "Heartbeat runs in the replicated state, by status",
            "status",
            &s.runs,
        )?;
        gauges(
            e,
            "roost_agents",
            "Agents in the replicated state, by status",
            "status",
            &s.agents,
        )?;
        gauges(
            e,
            "roost_workers",
            "Workers known to the replicated state, by status",
            "status",
            &s.workers,
        )?;
        gauge(
            e,
            "roost_wakes_queued",
            "Wakes queued for a run",
            s.wakes_queued,
        )?;
        gauges(
            e,
            "roost_wakes",
            "Wakes recorded, by what became of them",
            "status",
            &s.wakes,
        )?;
        gauges(
            e,
            "roost_wakes_by_reason",
            "Wakes recorded, by why they were asked",
            "reason",
            &s.wake_reasons,
        )?;
        gauge(
            e,
            "roost_budget_reserved_cents",
            "Cents live runs hold against their budgets, over every company",
            s.reserved_cents,
        )?;
        gauge(
            e,
            "roost_spend_month_cents",
            "Cents spent this UTC month, over every company",
            s.spent_month_cents,
        )?;
        gauges(
            e,
            "roost_budget_incidents_open",
            "Open budget and wake-loop incidents, by kind",
            "kind",
            &s.incidents_open,
        )?;
        gauge(
            e,
            "roost_approvals_pending",
            "Approvals waiting for a decision",
            s.approvals_pending,
        )?;
        gauge(
            e,
            "roost_issues_in_state_db_only",
            "Closed issues this node holds in state.db only, read back when asked for",
            s.issues_in_state_db_only,
        )?;
        if let Some(connected) = self.connected_workers {
            gauge(
                e,
                "roost_workers_connected",
                "Workers whose connection this node holds, the leader: those that dialed it and \
                 those relayed by followers (0 on a follower)",
                connected as u64,
            )?;
        }
        if let Some(relayed) = self.relayed_workers {
            gauge(
                e,
                "roost_workers_relayed",
                "Workers that dialed this node and that it relays to the leader (0 on the leader)",
                relayed as u64,
            )?;
        }
        if let Some(fds) = self.open_fds {
            gauge(
                e,
                "roost_process_open_fds",
                "File descriptors this process has open",
                fds,
            )?;
        }
        if let Some(bytes) = self.resident_bytes {
            gauge(
                e,
                "roost_process_resident_memory_bytes",
                "Resident memory of this process, in bytes",
                bytes,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_status_keep_zeros_in_order() {
        let counts = by_status(
            RunStatus::ALL,
            RunStatus::as_str,
            [RunStatus::Running, RunStatus::Running, RunStatus::Lost].into_iter(),
        );
        assert_eq!(counts.len(), RunStatus::ALL.len());
        assert_eq!(counts[0], ("queued", 0));
        assert!(counts.contains(&("running", 2)));
        assert!(counts.contains(&("lost", 1)));
    }

    #[test]
    fn labels_are_bounded() {
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
        assert_eq!(status_class(StatusCode::NOT_FOUND), "4xx");
        assert_eq!(status_class(StatusCode::SERVICE_UNAVAILABLE), "5xx");
    }

    #[test]
    fn encodes_text_format() {
        let metrics = Metrics::default();
        metrics.record(
            "GET",
            "/api/issues/{id}".into(),
            StatusCode::OK,
            Duration::from_millis(2),
        );
        let body = metrics.encode(Snapshot::default()).unwrap();
        assert!(body.contains(
            "roost_http_requests_total{method=\"GET\",route=\"/api/issues/{id}\",code=\"2xx\"} 1"
        ));
        assert!(body.contains("# TYPE roost_raft_term gauge"));
        assert!(body.contains("roost_raft_leader_changes_total 0"));
    }
}
