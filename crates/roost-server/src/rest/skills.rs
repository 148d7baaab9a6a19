//! Company skills with Paperclip's routes and bodies:
//! `/api/companies/{cid}/skills[/{id}[/files]]` and `/api/agents/{id}/skills[/sync]`. A skill
//! is a tree of UTF-8 files with a `SKILL.md`; an agent's worker writes its assigned skills
//! where its runtime reads them before every run (`roost-worker/src/skills.rs`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::skill::{Skill, SkillCreate, SkillPatch, SKILL_FILE};
use roost_core::Agent;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};

use super::created;
use super::dto::nullable;
use super::extract::{JsonBody, QueryParams};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Paperclip's create body, plus `files` for the rest of the tree.
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBody {
    pub name: String,
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub markdown: Option<String>,
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
    // Paperclip's presentation fields.
    folder_id: Option<IgnoredAny>,
    icon_url: Option<IgnoredAny>,
    color: Option<IgnoredAny>,
    tagline: Option<IgnoredAny>,
    author_name: Option<IgnoredAny>,
    homepage_url: Option<IgnoredAny>,
    categories: Option<IgnoredAny>,
    sharing_scope: Option<IgnoredAny>,
    forked_from_skill_id: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateBody {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    /// Paperclip's `SKILL.md` text.
    pub markdown: Option<String>,
}

/// Paperclip's file write: `{path, content}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileBody {
    pub path: String,
    pub content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileQuery {
    pub path: Option<String>,
}

/// Paperclip sends keys, and in some versions `{key, versionId}` objects.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum DesiredSkill {
    Key(String),
    Entry { key: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncBody {
    pub desired_skills: Vec<DesiredSkill>,
}

fn kind_of(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if path == SKILL_FILE {
        "skill"
    } else if path.starts_with("references/") {
        "reference"
    } else if ext == "md" {
        "markdown"
    } else if matches!(ext, "sh" | "py" | "js" | "ts" | "rb" | "pl") || path.starts_with("scripts/")
    {
        "script"
    } else {
        "other"
    }
}

/// A skill as Paperclip lists it: its files by path, not their content.
fn item(s: &Skill) -> Value {
    let inventory: Vec<Value> = s
        .files
        .iter()
        .map(|(path, content)| json!({ "path": path, "kind": kind_of(path), "bytes": content.len() }))
        .collect();
    json!({
        "id": s.id,
        "companyId": s.company_id,
        "key": s.key,
        "slug": s.key,
        "name": s.name,
        "description": s.description,
        "version": s.version,
        "sourceType": "local_path",
        "trustLevel": "scripts_executables",
        "fileInventory": inventory,
        "bytes": s.size(),
        "createdAt": s.created_at,
        "updatedAt": s.updated_at,
    })
}

fn detail(s: &Skill, holders: &[Agent]) -> Value {
    let mut v = item(s);
    v["markdown"] = json!(s.files.get(SKILL_FILE));
    v["attachedAgentCount"] = json!(holders.len());
    v["usedByAgents"] = holders
        .iter()
        .map(|a| json!({ "id": a.id, "name": a.name, "adapterType": a.adapter_type, "desired": true }))
        .collect();
    v["editable"] = json!(true);
    v
}

fn file_view(s: &Skill, path: &str) -> Result<Value> {
    let content = s
        .files
        .get(path)
        .ok_or_else(|| ApiError::not_found("skill file", &format!("{}/{path}", s.key)))?;
    Ok(json!({
        "skillId": s.id,
        "path": path,
        "kind": kind_of(path),
        "content": content,
        "language": if path.ends_with(".md") { Some("markdown") } else { None },
        "markdown": path.ends_with(".md"),
        "editable": true,
    }))
}

/// Paperclip's agent skill snapshot: the keys it wants and, per company skill, whether the
/// worker writes it (`ephemeral`: written into each run's work directory, never installed).
fn snapshot(agent: &Agent, skills: &[Skill]) -> Value {
    let entries: Vec<Value> = skills
        .iter()
        .map(|s| {
            let desired = agent.desired_skills.contains(&s.key);
            json!({
                "key": s.key,
                "runtimeName": s.key,
                "desired": desired,
                "managed": true,
                "state": if desired { "configured" } else { "available" },
                "origin": "company_managed",
                "version": s.version,
                "detail": s.description,
            })
        })
        .collect();
    json!({
        "adapterType": agent.adapter_type,
        "supported": true,
        "mode": "ephemeral",
        "desiredSkills": agent.desired_skills,
        "entries": entries,
        "warnings": [],
    })
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Value>>> {
    Ok(Json(
        api.list_skills(&caller, &cid)
            .await?
            .iter()
            .map(item)
            .collect(),
    ))
}

pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<(StatusCode, Json<Value>)> {
    let fields = SkillCreate {
        name: body.name,
        slug: body.slug,
        description: body.description,
        markdown: body.markdown,
        files: body.files,
    };
    let skill = api.create_skill(&caller, &cid, fields).await?;
    Ok(created(detail(&skill, &[])))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
) -> Result<Json<Value>> {
    let (skill, holders) = api.get_skill(&caller, &cid, &id).await?;
    Ok(Json(detail(&skill, &holders)))
}

pub async fn update(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
    JsonBody(body): JsonBody<UpdateBody>,
) -> Result<Json<Value>> {
    let patch = SkillPatch {
        name: body.name,
        description: body.description,
        files: body
            .markdown
            .map(|m| (SKILL_FILE.to_string(), Some(m)))
            .into_iter()
            .collect(),
    };
    api.update_skill(&caller, &cid, &id, patch).await?;
    let (skill, holders) = api.get_skill(&caller, &cid, &id).await?;
    Ok(Json(detail(&skill, &holders)))
}

pub async fn delete(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
) -> Result<Json<Value>> {
    let skill = api.delete_skill(&caller, &cid, &id).await?;
    Ok(Json(item(&skill)))
}

fn required_path(q: FileQuery) -> Result<String> {
    q.path.ok_or_else(|| {
        ApiError::bad_request("name the file with ?path=, for example ?path=SKILL.md")
    })
}

pub async fn get_file(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
    QueryParams(q): QueryParams<FileQuery>,
) -> Result<Json<Value>> {
    let path = q.path.unwrap_or_else(|| SKILL_FILE.into());
    let (skill, _) = api.get_skill(&caller, &cid, &id).await?;
    Ok(Json(file_view(&skill, &path)?))
}

pub async fn put_file(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
    JsonBody(body): JsonBody<FileBody>,
) -> Result<Json<Value>> {
    let patch = SkillPatch {
        files: [(body.path.clone(), Some(body.content))]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let skill = api.update_skill(&caller, &cid, &id, patch).await?;
    Ok(Json(file_view(&skill, &body.path)?))
}

pub async fn delete_file(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, id)): Path<(String, String)>,
    QueryParams(q): QueryParams<FileQuery>,
) -> Result<Json<Value>> {
    caller.require_admin()?;
    let path = required_path(q)?;
    let (before, _) = api.get_skill(&caller, &cid, &id).await?;
    if !before.files.contains_key(&path) {
        return Err(ApiError::not_found(
            "skill file",
            &format!("{}/{path}", before.key),
        ));
    }
    let patch = SkillPatch {
        files: [(path, None)].into_iter().collect(),
        ..Default::default()
    };
    let skill = api.update_skill(&caller, &cid, &id, patch).await?;
    Ok(Json(item(&skill)))
}

pub async fn agent_skills(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let (agent, skills) = api.agent_skills(&caller, &id).await?;
    Ok(Json(snapshot(&agent, &skills)))
}

pub async fn sync_agent_skills(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SyncBody>,
) -> Result<Json<Value>> {
    let keys = body
        .desired_skills
        .into_iter()
        .map(|d| match d {
            DesiredSkill::Key(k) | DesiredSkill::Entry { key: k } => k,
        })
        .collect();
    let (agent, skills) = api.set_agent_skills(&caller, &id, keys).await?;
    Ok(Json(snapshot(&agent, &skills)))
}
