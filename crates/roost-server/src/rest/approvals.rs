//! Approvals with Paperclip's routes and bodies: `/api/companies/{cid}/
//! approvals`, `/api/approvals/{id}` (+ `/issues`, `/approve`, `/reject`,
//! `/request-revision`, `/resubmit`, `/comments`), `/api/issues/{id}/approvals`, and
//! `/api/companies/{cid}/agent-hires`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::approval::{
    Approval, ApprovalComment, ApprovalDecision, ApprovalStatus, ApprovalType,
};
use roost_core::Issue;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::extract::{JsonBody, QueryParams};
use super::paperclip::{agent_row, AgentRow};
use super::{created, dto};
use crate::api::{Api, NewApproval};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    #[serde(rename = "type")]
    pub approval_type: ApprovalType,
    pub requested_by_agent_id: Option<String>,
    #[serde(default)]
    pub payload: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub issue_ids: Vec<String>,
    /// Paperclip's own dedupe key; Roost's is the `Idempotency-Key` header.
    idempotency_key: Option<IgnoredAny>,
}

/// `approve`, `reject` and `request-revision`.
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionBody {
    pub decision_note: Option<String>,
    /// Paperclip's board user; Roost records the caller.
    decided_by_user_id: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResubmitBody {
    pub payload: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommentBody {
    pub body: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub status: Option<ApprovalStatus>,
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<ListQuery>,
) -> Result<Json<Vec<Approval>>> {
    Ok(Json(api.list_approvals(&caller, &cid, q.status).await?))
}

pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<(StatusCode, Json<Approval>)> {
    let new = NewApproval {
        approval_type: body.approval_type,
        payload: serde_json::Value::Object(body.payload),
        requested_by_agent_id: body.requested_by_agent_id,
        issue_ids: body.issue_ids,
    };
    Ok(created(api.create_approval(&caller, &cid, new).await?))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Approval>> {
    Ok(Json(api.get_approval(&caller, &id).await?))
}

pub async fn issues(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<Issue>>> {
    Ok(Json(api.approval_issues(&caller, &id).await?))
}

pub async fn of_issue(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<Approval>>> {
    Ok(Json(api.issue_approvals(&caller, &id).await?))
}

/// Paperclip's `linkIssueApprovalSchema`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkBody {
    pub approval_id: String,
}

/// `POST /api/issues/{id}/approvals`: answers the issue's approvals, as Paperclip does.
pub async fn link(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<LinkBody>,
) -> Result<(StatusCode, Json<Vec<Approval>>)> {
    api.link_issue_approval(&caller, &id, &body.approval_id, true)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(api.issue_approvals(&caller, &id).await?),
    ))
}

/// `DELETE /api/issues/{id}/approvals/{approval_id}`: answers `{"ok": true}`.
pub async fn unlink(
    State(api): State<Api>,
    caller: Caller,
    Path((id, approval_id)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>> {
    api.link_issue_approval(&caller, &id, &approval_id, false)
        .await?;
    Ok(Json(serde_json::json!({ "ok": true })))
}

async fn decide(
    api: Api,
    caller: Caller,
    id: String,
    body: DecisionBody,
    decision: ApprovalDecision,
) -> Result<Json<Approval>> {
    let note = body.decision_note.map(super::dto::multiline);
    Ok(Json(
        api.decide_approval(&caller, &id, decision, note).await?,
    ))
}

pub async fn approve(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> Result<Json<Approval>> {
    decide(api, caller, id, body, ApprovalDecision::Approve).await
}

pub async fn reject(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> Result<Json<Approval>> {
    decide(api, caller, id, body, ApprovalDecision::Reject).await
}

pub async fn request_revision(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> Result<Json<Approval>> {
    let decision = ApprovalDecision::RequestRevision;
    decide(api, caller, id, body, decision).await
}

pub async fn resubmit(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ResubmitBody>,
) -> Result<Json<Approval>> {
    let payload = body.payload.map(serde_json::Value::Object);
    Ok(Json(api.resubmit_approval(&caller, &id, payload).await?))
}

pub async fn comments(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<ApprovalComment>>> {
    Ok(Json(api.get_approval(&caller, &id).await?.comments))
}

pub async fn add_comment(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<CommentBody>,
) -> Result<(StatusCode, Json<ApprovalComment>)> {
    Ok(created(
        api.comment_approval(&caller, &id, super::dto::multiline(body.body))
            .await?,
    ))
}

#[derive(Serialize)]
pub struct Hired {
    agent: AgentRow,
    approval: Option<Approval>,
}

/// Paperclip's hire body: an agent creation body, plus the issues the hire came from.
pub async fn hire(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(mut body): JsonBody<serde_json::Value>,
) -> Result<(StatusCode, Json<Hired>)> {
    let mut payload = serde_json::Map::new();
    if let Some(map) = body.as_object_mut() {
        for key in ["sourceIssueId", "sourceIssueIds"] {
            if let Some(v) = map.remove(key) {
                payload.insert(key.into(), v);
            }
        }
        for key in ["name", "role", "title", "adapterType", "capabilities"] {
            if let Some(v) = map.get(key) {
                payload.insert(key.into(), v.clone());
            }
        }
    }
    let agent: dto::CreateAgent = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(format!("invalid agent hire: {e}")))?;
    let new = super::admin::new_agent(&agent)?;
    let (agent, approval) = api
        .hire_agent(&caller, &cid, new, serde_json::Value::Object(payload))
        .await?;
    let agent = agent_row(&api, agent);
    Ok(created(Hired { agent, approval }))
}
