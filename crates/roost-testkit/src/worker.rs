//! An in-process worker that speaks the real `roost.v1.Worker` protocol, for tests: it
//! registers, renews its lease (until told to stop), records assignments and cancels, and finishes
//! runs when the test says so. It follows redirects and reconnects like a real worker.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roost_core::{AdapterType, RunStatus};
use roost_proto::v1::worker_client::WorkerClient;
use roost_proto::v1::{
    server_message, worker_message, Assignment, LeaseRenewal, Register, RunFinished, RunStarted,
    RunUsage, WorkerMessage,
};
use roost_proto::ProtoEnum;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;

use crate::wait_for;

#[derive(Default)]
struct Inner {
    assignments: Mutex<Vec<Assignment>>,
    cancels: Mutex<Vec<String>>,
    running: Mutex<BTreeSet<String>>,
    /// Runs this worker has ever been given: an assignment sent again is not a new one.
    seen: Mutex<BTreeSet<String>>,
    outbox: Mutex<Option<mpsc::Sender<WorkerMessage>>>,
    /// The current connection's renewal task, which holds a sender of its stream too.
    renewal: Mutex<Option<JoinHandle<()>>>,
    /// Set by [`TestWorker::kill`]: the connection task may be past its last await when it is
    /// aborted, so what it hands out afterwards checks this.
    killed: AtomicBool,
    renewals_paused: AtomicBool,
    /// Cents each run has used so far, reported with every renewal.
    usage: Mutex<std::collections::BTreeMap<String, u64>>,
    connections: AtomicU64,
    /// The renewal interval and lease the cluster last named (`Registered`, then each
    /// `LeaseRenewed` that names them), in ms; the renewals follow the interval.
    renew_interval_ms: AtomicU64,
    lease_ttl_ms: AtomicU64,
    changed: Notify,
}

pub struct TestWorker {
    pub id: String,
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

fn usage_of(inner: &Inner, run_id: &str) -> Option<RunUsage> {
    let cents = *lock(&inner.usage).get(run_id)?;
    Some(RunUsage {
        run_id: run_id.to_string(),
        cost_micro_usd: cents * 10_000,
        ..Default::default()
    })
}

/// The worker credential a test worker `worker_id` joining with `join_token` keeps: the same
/// for the same pair (a restarted worker that kept its credential file), another for another
/// token (another machine claiming the id).
pub fn worker_credential(join_token: &str, worker_id: &str) -> String {
    let hash = roost_server::auth::hash_token(&format!("{join_token}/{worker_id}"));
    format!("{}{hash}", roost_server::auth::WORKER_CREDENTIAL_PREFIX)
}

fn body(b: worker_message::Body) -> WorkerMessage {
    WorkerMessage { body: Some(b) }
}

impl TestWorker {
    /// Connects to any of `grpc_addrs` (host:port) with `join_token`, offering the process
    /// adapter and `slots` slots; returns once the first connection is open.
    pub async fn connect(
        grpc_addrs: Vec<String>,
        join_token: &str,
        id: &str,
        slots: u32,
    ) -> anyhow::Result<TestWorker> {
        let inner = Arc::new(Inner::default());
        let task = tokio::spawn(connection_loop(
            grpc_addrs,
            join_token.to_string(),
            id.to_string(),
            slots,
            inner.clone(),
        ));
        let worker = TestWorker {
            id: id.to_string(),
            inner,
            task,
        };
        let inner = worker.inner.clone();
        wait_for(
            "the worker's first connection",
            Duration::from_secs(20),
            || {
                let inner = inner.clone();
                async move { (inner.connections.load(Ordering::SeqCst) > 0).then_some(()) }
            },
        )
        .await?;
        Ok(worker)
    }

    /// Stops sending renewals (the process is frozen or cut off); the connection stays open.
    pub fn pause_renewals(&self) {
        self.inner.renewals_paused.store(true, Ordering::SeqCst);
    }

