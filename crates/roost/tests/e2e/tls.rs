//! TLS end to end with real processes and real certificates: `roost cert` makes a CA and
//! certificates, three `roost server` processes form a cluster over TLS (Raft between them
//! too), and the CLI and a worker reach it over TLS. Plaintext and strangers are refused at the
//! handshake. A node exposed without TLS refuses to start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use roost_testkit::{wait_for, ProcessCluster};

use crate::processes::three_servers;
use crate::support::roost_binary;

/// A child process killed (and reaped) when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn roost(args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(roost_binary()).args(args).output()?)
}

pub(crate) fn ok(out: Output) -> anyhow::Result<Output> {
    anyhow::ensure!(
        out.status.success(),
        "roost failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

/// The CLI against `server` with `token`, trusting the CA in `ca`.
fn cli(server: &str, token: &str, ca: &Path, args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(roost_binary())
        .args(args)
        .env("ROOST_SERVER", server)
        .env("ROOST_TOKEN", token)
        .env("ROOST_CA_FILE", ca)
        .output()?)
}

fn spawn_logged(args: &[&str], config: &Path, log: &Path) -> anyhow::Result<Killed> {
    Ok(Killed(
        Command::new(roost_binary())
            .args(args)
            .arg(config)
            .env("ROOST_LOG", "info,openraft=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()?,
    ))
}

/// Three TLS nodes on loopback with certificates of the CA in `certs` (issued here), started by
/// the one three-node launcher; returns them (REST URLs `https://`) and the admin token.
pub(crate) async fn start_tls_cluster(
    dir: &Path,
    certs: &Path,
) -> anyhow::Result<(ProcessCluster, String)> {
    let certs_arg = certs.display().to_string();
    for id in 1..=3u64 {
        ok(roost(&[
            "cert",
            "issue",
            "node",
            "--id",
            &id.to_string(),
            "--host",
            "127.0.0.1,localhost",
            "--dir",
            &certs_arg,
        ])?)?;
    }
    let cluster = three_servers(dir, |_| String::new())
        .tls(certs)
        .start()
        .await?;
    let token = cluster.admin_token.clone();
    Ok((cluster, token))
}

fn json(out: &Output) -> Option<Value> {
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// What a TLS port answers a plaintext HTTP request: anything but an HTTP response.
async fn plaintext_answer(addr: &str) -> anyhow::Result<Vec<u8>> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    // The server answers a failed handshake with an alert and closes: read to the end.
    let _ = tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut answer)).await?;
    Ok(answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_serves_the_cli_and_a_worker_and_refuses_plaintext_and_strangers(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    let certs_arg = certs.display().to_string();
    ok(roost(&["cert", "init", "--dir", &certs_arg])?)?;
    let mode = |p: PathBuf| -> anyhow::Result<u32> {
        use std::os::unix::fs::PermissionsExt;
        Ok(std::fs::metadata(p)?.permissions().mode() & 0o777)
    };
    assert_eq!(mode(certs.join("ca-key.pem"))?, 0o600);
    // A second `init` would orphan every certificate of the first CA: refused.
    assert!(!roost(&["cert", "init", "--dir", &certs_arg])?
        .status
        .success());
    let stranger = dir.path().join("stranger");
    ok(roost(&[
        "cert",
        "init",
        "--dir",
        &stranger.display().to_string(),
    ])?)?;

    let (cluster, token) = start_tls_cluster(dir.path(), &certs).await?;
    assert_eq!(mode(certs.join("node-1-key.pem"))?, 0o600);
    let ca = certs.join("ca.pem");
    let servers = cluster
        .nodes
        .iter()
        .map(|n| n.http.clone())
        .collect::<Vec<_>>()
        .join(",");

    // Every member healthy: the nodes replicate to each other over TLS with their certificates.
    let status = wait_for("a healthy TLS cluster", Duration::from_secs(60), || {
        let (servers, token, ca) = (servers.clone(), token.clone(), ca.clone());
        async move {
            let s = json(&cli(&servers, &token, &ca, &["cluster", "status", "--json"]).ok()?)?;
            let members = s["members"].as_array()?;
            let healthy = members.len() == 3
                && members
                    .iter()
                    .all(|m| ["leader", "healthy"].contains(&m["health"].as_str().unwrap_or("")));
            healthy.then_some(s)
        }
    })
    .await?;
    assert!(status["leaderId"].as_u64().is_some(), "{status}");
    // A write through a follower is forwarded to the leader over TLS.
    ok(cli(
        &servers,
        &token,
        &ca,
        &[
            "company", "create", "--name", "Secure", "--prefix", "SEC", "-q",
        ],
    )?)?;

    // The dashboard's session cookie over TLS is Secure (never sent in the clear).
    let browserish = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca)?)?)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let login = browserish
        .post(format!("{}/login", cluster.nodes[0].http))
        .form(&[("token", token.as_str())])
        .send()
        .await?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && cookie.contains("Secure"),
        "{} {cookie}",
        login.status()
    );

    // Plaintext to the TLS ports: no HTTP answer, no gRPC answer.
    let (http, grpc) = (
        cluster.nodes[0].http.trim_start_matches("https://"),
        &cluster.nodes[0].grpc,
    );
    let answer = plaintext_answer(http).await?;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "a plaintext request got an HTTP answer: {}",
        String::from_utf8_lossy(&answer)
    );
    let out = Command::new(roost_binary())
        .args(["cluster", "status", "--json"])
        .env("ROOST_SERVER", format!("http://{http}"))
        .env("ROOST_TOKEN", &token)
        .env_remove("ROOST_CA_FILE")
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("https://"),
        "a plaintext CLI to a TLS port succeeded, or was not told to use https: {stderr}"
    );
    let plain_grpc =
        roost_proto::v1::control_client::ControlClient::connect(format!("http://{grpc}")).await;
    if let Ok(mut client) = plain_grpc {
        let request = crate::support::authed(
            &token,
            None,
            roost_proto::v1::ListCompaniesRequest::default(),
        )?;
        assert!(
            client.list_companies(request).await.is_err(),
            "a plaintext gRPC call to a TLS port was answered"
        );
    }

    // A client trusting another CA refuses the servers at the handshake.
    let out = cli(
        &servers,
        &token,
        &stranger.join("ca.pem"),
        &["cluster", "status", "--json"],
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("certificate"),
        "a client trusting another CA was served, or failed otherwise: {stderr}"
    );
    // A client certificate, when presented, must be one the cluster CA signed.
    ok(roost(&[
        "cert", "issue", "client", "--name", "ops", "--dir", &certs_arg,
    ])?)?;
    let stranger_arg = stranger.display().to_string();
    ok(roost(&[
        "cert",
        "issue",
        "client",
        "--name",
        "ops",
        "--dir",
        &stranger_arg,
    ])?)?;
    let with_client_cert = |from: &Path| -> anyhow::Result<Output> {
        let mut args = vec!["company", "list", "--json"];
        let (cert, key) = (
            from.join("client-ops.pem").display().to_string(),
            from.join("client-ops-key.pem").display().to_string(),
        );
        args.extend(["--cert-file", &cert, "--key-file", &key]);
        cli(&servers, &token, &ca, &args)
    };
    ok(with_client_cert(&certs)?)?;
    assert!(
        !with_client_cert(&stranger)?.status.success(),
        "a client certificate of another CA was accepted"
    );

    // A missing CA file is named, with the flag that named it.
    let missing = dir.path().join("no-such-ca.pem");
    let out = cli(&servers, &token, &missing, &["company", "list"])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--ca-file") && stderr.contains("no-such-ca.pem"),
        "{stderr}"
    );

    // A worker over TLS, presenting its own certificate: it registers with the cluster.
    ok(roost(&[
        "cert", "issue", "worker", "--name", "w1", "--dir", &certs_arg,
    ])?)?;
    let join = ok(cli(
        &servers,
        &token,
        &ca,
        &["worker", "token", "create", "-q"],
    )?)?;
    let join = String::from_utf8(join.stdout)?.trim().to_string();
    let worker_config = dir.path().join("worker.toml");
    let grpc_servers = cluster
        .nodes
        .iter()
        .map(|n| format!("\"{}\"", n.grpc))
        .collect::<Vec<_>>()
        .join(", ");
    std::fs::write(
        &worker_config,
        format!(
            "worker_id = \"tls-worker\"\nservers = [{grpc_servers}]\napi_url = \"https://{http}\"\n\
             join_token = \"{join}\"\nwork_dir = \"{work}\"\n\n\
             [tls]\nca_file = \"{certs}/ca.pem\"\ncert_file = \"{certs}/worker-w1.pem\"\nkey_file = \"{certs}/worker-w1-key.pem\"\n",
            work = dir.path().display(),
            certs = certs.display(),
        ),
    )?;
    let _worker = spawn_logged(
        &["run-worker", "--config"],
        &worker_config,
        &dir.path().join("worker.log"),
    )?;
    wait_for(
        "the TLS worker to register",
        Duration::from_secs(60),
        || {
            let (servers, token, ca) = (servers.clone(), token.clone(), ca.clone());
            async move {
                let list = json(&cli(&servers, &token, &ca, &["worker", "list", "--json"]).ok()?)?;
                list.to_string().contains("tls-worker").then_some(())
            }
        },
    )
    .await
    .map_err(|e| {
        let log = std::fs::read_to_string(dir.path().join("worker.log")).unwrap_or_default();
        anyhow::anyhow!("{e}\nworker log:\n{log}")
    })?;

    // Mutual TLS for workers: a connection without a worker certificate of the cluster CA is
    // refused before its credential or join token is looked at.
    let grpc = cluster.nodes[0].grpc.clone();
    let no_cert = attach_over_tls(&grpc, &ca, None, &join).await;
    assert!(
        matches!(&no_cert, Err((tonic::Code::Unauthenticated, m)) if m.contains("presented no client certificate")),
        "{no_cert:?}"
    );
    let client_cert = Some((
        certs.join("client-ops.pem"),
        certs.join("client-ops-key.pem"),
    ));
    let as_client = attach_over_tls(&grpc, &ca, client_cert, &join).await;
    assert!(
        matches!(&as_client, Err((tonic::Code::Unauthenticated, m)) if m.contains("names no worker")),
        "{as_client:?}"
    );
    // A certified worker that dials a follower is registered by the leader, relayed to its
    // peer listener over the follower's node certificate (workers/relay.rs).
    let leader = status["leaderId"].as_u64();
    let follower = cluster
        .nodes
        .iter()
        .find(|n| Some(n.id) != leader)
        .ok_or_else(|| anyhow::anyhow!("no follower in {status}"))?;
    let worker_cert = Some((certs.join("worker-w1.pem"), certs.join("worker-w1-key.pem")));
    let relayed = attach_over_tls(&follower.grpc, &ca, worker_cert, &join).await;
    assert!(
        matches!(relayed, Ok(node) if node != follower.id),
        "{relayed:?}"
    );
    Ok(())
}

