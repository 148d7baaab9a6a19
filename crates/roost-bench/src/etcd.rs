//! Roost side by side with etcd: the same checkout/release workload and the same
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
//!   timing (etcd: heartbeat 100 ms, election 1000 ms; Roost: heartbeat 30 ms, election
//!   100-150 ms, docs/cluster.md) unless `--roost-raft-timing` gives Roost another.
//! - The `elections` column is how far the Raft term moved during a point's window: 0 when one
//!   leader held it throughout; a split vote counts each of its terms.
//! - `--tls`: both systems serve TLS on every listener, client and peer, with certificates of a
//!   CA of their own made by `roost cert` (tls_setup.rs); the bench's clients connect over
//!   `https` with a client certificate, which etcd requires (`--client-cert-auth`).
//!
//! etcd is reached over its gRPC API with a hand-written subset of `etcdserverpb` (the prost
//! structs below carry the field numbers of etcd's `api/etcdserverpb/rpc.proto`; unknown
//! fields in replies are skipped), so no JSON gateway sits between the client and etcd.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{CheckoutRequest, IssueStatus, ReleaseRequest};
use roost_testkit::{wait_for, Http};
use serde_json::json;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::procs::{self, ProcessCluster};
use crate::stats::{ms, us};
use crate::tls_setup::{BenchTls, CertDir};

