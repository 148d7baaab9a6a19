//! The issue monitor calls of `roost.v1.Control` (`monitors.proto`). Scheduling and clearing
//! are the issue update that REST's `executionPolicy.monitor` makes, with the policy read by
//! the same parser; a check now calls the [`Api`] function `POST /api/issues/{id}/monitor/check-now`
//! calls. Authorization, validation and errors are the same.

use roost_core::command::IssuePatch;
use roost_core::monitor::{MonitorKind, MonitorPolicy, MonitorRecovery, MonitorState, ScheduledBy};
use roost_core::Timestamp;
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;
use serde_json::json;

use super::convert::{issue_to_proto, optional_enum};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

pub(super) fn monitor_to_proto(m: MonitorState) -> pb::IssueMonitor {
    pb::IssueMonitor {
        status: m.status.to_proto(),
        next_check_at_ms: m.next_check_at.map(Timestamp::millis),
        last_triggered_at_ms: m.last_triggered_at.map(Timestamp::millis),
        attempt_count: m.attempt_count,
        notes: m.notes,
        scheduled_by: m.scheduled_by.map_or(0, ScheduledBy::to_proto),
        external_service: m.kind.is_some(),
        service_name: m.service_name,
        external_ref: m.external_ref,
        timeout_at_ms: m.timeout_at.map(Timestamp::millis),
        max_attempts: m.max_attempts,
        recovery_policy: m.recovery_policy.map_or(0, |r| r.to_proto()),
        cleared_at_ms: m.cleared_at.map(Timestamp::millis),
        clear_reason: m.clear_reason.map_or(0, |r| r.to_proto()),
    }
}

/// Through the parser REST's `executionPolicy.monitor` goes through (`MonitorPolicy::parse`),
/// so both read a policy with the same rules.
fn policy_from_proto(p: pb::IssueMonitorPolicy) -> Answer<MonitorPolicy> {
    // proto3's zero is "not given" (enums.proto), not 1970.
    if p.next_check_at_ms == 0 {
        return Err(ApiError::bad_request(
            "monitor.next_check_at_ms is required: when to wake the assignee, in milliseconds \
             since the Unix epoch",
        ));
    }
    let recovery: Option<MonitorRecovery> =
        optional_enum("monitor.recovery_policy", Some(p.recovery_policy))?;
    let at = |ms: i64| Timestamp(ms).to_rfc3339();
    let body = json!({
        "nextCheckAt": at(p.next_check_at_ms),
        "notes": p.notes,
        "kind": p.external_service.then_some(MonitorKind::ExternalService),
        "serviceName": p.service_name,
        "externalRef": p.external_ref,
        "timeoutAt": p.timeout_at_ms.map(at),
        "maxAttempts": p.max_attempts,
        "recoveryPolicy": recovery,
    });
    Ok(MonitorPolicy::parse(&body)?)
}

async fn set(
    api: Api,
    caller: Caller,
    issue_id: &str,
    monitor: Option<MonitorPolicy>,
) -> Answer<pb::Issue> {
    let patch = IssuePatch {
        monitor: Some(monitor),
        ..Default::default()
    };
    let (issue, _) = api.update_issue(&caller, issue_id, patch, None).await?;
    Ok(issue_to_proto(issue))
}

pub(super) async fn schedule(
    api: Api,
    caller: Caller,
    r: pb::ScheduleIssueMonitorRequest,
) -> Answer<pb::Issue> {
    let policy = r
        .monitor
        .ok_or_else(|| ApiError::bad_request("monitor is required"))?;
    set(api, caller, &r.issue_id, Some(policy_from_proto(policy)?)).await
}

pub(super) async fn clear(
    api: Api,
    caller: Caller,
    r: pb::ClearIssueMonitorRequest,
) -> Answer<pb::Issue> {
    set(api, caller, &r.issue_id, None).await
}

pub(super) async fn check(
    api: Api,
    caller: Caller,
    r: pb::CheckIssueMonitorRequest,
) -> Answer<pb::Issue> {
    let issue = api.check_issue_monitor(&caller, &r.issue_id).await?;
    Ok(issue_to_proto(issue))
}
