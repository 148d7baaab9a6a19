//! The bench's 3-node cluster of real `roost server` processes (started by
//! [`roost_testkit::ProcessCluster`] with the bench's settings), and what `/proc` says about
//! them (CPU time, resident memory). The processes are killed when the cluster is dropped,
//! also on an error or an interrupt.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// [`roost_testkit::ProcessCluster`] started as the benchmarks want it (see
/// [`ProcessCluster::start_with`]); everything else is the testkit's.
pub struct ProcessCluster(roost_testkit::ProcessCluster);

impl Deref for ProcessCluster {
    type Target = roost_testkit::ProcessCluster;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for ProcessCluster {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The `roost` binary next to this executable (both are built into `target/release`).
pub fn roost_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?
            .parent()
            .ok_or_else(|| anyhow::anyhow!("roost-bench has no parent directory"))?
            .join("roost"),
    };
    anyhow::ensure!(
        path.is_file(),
        "no roost binary at {}: build it with `cargo build --release -p roost` (or pass --roost-bin)",
        path.display()
    );
    Ok(path)
}

/// Runtime threads for each of `nodes` server processes sharing this machine: its CPUs divided
/// among them, at least one. Each node's runtime defaulting to one thread per CPU made three
/// nodes on 2 cores wake each other's threads across cores for every handoff of a write
/// (10% fewer checkouts/s than with one thread each, BENCHMARKS.md).
pub fn share_of_cpus(nodes: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus / nodes.max(1)).max(1)
}

/// Variables that would override the config's `runtime_threads`: not passed on, so a shell's
/// `ROOST_RUNTIME_THREADS` cannot make the printed setting untrue.
const OVERRIDES: &str = "ROOST_RUNTIME_THREADS";

impl ProcessCluster {
    /// Starts three `roost server` processes with default Raft and worker timing (the configs
    /// set only ids, addresses, `initial_members` and `runtime_threads`) and waits for the
    /// first admin token.
    pub async fn start(binary: &Path, runtime_threads: usize) -> anyhow::Result<ProcessCluster> {
        Self::start_with(binary, runtime_threads, None, None).await
    }

    /// As [`ProcessCluster::start`]; with `certs` (a directory laid out by `roost cert`:
    /// `ca.pem`, `node-N.pem`, `node-N-key.pem`), every listener of every node serves TLS and
    /// the nodes reach each other through their peer listeners with their node certificates
    /// (the `[tls]` of deploy/cluster-node-1.toml); with `raft`, every node's `[raft]` timing
    /// is that one instead of the defaults.
    pub async fn start_with(
        binary: &Path,
        runtime_threads: usize,
        certs: Option<&Path>,
        raft: Option<RaftTiming>,
    ) -> anyhow::Result<ProcessCluster> {
        let raft = raft.map(|t| t.toml()).unwrap_or_default();
        // The load comes from a few callers at thousands of requests a second: no per-caller
        // rate limit (crates/roost-server/src/limits.rs).
        let mut builder = roost_testkit::ProcessCluster::builder(binary)
            .temp_prefix("roost-bench-workers-")
            .node_config(move |_| {
                format!(
                    "runtime_threads = {runtime_threads}\n\n[limits]\nrequests_per_second = 0\n\n{raft}"
                )
            })
            .env_remove(OVERRIDES);
        if let Some(c) = certs {
            builder = builder.tls(c);
        }
        Ok(ProcessCluster(builder.start().await?))
    }
}

/// `--roost-raft-timing HEARTBEAT,MIN,MAX` (milliseconds): a `[raft]` timing for every node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftTiming {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
}

