//! Companies and agents.

use axum::extract::{Path, State};
use axum::Json;
use roost_core::{AdapterType, Agent, Company, PauseReason};

use super::created;
use super::dto::{self, CreatedKey};
use super::extract::JsonBody;
use crate::api::{Api, NewAgent};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

pub async fn create_company(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<dto::CreateCompany>,
) -> Result<(axum::http::StatusCode, Json<Company>)> {
    let prefix = body
        .issue_prefix
        .unwrap_or_else(|| crate::api::default_prefix(&body.name));
    Ok(created(
        api.create_company(&caller, &body.name, &prefix).await?,
    ))
}

pub async fn list_companies(State(api): State<Api>, caller: Caller) -> Result<Json<Vec<Company>>> {
    Ok(Json(api.list_companies(&caller).await?))
}

pub async fn get_company(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Company>> {
    Ok(Json(api.get_company(&caller, &cid).await?))
}

pub async fn create_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<dto::CreateAgent>,
) -> Result<(axum::http::StatusCode, Json<Agent>)> {
    let new = NewAgent {
        name: body.name,
        role: body.role.unwrap_or_else(|| "general".into()),
        title: body.title,
        adapter_type: body.adapter_type.unwrap_or(AdapterType::Process),
        adapter_config: body.adapter_config.unwrap_or_else(|| serde_json::json!({})),
        heartbeat: body.heartbeat.unwrap_or_default(),
        placement_labels: body.placement_labels.unwrap_or_default(),
    };
    Ok(created(api.create_agent(&caller, &cid, new).await?))
}

pub async fn list_agents(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Agent>>> {
    Ok(Json(api.list_agents(&caller, &cid).await?))
}

pub async fn get_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Agent>> {
    Ok(Json(api.get_agent(&caller, &id).await?))
}

pub async fn me(State(api): State<Api>, caller: Caller) -> Result<Json<Agent>> {
    Ok(Json(api.me(&caller).await?))
}

pub async fn update_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::PatchAgent>,
) -> Result<Json<Agent>> {
    Ok(Json(api.update_agent(&caller, &id, body.into()).await?))
}

pub async fn pause_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::PauseAgent>,
) -> Result<Json<Agent>> {
    Ok(Json(
        api.pause_agent(&caller, &id, body.reason.unwrap_or(PauseReason::Manual))
            .await?,
    ))
}

pub async fn resume_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<Agent>> {
    Ok(Json(api.resume_agent(&caller, &id).await?))
}

pub async fn terminate_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<Agent>> {
    Ok(Json(api.terminate_agent(&caller, &id).await?))
}

pub async fn create_key(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::CreateKey>,
) -> Result<(axum::http::StatusCode, Json<CreatedKey>)> {
    let name = body.name.unwrap_or_else(|| "default".into());
    let (cred, token) = api.create_agent_key(&caller, &id, &name).await?;
    Ok(created(CreatedKey::new(cred, token)))
}
