//! Paperclip's published agent skill (`skills/paperclip/SKILL.md` of `paperclipai@2026.916.1`),
//! followed by a shell agent (`tests/agents/paperclip-skill.sh`) under the `process` adapter of a
//! real `roost dev`: woken by an assignment, it does the skill's heartbeat procedure with the
//! skill's env vars and headers, and the issue ends `done` with its comment, made by its run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roost_testkit::{Http, RoostProcess};
use serde_json::{json, Value};

use crate::support::{roost_binary, str_field};

const WAIT: Duration = Duration::from_secs(60);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/paperclip-skill.sh")
}

/// Every agent trace in the dev worker's work dir, for failure messages.
fn traces(work: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(work).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("agent-") && name.ends_with(".log") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            out.push_str(&format!("--- {name} ---\n{text}\n"));
        }
    }
    if out.is_empty() {
        out.push_str("(no agent trace)");
    }
    out
}

/// The agent's requests in its trace, as `METHOD PATH -> CODE`.
fn requests(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter(|l| {
            ["GET ", "POST ", "PATCH ", "PUT ", "DELETE "]
                .iter()
                .any(|m| l.starts_with(m))
        })
        .filter_map(|l| {
            let (request, reply) = l.split_once(" -> ")?;
            Some(format!("{request} -> {}", reply.get(..3)?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_following_paperclips_skill_finishes_its_issue_with_a_comment(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let roost = RoostProcess::spawn_dev(&roost_binary(), dir.path(), WAIT)?;
    let work = dir.path().join("work");
    let admin = Http::new(&roost.base_url).with_token(&roost.admin_token);

    let company = admin
        .post("/api/companies", json!({ "name": "Skill Works" }))
        .await?
        .ok()?;
    let cid = str_field(&company, "id");
    let prefix = str_field(&company, "issuePrefix");
    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({
                "name": "skill-follower",
                "role": "engineer",
                "adapterType": "process",
                "adapterConfig": { "command": "sh", "args": [script()], "cwd": "." },
            }),
        )
        .await?
        .ok()?;
    let agent = str_field(&agent, "id");
    // Assigned and `todo`: this wakes the agent, and the dev worker runs it.
    let issue = admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({
                "title": "Follow the Paperclip skill",
                "description": "Check this issue out, read its context, and close it with a comment.",
                "status": "todo",
                "assigneeAgentId": agent,
            }),
        )
        .await?
        .ok()?;
    let issue_id = str_field(&issue, "id");
    let identifier = str_field(&issue, "identifier");

    // Until the agent's run has ended (the issue is done by then, if it is ever done by it).
    let runs = crate::support::runs_ended(&admin, &cid, &agent, WAIT)
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", traces(&work)))?;
    let all = traces(&work);
    assert_eq!(
        runs.len(),
        1,
        "one run for one assignment: {runs:#?}\n{all}"
    );
    let run = &runs[0];
    let run_id = str_field(run, "id");
    assert_eq!(run["issueId"], json!(issue_id), "{run}");
    assert_eq!(run["wakeReason"], "issue_assigned", "{run}");
    let trace = std::fs::read_to_string(work.join(format!("agent-{run_id}.log")))
        .map_err(|e| anyhow::anyhow!("no trace of run {run_id} ({e})\n{all}"))?;

    // The issue is done and free.
    let done = admin.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(done["status"], "done", "{done}\n{trace}");
    assert!(done["checkout"].is_null(), "{done}");
    assert!(done["completedAt"].is_string(), "{done}");

    // One comment: the agent's, made in that run, its markdown line breaks and links intact.
    let comments = admin
        .get(&format!("/api/issues/{issue_id}/comments"))
        .await?
        .ok()?;
    let comments = comments.as_array().cloned().unwrap_or_default();
    assert_eq!(comments.len(), 1, "{comments:#?}\n{trace}");
    let comment = &comments[0];
    assert_eq!(comment["authorAgentId"], json!(agent), "{comment}");
    assert!(comment["authorUserId"].is_null(), "{comment}");
    assert_eq!(comment["createdByRunId"], json!(run_id), "{comment}");
    let expected = format!(
        "Done\n\n\
         - Checked out [{identifier}](/{prefix}/issues/{identifier}) in \
         [run {run_id}](/{prefix}/agents/{agent}/runs/{run_id})\n\
         - Read the heartbeat context and the thread, wrote work-{run_id}.md"
    );
    assert_eq!(comment["body"], json!(expected), "{comment}");

    // The activity log: that run checked the issue out, and that run moved it from in_progress
    // (held by its checkout) to done, with the comment.
    let activity = admin
        .get(&format!("/api/companies/{cid}/activity?limit=200"))
        .await?
        .ok()?;
    let of_issue: Vec<&Value> = activity
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["entityId"] == json!(issue_id))
        .collect();
    let find = |action: &str| {
        of_issue
            .iter()
            .find(|e| e["action"] == action)
            .copied()
            .ok_or_else(|| anyhow::anyhow!("no {action} of the issue in {of_issue:#?}"))
    };
    let checkout = find("issue.checked_out")?;
    assert_eq!(checkout["runId"], json!(run_id), "{checkout}");
    assert_eq!(checkout["actorId"], json!(agent), "{checkout}");
    assert_eq!(checkout["details"]["agentId"], json!(agent), "{checkout}");
    let update = find("issue.updated")?;
    assert_eq!(update["runId"], json!(run_id), "{update}");
    assert_eq!(update["actorId"], json!(agent), "{update}");
    assert_eq!(
        update["details"]["previousStatus"], "in_progress",
        "{update}"
    );
    assert_eq!(update["details"]["status"], "done", "{update}");
    assert_eq!(update["details"]["commentId"], comment["id"], "{update}");
    assert!(
        checkout["seq"].as_u64() < update["seq"].as_u64(),
        "{checkout}\n{update}"
    );

    // Every step of the skill's procedure was served, in the skill's order.
    let i = &issue_id;
    let served = [
        "GET /agents/me -> 200".to_string(),
        "GET /agents/me/inbox-lite -> 200".to_string(),
        format!("POST /issues/{i}/checkout -> 200"),
        format!("GET /issues/{i}/heartbeat-context -> 200"),
        format!("GET /issues/{i}/comments -> 200"),
        format!("PATCH /issues/{i} -> 200"),
    ];
    assert_eq!(requests(&trace), served, "{trace}");
    let gaps: Vec<&str> = trace.lines().filter(|l| l.starts_with("GAP:")).collect();
    assert!(
        gaps.is_empty(),
        "what the skill relies on and Roost does not serve:\n{}\n\n{trace}",
        gaps.join("\n")
    );
    assert_eq!(run["status"], "succeeded", "{run}\n{trace}");
    Ok(())
}
