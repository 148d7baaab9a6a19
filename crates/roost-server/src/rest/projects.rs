//! Goals and projects with Paperclip's routes and bodies:
//! `/api/companies/{cid}/goals`, `/api/goals/{id}`, `/api/companies/{cid}/projects`,
//! `/api/projects/{id}`. A project is paused with Roost's `paused` and `pauseReason` fields
//! (or `POST /api/projects/{id}/pause` and `/resume`); its issues start no runs meanwhile.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::project::{
    Goal, GoalLevel, GoalPatch, GoalStatus, Project, ProjectPatch, ProjectStatus,
};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::created;
use super::dto::nullable;
use super::extract::JsonBody;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Paperclip's goal body, for create (with `title`) and update.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalBody {
    pub title: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    pub level: Option<GoalLevel>,
    pub status: Option<GoalStatus>,
    #[serde(default, deserialize_with = "nullable")]
    pub parent_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub owner_agent_id: Option<Option<String>>,
}

impl From<GoalBody> for GoalPatch {
    fn from(b: GoalBody) -> Self {
        GoalPatch {
            title: b.title,
            description: b.description,
            level: b.level,
            status: b.status,
            parent_id: b.parent_id,
            owner_agent_id: b.owner_agent_id,
        }
    }
}

/// Paperclip's project body, for create (with `name`) and update, plus Roost's pause.
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectBody {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<ProjectStatus>,
    #[serde(default, deserialize_with = "nullable")]
    pub lead_agent_id: Option<Option<String>>,
    /// Paperclip's older single goal; `goalIds` wins when both are sent.
    #[serde(default, deserialize_with = "nullable")]
    pub goal_id: Option<Option<String>>,
    pub goal_ids: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub target_date: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub color: Option<Option<String>>,
    pub paused: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    pub pause_reason: Option<Option<String>>,
    // Paperclip fields Roost does not use.
    icon: Option<IgnoredAny>,
    env: Option<IgnoredAny>,
    execution_workspace_policy: Option<IgnoredAny>,
    archived_at: Option<IgnoredAny>,
    workspace: Option<IgnoredAny>,
}

impl From<ProjectBody> for ProjectPatch {
    fn from(b: ProjectBody) -> Self {
        let goal_ids = b.goal_ids.or(b.goal_id.map(|g| g.into_iter().collect()));
        ProjectPatch {
            name: b.name,
            description: b.description,
            status: b.status,
            lead_agent_id: b.lead_agent_id,
            goal_ids,
            target_date: b.target_date,
            color: b.color,
            paused: b.paused,
            pause_reason: b.pause_reason,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseBody {
    pub reason: Option<String>,
}

pub async fn list_goals(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Goal>>> {
    Ok(Json(api.list_goals(&caller, &cid).await?))
}

pub async fn create_goal(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<GoalBody>,
) -> Result<(StatusCode, Json<Goal>)> {
    Ok(created(api.create_goal(&caller, &cid, body.into()).await?))
}

pub async fn get_goal(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Goal>> {
    Ok(Json(api.get_goal(&caller, &id).await?))
}

pub async fn update_goal(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<GoalBody>,
) -> Result<Json<Goal>> {
    Ok(Json(api.update_goal(&caller, &id, body.into()).await?))
}

pub async fn delete_goal(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Goal>> {
    Ok(Json(api.delete_goal(&caller, &id).await?))
}

pub async fn list_projects(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Project>>> {
    Ok(Json(api.list_projects(&caller, &cid).await?))
}

pub async fn create_project(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<ProjectBody>,
) -> Result<(StatusCode, Json<Project>)> {
    Ok(created(
        api.create_project(&caller, &cid, body.into()).await?,
    ))
}

pub async fn get_project(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Project>> {
    Ok(Json(api.get_project(&caller, &id).await?))
}

pub async fn update_project(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ProjectBody>,
) -> Result<Json<Project>> {
    Ok(Json(api.update_project(&caller, &id, body.into()).await?))
}

pub async fn delete_project(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Project>> {
    Ok(Json(api.delete_project(&caller, &id).await?))
}

pub async fn pause_project(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<PauseBody>,
) -> Result<Json<Project>> {
    let patch = ProjectPatch {
        paused: Some(true),
        pause_reason: Some(body.reason),
        ..Default::default()
    };
    Ok(Json(api.update_project(&caller, &id, patch).await?))
}

pub async fn resume_project(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Project>> {
    let patch = ProjectPatch {
        paused: Some(false),
        ..Default::default()
    };
    Ok(Json(api.update_project(&caller, &id, patch).await?))
}
