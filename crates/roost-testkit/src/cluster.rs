//! An in-process cluster: N real nodes (Raft over gRPC on loopback, SQLite on disk) in one
//! runtime, with partitions, delays, kills and restarts.

use std::collections::BTreeSet;
use std::time::Duration;

use roost_raft::{NetworkFaults, RaftTiming};
use roost_server::auth::{generate_token, ADMIN_TOKEN_PREFIX};
use roost_server::workers::WorkerConfig;
use roost_server::{Listeners, MemberConfig, Server, ServerConfig};

use crate::http::Http;
use crate::wait_for;

struct Member {
    id: u64,
    config: ServerConfig,
    // The sockets a running node serves; a kill closes them (peers then see "connection
    // refused", as after kill -9) and a restart binds the same addresses again.
    http: Option<std::net::TcpListener>,
    grpc: Option<std::net::TcpListener>,
    peer: Option<std::net::TcpListener>,
    faults: NetworkFaults,
    server: Option<Server>,
}

pub struct TestCluster {
    members: Vec<Member>,
    pub dir: tempfile::TempDir,
    pub admin_token: String,
    pub company_id: String,
}

/// Timing for tests: production elections, shorter write timeouts.
pub fn test_timing() -> RaftTiming {
    // Production's election timing (heartbeat 30 ms, election 100-150 ms), under CI's 2 shared
    // cores: the suite runs its in-process clusters at the timing users get.
    RaftTiming {
        write_timeout_ms: 3_000,
        ..RaftTiming::default()
    }
}

fn listeners(m: &Member) -> std::io::Result<Listeners> {
    let closed = || std::io::Error::other("the node's sockets are closed");
    let http = m.http.as_ref().ok_or_else(closed)?.try_clone()?;
    let grpc = m.grpc.as_ref().ok_or_else(closed)?.try_clone()?;
    let peer = m.peer.as_ref().ok_or_else(closed)?.try_clone()?;
    for socket in [&http, &grpc, &peer] {
        socket.set_nonblocking(true)?;
    }
    Ok(Listeners {
        http: tokio::net::TcpListener::from_std(http)?,
        grpc: tokio::net::TcpListener::from_std(grpc)?,
        peer: tokio::net::TcpListener::from_std(peer)?,
    })
}

impl TestCluster {
    /// Starts `n` voters with default test timing.
    pub async fn start(n: usize) -> anyhow::Result<TestCluster> {
        Self::start_with(n, test_timing()).await
    }

    pub async fn start_with(n: usize, timing: RaftTiming) -> anyhow::Result<TestCluster> {
        Self::start_with_workers(n, timing, WorkerConfig::default()).await
    }

    /// As [`TestCluster::start_with`], with worker heartbeat and lease timing.
    pub async fn start_with_workers(
        n: usize,
        timing: RaftTiming,
        workers: WorkerConfig,
    ) -> anyhow::Result<TestCluster> {
        let dir = tempfile::tempdir()?;
        let mut members = Vec::new();
        for id in 1..=n as u64 {
            // Outside the ephemeral range: a restarted node binds its ports again.
            let http = crate::ports::listener()?;
            let grpc = crate::ports::listener()?;
            let peer = crate::ports::listener()?;
            let config = ServerConfig {
                node_id: id,
                data_dir: dir.path().join(format!("node-{id}")),
                http_listen: http.local_addr()?.to_string(),
                grpc_listen: grpc.local_addr()?.to_string(),
                peer_listen: peer.local_addr()?.to_string(),
                bootstrap: false,
                raft: timing.clone(),
                workers: workers.clone(),
                ..ServerConfig::default()
            };
            members.push(Member {
                id,
                config,
                http: Some(http),
                grpc: Some(grpc),
                peer: Some(peer),
                faults: NetworkFaults::default(),
                server: None,
            });
        }
        let initial: Vec<MemberConfig> = members
            .iter()
            .map(|m| MemberConfig {
                id: m.id,
                grpc_addr: m.config.grpc_listen.clone(),
                http_addr: m.config.http_listen.clone(),
                peer_addr: m.config.peer_listen.clone(),
            })
            .collect();
        for m in &mut members {
            m.config.initial_members = initial.clone();
        }
        let starts = members.iter().map(|m| async move {
            Server::start_with_faults(&m.config, listeners(m)?, m.faults.clone())
                .await
                .map_err(anyhow::Error::from)
        });
        let servers = futures::future::try_join_all(starts).await?;
        for (m, s) in members.iter_mut().zip(servers) {
            m.server = Some(s);
        }
        let mut cluster = TestCluster {
            members,
            dir,
            admin_token: String::new(),
            company_id: String::new(),
        };
        let leader = cluster.leader().await?;
        let api = cluster.server(leader).api().clone();
        let token = generate_token(ADMIN_TOKEN_PREFIX);
        api.ensure_admin_token(&token, "test-admin").await?;
        let company = api.ensure_default_company("Cluster Company", "CL").await?;
        cluster.admin_token = token;
        cluster.company_id = company.id;
        Ok(cluster)
    }

