//! The agent's home: `GET /api/agents/{id|me}/home`, its chunks' bytes at
//! `.../home/chunks/{hash}`, and the calling run's `POST /api/agents/me/home/chunks` (base64)
//! and `PUT /api/agents/me/home`. The worker uses these to save a home after a run and restore
//! it before the next, on any worker.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use roost_core::home::HomeFile;
use roost_core::views::{HomeChunksStored, HomeView};
use serde::Deserialize;

use super::extract::JsonBody;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// `POST /api/agents/me/home/chunks`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunksBody {
    /// Each chunk's bytes, base64 (standard alphabet, padded).
    pub chunks: Vec<String>,
}

/// `PUT /api/agents/me/home`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveBody {
    /// The version the run restored (0 before the first save).
    pub base_version: u64,
    /// The files that changed or are new, by path.
    #[serde(default)]
    pub files: BTreeMap<String, HomeFile>,
    /// The paths removed.
    #[serde(default)]
    pub deleted: Vec<String>,
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<HomeView>> {
    Ok(Json(api.agent_home(&caller, &id).await?))
}

pub async fn get_own(State(api): State<Api>, caller: Caller) -> Result<Json<HomeView>> {
    Ok(Json(api.agent_home(&caller, "me").await?))
}

pub async fn chunk(
    State(api): State<Api>,
    caller: Caller,
    Path((id, hash)): Path<(String, String)>,
) -> Result<impl IntoResponse> {
    let bytes = api.home_chunk(&caller, &id, &hash).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes))
}

pub async fn upload(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<ChunksBody>,
) -> Result<Json<HomeChunksStored>> {
    let hashes = api.put_home_chunks(&caller, body.chunks).await?;
    Ok(Json(HomeChunksStored { hashes }))
}

pub async fn save(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<SaveBody>,
) -> Result<Json<HomeView>> {
    let home = api
        .save_agent_home(&caller, body.base_version, body.files, body.deleted)
        .await?;
    Ok(Json(home))
}
