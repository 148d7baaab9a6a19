//! A cluster of real `roost server` processes, each in its own network namespace on a bridge,
//! for fault injection the way Jepsen does it: partitions are nftables drops inside the
//! namespaces (silent, as a real partition is: a dial waits, an open connection hears
//! nothing), delay and loss are `tc netem`, crashes and pauses are signals. The servers are a
//! [`ProcessCluster`] (configs, processes, the admin token) whose nodes run behind an
//! `ip netns exec <ns>` prefix; this adds the network and its faults. Needs root,
//! iproute2 and nftables. Everything it creates carries its tag (`rn<tag>n<i>`, `rv<tag>n<i>`, `rb<tag>`),
//! and only that is removed on drop; the node directories (configs, data, logs) are kept for
//! the caller to read or remove.
//!
//! Every listener serves TLS with certificates from a CA of the cluster's own (`roost cert`, in
//! `<dir>/certs`): the nodes reach each other through their peer listeners with their node
//! certificates, the worker and the REST clients trust the CA ([`NetCluster::http`]).
//!
//! One cluster per tag at a time on the machine: a cluster holds an exclusive lock on
//! `/run/roost-faults-<tag>.lock` (or the same name under the temporary directory) from before
//! it sweeps a crashed run's leftovers until its namespaces are gone, so a second run with the
//! same tag waits instead of deleting the first one's namespaces. Every process it starts gets
//! SIGKILL if the harness dies without dropping the cluster.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::process_cluster::{die_with_harness, Layout, NodeAddrs, ProcessCluster};
use crate::{wait_for, Http};

const HTTP_PORT: u16 = 7480;
const GRPC_PORT: u16 = 7580;
const PEER_PORT: u16 = 7680;

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

/// Runs `binary` (roost) with `args` and then `path`, and fails with its stderr.
fn roost_command(binary: &Path, args: &[&str], path: &Path) -> anyhow::Result<()> {
    let out = Command::new(binary).args(args).arg(path).output()?;
    anyhow::ensure!(
        out.status.success(),
        "roost {} {}: {}",
        args.join(" "),
        path.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
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

/// The arguments of `ip` that run `args` inside namespace `ns`.
fn in_ns<'a>(ns: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    ["netns", "exec", ns]
        .into_iter()
        .chain(args.iter().copied())
        .collect()
}

/// `ip netns exec ns <args>`.
fn run_in(ns: &str, args: &[&str]) -> anyhow::Result<()> {
    run("ip", &in_ns(ns, args))
}

/// Like [`run_in`], for cleanup: failures are ignored.
fn quietly_in(ns: &str, args: &[&str]) {
    quietly("ip", &in_ns(ns, args))
}

/// The nftables table that carries injected packet loss in a namespace.
const LOSS_TABLE: &str = "roost_loss";

/// Drops `percent`% of the packets in and out of namespace `ns` (replacing earlier loss).
fn drop_randomly(ns: &str, percent: u32) -> anyhow::Result<()> {
    quietly_in(ns, &["nft", "delete", "table", "inet", LOSS_TABLE]);
    let rules = format!(
        "table inet {LOSS_TABLE} {{\n\
         chain input {{ type filter hook input priority 0; numgen random mod 100 < {percent} drop; }}\n\
         chain output {{ type filter hook output priority 0; numgen random mod 100 < {percent} drop; }}\n\
         }}\n"
    );
    let path = std::env::temp_dir().join(format!("{ns}-loss.nft"));
    std::fs::write(&path, rules)?;
    let file = path.display().to_string();
    let applied = run_in(ns, &["nft", "-f", &file]);
    let _ = std::fs::remove_file(&path);
    applied
}

/// The nftables table that carries partitions in a namespace.
const CUT_TABLE: &str = "roost_cut";

/// Namespace `ns` drops every packet from `ip`, as Jepsen's partitions do (`iptables -A INPUT
/// -s ip -j DROP`): the other side's dials and writes get no answer, not an error.
fn drop_from(ns: &str, ip: &str) -> anyhow::Result<()> {
    run_in(ns, &["nft", "add", "table", "inet", CUT_TABLE])?;
    let chain =
        format!("add chain inet {CUT_TABLE} input {{ type filter hook input priority 0; }}");
    run_in(ns, &["nft", &chain])?;
    run_in(
        ns,
        &[
            "nft", "add", "rule", "inet", CUT_TABLE, "input", "ip", "saddr", ip, "drop",
        ],
    )
}

/// The exclusive lock of `tag`, held for a cluster's lifetime (released when the file is
/// closed). Waits, and says so, while another run holds it.
async fn lock_tag(tag: u8) -> anyhow::Result<File> {
    let name = format!("roost-faults-{tag}.lock");
    let open = |path: &Path| {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    };
    let mut path = Path::new("/run").join(&name);
    let mut file = match open(&path) {
        Ok(f) => f,
        Err(_) => {
            path = std::env::temp_dir().join(&name);
            open(&path).with_context(|| format!("cannot open the lock file {}", path.display()))?
        }
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            println!(
                "another run with network tag {tag} holds {} (pid {}): waiting for it to end",
                path.display(),
                holder.trim()
            );
            // A thread of its own, not the runtime's blocking pool: if the caller gives up
            // (Ctrl-C), nothing waits for this thread.
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let _ = tx.send(file.lock().map(|()| file));
            });
            file = rx
                .await
                .context("the lock waiter ended")?
                .with_context(|| format!("cannot lock {}", path.display()))?;
            println!("got {}", path.display());
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    // Who holds it, for a run that waits (diagnostics only).
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// Node `id`'s listeners on the bridge of `tag`.
fn addrs_of(tag: u8, id: u64) -> NodeAddrs {
    let ip = node_ip(tag, id);
    NodeAddrs {
        http: format!("{ip}:{HTTP_PORT}"),
        grpc: format!("{ip}:{GRPC_PORT}"),
        peer: format!("{ip}:{PEER_PORT}"),
    }
}

/// How to stop or freeze a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Kill,
    Stop,
    Cont,
}