#[derive(Args)]
pub struct EtcdArgs {
    /// Systems to measure, comma-separated, in this order per point (etcd, roost)
    #[arg(long, value_delimiter = ',', default_value = "etcd,roost")]
    pub(crate) systems: Vec<String>,
    /// Client counts to measure, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    pub(crate) clients: Vec<usize>,
    /// Seconds of measurement per point
    #[arg(long, default_value_t = 10)]
    pub(crate) seconds: u64,
    /// Seconds of load before each point's measurement starts (not counted)
    #[arg(long, default_value_t = 1)]
    pub(crate) warmup_sec: u64,
    /// Failover trials per system (0: skip failover)
    #[arg(long, default_value_t = 10)]
    pub(crate) trials: usize,
    /// Times each point is measured, the systems' order alternating; the table gives the
    /// medians and the range of the ratios (this VM's throughput moves by 15% minute to minute)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) repeat: u64,
    /// etcd: grant a lease per checkout (timed with the txn) and revoke it on release, instead
    /// of one lease per client for the whole point
    #[arg(long)]
    pub(crate) lease_per_checkout: bool,
    /// The etcd binary
    #[arg(long, default_value = "etcd")]
    pub(crate) etcd_bin: PathBuf,
    /// The roost binary [default: `roost` next to this executable]
    #[arg(long)]
    pub(crate) roost_bin: Option<PathBuf>,
    /// Raft timing of every Roost node, `HEARTBEAT,MIN,MAX` in milliseconds (the `[raft]`
    /// keys `heartbeat_interval_ms`, `election_timeout_min_ms`, `election_timeout_max_ms`)
    /// [default: the server's defaults]
    #[arg(long)]
    pub(crate) roost_raft_timing: Option<procs::RaftTiming>,
    /// Runtime threads of each Roost node [default: this machine's CPUs divided among the three
    /// nodes, at least one]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) roost_runtime_threads: Option<u64>,
    /// GOMAXPROCS of each etcd member [default: Go's, one per CPU]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) etcd_gomaxprocs: Option<u64>,
    /// One JSON object per point and per failover series instead of tables
    #[arg(long)]
    pub(crate) json: bool,
    /// TLS on both systems, everywhere: client and peer listeners, with client certificates
    /// from a CA of each system's own, made by `roost cert` (tls_setup.rs)
    #[arg(long)]
    pub(crate) tls: bool,
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
pub(crate) fn checkout_txn(key: &[u8], value: &[u8], lease: i64) -> pb::TxnRequest {
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

pub(crate) async fn grant(ch: &Channel, ttl: i64) -> anyhow::Result<i64> {
    let r: pb::LeaseGrantResponse =
        call(ch, pb::LEASE_GRANT, pb::LeaseGrantRequest { ttl, id: 0 }).await?;
    anyhow::ensure!(
        r.error.is_empty() && r.id != 0,
        "lease grant refused: {}",
        r.error
    );
    Ok(r.id)
}

/// An endpoint of `url` (`https://` with `tls`).
fn endpoint(url: &str, tls: Option<&ClientTlsConfig>) -> anyhow::Result<Endpoint> {
    let endpoint = Endpoint::from_shared(url.to_string())?.tcp_nodelay(true);
    Ok(match tls {
        Some(t) => endpoint
            .tls_config(t.clone())
            .with_context(|| format!("TLS settings for {url}"))?,
        None => endpoint,
    })
}

pub(crate) fn lazy_channel(url: &str, tls: Option<&ClientTlsConfig>) -> anyhow::Result<Channel> {
    Ok(endpoint(url, tls)?
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy())
}

pub(crate) async fn connect(url: &str, tls: Option<&ClientTlsConfig>) -> anyhow::Result<Channel> {
    endpoint(url, tls)?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("connect {url}"))
}

use crate::etcd_cluster::EtcdCluster;
use crate::etcd_failover::{etcd_failover, roost_failover, Failover};
use crate::etcd_points::{measure, System};
use crate::etcd_table::print_comparison;

// ---------------------------------------------------------------------------------------
// The Roost side: `roost server` processes (the testkit's ProcessCluster), killed and
// restarted through it.

pub(crate) struct RoostSide {
    pub(crate) cluster: ProcessCluster,
    pub(crate) company_id: String,
    /// With `--tls`: the bench's gRPC client settings (the CA, a client certificate).
    pub(crate) client_tls: Option<ClientTlsConfig>,
}

impl RoostSide {
    pub(crate) async fn start(
        binary: &Path,
        runtime_threads: usize,
        tls: Option<&CertDir>,
        raft: Option<procs::RaftTiming>,
    ) -> anyhow::Result<RoostSide> {
        let client_tls = tls.map(CertDir::client_tls).transpose()?;
        let cluster =
            ProcessCluster::start_with(binary, runtime_threads, tls.map(CertDir::dir), raft)
                .await?;
        cluster.healthy_status(Duration::from_secs(60)).await?;
        let leader = roost_leader(&cluster).await?;
        let company_id = roost_company(&cluster.admin(leader), "Bench", "BEN").await?;
        Ok(RoostSide {
            client_tls,
            company_id,
            cluster,
        })
    }

    /// The current process of each node (a restarted node has a new one).
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.cluster
            .nodes
            .iter()
            .map(|n| n.pid())
            .filter(|pid| *pid != 0)
            .collect()
    }

    pub(crate) fn grpc_url(&self, id: u64) -> String {
        format!(
            "{}://{}",
            self.cluster.scheme(),
            self.cluster.node(id).map(|n| n.grpc.as_str()).unwrap_or("")
        )
    }

    /// A gRPC connection to node `id` (over TLS with `--tls`).
    pub(crate) async fn connect(&self, id: u64) -> anyhow::Result<Channel> {
        connect(&self.grpc_url(id), self.client_tls.as_ref()).await
    }

    /// SIGKILL to node `id`, reaped.
    pub(crate) fn kill(&mut self, id: u64) {
        if let Err(e) = self.cluster.kill(id) {
            eprintln!("kill node {id}: {e}");
        }
    }

    /// Node `id` again, from its config and data.
    pub(crate) fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        self.cluster.restart(id)
    }
}

pub(crate) async fn roost_leader(cluster: &ProcessCluster) -> anyhow::Result<u64> {
    wait_for("a Roost leader", Duration::from_secs(30), || {
        cluster.leader()
    })
    .await
}

