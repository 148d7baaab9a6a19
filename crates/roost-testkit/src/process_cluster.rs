//! The one launcher of real `roost server` processes that form a cluster from their configs:
//! it writes each node's config, starts the processes (optionally behind a command prefix such
//! as `ip netns exec <ns>`), waits for the first admin token, kills, restarts and wipes nodes,
//! and stops every process when dropped. The e2e tests, the benchmarks and the network fault
//! harness ([`crate::NetCluster`]) all start their servers through it.
//!
//! Files, under the cluster's directory ([`Layout::Flat`], the default): the config
//! `node-N.toml`, the data `node-N/` (the admin token `node-N/admin-token`) and the server's
//! stderr `node-N.log`, appended to across restarts.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::{client_trusting, wait_for, Http};

/// `binary server --config config`, with no stdin and its stdout and stderr discarded (the
/// caller sets `stderr` to keep a log).
pub fn server_command(binary: &Path, config: &Path) -> Command {
    prefixed_server_command(&[], binary, config)
}

/// [`server_command`] run by the command `prefix` (empty: none), e.g. `ip netns exec <ns>`.
fn prefixed_server_command(prefix: &[OsString], binary: &Path, config: &Path) -> Command {
    let mut command = match prefix.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    command
        .args(["server", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Makes the process `command` starts get SIGKILL when the harness thread that started it
/// ends (the harness was killed, or ended without dropping what owns the process), so no
/// `roost` process outlives it. A command prefix that execs in place (`ip netns exec`) passes
/// the flag on to the roost process itself. Harnesses start processes from their runtime's
/// threads, which live as long as the processes' owner.
pub fn die_with_harness(command: &mut Command) -> &mut Command {
    let harness = std::process::id();
    // SAFETY: between fork and exec this calls only prctl, getppid and _exit, which are
    // async-signal-safe and allocate nothing (as crates/roost-worker/src/adapter/child.rs).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The harness died before the flag was set: nobody will signal this process.
            if libc::getppid() as u32 != harness {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    command
}

/// A node's listeners, `host:port` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddrs {
    pub http: String,
    pub grpc: String,
    pub peer: String,
}

impl NodeAddrs {
    /// Three free loopback addresses ([`crate::ports::free_addr`]).
    pub fn free() -> anyhow::Result<NodeAddrs> {
        Ok(NodeAddrs {
            http: crate::ports::free_addr()?,
            grpc: crate::ports::free_addr()?,
            peer: crate::ports::free_addr()?,
        })
    }
}

/// Where a node's files are under the cluster's directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// `node-N.toml`, data in `node-N/`, log `node-N.log`.
    #[default]
    Flat,
    /// `node-N/config.toml`, data in `node-N/data`, log `node-N/node.log`.
    Nested,
}

impl Layout {
    /// (config, data, log) of node `id` under `dir`.
    fn paths(self, dir: &Path, id: u64) -> (PathBuf, PathBuf, PathBuf) {
        match self {
            Layout::Flat => (
                dir.join(format!("node-{id}.toml")),
                dir.join(format!("node-{id}")),
                dir.join(format!("node-{id}.log")),
            ),
            Layout::Nested => {
                let node = dir.join(format!("node-{id}"));
                (
                    node.join("config.toml"),
                    node.join("data"),
                    node.join("node.log"),
                )
            }
        }
    }
}

type PerNode<T> = Box<dyn Fn(u64) -> T + Send + Sync>;

/// Settings of a [`ProcessCluster`]; [`ProcessCluster::builder`].
pub struct ProcessClusterBuilder {
    binary: PathBuf,
    servers: u64,
    dir: Option<PathBuf>,
    prefix: String,
    layout: Layout,
    node_config: PerNode<String>,
    certs: Option<PathBuf>,
    addrs: PerNode<anyhow::Result<NodeAddrs>>,
    wrapper: Option<PerNode<Vec<OsString>>>,
    env: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    token_deadline: Duration,
}

impl ProcessClusterBuilder {
    /// Nodes 1..=`n` are the initial members (default 3).
    pub fn servers(mut self, n: u64) -> Self {
        self.servers = n;
        self
    }

    /// The directory for configs, data and logs (default: a new temporary directory, removed
    /// on drop unless [`ProcessCluster::keep_dir`]). A given directory is never removed.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// The name prefix of the temporary directory.
    pub fn temp_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_string();
        self
    }

    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// More config text for node `id`, after the node's own keys and before `[tls]` and the
    /// members: top-level keys first (`shutdown_grace_secs = 5`), then tables (`[raft]`).
    pub fn node_config(mut self, text: impl Fn(u64) -> String + Send + Sync + 'static) -> Self {
        self.node_config = Box::new(text);
        self
    }

    /// TLS everywhere with the certificates in `certs` (laid out by `roost cert`: `ca.pem`,
    /// `node-N.pem`, `node-N-key.pem`): each node's `[tls]`, `https://` URLs and REST clients
    /// trusting the CA.
    pub fn tls(mut self, certs: impl Into<PathBuf>) -> Self {
        self.certs = Some(certs.into());
        self
    }

    /// The listeners of node `id` (default: [`NodeAddrs::free`]).
    pub fn addrs(
        mut self,
        addrs: impl Fn(u64) -> anyhow::Result<NodeAddrs> + Send + Sync + 'static,
    ) -> Self {
        self.addrs = Box::new(addrs);
        self
    }

    /// A command prefix node `id`'s server runs under (`ip netns exec <ns>`); it must exec the
    /// server in place so that the process started is the server.
    pub fn wrapper(
        mut self,
        prefix: impl Fn(u64) -> Vec<OsString> + Send + Sync + 'static,
    ) -> Self {
        self.wrapper = Some(Box::new(prefix));
        self
    }

    /// An environment variable of every server (`ROOST_LOG`, `NO_COLOR`).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A variable of this process that the servers do not inherit.
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env_remove.push(key.into());
        self
    }

    /// How long [`ProcessCluster::start`] waits for the first admin token (default 60 s).
    pub fn token_deadline(mut self, deadline: Duration) -> Self {
        self.token_deadline = deadline;
        self
    }

    /// The cluster with its initial members' addresses and files chosen, nothing written or
    /// started yet: [`ProcessCluster::start`] does that.
    pub fn build(self) -> anyhow::Result<ProcessCluster> {
        let (dir, temp) = match &self.dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new().prefix(&self.prefix).tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let client = match &self.certs {
            Some(c) => {
                let ca = c.join("ca.pem");
                let pem = std::fs::read(&ca).with_context(|| format!("read {}", ca.display()))?;
                Some(client_trusting(&pem)?)
            }
            None => None,
        };
        let mut cluster = ProcessCluster {
            nodes: Vec::new(),
            admin_token: String::new(),
            dir,
            temp,
            keep: false,
            initial: (1..=self.servers).collect(),
            client,
            settings: self,
        };
        for id in cluster.initial.clone() {
            let addrs = (cluster.settings.addrs)(id)?;
            cluster.add_node(id, addrs)?;
        }
        Ok(cluster)
    }

    /// [`build`](Self::build), then [`ProcessCluster::start`].
    pub async fn start(self) -> anyhow::Result<ProcessCluster> {
        let mut cluster = self.build()?;
        cluster.start().await?;
        Ok(cluster)
    }
}

