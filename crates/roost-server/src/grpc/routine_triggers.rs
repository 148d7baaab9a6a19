//! The routine trigger calls of `roost.v1.Control`: each calls the [`Api`] function
//! its REST twin calls (`rest/routines.rs`: `/api/routines/{id}/triggers`,
//! `/api/routine-triggers/{id}`). The service layer answers triggers as REST's JSON views
//! (without secrets); a created or rotated webhook's secret comes beside the view, this once.

use roost_core::routine::TriggerKind;
use roost_core::routine_command::{NewTrigger, TriggerPatch};
use roost_proto::v1 as pb;
use serde::Deserialize;
use serde_json::Value;

use super::convert::{clearable, enum_value, optional_enum};
use super::routines::{trigger_to_proto, unreadable};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

/// `{"trigger": view, "secretMaterial": {"webhookUrl", "webhookSecret"} | null}`
/// (`api/routines.rs`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WithSecret {
    trigger: Value,
    secret_material: Option<SecretMaterial>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecretMaterial {
    webhook_url: Option<String>,
    webhook_secret: Option<String>,
}

fn with_secret_to_proto(view: &Value) -> Answer<pb::RoutineTriggerSecret> {
    let w = WithSecret::deserialize(view).map_err(|e| unreadable("routine trigger", e))?;
    let (webhook_url, webhook_secret) = w
        .secret_material
        .map(|m| (m.webhook_url, m.webhook_secret))
        .unwrap_or_default();
    Ok(pb::RoutineTriggerSecret {
        trigger: Some(trigger_to_proto(&w.trigger)?),
        webhook_url,
        webhook_secret,
    })
}

fn new_trigger(r: pb::CreateRoutineTriggerRequest) -> Answer<(String, NewTrigger)> {
    let trigger = NewTrigger {
        kind: enum_value::<TriggerKind>("kind", r.kind)?,
        label: r.label,
        enabled: r.enabled.unwrap_or(true),
        cron_expression: r.cron_expression,
        timezone: r.timezone,
        public_id: None,
        signing_mode: optional_enum("signing_mode", r.signing_mode)?,
        replay_window_sec: r.replay_window_sec,
        secret: None,
    };
    Ok((r.routine_id, trigger))
}

fn trigger_patch(r: pb::UpdateRoutineTriggerRequest) -> Answer<(String, TriggerPatch)> {
    let patch = TriggerPatch {
        label: clearable(r.label),
        enabled: r.enabled,
        cron_expression: r.cron_expression,
        timezone: r.timezone,
        signing_mode: optional_enum("signing_mode", r.signing_mode)?,
        replay_window_sec: r.replay_window_sec,
    };
    Ok((r.trigger_id, patch))
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListRoutineTriggersRequest,
) -> Answer<pb::ListRoutineTriggersResponse> {
    let views = api.routine_triggers(&caller, &r.routine_id).await?;
    Ok(pb::ListRoutineTriggersResponse {
        triggers: views.iter().map(trigger_to_proto).collect::<Answer<_>>()?,
    })
}

pub(super) async fn create(
    api: Api,
    caller: Caller,
    r: pb::CreateRoutineTriggerRequest,
) -> Answer<pb::RoutineTriggerSecret> {
    let (routine_id, trigger) = new_trigger(r)?;
    with_secret_to_proto(&api.create_trigger(&caller, &routine_id, trigger).await?)
}

pub(super) async fn update(
    api: Api,
    caller: Caller,
    r: pb::UpdateRoutineTriggerRequest,
) -> Answer<pb::RoutineTrigger> {
    let (id, patch) = trigger_patch(r)?;
    trigger_to_proto(&api.update_trigger(&caller, &id, patch).await?)
}

pub(super) async fn delete(
    api: Api,
    caller: Caller,
    r: pb::DeleteRoutineTriggerRequest,
) -> Answer<pb::DeleteRoutineTriggerResponse> {
    api.delete_trigger(&caller, &r.trigger_id).await?;
    Ok(pb::DeleteRoutineTriggerResponse {})
}

pub(super) async fn rotate_secret(
    api: Api,
    caller: Caller,
    r: pb::RotateRoutineTriggerSecretRequest,
) -> Answer<pb::RoutineTriggerSecret> {
    with_secret_to_proto(&api.rotate_trigger_secret(&caller, &r.trigger_id).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_proto::ProtoEnum;

    #[test]
    fn a_new_trigger_is_enabled_unless_asked_and_its_kind_is_checked() {
        let (routine, trigger) = new_trigger(pb::CreateRoutineTriggerRequest {
            routine_id: "r".into(),
            kind: TriggerKind::Webhook.to_proto(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            (routine.as_str(), trigger.kind),
            ("r", TriggerKind::Webhook)
        );
        assert!(trigger.enabled);
        assert_eq!(trigger.signing_mode, None);
        let error = new_trigger(pb::CreateRoutineTriggerRequest {
            kind: 99,
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(
            tonic::Status::from(error).code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn a_view_that_does_not_read_back_is_an_internal_error() {
        let view = serde_json::json!({
            "trigger": {"id": "t"},
            "secretMaterial": null,
        });
        let error = with_secret_to_proto(&view).unwrap_err();
        assert_eq!(tonic::Status::from(error).code(), tonic::Code::Internal);
    }
}