/// A node's namespace; its process, config, data and log are [`ProcessCluster`]'s.
struct NetNode {
    id: u64,
    /// Counted among the cluster's nodes ([`NetCluster::ids`]); a spare or a removed node is
    /// not (its namespace stays, for a later [`NetCluster::join`]).
    member: bool,
    ns: String,
    ip: String,
}

/// Node `id`'s address on the bridge of `tag`.
fn node_ip(tag: u8, id: u64) -> String {
    format!("10.213.{tag}.{id}")
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
    /// The cluster CA and every node's certificate and key.
    certs: PathBuf,
    nodes: Vec<NetNode>,
    /// The servers: configs (`node-N/config.toml`), data (`node-N/data`), logs
    /// (`node-N/node.log`) and processes, each run under `ip netns exec rn<tag>n<id>`.
    procs: ProcessCluster,
    pub admin_token: String,
    pub company_id: String,
    /// The tag's lock; the last field, so it is released after [`Drop`] removed the network.
    _lock: File,
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
        // Partitions are nftables rules: a machine without `nft` finds out here, not halfway
        // through a scenario.
        let nft = ok
            && Command::new("ip")
                .args(["netns", "exec", &probe, "nft", "list", "ruleset"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        quietly("ip", &["netns", "del", &probe]);
        nft
    }

    /// Creates the network (a bridge, one namespace and veth pair per node on 10.213.`tag`.0/24)
    /// and starts `n` nodes of `binary` that form a cluster, in `dir`.
    pub async fn start(binary: &Path, n: u64, tag: u8, dir: &Path) -> anyhow::Result<NetCluster> {
        let bridge = format!("rb{tag}");
        let lock = lock_tag(tag).await?;
        let certs = dir.join("certs");
        if !certs.join("ca.pem").exists() {
            roost_command(binary, &["cert", "init", "--dir"], &certs)?;
        }
        // Election timeouts stay at the production defaults, so the faults exercise them.
        let procs = ProcessCluster::builder(binary)
            .servers(n)
            .dir(dir)
            .layout(Layout::Nested)
            .tls(&certs)
            .addrs(move |id| Ok(addrs_of(tag, id)))
            .wrapper(move |id| {
                ["ip", "netns", "exec", &format!("rn{tag}n{id}")]
                    .map(Into::into)
                    .to_vec()
            })
            .node_config(|_| {
                "[raft]\nwrite_timeout_ms = 3000\nsnapshot_after_entries = 500\nkeep_entries_after_snapshot = 100\n\n[workers]\nrenew_interval_ms = 200\nlease_ttl_ms = 2000\n\n".into()
            })
            .env("ROOST_LOG", "info")
            .env("NO_COLOR", "1")
            .token_deadline(Duration::from_secs(30))
            .build()?;
        let mut cluster = NetCluster {
            worker: None,
            tag,
            bridge: bridge.clone(),
            dir: dir.to_path_buf(),
            binary: binary.to_path_buf(),
            certs,
            nodes: Vec::new(),
            procs,
            admin_token: String::new(),
            company_id: String::new(),
            _lock: lock,
        };
        // Leftovers of a crashed earlier run with the same tag go first (under the lock: no
        // live run has this tag).
        cluster.teardown_network();
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
        cluster.procs.start().await?;
        cluster.admin_token = cluster.procs.admin_token.clone();
        let leader = cluster.leader().await?;
        let company = cluster
            .http(leader)
            .post(
                "/api/companies",
                serde_json::json!({ "name": "Faults", "issuePrefix": "FLT" }),
            )
            .await?
            .ok()?;
        cluster.company_id = company["id"]
            .as_str()
            .with_context(|| format!("no company id in {company}"))?
            .to_string();
        Ok(cluster)
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
        self.procs.add_node(id, addrs_of(self.tag, id))?;
        Ok(())
    }

    /// Starts node `id` (a spare or a removed node) with empty data and a config that waits to
    /// be added, and counts it among the cluster's nodes; the caller then adds it to the
    /// cluster (`POST /api/cluster/nodes`). Its earlier data and log are moved aside.
    pub fn join(&mut self, id: u64) -> anyhow::Result<()> {
        anyhow::ensure!(!self.is_running(id), "node {id} is running");
        self.procs.set_data_aside(id)?;
        self.procs.write_config(id, true)?;
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

    /// The peer address of node `id` (its Raft service).
    pub fn peer_addr(&self, id: u64) -> String {
        format!("{}:{PEER_PORT}", self.node(id).ip)
    }

    /// The REST address of node `id` (no scheme).
    pub fn http_addr(&self, id: u64) -> String {
        format!("{}:{HTTP_PORT}", self.node(id).ip)
    }

    /// Node `id`'s namespace and certificate.
    fn create_node(&self, id: u64) -> anyhow::Result<NetNode> {
        let tag = self.tag;
        let ns = format!("rn{tag}n{id}");
        let host_veth = format!("rv{tag}n{id}");
        let peer = format!("rp{tag}n{id}");
        let ip = node_ip(tag, id);
        self.add_namespace(&ns, &host_veth, &peer, &ip)?;
        if !self.certs.join(format!("node-{id}.pem")).exists() {
            let id_arg = id.to_string();
            roost_command(
                &self.binary,
                &[
                    "cert", "issue", "node", "--id", &id_arg, "--host", &ip, "--dir",
                ],
                &self.certs,
            )?;
        }
        Ok(NetNode {
            id,
            member: true,
            ns,
            ip,
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
            let all: Vec<&str> = ["ip"].iter().copied().chain(args.iter().copied()).collect();
            run_in(ns, &all)?;
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
        format!("https://{}:{HTTP_PORT}", self.node(id).ip)
    }

    /// A REST client of `base` (a URL of this cluster) trusting the cluster CA.
    pub fn client_of(&self, base: impl Into<String>) -> Http {
        self.procs.client_of(base)
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
        self.client_of(self.base_url(id))
            .with_token(&self.admin_token)
    }

    /// (Re)starts node `id`'s process, appending to its log.
    pub fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        self.procs.restart(id)
    }

    /// SIGKILL (the process is gone until [`restart`](Self::restart)), SIGSTOP or SIGCONT.
    pub fn signal(&mut self, id: u64, signal: Signal) {
        let Some(node) = self.procs.node_mut(id) else {
            return;
        };
        let _ = match signal {
            Signal::Kill => node.kill().map_err(anyhow::Error::from),
            Signal::Stop => node.signal(libc::SIGSTOP),
            Signal::Cont => node.signal(libc::SIGCONT),
        };
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.procs.node(id).is_some_and(|n| n.is_running())
    }

    /// Restarts, as a supervisor would, every node whose process exited on its own (a node
    /// exits when its Raft core stops); returns their ids and exit statuses.
    pub fn restart_exited(&mut self) -> anyhow::Result<Vec<(u64, String)>> {
        let mut exited = Vec::new();
        for node in self.procs.nodes.iter_mut() {
            if let Some(status) = node.exited() {
                exited.push((node.id, status.to_string()));
            }
        }
        for (id, _) in &exited {
            self.restart(*id)?;
        }
        Ok(exited)
    }

    /// Cuts every link between nodes in different groups, both ways: each node drops what
    /// the other groups send it.
    pub fn partition(&self, groups: &[&[u64]]) -> anyhow::Result<()> {
        for (gi, group) in groups.iter().enumerate() {
            for (gj, other) in groups.iter().enumerate() {
                if gi == gj {
                    continue;
                }
                for a in group.iter() {
                    for b in other.iter() {
                        drop_from(&self.node(*a).ns, &self.node(*b).ip)?;
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

    /// Delay and loss on node `id`'s link with `tc netem`. A kernel without `sch_netem` (this
    /// project's CI VMs have no kernel modules) gets the loss alone, in both directions, from
    /// an nftables table in the node's namespace (`numgen random` drop); `heal` removes both.
    pub fn netem(&self, id: u64, delay_ms: u32, loss_percent: u32) -> anyhow::Result<()> {
        let ns = &self.node(id).ns;
        let delay = format!("{delay_ms}ms");
        let loss = format!("{loss_percent}%");
        let netem = [
            "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", &delay, "loss",
            &loss,
        ];
        let Err(no_netem) = run_in(ns, &netem) else {
            return Ok(());
        };
        drop_randomly(ns, loss_percent)
            .map_err(|e| anyhow::anyhow!("no tc netem ({no_netem}) and no nftables loss ({e})"))
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
        // The cluster admits a worker over TLS only with a worker certificate of its CA.
        let name = format!("w{tag}");
        if !self.certs.join(format!("worker-{name}.pem")).exists() {
            roost_command(
                &self.binary,
                &["cert", "issue", "worker", "--name", &name, "--dir"],
                &self.certs,
            )?;
        }
        let config = format!(
            "worker_id = \"{name}\"\nservers = [{}]\napi_url = \"{}\"\njoin_token = \"{join_token}\"\nslots = 4\nwork_dir = \"{}\"\ngrace_sec = 1\n\n[tls]\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            servers.join(", "),
            self.base_url(1),
            work_dir.display(),
            self.certs.join("ca.pem").display(),
            self.certs.join(format!("worker-{name}.pem")).display(),
            self.certs.join(format!("worker-{name}-key.pem")).display(),
        );
        let config_path = dir.join("worker.toml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.join("worker.log"))?;
        let child = die_with_harness(&mut Command::new("ip"))
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
            drop_from(&w.ns, &node.ip)?;
            drop_from(&node.ns, &w.ip)?;
        }
        Ok(())
    }

    pub fn worker_dir(&self) -> Option<&Path> {
        self.worker.as_ref().map(|w| w.work_dir.as_path())
    }

    /// Removes every partition and netem rule.
    pub fn heal(&self) {
        if let Some(w) = &self.worker {
            quietly_in(&w.ns, &["nft", "delete", "table", "inet", CUT_TABLE]);
        }
        for node in &self.nodes {
            quietly_in(&node.ns, &["nft", "delete", "table", "inet", CUT_TABLE]);
            quietly_in(&node.ns, &["tc", "qdisc", "del", "dev", "eth0", "root"]);
            quietly_in(&node.ns, &["nft", "delete", "table", "inet", LOSS_TABLE]);
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
        self.procs.log_tails(lines)
    }

    /// What each node says of the cluster now (role, term, leader, log, applied index and, on
    /// the leader, what each member is known to hold), for a failure report: a follower the
    /// leader stopped replicating to shows here, not in the last lines of the logs.
    pub async fn raft_views(&self) -> String {
        let mut out = String::new();
        for id in self.ids() {
            let view = match tokio::time::timeout(
                Duration::from_secs(2),
                self.http(id).get("/api/cluster/node"),
            )
            .await
            {
                Ok(Ok(reply)) => {
                    let b = &reply.body;
                    format!(
                        "role {} term {} leader {} last log {} applied {} matched {}",
                        b["role"],
                        b["term"],
                        b["leaderId"],
                        b["lastLogIndex"],
                        b["appliedIndex"],
                        b["matched"]
                    )
                }
                Ok(Err(e)) => format!("no answer: {e:#}"),
                Err(_) => "no answer within 2 s".to_string(),
            };
            let running = if self.is_running(id) {
                ""
            } else {
                " (not running)"
            };
            out.push_str(&format!("node {id}{running}: {view}\n"));
        }
        out
    }

    /// Removes every namespace, veth and the bridge of this tag: this cluster's, and any a
    /// crashed run left (whatever its node count). Called only under the tag's lock.
    fn teardown_network(&self) {
        let tag = self.tag;
        let mut ids: Vec<String> = self.nodes.iter().map(|n| n.id.to_string()).collect();
        // Node namespaces are `rn<tag>n<id>`; the `n` after the tag keeps tag 4 from 41.
        let prefix = format!("rn{tag}n");
        if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let name = line.split_whitespace().next().unwrap_or_default();
                if let Some(id) = name.strip_prefix(&prefix) {
                    if !id.is_empty()
                        && id.chars().all(|c| c.is_ascii_digit())
                        && !ids.iter().any(|i| i == id)
                    {
                        ids.push(id.to_string());
                    }
                }
            }
        }
        for id in ids {
            quietly("ip", &["netns", "del", &format!("rn{tag}n{id}")]);
            quietly("ip", &["link", "del", &format!("rv{tag}n{id}")]);
        }
        quietly("ip", &["netns", "del", &format!("rn{tag}w")]);
        quietly("ip", &["link", "del", &format!("rv{tag}w")]);
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
        // Before the network goes (a stopped process is continued to die promptly).
        for node in &mut self.procs.nodes {
            let _ = node.kill();
        }
        self.teardown_network();
    }
}
