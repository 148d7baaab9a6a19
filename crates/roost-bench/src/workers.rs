//! The leader's cost of many connected workers: a 3-node cluster of real
//! `roost server` processes, N simulated workers on the real `roost.v1.Worker` protocol
//! (register, follow a redirect, renew its lease at the interval the server gives,
//! start and finish the runs they are assigned), and what `/proc` says about the servers:
//! CPU over a window with every worker renewing its lease, resident memory per worker, and the
//! latency from a wake request to the assignment arriving at a worker.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roost_proto::v1::worker_client::WorkerClient;
use roost_proto::v1::{
    server_message, worker_message, AdapterType, LeaseRenewal, Register, RunFinished, RunStarted,
    RunStatus, WorkerMessage,
};
use roost_testkit::Http;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint};

use crate::procs::{self, cpu_between, mib, snapshot, CpuUse, ProcessCluster, Snapshot};
use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct WorkersArgs {
    /// Simulated workers; a comma-separated list measures each count on a fresh cluster
    #[arg(long, value_delimiter = ',', default_value = "2000")]
    workers: Vec<usize>,
    /// Workers connecting at once during the ramp
    #[arg(long, default_value_t = 200)]
    ramp: usize,
    /// Workers sharing one HTTP/2 connection per server (1: a TCP connection per worker, as
    /// real workers on their own machines have)
    #[arg(long, default_value_t = 1)]
    per_connection: usize,
    /// The servers the workers dial, each worker starting at its own: every node, or only the
    /// followers, which relay them to the leader (`roost-server/src/workers/relay.rs`)
    #[arg(long, value_enum, default_value_t = Dial::All)]
    dial: Dial,
    /// Seconds of CPU baseline on the idle cluster (no workers)
    #[arg(long, default_value_t = 10)]
    idle_sec: u64,
    /// Seconds of lease renewals after the ramp before measuring
    #[arg(long, default_value_t = 15)]
    warmup_sec: u64,
    /// Seconds over which CPU is measured with every worker renewing its lease
    #[arg(long, default_value_t = 30)]
    window_sec: u64,
    /// Wake-to-assignment samples (taken after the CPU window, workers still renewing their leases)
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Agents the wakes rotate over
    #[arg(long, default_value_t = 16)]
    agents: usize,
    /// Slots each simulated worker offers
    #[arg(long, default_value_t = 4)]
    slots: u32,
    /// How long a simulated worker holds a run before reporting it succeeded
    #[arg(long, default_value_t = 0)]
    hold_ms: u64,
    /// The roost binary [default: `roost` next to this executable]
    #[arg(long)]
    roost_bin: Option<PathBuf>,
    /// One JSON object with every result instead of text
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Dial {
    All,
    Followers,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn body(b: worker_message::Body) -> WorkerMessage {
    WorkerMessage { body: Some(b) }
}

/// What every simulated worker shares: configuration, counters, and the bench's hooks.
struct Sim {
    addrs: Vec<String>,
    join_token: String,
    slots: u32,
    hold: Duration,
    per_connection: usize,
    /// Sessions open and registered right now.
    registered: AtomicUsize,
    /// `Registered` replies ever received (more than the worker count means reconnects).
    connections: AtomicU64,
    redirects: AtomicU64,
    /// Failed dials and connections that ended without a redirect.
    failures: AtomicU64,
    renewals: AtomicU64,
    acks: AtomicU64,
    assignments: AtomicU64,
    cancels: AtomicU64,
    /// While set, lease renewal round trips (send to ack) are recorded.
    measuring: AtomicBool,
    ack_rtts_us: Mutex<Vec<u64>>,
    /// The bench waits for the next new run of an agent: agent id -> (run id, arrival).
    pending: Mutex<HashMap<String, oneshot::Sender<(String, Instant)>>>,
    seen_runs: Mutex<HashSet<String>>,
    /// Shared connections when `per_connection > 1`: (address, group) -> channel.
    channels: Mutex<HashMap<(String, usize), Channel>>,
}

impl Sim {
    async fn channel(&self, addr: &str, index: usize) -> Option<Channel> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .ok()?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5));
        if self.per_connection <= 1 {
            // Its own connection, closed when the connection ends (as a real worker's is).
            return endpoint.connect().await.ok();
        }
        let key = (addr.to_string(), index / self.per_connection);
        Some(
            lock(&self.channels)
                .entry(key)
                .or_insert_with(|| endpoint.connect_lazy())
                .clone(),
        )
    }
}

