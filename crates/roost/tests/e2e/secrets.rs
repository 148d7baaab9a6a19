//! Secrets stay secret: activity names changed configuration fields without their
//! values, secret `env` values are never returned, runs never show their key hashes, and an
//! agent reads only its own runs' logs unless an operator grants more.

use std::collections::BTreeMap;

use roost_core::{AdapterType, Command, RunReport, RunStatus};
use roost_proto::v1::{
    GetAgentRequest, ListAgentsRequest, StreamRunLogRequest, UpdateAgentRequest,
};
use roost_server::auth::{generate_token, hash_token};
use serde_json::{json, Value};

use roost_testkit::{Http, TestNode};

use crate::support::*;

const CREATED_SECRET: &str = "sk-created-0123456789";
const PATCHED_SECRET: &str = "sk-patched-9876543210";

/// An agent holding a secret and a plain `env` value; returns its id.
async fn agent_with_secret(node: &TestNode) -> anyhow::Result<String> {
    let body = json!({
        "name": "holder",
        "adapterConfig": {
            "command": "cmd-created",
            "env": {
                "OPENAI_API_KEY": { "type": "secret", "value": CREATED_SECRET },
                "REGION": "eu-west",
            },
        },
    });
    let agent = node
        .admin
        .post(&format!("/api/companies/{}/agents", node.company_id), body)
        .await?
        .ok()?;
    assert_redacted(&agent["adapterConfig"]);
    Ok(str_field(&agent, "id"))
}

/// An API key for `agent_id`, as an HTTP client.
async fn key_for(node: &TestNode, agent_id: &str) -> anyhow::Result<(String, Http)> {
    let token = new_key(&node.admin, agent_id).await?;
    let http = node.http().with_token(&token);
    Ok((token, http))
}

fn assert_no_secret(text: &str) {
    for secret in [CREATED_SECRET, PATCHED_SECRET] {
        assert!(!text.contains(secret), "a secret leaked: {text}");
    }
}

fn assert_redacted(config: &Value) {
    assert_no_secret(&config.to_string());
    assert_eq!(
        config["env"]["OPENAI_API_KEY"],
        json!({ "type": "secret", "redacted": true }),
        "{config}"
    );
    assert_eq!(config["env"]["REGION"], "eu-west", "plain values are shown");
}

/// The stored configuration of `agent_id`: what the worker plane hands the worker.
fn stored_config(node: &TestNode, agent_id: &str) -> Value {
    node.server()
        .api()
        .reader()
        .read(|s| s.agents.get(agent_id).map(|a| a.adapter_config.clone()))
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn activity_does_not_show_adapter_config_secrets() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let holder = agent_with_secret(&node).await?;
    let patch = json!({
        "name": "holder-2",
        "adapterConfig": {
            "command": "cmd-patched",
            "env": { "OPENAI_API_KEY": { "type": "secret", "value": PATCHED_SECRET } },
        },
    });
    node.admin
        .patch(&format!("/api/agents/{holder}"), patch)
        .await?
        .ok()?;

    // Every agent of the company reads the activity log.
    let (peer, _) = node.agent("peer").await?;
    let (_, peer_http) = key_for(&node, &peer).await?;
    let activity = peer_http
        .get(&format!("/api/companies/{}/activity", node.company_id))
        .await?
        .ok()?;
    let text = activity.to_string();
    assert_no_secret(&text);
    assert!(
        !text.contains("cmd-patched"),
        "no config value at all: {text}"
    );
    let updated = activity
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["action"] == "agent.updated"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        updated["details"]["changed"],
        json!([
            "name",
            "adapterConfig.command",
            "adapterConfig.env.OPENAI_API_KEY",
            "adapterConfig.env.REGION",
        ]),
        "{updated}"
    );
    assert_eq!(updated["details"]["name"], "holder-2");
    node.shutdown().await
}

