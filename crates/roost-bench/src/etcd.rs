//! Roost side by side with etcd (issue 8): the same checkout/release workload and the same
//! failover measurement on a 3-member etcd cluster and a 3-node Roost cluster, both run as
//! separate OS processes on loopback with their data in temporary directories under `$TMPDIR`
//! (one disk), one after the other per point, from this one load generator.
//!
//! - etcd checkout = a lease-guarded compare-and-set: one `KV.Txn`
//!   `if create_revision(task key) == 0 then put(task key, holder, lease)`; the revision of the
//!   put (the txn's header revision) is the fencing token. Release = `KV.DeleteRange` of the
//!   key. Each client is granted ONE lease before the measurement (TTL 600 s, so no keepalive
//!   is needed) and attaches every checkout to it, as a Roost checkout is attached to the run
//!   the client created beforehand: two replicated writes per cycle on both systems.
//!   `--lease-per-checkout` instead grants a lease per checkout (timed with the txn) and
//!   releases by revoking it (which deletes the key): three writes per cycle.
//! - Roost checkout = the gRPC `roost.v1.Control/Checkout` of checkout.rs; release = `Release`.
//!   Each client is an agent with its own run and two issues (two task keys in etcd), used in
//!   turn, so nothing contends: the numbers measure the replicated write path.
//! - Clients of both systems share one HTTP/2 connection to the leader.
//! - Failover: a writer on a follower; the leader process gets SIGKILL; new checkout attempts
//!   start every 10 ms (each waits up to 5 s) until the first is acknowledged; the time from
//!   the kill to that acknowledgment is one sample. The killed member is then restarted on its
//!   data and the cluster waited for before the next trial. Both systems run their default
//!   timing (etcd: heartbeat 100 ms, election 1000 ms; Roost: heartbeat 100 ms, election
//!   500-1000 ms).
//!
//! etcd is reached over its gRPC API with a hand-written subset of `etcdserverpb` (the prost
//! structs below carry the field numbers of etcd's `api/etcdserverpb/rpc.proto`; unknown
//! fields in replies are skipped), so no JSON gateway sits between the client and etcd.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{CheckoutRequest, ReleaseRequest};
use roost_testkit::{wait_for, Http};
use serde_json::{json, Value};
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint};

use crate::procs::{self, ProcessCluster};
use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct EtcdArgs {
    /// Systems to measure, comma-separated, in this order per point (etcd, roost)
    #[arg(long, value_delimiter = ',', default_value = "etcd,roost")]
    systems: Vec<String>,
    /// Client counts to measure, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    clients: Vec<usize>,
    /// Seconds of measurement per point
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Seconds of load before each point's measurement starts (not counted)
    #[arg(long, default_value_t = 1)]
    warmup_sec: u64,
    /// Failover trials per system (0: skip failover)
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// etcd: grant a lease per checkout (timed with the txn) and revoke it on release, instead
    /// of one lease per client for the whole point
    #[arg(long)]
    lease_per_checkout: bool,
    /// The etcd binary
    #[arg(long, default_value = "etcd")]
    etcd_bin: PathBuf,
    /// The roost binary [default: `roost` next to this executable]
    #[arg(long)]
    roost_bin: Option<PathBuf>,
    /// One JSON object per point and per failover series instead of tables
    #[arg(long)]
    json: bool,
}

// ---------------------------------------------------------------------------------------
// The etcdserverpb subset (field numbers from etcd's api/etcdserverpb/rpc.proto).

use crate::etcd_pb as pb;

/// One unary etcd call.
pub(crate) async fn call<Req, Resp>(
    ch: &Channel,
    path: &'static str,
    req: Req,
) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(ch.clone());
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("channel not ready: {e}")))?;
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    Ok(grpc
        .unary(tonic::Request::new(req), path, codec)
        .await?
        .into_inner())
}

