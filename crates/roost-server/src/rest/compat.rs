//! Routes Paperclip's CLI and agents call that map onto what Roost already has.
//! Each answers in Paperclip's shape with Roost's data; what Roost lacks (an org
//! chart) is shown empty rather than invented.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::agent_revision::AgentConfigRevision;
use roost_core::views::LabeledIssue;
use roost_core::{BudgetScopeType, Issue};
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{JsonBody, QueryParams};
use super::paperclip::{agent_row, company_row, monthly_budget, AgentRow, CompanyRow};
use crate::api::{
    monthly_budget_cents, Api, NewBudgetPolicy, RunView, WakeupRequest, WakeupResult,
};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// `GET /api/health`: Paperclip's liveness answer, no credential needed.
pub async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

/// `GET /api/issues/{id}/runs`.
pub async fn issue_runs(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<RunView>>> {
    Ok(Json(api.issue_runs(&caller, &id, false).await?))
}

/// `GET /api/issues/{id}/live-runs`.
pub async fn issue_live_runs(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<RunView>>> {
    Ok(Json(api.issue_runs(&caller, &id, true).await?))
}

/// `GET /api/companies/{cid}/live-runs`.
pub async fn company_live_runs(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<RunView>>> {
    Ok(Json(api.company_live_runs(&caller, &cid).await?))
}

/// `GET /api/heartbeat-runs/{id}/issues`: the issue the run worked on, if any.
pub async fn run_issues(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<Issue>>> {
    let run = api.get_run(&caller, &id).await?.into_run();
    Ok(Json(match run.issue_id {
        Some(issue) => vec![api.get_issue(&caller, &issue).await?],
        None => Vec::new(),
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForceReleaseQuery {
    /// Paperclip's option; Roost's release always clears the assignee.
    #[allow(dead_code)]
    clear_assignee: Option<bool>,
}

/// `POST /api/issues/{id}/admin/force-release`: an administrator's release of whatever run
/// holds the issue (it goes back to `todo` with no assignee, as every release does).
pub async fn force_release(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(_): QueryParams<ForceReleaseQuery>,
    JsonBody(_): JsonBody<super::dto::Empty>,
) -> Result<Json<LabeledIssue>> {
    caller.require_admin()?;
    Ok(Json(api.with_label(api.release(&caller, &id).await?)))
}

/// `GET /api/agents/{id}/configuration`: the agent's adapter and runtime configuration, with
/// the heartbeat policy as Paperclip's `runtimeConfig.heartbeat` (secrets redacted as on every
/// agent route; another agent sees `{}` for `adapterConfig`).
pub async fn agent_configuration(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let agent = api.get_agent(&caller, &id).await?;
    Ok(Json(json!({
        "id": agent.id,
        "agentId": agent.id,
        "companyId": agent.company_id,
        "name": agent.name,
        "role": agent.role,
        "title": agent.title,
        "adapterType": agent.adapter_type,
        "adapterConfig": agent.adapter_config,
        "runtimeConfig": { "heartbeat": agent.heartbeat },
        "placementLabels": agent.placement_labels,
    })))
}

/// `GET /api/agents/{id}/config-revisions` (Paperclip's `agent config-revisions`): the agent's
/// configuration changes, newest first, secrets redacted (`roost-core/src/agent_revision.rs`).
pub async fn agent_config_revisions(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<AgentConfigRevision>>> {
    Ok(Json(api.agent_config_revisions(&caller, &id).await?))
}

/// `GET /api/agents/{id}/config-revisions/{revisionId}` (`agent config-revision:get`).
pub async fn agent_config_revision(
    State(api): State<Api>,
    caller: Caller,
    Path((id, revision_id)): Path<(String, String)>,
) -> Result<Json<AgentConfigRevision>> {
    Ok(Json(
        api.agent_config_revision(&caller, &id, &revision_id)
            .await?,
    ))
}

/// `POST /api/agents/{id}/config-revisions/{revisionId}/rollback` (`agent
/// config-revision:rollback`): the revision's `afterConfig` applied as an update, which records a
/// revision of its own; answers the agent. A secret the revision shows redacted keeps the value
/// the agent has now.
pub async fn rollback_agent_config(
    State(api): State<Api>,
    caller: Caller,
    Path((id, revision_id)): Path<(String, String)>,
    JsonBody(_): JsonBody<super::dto::Empty>,
) -> Result<Json<AgentRow>> {
    let agent = api
        .rollback_agent_config(&caller, &id, &revision_id)
        .await?;
    Ok(Json(agent_row(&api, agent)))
}

/// `GET /api/agents/{id}/runtime-state`: the agent's status, last heartbeat and saved sessions.
pub async fn agent_runtime_state(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let agent = api.get_agent(&caller, &id).await?;
    Ok(Json(runtime_state(&agent)))
}

/// `POST /api/agents/{id}/runtime-state/reset-session` (`{"taskKey"?}`): forgets the saved
/// sessions, all or one task's; answers the runtime state after.
pub async fn reset_agent_session(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<super::dto::ResetSession>,
) -> Result<Json<Value>> {
    let task_key = body
        .task_key
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty());
    let agent = api.reset_agent_session(&caller, &id, task_key).await?;
    Ok(Json(runtime_state(&agent)))
}

/// Paperclip's runtime state of an agent.
fn runtime_state(agent: &roost_core::Agent) -> Value {
    let heartbeat_session = agent
        .task_sessions
        .values()
        .find(|s| s.task_key == "__heartbeat__")
        .map(|s| s.session_id.clone());
    json!({
        "agentId": agent.id,
        "companyId": agent.company_id,
        "adapterType": agent.adapter_type,
        "status": agent.status,
        "sessionId": heartbeat_session,
        "lastHeartbeatAt": agent.last_heartbeat_at,
        "taskSessions": agent.task_sessions.values().collect::<Vec<_>>(),
    })
}

/// `POST /api/agents/{id}/heartbeat/invoke`: Paperclip's older wakeup, always on demand.
pub async fn heartbeat_invoke(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<super::dto::Empty>,
) -> Result<(StatusCode, Json<WakeupResult>)> {
    let result = api.wakeup(&caller, &id, WakeupRequest::default()).await?;
    Ok((StatusCode::ACCEPTED, Json(result)))
}

/// `GET /api/companies/{cid}/org`: Paperclip's lean org tree, `[{id, name, role, status,
/// reports: [...]}]`: the agents not terminated, roots first (reporting to nobody, or to a
/// terminated agent), each with those reporting to it (`roost-core/src/rules/org.rs`).
pub async fn org(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<roost_core::org::OrgNode>>> {
    // Checks the caller's company and passes the read barrier.
    api.list_agents(&caller, &cid).await?;
    Ok(Json(
        api.reader().read(|s| roost_core::org::org_tree(s, &cid)),
    ))
}

/// `GET /api/issues/{id}/cost-summary`: what the cost events naming the issue add up to.
pub async fn issue_cost_summary(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let (issue_id, total, month) = api.issue_cost_cents(&caller, &id).await?;
    Ok(Json(
        json!({ "issueId": issue_id, "costCents": total, "monthCents": month }),
    ))
}

/// Paperclip's budget body (`updateBudgetSchema`): the monthly amount in cents.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MonthlyBudget {
    budget_monthly_cents: u64,
}

/// `PATCH /api/companies/{cid}/budgets {budgetMonthlyCents}`: the company's monthly hard
/// budget.
pub async fn set_company_budget(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<MonthlyBudget>,
) -> Result<Json<CompanyRow>> {
    caller.require_admin()?;
    let company = api.get_company(&caller, &cid).await?;
    let policy = monthly_budget_change(
        &api,
        BudgetScopeType::Company,
        &company.id,
        body.budget_monthly_cents,
    )?;
    if let Some(policy) = policy {
        api.set_budget_policy(&caller, &company.id, policy).await?;
    }
    Ok(Json(company_row(&api, company)))
}

/// `PATCH /api/agents/{id}/budgets {budgetMonthlyCents}`: the agent's monthly hard budget, by
/// an administrator (Paperclip's board); answers the agent as `GET /api/agents/{id}` does.
pub async fn set_agent_budget(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<MonthlyBudget>,
) -> Result<Json<AgentRow>> {
    caller.require_admin()?;
    let agent = api.get_agent(&caller, &id).await?;
    let policy = monthly_budget_change(
        &api,
        BudgetScopeType::Agent,
        &agent.id,
        body.budget_monthly_cents,
    )?;
    if let Some(policy) = policy {
        api.set_budget_policy(&caller, &agent.company_id, policy)
            .await?;
    }
    Ok(Json(agent_row(&api, agent)))
}

/// The budget policy Paperclip's `budgetMonthlyCents` asks for, if any. Roost has no command
/// that removes a policy, so `0` is refused while one exists (before anything is written).
pub fn monthly_budget_change(
    api: &Api,
    scope_type: BudgetScopeType,
    scope_id: &str,
    cents: u64,
) -> Result<Option<NewBudgetPolicy>> {
    match monthly_budget(scope_type, scope_id, Some(cents)) {
        Some(policy) => Ok(Some(policy)),
        None if api
            .reader()
            .read(|s| monthly_budget_cents(s, scope_type, scope_id))
            > 0 =>
        {
            Err(ApiError::bad_request(format!(
                "budgetMonthlyCents 0 would remove the {scope_type}'s budget, which Roost cannot \
                 do: set a higher amount instead"
            )))
        }
        None => Ok(None),
    }
}

/// `GET /api/cli-auth/me`: who the CLI's administrator token is (Paperclip's board user).
pub async fn cli_auth_me(State(api): State<Api>, caller: Caller) -> Result<Json<Value>> {
    caller.require_admin()?;
    let companies = api.list_companies(&caller).await?;
    let key_id = caller.actor.credential_id.clone();
    Ok(Json(json!({
        "user": { "id": caller.actor.id, "email": null, "name": caller.actor.id, "image": null },
        "userId": caller.actor.id,
        "isInstanceAdmin": true,
        "companyIds": companies.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        "source": "board_key",
        "keyId": key_id,
    })))
}

/// `GET /api/companies/stats`: per company the caller sees, its agents and the issues it has
/// numbered.
pub async fn company_stats(State(api): State<Api>, caller: Caller) -> Result<Json<Value>> {
    let companies = api.list_companies(&caller).await?;
    let mut stats = serde_json::Map::new();
    for company in companies {
        let agents = api.list_agents(&caller, &company.id).await?;
        stats.insert(
            company.id.clone(),
            json!({ "agentCount": agents.len(), "issueCount": company.issue_counter }),
        );
    }
    Ok(Json(Value::Object(stats)))
}

/// How many issues of one status the dashboard counts at most (an issue list's largest page).
const DASHBOARD_COUNT_CAP: usize = 5000;

/// `GET /api/companies/{cid}/dashboard`: agents by state, issues by state, this month's spend
/// against the budget. `tasks.open` and `tasks.closed` (done or cancelled) are exact;
/// `inProgress` and `blocked` count up to 5,000 each.
pub async fn dashboard(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Value>> {
    use roost_core::{AgentStatus, IssueStatus};
    let company = api.get_company(&caller, &cid).await?;
    let agents = api.list_agents(&caller, &company.id).await?;
    let live = api.company_live_runs(&caller, &company.id).await?;
    let running: std::collections::BTreeSet<String> =
        live.into_iter().map(|r| r.into_run().agent_id).collect();
    let count = |status: AgentStatus| agents.iter().filter(|a| a.status == status).count();
    let mut by_status = Vec::new();
    for status in [IssueStatus::InProgress, IssueStatus::Blocked] {
        let filter = crate::api::IssueFilter {
            statuses: vec![status],
            assignee_agent_id: None,
            parent_id: None,
            limit: Some(DASHBOARD_COUNT_CAP),
            ..Default::default()
        };
        by_status.push(api.list_issues(&caller, &company.id, &filter).await?.len());
    }
    let open = api
        .reader()
        .read(|s| s.open_issue_count(&company.id) as u64);
    let costs = api.cost_summary(&caller, &company.id, None).await?;
    let pending = api
        .list_approvals(
            &caller,
            &company.id,
            Some(roost_core::approval::ApprovalStatus::Pending),
        )
        .await?
        .len();
    Ok(Json(json!({
        "companyId": company.id,
        "agents": {
            "active": count(AgentStatus::Active),
            "running": running.len(),
            "paused": count(AgentStatus::Paused),
            "error": 0,
            "terminated": count(AgentStatus::Terminated),
        },
        "tasks": {
            "open": open,
            "inProgress": by_status[0],
            "blocked": by_status[1],
            "closed": company.issue_counter.saturating_sub(open),
        },
        "costs": {
            "monthSpendCents": costs.spend_cents,
            "monthBudgetCents": costs.budget_cents,
            "monthUtilizationPercent": costs.utilization_percent,
        },
        "pendingApprovals": pending,
    })))
}
