//! Issue monitors (Paperclip's `executionPolicy.monitor`): a durable "look again at" time on an
//! issue, so an agent waiting on something outside (CI, a review service, a deploy) can end its
//! run and be woken to check, instead of narrating a watcher that does not exist. An agent or
//! the board schedules one with the issue's `executionPolicy` on a create or `PATCH`; the
//! leader's sweep proposes a `TriggerIssueMonitor` when it is due, and apply wakes the
//! assignee with `issue_monitor_due` (or, past its timeout or attempts, clears it and recovers
//! as its `recoveryPolicy` says: `rules/monitor.rs`). A monitor fires once; the agent schedules
//! the next look.
//!
//! The issue shows it as Paperclip does: `monitorNextCheckAt`, `monitorLastTriggeredAt`,
//! `monitorAttemptCount`, `monitorNotes`, `monitorScheduledBy` at the top level,
//! `executionState.monitor` with its status and why it was cleared, and the policy under
//! `executionPolicy.monitor` while it is scheduled.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};

use crate::entity::string_enum;
use crate::error::DomainError;
use crate::time::Timestamp;

pub use crate::rules::monitor::monitors_due;

/// Paperclip's text for an external reference, which it never shows back (it may name a
/// private URL or a token-bearing link).
pub const REDACTED: &str = "[redacted]";
/// The bounds of Paperclip's monitor schema.
pub const MAX_NOTES_CHARS: usize = 500;
pub const MAX_SERVICE_NAME_CHARS: usize = 120;
pub const MAX_EXTERNAL_REF_CHARS: usize = 500;
pub const MAX_ATTEMPTS: u32 = 100;

string_enum!(
    /// Who scheduled a monitor: its assignee (an agent) or the board (a person).
    ScheduledBy {
        Assignee => "assignee",
        Board => "board",
    }
);

string_enum!(
    /// What a monitor watches; Paperclip knows one kind.
    MonitorKind {
        ExternalService => "external_service",
    }
);

string_enum!(
    /// What happens when a monitor runs out of time or attempts: the assignee is woken
    /// (`issue_monitor_recovery`, the default), a recovery sub-issue is opened for it, or a
    /// comment on the issue asks the board to look.
    MonitorRecovery {
        WakeOwner => "wake_owner",
        CreateRecoveryIssue => "create_recovery_issue",
        EscalateToBoard => "escalate_to_board",
    }
);

string_enum!(
    MonitorStatus {
        Scheduled => "scheduled",
        Triggered => "triggered",
        Cleared => "cleared",
    }
);

string_enum!(
    /// Why a monitor stopped: cleared by a person or its agent (`manual`), by the issue
    /// closing or leaving an agent's work (`done`, `cancelled`, `invalid_status`,
    /// `invalid_assignee`), by its bounds (`timeout_exceeded`, `max_attempts_exhausted`), or
    /// because its wake could not be made (`dispatch_skipped`: the agent paused, say).
    ClearReason {
        Manual => "manual",
        Triggered => "triggered",
        Done => "done",
        Cancelled => "cancelled",
        InvalidStatus => "invalid_status",
        InvalidAssignee => "invalid_assignee",
        DispatchSkipped => "dispatch_skipped",
        TimeoutExceeded => "timeout_exceeded",
        MaxAttemptsExhausted => "max_attempts_exhausted",
    }
);

/// A monitor as scheduled (Paperclip's `issueExecutionMonitorPolicySchema`, normalized: texts
/// trimmed, an external reference redacted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MonitorPolicy {
    pub next_check_at: Timestamp,
    pub notes: Option<String>,
    /// Set in apply from who scheduled it (a person: `board`; an agent: `assignee`), whatever
    /// the request said, as Paperclip does.
    pub scheduled_by: ScheduledBy,
    pub kind: Option<MonitorKind>,
    pub service_name: Option<String>,
    pub external_ref: Option<String>,
    pub timeout_at: Option<Timestamp>,
    pub max_attempts: Option<u32>,
    pub recovery_policy: Option<MonitorRecovery>,
}

