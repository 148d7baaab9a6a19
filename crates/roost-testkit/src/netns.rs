//! A cluster of real `roost server` processes, each in its own network namespace on a bridge,
//! for fault injection the way Jepsen does it: partitions are blackhole routes inside the
//! namespaces, delay and loss are `tc netem`, crashes and pauses are signals. Needs root and
//! iproute2. Everything it creates carries its tag (`rn<tag>n<i>`, `rv<tag>n<i>`, `rb<tag>`),
//! and only that is removed on drop; the node directories (configs, data, logs) are kept when
//! the caller asks (a failed scenario).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{wait_for, Http};

const HTTP_PORT: u16 = 7480;
const GRPC_PORT: u16 = 7580;

/// Runs `ip` (or another tool) and fails with its stderr.
fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program).args(args).output()?;
    if !out.status.success() {
        anyhow::bail!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Like [`run`], for cleanup: failures are ignored.
fn quietly(program: &str, args: &[&str]) {
    let _ = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// How to stop or freeze a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Kill,
    Stop,
    Cont,
}

struct NetNode {
    id: u64,
    /// Counted among the cluster's nodes ([`NetCluster::ids`]); a spare or a removed node is
    /// not (its namespace stays, for a later [`NetCluster::join`]).
    member: bool,
    ns: String,
    ip: String,
    child: Option<Child>,
    config: PathBuf,
    log: PathBuf,
    data: PathBuf,
}

/// A `roost run-worker` in its own namespace.
struct NetWorker {
    ns: String,
    ip: String,
    child: Child,
    work_dir: PathBuf,
}

pub struct NetCluster {
    worker: Option<NetWorker>,
    tag: u8,
    bridge: String,
    dir: PathBuf,
    binary: PathBuf,
    nodes: Vec<NetNode>,
    pub admin_token: String,
    pub company_id: String,
}

impl NetCluster {
    /// Whether this machine can run the harness: root, and network namespaces that work.
    pub fn available() -> bool {
        // A name of its own per call: tests probe concurrently.
        static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = format!("rnprobe{}-{n}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &probe])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        quietly("ip", &["netns", "del", &probe]);
        ok
    }

    /// Creates the network (a bridge, one namespace and veth pair per node on 10.213.`tag`.0/24)
    /// and starts `n` nodes of `binary` that form a cluster, in `dir`.
    pub async fn start(binary: &Path, n: u64, tag: u8, dir: &Path) -> anyhow::Result<NetCluster> {
        let bridge = format!("rb{tag}");
        let mut cluster = NetCluster {
            worker: None,
            tag,
            bridge: bridge.clone(),
            dir: dir.to_path_buf(),
            binary: binary.to_path_buf(),
            nodes: Vec::new(),
            admin_token: String::new(),
            company_id: String::new(),
        };
        // Leftovers of a crashed earlier run with the same tag go first.
        cluster.teardown_network(n);
        run("ip", &["link", "add", &bridge, "type", "bridge"])?;
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("10.213.{tag}.254/24"),
                "dev",
                &bridge,
            ],
        )?;
        run("ip", &["link", "set", &bridge, "up"])?;
        for id in 1..=n {
            let node = cluster.create_node(id)?;
            cluster.nodes.push(node);
        }
        for id in 1..=n {
            cluster.write_config(id, n)?;
        }
        for id in 1..=n {
            cluster.restart(id)?;
        }
        let token_file = cluster.nodes[0].data.join("admin-token");
        cluster.admin_token = wait_for("the first admin token", Duration::from_secs(30), || {
            let f = token_file.clone();
            async move {
                std::fs::read_to_string(f)
                    .ok()
                    .map(|t| t.trim().to_string())
            }
        })
        .await?;
        let leader = cluster.leader().await?;
        let company = cluster
            .http(leader)
            .post(
                "/api/companies",
                serde_json::json!({ "name": "Faults", "issuePrefix": "FLT" }),
            )
            .await?
            .ok()?;
        cluster.company_id = company["id"].as_str().unwrap_or_default().to_string();
        Ok(cluster)
    }

    /// Writes node `id`'s config: one of the `initial` voters 1..=`initial` of a new cluster,
    /// or (`initial` = 0) a node that waits to be added (`bootstrap = false`, no members).
    fn write_config(&self, id: u64, initial: u64) -> anyhow::Result<()> {
        let tag = self.tag;
        let members: String = (1..=initial)
            .map(|id| {
                format!(
                    "\n[[initial_members]]\nid = {id}\ngrpc_addr = \"10.213.{tag}.{id}:{GRPC_PORT}\"\nhttp_addr = \"10.213.{tag}.{id}:{HTTP_PORT}\"\n"
                )
            })
            .collect();
        let node = self.node(id);
        let bootstrap = if initial == 0 {
            "bootstrap = false\n"
        } else {
            ""
        };
        let config = format!(
            "node_id = {id}\ndata_dir = \"{data}\"\nhttp_listen = \"{ip}:{HTTP_PORT}\"\ngrpc_listen = \"{ip}:{GRPC_PORT}\"\n{bootstrap}\n[raft]\nheartbeat_interval_ms = 100\nelection_timeout_min_ms = 500\nelection_timeout_max_ms = 1000\nwrite_timeout_ms = 3000\nsnapshot_after_entries = 500\nkeep_entries_after_snapshot = 100\n\n[workers]\nheartbeat_interval_ms = 200\nlease_ttl_ms = 2000\n{members}",
            data = node.data.display(),
            ip = node.ip,
        );
        std::fs::create_dir_all(&node.data)?;
        std::fs::write(&node.config, config)?;
        Ok(())
    }

    /// Creates node `id`'s namespace and directory without starting it: a spare that
    /// [`join`](Self::join) starts later. Ids must stay below 100 (the worker's address).
    pub fn add_spare(&mut self, id: u64) -> anyhow::Result<()> {
        anyhow::ensure!(id < 100, "node ids stop at 99");
        anyhow::ensure!(
            !self.nodes.iter().any(|n| n.id == id),
            "node {id} exists already"
        );
        let mut node = self.create_node(id)?;
        node.member = false;
        self.nodes.push(node);
        Ok(())
    }

    /// Starts node `id` (a spare or a removed node) with empty data and a config that waits to
    /// be added, and counts it among the cluster's nodes; the caller then adds it to the
    /// cluster (`POST /api/cluster/nodes`). Its earlier data and log are moved aside.
    pub fn join(&mut self, id: u64) -> anyhow::Result<()> {
        anyhow::ensure!(!self.is_running(id), "node {id} is running");
        let node = self.node(id);
        if node.data.exists() {
            let mut n = 1;
            let mut aside = node.data.with_file_name(format!("data-removed-{n}"));
            while aside.exists() {
                n += 1;
                aside = node.data.with_file_name(format!("data-removed-{n}"));
            }
            std::fs::rename(&node.data, &aside)?;
        }
        self.write_config(id, 0)?;
        self.restart(id)?;
        self.node_mut(id).member = true;
        Ok(())
    }

    /// Stops node `id` (SIGKILL) after the cluster removed it, and stops counting it among
    /// the cluster's nodes. Its namespace and directory stay for a later [`join`](Self::join).
    pub fn leave(&mut self, id: u64) {
        self.signal(id, Signal::Kill);
        self.node_mut(id).member = false;
    }

    /// The gRPC address of node `id`, as members name each other.
    pub fn grpc_addr(&self, id: u64) -> String {
        format!("{}:{GRPC_PORT}", self.node(id).ip)
    }

    /// The REST address of node `id` (no scheme).
    pub fn http_addr(&self, id: u64) -> String {
        format!("{}:{HTTP_PORT}", self.node(id).ip)
    }

    fn create_node(&self, id: u64) -> anyhow::Result<NetNode> {
        let tag = self.tag;
        let ns = format!("rn{tag}n{id}");
        let host_veth = format!("rv{tag}n{id}");
        let peer = format!("rp{tag}n{id}");
        let ip = format!("10.213.{tag}.{id}");
        self.add_namespace(&ns, &host_veth, &peer, &ip)?;
        let node_dir = self.dir.join(format!("node-{id}"));
        std::fs::create_dir_all(&node_dir)?;
        Ok(NetNode {
            id,
            member: true,
            ns,
            ip,
            child: None,
            config: node_dir.join("config.toml"),
            log: node_dir.join("node.log"),
            data: node_dir.join("data"),
        })
    }

    /// A namespace `ns` whose `eth0` (the peer of `host_veth`, on the bridge) has address `ip`.
    fn add_namespace(&self, ns: &str, host_veth: &str, peer: &str, ip: &str) -> anyhow::Result<()> {
        run("ip", &["netns", "add", ns])?;
        run(
            "ip",
            &[
                "link", "add", host_veth, "type", "veth", "peer", "name", peer,
            ],
        )?;
        run("ip", &["link", "set", peer, "netns", ns])?;
        run("ip", &["link", "set", host_veth, "master", &self.bridge])?;
        run("ip", &["link", "set", host_veth, "up"])?;
        let address = format!("{ip}/24");
        for args in [
            &["link", "set", "lo", "up"][..],
            &["link", "set", peer, "name", "eth0"],
            &["addr", "add", &address, "dev", "eth0"],
            &["link", "set", "eth0", "up"],
        ] {
            let mut all = vec!["netns", "exec", ns, "ip"];
            all.extend_from_slice(args);
            run("ip", &all)?;
        }
        Ok(())
    }

    /// Node `id`; ids come from this harness only, so an unknown one is a bug in the caller.
    fn node(&self, id: u64) -> &NetNode {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    fn node_mut(&mut self, id: u64) -> &mut NetNode {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node {id} in this cluster"))
    }

    /// The nodes counted as the cluster's (spares and removed nodes are not).
    pub fn ids(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|n| n.member)
            .map(|n| n.id)
            .collect()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn base_url(&self, id: u64) -> String {
        format!("http://{}:{HTTP_PORT}", self.node(id).ip)
    }

    /// Every node's REST URL, comma-separated, for a client that fails over.
    pub fn all_urls(&self) -> String {
        self.ids()
            .into_iter()
            .map(|id| self.base_url(id))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn http(&self, id: u64) -> Http {
        Http::new(self.base_url(id)).with_token(&self.admin_token)
    }

    /// (Re)starts node `id`'s process, appending to its log.
    pub fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        let binary = self.binary.clone();
        let node = self.node_mut(id);
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)?;
        let child = Command::new("ip")
            .args(["netns", "exec", &node.ns])
            .arg(&binary)
            .arg("server")
            .arg("--config")
            .arg(&node.config)
            .env("ROOST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        node.child = Some(child);
        Ok(())
    }

    /// SIGKILL (the process is gone until [`restart`](Self::restart)), SIGSTOP or SIGCONT.
    pub fn signal(&mut self, id: u64, signal: Signal) {
        let node = self.node_mut(id);
        let Some(child) = node.child.as_mut() else {
            return;
        };
        let name = match signal {
            Signal::Kill => "-KILL",
            Signal::Stop => "-STOP",
            Signal::Cont => "-CONT",
        };
        quietly("kill", &[name, &child.id().to_string()]);
        if signal == Signal::Kill {
            let _ = child.wait();
            node.child = None;
        }
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.node(id).child.is_some()
    }

    /// Cuts every link between nodes in different groups, both ways (blackhole routes).
    pub fn partition(&self, groups: &[&[u64]]) -> anyhow::Result<()> {
        for (gi, group) in groups.iter().enumerate() {
            for (gj, other) in groups.iter().enumerate() {
                if gi == gj {
                    continue;
                }
                for a in group.iter() {
                    for b in other.iter() {
                        let ns = &self.node(*a).ns;
                        let target = format!("{}/32", self.node(*b).ip);
                        run(
                            "ip",
                            &[
                                "netns",
                                "exec",
                                ns,
                                "ip",
                                "route",
                                "replace",
                                "blackhole",
                                &target,
                            ],
                        )?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Node `id` cannot reach the other nodes nor they it (the test client still can).
    pub fn isolate(&self, id: u64) -> anyhow::Result<()> {
        let rest: Vec<u64> = self.ids().into_iter().filter(|n| *n != id).collect();
        self.partition(&[&[id], &rest])
    }

    /// Delay and loss on node `id`'s link (`tc netem`).
    pub fn netem(&self, id: u64, delay_ms: u32, loss_percent: u32) -> anyhow::Result<()> {
        let ns = &self.node(id).ns;
        run(
            "ip",
            &[
                "netns",
                "exec",
                ns,
                "tc",
                "qdisc",
                "replace",
                "dev",
                "eth0",
                "root",
                "netem",
                "delay",
                &format!("{delay_ms}ms"),
                "loss",
                &format!("{loss_percent}%"),
            ],
        )
    }

    /// Starts a worker (`worker_id` `w<tag>`, 4 slots) in its own namespace, joined with
    /// `join_token`, its agents calling node 1's REST API; returns its work directory.
    pub fn start_worker(&mut self, join_token: &str) -> anyhow::Result<PathBuf> {
        let tag = self.tag;
        let ns = format!("rn{tag}w");
        let host_veth = format!("rv{tag}w");
        let peer = format!("rp{tag}w");
        let ip = format!("10.213.{tag}.100");
        self.add_namespace(&ns, &host_veth, &peer, &ip)?;
        let dir = self.dir.join("worker");
        let work_dir = dir.join("work");
        std::fs::create_dir_all(&work_dir)?;
        let servers: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}:{GRPC_PORT}\"", n.ip))
            .collect();
        let config = format!(
            "worker_id = \"w{tag}\"\nservers = [{}]\napi_url = \"{}\"\njoin_token = \"{join_token}\"\nslots = 4\nwork_dir = \"{}\"\ngrace_sec = 1\n",
            servers.join(", "),
            self.base_url(1),
            work_dir.display()
        );
        let config_path = dir.join("worker.toml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.join("worker.log"))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(&self.binary)
            .arg("run-worker")
            .arg("--config")
            .arg(&config_path)
            .env("ROOST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.worker = Some(NetWorker {
            ns,
            ip,
            child,
            work_dir: work_dir.clone(),
        });
        Ok(work_dir)
    }

    /// Cuts the worker off from every node, both ways; its agents' API calls fail too.
    pub fn cut_worker(&self) -> anyhow::Result<()> {
        let Some(w) = &self.worker else {
            anyhow::bail!("no worker started");
        };
        for node in &self.nodes {
            let to_node = format!("{}/32", node.ip);
            let to_worker = format!("{}/32", w.ip);
            run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &w.ns,
                    "ip",
                    "route",
                    "replace",
                    "blackhole",
                    &to_node,
                ],
            )?;
            run(
                "ip",
                &[
                    "netns",
                    "exec",
                    &node.ns,
                    "ip",
                    "route",
                    "replace",
                    "blackhole",
                    &to_worker,
                ],
            )?;
        }
        Ok(())
    }

    pub fn worker_dir(&self) -> Option<&Path> {
        self.worker.as_ref().map(|w| w.work_dir.as_path())
    }

    /// Removes every partition and netem rule.
    pub fn heal(&self) {
        if let Some(w) = &self.worker {
            quietly(
                "ip",
                &[
                    "netns",
                    "exec",
                    &w.ns,
                    "ip",
                    "route",
                    "flush",
                    "type",
                    "blackhole",
                ],
            );
        }
        for node in &self.nodes {
            quietly(
                "ip",
                &[
                    "netns",
                    "exec",
                    &node.ns,
                    "ip",
                    "route",
                    "flush",
                    "type",
                    "blackhole",
                ],
            );
            quietly(
                "ip",
                &[
                    "netns", "exec", &node.ns, "tc", "qdisc", "del", "dev", "eth0", "root",
                ],
            );
        }
    }

    /// The leader as the reachable nodes report it.
    pub async fn leader(&self) -> anyhow::Result<u64> {
        wait_for("a leader", Duration::from_secs(30), || async {
            for id in self.ids() {
                if !self.is_running(id) {
                    continue;
                }
                let reply = self.http(id).get("/api/cluster/node").await.ok()?;
                if let Some(l) = reply.body["leaderId"].as_u64() {
                    return Some(l);
                }
            }
            None
        })
        .await
    }

    /// The last lines of every node's log, for a failure report.
    pub fn log_tails(&self, lines: usize) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(&n.log).unwrap_or_default();
                let all: Vec<&str> = text.lines().collect();
                format!(
                    "--- node {} ({})\n{}",
                    n.id,
                    n.log.display(),
                    all[all.len().saturating_sub(lines)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn teardown_network(&self, n: u64) {
        for id in 1..=n.max(self.nodes.len() as u64) {
            quietly("ip", &["netns", "del", &format!("rn{}n{id}", self.tag)]);
            quietly("ip", &["link", "del", &format!("rv{}n{id}", self.tag)]);
        }
        quietly("ip", &["netns", "del", &format!("rn{}w", self.tag)]);
        quietly("ip", &["link", "del", &format!("rv{}w", self.tag)]);
        quietly("ip", &["link", "del", &self.bridge]);
    }
}

impl Drop for NetCluster {
    fn drop(&mut self) {
        if let Some(mut w) = self.worker.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
            quietly("ip", &["netns", "del", &w.ns]);
            quietly("ip", &["link", "del", &format!("rv{}w", self.tag)]);
        }
        for node in &mut self.nodes {
            if let Some(mut c) = node.child.take() {
                // A stopped process must be continued to die promptly.
                quietly("kill", &["-CONT", &c.id().to_string()]);
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        self.teardown_network(self.nodes.len() as u64);
    }
}
