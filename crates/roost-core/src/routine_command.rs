//! The routine commands (one `Command::Routine` variant carries them), their outcomes, their
//! bounds ([`RoutineCommand::check`]) and what a retry's fingerprint leaves out.

use serde::{Deserialize, Serialize};

use crate::entity::Priority;
use crate::error::DomainError;
use crate::routine::*;
use crate::time::Timestamp;

/// A routine's fields at creation (Paperclip's `createRoutineSchema`, defaults applied by the
/// server).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineFields {
    pub title: String,
    pub description: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub priority: Priority,
    pub status: RoutineStatus,
    pub concurrency_policy: ConcurrencyPolicy,
    pub catch_up_policy: CatchUpPolicy,
    pub variables: serde_json::Value,
    pub project_id: Option<String>,
    pub goal_id: Option<String>,
    pub parent_issue_id: Option<String>,
    pub action: RoutineAction,
    pub failure_alert_after: u32,
}

/// `None` leaves a field; `Some(None)` clears an optional one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutinePatch {
    pub title: Option<String>,
    pub description: Option<Option<String>>,
    pub assignee_agent_id: Option<Option<String>>,
    pub priority: Option<Priority>,
    pub status: Option<RoutineStatus>,
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    pub catch_up_policy: Option<CatchUpPolicy>,
    pub variables: Option<serde_json::Value>,
    pub action: Option<RoutineAction>,
    pub failure_alert_after: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewTrigger {
    pub kind: TriggerKind,
    pub label: Option<String>,
    pub enabled: bool,
    pub cron_expression: Option<String>,
    pub timezone: Option<String>,
    pub public_id: Option<String>,
    pub signing_mode: Option<SigningMode>,
    pub replay_window_sec: Option<u32>,
    pub secret: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerPatch {
    pub label: Option<Option<String>>,
    pub enabled: Option<bool>,
    pub cron_expression: Option<String>,
    pub timezone: Option<String>,
    pub signing_mode: Option<SigningMode>,
    pub replay_window_sec: Option<u32>,
}

/// A manual, API or webhook run (`POST /api/routines/{id}/run`, the public webhook).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRequest {
    pub routine_id: String,
    pub trigger_id: Option<String>,
    pub source: RunSource,
    pub payload: serde_json::Value,
    pub variables: serde_json::Value,
    pub assignee_agent_id: Option<String>,
    pub idempotency_key: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RoutineCommand {
    Create {
        id: String,
        company_id: String,
        fields: RoutineFields,
    },
    Update {
        routine_id: String,
        patch: RoutinePatch,
    },
    CreateTrigger {
        id: String,
        routine_id: String,
        trigger: NewTrigger,
    },
    UpdateTrigger {
        trigger_id: String,
        patch: TriggerPatch,
    },
    DeleteTrigger {
        trigger_id: String,
    },
    /// A new secret for a webhook trigger (made by the server, shown once).
    RotateSecret {
        trigger_id: String,
        secret: String,
    },
    /// The leader: a schedule trigger's instant `scheduled_for` is due. Refused unless it is
    /// still the trigger's `next_run_at` and not in the future, so it applies once whoever
    /// proposes it, however often.
    Fire {
        trigger_id: String,
        scheduled_for: Timestamp,
        run_id: String,
        issue_id: String,
        /// The routine's stagger the leader waited past `scheduled_for` (`stagger_ms`): the
        /// next instant is late only if it is due with the same delay (0 in older entries).
        #[serde(default)]
        stagger_ms: u64,
    },
    Run {
        request: RunRequest,
        run_id: String,
        issue_id: String,
    },
    /// The leader: a routine failed `failureAlertAfter` times in a row; open its alert issue.
    Alert {
        routine_id: String,
        issue_id: String,
    },
}

/// What a routine command produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum RoutineOutcome {
    Routine { routine: Routine },
    Trigger { trigger: RoutineTrigger },
    TriggerDeleted { trigger_id: String },
    Run { run: RoutineRun },
}

impl RoutineOutcome {
    pub fn company_id(&self) -> Option<&str> {
        match self {
            RoutineOutcome::Routine { routine } => Some(&routine.company_id),
            RoutineOutcome::Trigger { trigger } => Some(&trigger.company_id),
            RoutineOutcome::TriggerDeleted { .. } => None,
            RoutineOutcome::Run { run } => Some(&run.company_id),
        }
    }
}