impl MonitorPolicy {
    /// Reads `executionPolicy.monitor` as Paperclip's schema reads it: `nextCheckAt` required,
    /// the rest optional, unknown keys ignored.
    pub fn parse(value: &Value) -> Result<MonitorPolicy, DomainError> {
        let obj = value
            .as_object()
            .ok_or_else(|| invalid("", "must be an object"))?;
        let next_check_at = time(obj, "nextCheckAt")?
            .ok_or_else(|| invalid("nextCheckAt", "is required: an RFC 3339 time"))?;
        let max_attempts = match obj.get("maxAttempts") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| (1..=u64::from(MAX_ATTEMPTS)).contains(n))
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| invalid("maxAttempts", format!("must be 1-{MAX_ATTEMPTS}")))?,
            ),
        };
        Ok(MonitorPolicy {
            next_check_at,
            notes: text(obj, "notes", MAX_NOTES_CHARS)?,
            scheduled_by: enumerated(obj, "scheduledBy")?.unwrap_or(ScheduledBy::Assignee),
            kind: enumerated(obj, "kind")?,
            service_name: text(obj, "serviceName", MAX_SERVICE_NAME_CHARS)?,
            external_ref: text(obj, "externalRef", MAX_EXTERNAL_REF_CHARS)?
                .map(|_| REDACTED.to_string()),
            timeout_at: time(obj, "timeoutAt")?,
            max_attempts,
            recovery_policy: enumerated(obj, "recoveryPolicy")?,
        })
    }

    /// The bounds of Paperclip's schema, for a policy built elsewhere than [`Self::parse`]
    /// (gRPC, a forged entry): `limits::check` holds every command to them.
    pub fn check(&self) -> Result<(), DomainError> {
        for (field, text, max) in [
            ("notes", &self.notes, MAX_NOTES_CHARS),
            ("serviceName", &self.service_name, MAX_SERVICE_NAME_CHARS),
            ("externalRef", &self.external_ref, MAX_EXTERNAL_REF_CHARS),
        ] {
            if text.as_ref().is_some_and(|t| t.chars().count() > max) {
                return Err(invalid(field, format!("must be at most {max} characters")));
            }
        }
        if self
            .max_attempts
            .is_some_and(|n| !(1..=MAX_ATTEMPTS).contains(&n))
        {
            return Err(invalid("maxAttempts", format!("must be 1-{MAX_ATTEMPTS}")));
        }
        Ok(())
    }

    /// The policy as `executionPolicy.monitor` shows it.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Why the monitor cannot run its next attempt at `now`, if it has used up its bounds.
    pub fn exhausted(&self, next_attempt: u32, now: Timestamp) -> Option<ClearReason> {
        if self.timeout_at.is_some_and(|t| now >= t) {
            return Some(ClearReason::TimeoutExceeded);
        }
        self.max_attempts
            .filter(|max| next_attempt > *max)
            .map(|_| ClearReason::MaxAttemptsExhausted)
    }
}

fn invalid(field: &str, message: impl Into<String>) -> DomainError {
    let path = if field.is_empty() {
        "executionPolicy.monitor".to_string()
    } else {
        format!("executionPolicy.monitor.{field}")
    };
    DomainError::invalid(path, message)
}

fn time(obj: &Map<String, Value>, field: &str) -> Result<Option<Timestamp>, DomainError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Timestamp::parse_rfc3339(s)
            .map(Some)
            .ok_or_else(|| invalid(field, "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z")),
        Some(_) => Err(invalid(
            field,
            "must be an RFC 3339 time, e.g. 2026-01-02T15:04:05Z",
        )),
    }
}

/// A trimmed text of at most `max` characters; empty reads as none.
fn text(obj: &Map<String, Value>, field: &str, max: usize) -> Result<Option<String>, DomainError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            if s.chars().count() > max {
                return Err(invalid(field, format!("must be at most {max} characters")));
            }
            Ok((!s.is_empty()).then(|| s.to_string()))
        }
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

fn enumerated<T: std::str::FromStr<Err = String>>(
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Option<T>, DomainError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|e| invalid(field, e)),
        Some(_) => Err(invalid(field, "must be a string")),
    }
}

/// A monitor's state (Paperclip's `executionState.monitor`): the last policy scheduled, with
/// where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MonitorState {
    pub status: MonitorStatus,
    /// Set while `scheduled`.
    pub next_check_at: Option<Timestamp>,
    pub last_triggered_at: Option<Timestamp>,
    pub attempt_count: u32,
    pub notes: Option<String>,
    pub scheduled_by: Option<ScheduledBy>,
    pub kind: Option<MonitorKind>,
    pub service_name: Option<String>,
    pub external_ref: Option<String>,
    pub timeout_at: Option<Timestamp>,
    pub max_attempts: Option<u32>,
    pub recovery_policy: Option<MonitorRecovery>,
    pub cleared_at: Option<Timestamp>,
    pub clear_reason: Option<ClearReason>,
}