#[tokio::test]
async fn secret_env_values_are_never_returned_but_kept_across_a_round_trip() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let holder = agent_with_secret(&node).await?;
    let (holder_token, holder_http) = key_for(&node, &holder).await?;

    let got = node
        .admin
        .get(&format!("/api/agents/{holder}"))
        .await?
        .ok()?;
    assert_redacted(&got["adapterConfig"]);
    let me = holder_http.get("/api/agents/me").await?.ok()?;
    assert_redacted(&me["adapterConfig"]);
    let list = node
        .admin
        .get(&format!("/api/companies/{}/agents", node.company_id))
        .await?
        .ok()?;
    assert_no_secret(&list.to_string());

    // The operator edits the configuration it read, secret marker included.
    let mut config = got["adapterConfig"].clone();
    config["command"] = json!("cmd-edited");
    let patched = node
        .admin
        .patch(
            &format!("/api/agents/{holder}"),
            json!({ "adapterConfig": config }),
        )
        .await?
        .ok()?;
    assert_redacted(&patched["adapterConfig"]);
    let stored = stored_config(&node, &holder);
    assert_eq!(
        stored["env"]["OPENAI_API_KEY"],
        json!({ "type": "secret", "value": CREATED_SECRET }),
        "the round trip kept the secret"
    );
    assert_eq!(stored["command"], "cmd-edited");

    // A marker for a key with nothing stored is refused and changes nothing.
    let refused = node
        .admin
        .patch(
            &format!("/api/agents/{holder}"),
            json!({ "adapterConfig": { "env": { "NEW_KEY": { "type": "secret" } } } }),
        )
        .await?;
    assert_eq!(refused.status, 400, "{:?}", refused.body);
    assert!(refused
        .body
        .to_string()
        .contains("adapterConfig.env.NEW_KEY"));
    assert_eq!(stored_config(&node, &holder), stored);

    // gRPC shows the same redaction, to the agent itself and to the admin.
    let mut grpc = control(&node).await?;
    for token in [&node.admin_token, &holder_token] {
        let agent = grpc
            .get_agent(authed(
                token,
                None,
                GetAgentRequest {
                    agent_id: holder.clone(),
                },
            )?)
            .await?
            .into_inner();
        assert_redacted(&serde_json::from_str(&agent.adapter_config_json)?);
    }
    let listed = grpc
        .list_agents(authed(
            &node.admin_token,
            None,
            ListAgentsRequest {
                company_id: node.company_id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert!(!listed.agents.is_empty());
    for agent in &listed.agents {
        assert_no_secret(&agent.adapter_config_json);
    }
    let updated = grpc
        .update_agent(authed(
            &node.admin_token,
            None,
            UpdateAgentRequest {
                agent_id: holder.clone(),
                adapter_config_json: Some(
                    json!({ "env": {
                        "OPENAI_API_KEY": { "type": "secret", "value": PATCHED_SECRET },
                        "REGION": "eu-west",
                    }})
                    .to_string(),
                ),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_redacted(&serde_json::from_str(&updated.adapter_config_json)?);
    assert_eq!(
        stored_config(&node, &holder)["env"]["OPENAI_API_KEY"]["value"],
        PATCHED_SECRET
    );
    node.shutdown().await
}

/// A run of `agent_id` assigned to a registered worker with a run-scoped key, as the
/// dispatcher makes one; returns (run id, the run's key).
async fn dispatched_run(
    node: &TestNode,
    agent_id: &str,
    issue_id: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let body = match issue_id {
        Some(issue) => json!({ "issueId": issue }),
        None => json!({}),
    };
    let woken = node
        .admin
        .post(&format!("/api/agents/{agent_id}/wakeup"), body)
        .await?
        .ok()?;
    let wake_id = str_field(&woken["wake"], "id");
    as_dispatcher(
        node,
        Command::RegisterWorker {
            worker_id: "wk-1".into(),
            name: "box".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 8,
            version: "test".into(),
        },
    )
    .await?;
    let key = generate_token("rst_run_");
    let run_id = format!("run-{}", &wake_id[..8]);
    as_dispatcher(
        node,
        Command::AssignRun {
            wake_id,
            run_id: run_id.clone(),
            worker_id: "wk-1".into(),
            token_hash: Some(hash_token(&key)),
        },
    )
    .await?;
    Ok((run_id, key))
}

#[tokio::test]
async fn runs_never_show_token_hashes() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent, _) = node.agent("runner").await?;
    let issue = todo_issue(&node, "hashed").await?;
    let (run, key) = dispatched_run(&node, &agent, Some(&issue)).await?;
    let hash = hash_token(&key);
    // The run's key works, so its hash is in the run's row.
    let run_http = node.http().with_token(&key).with_run(&run);
    run_http
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": agent, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;

    let mut bodies = vec![
        node.admin
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await?
            .ok()?,
        node.admin
            .get(&format!(
                "/api/companies/{}/heartbeat-runs",
                node.company_id
            ))
            .await?
            .ok()?,
        run_http
            .get(&format!("/api/issues/{issue}/active-run"))
            .await?
            .ok()?,
        run_http
            .get(&format!("/api/issues/{issue}/heartbeat-context"))
            .await?
            .ok()?,
    ];
    let woken = node
        .admin
        .post(
            &format!("/api/agents/{agent}/wakeup"),
            json!({ "issueId": issue }),
        )
        .await?
        .ok()?;
    bodies.push(woken);
    let finished = node
        .admin
        .post(
            &format!("/api/heartbeat-runs/{run}/finish"),
            json!({ "status": "succeeded" }),
        )
        .await?
        .ok()?;
    bodies.push(finished);
    for body in &bodies {
        let text = body.to_string();
        assert!(!text.contains("tokenHashes"), "{text}");
        assert!(!text.contains(&hash), "{text}");
    }
    assert!(
        bodies.iter().any(|b| b.to_string().contains(run.as_str())),
        "the bodies show the run"
    );
    node.shutdown().await
}

#[tokio::test]
async fn an_agent_cannot_read_another_agents_run_log_unless_granted() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (owner, owner_key) = node.agent("owner").await?;
    let (peer, peer_key) = node.agent("peer").await?;
    let (run, _) = dispatched_run(&node, &owner, None).await?;
    let report = RunReport {
        log_tail: "the owner's output\n".into(),
        log_bytes: 19,
        ..Default::default()
    };
    as_dispatcher(
        &node,
        Command::FinishRun {
            run_id: run.clone(),
            status: RunStatus::Succeeded,
            error: None,
            report,
        },
    )
    .await?;
    let log_path = format!("/api/heartbeat-runs/{run}/log");
    let run_path = format!("/api/heartbeat-runs/{run}");
    let owner_http = node.http().with_token(&owner_key);
    let peer_http = node.http().with_token(&peer_key);

    let own = owner_http.get(&log_path).await?.ok()?;
    assert_eq!(own["content"], "the owner's output\n");
    let refused = peer_http.get(&log_path).await?;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert!(
        refused.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("permissions.readCompanyRunLogs")),
        "the refusal says what to ask for: {:?}",
        refused.body
    );
    let details = peer_http.get(&run_path).await?.ok()?;
    assert_eq!(details["logTail"], "", "details carry no tail for the peer");
    assert_eq!(
        details["status"], "succeeded",
        "the rest of the run is visible"
    );

    let mut grpc = control(&node).await?;
    let request = || StreamRunLogRequest {
        run_id: run.clone(),
        offset: 0,
        follow: false,
    };
    let denied = grpc
        .stream_run_log(authed(&peer_key, None, request())?)
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(denied, Some(tonic::Code::PermissionDenied));

    // Another company's agent does not learn that the run exists.
    let other = node
        .admin
        .post("/api/companies", json!({ "name": "Elsewhere" }))
        .await?
        .ok()?;
    let stranger = node
        .admin
        .post(
            &format!("/api/companies/{}/agents", str_field(&other, "id")),
            json!({ "name": "stranger" }),
        )
        .await?
        .ok()?;
    let (_, stranger_http) = key_for(&node, &str_field(&stranger, "id")).await?;
    assert_eq!(stranger_http.get(&log_path).await?.status, 404);

    // A misspelt grant is refused; the real one opens the company's logs.
    let bad = node
        .admin
        .patch(
            &format!("/api/agents/{peer}"),
            json!({ "permissions": { "readAllRunLogs": true } }),
        )
        .await?;
    assert_eq!(bad.status, 400, "{:?}", bad.body);
    let granted = node
        .admin
        .patch(
            &format!("/api/agents/{peer}"),
            json!({ "permissions": { "readCompanyRunLogs": true } }),
        )
        .await?
        .ok()?;
    assert_eq!(granted["permissions"]["readCompanyRunLogs"], true);
    let read = peer_http.get(&log_path).await?.ok()?;
    assert_eq!(read["content"], "the owner's output\n");
    let details = peer_http.get(&run_path).await?.ok()?;
    assert_eq!(details["logTail"], "the owner's output\n");
    let mut stream = grpc
        .stream_run_log(authed(&peer_key, None, request())?)
        .await?
        .into_inner();
    let chunk = stream.message().await?.map(|c| c.data).unwrap_or_default();
    assert_eq!(chunk, b"the owner's output\n");
    node.shutdown().await
}
