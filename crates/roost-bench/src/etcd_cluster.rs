//! The etcd side of the etcd benchmark: three etcd members as processes on loopback, each
//! member restartable after a SIGKILL, all killed with the benchmark.

use crate::etcd::{call, connect, lazy_channel};
use crate::etcd_pb as pb;
use crate::tls_setup::CertDir;
use anyhow::Context;
use roost_testkit::wait_for;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig};

// ---------------------------------------------------------------------------------------
// A 3-member etcd cluster of child processes.

pub(crate) struct EtcdMember {
    pub(crate) name: String,
    pub(crate) client_url: String,
    pub(crate) args: Vec<String>,
    pub(crate) child: Option<Child>,
}

pub(crate) struct EtcdCluster {
    pub(crate) binary: PathBuf,
    /// GOMAXPROCS of each member (`None`: Go's default, one per CPU).
    pub(crate) gomaxprocs: Option<usize>,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) members: Vec<EtcdMember>,
    /// With `--tls`: the bench's client settings (the CA, a client certificate).
    pub(crate) client_tls: Option<ClientTlsConfig>,
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl EtcdCluster {
    pub(crate) async fn start(
        binary: &Path,
        gomaxprocs: Option<usize>,
        tls: Option<&CertDir>,
    ) -> anyhow::Result<EtcdCluster> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let dir = tempfile::Builder::new()
            .prefix("roost-bench-etcd-")
            .tempdir()?;
        let ports: Vec<(u16, u16)> = (0..3)
            .map(|_| {
                Ok((
                    roost_testkit::ports::free_port()?,
                    roost_testkit::ports::free_port()?,
                ))
            })
            .collect::<anyhow::Result<_>>()?;
        let initial = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("etcd-{}={scheme}://127.0.0.1:{peer}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            binary: binary.to_path_buf(),
            gomaxprocs,
            dir,
            members: Vec::new(),
            client_tls: tls.map(CertDir::client_tls).transpose()?,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let name = format!("etcd-{}", i + 1);
            let client_url = format!("{scheme}://127.0.0.1:{client}");
            let peer_url = format!("{scheme}://127.0.0.1:{peer}");
            let data = cluster.dir.path().join(&name);
            let mut args: Vec<String> = vec![
                "--name".into(),
                name.clone(),
                "--data-dir".into(),
                data.display().to_string(),
                "--listen-client-urls".into(),
                client_url.clone(),
                "--advertise-client-urls".into(),
                client_url.clone(),
                "--listen-peer-urls".into(),
                peer_url.clone(),
                "--initial-advertise-peer-urls".into(),
                peer_url,
                "--initial-cluster".into(),
                initial.clone(),
                "--initial-cluster-state".into(),
                "new".into(),
                "--initial-cluster-token".into(),
                "roost-bench".into(),
                "--logger".into(),
                "zap".into(),
            ];
            if let Some(certs) = tls {
                // One certificate per member for both listeners and for dialing peers: it has
                // serverAuth and clientAuth (tls_setup.rs). Clients and peers must present a
                // certificate of the CA.
                let member = certs.node(i as u64 + 1);
                let (cert, key, ca) = (
                    member.cert.display().to_string(),
                    member.key.display().to_string(),
                    certs.ca().display().to_string(),
                );
                for (flag, value) in [
                    ("--cert-file", &cert),
                    ("--key-file", &key),
                    ("--trusted-ca-file", &ca),
                    ("--peer-cert-file", &cert),
                    ("--peer-key-file", &key),
                    ("--peer-trusted-ca-file", &ca),
                ] {
                    args.extend([flag.to_string(), value.clone()]);
                }
                args.extend([
                    "--client-cert-auth".into(),
                    "--peer-client-cert-auth".into(),
                ]);
            }
            cluster.members.push(EtcdMember {
                name,
                client_url,
                args,
                child: None,
            });
        }
        for i in 0..3 {
            cluster.spawn(i)?;
        }
        eprintln!(
            "etcd: {} {}",
            binary.display(),
            cluster.members[0].args.join(" ")
        );
        cluster.wait_healthy(Duration::from_secs(60)).await?;
        Ok(cluster)
    }

    pub(crate) fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let m = &mut self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))?;
        let mut command = Command::new(&self.binary);
        command
            .args(&m.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // Not inherited from this process: the table says which setting ran.
        match self.gomaxprocs {
            Some(n) => command.env("GOMAXPROCS", n.to_string()),
            None => command.env_remove("GOMAXPROCS"),
        };
        roost_testkit::die_with_harness(&mut command);
        m.child = Some(
            command
                .spawn()
                .with_context(|| format!("start {}", self.binary.display()))?,
        );
        Ok(())
    }

    /// A gRPC connection to member `i` (over TLS with `--tls`).
    pub(crate) async fn connect(&self, i: usize) -> anyhow::Result<Channel> {
        connect(&self.members[i].client_url, self.client_tls.as_ref()).await
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter_map(|m| m.child.as_ref().map(|c| c.id()))
            .collect()
    }

    pub(crate) fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Each member's (own id, leader id) from `Maintenance.Status`, `None` if it did not answer.
    pub(crate) async fn statuses(&self) -> Vec<Option<(u64, u64)>> {
        let mut out = Vec::new();
        for m in &self.members {
            let status = async {
                let ch = lazy_channel(&m.client_url, self.client_tls.as_ref()).ok()?;
                let r: pb::StatusResponse = tokio::time::timeout(
                    Duration::from_secs(1),
                    call(&ch, pb::STATUS, pb::StatusRequest {}),
                )
                .await
                .ok()?
                .ok()?;
                Some((r.header?.member_id, r.leader))
            };
            out.push(if m.child.is_some() {
                status.await
            } else {
                None
            });
        }
        out
    }

    /// The index of the leader, once every running member names the same one.
    pub(crate) async fn wait_healthy(&self, deadline: Duration) -> anyhow::Result<usize> {
        wait_for(
            "every etcd member to agree on a leader",
            deadline,
            || async {
                let s = self.statuses().await;
                let running = self.members.iter().filter(|m| m.child.is_some()).count();
                let answers: Vec<(usize, u64, u64)> = s
                    .iter()
                    .enumerate()
                    .filter_map(|(i, x)| x.map(|(id, l)| (i, id, l)))
                    .collect();
                if answers.len() < running {
                    return None;
                }
                let leader = answers.first()?.2;
                if leader == 0 || answers.iter().any(|a| a.2 != leader) {
                    return None;
                }
                answers.iter().find(|a| a.1 == leader).map(|a| a.0)
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e} (etcd logs in {})", self.dir.path().display()))
    }
}
