//! Stranded work (`roost-core/src/rules/recovery.rs`) on a real `roost dev` with its worker
//! running a real process: an agent whose runs keep failing on its issue is woken again with a
//! growing wait, three times, and then the issue is `blocked` for a person to see.

use std::time::Duration;

use roost_testkit::{wait_for, Http, RoostProcess};
use serde_json::{json, Value};

use crate::support::roost_binary;

/// Bug: an issue whose run failed waited for the next comment (forever on a quiet issue: the
/// agent timer is off by default), where Paperclip's recovery sweep wakes its assignee again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issue_whose_runs_keep_failing_is_retried_three_times_then_blocked() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let roost = RoostProcess::spawn_dev(&roost_binary(), dir.path(), Duration::from_secs(60))?;
    let http = Http::new(&roost.base_url).with_token(&roost.admin_token);
    let cid = roost.company_id.clone();
    let company = http
        .patch(
            &format!("/api/companies/{cid}"),
            json!({ "recoverStrandedAfterSecs": 1 }),
        )
        .await?
        .ok()?;
    assert_eq!(company["recoverStrandedAfterSecs"], 1, "{company}");
    let refused = http
        .patch(
            &format!("/api/companies/{cid}"),
            json!({ "recoverStrandedAfterSecs": 86_401 }),
        )
        .await?;
    assert_eq!(refused.status.as_u16(), 400, "{}", refused.body);

    let agent = http
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "flaky", "adapterType": "process",
                    "adapterConfig": { "command": "sh", "args": ["-c", "exit 3"] } }),
        )
        .await?
        .ok()?;
    let agent_id = agent["id"].as_str().unwrap_or_default().to_string();
    let issue = http
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "never finished", "assigneeAgentId": agent_id }),
        )
        .await?
        .ok()?;
    let issue_id = issue["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(issue["status"], "todo", "{issue}");

    // 1 s, 2 s and 4 s after each failed run ends (the agent's last run), then 8 s: blocked
    // (the sweep looks every 5 s).
    let blocked = wait_for("the issue blocked", Duration::from_secs(120), || async {
        let issue = http
            .get(&format!("/api/issues/{issue_id}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        (issue["status"] == "blocked").then_some(issue)
    })
    .await?;
    assert_eq!(blocked["recovery"]["attempts"], 3, "{blocked}");

    let wakes = http
        .get(&format!("/api/companies/{cid}/wakes?agentId={agent_id}"))
        .await?
        .ok()?;
    let reasons: Vec<&str> = wakes
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["reason"].as_str())
        .collect();
    let recoveries = reasons
        .iter()
        .filter(|r| **r == "issue_assignment_recovery")
        .count();
    assert_eq!(recoveries, 3, "{reasons:?}");
    let runs = http
        .get(&format!(
            "/api/companies/{cid}/heartbeat-runs?agentId={agent_id}"
        ))
        .await?
        .ok()?;
    let failed = runs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] == "failed")
        .count();
    assert_eq!(
        failed, 4,
        "the assignment's run and three recoveries: {runs}"
    );
    let activity = http
        .get(&format!(
            "/api/companies/{cid}/activity?entityType=issue&entityId={issue_id}"
        ))
        .await?
        .ok()?;
    let recovered: Vec<&Value> = activity
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "issue.recovered")
        .collect();
    assert_eq!(recovered.len(), 4, "three wakes and the block: {activity}");
    Ok(())
}
