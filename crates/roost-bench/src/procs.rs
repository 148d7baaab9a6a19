//! A 3-node cluster of real `roost server` processes in a temporary directory, and what
//! `/proc` says about them (CPU time, resident memory). The processes are killed when the
//! cluster is dropped, also on an error or an interrupt.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use roost_testkit::{client_trusting, wait_for, Http};
use serde_json::Value;

pub struct ServerNode {
    pub id: u64,
    pub http: String,
    pub grpc: String,
    child: Child,
}

impl ServerNode {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

pub struct ProcessCluster {
    pub nodes: Vec<ServerNode>,
    pub admin_token: String,
    /// Configs, data and the servers' logs (`node-N.log`); removed when the cluster is
    /// dropped unless `keep_dir` was called.
    pub dir: tempfile::TempDir,
    keep: bool,
    /// The `roost` binary, to restart a killed node.
    binary: PathBuf,
    /// With TLS: a REST client trusting the cluster CA (the nodes serve `https://`).
    tls_http: Option<Http>,
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            let _ = n.child.kill();
            let _ = n.child.wait();
        }
        if self.keep {
            // Swap in an empty directory (removed as usual) to take the real one out.
            if let Ok(empty) = tempfile::tempdir() {
                let _ = std::mem::replace(&mut self.dir, empty).keep();
            }
        }
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

/// `roost server --config config`, its stderr to `log`. The config file alone sets the
/// runtime's threads: the variables that would override it are not passed on, so a shell's
/// `ROOST_RUNTIME_THREADS` cannot make the printed setting untrue.
pub fn server_command(binary: &Path, config: &Path, log: std::fs::File) -> Command {
    let mut command = Command::new(binary);
    command
        .args(["server", "--config"])
        .arg(config)
        .env_remove("ROOST_RUNTIME_THREADS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    command
}

fn free_addr() -> anyhow::Result<String> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .to_string())
}

impl ProcessCluster {
    /// Starts three `roost server` processes with default Raft and worker timing (the configs
    /// set only ids, addresses, `initial_members` and `runtime_threads`) and waits for a leader
    /// and the first admin token.
    pub async fn start(binary: &Path, runtime_threads: usize) -> anyhow::Result<ProcessCluster> {
        Self::start_with_tls(binary, runtime_threads, None).await
    }

    /// As [`ProcessCluster::start`]; with `certs` (a directory laid out by `roost cert`:
    /// `ca.pem`, `node-N.pem`, `node-N-key.pem`), every listener of every node serves TLS and
    /// the nodes reach each other through their peer listeners with their node certificates
    /// (the `[tls]` of deploy/cluster-node-1.toml).
    pub async fn start_with_tls(
        binary: &Path,
        runtime_threads: usize,
        certs: Option<&Path>,
    ) -> anyhow::Result<ProcessCluster> {
        let tls_http = match certs {
            Some(c) => {
                let ca = c.join("ca.pem");
                let pem = std::fs::read(&ca).with_context(|| format!("read {}", ca.display()))?;
                Some(Http::with_client(client_trusting(&pem)?, ""))
            }
            None => None,
        };
        let dir = tempfile::Builder::new()
            .prefix("roost-bench-workers-")
            .tempdir()?;
        let mut addrs = Vec::new();
        let mut members = String::new();
        for id in 1..=3u64 {
            let (http, grpc, peer) = (free_addr()?, free_addr()?, free_addr()?);
            members.push_str(&format!(
                "[[initial_members]]\nid = {id}\ngrpc_addr = \"{grpc}\"\nhttp_addr = \"{http}\"\npeer_addr = \"{peer}\"\n\n"
            ));
            addrs.push((id, http, grpc, peer));
        }
        let root = dir.path().to_path_buf();
        let mut cluster = ProcessCluster {
            nodes: Vec::new(),
            admin_token: String::new(),
            dir,
            keep: false,
            binary: binary.to_path_buf(),
            tls_http,
        };
        for (id, http, grpc, peer) in addrs {
            let data = root.join(format!("node-{id}"));
            // The load comes from a few credentials at thousands of requests a second: no
            // per-credential rate limit (crates/roost-server/src/limits.rs).
            let tls = match certs {
                Some(c) => format!(
                    "[tls]\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\n\n",
                    c.join("ca.pem").display(),
                    c.join(format!("node-{id}.pem")).display(),
                    c.join(format!("node-{id}-key.pem")).display()
                ),
                None => String::new(),
            };
            let config = format!(
                "node_id = {id}\ndata_dir = \"{}\"\nhttp_listen = \"{http}\"\ngrpc_listen = \"{grpc}\"\npeer_listen = \"{peer}\"\nruntime_threads = {runtime_threads}\n\n{tls}[limits]\nrequests_per_second = 0\n\n{members}",
                data.display()
            );
            std::fs::write(root.join(format!("node-{id}.toml")), config)?;
            let child = cluster.spawn(id)?;
            cluster.nodes.push(ServerNode {
                id,
                http: format!("{}://{http}", cluster.scheme()),
                grpc,
                child,
            });
        }
        let token_file = root.join("node-1").join("admin-token");
        cluster.admin_token = wait_for(
            "node 1 to write the first admin token",
            Duration::from_secs(60),
            || {
                let f = token_file.clone();
                async move {
                    std::fs::read_to_string(&f)
                        .ok()
                        .map(|t| t.trim().to_string())
                        .filter(|t| !t.is_empty())
                }
            },
        )
        .await
        .map_err(|e| {
            cluster.keep_dir();
            anyhow::anyhow!("{e} (server logs kept in {})", root.display())
        })?;
        Ok(cluster)
    }