/// One `roost server` of a [`ProcessCluster`] (its process, when running, belongs to it).
pub struct ServerNode {
    pub id: u64,
    /// `scheme://host:port`
    pub http: String,
    /// `host:port` of the REST listener
    pub http_addr: String,
    /// `host:port`
    pub grpc: String,
    /// `host:port` of the peer listener (the Raft service)
    pub peer: String,
    pub config: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl ServerNode {
    /// The process id; 0 when not running.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether a process was started and not killed or found exited since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The exit status, once the process has ended (`None` while it runs or when none runs).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => c.try_wait(),
            None => Ok(None),
        }
    }

    /// The exit status of a process that ended on its own, which is then forgotten.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.try_wait().ok().flatten()?;
        self.child = None;
        Some(status)
    }

    /// SIGKILL (a stopped process is continued first), then reap.
    pub fn kill(&mut self) -> std::io::Result<()> {
        if let Some(mut c) = self.child.take() {
            let _ = send(c.id(), libc::SIGCONT);
            c.kill()?;
            c.wait()?;
        }
        Ok(())
    }

    /// Sends `signal` (`libc::SIGTERM`, `libc::SIGSTOP`, ...) to the running process.
    pub fn signal(&self, signal: i32) -> anyhow::Result<()> {
        let child = self
            .child
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("node {} is not running", self.id))?;
        send(child.id(), signal)
    }
}