impl RoutineCommand {
    pub fn name(&self) -> &'static str {
        match self {
            RoutineCommand::Create { .. } => "routine.created",
            RoutineCommand::Update { .. } => "routine.updated",
            RoutineCommand::CreateTrigger { .. } => "routine.trigger_created",
            RoutineCommand::UpdateTrigger { .. } => "routine.trigger_updated",
            RoutineCommand::DeleteTrigger { .. } => "routine.trigger_deleted",
            RoutineCommand::RotateSecret { .. } => "routine.trigger_secret_rotated",
            RoutineCommand::Fire { .. } => "routine.fired",
            RoutineCommand::Run { .. } => "routine.run",
            RoutineCommand::Alert { .. } => "routine.alerted",
        }
    }

    /// Clears what the proposing node minted (ids, secrets), for a retry's fingerprint.
    pub fn clear_generated(&mut self) {
        match self {
            RoutineCommand::Create { id, .. } => id.clear(),
            RoutineCommand::CreateTrigger { id, trigger, .. } => {
                id.clear();
                trigger.public_id = None;
                trigger.secret = None;
            }
            RoutineCommand::RotateSecret { secret, .. } => secret.clear(),
            RoutineCommand::Fire {
                run_id, issue_id, ..
            }
            | RoutineCommand::Run {
                run_id, issue_id, ..
            } => {
                run_id.clear();
                issue_id.clear();
            }
            RoutineCommand::Alert { issue_id, .. } => issue_id.clear(),
            RoutineCommand::Update { .. }
            | RoutineCommand::UpdateTrigger { .. }
            | RoutineCommand::DeleteTrigger { .. } => {}
        }
    }

    /// Bounds on every field (`limits::check`): pure.
    pub fn check(&self) -> Result<(), DomainError> {
        match self {
            RoutineCommand::Create { fields, .. } => {
                chars("title", Some(&fields.title), MAX_ROUTINE_TITLE_CHARS)?;
                chars(
                    "description",
                    fields.description.as_deref(),
                    MAX_ROUTINE_DESCRIPTION_CHARS,
                )?;
                json_bytes("variables", &fields.variables)
            }
            RoutineCommand::Update { patch, .. } => {
                chars("title", patch.title.as_deref(), MAX_ROUTINE_TITLE_CHARS)?;
                chars(
                    "description",
                    patch.description.as_ref().and_then(|d| d.as_deref()),
                    MAX_ROUTINE_DESCRIPTION_CHARS,
                )?;
                if let Some(v) = &patch.variables {
                    json_bytes("variables", v)?;
                }
                Ok(())
            }
            RoutineCommand::CreateTrigger { trigger, .. } => {
                chars("label", trigger.label.as_deref(), MAX_LABEL_CHARS)?;
                chars(
                    "cronExpression",
                    trigger.cron_expression.as_deref(),
                    MAX_SCHEDULE_CHARS,
                )?;
                chars("timezone", trigger.timezone.as_deref(), MAX_TIMEZONE_CHARS)?;
                chars("secret", trigger.secret.as_deref(), MAX_SECRET_CHARS)?;
                chars("publicId", trigger.public_id.as_deref(), 64)?;
                replay_window(trigger.replay_window_sec)
            }
            RoutineCommand::UpdateTrigger { patch, .. } => {
                chars(
                    "label",
                    patch.label.as_ref().and_then(|l| l.as_deref()),
                    MAX_LABEL_CHARS,
                )?;
                chars(
                    "cronExpression",
                    patch.cron_expression.as_deref(),
                    MAX_SCHEDULE_CHARS,
                )?;
                chars("timezone", patch.timezone.as_deref(), MAX_TIMEZONE_CHARS)?;
                replay_window(patch.replay_window_sec)
            }
            RoutineCommand::RotateSecret { secret, .. } => {
                chars("secret", Some(secret), MAX_SECRET_CHARS)
            }
            RoutineCommand::Run { request, .. } => {
                json_bytes("payload", &request.payload)?;
                json_bytes("variables", &request.variables)?;
                chars("idempotencyKey", request.idempotency_key.as_deref(), 255)
            }
            RoutineCommand::DeleteTrigger { .. }
            | RoutineCommand::Fire { .. }
            | RoutineCommand::Alert { .. } => Ok(()),
        }
    }
}

fn replay_window(sec: Option<u32>) -> Result<(), DomainError> {
    match sec {
        Some(s) if !(30..=86_400).contains(&s) => Err(DomainError::invalid(
            "replayWindowSec",
            "must be between 30 and 86400 seconds",
        )),
        _ => Ok(()),
    }
}
