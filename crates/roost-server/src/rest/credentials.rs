//! Credentials' routes (administrators only): named admin tokens under `/api/admin/tokens`,
//! an agent's keys (`GET /api/agents/{id}/keys`, Paperclip's `DELETE
//! /api/agents/{id}/keys/{keyId}` answering `{"ok": true}`), and worker join tokens
//! (`GET /api/workers/join-tokens`, `DELETE /api/workers/join-tokens/{id}`), workers'
//! credentials (`GET /api/workers/credentials`, `DELETE /api/workers/{id}` revokes the
//! worker). Lists and revocations show [`CredentialView`]s: never a secret, never a hash.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::views::CreatedAdminToken;
use roost_core::CredentialKind;
use serde::Deserialize;

use super::created;
use super::extract::JsonBody;
use crate::api::{Api, CredentialView};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAdminToken {
    pub name: String,
}

pub async fn list_admin_tokens(
    State(api): State<Api>,
    caller: Caller,
) -> Result<Json<Vec<CredentialView>>> {
    let list = api
        .list_credentials(&caller, CredentialKind::Admin, None)
        .await?;
    Ok(Json(list))
}

pub async fn create_admin_token(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<CreateAdminToken>,
) -> Result<(StatusCode, Json<CreatedAdminToken>)> {
    let (cred, token) = api.create_admin_token(&caller, &body.name).await?;
    Ok(created(CreatedAdminToken::new(cred, token)))
}

pub async fn revoke_admin_token(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<CredentialView>> {
    let view = api
        .revoke_credential(&caller, CredentialKind::Admin, &id, None)
        .await?;
    Ok(Json(view))
}

pub async fn list_agent_keys(
    State(api): State<Api>,
    caller: Caller,
    Path(agent_id): Path<String>,
) -> Result<Json<Vec<CredentialView>>> {
    let list = api
        .list_credentials(&caller, CredentialKind::AgentKey, Some(&agent_id))
        .await?;
    Ok(Json(list))
}

pub async fn revoke_agent_key(
    State(api): State<Api>,
    caller: Caller,
    Path((agent_id, key_id)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>> {
    api.revoke_credential(&caller, CredentialKind::AgentKey, &key_id, Some(&agent_id))
        .await?;
    Ok(Json(serde_json::json!({ "ok": true })))
}

pub async fn list_join_tokens(
    State(api): State<Api>,
    caller: Caller,
) -> Result<Json<Vec<CredentialView>>> {
    let list = api
        .list_credentials(&caller, CredentialKind::WorkerJoin, None)
        .await?;
    Ok(Json(list))
}

pub async fn revoke_join_token(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<CredentialView>> {
    let view = api
        .revoke_credential(&caller, CredentialKind::WorkerJoin, &id, None)
        .await?;
    Ok(Json(view))
}

pub async fn list_worker_credentials(
    State(api): State<Api>,
    caller: Caller,
) -> Result<Json<Vec<CredentialView>>> {
    let list = api
        .list_credentials(&caller, CredentialKind::Worker, None)
        .await?;
    Ok(Json(list))
}

/// Revokes the worker: its credential (the view of it answers). Its session ends and its runs
/// are handled as a lost worker's.
pub async fn revoke_worker(
    State(api): State<Api>,
    caller: Caller,
    Path(worker_id): Path<String>,
) -> Result<Json<CredentialView>> {
    Ok(Json(api.revoke_worker(&caller, &worker_id).await?))
}
