//! The budget and cost calls of `roost.v1.Control`: conversions and the calls into [`Api`],
//! kept apart from the rest of the service so each file keeps one job.

use roost_core::{BudgetIncident, BudgetPolicy, CostEvent};
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

use super::convert::{enum_value, optional_enum};
use crate::api::{Api, BudgetOverview, CostEventRequest, CostSummary, NewBudgetPolicy};
use crate::auth::Caller;
use crate::error::ApiError;

fn policy_to_proto(p: BudgetPolicy) -> pb::BudgetPolicy {
    pb::BudgetPolicy {
        id: p.id,
        company_id: p.company_id,
        scope_type: p.scope_type.to_proto(),
        scope_id: p.scope_id,
        window_kind: p.window_kind.to_proto(),
        amount_cents: p.amount,
        warn_percent: p.warn_percent as u32,
        hard_stop_enabled: p.hard_stop_enabled,
        created_at_ms: p.created_at.millis(),
        updated_at_ms: p.updated_at.millis(),
    }
}

fn incident_to_proto(i: BudgetIncident) -> pb::BudgetIncident {
    pb::BudgetIncident {
        id: i.id,
        company_id: i.company_id,
        policy_id: i.policy_id,
        kind: i.kind.to_proto(),
        status: i.status.to_proto(),
        amount_cents: i.amount,
        observed_cents: i.observed,
        message: i.message,
        created_at_ms: i.created_at.millis(),
        resolved_at_ms: i.resolved_at.map(|t| t.millis()),
        resolution: i.resolution.map(|r| r.as_str().into()),
    }
}

fn overview_to_proto(o: BudgetOverview) -> pb::BudgetOverview {
    pb::BudgetOverview {
        policies: o
            .policies
            .into_iter()
            .map(|s| pb::BudgetPolicyStatus {
                policy: Some(policy_to_proto(s.policy)),
                spent_cents: s.spent,
                reserved_cents: s.reserved,
                remaining_cents: s.remaining,
            })
            .collect(),
        incidents: o.incidents.into_iter().map(incident_to_proto).collect(),
        paused_agent_ids: o.paused_agent_ids,
    }
}

fn cost_to_proto(e: CostEvent) -> pb::CostEvent {
    pb::CostEvent {
        id: e.id,
        company_id: e.company_id,
        agent_id: e.agent_id,
        issue_id: e.issue_id,
        heartbeat_run_id: e.heartbeat_run_id,
        provider: e.provider,
        model: e.model,
        input_tokens: e.input_tokens,
        cached_input_tokens: e.cached_input_tokens,
        output_tokens: e.output_tokens,
        cost_cents: e.cost_cents,
        occurred_at_ms: e.occurred_at.millis(),
        source: e.source,
    }
}

pub(super) async fn set_policy(
    api: Api,
    caller: Caller,
    r: pb::SetBudgetPolicyRequest,
) -> Result<pb::BudgetPolicy, ApiError> {
    // Unspecified: the scope's default (`api/budgets.rs`).
    let window = optional_enum("window_kind", Some(r.window_kind))?;
    let warn_percent = match r.warn_percent {
        0 => 80,
        n => {
            u8::try_from(n).map_err(|_| ApiError::bad_request("warnPercent: between 1 and 100"))?
        }
    };
    let body = NewBudgetPolicy {
        scope_type: enum_value("scope_type", r.scope_type)?,
        scope_id: r.scope_id,
        window_kind: window,
        amount: r.amount_cents,
        warn_percent,
        hard_stop_enabled: r.hard_stop_enabled.unwrap_or(true),
        metric: None,
        notify_enabled: None,
        is_active: None,
    };
    let policy = api.set_budget_policy(&caller, &r.company_id, body).await?;
    Ok(policy_to_proto(policy))
}

pub(super) async fn overview(
    api: Api,
    caller: Caller,
    r: pb::GetBudgetOverviewRequest,
) -> Result<pb::BudgetOverview, ApiError> {
    Ok(overview_to_proto(
        api.budget_overview(&caller, &r.company_id).await?,
    ))
}

pub(super) async fn resolve(
    api: Api,
    caller: Caller,
    r: pb::ResolveBudgetIncidentRequest,
) -> Result<pb::BudgetIncident, ApiError> {
    let action = enum_value("action", r.action)?;
    let incident = api
        .resolve_budget_incident(
            &caller,
            &r.company_id,
            &r.incident_id,
            action,
            r.amount_cents,
        )
        .await?;
    Ok(incident_to_proto(incident))
}

pub(super) async fn record_cost(
    api: Api,
    caller: Caller,
    r: pb::RecordCostEventRequest,
) -> Result<pb::CostEvent, ApiError> {
    let body = CostEventRequest {
        agent_id: r.agent_id,
        issue_id: r.issue_id,
        heartbeat_run_id: r.heartbeat_run_id,
        provider: r.provider,
        model: r.model,
        input_tokens: r.input_tokens,
        cached_input_tokens: r.cached_input_tokens,
        output_tokens: r.output_tokens,
        cost_cents: r.cost_cents,
        occurred_at: r.occurred_at,
        project_id: None,
        goal_id: None,
        billing_code: None,
        cost_status: None,
        biller: None,
        billing_type: None,
    };
    Ok(cost_to_proto(
        api.record_cost_event(&caller, &r.company_id, body).await?,
    ))
}

fn cost_summary_to_proto(s: CostSummary) -> pb::CostSummary {
    pb::CostSummary {
        month_cents: s.month_cents,
        lifetime_cents: s.lifetime_cents,
        reserved_cents: s.reserved_cents,
        by_agent: s
            .by_agent
            .into_iter()
            .map(|a| pb::AgentSpend {
                agent_id: a.agent_id,
                name: a.name,
                month_cents: a.month_cents,
                lifetime_cents: a.lifetime_cents,
                input_tokens: a.input_tokens,
                output_tokens: a.output_tokens,
            })
            .collect(),
        by_project: s
            .by_project
            .into_iter()
            .map(|p| pb::ProjectSpend {
                project_id: p.project_id,
                name: p.name,
                month_cents: p.month_cents,
                lifetime_cents: p.lifetime_cents,
            })
            .collect(),
        spend_cents: s.spend_cents,
        budget_cents: s.budget_cents,
        utilization_percent: s.utilization_percent,
    }
}

/// `GET /api/companies/{cid}/costs/summary`.
pub(super) async fn cost_summary(
    api: Api,
    caller: Caller,
    r: pb::GetCostSummaryRequest,
) -> Result<pb::CostSummary, ApiError> {
    Ok(cost_summary_to_proto(
        api.cost_summary(&caller, &r.company_id, None).await?,
    ))
}
