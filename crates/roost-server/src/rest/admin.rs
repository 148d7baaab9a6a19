//! Companies and agents.

use axum::extract::{Path, State};
use axum::Json;
use roost_core::command::{AgentPatch, CompanyPatch};
use roost_core::{AdapterType, BudgetScopeType, CompanyStatus, HeartbeatPolicy, PauseReason};

use super::compat::monthly_budget_change;
use super::created;
use roost_core::views::CreatedKey;

use super::dto;
use super::extract::JsonBody;
use super::paperclip::{
    agent_row, agent_rows, company_row, company_rows, heartbeat_of, monthly_budget,
    runtime_heartbeat, AgentRow, CompanyRow,
};
use crate::api::{Api, NewAgent};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

pub async fn create_company(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<dto::CreateCompany>,
) -> Result<(axum::http::StatusCode, Json<CompanyRow>)> {
    let company = match body.issue_prefix.as_deref() {
        Some(prefix) => api.create_company(&caller, &body.name, prefix).await?,
        None => api.create_company_derived(&caller, &body.name).await?,
    };
    let mut company = company;
    if body.description.is_some() || body.loop_breaker.is_some() {
        let patch = CompanyPatch {
            description: body.description.map(Some),
            loop_breaker: body.loop_breaker,
            ..Default::default()
        };
        company = api.update_company(&caller, &company.id, patch).await?;
    }
    if let Some(policy) = monthly_budget(
        BudgetScopeType::Company,
        &company.id,
        body.budget_monthly_cents,
    ) {
        api.set_budget_policy(&caller, &company.id, policy).await?;
    }
    Ok(created(company_row(&api, company)))
}

/// `PATCH /api/companies/{cid}`: name, description, status (`paused` and `archived` start no
/// runs), the hire-approval setting and the monthly budget. Checked whole before any write.
pub async fn update_company(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<dto::PatchCompany>,
) -> Result<Json<CompanyRow>> {
    caller.require_admin()?;
    if body.spent_monthly_cents.is_some() {
        return Err(ApiError::bad_request(
            "spentMonthlyCents cannot be set: Roost sums a company's spend from its cost events \
             (POST /api/companies/{id}/cost-events)",
        ));
    }
    let mut company = api.get_company(&caller, &cid).await?;
    let budget = match body.budget_monthly_cents {
        Some(cents) => monthly_budget_change(&api, BudgetScopeType::Company, &company.id, cents)?,
        None => None,
    };
    let patch = body.patch();
    if patch != CompanyPatch::default() {
        company = api.update_company(&caller, &company.id, patch).await?;
    }
    if let Some(policy) = budget {
        api.set_budget_policy(&caller, &company.id, policy).await?;
    }
    Ok(Json(company_row(&api, company)))
}

/// `PATCH /api/companies/{cid}/branding`: Paperclip's name and description edit.
pub async fn update_branding(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<dto::CompanyBranding>,
) -> Result<Json<CompanyRow>> {
    if body.name.is_none() && body.description.is_none() && body.logo_asset_id.is_none() {
        return Err(ApiError::bad_request(
            "at least one branding field (name, description, logoAssetId) must be given",
        ));
    }
    let patch = CompanyPatch {
        name: body.name,
        description: body.description,
        ..Default::default()
    };
    let company = if patch == CompanyPatch::default() {
        api.get_company(&caller, &cid).await?
    } else {
        api.update_company(&caller, &cid, patch).await?
    };
    Ok(Json(company_row(&api, company)))
}