    pub fn ids(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.id).collect()
    }

    fn member(&self, id: u64) -> &Member {
        &self.members[(id - 1) as usize]
    }

    fn member_mut(&mut self, id: u64) -> &mut Member {
        &mut self.members[(id - 1) as usize]
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.member(id).server.is_some()
    }

    pub fn server(&self, id: u64) -> &Server {
        self.member(id).server.as_ref().expect("node is running")
    }

    /// An admin client of node `id`.
    pub fn admin(&self, id: u64) -> Http {
        Http::new(format!("http://{}", self.member(id).config.http_listen))
            .with_token(&self.admin_token)
    }

    pub fn http(&self, id: u64) -> Http {
        Http::new(format!("http://{}", self.member(id).config.http_listen))
    }

    pub fn grpc_addr(&self, id: u64) -> String {
        self.member(id).config.grpc_listen.clone()
    }

    /// Node `id`'s peer listener (its Raft service).
    pub fn peer_addr(&self, id: u64) -> String {
        self.member(id).config.peer_listen.clone()
    }

    /// Every node's gRPC address, for workers and clients that may dial any node.
    pub fn grpc_addrs(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| m.config.grpc_listen.clone())
            .collect()
    }

    /// The leader every running node agrees on (and that leads in its own view).
    pub async fn leader(&self) -> anyhow::Result<u64> {
        wait_for("an agreed leader", Duration::from_secs(20), || async {
            let running: Vec<&Member> =
                self.members.iter().filter(|m| m.server.is_some()).collect();
            let views: BTreeSet<Option<u64>> = running
                .iter()
                .filter(|m| !self.is_cut_off(m.id))
                .map(|m| {
                    m.server
                        .as_ref()
                        .and_then(|s| s.api().node().leadership().leader_id)
                })
                .collect();
            match views.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(l)]
                    if self.is_running(*l)
                        && self.server(*l).api().node().leadership().is_leader =>
                {
                    Some(*l)
                }
                _ => None,
            }
        })
        .await
    }

    /// A node that the partition helpers cut off from every other.
    fn is_cut_off(&self, id: u64) -> bool {
        let others: Vec<u64> = self.ids().into_iter().filter(|o| *o != id).collect();
        !others.is_empty() && others.iter().all(|o| self.member(id).faults.is_blocked(*o))
    }

    /// The leader as seen by the nodes in `group` (for a majority side of a partition).
    pub async fn leader_among(&self, group: &[u64]) -> anyhow::Result<u64> {
        wait_for("a leader in the group", Duration::from_secs(20), || async {
            group.iter().copied().find(|id| {
                self.is_running(*id) && self.server(*id).api().node().leadership().is_leader
            })
        })
        .await
    }

    /// Cuts every link between the groups (both directions). Nodes in no group are untouched.
    pub fn partition(&self, groups: &[&[u64]]) {
        for (i, a) in groups.iter().enumerate() {
            for (j, b) in groups.iter().enumerate() {
                if i == j {
                    continue;
                }
                for x in a.iter() {
                    for y in b.iter() {
                        self.member(*x).faults.block(*y);
                    }
                }
            }
        }
    }

    /// Cuts `id` off from every other node.
    pub fn isolate(&self, id: u64) {
        let rest: Vec<u64> = self.ids().into_iter().filter(|o| *o != id).collect();
        self.partition(&[&[id], &rest]);
    }

    /// Restores every link and removes delays.
    pub fn heal(&self) {
        for m in &self.members {
            m.faults.unblock_all();
        }
    }

    /// Delays every message node `id` sends.
    pub fn delay(&self, id: u64, delay: Duration) {
        self.member(id).faults.set_delay(delay);
    }

    /// Node `from`'s requests to node `to` fail as unreachable; `to`'s requests to `from`
    /// still arrive (a one-way partition).
    pub fn cut_one_way(&self, from: u64, to: u64) {
        self.member(from).faults.block(to);
    }

    /// Stops node `id` abruptly; its data directory stays.
    pub async fn kill(&mut self, id: u64) {
        let m = self.member_mut(id);
        m.http = None;
        m.grpc = None;
        m.peer = None;
        if let Some(s) = m.server.take() {
            s.kill().await;
        }
    }

    /// Starts node `id` again on its data directory and ports.
    pub async fn restart(&mut self, id: u64) -> anyhow::Result<()> {
        let m = self.member_mut(id);
        if m.http.is_none() {
            m.http = Some(std::net::TcpListener::bind(&m.config.http_listen)?);
            m.grpc = Some(std::net::TcpListener::bind(&m.config.grpc_listen)?);
            m.peer = Some(std::net::TcpListener::bind(&m.config.peer_listen)?);
        }
        let m = self.member(id);
        let server = Server::start_with_faults(&m.config, listeners(m)?, m.faults.clone()).await?;
        self.member_mut(id).server = Some(server);
        Ok(())
    }

    /// Kills node `id` and deletes its data directory.
    pub async fn wipe(&mut self, id: u64) -> anyhow::Result<()> {
        self.kill(id).await;
        let dir = self.member(id).config.data_dir.clone();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(())
    }

    /// Waits until every running node has applied the same index and holds the same state
    /// hash at it; returns (index, hash).
    pub async fn converged(&self, deadline: Duration) -> anyhow::Result<(u64, String)> {
        wait_for(
            "identical state hashes at one applied index",
            deadline,
            || async {
                let reports: Vec<(u64, String)> = self
                    .members
                    .iter()
                    .filter_map(|m| m.server.as_ref())
                    .map(|s| {
                        let r = s.api().node().report();
                        (r.state_index, r.state_hash)
                    })
                    .collect();
                let first = reports.first()?.clone();
                reports.iter().all(|r| *r == first).then_some(first)
            },
        )
        .await
        .map_err(|e| {
            let views: Vec<String> = self
                .members
                .iter()
                .filter_map(|m| m.server.as_ref().map(|s| (m.id, s.api().node().report())))
                .map(|(id, r)| {
                    format!(
                        "node {id}: {} term {} last log {} applied {} state {}@{}",
                        r.role,
                        r.term,
                        r.last_log_index,
                        r.applied_index,
                        r.state_hash.get(..12).unwrap_or(""),
                        r.state_index
                    )
                })
                .collect();
            e.context(views.join("; "))
        })
    }

    /// The report of node `id`.
    pub fn report(&self, id: u64) -> roost_raft::NodeReport {
        self.server(id).api().node().report()
    }

    pub async fn shutdown(mut self) {
        for id in self.ids() {
            self.kill(id).await;
        }
    }
}