/// `if create_revision(key) == 0 then put(key, value, lease)`.
fn checkout_txn(key: &[u8], value: &[u8], lease: i64) -> pb::TxnRequest {
    pb::TxnRequest {
        compare: vec![pb::Compare {
            result: pb::EQUAL,
            target: pb::CREATE,
            key: key.to_vec(),
            target_union: Some(pb::TargetUnion::CreateRevision(0)),
        }],
        success: vec![pb::RequestOp {
            request: Some(pb::Request::RequestPut(pb::PutRequest {
                key: key.to_vec(),
                value: value.to_vec(),
                lease,
            })),
        }],
        failure: vec![],
    }
}

async fn grant(ch: &Channel, ttl: i64) -> anyhow::Result<i64> {
    let r: pb::LeaseGrantResponse =
        call(ch, pb::LEASE_GRANT, pb::LeaseGrantRequest { ttl, id: 0 }).await?;
    anyhow::ensure!(
        r.error.is_empty() && r.id != 0,
        "lease grant refused: {}",
        r.error
    );
    Ok(r.id)
}

pub(crate) fn lazy_channel(url: &str) -> anyhow::Result<Channel> {
    Ok(Endpoint::from_shared(url.to_string())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy())
}

pub(crate) async fn connect(url: &str) -> anyhow::Result<Channel> {
    Endpoint::from_shared(url.to_string())?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connect {url}"))
}

use crate::etcd_cluster::{die_with_parent, sigkill, EtcdCluster};

// ---------------------------------------------------------------------------------------
// The Roost side: `roost server` processes (procs.rs), restarted here after a kill.

struct RoostSide {
    cluster: ProcessCluster,
    binary: PathBuf,
    company_id: String,
    /// The current process of each node (changes when a killed node is restarted).
    pids: HashMap<u64, u32>,
    /// Processes started after a kill (the originals belong to `cluster`).
    restarted: Vec<Child>,
    /// Each node's config file, read from its command line (`--config <path>`).
    configs: HashMap<u64, PathBuf>,
}

