//! Issue labels with Paperclip's routes and bodies: `GET|POST /api/companies/{cid}/labels`,
//! `DELETE /api/labels/{id}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::label::Label;
use serde::Deserialize;

use super::created;
use super::extract::JsonBody;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Paperclip's label body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelBody {
    pub name: String,
    pub color: String,
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Label>>> {
    Ok(Json(api.list_labels(&caller, &cid).await?))
}

pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<LabelBody>,
) -> Result<(StatusCode, Json<Label>)> {
    Ok(created(
        api.create_label(&caller, &cid, body.name, body.color)
            .await?,
    ))
}

pub async fn delete(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Label>> {
    Ok(Json(api.delete_label(&caller, &id).await?))
}
