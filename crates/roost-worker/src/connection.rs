//! The worker's connection with the cluster: dial any server, follow redirects to the leader,
//! register, renew its lease, run assignments, report results until the cluster acknowledges them
//! (across broken connections and leader changes), and fence itself when it cannot renew its
//! lease.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roost_core::RunStatus;
use roost_proto::v1::{
    server_message, worker_message, Assignment, LeaseRenewal, Register, RunFinished, RunLog,
    RunStarted, RunUsage, WorkerMessage,
};
use roost_proto::ProtoEnum;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::adapter::{self, UsageCell};
use crate::config::WorkerConfig;
use crate::dial::{connect, redial_pause, silence_limit, spread};
use crate::runlog::RunLog as LogFile;

struct Shared {
    running: HashMap<String, oneshot::Sender<&'static str>>,
    /// Usage of runs still going, reported with every renewal.
    usage: HashMap<String, UsageCell>,
    outbox: Option<mpsc::Sender<WorkerMessage>>,
    /// Messages not yet handed to a connection: sent before the connection's next renewal (the
    /// outbox was full) or on the next connection.
    unsent: Vec<WorkerMessage>,
    /// Results of ended runs the cluster has not acknowledged, by run id: sent again until it
    /// does, since a result handed to a connection can still be lost (the connection broke, or the
    /// node lost its leadership before committing it).
    unacknowledged: HashMap<String, Unacknowledged>,
    /// Runs this process has started, so an assignment sent again after the run ended is not
    /// run a second time.
    started: RecentRuns,
    last_ack: Instant,
    lease_ttl: Duration,
    /// How often to renew: `Registered`'s interval, then each `LeaseRenewed`'s (a leader
    /// stretches it as its fleet grows).
    renew_every: Duration,
    /// The worker is stopping: assignments are refused (reported `cancelled`), not run.
    draining: bool,
    /// Assignments refused while draining.
    refused: usize,
    /// Run tasks that have not yet queued their result.
    tasks: usize,
}

struct Unacknowledged {
    result: WorkerMessage,
    ended_at: Instant,
    /// None: not handed to any connection yet.
    sent_at: Option<Instant>,
}

/// How long a worker whose registration was refused (its credential revoked, its id taken)
/// waits before it asks again.
const REFUSED_BACKOFF: Duration = Duration::from_secs(5);

/// Outbox slots live log chunks leave free, so a chatty agent cannot crowd out results.
const LOG_HEADROOM: usize = 256;
/// Started runs remembered; far more than a worker's slots times its runs per lease.
const STARTED_REMEMBERED: usize = 4096;

/// A bounded set of run ids, oldest forgotten first.
#[derive(Default)]
struct RecentRuns {
    order: VecDeque<String>,
    ids: HashSet<String>,
}

