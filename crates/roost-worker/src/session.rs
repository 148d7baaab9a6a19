//! The worker's session with the cluster: dial any server, follow redirects to the leader,
//! register, heartbeat, run assignments, report results until the cluster acknowledges them
//! (across broken sessions and leader changes), and fence itself when it cannot renew its
//! lease.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roost_proto::v1::worker_client::WorkerClient;
use roost_proto::v1::{
    server_message, worker_message, Assignment, Heartbeat, Register, RunFinished, RunLog,
    RunStarted, RunUsage, WorkerMessage,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::adapter::{self, UsageCell};
use crate::config::WorkerConfig;
use crate::runlog::RunLog as LogFile;

struct Shared {
    running: HashMap<String, oneshot::Sender<&'static str>>,
    /// Usage of runs still going, reported with every heartbeat.
    usage: HashMap<String, UsageCell>,
    outbox: Option<mpsc::Sender<WorkerMessage>>,
    /// Messages not yet handed to a session: sent before the session's next heartbeat (the
    /// outbox was full) or on the next session.
    unsent: Vec<WorkerMessage>,
    /// Results of ended runs the cluster has not acknowledged, by run id: sent again until it
    /// does, since a result handed to a session can still be lost (the session broke, or the
    /// node lost its leadership before committing it).
    unacknowledged: HashMap<String, Unacknowledged>,
    /// Runs this process has started, so an assignment sent again after the run ended is not
    /// run a second time.
    started: RecentRuns,
    last_ack: Instant,
    lease_ttl: Duration,
}

struct Unacknowledged {
    result: WorkerMessage,
    ended_at: Instant,
    /// None: not handed to any session yet.
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

/// Sends now if a session is open, else keeps the message for the next session.
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
/// the next heartbeat sends it first.
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

/// A session is open: everything held back goes out first, then the session takes new
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
    }))
}

