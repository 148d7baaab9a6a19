//! Runs, activity and the audit check.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::activity::ActivityEntry;
use roost_core::{Run, RunStatus};

use super::created;
use super::dto;
use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, AuditReport};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

pub async fn start(
    State(api): State<Api>,
    caller: Caller,
    Path(agent_id): Path<String>,
    JsonBody(body): JsonBody<dto::StartRun>,
) -> Result<(StatusCode, Json<Run>)> {
    Ok(created(
        api.start_run(&caller, &agent_id, body.issue_id.as_deref())
            .await?,
    ))
}

pub async fn finish(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::FinishRun>,
) -> Result<Json<Run>> {
    Ok(Json(
        api.finish_run(&caller, &id, body.status, body.error)
            .await?,
    ))
}

pub async fn cancel(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<Run>> {
    Ok(Json(
        api.finish_run(&caller, &id, RunStatus::Cancelled, Some("cancelled".into()))
            .await?,
    ))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Run>> {
    Ok(Json(api.get_run(&caller, &id).await?))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<dto::RunListQuery>,
) -> Result<Json<Vec<Run>>> {
    Ok(Json(
        api.list_runs(&caller, &cid, q.agent_id.as_deref(), q.limit.unwrap_or(100))
            .await?,
    ))
}

pub async fn activity(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<dto::ActivityQuery>,
) -> Result<Json<Vec<ActivityEntry>>> {
    Ok(Json(
        api.list_activity(&caller, &cid, q.before, q.limit.unwrap_or(100))
            .await?,
    ))
}

pub async fn verify_audit(State(api): State<Api>, caller: Caller) -> Result<Json<AuditReport>> {
    Ok(Json(api.verify_audit(&caller).await?))
}
