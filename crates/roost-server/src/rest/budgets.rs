//! Budgets and costs, in Paperclip's routes and shapes.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::{BudgetIncident, BudgetPolicy};
use serde::Deserialize;

use super::costs::Range;
use super::created;
use super::extract::{JsonBody, QueryParams};
use crate::api::{
    parse_action, Api, BudgetOverview, CostEventRequest, CostSummary, NewBudgetPolicy,
};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Body of `POST /api/companies/{cid}/budget-incidents/{id}/resolve`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resolve {
    action: String,
    amount: Option<u64>,
    /// Accepted for Paperclip compatibility; the decision itself is in the audit log.
    #[allow(dead_code)]
    decision_note: Option<String>,
}

pub async fn set_policy(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<NewBudgetPolicy>,
) -> Result<(StatusCode, Json<BudgetPolicy>)> {
    Ok(created(api.set_budget_policy(&caller, &cid, body).await?))
}

pub async fn overview(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<BudgetOverview>> {
    Ok(Json(api.budget_overview(&caller, &cid).await?))
}

pub async fn resolve(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
    JsonBody(body): JsonBody<Resolve>,
) -> Result<Json<BudgetIncident>> {
    let action = parse_action(&body.action)?;
    Ok(Json(
        api.resolve_budget_incident(&caller, &cid, &id, action, body.amount)
            .await?,
    ))
}

pub async fn record_cost(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<CostEventRequest>,
) -> Result<(StatusCode, Json<super::costs::CostEventRow>)> {
    let event = api.record_cost_event(&caller, &cid, body).await?;
    Ok(created(event.into()))
}

/// `GET /api/companies/{cid}/costs/summary`: `spendCents` within `from`/`to` when given, else
/// this month's.
pub async fn summary(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<CostSummary>> {
    let within = range.given()?;
    Ok(Json(api.cost_summary(&caller, &cid, within).await?))
}
