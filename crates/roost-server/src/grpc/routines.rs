//! The routine calls of `roost.v1.Control`: each calls the [`Api`] function
//! its REST twin calls (`rest/routines.rs`), with the same defaults, so authorization,
//! validation and errors are the same. The service layer answers routines and runs as the JSON
//! views REST sends (`api/routines.rs`: triggers without secrets, the linked issue's summary);
//! they are read back here into typed messages.

use roost_core::routine::{
    CatchUpPolicy, ConcurrencyPolicy, Routine, RoutineAction, RoutineRunStatus, RoutineStatus,
    RoutineTrigger, RunSource,
};
use roost_core::routine_command::{RoutineFields, RoutinePatch, RunRequest};
use roost_core::{IssueStatus, Priority, Timestamp};
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;
use serde::Deserialize;
use serde_json::Value;

use super::convert::{clearable, non_empty, optional_enum, parse_json};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

/// The fields of `api/routines.rs` `run_view` this API shows.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoutineRunView {
    id: String,
    company_id: String,
    routine_id: String,
    trigger_id: Option<String>,
    source: RunSource,
    status: RoutineRunStatus,
    triggered_at: Timestamp,
    scheduled_for: Option<Timestamp>,
    idempotency_key: Option<String>,
    #[serde(default)]
    trigger_payload: Value,
    linked_issue_id: Option<String>,
    linked_issue: Option<LinkedIssue>,
    linked_wake_id: Option<String>,
    coalesced_into_run_id: Option<String>,
    failure_reason: Option<String>,
    completed_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

#[derive(Deserialize)]
struct LinkedIssue {
    identifier: String,
    status: IssueStatus,
}

/// What `api/routines.rs` `routine_view` adds to the routine's own fields.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoutineExtras {
    /// `roost_core::routine::trigger_view`s: the row without its secret, plus `hasSecret`.
    #[serde(default)]
    triggers: Vec<Value>,
    active_issue: Option<IssueRef>,
    /// In a routine's detail.
    #[serde(default)]
    recent_runs: Vec<RoutineRunView>,
    /// In a list.
    last_run: Option<RoutineRunView>,
}

#[derive(Deserialize)]
struct IssueRef {
    id: String,
}

/// A view the service layer made that does not read back is a bug here, not bad input.
pub(super) fn unreadable(what: &str, e: serde_json::Error) -> ApiError {
    ApiError::internal(format!("the {what} view does not read back: {e}"))
}

fn run_to_proto(view: &Value) -> Answer<pb::RoutineRun> {
    let run = RoutineRunView::deserialize(view).map_err(|e| unreadable("routine run", e))?;
    Ok(routine_run_to_proto(run))
}

fn routine_run_to_proto(r: RoutineRunView) -> pb::RoutineRun {
    let (identifier, status) = r.linked_issue.map(|i| (i.identifier, i.status)).unzip();
    pb::RoutineRun {
        id: r.id,
        company_id: r.company_id,
        routine_id: r.routine_id,
        trigger_id: r.trigger_id,
        source: r.source.to_proto(),
        status: r.status.to_proto(),
        triggered_at_ms: r.triggered_at.millis(),
        scheduled_for_ms: r.scheduled_for.map(Timestamp::millis),
        idempotency_key: r.idempotency_key,
        trigger_payload_json: r.trigger_payload.to_string(),
        linked_issue_id: r.linked_issue_id,
        linked_issue_identifier: identifier,
        linked_issue_status: status.map(IssueStatus::to_proto),
        linked_wake_id: r.linked_wake_id,
        coalesced_into_run_id: r.coalesced_into_run_id,
        failure_reason: r.failure_reason,
        completed_at_ms: r.completed_at.map(Timestamp::millis),
        created_at_ms: r.created_at.millis(),
        updated_at_ms: r.updated_at.millis(),
    }
}

pub(super) fn trigger_to_proto(view: &Value) -> Answer<pb::RoutineTrigger> {
    let t = RoutineTrigger::deserialize(view).map_err(|e| unreadable("routine trigger", e))?;
    Ok(pb::RoutineTrigger {
        id: t.id,
        routine_id: t.routine_id,
        kind: t.kind.to_proto(),
        label: t.label,
        enabled: t.enabled,
        cron_expression: t.cron_expression,
        timezone: t.timezone,
        next_run_at_ms: t.next_run_at.map(Timestamp::millis),
        last_fired_at_ms: t.last_fired_at.map(Timestamp::millis),
        last_result: t.last_result,
        public_id: t.public_id,
        signing_mode: t.signing_mode.map(|m| m.to_proto()),
        replay_window_sec: t.replay_window_sec,
        // The view drops the secret and says only whether there is one.
        has_secret: view["hasSecret"].as_bool().unwrap_or(false),
        created_at_ms: t.created_at.millis(),
        updated_at_ms: t.updated_at.millis(),
    })
}

