//! Agent memory: `/api/agents/{id}/memory...`, `/api/agents/me/memory/...` (the
//! calling agent, during its run) and the company's shared memory,
//! `/api/companies/{cid}/memory/{entries,live,documents/...}`. The request bodies live here,
//! strict like those of `dto.rs`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::memory::{
    CompanyLive, CurrentTask, MemoryDocument, MemoryEntry, MemoryLive, NewMemoryEntry,
};
use roost_core::views::{MemorySearchHit, MemorySummary};
use serde::Deserialize;

use super::created;
use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, MemoryScope};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// `POST /api/agents/me/memory/entries` and `POST /api/companies/{cid}/memory/entries`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewEntryBody {
    pub what: String,
    #[serde(default)]
    pub did: String,
    #[serde(default)]
    pub next: String,
    #[serde(default)]
    pub errors: Vec<String>,
    /// The issue it was about (an id or `PREFIX-N`); default: the run's.
    pub issue_id: Option<String>,
}

/// `PUT /api/agents/me/memory/live` and `PUT /api/companies/{cid}/memory/live`: the parts
/// sent are saved, each with its time.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LiveBody {
    pub current_task: Option<CurrentTaskBody>,
    pub coordinates: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CurrentTaskBody {
    pub doing: String,
    #[serde(default)]
    pub last: Vec<String>,
    #[serde(default)]
    pub next: Vec<String>,
}

/// `PUT .../memory/documents/{name}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentBody {
    pub content: String,
    /// The version the writer read (0 for a document that has none yet).
    pub expected_version: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntriesQuery {
    pub limit: Option<usize>,
}

/// `GET .../memory/search?q=&limit=&match=all|any`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    pub q: Option<String>,
    pub limit: Option<u32>,
    /// `all` (default): every word of `q` in a hit; `any`: one is enough.
    #[serde(rename = "match")]
    pub match_words: Option<MatchWords>,
}

#[derive(Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MatchWords {
    All,
    Any,
}

impl SearchParams {
    fn any(&self) -> bool {
        self.match_words == Some(MatchWords::Any)
    }
}

pub async fn search(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(p): QueryParams<SearchParams>,
) -> Result<Json<Vec<MemorySearchHit>>> {
    Ok(Json(
        api.memory_search(&caller, &id, p.q.as_deref(), p.limit, p.any())
            .await?,
    ))
}

/// The calling agent's own search (`GET /api/agents/me/memory/search`).
pub async fn search_own(
    State(api): State<Api>,
    caller: Caller,
    QueryParams(p): QueryParams<SearchParams>,
) -> Result<Json<Vec<MemorySearchHit>>> {
    Ok(Json(
        api.memory_search(&caller, "me", p.q.as_deref(), p.limit, p.any())
            .await?,
    ))
}

pub async fn summary(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<MemorySummary>> {
    Ok(Json(api.memory_summary(&caller, &id).await?))
}

/// The calling agent's own summary (`GET /api/agents/me/memory`).
pub async fn own_summary(State(api): State<Api>, caller: Caller) -> Result<Json<MemorySummary>> {
    Ok(Json(api.memory_summary(&caller, "me").await?))
}

pub async fn list_entries(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<EntriesQuery>,
) -> Result<Json<Vec<MemoryEntry>>> {
    Ok(Json(api.memory_entries(&caller, &id, q.limit).await?))
}

/// The calling agent's own entries (`GET /api/agents/me/memory/entries`).
pub async fn list_own_entries(
    State(api): State<Api>,
    caller: Caller,
    QueryParams(q): QueryParams<EntriesQuery>,
) -> Result<Json<Vec<MemoryEntry>>> {
    Ok(Json(api.memory_entries(&caller, "me", q.limit).await?))
}

impl From<NewEntryBody> for NewMemoryEntry {
    fn from(body: NewEntryBody) -> Self {
        NewMemoryEntry {
            issue_id: body.issue_id,
            what: body.what,
            did: body.did,
            next: body.next,
            errors: body.errors,
        }
    }
}

impl From<CurrentTaskBody> for CurrentTask {
    fn from(t: CurrentTaskBody) -> Self {
        CurrentTask {
            doing: t.doing,
            last: t.last,
            next: t.next,
        }
    }
}

pub async fn append_entry(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<NewEntryBody>,
) -> Result<(StatusCode, Json<MemoryEntry>)> {
    Ok(created(
        api.append_memory_entry(&caller, body.into(), None).await?,
    ))
}

pub async fn set_live(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<LiveBody>,
) -> Result<Json<MemoryLive>> {
    let task = body.current_task.map(CurrentTask::from);
    Ok(Json(
        api.set_memory_live(&caller, task, body.coordinates).await?,
    ))
}

/// The company's shared log, newest first (`GET /api/companies/{cid}/memory/entries`).
pub async fn list_shared_entries(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<EntriesQuery>,
) -> Result<Json<Vec<MemoryEntry>>> {
    Ok(Json(
        api.shared_memory_entries(&caller, &cid, q.limit).await?,
    ))
}

/// An entry of the calling agent's run for its company's log.
pub async fn append_shared_entry(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<NewEntryBody>,
) -> Result<(StatusCode, Json<MemoryEntry>)> {
    Ok(created(
        api.append_memory_entry(&caller, body.into(), Some(&cid))
            .await?,
    ))
}

pub async fn get_company_live(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<CompanyLive>> {
    Ok(Json(api.company_memory_live(&caller, &cid).await?))
}

pub async fn set_company_live(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<LiveBody>,
) -> Result<Json<CompanyLive>> {
    let task = body.current_task.map(CurrentTask::from);
    Ok(Json(
        api.set_company_memory_live(&caller, &cid, task, body.coordinates)
            .await?,
    ))
}

pub async fn get_document(
    State(api): State<Api>,
    caller: Caller,
    Path((id, name)): Path<(String, String)>,
) -> Result<Json<MemoryDocument>> {
    let scope = MemoryScope::Agent(id);
    Ok(Json(api.memory_document(&caller, &scope, &name).await?))
}

pub async fn put_document(
    State(api): State<Api>,
    caller: Caller,
    Path((id, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<DocumentBody>,
) -> Result<Json<MemoryDocument>> {
    let scope = MemoryScope::Agent(id);
    let saved = api
        .put_memory_document(&caller, &scope, &name, body.content, body.expected_version)
        .await?;
    Ok(Json(saved))
}

pub async fn document_history(
    State(api): State<Api>,
    caller: Caller,
    Path((id, name)): Path<(String, String)>,
) -> Result<Json<Vec<MemoryDocument>>> {
    let scope = MemoryScope::Agent(id);
    Ok(Json(api.memory_history(&caller, &scope, &name).await?))
}

pub async fn get_company_document(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, name)): Path<(String, String)>,
) -> Result<Json<MemoryDocument>> {
    let scope = MemoryScope::Company(cid);
    Ok(Json(api.memory_document(&caller, &scope, &name).await?))
}

pub async fn put_company_document(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, name)): Path<(String, String)>,
    JsonBody(body): JsonBody<DocumentBody>,
) -> Result<Json<MemoryDocument>> {
    let scope = MemoryScope::Company(cid);
    let saved = api
        .put_memory_document(&caller, &scope, &name, body.content, body.expected_version)
        .await?;
    Ok(Json(saved))
}

pub async fn company_document_history(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, name)): Path<(String, String)>,
) -> Result<Json<Vec<MemoryDocument>>> {
    let scope = MemoryScope::Company(cid);
    Ok(Json(api.memory_history(&caller, &scope, &name).await?))
}
