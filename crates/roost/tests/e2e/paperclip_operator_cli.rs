//! Paperclip's operator commands (`paperclipai agent ...`, `issue runs/release`, `activity`,
//! `dashboard`, `cost`, `project`, `goal`, `routine`, `org`) against `roost dev`, each answer
//! asserted and each change read back over REST.

use std::time::Duration;

use roost_testkit::{wait_for, Http, RoostProcess};
use serde_json::{json, Value};

use crate::paperclip_cli::{start, todo_issue, Cli, Ran};
use crate::support::{agent_with_key, new_key, str_field};

/// Paperclip's CLI, a `roost dev` and its administrator's client: what every test here needs.
struct Operator {
    cli: Cli,
    _dir: tempfile::TempDir,
    roost: RoostProcess,
    http: Http,
}

impl Operator {
    async fn start() -> anyhow::Result<Operator> {
        let (cli, _dir, roost) = start().await?;
        let http = Http::new(&roost.base_url).with_token(&roost.admin_token);
        Ok(Operator {
            cli,
            _dir,
            roost,
            http,
        })
    }

    /// The CLI with `key`.
    fn run(&self, key: &str, args: &[&str]) -> anyhow::Result<Ran> {
        self.cli.run(&self.roost.base_url, key, args)
    }
}

/// The command failed, and its message says `why`.
fn refused(ran: &Ran, why: &str) {
    assert!(!ran.ok, "the command succeeded: {}", ran.stdout);
    assert!(ran.stderr.contains(why), "{}", ran.stderr);
}

fn has_id(list: &Value, id: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|x| x["id"] == id))
}

