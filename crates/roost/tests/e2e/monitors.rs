//! Issue monitors, as Paperclip's skill tells an agent to schedule one: `PATCH` the issue's
//! `executionPolicy.monitor`, read `monitorNextCheckAt` back from the same response, and be woken
//! with `issue_monitor_due` when it is due, by the leader's sweep of a real node; a check now
//! fires it early; gRPC and roost's CLI do the same with REST's rules.

use std::time::Duration;

use roost_proto::v1::{
    CheckIssueMonitorRequest, IssueMonitorPolicy, MonitorStatus, ScheduleIssueMonitorRequest,
};
use roost_testkit::{wait_for, TestNode};
use serde_json::{json, Value};
use tonic::Code;

use crate::grpc_wakes::refused;
use crate::processes::{cli, stdout_json};
use crate::support::*;

/// An RFC 3339 time `ms` from now.
fn in_ms(ms: i64) -> String {
    roost_core::Timestamp(chrono::Utc::now().timestamp_millis() + ms).to_rfc3339()
}

/// A `PATCH` body scheduling a monitor an hour from now.
fn an_hour_ahead() -> Value {
    json!({ "executionPolicy": { "monitor": { "nextCheckAt": in_ms(3_600_000) } } })
}

/// A new wake of `agent` for `issue` with `reason` whose payload has `attempt`, once there is
/// one: not one of `seen` (a later wake merges its payload into a pending one, but is a record
/// of its own).
async fn woken(
    node: &TestNode,
    agent: &str,
    issue: &str,
    reason: &str,
    attempt: u32,
    seen: &[Value],
) -> anyhow::Result<Value> {
    wait_for(
        &format!("a {reason} wake (attempt {attempt})"),
        Duration::from_secs(20),
        || async {
            let wakes = wakes_of(node, agent).await.ok()?;
            wakes.into_iter().find(|w| {
                !seen.contains(&w["id"])
                    && w["reason"] == reason
                    && w["issueId"] == issue
                    && w["payload"]["monitorAttemptCount"] == attempt
            })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_schedules_a_monitor_and_is_woken_when_it_is_due() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let agent = agent_session(&node, "waiter").await?;
    let issue = node
        .issue(json!({ "title": "wait for CI", "status": "in_progress",
                       "assigneeAgentId": agent.agent_id }))
        .await?;
    let id = str_field(&issue, "id");
    let path = format!("/api/issues/{id}");

    let due = in_ms(1_500);
    let monitor = json!({ "nextCheckAt": due, "kind": "external_service",
                          "serviceName": "GitHub Actions", "notes": "CI run 42",
                          "externalRef": "https://ci.example/runs/42", "maxAttempts": 3 });
    let patched = agent
        .http
        .patch(&path, json!({ "executionPolicy": { "monitor": monitor } }))
        .await?
        .ok()?;
    // What the skill has an agent confirm from this same response.
    assert!(patched["monitorNextCheckAt"].is_string(), "{patched}");
    assert_eq!(patched["assigneeAgentId"], json!(agent.agent_id));
    assert_eq!(patched["assigneeUserId"], Value::Null);
    assert_eq!(patched["monitorScheduledBy"], "assignee");
    assert_eq!(patched["executionState"]["monitor"]["status"], "scheduled");
    assert_eq!(
        patched["executionPolicy"]["monitor"]["externalRef"],
        "[redacted]"
    );

    let wake = woken(&node, &agent.agent_id, &id, "issue_monitor_due", 1, &[]).await?;
    assert_eq!(wake["payload"]["source"], "scheduled", "{wake}");
    assert_eq!(wake["payload"]["serviceName"], "GitHub Actions", "{wake}");
    assert_eq!(wake["payload"]["monitorNotes"], "CI run 42", "{wake}");
    let after = node.admin.get(&path).await?.ok()?;
    assert_eq!(after["executionState"]["monitor"]["status"], "triggered");
    assert_eq!(after["monitorAttemptCount"], 1, "{after}");
    assert_eq!(after["monitorNextCheckAt"], Value::Null, "{after}");
    assert!(after["executionPolicy"]["monitor"].is_null(), "{after}");

    // Fired once: a check now has nothing to fire.
    let check = format!("{path}/monitor/check-now");
    let nothing = agent.http.post(&check, json!({})).await?;
    assert_eq!(nothing.status, 409, "{}", nothing.body);
    assert!(
        nothing.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("no scheduled monitor"),
        "{}",
        nothing.body
    );

    // Scheduled an hour ahead: another agent may not fire it; its assignee may, now.
    agent.http.patch(&path, an_hour_ahead()).await?.ok()?;
    let (_, other_key) = node.agent("bystander").await?;
    let other = node
        .http()
        .with_token(&other_key)
        .post(&check, json!({}))
        .await?;
    assert_eq!(other.status, 403, "{}", other.body);
    let seen: Vec<Value> = wakes_of(&node, &agent.agent_id)
        .await?
        .into_iter()
        .map(|w| w["id"].clone())
        .collect();
    let fired = agent.http.post(&check, json!({})).await?.ok()?;
    assert_eq!(fired, json!({ "ok": true }));
    let manual = woken(&node, &agent.agent_id, &id, "issue_monitor_due", 2, &seen).await?;
    assert_eq!(manual["payload"]["source"], "manual", "{manual}");

    // Bad input changes nothing, with a sentence; so does a monitor on work that is not an
    // agent's in progress.
    let bad = agent
        .http
        .patch(
            &path,
            json!({ "executionPolicy": { "monitor": { "nextCheckAt": "tomorrow" } } }),
        )
        .await?;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("nextCheckAt"),
        "{}",
        bad.body
    );
    let todo = todo_issue(&node, "not started").await?;
    let refused_422 = node
        .admin
        .patch(
            &format!("/api/issues/{todo}"),
            json!({ "executionPolicy": { "monitor": { "nextCheckAt": in_ms(60_000) } } }),
        )
        .await?;
    assert_eq!(refused_422.status, 422, "{}", refused_422.body);

    // Closing the issue clears a scheduled monitor, saying why.
    agent.http.patch(&path, an_hour_ahead()).await?.ok()?;
    let closed = node
        .admin
        .patch(&path, json!({ "status": "done" }))
        .await?
        .ok()?;
    assert_eq!(closed["executionState"]["monitor"]["status"], "cleared");
    assert_eq!(closed["executionState"]["monitor"]["clearReason"], "done");
    Ok(())
}

/// gRPC schedules and checks a monitor with REST's rules; roost's CLI sets, shows and clears
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_roosts_cli_schedule_and_check_monitors() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let mut grpc = control(&node).await?;
    let agent = agent_session(&node, "grpc-waiter").await?;
    let issue = node
        .issue(json!({ "title": "deploy", "status": "in_review",
                       "assigneeAgentId": agent.agent_id }))
        .await?;
    let ident = str_field(&issue, "identifier");
    let id = str_field(&issue, "id");
    let policy = |ms: i64, attempts: Option<u32>| IssueMonitorPolicy {
        next_check_at_ms: chrono::Utc::now().timestamp_millis() + ms,
        notes: Some("deploy 7".into()),
        max_attempts: attempts,
        ..Default::default()
    };
    let (code, text) = refused(
        grpc.schedule_issue_monitor(authed(
            &node.admin_token,
            None,
            ScheduleIssueMonitorRequest {
                issue_id: ident.clone(),
                monitor: Some(policy(60_000, Some(0))),
            },
        )?)
        .await
        .expect_err("max_attempts 0 was taken"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    let scheduled = grpc
        .schedule_issue_monitor(authed(
            &node.admin_token,
            None,
            ScheduleIssueMonitorRequest {
                issue_id: ident.clone(),
                monitor: Some(policy(3_600_000, Some(5))),
            },
        )?)
        .await?
        .into_inner();
    let monitor = scheduled.monitor.expect("the issue's monitor");
    assert_eq!(monitor.status, MonitorStatus::Scheduled as i32);
    assert_eq!(monitor.notes.as_deref(), Some("deploy 7"));
    let checked = grpc
        .check_issue_monitor(authed(
            &node.admin_token,
            None,
            CheckIssueMonitorRequest {
                issue_id: ident.clone(),
            },
        )?)
        .await?
        .into_inner();
    let monitor = checked.monitor.expect("the issue's monitor");
    assert_eq!(monitor.status, MonitorStatus::Triggered as i32);
    assert_eq!(monitor.attempt_count, 1);
    woken(&node, &agent.agent_id, &id, "issue_monitor_due", 1, &[]).await?;

    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let run = |args: &[&str]| cli(&base, &admin, args);
    let set = stdout_json(&run(&[
        "issue",
        "monitor",
        "set",
        &ident,
        "--in",
        "2h",
        "--notes",
        "look again",
        "--max-attempts",
        "4",
        "--recovery",
        "escalate_to_board",
        "--json",
    ])?)?;
    assert_eq!(set["monitor"]["status"], "scheduled", "{set}");
    assert_eq!(set["monitor"]["maxAttempts"], 4, "{set}");
    assert_eq!(set["monitor"]["scheduledBy"], "board", "{set}");
    let shown = run(&["issue", "monitor", "show", &ident])?;
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("escalate_to_board") && text.contains("look again"),
        "{text}"
    );
    let cleared = stdout_json(&run(&["issue", "monitor", "clear", &ident, "--json"])?)?;
    assert_eq!(cleared["monitor"]["clearReason"], "manual", "{cleared}");
    let again = run(&["issue", "monitor", "clear", &ident])?;
    assert!(!again.status.success(), "a second clear succeeded");
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("no scheduled monitor"), "{err}");
    let bad = run(&["issue", "monitor", "set", &ident, "--in", "soon"])?;
    assert!(!bad.status.success(), "--in soon was taken");
    Ok(())
}
