//! One measured point of the etcd comparison (load, CPU, latency percentiles) and the table
//! that sets etcd and Roost side by side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roost_testkit::Http;
use serde_json::{json, Value};
use tonic::transport::Channel;

use crate::etcd::{
    call, etcd_loop, grant, roost_clients, roost_company, roost_leader, roost_loop, EtcdArgs,
    EtcdClient, Load, RoostClient, RoostSide,
};
use crate::etcd_cluster::EtcdCluster;
use crate::etcd_pb as pb;
use crate::procs;
use crate::stats::{ms, percentile};

pub(crate) enum Identities {
    Etcd(Vec<EtcdClient>),
    Roost(Vec<RoostClient>),
}

pub(crate) enum System {
    // Boxed: each holds a few hundred bytes (tonic's TLS settings among them).
    Etcd(Box<EtcdCluster>),
    Roost(Box<RoostSide>),
}

impl System {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            System::Etcd(_) => "etcd",
            System::Roost(_) => "roost",
        }
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        match self {
            System::Etcd(c) => c.pids(),
            System::Roost(r) => r.pids(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Point {
    pub(crate) system: String,
    pub(crate) clients: usize,
    /// Its place in `--clients`, which may name a count twice.
    pub(crate) point: usize,
    /// Which of the `--repeat` measurements of that point it is.
    pub(crate) repeat: u64,
    pub(crate) rate: f64,
    pub(crate) checkouts: usize,
    pub(crate) p50: u64,
    pub(crate) p90: u64,
    pub(crate) p99: u64,
    pub(crate) max: u64,
    pub(crate) errors: u64,
    /// CPU time of the three server processes per measured checkout (with its release).
    pub(crate) server_cpu_ms_per_checkout: f64,
    /// The leader's CPU over the window, in percent of one core.
    pub(crate) leader_cpu_pct: f64,
    /// The whole machine's busy share over the window (both cores), in percent.
    pub(crate) machine_busy_pct: f64,
    /// Roost only: writes (a checkout or a release) per Raft log entry over the window, from
    /// the leader's log index; how much the group commit batched.
    pub(crate) writes_per_entry: Option<f64>,
    /// How far the Raft term moved over the measured window: 0 when one leader held it
    /// throughout, more for each election (`None` when a term could not be read).
    pub(crate) term_changes: Option<u64>,
}

impl Point {
    pub(crate) fn json(&self, args: &EtcdArgs) -> Value {
        json!({
            "system": self.system, "nodes": 3, "clients": self.clients, "repeat": self.repeat,
            "checkoutsPerSec": self.rate, "checkouts": self.checkouts,
            "p50Ms": ms(self.p50), "p90Ms": ms(self.p90), "p99Ms": ms(self.p99), "maxMs": ms(self.max),
            "errors": self.errors, "serverCpuMsPerCheckout": self.server_cpu_ms_per_checkout,
            "leaderCpuPct": self.leader_cpu_pct, "machineBusyPct": self.machine_busy_pct,
            "writesPerLogEntry": self.writes_per_entry,
            "termChanges": self.term_changes,
            "leasePerCheckout": self.system == "etcd" && args.lease_per_checkout,
            "roostRuntimeThreads": args.roost_threads(),
            "etcdGomaxprocs": args.etcd_gomaxprocs(),
            "tls": args.tls,
        })
    }
}

/// CPU ticks of process `pid` so far (0 if it is gone).
fn cpu_ticks(pid: u32) -> u64 {
    procs::sample(&pid.to_string())
        .map(|s| s.cpu_ticks)
        .unwrap_or(0)
}

/// CPU ticks of each process, and the machine's busy/total jiffies.
pub(crate) fn cpu_snapshot(pids: &[u32]) -> (Vec<u64>, (u64, u64)) {
    let ticks = pids.iter().map(|&p| cpu_ticks(p)).collect();
    (ticks, procs::machine_jiffies().unwrap_or((0, 0)))
}

/// The names a point gives its agents, issues and keys: its own, also when `--clients` names
/// a count twice (a repeat made agents with names taken and stopped on a 409).
fn point_tag(system: &str, clients: usize, (point, repeat): (usize, u64)) -> String {
    format!("{system}-{clients}-p{point}r{repeat}")
}

pub(crate) async fn measure(
    sys: &System,
    clients: usize,
    (point, repeat): (usize, u64),
    args: &EtcdArgs,
) -> anyhow::Result<Point> {
    let tag = point_tag(sys.name(), clients, (point, repeat));
    // Setup (not measured): identities, leases, a connection to the leader.
    let (channel, leader_pid, leader_admin, identities) = match sys {
        System::Etcd(c) => {
            let leader = c.wait_healthy(Duration::from_secs(30)).await?;
            let ch = c.connect(leader).await?;
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
            let ch = r.connect(leader).await?;
            // A company per point: one holds at most 1,000 agents (MAX_AGENTS_PER_COMPANY in
            // crates/roost-core/src/limits.rs), fewer than a full run's points make.
            let admin = r.cluster.admin(leader);
            let company = roost_company(
                &admin,
                &format!("Bench {tag}"),
                &format!("B{point}R{repeat}"),
            )
            .await?;
            let identities = roost_clients(&admin, &company, clients, 2, &tag).await?;
            let pid = r.cluster.pid(leader);
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
    let leader0 = cpu_ticks(leader_pid);
    let done0 = load.done.load(Ordering::Relaxed);
    let (log0, term0) = leader_log(sys, &channel, leader_admin.as_ref()).await;
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
    let leader1 = cpu_ticks(leader_pid);
    let done1 = load.done.load(Ordering::Relaxed);
    let (log1, term1) = leader_log(sys, &channel, leader_admin.as_ref()).await;
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
        point,
        repeat,
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
        term_changes: term0.zip(term1).map(|(a, b)| b.saturating_sub(a)),
    })
}

/// The leader's last log index (Roost only) and the Raft term, `None` where unreadable: for
/// Roost from the cluster status of the node that led when the point began, for etcd from a
/// `Status` call to it (a deposed leader reports the newer term too).
async fn leader_log(
    sys: &System,
    channel: &Channel,
    admin: Option<&Http>,
) -> (Option<u64>, Option<u64>) {
    match sys {
        System::Etcd(_) => {
            let status: Option<pb::StatusResponse> =
                call(channel, pb::STATUS, pb::StatusRequest {}).await.ok();
            (None, status.and_then(|s| s.header).map(|h| h.raft_term))
        }
        System::Roost(_) => {
            let Some(status) =
                async { admin?.get("/api/cluster/status").await.ok()?.ok().ok() }.await
            else {
                return (None, None);
            };
            (status["lastLogIndex"].as_u64(), status["term"].as_u64())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::point_tag;

    /// Regression: `--clients 64,64` stopped at the second point, its agents' names taken
    /// ("an agent named bench-roost-64-0 already exists").
    #[test]
    fn a_repeated_client_count_gets_names_of_its_own() {
        let clients = [64, 64, 1];
        let tags: std::collections::BTreeSet<_> = clients
            .iter()
            .enumerate()
            .flat_map(|(point, &c)| {
                (0..2).map(move |repeat| point_tag("roost", c, (point, repeat)))
            })
            .collect();
        assert_eq!(tags.len(), 2 * clients.len());
    }
}
