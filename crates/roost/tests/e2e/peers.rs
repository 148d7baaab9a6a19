//! The peer listener with real processes and real certificates: three TLS nodes serve their
//! Raft service (AppendEntries, Vote, Forward, ...) only on `peer_listen`, and only to a client
//! certificate of the cluster CA that names a node. A certificate from another CA, a worker's or
//! a client's certificate from the cluster CA, or no certificate at all is refused before any
//! message is read; the client gRPC port does not serve the Raft service at all.

use std::path::Path;

use roost_proto::v1::raft_client::RaftClient;
use roost_proto::v1::RaftPayload;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
use tonic::Code;

use crate::tls::{ok, roost, start_tls_cluster};

/// A Raft client of `addr` over TLS, trusting `ca`, presenting `identity` (cert, key) if any.
async fn raft_client(
    addr: &str,
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> anyhow::Result<RaftClient<tonic::transport::Channel>> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(ca)?))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(
            std::fs::read(cert)?,
            std::fs::read(key)?,
        ));
    }
    let channel = Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_lazy();
    Ok(RaftClient::new(channel))
}

/// `Forward(Report)`: any member answers it with its own report.
fn report_request() -> RaftPayload {
    RaftPayload {
        json: br#""Report""#.to_vec(),
        ..Default::default()
    }
}

/// A forged write: an envelope naming the dev admin, creating an admin token of the sender's
/// choosing. Its exact command shape does not matter: it must never be read.
fn forged_write() -> RaftPayload {
    let envelope = serde_json::json!({ "Write": {
        "at": 0,
        "actor": { "User": "dev-admin" },
        "command": { "CreateAdminToken": { "id": "forged", "name": "forged", "tokenHash": "00" } },
        "idempotency_key": null,
    }});
    RaftPayload {
        json: envelope.to_string().into_bytes(),
        ..Default::default()
    }
}

/// What a refused caller gets: the handshake or the connection fails, so tonic reports a
/// transport failure, never an answer of the Raft service.
fn refused_at_the_transport(
    what: &str,
    result: Result<tonic::Response<RaftPayload>, tonic::Status>,
) {
    match result {
        Ok(reply) => panic!(
            "{what}: served: {}",
            String::from_utf8_lossy(&reply.get_ref().json)
        ),
        Err(status) => assert!(
            matches!(
                status.code(),
                Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
            ),
            "{what}: refused by the service ({status:?}), not at the handshake"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_listener_serves_only_the_clusters_nodes() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    let certs_arg = certs.display().to_string();
    ok(roost(&["cert", "init", "--dir", &certs_arg])?)?;
    let (cluster, _token) = start_tls_cluster(dir.path(), &certs).await?;
    let ca = certs.join("ca.pem");

    // A stranger's CA with a node certificate naming a real member's id; a worker's and a
    // client's certificate from the cluster's own CA.
    let stranger = dir.path().join("stranger");
    let stranger_arg = stranger.display().to_string();
    ok(roost(&["cert", "init", "--dir", &stranger_arg])?)?;
    ok(roost(&[
        "cert",
        "issue",
        "node",
        "--id",
        "2",
        "--host",
        "localhost",
        "--dir",
        &stranger_arg,
    ])?)?;
    ok(roost(&[
        "cert", "issue", "worker", "--name", "w1", "--dir", &certs_arg,
    ])?)?;
    ok(roost(&[
        "cert", "issue", "client", "--name", "ops", "--dir", &certs_arg,
    ])?)?;

    let refused: [(&str, Option<(std::path::PathBuf, std::path::PathBuf)>); 4] = [
        ("no certificate", None),
        (
            "a node certificate from another CA",
            Some((stranger.join("node-2.pem"), stranger.join("node-2-key.pem"))),
        ),
        (
            "a worker certificate of the cluster CA",
            Some((certs.join("worker-w1.pem"), certs.join("worker-w1-key.pem"))),
        ),
        (
            "a client certificate of the cluster CA",
            Some((
                certs.join("client-ops.pem"),
                certs.join("client-ops-key.pem"),
            )),
        ),
    ];
    for (who, identity) in &refused {
        for node in &cluster.nodes {
            let identity = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
            let mut client = raft_client(&node.peer, &ca, identity).await?;
            refused_at_the_transport(
                &format!("{who}: Forward(Write) to node {}", node.id),
                client.forward(forged_write()).await,
            );
            refused_at_the_transport(
                &format!("{who}: Vote to node {}", node.id),
                client.vote(RaftPayload::default()).await,
            );
            refused_at_the_transport(
                &format!("{who}: AppendEntries to node {}", node.id),
                client.append_entries(RaftPayload::default()).await,
            );
        }
    }

    // A node's own certificate is served: the same call reaches the Raft service.
    let node_3 = (certs.join("node-3.pem"), certs.join("node-3-key.pem"));
    let mut peer = raft_client(&cluster.nodes[0].peer, &ca, Some((&node_3.0, &node_3.1))).await?;
    let report = peer.forward(report_request()).await?.into_inner();
    let report: serde_json::Value = serde_json::from_slice(&report.json)?;
    assert_eq!(report["Ok"]["Report"]["id"], 1, "{report}");
    // Garbage from a real node is answered by the service (and refused there).
    let garbage = peer.vote(RaftPayload::default()).await.unwrap_err();
    assert_eq!(garbage.code(), Code::InvalidArgument, "{garbage:?}");

    // The client and worker port serves no Raft service, even to a node's certificate.
    for node in &cluster.nodes {
        let mut client = raft_client(&node.grpc, &ca, Some((&node_3.0, &node_3.1))).await?;
        let status = client.forward(report_request()).await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::Unimplemented,
            "node {}: {status:?}",
            node.id
        );
    }
    Ok(())
}