impl RecentRuns {
    /// False if `run_id` was seen already.
    fn insert(&mut self, run_id: &str) -> bool {
        if !self.ids.insert(run_id.to_string()) {
            return false;
        }
        self.order.push_back(run_id.to_string());
        if self.order.len() > STARTED_REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

type State = Arc<Mutex<Shared>>;

fn lock(s: &State) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

fn message(body: worker_message::Body) -> WorkerMessage {
    WorkerMessage { body: Some(body) }
}

/// Sends now if a connection is open, else keeps the message for the next connection.
fn deliver(state: &State, m: WorkerMessage) {
    queue(&mut lock(state), m);
}

fn queue(s: &mut Shared, m: WorkerMessage) {
    let sent = s
        .outbox
        .as_ref()
        .is_some_and(|o| o.try_send(m.clone()).is_ok());
    if !sent {
        s.unsent.push(m);
    }
}

/// Keeps `result` until it is acknowledged and sends it now if the outbox has room; if not,
/// the next renewal sends it first.
fn hold_result(s: &mut Shared, run_id: &str, result: WorkerMessage) {
    if s.unacknowledged.len() >= STARTED_REMEMBERED {
        // A cluster that never acknowledges (an old server): forget the oldest.
        let oldest = s
            .unacknowledged
            .iter()
            .min_by_key(|(_, u)| u.ended_at)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            warn!(run_id = %id, "result never acknowledged: forgotten");
            s.unacknowledged.remove(&id);
        }
    }
    let sent = s
        .outbox
        .as_ref()
        .is_some_and(|o| o.try_send(result.clone()).is_ok());
    let now = Instant::now();
    s.unacknowledged.insert(
        run_id.to_string(),
        Unacknowledged {
            result,
            ended_at: now,
            sent_at: sent.then_some(now),
        },
    );
}

fn acknowledge(state: &State, run_id: &str) {
    lock(state).unacknowledged.remove(run_id);
}

/// A connection is open: everything held back goes out first, then the connection takes new
/// messages. Unacknowledged results are all sent again; the cluster acknowledges a copy of
/// one it has already.
fn on_registered(state: &State, tx: &mpsc::Sender<WorkerMessage>, lease_ttl: Duration) {
    let mut s = lock(state);
    s.last_ack = Instant::now();
    s.lease_ttl = lease_ttl;
    for m in std::mem::take(&mut s.unsent) {
        let _ = tx.try_send(m);
    }
    let now = Instant::now();
    for u in s.unacknowledged.values_mut() {
        u.sent_at = tx.try_send(u.result.clone()).is_ok().then_some(now);
    }
    s.outbox = Some(tx.clone());
}

fn new_state() -> State {
    Arc::new(Mutex::new(Shared {
        running: HashMap::new(),
        usage: HashMap::new(),
        outbox: None,
        unsent: Vec::new(),
        unacknowledged: HashMap::new(),
        started: RecentRuns::default(),
        last_ack: Instant::now(),
        lease_ttl: Duration::from_secs(5),
        renew_every: Duration::from_secs(1),
        draining: false,
        refused: 0,
        tasks: 0,
    }))
}

/// How far a worker is asked to stop ([`run_until`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Keep working.
    Running,
    /// Take no new runs, let running agents finish, stop those still running shortly before
    /// `by`, report every result, and return by `by`.
    Drain { by: Instant },
    /// Stop every agent now (a second signal): SIGTERM, SIGKILL a second later; report what
    /// can be reported within [`NOW_WINDOW`].
    Now,
}

/// How a worker's stop went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stopped {
    /// Runs that ended on their own while the worker drained.
    pub finished: usize,
    /// Runs stopped because the grace ran out or a second signal came (reported `cancelled`).
    pub cut_off: usize,
    /// Assignments that arrived while draining, reported `cancelled` without starting.
    pub refused: usize,
    /// Results the cluster had not acknowledged when the worker returned: those runs end when
    /// the worker's lease does (`lost`, retried once).
    pub unreported: usize,
}

impl Stopped {
    /// Nothing was cut off and every result reached the cluster.
    pub fn clean(&self) -> bool {
        self.cut_off == 0 && self.unreported == 0
    }
}

/// How long a forced stop ([`Stop::Now`]) waits for agents to die and results to be
/// acknowledged: past SIGKILL (a second after SIGTERM, `adapter/child.rs`), not much more.
pub const NOW_WINDOW: Duration = Duration::from_millis(1500);
/// At most this much of the grace is kept back to stop the agents still running and report
/// their results (SIGTERM, SIGKILL a second later, one round trip).
const CUT_RESERVE: Duration = Duration::from_secs(2);
/// How often a draining worker looks at its runs.
const DRAIN_POLL: Duration = Duration::from_millis(20);