/// Opens a worker session over TLS to `grpc` (`host:port`), trusting `ca` and presenting
/// `identity` (certificate and key files) if given, and sends a `Register` with `join_token`
/// and a fresh credential: the id of the node that registered it, else the refusal's code and
/// message (or what came instead of `Registered`).
async fn attach_over_tls(
    grpc: &str,
    ca: &Path,
    identity: Option<(PathBuf, PathBuf)>,
    join_token: &str,
) -> Result<u64, (tonic::Code, String)> {
    use roost_proto::v1 as pb;
    use tokio_stream::StreamExt;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let refused = |e: &dyn std::fmt::Display| (tonic::Code::Unknown, e.to_string());
    let port = grpc.rsplit_once(':').map(|(_, p)| p).unwrap_or_default();
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(
            std::fs::read(ca).map_err(|e| refused(&e))?,
        ))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(cert).map_err(|e| refused(&e))?,
            std::fs::read(key).map_err(|e| refused(&e))?,
        ));
    }
    let channel = Endpoint::from_shared(format!("https://localhost:{port}"))
        .map_err(|e| refused(&e))?
        .tls_config(tls)
        .map_err(|e| refused(&e))?
        .connect()
        .await
        .map_err(|e| refused(&e))?;
    let register = pb::Register {
        worker_id: "uncertified".into(),
        name: "uncertified".into(),
        join_token: join_token.into(),
        adapters: vec![pb::AdapterType::Process as i32],
        slots: 1,
        version: "test".into(),
        worker_credential: format!("rst_worker_{}", "ab".repeat(32)),
        ..Default::default()
    };
    let first = pb::WorkerMessage {
        body: Some(pb::worker_message::Body::Register(register)),
    };
    let outbound = tokio_stream::iter([first]).chain(tokio_stream::pending());
    let mut inbound = pb::worker_client::WorkerClient::new(channel)
        .attach(outbound)
        .await
        .map_err(|s| (s.code(), s.message().to_string()))?
        .into_inner();
    match inbound.message().await {
        Ok(Some(pb::ServerMessage {
            body: Some(pb::server_message::Body::Registered(r)),
        })) => Ok(r.node_id),
        Ok(Some(other)) => Err((tonic::Code::Unknown, format!("{other:?}"))),
        Ok(None) => Err((tonic::Code::Unknown, "the session ended".into())),
        Err(s) => Err((s.code(), s.message().to_string())),
    }
}

