//! Runs, activity and the audit check.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use roost_core::activity::ActivityEntry;
use roost_core::views::LogPage;
use roost_core::{RunStatus, TaskSession};

use super::created;
use super::dto;
use super::extract::{Bearer, JsonBody, QueryParams};
use crate::api::{Api, AuditReport, RunView};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

pub async fn start(
    State(api): State<Api>,
    caller: Caller,
    Path(agent_id): Path<String>,
    JsonBody(body): JsonBody<dto::StartRun>,
) -> Result<(StatusCode, Json<RunView>)> {
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
) -> Result<Json<RunView>> {
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
) -> Result<Json<RunView>> {
    Ok(Json(
        api.finish_run(&caller, &id, RunStatus::Cancelled, Some("cancelled".into()))
            .await?,
    ))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<RunView>> {
    Ok(Json(api.get_run(&caller, &id).await?))
}

/// Bytes of the log returned by one non-following read, unless `limitBytes` says otherwise.
const LOG_READ_BYTES: usize = 256 * 1024;

/// `GET /api/heartbeat-runs/{id}/log?offset&limitBytes`: a JSON page of the log, or with
/// `follow=true` the raw log streamed as `text/plain` until the run ends.
pub async fn log(
    State(api): State<Api>,
    caller: Caller,
    Bearer(token): Bearer,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<dto::RunLogQuery>,
) -> Result<Response> {
    let offset = q.offset.unwrap_or(0);
    let follow = q.follow.unwrap_or(false);
    let mut stream = api
        .run_log(&caller, token.as_deref(), &id, offset, follow)
        .await?;
    if follow {
        let body = Body::from_stream(stream.map(|c| c.map(|c| Bytes::from(c.data))));
        return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response());
    }
    let limit = q
        .limit_bytes
        .unwrap_or(LOG_READ_BYTES)
        .clamp(1, 4 * LOG_READ_BYTES);
    let mut start = None;
    let mut data = Vec::new();
    let mut ended = false;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        start.get_or_insert(chunk.offset);
        ended = chunk.ended;
        data.extend_from_slice(&chunk.data);
        if data.len() >= limit {
            break;
        }
    }
    data.truncate(limit);
    let start = start.unwrap_or(offset);
    Ok(Json(LogPage {
        run_id: id,
        store: "cluster".into(),
        offset: start,
        content: String::from_utf8_lossy(&data).into_owned(),
        next_offset: start + data.len() as u64,
        ended,
    })
    .into_response())
}

/// `GET /api/agents/{id}/task-sessions`: the agent's saved adapter sessions, one per task.
pub async fn task_sessions(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<TaskSession>>> {
    let agent = api.get_agent(&caller, &id).await?;
    Ok(Json(agent.task_sessions.into_values().collect()))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<dto::RunListQuery>,
) -> Result<Json<Vec<RunView>>> {
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
) -> Result<Json<Vec<ActivityRow>>> {
    let limit = q.limit.unwrap_or(100);
    let entries = if q.agent_id.is_none() && q.entity_type.is_none() && q.entity_id.is_none() {
        api.list_activity(&caller, &cid, q.before, limit).await?
    } else {
        let filter = roost_store::ActivityFilter {
            agent_id: q.agent_id,
            entity_type: q.entity_type,
            entity_id: q.entity_id,
        };
        api.list_activity_matching(&caller, &cid, &filter, q.before, limit)
            .await?
    };
    Ok(Json(entries.into_iter().map(ActivityRow::from).collect()))
}

/// `GET /api/issues/{id}/activity`.
pub async fn issue_activity(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<dto::ActivityQuery>,
) -> Result<Json<Vec<ActivityRow>>> {
    if q.agent_id.is_some() || q.entity_type.is_some() || q.entity_id.is_some() {
        return Err(ApiError::bad_request(
            "an issue's activity takes only `before` and `limit`",
        ));
    }
    let entries = api
        .issue_activity(&caller, &id, q.before, q.limit.unwrap_or(100))
        .await?;
    Ok(Json(entries.into_iter().map(ActivityRow::from).collect()))
}

/// An activity entry with Paperclip's names beside Roost's: `id` (the sequence number as
/// text), `createdAt` (= `at`) and `agentId` (the acting agent, if an agent acted).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityRow {
    #[serde(flatten)]
    entry: ActivityEntry,
    id: String,
    created_at: roost_core::Timestamp,
    agent_id: Option<String>,
}

impl From<ActivityEntry> for ActivityRow {
    fn from(entry: ActivityEntry) -> Self {
        let agent_id = (entry.actor_type == "agent").then(|| entry.actor_id.clone());
        ActivityRow {
            id: entry.seq.to_string(),
            created_at: entry.at,
            agent_id,
            entry,
        }
    }
}

pub async fn verify_audit(State(api): State<Api>, caller: Caller) -> Result<Json<AuditReport>> {
    Ok(Json(api.verify_audit(&caller).await?))
}
