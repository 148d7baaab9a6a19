//! Credentials with a lifecycle: named admin tokens, agent keys and join tokens,
//! listed without secrets and revoked through one node of a cluster, then refused at another.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_stream::StreamExt;

use roost_proto::v1::worker_client::WorkerClient;
use roost_proto::v1::{self as pb, worker_message, Register, WorkerMessage};
use roost_server::auth::hash_token;
use roost_testkit::{wait_for, worker_credential, Http, TestCluster, TestWorker};

use crate::support::str_field;

const CATCH_UP: Duration = Duration::from_secs(20);

/// Waits until node `id` has applied everything node `from` had applied when this was called:
/// a revocation answered by `from` is then in `id`'s state too.
async fn caught_up(c: &TestCluster, id: u64, from: u64) -> anyhow::Result<()> {
    let index = c.report(from).applied_index;
    wait_for(
        "the other node to apply the revocation",
        CATCH_UP,
        || async { (c.report(id).applied_index >= index).then_some(()) },
    )
    .await
}

/// No secret and no hash of one anywhere in `body`.
fn assert_no_secret(body: &Value, secrets: &[&str]) {
    let text = body.to_string();
    for secret in secrets {
        assert!(!text.contains(secret), "a secret leaked: {text}");
        assert!(!text.contains(&hash_token(secret)), "a hash leaked: {text}");
    }
    assert!(!text.contains("tokenHash"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_credential_revoked_through_one_node_is_refused_at_another() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let leader = c.leader().await?;
    let others: Vec<u64> = c.ids().into_iter().filter(|id| *id != leader).collect();
    let (a, b) = (others[0], others[1]);

    // A named admin token made through one follower works at the other at once.
    let created = c
        .admin(a)
        .post("/api/admin/tokens", json!({ "name": "ops" }))
        .await?
        .ok()?;
    let (ops_id, ops) = (str_field(&created, "id"), str_field(&created, "token"));
    assert!(ops.starts_with("rst_admin_"), "{created}");
    let as_ops = c.http(b).with_token(&ops);
    as_ops.get("/api/companies").await?.ok()?;

    // An agent with a key, and a join token.
    let agent = as_ops
        .post(
            &format!("/api/companies/{}/agents", c.company_id),
            json!({ "name": "coder" }),
        )
        .await?
        .ok()?;
    let agent_id = str_field(&agent, "id");
    let key = as_ops
        .post(
            &format!("/api/agents/{agent_id}/keys"),
            json!({ "name": "ci" }),
        )
        .await?
        .ok()?;
    let (key_id, key_token) = (str_field(&key, "id"), str_field(&key, "token"));
    let join = as_ops
        .post(
            "/api/workers/join-tokens",
            json!({ "name": "rack", "ttlSecs": 3600 }),
        )
        .await?
        .ok()?;
    let (join_id, join_token) = (str_field(&join, "id"), str_field(&join, "token"));
    assert!(join["expiresAt"].is_string(), "{join}");
    let secrets = [
        ops.as_str(),
        key_token.as_str(),
        join_token.as_str(),
        c.admin_token.as_str(),
    ];

    // Lists show what each credential is, never what it opens.
    let admins = c.admin(b).get("/api/admin/tokens").await?.ok()?;
    assert!(
        admins
            .as_array()
            .is_some_and(|l| l.iter().any(|t| t["id"] == ops_id.as_str())),
        "{admins}"
    );
    assert_no_secret(&admins, &secrets);
    let keys = c
        .admin(b)
        .get(&format!("/api/agents/{agent_id}/keys"))
        .await?
        .ok()?;
    assert_eq!(keys[0]["id"], key_id.as_str(), "{keys}");
    assert_eq!(keys[0]["revokedAt"], Value::Null, "{keys}");
    assert_no_secret(&keys, &secrets);
    let joins = c.admin(b).get("/api/workers/join-tokens").await?.ok()?;
    assert_no_secret(&joins, &secrets);

    // Agents list and revoke nothing.
    let as_agent = c.http(b).with_token(&key_token);
    as_agent.get("/api/agents/me").await?.ok()?;
    let r = as_agent
        .delete(&format!("/api/agents/{agent_id}/keys/{key_id}"))
        .await?;
    assert_eq!(r.status.as_u16(), 403, "{}", r.body);
    let r = as_agent.get("/api/admin/tokens").await?;
    assert_eq!(r.status.as_u16(), 403, "{}", r.body);

    // Revoked through node a (Paperclip's shape for keys), refused at node b once b applied it.
    let r = c
        .admin(a)
        .delete(&format!("/api/agents/{agent_id}/keys/{key_id}"))
        .await?
        .ok()?;
    assert_eq!(r, json!({ "ok": true }));
    let r = c
        .admin(a)
        .delete(&format!("/api/admin/tokens/{ops_id}"))
        .await?
        .ok()?;
    assert_eq!(r["revoked"], true, "{r}");
    assert_no_secret(&r, &secrets);
    let r = c
        .admin(a)
        .delete(&format!("/api/workers/join-tokens/{join_id}"))
        .await?
        .ok()?;
    assert!(r["revokedAt"].is_string(), "{r}");
    caught_up(&c, b, a).await?;
    for (who, http) in [("admin token", &as_ops), ("agent key", &as_agent)] {
        let r = http.get("/api/companies").await?;
        assert_eq!(r.status.as_u16(), 401, "{who} at node {b}: {}", r.body);
    }
    // Node a refuses them too, and the leader.
    for node in [a, leader] {
        let r = c.http(node).with_token(&ops).get("/api/companies").await?;
        assert_eq!(r.status.as_u16(), 401, "node {node}: {}", r.body);
    }
    // The revoked join token admits no worker.
    let refused = register_once(&c.grpc_addr(leader), &join_token, "late-worker").await;
    assert!(refused.is_err(), "a revoked join token admitted a worker");

    // Revoking again is a conflict; the last admin token cannot be revoked.
    let r = c
        .admin(b)
        .delete(&format!("/api/admin/tokens/{ops_id}"))
        .await?;
    assert_eq!(r.status.as_u16(), 409, "{}", r.body);
    // The last admin token cannot be revoked: a keeper revokes every other, then itself.
    let keeper = c
        .admin(b)
        .post("/api/admin/tokens", json!({ "name": "keeper" }))
        .await?
        .ok()?;
    let keeper_id = str_field(&keeper, "id");
    let as_keeper = c.http(b).with_token(&str_field(&keeper, "token"));
    let admins = as_keeper.get("/api/admin/tokens").await?.ok()?;
    for t in admins.as_array().into_iter().flatten() {
        let id = str_field(t, "id");
        if t["revoked"] == false && id != keeper_id {
            as_keeper
                .delete(&format!("/api/admin/tokens/{id}"))
                .await?
                .ok()?;
        }
    }
    let r = as_keeper
        .delete(&format!("/api/admin/tokens/{keeper_id}"))
        .await?;
    assert_eq!(r.status.as_u16(), 409, "{}", r.body);
    assert!(
        r.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("last admin token"),
        "{}",
        r.body
    );
    let r = c.admin(b).get("/api/companies").await?;
    assert_eq!(r.status.as_u16(), 401, "{}", r.body);
    as_keeper.get("/api/companies").await?.ok()?;

    // The activity log names what was revoked, never a secret or hash.
    let activity = as_keeper
        .get(&format!(
            "/api/companies/{}/activity?limit=1000",
            c.company_id
        ))
        .await?
        .ok()?;
    assert!(
        activity.to_string().contains("credential.revoked"),
        "{activity}"
    );
    assert_no_secret(&activity, &secrets);
    c.shutdown().await;
    Ok(())
}

/// One worker connection's registration with the join token `token` and the worker credential
/// `roost_testkit::worker_credential(token, worker_id)`: `Ok` once registered, the refusal's
/// message otherwise.
async fn register_once(addr: &str, token: &str, worker_id: &str) -> Result<(), String> {
    register_with(addr, token, &worker_credential(token, worker_id), worker_id).await
}

/// [`register_once`] with this worker credential.
async fn register_with(
    addr: &str,
    token: &str,
    credential: &str,
    worker_id: &str,
) -> Result<(), String> {
    let mut client = WorkerClient::connect(format!("http://{addr}"))
        .await
        .map_err(|e| e.to_string())?;
    let register = Register {
        worker_id: worker_id.into(),
        name: worker_id.into(),
        join_token: token.into(),
        adapters: vec![pb::AdapterType::Process as i32],
        labels: Default::default(),
        slots: 1,
        version: "test".into(),
        running_run_ids: Vec::new(),
        unacknowledged_run_ids: Vec::new(),
        worker_credential: credential.into(),
    };
    let first = WorkerMessage {
        body: Some(worker_message::Body::Register(register)),
    };
    // The stream stays open (pending) after Register, as a worker's does.
    let outbound = tokio_stream::iter([first]).chain(tokio_stream::pending());
    let mut inbound = client
        .attach(outbound)
        .await
        .map_err(|s| s.message().to_string())?
        .into_inner();
    match inbound.message().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("the session ended".into()),
        Err(s) => Err(s.message().to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_join_token_for_one_worker_refuses_a_second_worker_id() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(1).await?;
    let admin: Http = c.admin(1);
    let join = admin
        .post(
            "/api/workers/join-tokens",
            json!({ "name": "one", "maxUses": 1 }),
        )
        .await?
        .ok()?;
    let token = str_field(&join, "token");
    let first = TestWorker::connect(c.grpc_addrs(), &token, "wk-one", 1).await?;
    let err = register_once(&c.grpc_addr(1), &token, "wk-two")
        .await
        .expect_err("a second worker id was admitted");
    assert!(
        err.contains("bound to worker wk-one") && err.contains("wk-two"),
        "{err}"
    );
    // The first worker registers again with its credential (kept across restarts), with the
    // join token or without it: the exchange happened once.
    drop(first);
    register_once(&c.grpc_addr(1), &token, "wk-one")
        .await
        .map_err(anyhow::Error::msg)?;
    let kept = worker_credential(&token, "wk-one");
    register_with(&c.grpc_addr(1), "", &kept, "wk-one")
        .await
        .map_err(anyhow::Error::msg)?;
    // Another credential for wk-one (another machine with the same token) is refused; so is
    // wk-one's credential registering as another worker.
    let other = worker_credential("another machine", "wk-one");
    let err = register_with(&c.grpc_addr(1), &token, &other, "wk-one")
        .await
        .expect_err("a second credential took wk-one");
    assert!(err.contains("already has a worker credential"), "{err}");
    let err = register_with(&c.grpc_addr(1), "", &kept, "wk-three")
        .await
        .expect_err("wk-one's credential registered as wk-three");
    assert!(err.contains("bound to worker wk-one"), "{err}");
    let creds = admin.get("/api/workers/credentials").await?.ok()?;
    assert_eq!(creds.as_array().map(Vec::len), Some(1), "{creds}");
    assert_eq!(creds[0]["workerId"], "wk-one", "{creds}");
    assert_eq!(creds[0]["kind"], "worker", "{creds}");
    assert_no_secret(&creds, &[&token, &kept]);
    let joins = admin.get("/api/workers/join-tokens").await?.ok()?;
    assert_eq!(joins[0]["workerIds"], json!(["wk-one"]), "{joins}");
    assert_eq!(joins[0]["maxUses"], 1, "{joins}");
    c.shutdown().await;
    Ok(())
}

/// Runs the `roost` CLI against `server` with `token`; returns its stdout, or its stderr as
/// the error.
async fn cli(server: &str, token: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(crate::support::roost_binary())
        .args(args)
        .args(["--server", server, "--token", token])
        .env_remove("ROOST_SERVER")
        .env_remove("ROOST_TOKEN")
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    anyhow::ensure!(
        out.status.success(),
        "roost {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_creates_lists_and_revokes_credentials() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(1).await?;
    let server = c.admin(1).base().to_string();
    let admin = c.admin_token.clone();

    let created: Value = serde_json::from_str(
        &cli(
            &server,
            &admin,
            &["token", "create", "--name", "ops", "--json"],
        )
        .await?,
    )?;
    let (ops_id, ops) = (str_field(&created, "id"), str_field(&created, "token"));
    let list = cli(&server, &ops, &["token", "list"]).await?;
    assert!(list.contains("ops") && list.contains(&ops_id), "{list}");
    assert!(!list.contains(&ops), "{list}");
    let revoked = cli(&server, &admin, &["token", "revoke", &ops_id]).await?;
    assert!(revoked.contains("revoked admin token"), "{revoked}");
    let err = cli(&server, &ops, &["token", "list"]).await.unwrap_err();
    assert!(err.to_string().contains("revoked"), "{err}");

    cli(
        &server,
        &admin,
        &["agent", "create", "--name", "coder", "-q"],
    )
    .await?;
    let key: Value = serde_json::from_str(
        &cli(
            &server,
            &admin,
            &["agent", "key", "create", "coder", "--json"],
        )
        .await?,
    )?;
    let key_id = str_field(&key, "id");
    let keys: Value = serde_json::from_str(
        &cli(
            &server,
            &admin,
            &["agent", "key", "list", "coder", "--json"],
        )
        .await?,
    )?;
    assert_eq!(keys[0]["id"], key_id.as_str(), "{keys}");
    cli(
        &server,
        &admin,
        &["agent", "key", "revoke", "coder", &key_id],
    )
    .await?;
    let keys = cli(&server, &admin, &["agent", "key", "list", "coder"]).await?;
    assert!(keys.contains("revoked"), "{keys}");

    let join: Value = serde_json::from_str(
        &cli(
            &server,
            &admin,
            &[
                "worker", "token", "create", "--ttl", "1h", "--uses", "1", "--json",
            ],
        )
        .await?,
    )?;
    assert_eq!(join["maxUses"], 1, "{join}");
    let join_id = str_field(&join, "id");
    let joins = cli(&server, &admin, &["worker", "token", "list"]).await?;
    assert!(joins.contains("0/1") && joins.contains(&join_id), "{joins}");
    cli(&server, &admin, &["worker", "token", "revoke", &join_id]).await?;
    let joins: Value =
        serde_json::from_str(&cli(&server, &admin, &["worker", "token", "list", "--json"]).await?)?;
    assert_eq!(joins[0]["revoked"], true, "{joins}");
    c.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_creates_lists_and_revokes_credentials() -> anyhow::Result<()> {
    use roost_proto::v1::control_client::ControlClient;
    use roost_proto::v1::{
        CreateAdminTokenRequest, ListCredentialsRequest, RevokeCredentialRequest,
    };

    use crate::support::authed;

    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(1).await?;
    let mut grpc = ControlClient::connect(format!("http://{}", c.grpc_addr(1))).await?;
    let admin = c.admin_token.clone();
    let created = grpc
        .create_admin_token(authed(
            &admin,
            None,
            CreateAdminTokenRequest { name: "ops".into() },
        )?)
        .await?
        .into_inner();
    let ops_id = created.credential.map(|i| i.id).unwrap_or_default();
    let list = |kind: i32, agent_id: &str| {
        authed(
            &admin,
            None,
            ListCredentialsRequest {
                kind,
                agent_id: agent_id.into(),
            },
        )
    };
    let admins = grpc
        .list_credentials(list(pb::CredentialKind::Admin as i32, "")?)
        .await?
        .into_inner();
    assert!(admins
        .credentials
        .iter()
        .any(|i| i.id == ops_id && !i.revoked));
    assert!(!format!("{admins:?}").contains(&created.token));
    let revoked = grpc
        .revoke_credential(authed(
            &admin,
            None,
            RevokeCredentialRequest {
                kind: pb::CredentialKind::Admin as i32,
                id: ops_id.clone(),
                agent_id: String::new(),
            },
        )?)
        .await?
        .into_inner();
    assert!(
        revoked.revoked && revoked.revoked_at_ms.is_some(),
        "{revoked:?}"
    );
    for (kind, agent) in [
        (99, ""),
        (pb::CredentialKind::AgentKey as i32, ""),
        (pb::CredentialKind::Admin as i32, "a1"),
    ] {
        let status = grpc.list_credentials(list(kind, agent)?).await.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{kind}: {status:?}"
        );
    }
    let status = grpc
        .list_credentials(authed(
            &created.token,
            None,
            ListCredentialsRequest {
                kind: pb::CredentialKind::Admin as i32,
                agent_id: String::new(),
            },
        )?)
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    c.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revoking_a_join_token_ends_its_workers_sessions_and_they_are_lost() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(1).await?;
    let admin = c.admin(1);
    let join = admin
        .post("/api/workers/join-tokens", json!({ "name": "rack" }))
        .await?
        .ok()?;
    let (join_id, token) = (str_field(&join, "id"), str_field(&join, "token"));
    let worker = TestWorker::connect(c.grpc_addrs(), &token, "wk-revoked", 1).await?;
    admin
        .delete(&format!("/api/workers/join-tokens/{join_id}"))
        .await?
        .ok()?;
    // Its lease is no longer renewed: the lease runs out and it is lost, as a silent
    // worker is (its runs with it).
    wait_for("the worker to be lost", Duration::from_secs(30), || async {
        let workers = admin.get("/api/workers").await.ok()?.ok().ok()?;
        let status = workers
            .as_array()?
            .iter()
            .find(|w| w["id"] == "wk-revoked")?["status"]
            .clone();
        (status == "lost").then_some(())
    })
    .await?;
    let err = register_once(&c.grpc_addr(1), &token, "wk-revoked")
        .await
        .expect_err("a revoked join token admitted its worker again");
    assert!(err.contains("was revoked"), "{err}");
    drop(worker);
    c.shutdown().await;
    Ok(())
}