fn routine_to_proto(view: &Value) -> Answer<pb::Routine> {
    let r = Routine::deserialize(view).map_err(|e| unreadable("routine", e))?;
    let extras = RoutineExtras::deserialize(view).map_err(|e| unreadable("routine", e))?;
    let triggers = extras
        .triggers
        .iter()
        .map(trigger_to_proto)
        .collect::<Answer<Vec<_>>>()?;
    let runs = if extras.recent_runs.is_empty() {
        extras.last_run.into_iter().collect()
    } else {
        extras.recent_runs
    };
    Ok(pb::Routine {
        id: r.id,
        company_id: r.company_id,
        title: r.title,
        description: r.description,
        assignee_agent_id: r.assignee_agent_id,
        priority: r.priority.to_proto(),
        status: r.status.to_proto(),
        concurrency_policy: r.concurrency_policy.to_proto(),
        catch_up_policy: r.catch_up_policy.to_proto(),
        variables_json: r.variables.to_string(),
        project_id: r.project_id,
        goal_id: r.goal_id,
        parent_issue_id: r.parent_issue_id,
        action: r.action.to_proto(),
        failure_alert_after: r.failure_alert_after,
        consecutive_failures: r.consecutive_failures,
        last_triggered_at_ms: r.last_triggered_at.map(Timestamp::millis),
        created_by_agent_id: r.created_by_agent_id,
        created_by_user_id: r.created_by_user_id,
        created_at_ms: r.created_at.millis(),
        updated_at_ms: r.updated_at.millis(),
        triggers,
        active_issue_id: extras.active_issue.map(|i| i.id),
        recent_runs: runs.into_iter().map(routine_run_to_proto).collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Proto → service layer, with `rest/routines.rs`'s defaults and checks
// ---------------------------------------------------------------------------------------------

/// Variable definitions: a JSON array, as REST requires.
fn variables(text: &str) -> Answer<Value> {
    let v = parse_json("variables_json", text)?;
    if v.is_array() {
        Ok(v)
    } else {
        Err(ApiError::bad_request(
            "variables_json must be an array of variable definitions",
        ))
    }
}

/// A run's payload or variables: a JSON object, or none when empty.
fn object_or_null(field: &str, text: &str) -> Answer<Value> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    match parse_json(field, text)? {
        v @ (Value::Object(_) | Value::Null) => Ok(v),
        _ => Err(ApiError::bad_request(format!(
            "{field} must be a JSON object"
        ))),
    }
}

fn new_routine(r: pb::CreateRoutineRequest) -> Answer<(String, RoutineFields)> {
    let fields = RoutineFields {
        title: r.title,
        description: non_empty(r.description),
        assignee_agent_id: non_empty(r.assignee_agent_id),
        priority: optional_enum("priority", r.priority)?.unwrap_or(Priority::Medium),
        status: optional_enum("status", r.status)?.unwrap_or(RoutineStatus::Active),
        concurrency_policy: optional_enum("concurrency_policy", r.concurrency_policy)?
            .unwrap_or(ConcurrencyPolicy::CoalesceIfActive),
        catch_up_policy: optional_enum("catch_up_policy", r.catch_up_policy)?
            .unwrap_or(CatchUpPolicy::SkipMissed),
        variables: if r.variables_json.trim().is_empty() {
            Value::Array(Vec::new())
        } else {
            variables(&r.variables_json)?
        },
        project_id: non_empty(r.project_id),
        goal_id: non_empty(r.goal_id),
        parent_issue_id: non_empty(r.parent_issue_id),
        action: optional_enum("action", r.action)?.unwrap_or(RoutineAction::Issue),
        failure_alert_after: r.failure_alert_after.unwrap_or(3),
    };
    Ok((r.company_id, fields))
}

fn routine_patch(r: pb::UpdateRoutineRequest) -> Answer<(String, RoutinePatch)> {
    let patch = RoutinePatch {
        title: r.title,
        description: clearable(r.description),
        assignee_agent_id: clearable(r.assignee_agent_id),
        priority: optional_enum("priority", r.priority)?,
        status: optional_enum("status", r.status)?,
        concurrency_policy: optional_enum("concurrency_policy", r.concurrency_policy)?,
        catch_up_policy: optional_enum("catch_up_policy", r.catch_up_policy)?,
        variables: r.variables_json.as_deref().map(variables).transpose()?,
        action: optional_enum("action", r.action)?,
        failure_alert_after: r.failure_alert_after,
    };
    Ok((r.routine_id, patch))
}

fn run_request(r: pb::RunRoutineRequest) -> Answer<RunRequest> {
    Ok(RunRequest {
        routine_id: r.routine_id,
        trigger_id: non_empty(r.trigger_id),
        source: optional_enum("source", r.source)?.unwrap_or(RunSource::Manual),
        payload: object_or_null("payload_json", &r.payload_json)?,
        variables: object_or_null("variables_json", &r.variables_json)?,
        assignee_agent_id: non_empty(r.assignee_agent_id),
        idempotency_key: non_empty(r.idempotency_key),
    })
}

// ---------------------------------------------------------------------------------------------
// The calls (handlers take the service layer and the caller by value: `ControlService::serve`)
// ---------------------------------------------------------------------------------------------

pub(super) async fn list_routines(
    api: Api,
    caller: Caller,
    r: pb::ListRoutinesRequest,
) -> Answer<pb::ListRoutinesResponse> {
    let views = api.list_routines(&caller, &r.company_id).await?;
    Ok(pb::ListRoutinesResponse {
        routines: views.iter().map(routine_to_proto).collect::<Answer<_>>()?,
    })
}

pub(super) async fn get_routine(
    api: Api,
    caller: Caller,
    r: pb::GetRoutineRequest,
) -> Answer<pb::Routine> {
    routine_to_proto(&api.get_routine(&caller, &r.routine_id).await?)
}

pub(super) async fn create_routine(
    api: Api,
    caller: Caller,
    r: pb::CreateRoutineRequest,
) -> Answer<pb::Routine> {
    let (company_id, fields) = new_routine(r)?;
    routine_to_proto(&api.create_routine(&caller, &company_id, fields).await?)
}

pub(super) async fn update_routine(
    api: Api,
    caller: Caller,
    r: pb::UpdateRoutineRequest,
) -> Answer<pb::Routine> {
    let (id, patch) = routine_patch(r)?;
    routine_to_proto(&api.update_routine(&caller, &id, patch).await?)
}

pub(super) async fn run_routine(
    api: Api,
    caller: Caller,
    r: pb::RunRoutineRequest,
) -> Answer<pb::RoutineRun> {
    let request = run_request(r)?;
    run_to_proto(&api.run_routine(&caller, request).await?)
}

pub(super) async fn list_routine_runs(
    api: Api,
    caller: Caller,
    r: pb::ListRoutineRunsRequest,
) -> Answer<pb::ListRoutineRunsResponse> {
    // 0 leaves the page size to the service layer (`api/routines.rs`: 50, at most 200).
    let limit = (r.limit != 0).then(|| usize::try_from(r.limit).unwrap_or(usize::MAX));
    let views = api.routine_runs(&caller, &r.routine_id, limit).await?;
    Ok(pb::ListRoutineRunsResponse {
        runs: views.iter().map(run_to_proto).collect::<Answer<_>>()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(error: ApiError) -> tonic::Code {
        tonic::Status::from(error).code()
    }

    #[test]
    fn a_new_routine_takes_rests_defaults() {
        let (company, fields) = new_routine(pb::CreateRoutineRequest {
            company_id: "c".into(),
            title: "t".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(company, "c");
        assert_eq!(fields.priority, Priority::Medium);
        assert_eq!(fields.status, RoutineStatus::Active);
        assert_eq!(
            fields.concurrency_policy,
            ConcurrencyPolicy::CoalesceIfActive
        );
        assert_eq!(fields.catch_up_policy, CatchUpPolicy::SkipMissed);
        assert_eq!(fields.action, RoutineAction::Issue);
        assert_eq!(fields.failure_alert_after, 3);
        assert_eq!(fields.variables, serde_json::json!([]));
    }

    #[test]
    fn variables_must_be_an_array_and_a_run_payload_an_object() {
        let error = new_routine(pb::CreateRoutineRequest {
            variables_json: "{}".into(),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(error.to_string().contains("variables_json"), "{error}");
        assert_eq!(code(error), tonic::Code::InvalidArgument);
        let run = run_request(pb::RunRoutineRequest {
            routine_id: "r".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!((run.source, run.payload), (RunSource::Manual, Value::Null));
        let error = run_request(pb::RunRoutineRequest {
            payload_json: "[1]".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(code(error), tonic::Code::InvalidArgument);
    }

    #[test]
    fn an_update_pauses_and_clears_with_an_empty_string() {
        let (id, patch) = routine_patch(pb::UpdateRoutineRequest {
            routine_id: "r".into(),
            status: Some(RoutineStatus::Paused.to_proto()),
            assignee_agent_id: Some(String::new()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(id, "r");
        assert_eq!(patch.status, Some(RoutineStatus::Paused));
        assert_eq!(patch.assignee_agent_id, Some(None));
        assert_eq!(patch.title, None);
    }
}
