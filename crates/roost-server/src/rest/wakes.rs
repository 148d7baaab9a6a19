//! Wakes and workers: `POST /api/agents/{id}/wakeup`, the wake list, workers and join tokens.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::WakeStatus;

use super::created;
use roost_core::views::CreatedJoinToken;

use super::dto;
use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, WakeFilter, WakeView, WakeupRequest, WakeupResult, WorkerView};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// The name a join token gets when the request names none.
const DEFAULT_JOIN_TOKEN_NAME: &str = "worker";

fn parse_statuses(csv: &str) -> Result<Vec<WakeStatus>> {
    super::extract::parse_csv(csv)
}

/// `202 Accepted`: the wake is committed, the run (if any) comes later.
pub async fn wakeup(
    State(api): State<Api>,
    caller: Caller,
    Path(agent_id): Path<String>,
    JsonBody(body): JsonBody<dto::Wakeup>,
) -> Result<(StatusCode, Json<WakeupResult>)> {
    let reason = body.wake_reason();
    let mut payload = body.payload;
    if body.force_fresh_session == Some(true) {
        // The run rules read `forceFreshSession` from the wake's payload.
        match &mut payload {
            Some(serde_json::Value::Object(fields)) => {
                fields.insert("forceFreshSession".into(), true.into());
            }
            None | Some(serde_json::Value::Null) => {
                payload = Some(serde_json::json!({ "forceFreshSession": true }));
            }
            Some(_) => {}
        }
    }
    // Paperclip's wakeup has no issue field: it takes the issue from `payload.issueId` or
    // `payload.taskId`. Roost's own `issueId` wins when both are sent.
    let from_payload = |key: &str| {
        payload
            .as_ref()
            .and_then(|p| p.get(key))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let issue_id = body
        .issue_id
        .or_else(|| from_payload("issueId"))
        .or_else(|| from_payload("taskId"));
    let request = WakeupRequest {
        issue_id,
        reason: Some(reason),
        payload,
        idempotency_key: body.idempotency_key,
    };
    let result = api.wakeup(&caller, &agent_id, request).await?;
    Ok((StatusCode::ACCEPTED, Json(result)))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<dto::WakeListQuery>,
) -> Result<Json<Vec<WakeView>>> {
    let filter = WakeFilter {
        agent_id: q.agent_id,
        statuses: q
            .status
            .as_deref()
            .map(parse_statuses)
            .transpose()?
            .unwrap_or_default(),
        issue_id: q.issue_id,
        limit: q.limit,
    };
    Ok(Json(api.list_wakes(&caller, &cid, &filter).await?))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<WakeView>> {
    Ok(Json(api.get_wake(&caller, &id).await?))
}

pub async fn list_workers(State(api): State<Api>, caller: Caller) -> Result<Json<Vec<WorkerView>>> {
    Ok(Json(api.list_workers(&caller).await?))
}

pub async fn create_join_token(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<dto::CreateJoinToken>,
) -> Result<(StatusCode, Json<CreatedJoinToken>)> {
    let name = body
        .name
        .unwrap_or_else(|| DEFAULT_JOIN_TOKEN_NAME.to_string());
    let limits = crate::api::JoinTokenLimits {
        ttl_secs: body.ttl_secs,
        max_uses: body.max_uses,
    };
    let (cred, token) = api.create_join_token(&caller, &name, limits).await?;
    Ok(created(CreatedJoinToken::new(cred, token)))
}

#[cfg(test)]
mod tests {
    use super::parse_statuses;
    use roost_core::WakeStatus;

    #[test]
    fn status_lists_are_comma_separated_and_strict() {
        assert_eq!(
            parse_statuses("queued, deferred,").expect("valid"),
            vec![WakeStatus::Queued, WakeStatus::Deferred]
        );
        assert!(parse_statuses("queued,sleeping").is_err());
    }
}