/// Runs `roost args` (without `ROOST_INSECURE_PLAINTEXT` from the environment), which must
/// exit with an error within a minute; what it said on stderr.
async fn refused_start(args: &[&std::ffi::OsStr]) -> anyhow::Result<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(roost_binary())
            .args(args)
            .env_remove("ROOST_INSECURE_PLAINTEXT")
            .kill_on_drop(true)
            .output(),
    )
    .await??;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    anyhow::ensure!(!out.status.success(), "it started: {stderr}");
    Ok(stderr)
}

/// A server bound to a non-loopback address without TLS refuses to start, saying how to
/// proceed; with `--insecure-plaintext` it starts, and warns.
#[tokio::test]
async fn a_node_exposed_without_tls_refuses_to_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let port = |addr: String| addr.rsplit_once(':').map(|(_, p)| p.to_string());
    let (http, grpc) = (
        port(roost_testkit::ports::free_addr()?),
        port(roost_testkit::ports::free_addr()?),
    );
    let (Some(http), Some(grpc)) = (http, grpc) else {
        anyhow::bail!("no port");
    };
    let config = dir.path().join("node.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 1\ndata_dir = \"{}\"\nhttp_listen = \"0.0.0.0:{http}\"\ngrpc_listen = \"127.0.0.1:{grpc}\"\npeer_listen = \"{}\"\n",
            dir.path().join("data").display(),
            roost_testkit::ports::free_addr()?
        ),
    )?;
    let stderr = refused_start(&["server".as_ref(), "--config".as_ref(), config.as_os_str()])
        .await
        .map_err(|e| e.context("started without TLS on 0.0.0.0"))?;
    assert!(
        stderr.contains("--insecure-plaintext") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "it opened its data before refusing"
    );

    let log = dir.path().join("insecure.log");
    let _server = spawn_logged(
        &["server", "--insecure-plaintext", "--config"],
        &config,
        &log,
    )?;
    wait_for("the plaintext warning", Duration::from_secs(60), || {
        let log = log.clone();
        async move {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains("PLAINTEXT") && l.contains("node serving"))
                .map(drop)
        }
    })
    .await
    .map_err(|e| {
        // What the node said instead (a port taken meanwhile, a config refused, ...).
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        anyhow::anyhow!("{e}; its log:\n{said}")
    })?;
    Ok(())
}