impl Drop for ServerNode {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

fn send(pid: u32, signal: i32) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(pid)?;
    // SAFETY: kill(2) with our own child's pid and a signal number has no memory effects.
    anyhow::ensure!(
        unsafe { libc::kill(pid, signal) } == 0,
        "kill({pid}, {signal}) failed"
    );
    Ok(())
}

/// `roost server` processes forming one cluster; [`ProcessCluster::builder`]. Every process
/// is killed when the cluster is dropped.
pub struct ProcessCluster {
    /// Node `id`s in the order they were added (initial members first).
    pub nodes: Vec<ServerNode>,
    /// The first admin token (written by the lowest initial member).
    pub admin_token: String,
    dir: PathBuf,
    temp: Option<tempfile::TempDir>,
    keep: bool,
    /// The initial members' ids.
    initial: Vec<u64>,
    /// With TLS: trusts the cluster CA.
    client: Option<reqwest::Client>,
    settings: ProcessClusterBuilder,
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        // Every process before the directory goes.
        for n in &mut self.nodes {
            let _ = n.kill();
        }
        if self.keep {
            if let Some(t) = self.temp.take() {
                let _ = t.keep();
            }
        }
    }
}

impl ProcessCluster {
    /// Three servers of `binary` on free loopback ports in a temporary directory, without TLS,
    /// with the servers' default settings; see the builder's methods.
    pub fn builder(binary: impl Into<PathBuf>) -> ProcessClusterBuilder {
        ProcessClusterBuilder {
            binary: binary.into(),
            servers: 3,
            dir: None,
            prefix: "roost-cluster-".into(),
            layout: Layout::Flat,
            node_config: Box::new(|_| String::new()),
            certs: None,
            addrs: Box::new(|_| NodeAddrs::free()),
            wrapper: None,
            env: Vec::new(),
            env_remove: Vec::new(),
            token_deadline: Duration::from_secs(60),
        }
    }