/// An agent's life through Paperclip's CLI: hired pending approval, approved, edited, granted
/// `canCreateAgents` by an administrator and withdrawn by the company's ceo agent (another
/// agent may not), paused, resumed, invoked, its runtime read and reset, terminated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_hires_approves_grants_pauses_and_terminates_an_agent() -> anyhow::Result<()>
{
    let o = Operator::start().await?;
    let (http, cid, admin) = (&o.http, o.roost.company_id.clone(), &o.roost.admin_token);
    let op = |args: &[&str]| o.run(admin, args);

    let company = op(&[
        "company",
        "update",
        &cid,
        "--payload-json",
        r#"{"requireBoardApprovalForNewAgents":true}"#,
    ])?
    .json()?;
    assert_eq!(
        company["requireBoardApprovalForNewAgents"], true,
        "{company}"
    );
    let hired = op(&[
        "agent",
        "hire",
        "-C",
        &cid,
        "--payload-json",
        r#"{"name":"builder","role":"engineer","adapterType":"process","adapterConfig":{"command":"true"}}"#,
    ])?
    .json()?;
    assert_eq!(hired["agent"]["status"], "pending_approval", "{hired}");
    let id = str_field(&hired["agent"], "id");
    let approved = op(&["agent", "approve", &id])?.json()?;
    assert_eq!(approved["status"], "active", "{approved}");
    let approvals = op(&["approval", "list", "-C", &cid])?.json()?;
    let hire = approvals
        .as_array()
        .and_then(|l| l.iter().find(|a| a["agentId"] == id.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(hire["status"], "approved", "{approvals}");
    refused(
        &op(&["agent", "approve", &id])?,
        "only an agent pending approval can be approved",
    );

    let got = op(&["agent", "get", &id])?.json()?;
    assert_eq!(got["name"], "builder", "{got}");
    assert_eq!(got["permissions"]["canCreateAgents"], false, "{got}");
    let edited = op(&[
        "agent",
        "update",
        &id,
        "--payload-json",
        r#"{"title":"Lead builder"}"#,
    ])?
    .json()?;
    assert_eq!(edited["title"], "Lead builder", "{edited}");

    // Grants: an administrator, then the ceo agent; another agent is refused.
    let grant = |key: &str, can: bool| {
        let body = format!(r#"{{"canCreateAgents":{can},"canAssignTasks":true}}"#);
        o.run(
            key,
            &["agent", "permissions:update", &id, "--payload-json", &body],
        )
    };
    let granted = grant(admin, true)?.json()?;
    assert_eq!(granted["permissions"]["canCreateAgents"], true, "{granted}");
    let (_, peer_key) = agent_with_key(http, &cid, "peer").await?;
    refused(&grant(&peer_key, false)?, "ceo");
    let (ceo_id, ceo_key) = agent_with_key(http, &cid, "chief").await?;
    http.patch(&format!("/api/agents/{ceo_id}"), json!({ "role": "ceo" }))
        .await?
        .ok()?;
    let withdrawn = grant(&ceo_key, false)?.json()?;
    assert_eq!(
        withdrawn["permissions"]["canCreateAgents"], false,
        "{withdrawn}"
    );
    let rename = o.run(
        &ceo_key,
        &[
            "agent",
            "update",
            &id,
            "--payload-json",
            r#"{"name":"renamed"}"#,
        ],
    )?;
    refused(&rename, "administrator");

    // Pause and resume; the configuration and runtime as Paperclip's CLI reads them.
    let paused = op(&["agent", "pause", &id])?.json()?;
    assert_eq!(paused["status"], "paused", "{paused}");
    let resumed = op(&["agent", "resume", &id])?.json()?;
    assert_eq!(resumed["status"], "active", "{resumed}");
    let config = op(&["agent", "configuration", &id])?.json()?;
    assert_eq!(config["adapterType"], "process", "{config}");
    assert_eq!(config["adapterConfig"]["command"], "true", "{config}");
    let runtime = op(&["agent", "runtime-state", &id])?.json()?;
    assert_eq!(runtime["agentId"], id.as_str(), "{runtime}");
    let reset = op(&["agent", "runtime-state:reset-session", &id])?.json()?;
    assert_eq!(reset["sessionId"], Value::Null, "{reset}");
    let sessions = op(&["agent", "task-sessions", &id])?.json()?;
    assert!(sessions.is_array(), "{sessions}");
    let invoked = op(&["agent", "heartbeat:invoke", &id])?.json()?;
    assert_eq!(invoked["agentId"], id.as_str(), "{invoked}");

    let terminated = op(&["agent", "terminate", &id])?.json()?;
    assert_eq!(terminated["status"], "terminated", "{terminated}");
    refused(
        &op(&["agent", "update", &id, "--payload-json", r#"{"title":"x"}"#])?,
        "terminated",
    );
    let listed = op(&["agent", "list", "-C", &cid])?.json()?;
    assert!(
        has_id(&listed, &id),
        "a terminated agent keeps its history: {listed}"
    );
    Ok(())
}

/// An issue through Paperclip's CLI: its runs, release by the operator, the activity of the
/// company and of the issue, the dashboard and the cost summaries after a reported cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_reads_runs_activity_dashboard_and_costs_and_releases_an_issue(
) -> anyhow::Result<()> {
    let o = Operator::start().await?;
    let (http, cid, admin) = (&o.http, o.roost.company_id.clone(), &o.roost.admin_token);
    let op = |args: &[&str]| o.run(admin, args);
    // An agent whose run outlives the test (`roost dev` ends it), woken by its assignment.
    let agent = http
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "reporter", "adapterType": "process",
                    "adapterConfig": { "command": "sleep", "args": ["600"] } }),
        )
        .await?
        .ok()?;
    let agent_id = str_field(&agent, "id");
    let key = new_key(http, &agent_id).await?;
    let issue_id = todo_issue(http, &cid, "Count the spend").await?;
    http.patch(
        &format!("/api/issues/{issue_id}"),
        json!({ "assigneeAgentId": agent_id }),
    )
    .await?
    .ok()?;
    let run_id = wait_for("the issue's live run", Duration::from_secs(30), || {
        let ran = op(&["issue", "live-runs", &issue_id]);
        async move { ran.ok()?.json().ok()?[0]["id"].as_str().map(String::from) }
    })
    .await?;
    let out = http
        .with_token(&key)
        .with_run(&run_id)
        .post(
            &format!("/api/issues/{issue_id}/checkout"),
            json!({ "agentId": agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    assert_eq!(out["status"], "in_progress", "{out}");
    let runs = op(&["issue", "runs", &issue_id])?.json()?;
    assert!(has_id(&runs, &run_id), "{runs}");
    let released = op(&["issue", "release", &issue_id])?.json()?;
    assert_eq!(released["assigneeAgentId"], Value::Null, "{released}");
    let forced = op(&["issue", "force-release", &issue_id])?.json()?;
    assert_eq!(forced["id"], issue_id.as_str(), "{forced}");
    let reread = http.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(reread["checkoutRunId"], Value::Null, "{reread}");

    let history = op(&["activity", "issue", &issue_id])?.json()?;
    assert!(
        history.to_string().contains("issue.checked_out"),
        "{history}"
    );
    let company_log = op(&["activity", "list", "-C", &cid])?.json()?;
    assert!(company_log.to_string().contains(&issue_id), "{company_log}");

    // A cost the agent reports shows in every summary the CLI reads.
    http.with_token(&key)
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({
                "agentId": agent_id, "issueId": issue_id, "provider": "anthropic",
                "model": "claude-sonnet", "inputTokens": 1000, "outputTokens": 200,
                "costCents": 42, "occurredAt": "2026-11-30T12:00:00.000Z",
            }),
        )
        .await?
        .ok()?;
    let summary = op(&["cost", "summary", "-C", &cid])?.json()?;
    assert_eq!(summary["lifetimeCents"], 42, "{summary}");
    let by_agent = op(&["cost", "by-agent", "-C", &cid])?.json()?;
    assert_eq!(by_agent[0]["agentId"], agent_id.as_str(), "{by_agent}");
    assert_eq!(by_agent[0]["costCents"], 42, "{by_agent}");
    let by_project = op(&["cost", "by-project", "-C", &cid])?.json()?;
    assert_eq!(by_project, json!([]), "the issue is in no project");
    let of_issue = op(&["cost", "issue", &issue_id])?.json()?;
    assert_eq!(of_issue["costCents"], 42, "{of_issue}");
    let dashboard = op(&["dashboard", "get", "-C", &cid])?.json()?;
    assert!(
        dashboard["agents"]["active"].as_u64() >= Some(1),
        "{dashboard}"
    );
    Ok(())
}

/// Projects, goals, routines and the org chart through Paperclip's CLI: created, read, changed,
/// run and deleted, each read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_manages_projects_goals_routines_and_reads_the_org() -> anyhow::Result<()> {
    let o = Operator::start().await?;
    let (http, cid, admin) = (&o.http, o.roost.company_id.clone(), &o.roost.admin_token);
    let op = |args: &[&str]| o.run(admin, args);
    let (agent_id, _) = agent_with_key(http, &cid, "planner").await?;

    let goal = op(&[
        "goal", "create", "-C", &cid, "--title", "Ship v1", "--level", "company",
    ])?
    .json()?;
    let goal_id = str_field(&goal, "id");
    let goal = op(&["goal", "update", &goal_id, "--status", "achieved"])?.json()?;
    assert_eq!(goal["status"], "achieved", "{goal}");
    assert!(has_id(
        &op(&["goal", "list", "-C", &cid])?.json()?,
        &goal_id
    ));

    let project = op(&[
        "project",
        "create",
        "-C",
        &cid,
        "--name",
        "Apollo",
        "--status",
        "planned",
        "--goal-ids",
        &goal_id,
    ])?
    .json()?;
    let project_id = str_field(&project, "id");
    let project = op(&["project", "update", &project_id, "--status", "in_progress"])?.json()?;
    assert_eq!(project["status"], "in_progress", "{project}");
    let got = op(&["project", "get", &project_id])?.json()?;
    assert_eq!(got["name"], "Apollo", "{got}");
    assert!(got.to_string().contains(&goal_id), "{got}");
    assert!(has_id(
        &op(&["project", "list", "-C", &cid])?.json()?,
        &project_id
    ));
    let goal = op(&["goal", "get", &goal_id])?.json()?;
    assert_eq!(goal["title"], "Ship v1", "{goal}");

    let routine = op(&[
        "routine",
        "create",
        "-C",
        &cid,
        "--payload-json",
        &json!({ "title": "Daily triage", "assigneeAgentId": agent_id, "description": "look" })
            .to_string(),
    ])?
    .json()?;
    let routine_id = str_field(&routine, "id");
    let edited = op(&[
        "routine",
        "update",
        &routine_id,
        "--payload-json",
        r#"{"description":"look harder"}"#,
    ])?
    .json()?;
    assert_eq!(edited["description"], "look harder", "{edited}");
    let trigger = op(&[
        "routine",
        "trigger:create",
        &routine_id,
        "--payload-json",
        r#"{"kind":"schedule","cronExpression":"0 9 * * *","timezone":"UTC"}"#,
    ])?
    .json()?;
    assert_eq!(
        trigger["trigger"]["cronExpression"], "0 9 * * *",
        "{trigger}"
    );
    let ran = op(&["routine", "run", &routine_id])?.json()?;
    assert_eq!(ran["routineId"], routine_id.as_str(), "{ran}");
    let runs = op(&["routine", "runs", &routine_id])?.json()?;
    assert!(has_id(&runs, &str_field(&ran, "id")), "{runs}");

    let org = op(&["org", "get", "-C", &cid])?.json()?;
    assert!(org.to_string().contains(&agent_id), "{org}");

    let deleted = op(&["project", "delete", &project_id, "--yes"])?;
    assert!(deleted.ok, "{}", deleted.stderr);
    refused(&op(&["project", "get", &project_id])?, "not found");
    let deleted = op(&["goal", "delete", &goal_id, "--yes"])?;
    assert!(deleted.ok, "{}", deleted.stderr);
    refused(&op(&["goal", "get", &goal_id])?, "not found");
    Ok(())
}

/// Paperclip's cost breakdowns through its CLI: costs reported with and without a biller and
/// billing type, grouped by provider, biller, agent and model, and the spend of recent windows;
/// a `from` bound leaves older costs out, and a bad one or an unknown billing type is a `400`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_breaks_costs_down_by_provider_biller_model_and_window() -> anyhow::Result<()>
{
    let o = Operator::start().await?;
    let (http, cid, admin) = (&o.http, o.roost.company_id.clone(), &o.roost.admin_token);
    let op = |args: &[&str]| o.run(admin, args);
    let (agent_id, key) = agent_with_key(http, &cid, "spender").await?;
    let report = |body: Value| {
        let http = http.with_token(&key);
        let path = format!("/api/companies/{cid}/cost-events");
        async move { http.post(&path, body).await }
    };
    // January's, metered by its provider as far as anyone said: shown so, as Paperclip does.
    let january = report(json!({
        "agentId": agent_id, "provider": "anthropic", "model": "claude-sonnet",
        "inputTokens": 1000, "outputTokens": 200, "costCents": 42,
        "occurredAt": "2026-01-15T12:00:00.000Z",
    }))
    .await?
    .ok()?;
    assert_eq!(january["biller"], "anthropic", "{january}");
    assert_eq!(january["billingType"], "unknown", "{january}");
    // Now's, billed by a reseller under a subscription.
    let billed = report(json!({
        "agentId": agent_id, "provider": "openai", "model": "gpt-5", "biller": "openrouter",
        "billingType": "subscription_included", "inputTokens": 300, "costCents": 8,
    }))
    .await?
    .ok()?;
    assert_eq!(billed["biller"], "openrouter", "{billed}");
    let bad = report(json!({
        "agentId": agent_id, "provider": "openai", "model": "gpt-5",
        "billingType": "by_the_hour", "costCents": 1,
    }))
    .await?;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.body);
    assert!(
        bad.body["error"].to_string().contains("by_the_hour"),
        "{}",
        bad.body
    );

    let by_provider = op(&["cost", "by-provider", "-C", &cid])?.json()?;
    assert_eq!(by_provider[0]["provider"], "anthropic", "{by_provider}");
    assert_eq!(by_provider[0]["biller"], "anthropic", "{by_provider}");
    assert_eq!(by_provider[0]["billingType"], "unknown", "{by_provider}");
    assert_eq!(by_provider[0]["costCents"], 42, "{by_provider}");
    assert_eq!(by_provider[1]["biller"], "openrouter", "{by_provider}");
    assert_eq!(by_provider[1]["billingType"], "subscription_included");
    assert_eq!(
        by_provider[1]["subscriptionInputTokens"], 300,
        "{by_provider}"
    );
    assert_eq!(
        by_provider.as_array().map(Vec::len),
        Some(2),
        "{by_provider}"
    );

    let by_biller = op(&["cost", "by-biller", "-C", &cid])?.json()?;
    let billers: Vec<(&str, u64)> = by_biller
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (
                        r["biller"].as_str().unwrap_or(""),
                        r["costCents"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        billers,
        [("anthropic", 42), ("openrouter", 8)],
        "{by_biller}"
    );
    assert_eq!(by_biller[1]["providerCount"], 1, "{by_biller}");

    let by_model = op(&["cost", "by-agent-model", "-C", &cid])?.json()?;
    assert_eq!(by_model[0]["model"], "claude-sonnet", "{by_model}");
    assert_eq!(by_model[1]["model"], "gpt-5", "{by_model}");
    assert_eq!(by_model[1]["agentId"], agent_id.as_str(), "{by_model}");
    assert_eq!(by_model[1]["agentName"], "spender", "{by_model}");

    // Only now's cost is in the last 7 days; January's never is.
    let windows = op(&["cost", "window-spend", "-C", &cid])?.json()?;
    let rows = windows.as_array().cloned().unwrap_or_default();
    for window in ["5h", "24h", "7d"] {
        let row = rows
            .iter()
            .find(|r| r["window"] == window)
            .cloned()
            .unwrap_or_default();
        assert_eq!(row["provider"], "openai", "{window}: {windows}");
        assert_eq!(row["biller"], "openrouter", "{window}: {windows}");
        assert_eq!(row["costCents"], 8, "{window}: {windows}");
    }
    assert!(!windows.to_string().contains("anthropic"), "{windows}");

    let path = format!("/api/companies/{cid}/costs/by-provider");
    let since = http
        .get(&format!("{path}?from=2026-02-01T00:00:00Z"))
        .await?
        .ok()?;
    assert_eq!(since.as_array().map(Vec::len), Some(1), "{since}");
    assert_eq!(since[0]["provider"], "openai", "{since}");
    // A date is its midnight, UTC, as Paperclip reads it: January's cost (at noon on the 15th)
    // is after `from=2026-01-15` and after `to=2026-01-15`; an empty bound is none.
    let on_the_day = http
        .get(&format!("{path}?from=2026-01-15&to=2026-01-16&model="))
        .await?
        .ok()?;
    assert_eq!(on_the_day.as_array().map(Vec::len), Some(1), "{on_the_day}");
    assert_eq!(on_the_day[0]["provider"], "anthropic", "{on_the_day}");
    let before_noon = http
        .get(&format!("{path}?to=2026-01-15&from="))
        .await?
        .ok()?;
    assert_eq!(before_noon, json!([]), "{before_noon}");
    let by_agent = http
        .get(&format!(
            "/api/companies/{cid}/costs/by-agent?from=2026-01-15T12:00:00Z&to=2026-01-15T12:00:00Z"
        ))
        .await?
        .ok()?;
    assert_eq!(by_agent[0]["costCents"], 42, "{by_agent}");
    assert_eq!(by_agent[0]["agentStatus"], "active", "{by_agent}");
    let bad = http.get(&format!("{path}?from=yesterday")).await?;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.body);
    assert!(
        bad.body["error"].to_string().contains("RFC 3339"),
        "{}",
        bad.body
    );
    Ok(())
}

/// An agent's configuration history through Paperclip's CLI: each update that changes it is a
/// revision (secrets never shown), one is read back, and a rollback puts its configuration back
/// as a new revision; the agent's own key and an unknown revision are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_lists_reads_and_rolls_back_agent_config_revisions() -> anyhow::Result<()> {
    let o = Operator::start().await?;
    let (http, cid, admin) = (&o.http, o.roost.company_id.clone(), &o.roost.admin_token);
    let op = |args: &[&str]| o.run(admin, args);
    let (id, key) = agent_with_key(http, &cid, "builder").await?;
    // Roost's secret `env` values, which Paperclip's CLI has no shape for, over REST.
    let configure = |command: &str, secret: &str| {
        json!({ "adapterConfig": {
            "command": command,
            "env": { "TOKEN": { "type": "secret", "value": secret } },
        } })
    };
    let mut first = configure("v1", "first-secret");
    first["title"] = json!("Lead");
    http.patch(&format!("/api/agents/{id}"), first)
        .await?
        .ok()?;
    http.patch(
        &format!("/api/agents/{id}"),
        configure("v2", "second-secret"),
    )
    .await?
    .ok()?;
    // The same title again changes nothing, and records nothing.
    op(&[
        "agent",
        "update",
        &id,
        "--payload-json",
        r#"{"title":"Lead"}"#,
    ])?
    .json()?;

    let listed = op(&["agent", "config-revisions", &id])?;
    assert!(
        !listed.stdout.contains("first-secret") && !listed.stdout.contains("second-secret"),
        "no secret value is shown: {}",
        listed.stdout
    );
    let listed = listed.json()?;
    let revisions = listed.as_array().cloned().unwrap_or_default();
    assert_eq!(revisions.len(), 2, "{listed}");
    let (newest, first) = (&revisions[0], &revisions[1]);
    assert_eq!(newest["changedKeys"], json!(["adapterConfig"]), "{listed}");
    assert_eq!(
        first["changedKeys"],
        json!(["title", "adapterConfig"]),
        "{listed}"
    );
    assert_eq!(first["source"], "patch", "{listed}");
    assert_eq!(first["agentId"], id.as_str(), "{listed}");
    assert_eq!(first["beforeConfig"]["title"], Value::Null, "{listed}");
    assert_eq!(
        first["afterConfig"]["adapterConfig"]["command"], "v1",
        "{listed}"
    );
    assert_eq!(
        first["afterConfig"]["adapterConfig"]["env"]["TOKEN"],
        json!({ "type": "secret", "redacted": true }),
        "{listed}"
    );
    let first_id = str_field(first, "id");
    let got = op(&["agent", "config-revision:get", &id, &first_id])?.json()?;
    assert_eq!(&got, first, "{got}");

    let rolled = op(&["agent", "config-revision:rollback", &id, &first_id])?.json()?;
    assert_eq!(rolled["id"], id.as_str(), "{rolled}");
    assert_eq!(rolled["adapterConfig"]["command"], "v1", "{rolled}");
    let config = op(&["agent", "configuration", &id])?.json()?;
    assert_eq!(config["adapterConfig"]["command"], "v1", "{config}");
    assert_eq!(
        config["adapterConfig"]["env"]["TOKEN"],
        json!({ "type": "secret", "redacted": true }),
        "the secret stays set: {config}"
    );
    let after = op(&["agent", "config-revisions", &id])?.json()?;
    assert_eq!(after.as_array().map(Vec::len), Some(3), "{after}");
    assert_eq!(after[0]["source"], "rollback", "{after}");
    assert_eq!(
        after[0]["rolledBackFromRevisionId"],
        first_id.as_str(),
        "{after}"
    );
    assert_eq!(after[0]["changedKeys"], json!(["adapterConfig"]), "{after}");

    // A secret the revision needs and the agent no longer holds: the rollback says so.
    http.patch(
        &format!("/api/agents/{id}"),
        json!({ "adapterConfig": { "command": "v3" } }),
    )
    .await?
    .ok()?;
    refused(
        &op(&["agent", "config-revision:rollback", &id, &first_id])?,
        "no longer holds: set it with PATCH",
    );
    refused(
        &o.run(&key, &["agent", "config-revisions", &id])?,
        "administrator",
    );
    refused(
        &o.run(&key, &["agent", "config-revision:rollback", &id, &first_id])?,
        "administrator",
    );
    refused(
        &op(&["agent", "config-revision:get", &id, "rev-404"])?,
        "config revision rev-404 not found",
    );
    let (other, _) = agent_with_key(http, &cid, "other").await?;
    refused(
        &op(&["agent", "config-revision:rollback", &other, &first_id])?,
        "not found",
    );
    Ok(())
}