impl MonitorState {
    /// `policy` scheduled, keeping the attempts and last trigger of `before`.
    pub fn scheduled(before: Option<&MonitorState>, policy: &MonitorPolicy) -> MonitorState {
        MonitorState {
            status: MonitorStatus::Scheduled,
            next_check_at: Some(policy.next_check_at),
            last_triggered_at: before.and_then(|b| b.last_triggered_at),
            attempt_count: before.map_or(0, |b| b.attempt_count),
            notes: policy.notes.clone(),
            scheduled_by: Some(policy.scheduled_by),
            kind: policy.kind,
            service_name: policy.service_name.clone(),
            external_ref: policy.external_ref.clone(),
            timeout_at: policy.timeout_at,
            max_attempts: policy.max_attempts,
            recovery_policy: policy.recovery_policy,
            cleared_at: None,
            clear_reason: None,
        }
    }

    /// The policy it was scheduled with, while it is scheduled.
    pub fn policy(&self) -> Option<MonitorPolicy> {
        Some(MonitorPolicy {
            next_check_at: self.next_check_at.filter(|_| self.is_scheduled())?,
            notes: self.notes.clone(),
            scheduled_by: self.scheduled_by.unwrap_or(ScheduledBy::Assignee),
            kind: self.kind,
            service_name: self.service_name.clone(),
            external_ref: self.external_ref.clone(),
            timeout_at: self.timeout_at,
            max_attempts: self.max_attempts,
            recovery_policy: self.recovery_policy,
        })
    }

    pub fn is_scheduled(&self) -> bool {
        self.status == MonitorStatus::Scheduled
    }

    /// Fired at `now`: one attempt more, nothing scheduled.
    pub fn triggered(&self, now: Timestamp) -> MonitorState {
        MonitorState {
            status: MonitorStatus::Triggered,
            next_check_at: None,
            last_triggered_at: Some(now),
            attempt_count: self.attempt_count.saturating_add(1),
            ..self.clone()
        }
    }

    pub fn cleared(&self, reason: ClearReason, now: Timestamp) -> MonitorState {
        MonitorState {
            status: MonitorStatus::Cleared,
            next_check_at: None,
            cleared_at: Some(now),
            clear_reason: Some(reason),
            ..self.clone()
        }
    }
}

/// An issue's monitor as its row and Paperclip's issue show it: flattened into the issue as the
/// top-level `monitor*` fields and `executionState` (`monitor` inside it; the stage fields of
/// Paperclip's execution state, which Roost does not run, at their idle values). Read back
/// from `executionState.monitor` alone; the top-level fields are derived from it. Boxed: most
/// issues never have one, and every open issue is in memory (`tests/heap_per_issue.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueMonitor(Option<Box<MonitorState>>);

impl IssueMonitor {
    pub fn new(state: Option<MonitorState>) -> Self {
        IssueMonitor(state.map(Box::new))
    }

    pub fn state(&self) -> Option<&MonitorState> {
        self.0.as_deref()
    }

    pub fn is_scheduled(&self) -> bool {
        self.state().is_some_and(MonitorState::is_scheduled)
    }

    /// When the sweep fires it, if scheduled: at its next check, or at its timeout if that comes
    /// first (then it is cleared and recovers instead: `rules/monitor.rs`).
    pub fn due_at(&self) -> Option<Timestamp> {
        let m = self.state().filter(|m| m.is_scheduled())?;
        let next = m.next_check_at?;
        Some(m.timeout_at.map_or(next, |t| t.min(next)))
    }
}