/// `roost dev` has no TLS: bound off loopback it refuses to start before it writes anything,
/// unless told `--insecure-plaintext`, as `roost server` without TLS does (README, "A secure
/// cluster").
#[tokio::test]
async fn roost_dev_off_loopback_refuses_to_serve_plaintext() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let dev_dir = dir.path().join("dev");
    let grpc = roost_testkit::ports::free_addr()?;
    let args = ["dev", "--dir"].map(std::ffi::OsStr::new);
    let listen = ["--http-listen", "0.0.0.0:0", "--grpc-listen", &grpc].map(std::ffi::OsStr::new);
    let stderr = refused_start(&[&args[..], &[dev_dir.as_os_str()], &listen[..]].concat())
        .await
        .map_err(|e| e.context("roost dev started without TLS on 0.0.0.0"))?;
    assert!(
        stderr.contains("--insecure-plaintext") && stderr.contains("0.0.0.0:0"),
        "{stderr}"
    );
    assert!(
        !dev_dir.exists(),
        "it created its directory before refusing"
    );
    Ok(())
}

/// Certificates are read at start: a node's certificate is rotated by issuing a new one and
/// restarting that node, one node at a time, and the cluster stays whole (README, "A secure
/// cluster").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_certificate_rotates_with_a_rolling_restart() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    let certs_arg = certs.display().to_string();
    ok(roost(&["cert", "init", "--dir", &certs_arg])?)?;
    let (mut cluster, token) = start_tls_cluster(dir.path(), &certs).await?;
    let node_2 = cluster.nodes[1].http.clone();
    let ca = certs.join("ca.pem");
    let all = cluster
        .nodes
        .iter()
        .map(|n| n.http.clone())
        .collect::<Vec<_>>()
        .join(",");
    let healthy = |server: String| {
        let (token, ca) = (token.clone(), ca.clone());
        wait_for("every member healthy", Duration::from_secs(60), move || {
            let (server, token, ca) = (server.clone(), token.clone(), ca.clone());
            async move {
                let s = json(&cli(&server, &token, &ca, &["cluster", "status", "--json"]).ok()?)?;
                let members = s["members"].as_array()?;
                (members.len() == 3
                    && members.iter().all(|m| {
                        ["leader", "healthy"].contains(&m["health"].as_str().unwrap_or(""))
                    }))
                .then_some(())
            }
        })
    };
    healthy(all.clone()).await?;
    let before = std::fs::read(certs.join("node-2.pem"))?;

    // Node 2: a new key and certificate in place of the old, then a restart.
    std::fs::remove_file(certs.join("node-2.pem"))?;
    std::fs::remove_file(certs.join("node-2-key.pem"))?;
    ok(roost(&[
        "cert",
        "issue",
        "node",
        "--id",
        "2",
        "--host",
        "127.0.0.1",
        "--dir",
        &certs_arg,
    ])?)?;
    assert_ne!(before, std::fs::read(certs.join("node-2.pem"))?);
    cluster.kill(2)?;
    cluster.restart(2)?;
    // Asked through node 2 alone: it serves its new certificate and sees both peers healthy.
    healthy(node_2.clone()).await?;
    ok(cli(
        &node_2,
        &token,
        &ca,
        &[
            "company", "create", "--name", "Rotated", "--prefix", "ROT", "-q",
        ],
    )?)?;
    Ok(())
}