impl Drop for RoostSide {
    fn drop(&mut self) {
        for c in &mut self.restarted {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl RoostSide {
    async fn start(binary: &Path) -> anyhow::Result<RoostSide> {
        let cluster = ProcessCluster::start(binary).await?;
        cluster.healthy_status(Duration::from_secs(60)).await?;
        let leader = roost_leader(&cluster).await?;
        let company = cluster
            .admin(leader)
            .post(
                "/api/companies",
                json!({ "name": "Bench", "issuePrefix": "BEN" }),
            )
            .await?
            .ok()?;
        let pids = cluster.nodes.iter().map(|n| (n.id, n.pid())).collect();
        let mut configs = HashMap::new();
        for n in &cluster.nodes {
            let cmdline = std::fs::read(format!("/proc/{}/cmdline", n.pid()))?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let config = args
                .iter()
                .position(|a| a == "--config")
                .and_then(|i| args.get(i + 1))
                .ok_or_else(|| anyhow::anyhow!("node {}: no --config on its command line", n.id))?;
            configs.insert(n.id, PathBuf::from(config));
        }
        Ok(RoostSide {
            configs,
            company_id: company["id"].as_str().unwrap_or_default().to_string(),
            binary: binary.to_path_buf(),
            pids,
            restarted: Vec::new(),
            cluster,
        })
    }

    fn pids(&self) -> Vec<u32> {
        self.pids.values().copied().collect()
    }

    fn grpc_url(&self, id: u64) -> String {
        format!(
            "http://{}",
            self.cluster.node(id).map(|n| n.grpc.as_str()).unwrap_or("")
        )
    }

    fn kill(&mut self, id: u64) {
        if let Some(pid) = self.pids.get(&id) {
            sigkill(*pid);
        }
        if let Some(pos) = self
            .restarted
            .iter()
            .position(|c| Some(&c.id()) == self.pids.get(&id))
        {
            let mut child = self.restarted.remove(pos);
            let _ = child.wait();
        }
    }

    fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        let config = self
            .configs
            .get(&id)
            .ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(config.with_file_name(format!("node-{id}.log")))?;
        let mut command = Command::new(&self.binary);
        command
            .args(["server", "--config"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        die_with_parent(&mut command);
        let child = command.spawn()?;
        self.pids.insert(id, child.id());
        self.restarted.push(child);
        Ok(())
    }
}

async fn roost_leader(cluster: &ProcessCluster) -> anyhow::Result<u64> {
    wait_for("a Roost leader", Duration::from_secs(30), || {
        cluster.leader()
    })
    .await
}

/// A Roost client: an agent with a key, a run and its issues (as checkout.rs makes them).
struct RoostClient {
    agent_id: String,
    key: String,
    run_id: String,
    issues: Vec<String>,
}

async fn roost_clients(
    admin: &Http,
    company_id: &str,
    n: usize,
    issues_each: usize,
    tag: &str,
) -> anyhow::Result<Vec<RoostClient>> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let agent = admin
            .post(
                &format!("/api/companies/{company_id}/agents"),
                json!({ "name": format!("bench-{tag}-{i}") }),
            )
            .await?
            .ok()?;
        let agent_id = agent["id"].as_str().unwrap_or_default().to_string();
        let key = admin
            .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
            .await?
            .ok()?;
        let run = admin
            .post(&format!("/api/agents/{agent_id}/runs"), json!({}))
            .await?
            .ok()?;
        let mut issues = Vec::new();
        for j in 0..issues_each {
            let issue = admin
                .post(
                    &format!("/api/companies/{company_id}/issues"),
                    json!({ "title": format!("bench {tag} {i}.{j}"), "status": "todo" }),
                )
                .await?
                .ok()?;
            issues.push(issue["id"].as_str().unwrap_or_default().to_string());
        }
        clients.push(RoostClient {
            agent_id,
            key: key["token"].as_str().unwrap_or_default().to_string(),
            run_id: run["id"].as_str().unwrap_or_default().to_string(),
            issues,
        });
    }
    Ok(clients)
}

fn roost_request<T>(client: &RoostClient, message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {}", client.key).parse()?);
    req.metadata_mut()
        .insert("x-roost-run-id", client.run_id.parse()?);
    Ok(req)
}

async fn roost_checkout(
    grpc: &mut ControlClient<Channel>,
    client: &RoostClient,
    issue: &str,
) -> anyhow::Result<()> {
    let checkout = CheckoutRequest {
        issue_id: issue.to_string(),
        agent_id: client.agent_id.clone(),
        expected_statuses: vec!["todo".into()],
    };
    grpc.checkout(roost_request(client, checkout)?).await?;
    Ok(())
}

async fn roost_release(
    grpc: &mut ControlClient<Channel>,
    client: &RoostClient,
    issue: &str,
) -> anyhow::Result<()> {
    let release = ReleaseRequest {
        issue_id: issue.to_string(),
    };
    grpc.release(roost_request(client, release)?).await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The load loops.

/// What every client of a point shares.
struct Load {
    /// Checkouts started at or after this instant are measured.
    measure_from: Instant,
    /// No cycle starts after this instant.
    until: Instant,
    done: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Load {
    fn error(&self, what: &str, e: impl std::fmt::Display) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_error.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(format!("{what}: {e}"));
        }
    }

    /// Records one checkout that started at `start`.
    fn record(&self, start: Instant, latencies: &mut Vec<u64>) {
        if start >= self.measure_from {
            latencies.push(us(start.elapsed()));
            self.done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct EtcdClient {
    keys: Vec<Vec<u8>>,
    value: Vec<u8>,
    /// The client's lease (0 with `--lease-per-checkout`).
    lease: i64,
}

async fn etcd_loop(ch: Channel, c: EtcdClient, load: Arc<Load>) -> Vec<u64> {
    let mut latencies = Vec::new();
    for key in c.keys.iter().cycle() {
        if Instant::now() >= load.until {
            break;
        }
        let start = Instant::now();
        let lease = if c.lease != 0 {
            c.lease
        } else {
            match grant(&ch, 60).await {
                Ok(l) => l,
                Err(e) => {
                    load.error("lease grant", e);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        };
        match call::<_, pb::TxnResponse>(&ch, pb::TXN, checkout_txn(key, &c.value, lease)).await {
            Ok(r) if r.succeeded => load.record(start, &mut latencies),
            Ok(_) => load.error("checkout", "the task key is held (compare failed)"),
            Err(e) => load.error("checkout", e),
        }
        let released = if c.lease != 0 {
            call::<_, pb::DeleteRangeResponse>(
                &ch,
                pb::DELETE_RANGE,
                pb::DeleteRangeRequest { key: key.clone() },
            )
            .await
            .map(|_| ())
        } else {
            call::<_, pb::LeaseRevokeResponse>(
                &ch,
                pb::LEASE_REVOKE,
                pb::LeaseRevokeRequest { id: lease },
            )
            .await
            .map(|_| ())
        };
        if let Err(e) = released {
            load.error("release", e);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    latencies
}

async fn roost_loop(ch: Channel, c: RoostClient, load: Arc<Load>) -> Vec<u64> {
    let mut grpc = ControlClient::new(ch);
    let mut latencies = Vec::new();
    for issue in c.issues.iter().cycle() {
        if Instant::now() >= load.until {
            break;
        }
        let start = Instant::now();
        match roost_checkout(&mut grpc, &c, issue).await {
            Ok(()) => load.record(start, &mut latencies),
            Err(e) => load.error("checkout", e),
        }
        if let Err(e) = roost_release(&mut grpc, &c, issue).await {
            load.error("release", e);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    latencies
}

// ---------------------------------------------------------------------------------------
// Points.

enum Identities {
    Etcd(Vec<EtcdClient>),
    Roost(Vec<RoostClient>),
}

enum System {
    Etcd(EtcdCluster),
    Roost(RoostSide),
}

impl System {
    fn name(&self) -> &'static str {
        match self {
            System::Etcd(_) => "etcd",
            System::Roost(_) => "roost",
        }
    }

    fn pids(&self) -> Vec<u32> {
        match self {
            System::Etcd(c) => c.pids(),
            System::Roost(r) => r.pids(),
        }
    }
}

#[derive(Clone)]
struct Point {
    system: String,
    clients: usize,
    rate: f64,
    checkouts: usize,
    p50: u64,
    p90: u64,
    p99: u64,
    max: u64,
    errors: u64,
    /// CPU time of the three server processes per measured checkout (with its release).
    server_cpu_ms_per_checkout: f64,
    /// The leader's CPU over the window, in percent of one core.
    leader_cpu_pct: f64,
    /// The whole machine's busy share over the window (both cores), in percent.
    machine_busy_pct: f64,
    /// Roost only: writes (a checkout or a release) per Raft log entry over the window, from
    /// the leader's log index; how much the group commit batched.
    writes_per_entry: Option<f64>,
}

impl Point {
    fn json(&self, args: &EtcdArgs) -> Value {
        json!({
            "system": self.system, "nodes": 3, "clients": self.clients,
            "checkoutsPerSec": self.rate, "checkouts": self.checkouts,
            "p50Ms": ms(self.p50), "p90Ms": ms(self.p90), "p99Ms": ms(self.p99), "maxMs": ms(self.max),
            "errors": self.errors, "serverCpuMsPerCheckout": self.server_cpu_ms_per_checkout,
            "leaderCpuPct": self.leader_cpu_pct, "machineBusyPct": self.machine_busy_pct,
            "writesPerLogEntry": self.writes_per_entry,
            "leasePerCheckout": self.system == "etcd" && args.lease_per_checkout,
        })
    }
}

/// CPU ticks of each process, and the machine's busy/total jiffies.
fn cpu_snapshot(pids: &[u32]) -> (Vec<u64>, (u64, u64)) {
    let ticks = pids
        .iter()
        .map(|p| {
            procs::sample(&p.to_string())
                .map(|s| s.cpu_ticks)
                .unwrap_or(0)
        })
        .collect();
    (ticks, procs::machine_jiffies().unwrap_or((0, 0)))
}

async fn measure(sys: &System, clients: usize, args: &EtcdArgs) -> anyhow::Result<Point> {
    let tag = format!("{}-{clients}", sys.name());
    // Setup (not measured): identities, leases, a connection to the leader.
    let (channel, leader_pid, leader_admin, identities) = match sys {
        System::Etcd(c) => {
            let leader = c.wait_healthy(Duration::from_secs(30)).await?;
            let ch = connect(&c.members[leader].client_url).await?;
            let mut identities = Vec::new();
            for i in 0..clients {
                let lease = if args.lease_per_checkout {
                    0
                } else {
                    grant(&ch, 600).await?
                };
                identities.push(EtcdClient {
                    keys: (0..2)
                        .map(|j| format!("/roost-bench/{tag}/task/{i}.{j}").into_bytes())
                        .collect(),
                    value: json!({ "agent": format!("bench-{tag}-{i}"), "lease": lease })
                        .to_string()
                        .into_bytes(),
                    lease,
                });
            }
            let pid = c.members[leader]
                .child
                .as_ref()
                .map(|x| x.id())
                .unwrap_or(0);
            (ch, pid, None, Identities::Etcd(identities))
        }
        System::Roost(r) => {
            r.cluster.healthy_status(Duration::from_secs(60)).await?;
            let leader = roost_leader(&r.cluster).await?;
            let ch = connect(&r.grpc_url(leader)).await?;
            let identities =
                roost_clients(&r.cluster.admin(leader), &r.company_id, clients, 2, &tag).await?;
            let pid = r.pids.get(&leader).copied().unwrap_or(0);
            let admin = r.cluster.admin(leader);
            (ch, pid, Some(admin), Identities::Roost(identities))
        }
    };
    let now = Instant::now();
    let load = Arc::new(Load {
        measure_from: now + Duration::from_secs(args.warmup_sec),
        until: now + Duration::from_secs(args.warmup_sec + args.seconds),
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
    });
    let tasks: Vec<_> = match identities {
        Identities::Etcd(ids) => ids
            .into_iter()
            .map(|c| tokio::spawn(etcd_loop(channel.clone(), c, load.clone())))
            .collect(),
        Identities::Roost(ids) => ids
            .into_iter()
            .map(|c| tokio::spawn(roost_loop(channel.clone(), c, load.clone())))
            .collect(),
    };

    // CPU over the measured window, and progress every 2 s.
    let pids = sys.pids();
    tokio::time::sleep_until(load.measure_from.into()).await;
    let (cpu0, m0) = cpu_snapshot(&pids);
    let leader0 = procs::sample(&leader_pid.to_string())
        .map(|s| s.cpu_ticks)
        .unwrap_or(0);
    let done0 = load.done.load(Ordering::Relaxed);
    let log0 = last_log_index(leader_admin.as_ref()).await;
    let t0 = Instant::now();
    let mut next = t0;
    while Instant::now() + Duration::from_millis(1) < load.until {
        next += Duration::from_secs(2);
        tokio::time::sleep_until(next.min(load.until).into()).await;
        let done = load.done.load(Ordering::Relaxed);
        eprintln!(
            "  {} {clients} clients: {:>4.1} s, {done} checkouts ({:.0}/s){}",
            sys.name(),
            t0.elapsed().as_secs_f64(),
            done as f64 / t0.elapsed().as_secs_f64().max(0.001),
            match load.errors.load(Ordering::Relaxed) {
                0 => String::new(),
                n => format!(", {n} errors"),
            }
        );
    }
    let (cpu1, m1) = cpu_snapshot(&pids);
    let leader1 = procs::sample(&leader_pid.to_string())
        .map(|s| s.cpu_ticks)
        .unwrap_or(0);
    let done1 = load.done.load(Ordering::Relaxed);
    let log1 = last_log_index(leader_admin.as_ref()).await;
    // Each counted checkout is two writes (the checkout and its release).
    let writes_per_entry = log0.zip(log1).and_then(|(a, b)| {
        (b > a).then(|| 2.0 * done1.saturating_sub(done0) as f64 / (b - a) as f64)
    });
    let window = t0.elapsed().as_secs_f64();

    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await?);
    }
    let elapsed = load.measure_from.elapsed();
    latencies.sort_unstable();
    let errors = load.errors.load(Ordering::Relaxed);
    if let Some(e) = load
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        eprintln!(
            "  {} {clients} clients: {errors} errors, the first: {e}",
            sys.name()
        );
    }
    let hz = procs::clock_ticks_per_sec() as f64;
    let server_ticks: u64 = cpu1
        .iter()
        .zip(&cpu0)
        .map(|(b, a)| b.saturating_sub(*a))
        .sum();
    let window_checkouts = load.done.load(Ordering::Relaxed).max(1) as f64;
    let l = &latencies;
    Ok(Point {
        system: sys.name().into(),
        clients,
        rate: l.len() as f64 / elapsed.as_secs_f64(),
        checkouts: l.len(),
        p50: percentile(l, 50.0),
        p90: percentile(l, 90.0),
        p99: percentile(l, 99.0),
        max: l.last().copied().unwrap_or(0),
        errors,
        server_cpu_ms_per_checkout: server_ticks as f64 / hz * 1000.0 / window_checkouts,
        leader_cpu_pct: leader1.saturating_sub(leader0) as f64 / hz / window * 100.0,
        machine_busy_pct: (m1.0.saturating_sub(m0.0)) as f64
            / (m1.1.saturating_sub(m0.1)).max(1) as f64
            * 100.0,
        writes_per_entry,
    })
}

/// The leader's last log index, from its cluster status (`None` for etcd or on an error).
async fn last_log_index(admin: Option<&Http>) -> Option<u64> {
    let status = admin?.get("/api/cluster/status").await.ok()?.ok().ok()?;
    status["lastLogIndex"].as_u64()
}

// ---------------------------------------------------------------------------------------
// Failover.

/// From `killed_at`, starts `attempt()` every 10 ms (each bounded to 5 s) until one returns
/// true; the time from `killed_at` to that acknowledgment.
async fn first_ack<F, Fut>(killed_at: Instant, mut attempt: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let mut inflight = JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                anyhow::ensure!(
                    killed_at.elapsed() < Duration::from_secs(30),
                    "no write acknowledged within 30 s of the kill"
                );
                let fut = attempt();
                inflight.spawn(async move {
                    matches!(tokio::time::timeout(Duration::from_secs(5), fut).await, Ok(true))
                });
            }
            Some(r) = inflight.join_next(), if !inflight.is_empty() => {
                if matches!(r, Ok(true)) {
                    return Ok(killed_at.elapsed());
                }
            }
        }
    }
}

async fn etcd_failover(c: &mut EtcdCluster, trials: usize) -> anyhow::Result<Vec<u64>> {
    let mut samples = Vec::new();
    for trial in 1..=trials {
        let leader = c.wait_healthy(Duration::from_secs(60)).await?;
        let writer = (0..3).find(|i| *i != leader).unwrap_or(0);
        let ch = connect(&c.members[writer].client_url).await?;
        let lease = grant(&ch, 600).await?;
        let warm = format!("/roost-bench/failover/{trial}/warm-up").into_bytes();
        let r: pb::TxnResponse = call(&ch, pb::TXN, checkout_txn(&warm, b"warm-up", lease)).await?;
        anyhow::ensure!(r.succeeded, "warm-up checkout refused");
        let key = format!("/roost-bench/failover/{trial}/task").into_bytes();
        let killed_at = Instant::now();
        c.kill(leader);
        let recovered = first_ack(killed_at, || {
            let (ch, txn) = (ch.clone(), checkout_txn(&key, b"failover", lease));
            async move { call::<_, pb::TxnResponse>(&ch, pb::TXN, txn).await.is_ok() }
        })
        .await
        .with_context(|| format!("etcd trial {trial}"))?;
        eprintln!(
            "  etcd trial {trial:>2}: {} killed, first acknowledged checkout after {:.0} ms",
            c.members[leader].name,
            recovered.as_secs_f64() * 1000.0
        );
        samples.push(us(recovered));
        c.spawn(leader)?;
        c.wait_healthy(Duration::from_secs(60)).await?;
    }
    Ok(samples)
}

async fn roost_failover(r: &mut RoostSide, trials: usize) -> anyhow::Result<Vec<u64>> {
    let leader = roost_leader(&r.cluster).await?;
    let mut writer_client = roost_clients(
        &r.cluster.admin(leader),
        &r.company_id,
        1,
        trials + 1,
        "failover",
    )
    .await?;
    let client = Arc::new(writer_client.remove(0));
    let mut samples = Vec::new();
    for trial in 1..=trials {
        r.cluster.healthy_status(Duration::from_secs(60)).await?;
        let leader = roost_leader(&r.cluster).await?;
        let writer = r
            .cluster
            .nodes
            .iter()
            .map(|n| n.id)
            .find(|i| *i != leader)
            .unwrap_or(1);
        let ch = connect(&r.grpc_url(writer)).await?;
        let mut grpc = ControlClient::new(ch.clone());
        let warm = &client.issues[0];
        roost_checkout(&mut grpc, &client, warm)
            .await
            .context("warm-up checkout")?;
        roost_release(&mut grpc, &client, warm)
            .await
            .context("warm-up release")?;
        let issue = client.issues[trial].clone();
        let killed_at = Instant::now();
        r.kill(leader);
        let recovered = first_ack(killed_at, || {
            let (mut grpc, client, issue) = (
                ControlClient::new(ch.clone()),
                client.clone(),
                issue.clone(),
            );
            async move { roost_checkout(&mut grpc, &client, &issue).await.is_ok() }
        })
        .await
        .with_context(|| format!("Roost trial {trial}"))?;
        eprintln!(
            "  roost trial {trial:>2}: node {leader} killed, first acknowledged checkout after {:.0} ms",
            recovered.as_secs_f64() * 1000.0
        );
        samples.push(us(recovered));
        // Some attempts may still be in flight and check the issue out again: it is this
        // trial's alone, so nothing else depends on it.
        r.restart(leader)?;
    }
    r.cluster.healthy_status(Duration::from_secs(60)).await?;
    Ok(samples)
}

struct Failover {
    system: String,
    samples: Vec<u64>,
}

impl Failover {
    fn p(&self, q: f64) -> f64 {
        ms(percentile(&self.samples, q))
    }
    fn max(&self) -> f64 {
        ms(self.samples.last().copied().unwrap_or(0))
    }
    fn min(&self) -> f64 {
        ms(self.samples.first().copied().unwrap_or(0))
    }
}

// ---------------------------------------------------------------------------------------

async fn start_system(name: &str, args: &EtcdArgs) -> anyhow::Result<System> {
    match name {
        "etcd" => {
            eprintln!(
                "starting a 3-member etcd cluster ({})...",
                args.etcd_bin.display()
            );
            Ok(System::Etcd(EtcdCluster::start(&args.etcd_bin).await?))
        }
        "roost" => {
            let bin = procs::roost_binary(args.roost_bin.as_deref())?;
            eprintln!(
                "starting a 3-node Roost cluster ({} server)...",
                bin.display()
            );
            Ok(System::Roost(RoostSide::start(&bin).await?))
        }
        other => anyhow::bail!("unknown system {other} (etcd, roost)"),
    }
}

pub async fn run(args: EtcdArgs) -> anyhow::Result<()> {
    procs::raise_nofile();
    let mut systems = Vec::new();
    for name in &args.systems {
        systems.push(start_system(name, &args).await?);
    }
    if !args.json {
        println!(
            "{:<6} {:>5} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8} {:>6} {:>12} {:>8} {:>8} {:>9}",
            "system",
            "nodes",
            "clients",
            "checkouts/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "errors",
            "cpu ms/ckout",
            "leader%",
            "busy%",
            "writes/entry"
        );
    }
    let mut points = Vec::new();
    for &clients in &args.clients {
        for sys in &systems {
            eprintln!(
                "measuring {}, {clients} clients, {} s (+{} s warm-up)...",
                sys.name(),
                args.seconds,
                args.warmup_sec
            );
            let p = measure(sys, clients, &args).await?;
            if args.json {
                println!("{}", p.json(&args));
            } else {
                println!(
                    "{:<6} {:>5} {:>7} {:>12.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6} {:>12.3} {:>8.0} {:>8.0} {:>9}",
                    p.system, 3, p.clients, p.rate, ms(p.p50), ms(p.p90), ms(p.p99), ms(p.max),
                    p.errors, p.server_cpu_ms_per_checkout, p.leader_cpu_pct, p.machine_busy_pct,
                    p.writes_per_entry.map(|w| format!("{w:.1}")).unwrap_or_else(|| "-".into())
                );
            }
            points.push(p);
        }
    }
    let mut failovers = Vec::new();
    if args.trials > 0 {
        for sys in &mut systems {
            eprintln!("failover, {}: {} trials...", sys.name(), args.trials);
            let mut samples = match sys {
                System::Etcd(c) => etcd_failover(c, args.trials).await?,
                System::Roost(r) => roost_failover(r, args.trials).await?,
            };
            samples.sort_unstable();
            let f = Failover {
                system: sys.name().into(),
                samples,
            };
            if args.json {
                println!(
                    "{}",
                    json!({ "system": f.system, "failoverTrials": f.samples.len(), "p50Ms": f.p(50.0),
                    "p99Ms": f.p(99.0), "minMs": f.min(), "maxMs": f.max() })
                );
            } else {
                println!(
                    "{:<6} failover over {} trials: p50 {:.0} ms, p99 {:.0} ms, min {:.0} ms, max {:.0} ms",
                    f.system,
                    f.samples.len(),
                    f.p(50.0),
                    f.p(99.0),
                    f.min(),
                    f.max()
                );
            }
            failovers.push(f);
        }
    }
    if !args.json {
        print_comparison(&args, &points, &failovers);
    }
    drop(systems);
    Ok(())
}

/// The one table: etcd, Roost, and Roost ÷ etcd for every point and for failover.
fn print_comparison(args: &EtcdArgs, points: &[Point], failovers: &[Failover]) {
    let find = |s: &str, c: usize| points.iter().find(|p| p.system == s && p.clients == c);
    let fo = |s: &str| failovers.iter().find(|f| f.system == s);
    if !args.systems.iter().any(|s| s == "etcd") || !args.systems.iter().any(|s| s == "roost") {
        return;
    }
    let ratio = |r: f64, e: f64| {
        if e > 0.0 {
            format!("{:.2}", r / e)
        } else {
            "-".into()
        }
    };
    println!();
    println!(
        "3 nodes each on loopback, {} s per point (+{} s warm-up), clients on one HTTP/2 connection \
         to the leader; etcd lease {}; ratio = Roost / etcd",
        args.seconds,
        args.warmup_sec,
        if args.lease_per_checkout { "per checkout" } else { "per client" }
    );
    println!();
    println!("| measure | etcd | Roost | Roost / etcd |");
    println!("|---|--:|--:|--:|");
    for &c in &args.clients {
        let (Some(e), Some(r)) = (find("etcd", c), find("roost", c)) else {
            continue;
        };
        let plural = if c == 1 { "client" } else { "clients" };
        println!(
            "| checkouts/s, {c} {plural} | {:.0} | {:.0} | {} |",
            e.rate,
            r.rate,
            ratio(r.rate, e.rate)
        );
        println!(
            "| p50 / p99 ms, {c} {plural} | {:.2} / {:.2} | {:.2} / {:.2} | {} / {} |",
            ms(e.p50),
            ms(e.p99),
            ms(r.p50),
            ms(r.p99),
            ratio(ms(r.p50), ms(e.p50)),
            ratio(ms(r.p99), ms(e.p99))
        );
        println!(
            "| server CPU ms per checkout + release, {c} {plural} | {:.2} | {:.2} | {} |",
            e.server_cpu_ms_per_checkout,
            r.server_cpu_ms_per_checkout,
            ratio(r.server_cpu_ms_per_checkout, e.server_cpu_ms_per_checkout)
        );
    }
    if let (Some(e), Some(r)) = (fo("etcd"), fo("roost")) {
        println!(
            "| failover p50 / max ms ({} trials, kill -9 of the leader to the first acknowledged checkout) | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} |",
            e.samples.len(),
            e.p(50.0),
            e.max(),
            r.p(50.0),
            r.max(),
            ratio(r.p(50.0), e.p(50.0)),
            ratio(r.max(), e.max())
        );
    }
    let errors: u64 = points.iter().map(|p| p.errors).sum();
    if errors > 0 {
        println!();
        println!("({errors} failed calls in total; see the per-point lines)");
    }
}