    /// Starts node `id`'s `roost server` from its config, appending to its log.
    fn spawn(&self, id: u64) -> anyhow::Result<Child> {
        let root = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join(format!("node-{id}.log")))?;
        let mut command = server_command(&self.binary, &root.join(format!("node-{id}.toml")), log);
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill the server
        // if this process dies without running its destructors (SIGKILL, abort).
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        Ok(command.spawn()?)
    }

    /// Kills node `id` with SIGKILL (no shutdown: as a crash) and reaps it.
    pub fn kill(&mut self, id: u64) -> anyhow::Result<()> {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        node.child.kill()?;
        node.child.wait()?;
        Ok(())
    }

    /// Starts node `id` again (after `kill`) with the same config, addresses and data.
    pub fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        let child = self.spawn(id)?;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        node.child = child;
        Ok(())
    }

    /// Node `id`'s data directory (`state.db`, `raft-log.db`, `snapshots/`).
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// The directory with the configs, data and logs.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Leaves the directory behind when the cluster is dropped (to read the logs after a
    /// failure).
    pub fn keep_dir(&mut self) {
        self.keep = true;
    }

    pub fn admin(&self, id: u64) -> Http {
        let node = self
            .nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or(&self.nodes[0]);
        match &self.tls_http {
            Some(h) => h.at(node.http.clone()).with_token(&self.admin_token),
            None => Http::new(node.http.clone()).with_token(&self.admin_token),
        }
    }

    /// Whether the nodes serve TLS ([`ProcessCluster::start_with_tls`]).
    pub fn tls(&self) -> bool {
        self.tls_http.is_some()
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls() {
            "https"
        } else {
            "http"
        }
    }

    pub fn grpc_addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.grpc.clone()).collect()
    }

    pub fn node(&self, id: u64) -> Option<&ServerNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The cluster status as the leader reports it, once every member is healthy.
    pub async fn healthy_status(&self, deadline: Duration) -> anyhow::Result<Value> {
        wait_for("every member healthy", deadline, || async {
            for n in &self.nodes {
                let Ok(reply) = self.admin(n.id).get("/api/cluster/status").await else {
                    continue;
                };
                let Ok(s) = reply.ok() else { continue };
                let healthy = s["members"].as_array().is_some_and(|ms| {
                    ms.len() == 3
                        && ms.iter().all(|m| {
                            ["leader", "healthy"].contains(&m["health"].as_str().unwrap_or(""))
                        })
                });
                if healthy && s["leaderId"].as_u64().is_some() {
                    return Some(s);
                }
            }
            None
        })
        .await
    }

    /// The leader's id, once a majority of the nodes report the same leader and that node
    /// reports itself as leader. One node's word is not enough: a node that has just restarted
    /// can still name an old leader (and a failover trial would then kill a follower). Each
    /// report hashes the whole state (cached per applied index): not free on a large state.
    pub async fn leader(&self) -> Option<u64> {
        let mut named: Vec<(u64, u64)> = Vec::new();
        for n in &self.nodes {
            if let Ok(Ok(s)) = self
                .admin(n.id)
                .get("/api/cluster/node")
                .await
                .map(|r| r.ok())
            {
                if let Some(l) = s["leaderId"].as_u64() {
                    named.push((n.id, l));
                }
            }
        }
        let majority = self.nodes.len() / 2 + 1;
        named.iter().map(|(_, l)| *l).find(|l| {
            named.iter().filter(|(_, m)| m == l).count() >= majority
                && named.iter().any(|(by, m)| by == l && m == l)
        })
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