    pub fn resume_renewals(&self) {
        self.inner.renewals_paused.store(false, Ordering::SeqCst);
    }

    pub fn assignments(&self) -> Vec<Assignment> {
        lock(&self.inner.assignments).clone()
    }

    pub fn cancels(&self) -> Vec<String> {
        lock(&self.inner.cancels).clone()
    }

    pub fn running(&self) -> Vec<String> {
        lock(&self.inner.running).iter().cloned().collect()
    }

    pub fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::SeqCst)
    }

    /// The renewal interval and lease (ms) the cluster last gave this worker.
    pub fn lease_terms(&self) -> (u64, u64) {
        (
            self.inner.renew_interval_ms.load(Ordering::SeqCst),
            self.inner.lease_ttl_ms.load(Ordering::SeqCst),
        )
    }

    /// Waits until the worker has received at least `n` assignments; returns them all.
    pub async fn wait_assignments(
        &self,
        n: usize,
        deadline: Duration,
    ) -> anyhow::Result<Vec<Assignment>> {
        wait_for(
            &format!("{n} assignments on worker {}", self.id),
            deadline,
            || async {
                let all = self.assignments();
                (all.len() >= n).then_some(all)
            },
        )
        .await
    }

    /// From the next renewal on, reports that `run_id` has used `cents` so far.
    pub fn set_usage_cents(&self, run_id: &str, cents: u64) {
        lock(&self.inner.usage).insert(run_id.to_string(), cents);
    }

    /// Reports a run finished with `status`, having cost `cents` in all.
    pub async fn finish_costing(
        &self,
        run_id: &str,
        status: RunStatus,
        cents: u64,
    ) -> anyhow::Result<()> {
        self.set_usage_cents(run_id, cents);
        self.finish(run_id, status).await
    }

    /// Reports a run finished with `status`, with the usage set for it.
    pub async fn finish(&self, run_id: &str, status: RunStatus) -> anyhow::Result<()> {
        let usage = usage_of(&self.inner, run_id);
        lock(&self.inner.running).remove(run_id);
        let message = body(worker_message::Body::RunFinished(RunFinished {
            run_id: run_id.into(),
            status: status.to_proto(),
            exit_code: Some(0),
            error: String::new(),
            usage,
            ..Default::default()
        }));
        let outbox = lock(&self.inner.outbox).clone();
        match outbox {
            Some(o) => o
                .send(message)
                .await
                .map_err(|_| anyhow::anyhow!("the worker connection is closed")),
            None => anyhow::bail!("the worker has no connection"),
        }
    }

    /// Stops the worker at once (like SIGKILL): it sends nothing more (what it had queued may
    /// still arrive) and its stream ends, as a killed process's connection closes.
    pub fn kill(&self) {
        self.inner.killed.store(true, Ordering::SeqCst);
        self.task.abort();
        // Aborting the connection task leaves the tasks and senders it handed out.
        if let Some(renewal) = lock(&self.inner.renewal).take() {
            renewal.abort();
        }
        lock(&self.inner.outbox).take();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for TestWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn connection_loop(
    addrs: Vec<String>,
    token: String,
    id: String,
    slots: u32,
    inner: Arc<Inner>,
) {
    let mut next = 0usize;
    let mut redirect: Option<String> = None;
    loop {
        let addr = redirect.take().unwrap_or_else(|| {
            next += 1;
            addrs[(next - 1) % addrs.len().max(1)].clone()
        });
        redirect = run_connection(&addr, &token, &id, slots, &inner).await;
        *lock(&inner.outbox) = None;
        if redirect.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One connection; returns the address to dial next if the server redirected.
async fn run_connection(
    addr: &str,
    token: &str,
    id: &str,
    slots: u32,
    inner: &Arc<Inner>,
) -> Option<String> {
    let mut client = WorkerClient::connect(format!("http://{addr}")).await.ok()?;
    let (tx, rx) = mpsc::channel(256);
    let running: Vec<String> = lock(&inner.running).iter().cloned().collect();
    let register = Register {
        worker_id: id.into(),
        name: id.into(),
        join_token: token.into(),
        adapters: vec![AdapterType::Process.to_proto()],
        labels: Default::default(),
        slots,
        version: "testkit".into(),
        running_run_ids: running,
        unacknowledged_run_ids: Vec::new(),
        worker_credential: worker_credential(token, id),
    };
    tx.send(body(worker_message::Body::Register(register)))
        .await
        .ok()?;
    let mut inbound = client
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .ok()?
        .into_inner();
    let result = loop {
        let message = match inbound.message().await {
            Ok(Some(m)) => m,
            _ => break None,
        };
        match message.body {
            Some(server_message::Body::Registered(r)) => {
                *lock(&inner.outbox) = Some(tx.clone());
                // Killed meanwhile: whichever of `kill` and this saw the other takes it back.
                if inner.killed.load(Ordering::SeqCst) {
                    lock(&inner.outbox).take();
                    break None;
                }
                inner.connections.fetch_add(1, Ordering::SeqCst);
                inner
                    .renew_interval_ms
                    .store(r.renew_interval_ms, Ordering::SeqCst);
                inner.lease_ttl_ms.store(r.lease_ttl_ms, Ordering::SeqCst);
                let renewals = tokio::spawn({
                    let (tx, inner) = (tx.clone(), inner.clone());
                    async move {
                        for seq in 1.. {
                            let every = inner.renew_interval_ms.load(Ordering::SeqCst).max(10);
                            tokio::time::sleep(Duration::from_millis(every)).await;
                            if inner.killed.load(Ordering::SeqCst) {
                                break;
                            }
                            if inner.renewals_paused.load(Ordering::SeqCst) {
                                continue;
                            }
                            let running = lock(&inner.running).iter().cloned().collect();
                            let usage = lock(&inner.running)
                                .iter()
                                .filter_map(|r| usage_of(&inner, r))
                                .collect();
                            let hb = body(worker_message::Body::LeaseRenewal(LeaseRenewal {
                                seq,
                                running_run_ids: running,
                                usage,
                                unacknowledged_run_ids: Vec::new(),
                            }));
                            if tx.send(hb).await.is_err() {
                                break;
                            }
                        }
                    }
                });
                if let Some(old) = lock(&inner.renewal).replace(renewals) {
                    old.abort();
                }
            }
            Some(server_message::Body::Assignment(a)) => {
                let run_id = a.run_id.clone();
                let fresh = lock(&inner.seen).insert(run_id.clone());
                if fresh {
                    lock(&inner.running).insert(run_id.clone());
                    lock(&inner.assignments).push(a);
                }
                let _ = tx
                    .send(body(worker_message::Body::RunStarted(RunStarted {
                        run_id,
                    })))
                    .await;
            }
            Some(server_message::Body::Cancel(c)) => {
                lock(&inner.running).remove(&c.run_id);
                lock(&inner.cancels).push(c.run_id);
            }
            // An empty address: this node is stopping and knows no leader; try the others.
            Some(server_message::Body::Redirect(r)) => {
                break Some(r.leader_grpc_addr).filter(|a| !a.is_empty())
            }
            Some(server_message::Body::LeaseRenewed(r)) => {
                if r.renew_interval_ms > 0 {
                    (inner.renew_interval_ms).store(r.renew_interval_ms, Ordering::SeqCst);
                }
                if r.lease_ttl_ms > 0 {
                    inner.lease_ttl_ms.store(r.lease_ttl_ms, Ordering::SeqCst);
                }
            }
            // This test worker sends each result once; the test drives what happens next.
            Some(server_message::Body::RunFinishedAck(_)) | None => {}
        }
        inner.changed.notify_waiters();
    };
    if let Some(h) = lock(&inner.renewal).take() {
        h.abort();
    }
    result
}
