//! The loop breaker over REST: two agents pinging each other by @mentions
//! are paused after N wakes with one `wake_loop` incident naming both; thresholds through the
//! company and agent routes; the incident's `resume`.

use serde_json::{json, Value};

use roost_testkit::TestNode;

use crate::support::*;

async fn agent_row(node: &TestNode, id: &str) -> anyhow::Result<Value> {
    node.admin.get(&format!("/api/agents/{id}")).await?.ok()
}

async fn status_of(node: &TestNode, id: &str) -> anyhow::Result<(String, String)> {
    let row = agent_row(node, id).await?;
    Ok((
        str_field(&row, "status"),
        row["pauseReason"].as_str().unwrap_or("-").to_string(),
    ))
}

#[tokio::test]
async fn a_ping_pong_between_two_agents_is_paused_after_n_wakes() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let company = format!("/api/companies/{}", node.company_id);
    let row = node
        .admin
        .patch(&company, json!({ "loopBreaker": { "pingPongWakes": 4 } }))
        .await?
        .ok()?;
    assert_eq!(row["loopBreaker"], json!({ "pingPongWakes": 4 }), "{row}");
    assert_eq!(row["loopBreakerEffective"]["pingPongWakes"], 4);
    assert_eq!(row["loopBreakerEffective"]["issueWakes"], 20, "the default");

    let (ping, ping_key) = node.agent("ping").await?;
    let (pong, pong_key) = node.agent("pong").await?;
    let issue = node.issue(json!({ "title": "Whose turn?" })).await?;
    let comments = format!("/api/issues/{}/comments", str_field(&issue, "id"));
    let as_ping = node.http().with_token(&ping_key);
    let as_pong = node.http().with_token(&pong_key);
    let active = ("active".to_string(), "-".to_string());
    for n in 0..4 {
        let (who, whom) = if n % 2 == 0 {
            (&as_ping, "pong")
        } else {
            (&as_pong, "ping")
        };
        who.post(&comments, json!({ "body": format!("@{whom} your turn") }))
            .await?
            .ok()?;
        if n < 3 {
            assert_eq!(
                status_of(&node, &ping).await?,
                active,
                "after {} wakes",
                n + 1
            );
            assert_eq!(status_of(&node, &pong).await?, active);
        }
    }
    let paused = ("paused".to_string(), "loop_detected".to_string());
    assert_eq!(status_of(&node, &ping).await?, paused, "the 4th wake trips");
    assert_eq!(status_of(&node, &pong).await?, paused);

    let overview = node
        .admin
        .get(&format!("{company}/budgets/overview"))
        .await?
        .ok()?;
    let incidents: Vec<&Value> = overview["incidents"]
        .as_array()
        .map(|a| a.iter().filter(|i| i["kind"] == "wake_loop").collect())
        .unwrap_or_default();
    assert_eq!(incidents.len(), 1, "{overview}");
    let incident = incidents[0];
    let details = &incident["wakeLoop"];
    assert_eq!(details["loopKind"], "ping_pong");
    let mut named: Vec<String> = details["agentIds"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    named.sort();
    let mut both = vec![ping.clone(), pong.clone()];
    both.sort();
    assert_eq!(named, both, "{incident}");
    assert_eq!(details["wakeIds"].as_array().map(Vec::len), Some(4));
    assert_eq!(details["issueIds"], json!([issue["id"]]));
    // Another mention while paused is skipped, not a second incident.
    as_ping
        .post(&comments, json!({ "body": "@pong again" }))
        .await?
        .ok()?;
    let wakes = node
        .admin
        .get(&format!("{company}/wakes?agentId={pong}"))
        .await?
        .ok()?;
    assert_eq!(wakes[0]["status"], "skipped", "{wakes}");
    assert_eq!(wakes[0]["statusReason"], "agent_paused_loop");

    // The incident's own resolution: no budget to raise, `resume` resumes both.
    let resolve = format!(
        "{company}/budget-incidents/{}/resolve",
        str_field(incident, "id")
    );
    let refused = node
        .admin
        .post(
            &resolve,
            json!({ "action": "raise_and_resume", "amount": 100 }),
        )
        .await?;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.body);
    assert!(
        refused.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("resume, keep_paused or dismiss")),
        "{}",
        refused.body
    );
    let resolved = node
        .admin
        .post(&resolve, json!({ "action": "resume" }))
        .await?
        .ok()?;
    assert_eq!(resolved["status"], "resolved");
    assert_eq!(status_of(&node, &ping).await?, active);
    assert_eq!(status_of(&node, &pong).await?, active);
    node.shutdown().await
}

#[tokio::test]
async fn loop_breaker_settings_are_bounded_and_set_at_creation() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let created = node
        .admin
        .post(
            &format!("/api/companies/{}/agents", node.company_id),
            json!({ "name": "calm", "loopBreaker": { "enabled": false, "runWakes": 5 } }),
        )
        .await?
        .ok()?;
    assert_eq!(created["loopBreaker"]["enabled"], false, "{created}");
    assert_eq!(created["loopBreakerEffective"]["runWakes"], 5);
    let path = format!("/api/agents/{}", str_field(&created, "id"));
    let too_long = node
        .admin
        .patch(&path, json!({ "loopBreaker": { "windowMinutes": 5000 } }))
        .await?;
    assert_eq!(too_long.status.as_u16(), 400, "{}", too_long.body);
    let error = too_long.body["error"].as_str().unwrap_or_default();
    assert!(error.contains("loopBreaker.windowMinutes"), "{error}");
    let unknown = node
        .admin
        .patch(&path, json!({ "loopBreaker": { "maxWakes": 3 } }))
        .await?;
    assert_eq!(unknown.status.as_u16(), 400, "{}", unknown.body);
    let row = agent_row(&node, &str_field(&created, "id")).await?;
    assert_eq!(
        row["loopBreakerEffective"]["windowMinutes"], 30,
        "unchanged"
    );
    node.shutdown().await
}
