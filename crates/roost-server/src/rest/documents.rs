//! Issue documents, Paperclip's `/api/issues/{id}/documents[/{key}[/...]]`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::document::{
    DocumentOp, DocumentPutBody, DocumentRevision, DocumentText, DocumentView, MARKDOWN,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::dto::Empty;
use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, DocumentPut};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// `?includeSystem=true`: Paperclip hides its own system documents unless asked; Roost keeps
/// none, so the flag changes nothing.
#[derive(Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default)]
    pub include_system: Option<String>,
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(_): QueryParams<ListQuery>,
) -> Result<Json<Vec<DocumentView>>> {
    Ok(Json(api.list_documents(&caller, &id).await?))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
) -> Result<Json<DocumentView>> {
    Ok(Json(api.get_document(&caller, &id, &key).await?))
}

/// Creates the document (201) or saves a new revision of it (200).
pub async fn put(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
    JsonBody(body): JsonBody<DocumentPutBody>,
) -> Result<(StatusCode, Json<DocumentView>)> {
    let put = DocumentPut {
        text: DocumentText {
            title: body.title,
            format: body.format.unwrap_or_else(|| MARKDOWN.to_string()),
            body: super::dto::multiline(body.body),
        },
        change_summary: body.change_summary,
        base_revision_id: body.base_revision_id,
    };
    let saved = api.put_document(&caller, &id, &key, put).await?;
    let status = if saved.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(saved.document)))
}

pub async fn revisions(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
) -> Result<Json<Vec<DocumentRevision>>> {
    Ok(Json(api.document_revisions(&caller, &id, &key).await?))
}

pub async fn restore(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key, revision_id)): Path<(String, String, String)>,
    JsonBody(_): JsonBody<Empty>,
) -> Result<Json<DocumentView>> {
    Ok(Json(
        api.restore_document(&caller, &id, &key, &revision_id)
            .await?,
    ))
}

pub async fn lock(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
    JsonBody(_): JsonBody<Empty>,
) -> Result<Json<DocumentView>> {
    Ok(Json(
        api.document_admin(&caller, &id, &key, DocumentOp::Lock)
            .await?,
    ))
}

pub async fn unlock(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
    JsonBody(_): JsonBody<Empty>,
) -> Result<Json<DocumentView>> {
    Ok(Json(
        api.document_admin(&caller, &id, &key, DocumentOp::Unlock)
            .await?,
    ))
}

/// Answers `{"ok": true}`, as Paperclip does.
pub async fn delete(
    State(api): State<Api>,
    caller: Caller,
    Path((id, key)): Path<(String, String)>,
) -> Result<Json<Value>> {
    api.document_admin(&caller, &id, &key, DocumentOp::Delete)
        .await?;
    Ok(Json(json!({ "ok": true })))
}
