//! Routines in Paperclip's routes and bodies (`createRoutineSchema`, `createRoutineTriggerSchema`,
//! `runRoutineSchema`, ...): fields Roost does not use are accepted and ignored, unknown ones
//! are a 400. The public webhook takes the raw body, for its signature.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use roost_core::routine::{
    CatchUpPolicy, ConcurrencyPolicy, RoutineAction, RoutineStatus, RunSource, SigningMode,
    TriggerKind, WebhookRequest,
};
use roost_core::routine_command::{
    NewTrigger, RoutineFields, RoutinePatch, RunRequest, TriggerPatch,
};
use roost_core::Priority;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use super::extract::{JsonBody, QueryParams};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Keeps `null` (clear) apart from an absent field (leave).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `POST /api/companies/{cid}/routines`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRoutine {
    title: String,
    description: Option<String>,
    assignee_agent_id: Option<String>,
    priority: Option<Priority>,
    status: Option<RoutineStatus>,
    concurrency_policy: Option<ConcurrencyPolicy>,
    catch_up_policy: Option<CatchUpPolicy>,
    variables: Option<Value>,
    project_id: Option<String>,
    goal_id: Option<String>,
    parent_issue_id: Option<String>,
    /// Roost: `issue` (default) opens an issue per firing, `wake` wakes the agent.
    action: Option<RoutineAction>,
    /// Roost: failures in a row that open an alert issue (default 3, 0: never).
    failure_alert_after: Option<u32>,
    #[allow(dead_code)]
    folder_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    env: Option<IgnoredAny>,
}

/// `PATCH /api/routines/{id}` (Paperclip's `updateRoutineSchema`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateRoutine {
    title: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    assignee_agent_id: Option<Option<String>>,
    priority: Option<Priority>,
    status: Option<RoutineStatus>,
    concurrency_policy: Option<ConcurrencyPolicy>,
    catch_up_policy: Option<CatchUpPolicy>,
    variables: Option<Value>,
    action: Option<RoutineAction>,
    failure_alert_after: Option<u32>,
    #[allow(dead_code)]
    project_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    goal_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    parent_issue_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    folder_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    env: Option<IgnoredAny>,
    #[allow(dead_code)]
    base_revision_id: Option<IgnoredAny>,
}

/// `POST /api/routines/{id}/triggers`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateTrigger {
    kind: TriggerKind,
    label: Option<String>,
    enabled: Option<bool>,
    /// Five cron fields, `every <duration>` or `at <RFC 3339 time>` (Roost).
    cron_expression: Option<String>,
    timezone: Option<String>,
    signing_mode: Option<SigningMode>,
    replay_window_sec: Option<u32>,
}

/// `PATCH /api/routine-triggers/{id}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateTrigger {
    #[serde(default, deserialize_with = "nullable")]
    label: Option<Option<String>>,
    enabled: Option<bool>,
    cron_expression: Option<String>,
    timezone: Option<String>,
    signing_mode: Option<SigningMode>,
    replay_window_sec: Option<u32>,
}

/// `POST /api/routines/{id}/run` (Paperclip's `runRoutineSchema`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunBody {
    trigger_id: Option<String>,
    payload: Option<Value>,
    variables: Option<Value>,
    assignee_agent_id: Option<String>,
    idempotency_key: Option<String>,
    source: Option<RunSource>,
    #[allow(dead_code)]
    project_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    project_workspace_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    execution_workspace_id: Option<IgnoredAny>,
    #[allow(dead_code)]
    execution_workspace_preference: Option<IgnoredAny>,
    #[allow(dead_code)]
    execution_workspace_settings: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    limit: Option<usize>,
}

fn object_or_null(field: &str, v: Option<Value>) -> Result<Value> {
    match v {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => Err(ApiError::bad_request(format!(
            "{field} must be a JSON object"
        ))),
    }
}

pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(b): JsonBody<CreateRoutine>,
) -> Result<(StatusCode, Json<Value>)> {
    let variables = match b.variables {
        None | Some(Value::Null) => json!([]),
        Some(v @ Value::Array(_)) => v,
        Some(_) => {
            return Err(ApiError::bad_request(
                "variables must be an array of variable definitions",
            ))
        }
    };
    let fields = RoutineFields {
        title: b.title,
        description: b.description,
        assignee_agent_id: b.assignee_agent_id,
        priority: b.priority.unwrap_or(Priority::Medium),
        status: b.status.unwrap_or(RoutineStatus::Active),
        concurrency_policy: b
            .concurrency_policy
            .unwrap_or(ConcurrencyPolicy::CoalesceIfActive),
        catch_up_policy: b.catch_up_policy.unwrap_or(CatchUpPolicy::SkipMissed),
        variables,
        project_id: b.project_id,
        goal_id: b.goal_id,
        parent_issue_id: b.parent_issue_id,
        action: b.action.unwrap_or(RoutineAction::Issue),
        failure_alert_after: b.failure_alert_after.unwrap_or(3),
    };
    Ok((
        StatusCode::CREATED,
        Json(api.create_routine(&caller, &cid, fields).await?),
    ))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Value>>> {
    Ok(Json(api.list_routines(&caller, &cid).await?))
}

pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(api.get_routine(&caller, &id).await?))
}

pub async fn update(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<UpdateRoutine>,
) -> Result<Json<Value>> {
    if let Some(v) = &b.variables {
        if !v.is_array() {
            return Err(ApiError::bad_request(
                "variables must be an array of variable definitions",
            ));
        }
    }
    let patch = RoutinePatch {
        title: b.title,
        description: b.description,
        assignee_agent_id: b.assignee_agent_id,
        priority: b.priority,
        status: b.status,
        concurrency_policy: b.concurrency_policy,
        catch_up_policy: b.catch_up_policy,
        variables: b.variables,
        action: b.action,
        failure_alert_after: b.failure_alert_after,
    };
    Ok(Json(api.update_routine(&caller, &id, patch).await?))
}

pub async fn runs(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<RunsQuery>,
) -> Result<Json<Vec<Value>>> {
    Ok(Json(api.routine_runs(&caller, &id, q.limit).await?))
}

pub async fn triggers(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>> {
    Ok(Json(api.routine_triggers(&caller, &id).await?))
}

pub async fn create_trigger(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<CreateTrigger>,
) -> Result<(StatusCode, Json<Value>)> {
    let trigger = NewTrigger {
        kind: b.kind,
        label: b.label,
        enabled: b.enabled.unwrap_or(true),
        cron_expression: b.cron_expression,
        timezone: b.timezone,
        public_id: None,
        signing_mode: b.signing_mode,
        replay_window_sec: b.replay_window_sec,
        secret: None,
    };
    Ok((
        StatusCode::CREATED,
        Json(api.create_trigger(&caller, &id, trigger).await?),
    ))
}

pub async fn update_trigger(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<UpdateTrigger>,
) -> Result<Json<Value>> {
    let patch = TriggerPatch {
        label: b.label,
        enabled: b.enabled,
        cron_expression: b.cron_expression,
        timezone: b.timezone,
        signing_mode: b.signing_mode,
        replay_window_sec: b.replay_window_sec,
    };
    Ok(Json(api.update_trigger(&caller, &id, patch).await?))
}

pub async fn delete_trigger(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    api.delete_trigger(&caller, &id).await?;
    Ok(Json(json!({ "ok": true })))
}

pub async fn rotate_secret(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    Ok(Json(api.rotate_trigger_secret(&caller, &id).await?))
}

pub async fn run(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(b): JsonBody<RunBody>,
) -> Result<(StatusCode, Json<Value>)> {
    let request = RunRequest {
        routine_id: id,
        trigger_id: b.trigger_id,
        source: b.source.unwrap_or(RunSource::Manual),
        payload: object_or_null("payload", b.payload)?,
        variables: object_or_null("variables", b.variables)?,
        assignee_agent_id: b.assignee_agent_id,
        idempotency_key: b.idempotency_key,
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(api.run_routine(&caller, request).await?),
    ))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("malformed {name} header")))
        })
        .transpose()
}

/// `POST /api/routine-triggers/public/{publicId}/fire`: no credential, the trigger's signature.
pub async fn fire(
    State(api): State<Api>,
    Path(public_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>)> {
    let idempotency_key = header(&headers, "idempotency-key")?
        .or(header(&headers, "x-paperclip-idempotency-key")?)
        .map(str::to_string);
    let req = WebhookRequest {
        authorization: header(&headers, "authorization")?,
        signature: header(&headers, "x-paperclip-signature")?,
        hub_signature: header(&headers, "x-hub-signature-256")?,
        timestamp: header(&headers, "x-paperclip-timestamp")?,
        body: &body,
    };
    let run = api.fire_webhook(&public_id, req, idempotency_key).await?;
    Ok((StatusCode::ACCEPTED, Json(run)))
}
