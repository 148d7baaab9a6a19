//! Shared helpers for the end-to-end tests.

use std::path::PathBuf;

use serde_json::{json, Value};
use tonic::transport::Channel;

use roost_core::{Actor, Command, Envelope, Outcome, Timestamp};
use roost_proto::v1::control_client::ControlClient;
use roost_testkit::{Http, TestNode};

pub fn roost_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roost"))
}

/// The newest activity sequence number of the test company: any accepted write moves it.
pub async fn activity_head(node: &TestNode) -> anyhow::Result<u64> {
    let page = node
        .admin
        .get(&format!(
            "/api/companies/{}/activity?limit=1",
            node.company_id
        ))
        .await?
        .ok()?;
    Ok(page[0]["seq"].as_u64().unwrap_or(0))
}

/// Proposes `command` as the system, as the leader's dispatcher does: no REST route registers
/// workers, assigns runs or reports a worker's result.
pub async fn as_dispatcher(node: &TestNode, command: Command) -> anyhow::Result<Outcome> {
    let envelope = Envelope {
        at: Timestamp(chrono::Utc::now().timestamp_millis()),
        actor: Actor::system(),
        command,
        idempotency_key: None,
        request_id: None,
    };
    let written = node.server().api().node().write(envelope).await?;
    Ok(written.result?)
}

/// An agent with a key and a live run, as an HTTP client that sends both.
pub struct AgentSession {
    pub agent_id: String,
    pub run_id: String,
    pub http: Http,
}

pub async fn agent_session(node: &TestNode, name: &str) -> anyhow::Result<AgentSession> {
    let (agent_id, key) = node.agent(name).await?;
    let run_id = node.start_run(&agent_id).await?;
    let http = node.http().with_token(&key).with_run(&run_id);
    Ok(AgentSession {
        agent_id,
        run_id,
        http,
    })
}

pub async fn todo_issue(node: &TestNode, title: &str) -> anyhow::Result<String> {
    let issue = node
        .issue(json!({ "title": title, "status": "todo" }))
        .await?;
    Ok(str_field(&issue, "id"))
}

/// The wakes of `agent` in the node's company, newest first.
pub async fn wakes_of(node: &TestNode, agent: &str) -> anyhow::Result<Vec<Value>> {
    let list = node
        .admin
        .get(&format!(
            "/api/companies/{}/wakes?agentId={agent}",
            node.company_id
        ))
        .await?
        .ok()?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// The text of `field` in each element of the array `list`.
pub fn strs<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v[field].as_str())
        .collect()
}

pub fn str_field(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_string()
}

/// Tests that run a whole cluster take this lock, so that on a small machine (CI has 2 cores)
/// they do not starve each other's Raft heartbeats into spurious elections; so do tests that
/// push megabytes through a node (attachments), which starved a cluster test's leader once.
pub async fn one_cluster_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
        .lock()
        .await
}

/// `message` with `token` as its bearer and, if given, `run` as its run id.
pub fn authed<T>(token: &str, run: Option<&str>, message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    if let Some(run) = run {
        req.metadata_mut().insert("x-roost-run-id", run.parse()?);
    }
    Ok(req)
}

/// A gRPC Control client of `node`.
pub async fn control(node: &TestNode) -> anyhow::Result<ControlClient<Channel>> {
    Ok(ControlClient::connect(format!("http://{}", node.server().grpc_addr())).await?)
}

/// An agent of `company_id` and its key, made through `admin`.
pub async fn agent_with_key(
    admin: &Http,
    company_id: &str,
    name: &str,
) -> anyhow::Result<(String, String)> {
    let agent = admin
        .post(
            &format!("/api/companies/{company_id}/agents"),
            json!({ "name": name }),
        )
        .await?
        .ok()?;
    let id = str_field(&agent, "id");
    let key = new_key(admin, &id).await?;
    Ok((id, key))
}

/// Whether company `cid` has a wake skipped for `reason` (`company_paused`, ...), read through
/// `admin`.
pub async fn has_wake_skipped_for(admin: &Http, cid: &str, reason: &str) -> anyhow::Result<bool> {
    let wakes = admin
        .get(&format!("/api/companies/{cid}/wakes"))
        .await?
        .ok()?;
    Ok(wakes
        .as_array()
        .is_some_and(|w| w.iter().any(|w| w["statusReason"] == reason)))
}

/// A new API key of agent `agent_id`, made through `admin`.
pub async fn new_key(admin: &Http, agent_id: &str) -> anyhow::Result<String> {
    let key = admin
        .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
        .await?
        .ok()?;
    Ok(str_field(&key, "token"))
}

/// The id of `agent`'s newest run in `status`, if it has one now (for `wait_for`).
pub async fn run_in_status(
    admin: &roost_testkit::Http,
    company: &str,
    agent: &str,
    status: &str,
) -> Option<String> {
    let runs = admin
        .get(&format!(
            "/api/companies/{company}/heartbeat-runs?agentId={agent}"
        ))
        .await
        .ok()?
        .ok()
        .ok()?;
    runs.as_array()?
        .iter()
        .find(|r| r["status"] == status)
        .map(|r| str_field(r, "id"))
}

/// Waits until the worker of a `roost dev` is online: `roost dev` prints its address before
/// its worker has registered.
pub async fn dev_worker_online(admin: &Http) -> anyhow::Result<()> {
    roost_testkit::wait_for(
        "the dev worker online",
        std::time::Duration::from_secs(60),
        || async {
            let workers = admin.get("/api/workers").await.ok()?.ok().ok()?;
            workers
                .as_array()?
                .iter()
                .any(|w| w["status"] == "online")
                .then_some(())
        },
    )
    .await
}

/// A run still queued, assigned or running (a run as REST answers it).
pub fn is_live(run: &Value) -> bool {
    ["queued", "assigned", "running"].contains(&run["status"].as_str().unwrap_or(""))
}

/// `agent`'s runs once it has one and none is live any more (within `wait`).
pub async fn runs_ended(
    admin: &Http,
    company: &str,
    agent: &str,
    wait: std::time::Duration,
) -> anyhow::Result<Vec<Value>> {
    let path = format!("/api/companies/{company}/heartbeat-runs?agentId={agent}");
    roost_testkit::wait_for("the agent's run to end", wait, || async {
        let runs = admin.get(&path).await.ok()?.ok().ok()?;
        let runs = runs.as_array()?.clone();
        (!runs.is_empty() && !runs.iter().any(is_live)).then_some(runs)
    })
    .await
}