/// `POST /api/companies/{cid}/archive` (Paperclip's `company archive`): the company's status
/// set to `archived`, as `PATCH` with that status sets it (it starts no runs); answers the
/// company.
pub async fn archive_company(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<CompanyRow>> {
    caller.require_admin()?;
    let company = api.get_company(&caller, &cid).await?;
    // Archived already: nothing is written, as Paperclip's archive writes nothing then.
    if company.status == CompanyStatus::Archived {
        return Ok(Json(company_row(&api, company)));
    }
    let patch = CompanyPatch {
        status: Some(CompanyStatus::Archived),
        ..Default::default()
    };
    let company = api.update_company(&caller, &company.id, patch).await?;
    Ok(Json(company_row(&api, company)))
}

pub async fn list_companies(
    State(api): State<Api>,
    caller: Caller,
) -> Result<Json<Vec<CompanyRow>>> {
    let companies = api.list_companies(&caller).await?;
    Ok(Json(company_rows(&api, companies)))
}

pub async fn get_company(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<CompanyRow>> {
    let company = api.get_company(&caller, &cid).await?;
    Ok(Json(company_row(&api, company)))
}

/// The agent a Paperclip creation body describes (its defaults filled in).
pub(super) fn new_agent(body: &dto::CreateAgent) -> Result<NewAgent> {
    let base = HeartbeatPolicy::default();
    let heartbeat = heartbeat_of(&base, body.heartbeat.clone(), body.runtime_config.as_ref())?;
    Ok(NewAgent {
        name: body.name.clone(),
        role: body.role.clone().unwrap_or_else(|| "general".into()),
        title: body.title.clone(),
        adapter_type: body.adapter_type.unwrap_or(AdapterType::Process),
        adapter_config: body
            .adapter_config
            .clone()
            .unwrap_or_else(|| serde_json::json!({})),
        heartbeat: heartbeat.unwrap_or(base),
        placement_labels: body.placement_labels.clone().unwrap_or_default(),
    })
}

pub async fn create_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<dto::CreateAgent>,
) -> Result<(axum::http::StatusCode, Json<AgentRow>)> {
    let new = new_agent(&body)?;
    if let Some(manager) = &body.reports_to {
        check_new_manager(&api, &caller, &cid, manager).await?;
    }
    let mut agent = api.create_agent(&caller, &cid, new).await?;
    if body.loop_breaker.is_some() || body.reports_to.is_some() {
        // Set by a second write; the manager was checked before the create, and the rule
        // (`roost-core/src/rules/org.rs`) checks it again.
        let patch = AgentPatch {
            loop_breaker: body.loop_breaker,
            reports_to: body.reports_to.clone().map(Some),
            ..Default::default()
        };
        agent = api.update_agent(&caller, &agent.id, patch).await?;
    }
    if let Some(policy) =
        monthly_budget(BudgetScopeType::Agent, &agent.id, body.budget_monthly_cents)
    {
        api.set_budget_policy(&caller, &agent.company_id, policy)
            .await?;
    }
    Ok(created(agent_row(&api, agent)))
}

/// Refuses a new agent's `reportsTo` before the agent is created, so a bad manager creates
/// nothing: an agent of company `cid` that is not terminated.
async fn check_new_manager(api: &Api, caller: &Caller, cid: &str, manager: &str) -> Result<()> {
    let found = api.get_agent(caller, manager).await.ok();
    let problem = match found {
        None => format!("reportsTo: there is no agent {manager}; name an agent of the same company"),
        Some(m) if m.company_id != cid => format!(
            "reportsTo: agent {manager} belongs to another company; an agent reports to an agent of its own company"
        ),
        Some(m) if m.status == roost_core::AgentStatus::Terminated => {
            format!("reportsTo: agent {manager} is terminated; name a manager that is not")
        }
        Some(_) => return Ok(()),
    };
    Err(crate::error::ApiError::bad_request(problem))
}

pub async fn list_agents(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<AgentRow>>> {
    let agents = api.list_agents(&caller, &cid).await?;
    Ok(Json(agent_rows(&api, agents)))
}

pub async fn get_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<AgentRow>> {
    let agent = api.get_agent(&caller, &id).await?;
    Ok(Json(agent_row(&api, agent)))
}

pub async fn me(State(api): State<Api>, caller: Caller) -> Result<Json<AgentRow>> {
    let agent = api.me(&caller).await?;
    Ok(Json(agent_row(&api, agent)))
}

pub async fn update_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::PatchAgent>,
) -> Result<Json<AgentRow>> {
    let heartbeat = match (&body.heartbeat, &body.runtime_config) {
        (None, Some(config)) => {
            let current = api.get_agent(&caller, &id).await?;
            runtime_heartbeat(&current.heartbeat, config)?
        }
        _ => body.heartbeat.clone(),
    };
    let budget = body.budget_monthly_cents;
    let patch = body.into_patch(heartbeat);
    // A body that only sets the budget changes nothing on the agent itself.
    let agent = if budget.is_some() && patch == AgentPatch::default() {
        api.get_agent(&caller, &id).await?
    } else {
        api.update_agent(&caller, &id, patch).await?
    };
    if let Some(policy) = monthly_budget(BudgetScopeType::Agent, &agent.id, budget) {
        api.set_budget_policy(&caller, &agent.company_id, policy)
            .await?;
    }
    Ok(Json(agent_row(&api, agent)))
}

/// `PATCH /api/agents/{id}/permissions` (Paperclip's `agent permissions:update`): grants or
/// withdraws `canCreateAgents`, keeping Roost's other grants; an administrator or the company's
/// ceo agent (`roost-core/src/rules/agent.rs`).
pub async fn update_agent_permissions(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::AgentPermissionsBody>,
) -> Result<Json<AgentRow>> {
    // The grant alone: applied over the agent's grants as they are when the entry applies.
    let patch = AgentPatch {
        can_create_agents: Some(body.can_create_agents),
        ..AgentPatch::default()
    };
    let agent = api.update_agent(&caller, &id, patch).await?;
    Ok(Json(agent_row(&api, agent)))
}

pub async fn pause_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::PauseAgent>,
) -> Result<Json<AgentRow>> {
    let agent = api
        .pause_agent(&caller, &id, body.reason.unwrap_or(PauseReason::Manual))
        .await?;
    Ok(Json(agent_row(&api, agent)))
}

pub async fn resume_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<AgentRow>> {
    let agent = api.resume_agent(&caller, &id).await?;
    Ok(Json(agent_row(&api, agent)))
}

pub async fn terminate_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<AgentRow>> {
    let agent = api.terminate_agent(&caller, &id).await?;
    Ok(Json(agent_row(&api, agent)))
}

/// `POST /api/agents/{id}/approve` (Paperclip's `agent approve`): the agent as it is now.
pub async fn approve_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<AgentRow>> {
    let agent = api.approve_agent(&caller, &id).await?;
    Ok(Json(agent_row(&api, agent)))
}

/// `DELETE /api/agents/{id}`: Paperclip's `{"ok": true}`, with the agent as it is now (Roost
/// terminates it and keeps its history).
pub async fn delete_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>> {
    let agent = api.delete_agent(&caller, &id).await?;
    let mut row = serde_json::to_value(agent_row(&api, agent))
        .map_err(|e| ApiError::internal(format!("cannot show the agent: {e}")))?;
    if let Some(fields) = row.as_object_mut() {
        fields.insert("ok".into(), true.into());
    }
    Ok(Json(row))
}

pub async fn create_key(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::CreateKey>,
) -> Result<(axum::http::StatusCode, Json<CreatedKey>)> {
    let name = body.name.unwrap_or_else(|| "default".into());
    let (cred, token) = api.create_agent_key(&caller, &id, &name).await?;
    Ok(created(CreatedKey::new(cred, token)))
}