impl std::str::FromStr for RaftTiming {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let ms: Vec<u64> = s
            .split(',')
            .map(|v| v.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{s}: {e}; expected HEARTBEAT,MIN,MAX in milliseconds"))?;
        match ms[..] {
            [heartbeat_ms, election_min_ms, election_max_ms]
                if 0 < heartbeat_ms
                    && heartbeat_ms < election_min_ms
                    && election_min_ms < election_max_ms =>
            {
                Ok(RaftTiming {
                    heartbeat_ms,
                    election_min_ms,
                    election_max_ms,
                })
            }
            [_, _, _] => Err(format!(
                "{s}: expected 0 < HEARTBEAT < MIN < MAX (openraft refuses anything else)"
            )),
            _ => Err(format!(
                "{s}: expected three numbers, HEARTBEAT,MIN,MAX in milliseconds"
            )),
        }
    }
}

impl RaftTiming {
    fn toml(&self) -> String {
        format!(
            "[raft]\nheartbeat_interval_ms = {}\nelection_timeout_min_ms = {}\nelection_timeout_max_ms = {}\n\n",
            self.heartbeat_ms, self.election_min_ms, self.election_max_ms
        )
    }
}

/// CPU time and memory of one process, from `/proc/<pid>/stat` and `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    pub rss_kib: u64,
    pub threads: u64,
}

pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Reads `/proc/<pid>` (`pid` "self" for this process).
pub fn sample(pid: &str) -> anyhow::Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may contain spaces: count fields after its closing paren.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    let num = |i: usize| -> u64 { fields.get(i - 3).and_then(|v| v.parse().ok()).unwrap_or(0) };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(ProcSample {
        cpu_ticks: num(14) + num(15),
        rss_kib: kib("VmRSS:"),
        threads: kib("Threads:"),
    })
}

/// The machine's busy and total jiffies (all CPUs) from `/proc/stat`.
pub fn machine_jiffies() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat
        .lines()
        .next()
        .ok_or_else(|| anyhow::anyhow!("empty /proc/stat"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is counted in user already)
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Ok((total - idle, total))
}

/// Raises this process's open-file limit to its hard limit (children inherit it); returns
/// the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    lim.rlim_cur
}

/// CPU and memory of the three servers, this process and the machine at one moment.
pub(crate) struct Snapshot {
    pub(crate) at: Instant,
    nodes: Vec<(u64, ProcSample)>,
    pub(crate) bench: ProcSample,
    machine: (u64, u64),
}

pub(crate) fn snapshot(cluster: &ProcessCluster) -> anyhow::Result<Snapshot> {
    let mut nodes = Vec::new();
    for n in &cluster.nodes {
        nodes.push((n.id, sample(&n.pid().to_string())?));
    }
    Ok(Snapshot {
        at: Instant::now(),
        nodes,
        bench: sample("self")?,
        machine: machine_jiffies()?,
    })
}

impl Snapshot {
    pub(crate) fn node(&self, id: u64) -> ProcSample {
        self.nodes
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }
}

/// CPU use between two snapshots, as % of one core: per node id, the bench, and the machine
/// (busy % of all cores).
pub(crate) struct CpuUse {
    pub(crate) nodes: Vec<(u64, f64)>,
    pub(crate) bench: f64,
    pub(crate) machine_busy: f64,
}

pub(crate) fn cpu_between(a: &Snapshot, b: &Snapshot) -> CpuUse {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let tck = clock_ticks_per_sec() as f64;
    let pct = |x: ProcSample, y: ProcSample| {
        (y.cpu_ticks.saturating_sub(x.cpu_ticks)) as f64 / tck / secs * 100.0
    };
    let nodes = a
        .nodes
        .iter()
        .map(|(id, s)| (*id, pct(*s, b.node(*id))))
        .collect();
    let (busy, total) = (
        b.machine.0.saturating_sub(a.machine.0) as f64,
        b.machine.1.saturating_sub(a.machine.1) as f64,
    );
    CpuUse {
        nodes,
        bench: pct(a.bench, b.bench),
        machine_busy: if total > 0.0 {
            busy / total * 100.0
        } else {
            0.0
        },
    }
}

impl CpuUse {
    pub(crate) fn of(&self, id: u64) -> f64 {
        self.nodes
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, p)| *p)
            .unwrap_or(0.0)
    }
}

pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