    /// Writes the initial members' configs, starts them and waits for the first admin token.
    /// On a timeout a temporary directory is kept, for its logs.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        for id in self.initial.clone() {
            self.write_config(id, false)?;
        }
        for id in self.initial.clone() {
            self.restart(id)?;
        }
        let first = self.initial.iter().copied().min().unwrap_or(1);
        let token_file = self.data_dir(first).join("admin-token");
        let token = wait_for(
            &format!("node {first} to write the first admin token"),
            self.settings.token_deadline,
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
        .await;
        self.admin_token = token.map_err(|e| {
            self.keep_dir();
            anyhow::anyhow!("{e} (server logs in {})", self.dir.display())
        })?;
        Ok(())
    }

    /// Adds node `id` listening on `addrs`, not started and with no config written yet (a
    /// spare: [`write_config`](Self::write_config) with `joining`, then
    /// [`restart`](Self::restart)).
    pub fn add_node(&mut self, id: u64, addrs: NodeAddrs) -> anyhow::Result<()> {
        anyhow::ensure!(self.node(id).is_none(), "node {id} exists already");
        let (config, data, log) = self.settings.layout.paths(&self.dir, id);
        let scheme = self.scheme();
        self.nodes.push(ServerNode {
            id,
            http: format!("{scheme}://{}", addrs.http),
            http_addr: addrs.http,
            grpc: addrs.grpc,
            peer: addrs.peer,
            config,
            data,
            log,
            child: None,
        });
        Ok(())
    }

    /// Writes node `id`'s config: one of the initial members of a new cluster, or (`joining`)
    /// a node that waits to be added (`bootstrap = false`, no members).
    pub fn write_config(&self, id: u64, joining: bool) -> anyhow::Result<()> {
        let node = self.expect(id)?;
        let mut text = format!(
            "node_id = {id}\ndata_dir = \"{}\"\nhttp_listen = \"{}\"\ngrpc_listen = \"{}\"\npeer_listen = \"{}\"\n",
            node.data.display(),
            node.http_addr,
            node.grpc,
            node.peer
        );
        if joining {
            text.push_str("bootstrap = false\n");
        }
        text.push('\n');
        text.push_str(&(self.settings.node_config)(id));
        if let Some(c) = &self.settings.certs {
            text.push_str(&format!(
                "[tls]\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\n\n",
                c.join("ca.pem").display(),
                c.join(format!("node-{id}.pem")).display(),
                c.join(format!("node-{id}-key.pem")).display()
            ));
        }
        if !joining {
            for m in self.initial.iter().filter_map(|m| self.node(*m)) {
                text.push_str(&format!(
                    "[[initial_members]]\nid = {}\ngrpc_addr = \"{}\"\nhttp_addr = \"{}\"\npeer_addr = \"{}\"\n\n",
                    m.id, m.grpc, m.http_addr, m.peer
                ));
            }
        }
        if let Some(parent) = node.config.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&node.config, text)?;
        Ok(())
    }

    /// (Re)starts node `id` from its config with the same addresses and data, appending to its
    /// log; a process still running is killed first.
    pub fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        let settings = &self.settings;
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .ok_or_else(|| anyhow::anyhow!("no node {id}"))?;
        node.kill()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .with_context(|| format!("open {}", node.log.display()))?;
        let prefix = settings.wrapper.as_ref().map(|w| w(id)).unwrap_or_default();
        let mut command = prefixed_server_command(&prefix, &settings.binary, &node.config);
        command.stderr(log);
        for (k, v) in &settings.env {
            command.env(k, v);
        }
        for k in &settings.env_remove {
            command.env_remove(k);
        }
        die_with_harness(&mut command);
        let child = command
            .spawn()
            .with_context(|| format!("start node {id} ({})", settings.binary.display()))?;
        node.child = Some(child);
        Ok(())
    }

    /// Kills node `id` with SIGKILL (no shutdown: as a crash) and reaps it.
    pub fn kill(&mut self, id: u64) -> anyhow::Result<()> {
        self.expect_mut(id)?.kill()?;
        Ok(())
    }

    /// Removes node `id`'s data directory (the node must not be running).
    pub fn wipe(&mut self, id: u64) -> anyhow::Result<()> {
        let node = self.expect(id)?;
        anyhow::ensure!(!node.is_running(), "node {id} is running");
        if node.data.exists() {
            std::fs::remove_dir_all(&node.data)?;
        }
        Ok(())
    }

    /// Moves node `id`'s data directory aside (next to it, `<name>-removed-N`), for a fresh
    /// start with the old data kept to read; returns where it went, if there was any.
    pub fn set_data_aside(&mut self, id: u64) -> anyhow::Result<Option<PathBuf>> {
        let node = self.expect(id)?;
        anyhow::ensure!(!node.is_running(), "node {id} is running");
        if !node.data.exists() {
            return Ok(None);
        }
        let name = node
            .data
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut n = 1;
        let aside = loop {
            let aside = node.data.with_file_name(format!("{name}-removed-{n}"));
            if !aside.exists() {
                break aside;
            }
            n += 1;
        };
        std::fs::rename(&node.data, &aside)?;
        Ok(Some(aside))
    }

    pub fn node(&self, id: u64) -> Option<&ServerNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn node_mut(&mut self, id: u64) -> Option<&mut ServerNode> {
        self.nodes.iter_mut().find(|n| n.id == id)
    }

    fn expect(&self, id: u64) -> anyhow::Result<&ServerNode> {
        self.node(id).ok_or_else(|| anyhow::anyhow!("no node {id}"))
    }

    fn expect_mut(&mut self, id: u64) -> anyhow::Result<&mut ServerNode> {
        self.node_mut(id)
            .ok_or_else(|| anyhow::anyhow!("no node {id}"))
    }

    /// Node `id`'s process id; 0 when it is not running.
    pub fn pid(&self, id: u64) -> u32 {
        self.node(id).map_or(0, ServerNode::pid)
    }

    /// Node `id`'s data directory (`state.db`, `raft-log.db`, `snapshots/`, `admin-token`).
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.node(id)
            .map(|n| n.data.clone())
            .unwrap_or_else(|| self.settings.layout.paths(&self.dir, id).1)
    }

    /// The directory with the configs, data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Leaves a temporary directory behind when the cluster is dropped (to read the logs
    /// after a failure).
    pub fn keep_dir(&mut self) {
        self.keep = true;
    }

    /// Whether the nodes serve TLS ([`ProcessClusterBuilder::tls`]).
    pub fn tls(&self) -> bool {
        self.client.is_some()
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.settings.certs.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// A REST client of `base` (a URL of this cluster), trusting the CA with TLS.
    pub fn client_of(&self, base: impl Into<String>) -> Http {
        match &self.client {
            Some(c) => Http::with_client(c.clone(), base),
            None => Http::new(base),
        }
    }

    /// An administrator's REST client of node `id` (of the first node if there is no `id`).
    pub fn admin(&self, id: u64) -> Http {
        let node = self.node(id).unwrap_or(&self.nodes[0]);
        self.client_of(node.http.clone())
            .with_token(&self.admin_token)
    }

    pub fn grpc_addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.grpc.clone()).collect()
    }

    /// Every node's REST URL, comma-separated, for a client that fails over.
    pub fn all_urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.http.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The cluster status as a node reports it, once every node is a healthy member and
    /// there is a leader.
    pub async fn healthy_status(&self, deadline: Duration) -> anyhow::Result<Value> {
        let count = self.nodes.len();
        wait_for("every member healthy", deadline, || async {
            for n in &self.nodes {
                let Ok(reply) = self.admin(n.id).get("/api/cluster/status").await else {
                    continue;
                };
                let Ok(s) = reply.ok() else { continue };
                let healthy = s["members"].as_array().is_some_and(|ms| {
                    ms.len() == count
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

    /// The last `lines` lines of every node's log, for a failure report, after any panic a
    /// log holds (a task that panicked early is silent in the last lines).
    pub fn log_tails(&self, lines: usize) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(&n.log).unwrap_or_default();
                let all: Vec<&str> = text.lines().collect();
                format!(
                    "--- node {} ({})\n{}{}",
                    n.id,
                    n.log.display(),
                    panics(&all),
                    all[all.len().saturating_sub(lines)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Each panic in a log's `lines` with the lines after it (at most three panics), or nothing.
fn panics(lines: &[&str]) -> String {
    const AFTER: usize = 6;
    let mut out = String::new();
    for (i, _) in lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("panicked at"))
        .take(3)
    {
        out.push_str("panic:\n");
        out.push_str(&lines[i..lines.len().min(i + AFTER)].join("\n"));
        out.push_str("\n...\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_every_initial_member_and_a_joiner_none() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut cluster = ProcessCluster::builder("/nonexistent/roost")
            .dir(dir.path())
            .node_config(|id| {
                format!("shutdown_grace_secs = {id}\n\n[raft]\nheartbeat_interval_ms = 50\n\n")
            })
            .build()?;
        cluster.write_config(2, false)?;
        let text = std::fs::read_to_string(dir.path().join("node-2.toml"))?;
        assert!(text.starts_with("node_id = 2\n"), "{text}");
        assert!(text.contains("shutdown_grace_secs = 2\n"), "{text}");
        assert_eq!(text.matches("[[initial_members]]").count(), 3, "{text}");
        assert!(!text.contains("bootstrap"), "{text}");
        // Top-level keys before every table, the members last.
        let at = |needle: &str| text.find(needle).unwrap_or(usize::MAX);
        assert!(at("shutdown_grace_secs") < at("[raft]"), "{text}");
        assert!(at("[raft]") < at("[[initial_members]]"), "{text}");

        cluster.add_node(4, NodeAddrs::free()?)?;
        cluster.write_config(4, true)?;
        let text = std::fs::read_to_string(dir.path().join("node-4.toml"))?;
        assert!(text.contains("bootstrap = false\n"), "{text}");
        assert!(!text.contains("initial_members"), "{text}");
        assert_eq!(cluster.data_dir(4), dir.path().join("node-4"));
        assert_eq!(cluster.nodes.len(), 4);
        Ok(())
    }

    #[test]
    fn the_nested_layout_keeps_a_directory_per_node() {
        let (config, data, log) = Layout::Nested.paths(Path::new("/d"), 2);
        assert_eq!(config, Path::new("/d/node-2/config.toml"));
        assert_eq!(data, Path::new("/d/node-2/data"));
        assert_eq!(log, Path::new("/d/node-2/node.log"));
    }
}
