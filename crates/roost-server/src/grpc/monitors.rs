//! The issue monitor calls of `roost.v1.Control` (`monitors.proto`): scheduling and clearing go
//! through the issue update REST's `executionPolicy.monitor` goes through, a check now through
//! the [`Api`] function `POST /api/issues/{id}/monitor/check-now` calls, so authorization,
//! validation and errors are the same.

use roost_core::command::IssuePatch;
use roost_core::monitor::{MonitorKind, MonitorPolicy, MonitorState, ScheduledBy};
use roost_core::Timestamp;
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

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

fn policy_from_proto(p: pb::IssueMonitorPolicy) -> Answer<MonitorPolicy> {
    if p.next_check_at_ms <= 0 {
        return Err(ApiError::bad_request(
            "monitor.next_check_at_ms is required: when to wake the assignee, in milliseconds \
             since the Unix epoch",
        ));
    }
    let text = |t: Option<String>| t.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    let policy = MonitorPolicy {
        next_check_at: Timestamp(p.next_check_at_ms),
        notes: text(p.notes),
        // Apply sets it from the caller.
        scheduled_by: ScheduledBy::Assignee,
        kind: p.external_service.then_some(MonitorKind::ExternalService),
        service_name: text(p.service_name),
        external_ref: text(p.external_ref).map(|_| roost_core::monitor::REDACTED.to_string()),
        timeout_at: p.timeout_at_ms.map(Timestamp),
        max_attempts: p.max_attempts,
        recovery_policy: optional_enum("monitor.recovery_policy", Some(p.recovery_policy))?,
    };
    policy.check()?;
    Ok(policy)
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