/// Creates a company; its id.
pub(crate) async fn roost_company(
    admin: &Http,
    name: &str,
    prefix: &str,
) -> anyhow::Result<String> {
    let company = admin
        .post(
            "/api/companies",
            json!({ "name": name, "issuePrefix": prefix }),
        )
        .await?
        .ok()
        .with_context(|| format!("create company {name}"))?;
    company["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("company {name}: no id in {company}"))
}

/// A Roost client: an agent with a key, a run and its issues (as checkout.rs makes them).
pub(crate) struct RoostClient {
    pub(crate) agent_id: String,
    pub(crate) key: String,
    pub(crate) run_id: String,
    pub(crate) issues: Vec<String>,
}

pub(crate) async fn roost_clients(
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

pub(crate) fn roost_request<T>(
    client: &RoostClient,
    message: T,
) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {}", client.key).parse()?);
    req.metadata_mut()
        .insert("x-roost-run-id", client.run_id.parse()?);
    Ok(req)
}

pub(crate) async fn roost_checkout(
    grpc: &mut ControlClient<Channel>,
    client: &RoostClient,
    issue: &str,
) -> anyhow::Result<()> {
    let checkout = CheckoutRequest {
        issue_id: issue.to_string(),
        agent_id: client.agent_id.clone(),
        expected_statuses: vec![IssueStatus::Todo as i32],
    };
    grpc.checkout(roost_request(client, checkout)?).await?;
    Ok(())
}

pub(crate) async fn roost_release(
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
pub(crate) struct Load {
    /// Checkouts started at or after this instant are measured.
    pub(crate) measure_from: Instant,
    /// No cycle starts after this instant.
    pub(crate) until: Instant,
    pub(crate) done: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) first_error: Mutex<Option<String>>,
}

impl Load {
    pub(crate) fn error(&self, what: &str, e: impl std::fmt::Display) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_error.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(format!("{what}: {e}"));
        }
    }

    /// Records one checkout that started at `start`.
    pub(crate) fn record(&self, start: Instant, latencies: &mut Vec<u64>) {
        if start >= self.measure_from {
            latencies.push(us(start.elapsed()));
            self.done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) struct EtcdClient {
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) value: Vec<u8>,
    /// The client's lease (0 with `--lease-per-checkout`).
    pub(crate) lease: i64,
}