/// A task that must not outlive its owner: a connection's renewal task kept the worker's
/// stream to the server open after the connection was dropped, and the server's shutdown waited
/// for that stream (`roost dev` stalled for the whole shutdown grace).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the worker until `shutdown` completes, then stops it as [`Stop::Drain`] does within
/// `config.shutdown_grace_secs`.
pub async fn run(
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<Stopped, crate::Error> {
    let grace = config.shutdown_grace();
    let (stop, stop_rx) = tokio::sync::watch::channel(Stop::Running);
    let worker = run_until(config, stop_rx);
    tokio::pin!(worker);
    tokio::select! {
        result = &mut worker => return result,
        () = shutdown => {}
    }
    let _ = stop.send(Stop::Drain {
        by: Instant::now() + grace,
    });
    worker.await
}

/// Runs the worker until `stop` leaves [`Stop::Running`] (or its sender is dropped: stop
/// now), then stops as asked and returns how that went.
pub async fn run_until(
    config: WorkerConfig,
    mut stop: tokio::sync::watch::Receiver<Stop>,
) -> Result<Stopped, crate::Error> {
    config.validate()?;
    crate::adapter::trust::write_bundle(&config)?;
    let path = config.credential_file();
    let (credential, new) = crate::credential::load_or_create(&path)?;
    if new {
        info!(file = %path.display(), "made this worker's credential; the join token is exchanged for it at the first registration");
    }
    let state = new_state();
    let _connections = AbortOnDrop(tokio::spawn(connection_loop(
        config.clone(),
        credential,
        state.clone(),
    )));
    let _fence = AbortOnDrop(tokio::spawn(self_fence(
        config.self_fence_fraction,
        state.clone(),
    )));
    let first = match stop.wait_for(|s| *s != Stop::Running).await {
        Ok(s) => *s,
        Err(_) => Stop::Now,
    };
    let stopped = drain(&state, first, &mut stop).await;
    if stopped.clean() {
        info!(
            finished = stopped.finished,
            refused = stopped.refused,
            "worker stopped"
        );
    } else {
        warn!(
            finished = stopped.finished,
            cut_off = stopped.cut_off,
            unreported = stopped.unreported,
            "worker stopped; runs were cut off or their results not acknowledged"
        );
    }
    Ok(stopped)
}

/// Waits one poll, or less when the stop asked changes; true when a forced stop
/// ([`Stop::Now`]) is asked. A dropped sender is no longer listened to.
async fn poll_stop(signals: &mut Option<&mut tokio::sync::watch::Receiver<Stop>>) -> bool {
    let Some(stop) = signals.as_mut() else {
        tokio::time::sleep(DRAIN_POLL).await;
        return false;
    };
    tokio::select! {
        () = tokio::time::sleep(DRAIN_POLL) => false,
        changed = stop.changed() => {
            if changed.is_err() {
                *signals = None;
                return false;
            }
            *stop.borrow() == Stop::Now
        }
    }
}

/// The worker's way out: no new runs; running agents finish until shortly before the
/// deadline, then are stopped; results are sent (the connection stays open) until acknowledged
/// or the deadline.
async fn drain(
    state: &State,
    first: Stop,
    stop: &mut tokio::sync::watch::Receiver<Stop>,
) -> Stopped {
    let now = Instant::now();
    let mut by = match first {
        Stop::Drain { by } => by,
        _ => now + NOW_WINDOW,
    };
    let running = {
        let mut s = lock(state);
        s.draining = true;
        s.running.len()
    };
    info!(
        running,
        grace_ms = by.saturating_duration_since(now).as_millis() as u64,
        "stopping: taking no new runs; running agents may finish within the grace"
    );
    let cut_at = by - (by.saturating_duration_since(now) / 2).min(CUT_RESERVE);
    let mut forced = first == Stop::Now;
    let mut signals = Some(stop);
    while !forced && lock(state).tasks > 0 && Instant::now() < cut_at {
        forced = poll_stop(&mut signals).await;
    }
    let cut_off = stop_all(state, crate::adapter::SHUTTING_DOWN);
    if cut_off > 0 {
        warn!(
            cut_off,
            "stopping the agents still running (SIGTERM, then SIGKILL)"
        );
    }
    loop {
        if forced {
            by = by.min(Instant::now() + NOW_WINDOW);
        }
        let (tasks, unacknowledged) = {
            let s = lock(state);
            (s.tasks, s.unacknowledged.len())
        };
        if (tasks == 0 && unacknowledged == 0) || Instant::now() >= by {
            break;
        }
        if forced {
            tokio::time::sleep(DRAIN_POLL).await;
        } else if poll_stop(&mut signals).await {
            forced = true;
            // A second signal: whatever is still stopping is killed at once.
            stop_all(state, crate::adapter::SHUTTING_DOWN);
        }
    }
    let s = lock(state);
    Stopped {
        finished: running.saturating_sub(cut_off),
        cut_off,
        refused: s.refused,
        unreported: s.unacknowledged.len() + s.tasks,
    }
}

fn stop_all(state: &State, why: &'static str) -> usize {
    let stops: Vec<_> = lock(state).running.drain().collect();
    let n = stops.len();
    for (_, stop) in stops {
        let _ = stop.send(why);
    }
    n
}

/// Stops every agent once renewals have failed for longer than `fraction` of the lease, so a
/// cut-off worker stops working before the cluster hands its tasks to someone else.
async fn self_fence(fraction: f64, state: State) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (silent, limit) = {
            let s = lock(&state);
            (s.last_ack.elapsed(), s.lease_ttl.mul_f64(fraction))
        };
        if silent > limit {
            let n = stop_all(&state, "self_fenced");
            if n > 0 {
                warn!(
                    stopped = n,
                    silent_ms = silent.as_millis() as u64,
                    "lease not renewed: stopped every agent"
                );
            }
        }
    }
}

