//! `roost-bench etcd-checkout --tls`: certificates for both systems, made with the real
//! `roost cert` CLI (crates/roost/src/cert.rs) as crates/roost-testkit/src/netns.rs makes them,
//! and the bench's TLS client settings.
//!
//! Each system gets a CA of its own, made the same way. A `roost cert issue node` certificate
//! names its host as an IP SAN (127.0.0.1 here) and carries both serverAuth and clientAuth:
//! what a Roost node needs for its listeners and its peer connections, and what an etcd member
//! needs for its client and peer listeners and for dialing its peers with
//! `--peer-client-cert-auth`. A `client` certificate carries clientAuth only. The bench's
//! clients present one to both systems: etcd runs with `--client-cert-auth`, and a Roost node
//! checks a presented certificate against its CA (crates/roost-server/src/tls.rs), so both
//! handshakes do the same work.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// The name of the bench's client certificate in each CA directory.
const CLIENT: &str = "bench";

/// A certificate and its key (PEM files).
pub(crate) struct Pair {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// A directory laid out by `roost cert`: `ca.pem`, `node-N.pem` / `node-N-key.pem` for nodes
/// 1 to 3, `client-bench.pem` / `client-bench-key.pem`.
pub(crate) struct CertDir {
    dir: PathBuf,
}

impl CertDir {
    /// Makes a CA in `dir` and issues the certificates of nodes 1 to 3 (host 127.0.0.1) and of
    /// the bench's client with `roost` (`binary`).
    fn make(binary: &Path, dir: PathBuf) -> anyhow::Result<CertDir> {
        let certs = CertDir { dir };
        certs.roost(binary, &["cert", "init"])?;
        for id in 1..=3u64 {
            let id = id.to_string();
            certs.roost(
                binary,
                &["cert", "issue", "node", "--id", &id, "--host", "127.0.0.1"],
            )?;
        }
        certs.roost(binary, &["cert", "issue", "client", "--name", CLIENT])?;
        Ok(certs)
    }

    /// `roost <args> --dir <dir>`, its output kept for the error.
    fn roost(&self, binary: &Path, args: &[&str]) -> anyhow::Result<()> {
        let out = Command::new(binary)
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("run {}", binary.display()))?;
        anyhow::ensure!(
            out.status.success(),
            "{} {} --dir {}: {}",
            binary.display(),
            args.join(" "),
            self.dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Node (or member) `id`'s certificate, 1 to 3.
    pub(crate) fn node(&self, id: u64) -> Pair {
        Pair {
            cert: self.dir.join(format!("node-{id}.pem")),
            key: self.dir.join(format!("node-{id}-key.pem")),
        }
    }

    /// The bench's gRPC client settings: trust this CA, present the client certificate (as
    /// crates/roost/tests/e2e/peers.rs builds its tonic clients).
    pub(crate) fn client_tls(&self) -> anyhow::Result<ClientTlsConfig> {
        let read = |p: PathBuf| std::fs::read(&p).with_context(|| format!("read {}", p.display()));
        Ok(ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(self.ca())?))
            .identity(Identity::from_pem(
                read(self.dir.join(format!("client-{CLIENT}.pem")))?,
                read(self.dir.join(format!("client-{CLIENT}-key.pem")))?,
            )))
    }
}

/// Both systems' certificates under one temporary directory in `$TMPDIR`, removed when this is
/// dropped: it must outlive the clusters, whose restarted members read their files again.
pub(crate) struct BenchTls {
    pub(crate) roost: CertDir,
    pub(crate) etcd: CertDir,
    _dir: tempfile::TempDir,
}

impl BenchTls {
    pub(crate) fn make(roost_binary: &Path) -> anyhow::Result<BenchTls> {
        let dir = tempfile::Builder::new()
            .prefix("roost-bench-certs-")
            .tempdir()?;
        let tls = BenchTls {
            roost: CertDir::make(roost_binary, dir.path().join("roost"))?,
            etcd: CertDir::make(roost_binary, dir.path().join("etcd"))?,
            _dir: dir,
        };
        eprintln!(
            "TLS: certificates from `roost cert` in {} (one CA per system)",
            tls._dir.path().display()
        );
        Ok(tls)
    }
}