pub(crate) async fn etcd_loop(ch: Channel, c: EtcdClient, load: Arc<Load>) -> Vec<u64> {
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

pub(crate) async fn roost_loop(ch: Channel, c: RoostClient, load: Arc<Load>) -> Vec<u64> {
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

impl EtcdArgs {
    /// Runtime threads each Roost node gets.
    pub(crate) fn roost_threads(&self) -> usize {
        self.roost_runtime_threads
            .map_or_else(|| procs::share_of_cpus(3), |n| n as usize)
    }

    /// GOMAXPROCS each etcd member gets (`None`: Go's default, one per CPU).
    pub(crate) fn etcd_gomaxprocs(&self) -> Option<usize> {
        self.etcd_gomaxprocs.map(|n| n as usize)
    }

    /// Whether TLS was on, for the table's caption and the logs.
    pub(crate) fn tls_label(&self) -> &'static str {
        if self.tls {
            "TLS on both (client and peer traffic, client certificates required by etcd and \
             presented to both)"
        } else {
            "plaintext (no TLS)"
        }
    }

    /// The two settings, for the table's caption and the logs.
    pub(crate) fn threads_label(&self) -> String {
        format!(
            "Roost {} runtime thread(s) per node, etcd GOMAXPROCS {}",
            self.roost_threads(),
            self.etcd_gomaxprocs()
                .map_or("Go's default (one per CPU)".to_string(), |n| n.to_string())
        )
    }
}

pub(crate) async fn start_system(
    name: &str,
    args: &EtcdArgs,
    tls: Option<&BenchTls>,
) -> anyhow::Result<System> {
    match name {
        "etcd" => {
            eprintln!(
                "starting a 3-member etcd cluster ({}; {}; {})...",
                args.etcd_bin.display(),
                args.threads_label(),
                args.tls_label()
            );
            Ok(System::Etcd(Box::new(
                EtcdCluster::start(&args.etcd_bin, args.etcd_gomaxprocs(), tls.map(|t| &t.etcd))
                    .await?,
            )))
        }
        "roost" => {
            let bin = procs::roost_binary(args.roost_bin.as_deref())?;
            eprintln!(
                "starting a 3-node Roost cluster ({} server; {}; {}; raft timing {})...",
                bin.display(),
                args.threads_label(),
                args.tls_label(),
                args.roost_raft_timing
                    .map_or("the defaults".to_string(), |t| format!(
                        "heartbeat {} ms, election timeout {}-{} ms",
                        t.heartbeat_ms, t.election_min_ms, t.election_max_ms
                    ))
            );
            Ok(System::Roost(Box::new(
                RoostSide::start(
                    &bin,
                    args.roost_threads(),
                    tls.map(|t| &t.roost),
                    args.roost_raft_timing,
                )
                .await?,
            )))
        }
        other => anyhow::bail!("unknown system {other} (etcd, roost)"),
    }
}

pub async fn run(args: EtcdArgs) -> anyhow::Result<()> {
    procs::raise_nofile();
    // Made before the systems, so dropped after them (restarted members read the files).
    let tls = if args.tls {
        Some(BenchTls::make(&procs::roost_binary(
            args.roost_bin.as_deref(),
        )?)?)
    } else {
        None
    };
    let mut systems = Vec::new();
    for name in &args.systems {
        systems.push(start_system(name, &args, tls.as_ref()).await?);
    }
    if !args.json {
        println!("[{}]", args.tls_label());
        println!(
            "{:<6} {:>5} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8} {:>6} {:>12} {:>8} {:>8} {:>9} {:>9}",
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
            "writes/entry",
            "elections"
        );
    }
    let mut points = Vec::new();
    for (point, &clients) in args.clients.iter().enumerate() {
        for (repeat, sys) in measuring_order(&systems, args.repeat) {
            eprintln!(
                "measuring {}, {clients} clients, {} s (+{} s warm-up){}...",
                sys.name(),
                args.seconds,
                args.warmup_sec,
                if args.repeat > 1 {
                    format!(", {} of {}", repeat + 1, args.repeat)
                } else {
                    String::new()
                }
            );
            let p = measure(sys, clients, (point, repeat), &args).await?;
            if args.json {
                println!("{}", p.json(&args));
            } else {
                println!(
                    "{:<6} {:>5} {:>7} {:>12.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6} {:>12.3} {:>8.0} {:>8.0} {:>9} {:>9}",
                    p.system, 3, p.clients, p.rate, ms(p.p50), ms(p.p90), ms(p.p99), ms(p.max),
                    p.errors, p.server_cpu_ms_per_checkout, p.leader_cpu_pct, p.machine_busy_pct,
                    p.writes_per_entry.map(|w| format!("{w:.1}")).unwrap_or_else(|| "-".into()),
                    p.term_changes.map(|t| t.to_string()).unwrap_or_else(|| "-".into())
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
                    "p99Ms": f.p(99.0), "minMs": f.min(), "maxMs": f.max(), "tls": args.tls })
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
    drop(tls);
    Ok(())
}

/// Each system once per repeat, the order reversed every other repeat so that neither always
/// runs right after the other's load.
fn measuring_order(systems: &[System], repeats: u64) -> Vec<(u64, &System)> {
    (0..repeats)
        .flat_map(|repeat| {
            let mut order: Vec<&System> = systems.iter().collect();
            if repeat % 2 == 1 {
                order.reverse();
            }
            order.into_iter().map(move |sys| (repeat, sys))
        })
        .collect()
}