/// One simulated worker: connections until aborted, dialing node `index % 3` first.
async fn worker_loop(sim: Arc<Sim>, index: usize) {
    let id = format!("bench-w{index:05}");
    let running: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut redirect: Option<String> = None;
    let mut attempt = 0usize;
    loop {
        let addr = redirect.take().unwrap_or_else(|| {
            attempt += 1;
            sim.addrs[(index + attempt - 1) % sim.addrs.len()].clone()
        });
        match connection(&sim, index, &id, &addr, &running).await {
            Some(next) => {
                sim.redirects.fetch_add(1, Ordering::Relaxed);
                redirect = Some(next);
            }
            None => {
                sim.failures.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// One connection; returns the address to dial next if the server redirected.
async fn connection(
    sim: &Arc<Sim>,
    index: usize,
    id: &str,
    addr: &str,
    running: &Arc<Mutex<Vec<String>>>,
) -> Option<String> {
    let mut client = WorkerClient::new(sim.channel(addr, index).await?);
    let (tx, rx) = mpsc::channel::<WorkerMessage>(64);
    let register = Register {
        worker_id: id.into(),
        name: id.into(),
        join_token: sim.join_token.clone(),
        adapters: vec![AdapterType::Process as i32],
        slots: sim.slots,
        version: "roost-bench".into(),
        running_run_ids: lock(running).clone(),
        worker_credential: roost_testkit::worker_credential(&sim.join_token, id),
        ..Default::default()
    };
    tx.send(body(worker_message::Body::Register(register)))
        .await
        .ok()?;
    let mut inbound = client
        .attach(tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(
            rx,
        ))
        .await
        .ok()?
        .into_inner();
    let mut registered = false;
    let mut renewal = tokio::time::interval(Duration::from_secs(3600));
    let mut seq = 0u64;
    let mut last_sent: Option<(u64, Instant)> = None;
    let result = loop {
        tokio::select! {
            message = inbound.message() => {
                let Ok(Some(message)) = message else { break None };
                match message.body {
                    Some(server_message::Body::Registered(r)) => {
                        registered = true;
                        sim.registered.fetch_add(1, Ordering::Relaxed);
                        sim.connections.fetch_add(1, Ordering::Relaxed);
                        // A fleet started at random times: spread first renewals over one
                        // interval instead of sending them in the ramp's batches.
                        let period = Duration::from_millis(r.renew_interval_ms.max(10));
                        let spread = period * ((index * 7919) % 1000 + 1) as u32 / 1000;
                        renewal = tokio::time::interval_at(
                            tokio::time::Instant::now() + spread,
                            period,
                        );
                        renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    }
                    Some(server_message::Body::Assignment(a)) => {
                        let arrived = Instant::now();
                        sim.assignments.fetch_add(1, Ordering::Relaxed);
                        let run_id = a.run_id.clone();
                        let fresh = lock(&sim.seen_runs).insert(run_id.clone());
                        if fresh {
                            if let Some(waiter) = lock(&sim.pending).remove(&a.agent_id) {
                                let _ = waiter.send((run_id.clone(), arrived));
                            }
                            lock(running).push(run_id.clone());
                        } else if !lock(running).contains(&run_id) {
                            // Sent again for a run this worker already finished: ignore.
                            continue;
                        }
                        // `..Default::default()`: fields may be added to the protocol.
                        #[allow(clippy::needless_update)]
                        let started = RunStarted { run_id: run_id.clone(), ..Default::default() };
                        if tx.send(body(worker_message::Body::RunStarted(started))).await.is_err() {
                            break None;
                        }
                        if fresh {
                            let (tx, running, hold) = (tx.clone(), running.clone(), sim.hold);
                            let finish = async move {
                                if !hold.is_zero() {
                                    tokio::time::sleep(hold).await;
                                }
                                lock(&running).retain(|r| *r != run_id);
                                let finished = RunFinished {
                                    run_id,
                                    status: RunStatus::Succeeded as i32,
                                    exit_code: Some(0),
                                    ..Default::default()
                                };
                                let _ = tx.send(body(worker_message::Body::RunFinished(finished))).await;
                            };
                            if hold.is_zero() {
                                finish.await;
                            } else {
                                tokio::spawn(finish);
                            }
                        }
                    }
                    Some(server_message::Body::Cancel(c)) => {
                        sim.cancels.fetch_add(1, Ordering::Relaxed);
                        lock(running).retain(|r| *r != c.run_id);
                    }
                    // An empty address: lost, or the node stops; dial the others.
                    Some(server_message::Body::Redirect(r)) => {
                        break Some(r.leader_grpc_addr).filter(|a| !a.is_empty());
                    }
                    Some(server_message::Body::LeaseRenewed(ack)) => {
                        sim.acks.fetch_add(1, Ordering::Relaxed);
                        // The leader stretches the interval as the fleet grows; follow it, as
                        // `roost run-worker` does.
                        let period = Duration::from_millis(ack.renew_interval_ms.max(10));
                        if ack.renew_interval_ms > 0 && period != renewal.period() {
                            renewal = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                            renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        }
                        if let Some((s, at)) = last_sent {
                            if s == ack.seq && sim.measuring.load(Ordering::Relaxed) {
                                lock(&sim.ack_rtts_us).push(us(at.elapsed()));
                            }
                        }
                    }
                    // Simulated runs report once; the measurement ends at the first ack.
                    Some(server_message::Body::RunFinishedAck(_)) | None => {}
                }
            }
            _ = renewal.tick(), if registered => {
                seq += 1;
                let hb = LeaseRenewal { seq, running_run_ids: lock(running).clone(), ..Default::default() };
                if tx.send(body(worker_message::Body::LeaseRenewal(hb))).await.is_err() {
                    break None;
                }
                last_sent = Some((seq, Instant::now()));
                sim.renewals.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    if registered {
        sim.registered.fetch_sub(1, Ordering::Relaxed);
    }
    result
}

pub async fn run(args: WorkersArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.workers.is_empty() && args.per_connection > 0 && args.ramp > 0,
        "--workers, --per-connection and --ramp must be positive"
    );
    let binary = procs::roost_binary(args.roost_bin.as_deref())?;
    let nofile = procs::raise_nofile();
    let most = args.workers.iter().copied().max().unwrap_or(0);
    // This process holds one connection per worker (or per group) and the leader as many.
    let needed = most.div_ceil(args.per_connection) + 256;
    eprintln!(
        "open-file limit {nofile} (raised to the hard limit; servers inherit it); {} worker(s) per connection",
        args.per_connection
    );
    anyhow::ensure!(
        nofile as usize >= needed,
        "the open-file limit {nofile} is too low for {most} workers: raise it (ulimit -n) or pass --per-connection"
    );
    let mut results = Vec::new();
    for &n in &args.workers {
        let result = tokio::select! {
            r = one_count(&args, &binary, n) => r.with_context(|| format!("{n} workers"))?,
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
        };
        if !args.json {
            print_result(&result);
        }
        results.push(result);
    }
    if args.json {
        println!(
            "{}",
            json!({
                "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                "perConnection": args.per_connection,
                "windowSec": args.window_sec,
                "results": results,
            })
        );
    } else if results.len() > 1 {
        println!("\n| workers | leader CPU % | idle % | followers CPU % | leader RSS MiB | KiB/worker | p50 ms | p99 ms |");
        println!("|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &results {
            println!(
                "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {:.2} | {:.2} |",
                r["workers"],
                r["leaderCpuPct"].as_f64().unwrap_or(0.0),
                r["leaderIdleCpuPct"].as_f64().unwrap_or(0.0),
                r["followerCpuPct"]
                    .as_array()
                    .map(|a| a
                        .iter()
                        .map(|v| format!("{:.1}", v.as_f64().unwrap_or(0.0)))
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default(),
                r["leaderRssMiB"].as_f64().unwrap_or(0.0),
                r["leaderKiBPerWorker"].as_f64().unwrap_or(0.0),
                r["assignP50Ms"].as_f64().unwrap_or(0.0),
                r["assignP99Ms"].as_f64().unwrap_or(0.0),
            );
        }
    }
    Ok(())
}

fn print_result(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let list = |k: &str| {
        r[k].as_array()
            .map(|a| {
                a.iter()
                    .map(|v| format!("{:.1}", v.as_f64().unwrap_or(0.0)))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    println!(
        "\n== {} simulated workers dialing {} nodes, 3 roost server processes, leader node {} ==",
        r["workers"],
        r["dial"].as_str().unwrap_or("all"),
        r["leaderId"]
    );
    println!(
        "registration: {} registered in {:.1} s; the leader lists {} online, {} lost; {} reconnects, {} failed connections",
        r["registered"], f("rampSec"), r["online"], r["lost"], r["reconnects"], r["failures"]
    );
    println!(
        "lease renewals over {:.0} s: {:.0}/s sent, {:.0}/s acked; send->ack p50 {:.2} ms, p99 {:.2} ms",
        f("windowSec"),
        f("renewalsPerSec"),
        f("acksPerSec"),
        f("ackP50Ms"),
        f("ackP99Ms")
    );
    println!(
        "leader CPU: {:.1}% of one core (idle cluster {:.1}%); followers {} % (idle {} %)",
        f("leaderCpuPct"),
        f("leaderIdleCpuPct"),
        list("followerCpuPct"),
        list("followerIdleCpuPct")
    );
    println!(
        "load generator (this process) {:.1}% of one core; machine busy {:.1}% of {} cores",
        f("benchCpuPct"),
        f("machineBusyPct"),
        r["cores"]
    );
    println!(
        "leader RSS: {:.1} MiB idle -> {:.1} MiB at the end of the window: {:.1} KiB per worker (followers +{} MiB); {} threads",
        f("leaderIdleRssMiB"),
        f("leaderRssMiB"),
        f("leaderKiBPerWorker"),
        list("followerRssDeltaMiB"),
        r["leaderThreads"]
    );
    println!(
        "  (RSS {:.1} MiB at the start of the window: it grew {:.1} KiB/s during it)",
        f("leaderRssWindowStartMiB"),
        f("leaderRssGrowthKiBPerSec")
    );
    println!(
        "wake request -> assignment at a worker, {} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        r["samples"],
        f("assignP50Ms"),
        f("assignP99Ms"),
        f("assignMaxMs")
    );
    println!(
        "  (p50 sent to the leader {:.2} ms, to a follower {:.2} ms; the wake request's own reply p50 {:.2} ms, p99 {:.2} ms)",
        f("assignViaLeaderP50Ms"),
        f("assignViaFollowerP50Ms"),
        f("wakeReplyP50Ms"),
        f("wakeReplyP99Ms")
    );
}

async fn one_count(args: &WorkersArgs, binary: &Path, n: usize) -> anyhow::Result<Value> {
    let threads = crate::procs::share_of_cpus(3);
    eprintln!(
        "[{n} workers] starting 3 roost server processes ({threads} runtime thread(s) each)..."
    );
    let mut cluster = ProcessCluster::start(binary, threads).await?;
    let result = on_cluster(args, &cluster, n).await;
    if result.is_err() {
        // The error names the directory: keep the servers' logs for reading.
        cluster.keep_dir();
    }
    let logs = cluster.dir().display().to_string();
    result.with_context(|| format!("server logs kept in {logs}"))
}

async fn on_cluster(
    args: &WorkersArgs,
    cluster: &ProcessCluster,
    n: usize,
) -> anyhow::Result<Value> {
    let logs = cluster.dir().display().to_string();
    let status = cluster.healthy_status(Duration::from_secs(60)).await?;
    let leader = status["leaderId"].as_u64().unwrap_or(1);
    let followers: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.id)
        .filter(|i| *i != leader)
        .collect();
    let leader_pid = cluster.node(leader).map(|n| n.pid()).unwrap_or(0);
    eprintln!("[{n} workers] leader is node {leader} (pid {leader_pid}); logs in {logs}");
    let admin = cluster.admin(leader);

    let company = admin
        .post(
            "/api/companies",
            json!({ "name": "Bench", "issuePrefix": "BEN" }),
        )
        .await?
        .ok()?;
    let company_id = company["id"].as_str().unwrap_or_default().to_string();
    let mut agents = Vec::new();
    for i in 0..args.agents.max(1) {
        let agent = admin
            .post(
                &format!("/api/companies/{company_id}/agents"),
                json!({ "name": format!("bench-agent-{i}"), "adapterType": "process" }),
            )
            .await?
            .ok()?;
        agents.push(agent["id"].as_str().unwrap_or_default().to_string());
    }
    let token = admin
        .post("/api/workers/join-tokens", json!({ "name": "bench" }))
        .await?
        .ok()?;
    let join_token = token["token"].as_str().unwrap_or_default().to_string();

    // The idle cluster: CPU baseline and resident memory with no worker.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!(
        "[{n} workers] idle baseline for {} s (no workers)...",
        args.idle_sec
    );
    let idle_a = snapshot(cluster)?;
    tokio::time::sleep(Duration::from_secs(args.idle_sec.max(1))).await;
    let idle_b = snapshot(cluster)?;
    let idle = cpu_between(&idle_a, &idle_b);

    let addrs = match args.dial {
        Dial::All => cluster.grpc_addrs(),
        Dial::Followers => followers
            .iter()
            .filter_map(|f| cluster.node(*f).map(|n| n.grpc.clone()))
            .collect(),
    };
    let sim = Arc::new(Sim {
        addrs,
        join_token,
        slots: args.slots,
        hold: Duration::from_millis(args.hold_ms),
        per_connection: args.per_connection,
        registered: AtomicUsize::new(0),
        connections: AtomicU64::new(0),
        redirects: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        renewals: AtomicU64::new(0),
        acks: AtomicU64::new(0),
        assignments: AtomicU64::new(0),
        cancels: AtomicU64::new(0),
        measuring: AtomicBool::new(false),
        ack_rtts_us: Mutex::default(),
        pending: Mutex::default(),
        seen_runs: Mutex::default(),
        channels: Mutex::default(),
    });
    let workers = Workers(Vec::with_capacity(n));
    measure(
        args, cluster, &sim, workers, n, leader, &followers, &agents, &idle, &idle_b,
    )
    .await
}

/// Aborts the simulated workers when dropped (their connections close with them).
struct Workers(Vec<JoinHandle<()>>);

impl Drop for Workers {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    args: &WorkersArgs,
    cluster: &ProcessCluster,
    sim: &Arc<Sim>,
    mut workers: Workers,
    n: usize,
    leader: u64,
    followers: &[u64],
    agents: &[String],
    idle: &CpuUse,
    idle_snapshot: &Snapshot,
) -> anyhow::Result<Value> {
    // Ramp: `ramp` workers at a time, each batch registered before the next starts.
    let ramp_start = Instant::now();
    while workers.0.len() < n {
        let batch = args.ramp.min(n - workers.0.len());
        for _ in 0..batch {
            let index = workers.0.len();
            workers
                .0
                .push(tokio::spawn(worker_loop(sim.clone(), index)));
        }
        let target = workers.0.len();
        roost_testkit::wait_for(
            &format!("{target} workers registered"),
            Duration::from_secs(120),
            || async { (sim.registered.load(Ordering::Relaxed) >= target).then_some(()) },
        )
        .await?;
        eprintln!(
            "[{n} workers] {target}/{n} registered ({:.1} s, {} redirects followed, {} failed connections)",
            ramp_start.elapsed().as_secs_f64(),
            sim.redirects.load(Ordering::Relaxed),
            sim.failures.load(Ordering::Relaxed)
        );
    }
    let ramp_sec = ramp_start.elapsed().as_secs_f64();

    eprintln!(
        "[{n} workers] warm-up: {} s of lease renewals...",
        args.warmup_sec
    );
    tokio::time::sleep(Duration::from_secs(args.warmup_sec)).await;

    eprintln!("[{n} workers] measuring CPU for {} s...", args.window_sec);
    let (hb0, ack0) = (
        sim.renewals.load(Ordering::Relaxed),
        sim.acks.load(Ordering::Relaxed),
    );
    sim.measuring.store(true, Ordering::Relaxed);
    let a = snapshot(cluster)?;
    let window = Duration::from_secs(args.window_sec.max(1));
    let mut left = window;
    while !left.is_zero() {
        let step = left.min(Duration::from_secs(10));
        tokio::time::sleep(step).await;
        left -= step;
        let now = snapshot(cluster)?;
        let so_far = cpu_between(&a, &now);
        eprintln!(
            "[{n} workers]   {:.0} s: leader {:.1}% CPU, RSS {:.1} MiB; {} registered",
            now.at.duration_since(a.at).as_secs_f64(),
            so_far.of(leader),
            mib(now.node(leader).rss_kib),
            sim.registered.load(Ordering::Relaxed)
        );
    }
    let b = snapshot(cluster)?;
    sim.measuring.store(false, Ordering::Relaxed);
    let secs = b.at.duration_since(a.at).as_secs_f64();
    let (hb1, ack1) = (
        sim.renewals.load(Ordering::Relaxed),
        sim.acks.load(Ordering::Relaxed),
    );
    let cpu = cpu_between(&a, &b);
    let mut rtts = std::mem::take(&mut *lock(&sim.ack_rtts_us));
    rtts.sort_unstable();

    // The leader's own view of its workers, and whether leadership held.
    let listed = cluster.admin(leader).get("/api/workers").await?.ok()?;
    let listed = listed.as_array().cloned().unwrap_or_default();
    let online = listed.iter().filter(|w| w["status"] == "online").count();
    let lost = listed.iter().filter(|w| w["status"] == "lost").count();
    let leader_now = cluster.leader().await;
    anyhow::ensure!(
        leader_now == Some(leader),
        "leadership moved during the measurement (node {leader} -> {leader_now:?}); the numbers would mix two leaders"
    );
    let registered = sim.registered.load(Ordering::Relaxed);
    eprintln!("[{n} workers] {registered} workers registered; the leader lists {online} online, {lost} lost");

    // Wake to assignment, with every worker still renewing its lease.
    eprintln!(
        "[{n} workers] {} wakes (alternately to the leader and a follower)...",
        args.samples
    );
    let follower = followers.first().copied().unwrap_or(leader);
    let (to_leader, to_follower) = (cluster.admin(leader), cluster.admin(follower));
    let mut last_run: HashMap<usize, String> = HashMap::new();
    let mut samples = Vec::with_capacity(args.samples);
    // The same, split by the node the wake was sent to, and the wake request's own reply time.
    let (mut via_leader, mut via_follower, mut replies) = (Vec::new(), Vec::new(), Vec::new());
    for s in 0..args.samples {
        let ai = s % agents.len();
        let agent = &agents[ai];
        if let Some(run) = last_run.get(&ai) {
            wait_run_ended(&to_leader, run).await?;
        }
        let (tx, rx) = oneshot::channel();
        lock(&sim.pending).insert(agent.clone(), tx);
        let http = if s % 2 == 0 { &to_leader } else { &to_follower };
        let start = Instant::now();
        http.post(&format!("/api/agents/{agent}/wakeup"), json!({}))
            .await?
            .ok()?;
        replies.push(us(start.elapsed()));
        let (run_id, arrived) = tokio::time::timeout(Duration::from_secs(15), rx)
            .await
            .map_err(|_| anyhow::anyhow!("no assignment within 15 s of wake {s}"))?
            .map_err(|_| anyhow::anyhow!("the waiting worker went away"))?;
        let took = us(arrived.duration_since(start));
        samples.push(took);
        if s % 2 == 0 {
            via_leader.push(took);
        } else {
            via_follower.push(took);
        }
        last_run.insert(ai, run_id);
        if (s + 1) % 50 == 0 {
            eprintln!("[{n} workers]   {}/{} wakes", s + 1, args.samples);
        }
    }
    for v in [
        &mut samples,
        &mut via_leader,
        &mut via_follower,
        &mut replies,
    ] {
        v.sort_unstable();
    }
    let end = snapshot(cluster)?;
    drop(workers);

    let idle_rss = idle_snapshot.node(leader).rss_kib;
    let rss = b.node(leader).rss_kib;
    let per_worker_kib = rss.saturating_sub(idle_rss) as f64 / n.max(1) as f64;
    let follower_delta: Vec<f64> = followers
        .iter()
        .map(|f| mib(b.node(*f).rss_kib) - mib(idle_snapshot.node(*f).rss_kib))
        .collect();
    Ok(json!({
        "workers": n,
        "dial": format!("{:?}", args.dial).to_lowercase(),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "leaderId": leader,
        "registered": registered,
        "online": online,
        "lost": lost,
        "rampSec": ramp_sec,
        "reconnects": sim.connections.load(Ordering::Relaxed).saturating_sub(n as u64),
        "failures": sim.failures.load(Ordering::Relaxed),
        "redirects": sim.redirects.load(Ordering::Relaxed),
        "cancels": sim.cancels.load(Ordering::Relaxed),
        "windowSec": secs,
        "renewalsPerSec": (hb1 - hb0) as f64 / secs,
        "acksPerSec": (ack1 - ack0) as f64 / secs,
        "ackP50Ms": ms(percentile(&rtts, 50.0)),
        "ackP99Ms": ms(percentile(&rtts, 99.0)),
        "leaderCpuPct": cpu.of(leader),
        "leaderIdleCpuPct": idle.of(leader),
        "followerCpuPct": followers.iter().map(|f| cpu.of(*f)).collect::<Vec<_>>(),
        "followerIdleCpuPct": followers.iter().map(|f| idle.of(*f)).collect::<Vec<_>>(),
        "benchCpuPct": cpu.bench,
        "machineBusyPct": cpu.machine_busy,
        "idleMachineBusyPct": idle.machine_busy,
        "leaderIdleRssMiB": mib(idle_rss),
        "leaderRssMiB": mib(rss),
        "leaderRssWindowStartMiB": mib(a.node(leader).rss_kib),
        "leaderRssGrowthKiBPerSec": (rss as f64 - a.node(leader).rss_kib as f64) / secs,
        "leaderRssAfterWakesMiB": mib(end.node(leader).rss_kib),
        "leaderKiBPerWorker": per_worker_kib,
        "followerRssDeltaMiB": follower_delta,
        "leaderThreads": b.node(leader).threads,
        "samples": samples.len(),
        "assignP50Ms": ms(percentile(&samples, 50.0)),
        "assignP99Ms": ms(percentile(&samples, 99.0)),
        "assignMaxMs": ms(samples.last().copied().unwrap_or(0)),
        "assignViaLeaderP50Ms": ms(percentile(&via_leader, 50.0)),
        "assignViaFollowerP50Ms": ms(percentile(&via_follower, 50.0)),
        "wakeReplyP50Ms": ms(percentile(&replies, 50.0)),
        "wakeReplyP99Ms": ms(percentile(&replies, 99.0)),
    }))
}

/// Waits until the run has ended, so the agent's next wake is not queued behind it.
async fn wait_run_ended(http: &Http, run_id: &str) -> anyhow::Result<()> {
    roost_testkit::wait_for(
        "the previous run to end",
        Duration::from_secs(15),
        || async {
            let r = http
                .get(&format!("/api/heartbeat-runs/{run_id}"))
                .await
                .ok()?
                .ok()
                .ok()?;
            let live =
                ["queued", "assigned", "running"].contains(&r["status"].as_str().unwrap_or(""));
            (!live).then_some(())
        },
    )
    .await
}