impl Serialize for IssueMonitor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(m) = self.state() else {
            return s.serialize_map(Some(0))?.end();
        };
        let mut map = s.serialize_map(Some(6))?;
        map.serialize_entry("monitorNextCheckAt", &m.next_check_at)?;
        map.serialize_entry("monitorLastTriggeredAt", &m.last_triggered_at)?;
        map.serialize_entry("monitorAttemptCount", &m.attempt_count)?;
        map.serialize_entry("monitorNotes", &m.notes)?;
        map.serialize_entry("monitorScheduledBy", &m.scheduled_by)?;
        let state = json!({
            "status": "idle",
            "currentStageId": null,
            "currentStageIndex": null,
            "currentStageType": null,
            "currentParticipant": null,
            "returnAssignee": null,
            "reviewRequest": null,
            "completedStageIds": [],
            "lastDecisionId": null,
            "lastDecisionOutcome": null,
            "monitor": m,
        });
        map.serialize_entry("executionState", &state)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for IssueMonitor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The keys the serialized form writes, named so that an issue's flattened map of
        /// Paperclip fields does not take them up as fields of its own.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored {
            #[serde(default)]
            execution_state: Option<StoredState>,
            #[serde(default, rename = "monitorNextCheckAt")]
            _next: Option<serde::de::IgnoredAny>,
            #[serde(default, rename = "monitorLastTriggeredAt")]
            _last: Option<serde::de::IgnoredAny>,
            #[serde(default, rename = "monitorAttemptCount")]
            _attempts: Option<serde::de::IgnoredAny>,
            #[serde(default, rename = "monitorNotes")]
            _notes: Option<serde::de::IgnoredAny>,
            #[serde(default, rename = "monitorScheduledBy")]
            _by: Option<serde::de::IgnoredAny>,
        }
        #[derive(Deserialize)]
        struct StoredState {
            #[serde(default)]
            monitor: Option<MonitorState>,
        }
        let stored = Stored::deserialize(d)?;
        Ok(IssueMonitor::new(
            stored.execution_state.and_then(|s| s.monitor),
        ))
    }
}

/// What a create or update sent about the monitor: the `monitor` of the `executionPolicy` it
/// carried (`Some(None)`: a policy without one, or `null`, which clears a scheduled monitor),
/// taken out of the policy kept with the issue's Paperclip fields. `None` when no
/// `executionPolicy` was sent.
pub fn take_from_policy(
    kept: &mut Option<BTreeMap<String, Value>>,
) -> Result<Option<Option<MonitorPolicy>>, DomainError> {
    let Some(policy) = kept.as_mut().and_then(|k| k.get_mut("executionPolicy")) else {
        return Ok(None);
    };
    let monitor = match policy {
        Value::Object(obj) => obj.remove("monitor"),
        Value::Null => None,
        _ => {
            return Err(DomainError::invalid(
                "executionPolicy",
                "must be an object (or null, which clears it)",
            ))
        }
    };
    match monitor {
        None | Some(Value::Null) => Ok(Some(None)),
        Some(m) => MonitorPolicy::parse(&m).map(|p| Some(Some(p))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_reads_as_paperclips_schema_does() {
        let p = MonitorPolicy::parse(&json!({
            "nextCheckAt": "2026-01-02T03:04:05Z", "notes": "  CI run 42  ",
            "kind": "external_service", "serviceName": "GitHub Actions",
            "externalRef": "https://ci.example/run/42?token=x", "maxAttempts": 3,
            "recoveryPolicy": "escalate_to_board", "somethingNew": 1,
        }))
        .expect("a valid policy");
        assert_eq!(p.notes.as_deref(), Some("CI run 42"));
        assert_eq!(p.external_ref.as_deref(), Some(REDACTED));
        assert_eq!(p.max_attempts, Some(3));
        assert_eq!(p.recovery_policy, Some(MonitorRecovery::EscalateToBoard));
        for bad in [
            json!({}),
            json!({ "nextCheckAt": "tomorrow" }),
            json!({ "nextCheckAt": "2026-01-02T03:04:05Z", "maxAttempts": 0 }),
            json!({ "nextCheckAt": "2026-01-02T03:04:05Z", "maxAttempts": 101 }),
            json!({ "nextCheckAt": "2026-01-02T03:04:05Z", "kind": "cron" }),
            json!({ "nextCheckAt": "2026-01-02T03:04:05Z", "notes": "x".repeat(501) }),
            json!("2026-01-02T03:04:05Z"),
        ] {
            let e = MonitorPolicy::parse(&bad).expect_err("refused");
            assert!(matches!(e, DomainError::Invalid { .. }), "{bad}: {e:?}");
        }
    }

    #[test]
    fn an_issue_monitor_round_trips_through_its_paperclip_shape() {
        let policy =
            MonitorPolicy::parse(&json!({ "nextCheckAt": "2026-01-02T03:04:05Z" })).expect("valid");
        let m = IssueMonitor::new(Some(MonitorState::scheduled(None, &policy)));
        let v = serde_json::to_value(&m).expect("serializes");
        assert_eq!(v["monitorNextCheckAt"], "2026-01-02T03:04:05.000Z");
        assert_eq!(v["executionState"]["monitor"]["status"], "scheduled");
        assert_eq!(v["executionState"]["status"], "idle");
        let back: IssueMonitor = serde_json::from_value(v).expect("reads back");
        assert_eq!(back, m);
        let none = serde_json::to_value(IssueMonitor::default()).expect("serializes");
        assert_eq!(none, json!({}));
    }
}