async fn connection_loop(config: WorkerConfig, credential: String, state: State) {
    let mut next = 0usize;
    let mut redirect: Option<String> = None;
    let mut failed_dials = 0u32;
    loop {
        let addr = redirect.take().unwrap_or_else(|| {
            next += 1;
            config.servers[(next - 1) % config.servers.len()].clone()
        });
        let ended = connection(&addr, &config, &credential, &state).await;
        lock(&state).outbox = None;
        redirect = ended.redirect;
        failed_dials = if ended.registered {
            0
        } else {
            failed_dials.saturating_add(1)
        };
        if redirect.is_none() {
            tokio::time::sleep(redial_pause(failed_dials, spread())).await;
        }
    }
}

/// How a connection ended.
#[derive(Default)]
struct Ended {
    /// The leader's address, when the server named one.
    redirect: Option<String>,
    /// The cluster had accepted the registration: the connection worked until it ended.
    registered: bool,
}

/// One connection, until it ends.
async fn connection(addr: &str, config: &WorkerConfig, credential: &str, state: &State) -> Ended {
    let Some(mut client) = connect(addr, config).await else {
        return Ended::default();
    };
    let (tx, rx) = mpsc::channel(1024);
    let (running, unacknowledged) = {
        let s = lock(state);
        let running: Vec<String> = s.running.keys().cloned().collect();
        let unacknowledged: Vec<String> = s.unacknowledged.keys().cloned().collect();
        (running, unacknowledged)
    };
    let register = Register {
        worker_id: config.worker_id.clone(),
        name: if config.name.is_empty() {
            config.worker_id.clone()
        } else {
            config.name.clone()
        },
        join_token: config.join_token.clone(),
        adapters: adapter::ADAPTERS.iter().map(|a| a.to_proto()).collect(),
        labels: config.labels.clone().into_iter().collect(),
        slots: config.slots,
        version: env!("CARGO_PKG_VERSION").into(),
        running_run_ids: running,
        unacknowledged_run_ids: unacknowledged,
        worker_credential: credential.to_string(),
    };
    if tx
        .send(message(worker_message::Body::Register(register)))
        .await
        .is_err()
    {
        return Ended::default();
    }
    let silence = || {
        let s = lock(state);
        silence_limit(s.renew_every, s.lease_ttl, config.self_fence_fraction)
    };
    // The answer to a registration follows a few commits (the credential, the runs it
    // reports), which an election can hold up: bounded by the lease, not by the silence.
    let lease = lock(state).lease_ttl;
    let attached = tokio::time::timeout(
        lease,
        client.attach(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
    .await;
    let Ok(attached) = attached else {
        warn!(
            addr,
            "the server did not answer the registration; dialing again"
        );
        return Ended::default();
    };
    let mut inbound = match attached {
        Ok(r) => r.into_inner(),
        Err(e) if e.code() == tonic::Code::Unimplemented => {
            // A server of another release: the worker protocol changed (`Worker.Attach`).
            warn!(
                addr,
                worker_version = env!("CARGO_PKG_VERSION"),
                "the server does not speak this worker's protocol; run workers and servers of the same release"
            );
            tokio::time::sleep(REFUSED_BACKOFF).await;
            return Ended::default();
        }
        Err(e) => {
            // A refusal names what to do (a revoked credential, an id bound to another one);
            // the message is the server's and carries no secret. Asking again at once would
            // only be refused again: it waits a while first.
            warn!(addr, code = ?e.code(), error = %e.message(), "the cluster refused the connection");
            if matches!(
                e.code(),
                tonic::Code::Unauthenticated
                    | tonic::Code::PermissionDenied
                    | tonic::Code::InvalidArgument
            ) {
                tokio::time::sleep(REFUSED_BACKOFF).await;
            }
            return Ended::default();
        }
    };
    let mut renewal = None;
    let redirect = loop {
        // A server that says nothing (it acknowledges every renewal) is cut off without a
        // word: given up, so the worker reaches the leader another way (`dial.rs`).
        let limit = silence();
        let Ok(next) = tokio::time::timeout(limit, inbound.message()).await else {
            warn!(
                addr,
                silent_ms = limit.as_millis() as u64,
                "the server went silent; dialing again"
            );
            break None;
        };
        let Ok(Some(m)) = next else {
            break None;
        };
        match m.body {
            Some(server_message::Body::Registered(r)) => {
                info!(addr, node_id = r.node_id, "registered");
                on_registered(state, &tx, Duration::from_millis(r.lease_ttl_ms));
                lock(state).renew_every = renew_interval(r.renew_interval_ms);
                renewal = Some(AbortOnDrop(tokio::spawn(renew(tx.clone(), state.clone()))));
            }
            Some(server_message::Body::LeaseRenewed(r)) => {
                let mut s = lock(state);
                s.last_ack = Instant::now();
                // 0: a server that names no terms; the registration's stand.
                if r.lease_ttl_ms > 0 {
                    s.lease_ttl = Duration::from_millis(r.lease_ttl_ms);
                }
                if r.renew_interval_ms > 0 {
                    s.renew_every = renew_interval(r.renew_interval_ms);
                }
            }
            Some(server_message::Body::RunFinishedAck(a)) => acknowledge(state, &a.run_id),
            Some(server_message::Body::Assignment(a)) => start(a, config, state),
            Some(server_message::Body::Cancel(c)) => {
                if let Some(stop) = lock(state).running.remove(&c.run_id) {
                    let _ = stop.send("cancelled");
                }
            }
            Some(server_message::Body::Redirect(r)) => {
                info!(addr, to = %r.leader_grpc_addr, reason = %r.message, "sent on by the server");
                break Some(r.leader_grpc_addr).filter(|a| !a.is_empty());
            }
            None => {}
        }
    };
    Ended {
        redirect,
        registered: renewal.is_some(),
    }
}

/// A server's renewal interval, floored so that a bad one cannot make a busy loop.
fn renew_interval(ms: u64) -> Duration {
    Duration::from_millis(ms.max(50))
}

async fn renew(tx: mpsc::Sender<WorkerMessage>, state: State) {
    for seq in 1.. {
        let every = lock(&state).renew_every;
        tokio::time::sleep(every).await;
        if renew_once(&tx, &state, seq).await.is_err() {
            return;
        }
    }
}

/// One renewal, after every message that did not fit in the outbox and every result
/// unacknowledged for half a lease: the cluster must never see a renewal without a run
/// before that run's result (it would send the run again).
async fn renew_once(
    tx: &mpsc::Sender<WorkerMessage>,
    state: &State,
    seq: u64,
) -> Result<(), mpsc::error::SendError<WorkerMessage>> {
    let (unsent, due) = {
        let mut s = lock(state);
        let resend_after = s.lease_ttl / 2;
        let due: Vec<(String, WorkerMessage)> = s
            .unacknowledged
            .iter()
            .filter(|(_, u)| u.sent_at.is_none_or(|t| t.elapsed() >= resend_after))
            .map(|(id, u)| (id.clone(), u.result.clone()))
            .collect();
        (std::mem::take(&mut s.unsent), due)
    };
    for m in unsent {
        tx.send(m).await?;
    }
    for (run_id, result) in due {
        tx.send(result).await?;
        if let Some(u) = lock(state).unacknowledged.get_mut(&run_id) {
            u.sent_at = Some(Instant::now());
        }
    }
    let (running, unacknowledged, usage) = {
        let s = lock(state);
        let usage: Vec<RunUsage> = s
            .usage
            .iter()
            .map(|(run_id, cell)| RunUsage {
                run_id: run_id.clone(),
                ..cell.lock().map(|u| u.clone()).unwrap_or_default()
            })
            .filter(|u| u.input_tokens + u.output_tokens + u.cost_micro_usd > 0)
            .collect();
        let unacknowledged = s.unacknowledged.keys().cloned().collect();
        (s.running.keys().cloned().collect(), unacknowledged, usage)
    };
    tx.send(message(worker_message::Body::LeaseRenewal(LeaseRenewal {
        seq,
        running_run_ids: running,
        usage,
        unacknowledged_run_ids: unacknowledged,
    })))
    .await
}

/// Live log chunks go to the leader while a connection is open; otherwise they are dropped (the
/// file has them, and the run's end carries the tail).
fn live_sink(state: &State, run_id: &str) -> crate::runlog::LiveSink {
    let (state, run_id) = (state.clone(), run_id.to_string());
    Box::new(move |offset, data| {
        let outbox = lock(&state).outbox.clone();
        if let Some(o) = outbox {
            let chunk = RunLog {
                run_id: run_id.clone(),
                offset,
                data,
            };
            if o.capacity() > LOG_HEADROOM {
                let _ = o.try_send(message(worker_message::Body::RunLog(chunk)));
            }
        }
    })
}

fn start(a: Assignment, config: &WorkerConfig, state: &State) {
    let (stop_tx, stop_rx) = oneshot::channel();
    {
        let mut s = lock(state);
        if s.running.contains_key(&a.run_id) || !s.started.insert(&a.run_id) {
            // Sent again: already running, or already ran (its result is on the way).
            return;
        }
        if s.draining {
            // A stopping worker starts nothing: the run ends now, through the result path
            // every run takes, rather than waiting for the worker's lease to run out.
            s.refused += 1;
            let refused = RunFinished {
                run_id: a.run_id.clone(),
                status: RunStatus::Cancelled.to_proto(),
                error: "the worker was shutting down; the run did not start".into(),
                ..Default::default()
            };
            hold_result(
                &mut s,
                &a.run_id,
                message(worker_message::Body::RunFinished(refused)),
            );
            return;
        }
        s.running.insert(a.run_id.clone(), stop_tx);
        s.tasks += 1;
    }
    deliver(
        state,
        message(worker_message::Body::RunStarted(RunStarted {
            run_id: a.run_id.clone(),
        })),
    );
    let usage = UsageCell::default();
    lock(state).usage.insert(a.run_id.clone(), usage.clone());
    let (config, state) = (config.clone(), state.clone());
    tokio::spawn(async move {
        info!(run_id = %a.run_id, agent = %a.agent_name, adapter = ?adapter::adapter_type(&a).ok(), "run started");
        let log = LogFile::open(&config.log_dir(), &a.run_id, live_sink(&state, &a.run_id));
        let mut run = adapter::Run {
            assignment: &a,
            config: &config,
            stop: stop_rx,
            log,
            usage: usage.clone(),
            memory: None,
            workspace: config.work_dir.clone(),
        };
        let ended = adapter::run(&mut run).await;
        info!(run_id = %a.run_id, status = %ended.status, "run ended");
        let final_usage = RunUsage {
            run_id: a.run_id.clone(),
            ..usage.lock().map(|u| u.clone()).unwrap_or_default()
        };
        let finished = RunFinished {
            run_id: a.run_id.clone(),
            status: ended.status.to_proto(),
            exit_code: ended.exit_code,
            error: ended.error,
            usage: Some(final_usage),
            session_id: ended.session_id.unwrap_or_default(),
            session_reset: ended.session_reset,
            log_tail: run.log.tail(),
            log_bytes: run.log.bytes(),
            summary: ended.summary.unwrap_or_default(),
            workspace_path: run.workspace.display().to_string(),
        };
        // One critical section: no renewal can leave the run out before its result is
        // queued ahead of that renewal.
        let mut s = lock(&state);
        s.running.remove(&a.run_id);
        s.usage.remove(&a.run_id);
        s.tasks = s.tasks.saturating_sub(1);
        hold_result(
            &mut s,
            &a.run_id,
            message(worker_message::Body::RunFinished(finished)),
        );
    });
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