/// Runs the worker until `shutdown` completes; stops its agents on the way out.
pub async fn run(
    config: WorkerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), crate::Error> {
    config.validate()?;
    crate::adapter::trust::write_bundle(&config)?;
    let path = config.credential_file();
    let (credential, new) = crate::credential::load_or_create(&path)?;
    if new {
        info!(file = %path.display(), "made this worker's credential; the join token is exchanged for it at the first registration");
    }
    let state = new_state();
    let sessions = tokio::spawn(session_loop(config.clone(), credential, state.clone()));
    let fence = tokio::spawn(self_fence(config.self_fence_fraction, state.clone()));
    shutdown.await;
    sessions.abort();
    fence.abort();
    stop_all(&state, "worker shutting down");
    Ok(())
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

async fn session_loop(config: WorkerConfig, credential: String, state: State) {
    let mut next = 0usize;
    let mut redirect: Option<String> = None;
    loop {
        let addr = redirect.take().unwrap_or_else(|| {
            next += 1;
            config.servers[(next - 1) % config.servers.len()].clone()
        });
        redirect = session(&addr, &config, &credential, &state).await;
        lock(&state).outbox = None;
        if redirect.is_none() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// A client for the server at `addr`: TLS with the cluster CA when `[tls]` names one.
async fn connect(
    addr: &str,
    config: &WorkerConfig,
) -> Option<WorkerClient<tonic::transport::Channel>> {
    let tls = match config.tls.client_config() {
        Ok(tls) => tls,
        Err(error) => {
            warn!(%error, "cannot read the TLS files");
            return None;
        }
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint =
        tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}")).ok()?;
    if let Some(tls) = tls {
        endpoint = match endpoint.tls_config(tls) {
            Ok(e) => e,
            Err(error) => {
                warn!(%error, addr, "TLS settings refused");
                return None;
            }
        };
    }
    match endpoint.connect().await {
        Ok(channel) => Some(WorkerClient::new(channel)),
        Err(error) => {
            tracing::debug!(%error, addr, "cannot connect");
            None
        }
    }
}

/// One session; returns the leader's address when redirected.
async fn session(
    addr: &str,
    config: &WorkerConfig,
    credential: &str,
    state: &State,
) -> Option<String> {
    let mut client = connect(addr, config).await?;
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
        adapters: adapter::ADAPTERS.map(String::from).to_vec(),
        labels: config.labels.clone().into_iter().collect(),
        slots: config.slots,
        version: env!("CARGO_PKG_VERSION").into(),
        running_run_ids: running,
        unacknowledged_run_ids: unacknowledged,
        worker_credential: credential.to_string(),
    };
    tx.send(message(worker_message::Body::Register(register)))
        .await
        .ok()?;
    let mut inbound = match client
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
    {
        Ok(r) => r.into_inner(),
        Err(e) => {
            // A refusal names what to do (a revoked credential, an id bound to another one);
            // the message is the server's and carries no secret. Asking again at once would
            // only be refused again: it waits a while first.
            warn!(addr, code = ?e.code(), error = %e.message(), "session refused");
            if matches!(
                e.code(),
                tonic::Code::Unauthenticated
                    | tonic::Code::PermissionDenied
                    | tonic::Code::InvalidArgument
            ) {
                tokio::time::sleep(REFUSED_BACKOFF).await;
            }
            return None;
        }
    };
    let mut heartbeat = None;
    let redirect = loop {
        let Ok(Some(m)) = inbound.message().await else {
            break None;
        };
        match m.body {
            Some(server_message::Body::Registered(r)) => {
                info!(addr, node_id = r.node_id, "registered");
                on_registered(state, &tx, Duration::from_millis(r.lease_ttl_ms));
                heartbeat = Some(tokio::spawn(beat(
                    tx.clone(),
                    state.clone(),
                    Duration::from_millis(r.heartbeat_interval_ms.max(50)),
                )));
            }
            Some(server_message::Body::HeartbeatAck(_)) => lock(state).last_ack = Instant::now(),
            Some(server_message::Body::RunFinishedAck(a)) => acknowledge(state, &a.run_id),
            Some(server_message::Body::Assignment(a)) => start(a, config, state),
            Some(server_message::Body::Cancel(c)) => {
                if let Some(stop) = lock(state).running.remove(&c.run_id) {
                    let _ = stop.send("cancelled");
                }
            }
            Some(server_message::Body::Redirect(r)) => {
                break Some(r.leader_grpc_addr).filter(|a| !a.is_empty())
            }
            None => {}
        }
    };
    if let Some(h) = heartbeat {
        h.abort();
    }
    redirect
}

async fn beat(tx: mpsc::Sender<WorkerMessage>, state: State, every: Duration) {
    for seq in 1.. {
        tokio::time::sleep(every).await;
        if beat_once(&tx, &state, seq).await.is_err() {
            return;
        }
    }
}

/// One heartbeat, after every message that did not fit in the outbox and every result
/// unacknowledged for half a lease: the cluster must never see a heartbeat without a run
/// before that run's result (it would send the run again).
async fn beat_once(
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
    tx.send(message(worker_message::Body::Heartbeat(Heartbeat {
        seq,
        running_run_ids: running,
        usage,
        unacknowledged_run_ids: unacknowledged,
    })))
    .await
}

/// Live log chunks go to the leader while a session is open; otherwise they are dropped (the
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
        s.running.insert(a.run_id.clone(), stop_tx);
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
        info!(run_id = %a.run_id, agent = %a.agent_name, adapter = %a.adapter_type, "run started");
        let log = LogFile::open(&config.log_dir(), &a.run_id, live_sink(&state, &a.run_id));
        let mut run = adapter::Run {
            assignment: &a,
            config: &config,
            stop: stop_rx,
            log,
            usage: usage.clone(),
        };
        let ended = adapter::run(&mut run).await;
        info!(run_id = %a.run_id, status = ended.status, "run ended");
        let final_usage = RunUsage {
            run_id: a.run_id.clone(),
            ..usage.lock().map(|u| u.clone()).unwrap_or_default()
        };
        let finished = RunFinished {
            run_id: a.run_id.clone(),
            status: ended.status.into(),
            exit_code: ended.exit_code,
            error: ended.error,
            usage: Some(final_usage),
            session_id: ended.session_id.unwrap_or_default(),
            session_reset: ended.session_reset,
            log_tail: run.log.tail(),
            log_bytes: run.log.bytes(),
            summary: ended.summary.unwrap_or_default(),
        };
        // One critical section: no heartbeat can leave the run out before its result is
        // queued ahead of that heartbeat.
        let mut s = lock(&state);
        s.running.remove(&a.run_id);
        s.usage.remove(&a.run_id);
        hold_result(
            &mut s,
            &a.run_id,
            message(worker_message::Body::RunFinished(finished)),
        );
    });
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
