//! Issue monitors (`monitor.rs`): how a create or update schedules, keeps or clears one, and
//! what `TriggerIssueMonitor` does when one is due or checked now, as Paperclip's execution
//! policy and heartbeat do.
//!
//! - Scheduling or changing a monitor is for the board or the issue's assignee agent; the issue
//!   must then be an agent's (no person assigned) and `in_progress` or `in_review` (422
//!   otherwise), within the monitor's own bounds. An update that leaves the issue outside
//!   those (closed, reassigned to a person, moved to `todo`) clears its monitor, saying why.
//! - A due monitor fires once: its assignee is woken with `issue_monitor_due`, the monitor
//!   becomes `triggered` and leaves `executionPolicy`. Past its `timeoutAt`, or with its
//!   `maxAttempts` used, it is cleared instead and its `recoveryPolicy` acts: the assignee is
//!   woken with `issue_monitor_recovery` (default), a recovery sub-issue is opened for the
//!   assignee (one while it is open), or a comment on the issue asks the board to look.
//! - A monitor whose wake is skipped (its agent paused, a daily cap) is cleared
//!   (`dispatch_skipped`) when the sweep fires it; a check-now is refused instead, and the
//!   monitor stays.

use std::sync::Arc;

use serde_json::{json, Value};

use super::wake::{enqueue, Pending, WakeRequest};
use super::Ctx;
use crate::command::{ActorKind, IssuePatch, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::monitor::*;
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

const INVALID: &str = "Monitor can only be scheduled on issues assigned to an agent in \
                       in_progress or in_review";

/// After a create (`before` none) or an update applied its fields to `issue` (which still
/// carries `before`'s monitor): the monitor as `sent` (the request's `executionPolicy.monitor`,
/// `Some(None)` for a policy without one) and the issue's new status and assignee leave it.
pub(crate) fn follow_update(
    ctx: &Ctx<'_>,
    before: Option<&Issue>,
    issue: &mut Issue,
    sent: Option<&Option<MonitorPolicy>>,
) -> Result<(), DomainError> {
    let now = ctx.now();
    let current = issue.monitor.state().cloned();
    let by = if ctx.actor.kind == ActorKind::User {
        ScheduledBy::Board
    } else {
        ScheduledBy::Assignee
    };
    // Whoever sends the policy a monitor was scheduled with changes nothing: compared without
    // `scheduledBy`, which a change sets from its sender.
    let current_policy = current.as_ref().and_then(MonitorState::policy);
    let same = |p: &Option<MonitorPolicy>| match (p, &current_policy) {
        (Some(p), Some(c)) => {
            MonitorPolicy {
                scheduled_by: c.scheduled_by,
                ..p.clone()
            } == *c
        }
        (p, c) => p.is_none() && c.is_none(),
    };
    let Some(sent) = sent.filter(|p| !same(p)).cloned() else {
        settle(now, issue);
        return Ok(());
    };
    let sent = sent.map(|p| MonitorPolicy {
        scheduled_by: by,
        ..p
    });
    // An explicit change: scheduled, replaced or cleared by hand.
    let assignee = before.unwrap_or(&*issue).assignee_agent_id.as_deref();
    may_manage(ctx, assignee)?;
    let next = match (sent, current) {
        (Some(policy), current) => {
            if outside_monitor(issue).is_some() {
                return Err(DomainError::invariant("monitor", INVALID));
            }
            let attempts = current.as_ref().map_or(0, |m| m.attempt_count);
            if let Some(r) = policy.exhausted(attempts.saturating_add(1), now) {
                let why = format!("Monitor bounds are already exhausted ({r})");
                return Err(DomainError::invariant("monitor", why));
            }
            MonitorState::scheduled(current.as_ref(), &policy)
        }
        (None, Some(m)) if m.is_scheduled() => m.cleared(ClearReason::Manual, now),
        (None, _) => return Ok(()),
    };
    issue.monitor = IssueMonitor::new(Some(next));
    show_policy(issue);
    Ok(())
}

/// After any change of an issue's status or assignee (an update, a release, its agent's
/// deletion; a checkout gives it to an agent in progress, where a monitor stays): a scheduled
/// monitor the issue can no longer hold is cleared, saying why (Paperclip's
/// `applyMonitorTransition` without a change of the monitor itself). Its bounds are left to
/// the sweep, which fires it at its `timeoutAt` too, so its `recoveryPolicy` acts
/// ([`trigger`]).
pub(crate) fn settle(now: Timestamp, issue: &mut Issue) {
    let Some(m) = issue.monitor.state().filter(|m| m.is_scheduled()) else {
        return;
    };
    if let Some(reason) = outside_monitor(issue) {
        issue.monitor = IssueMonitor::new(Some(m.cleared(reason, now)));
    }
    // Cleared, or kept (a policy the update replaced shows it again).
    show_policy(issue);
}

/// The bytes of an issue's kept Paperclip fields as a client sent them: without the monitor
/// `executionPolicy` shows (`show_policy`), which the bound on those fields does not count.
pub(crate) fn kept_bytes(paperclip: &std::collections::BTreeMap<String, Value>) -> usize {
    let all = serde_json::to_vec(paperclip).map_or(usize::MAX, |v| v.len());
    let shown = paperclip
        .get("executionPolicy")
        .and_then(|p| p.get("monitor"))
        .map_or(0, |m| {
            serde_json::to_vec(m).map_or(0, |v| v.len() + r#","monitor":"#.len())
        });
    all.saturating_sub(shown)
}

/// The board, or the agent the issue is assigned to.
fn may_manage(ctx: &Ctx<'_>, assignee: Option<&str>) -> Result<(), DomainError> {
    if ctx.is_admin() || (ctx.actor.agent_id().is_some() && ctx.actor.agent_id() == assignee) {
        return Ok(());
    }
    Err(DomainError::forbidden(
        "Only the assignee agent or a board user can manage issue monitors",
    ))
}

/// Why `issue` cannot hold a monitor now, if it cannot (Paperclip's
/// `monitorClearReasonForIssue`).
fn outside_monitor(issue: &Issue) -> Option<ClearReason> {
    match issue.status {
        IssueStatus::Done => Some(ClearReason::Done),
        IssueStatus::Cancelled => Some(ClearReason::Cancelled),
        _ if issue.assignee_agent_id.is_none() || issue.assignee_user_id.is_some() => {
            Some(ClearReason::InvalidAssignee)
        }
        IssueStatus::InProgress | IssueStatus::InReview => None,
        _ => Some(ClearReason::InvalidStatus),
    }
}

/// `executionPolicy.monitor` shows the scheduled policy, and nothing once the monitor has
/// fired or been cleared; a policy that then holds only what scheduling filled in goes with
/// it (Paperclip strips a policy without stages; Roost keeps what a client sent).
fn show_policy(issue: &mut Issue) {
    let shown = issue.monitor.state().and_then(MonitorState::policy);
    let mut policy = match issue.paperclip.remove("executionPolicy") {
        Some(Value::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    let filled = |p: &serde_json::Map<String, Value>| {
        p.iter().all(|(k, v)| match k.as_str() {
            "mode" => v == "normal",
            "commentRequired" => v == &json!(true),
            "stages" => v == &json!([]),
            _ => false,
        })
    };
    match shown {
        Some(p) => {
            // A policy of the monitor alone in Paperclip's shape; a client's kept as it sent it.
            if policy.keys().all(|k| k == "monitor") {
                policy.insert("mode".into(), json!("normal"));
                policy.insert("commentRequired".into(), json!(true));
                policy.insert("stages".into(), json!([]));
            }
            policy.insert("monitor".into(), p.to_json());
        }
        None => {
            policy.remove("monitor");
            if filled(&policy) {
                return;
            }
        }
    }
    issue
        .paperclip
        .insert("executionPolicy".into(), Value::Object(policy));
}

/// The issues whose monitor the leader's sweep fires at `now`: scheduled, due, on an agent's
/// issue in progress or in review, in an active company.
pub fn monitors_due(state: &State, now: Timestamp) -> Vec<String> {
    state
        .monitored_issues
        .iter()
        .filter(|id| {
            state.issues.get(id).is_some_and(|issue| {
                issue.monitor.due_at().is_some_and(|at| at <= now)
                    && outside_monitor(&issue).is_none()
                    && company_active(state, &issue.company_id)
            })
        })
        .cloned()
        .collect()
}

/// A company that runs agents now (`rules/wake.rs`'s halt: paused or archived).
fn company_active(state: &State, company_id: &str) -> bool {
    state.companies.contains_key(company_id)
        && super::wake::company_halt(state, company_id).is_none()
}

/// `TriggerIssueMonitor`: the sweep's firing of a due monitor (as the system), or a check now
/// by the board or the issue's assignee (Paperclip's `monitor/check-now`, due or not). `id`
/// names what it makes: the wake, or the recovery's comment or sub-issue.
pub(crate) fn trigger(ctx: &Ctx<'_>, issue_id: &str, id: &str) -> Result<Decision, DomainError> {
    super::require_id("id", id)?;
    let issue = super::issue::visible_issue(ctx, issue_id)?;
    let by_sweep = ctx.actor.kind == ActorKind::System;
    if !by_sweep {
        may_manage(ctx, issue.assignee_agent_id.as_deref())?;
        ctx.fence()?;
    }
    let now = ctx.now();
    let Some(state) = issue.monitor.state().filter(|m| m.is_scheduled()) else {
        return Err(DomainError::conflict("Issue has no scheduled monitor"));
    };
    let Some(policy) = state.policy() else {
        return Err(DomainError::conflict("Issue has no scheduled monitor"));
    };
    match outside_monitor(&issue) {
        Some(ClearReason::InvalidStatus) => {
            return Err(DomainError::conflict(
                "Issue monitor can only run while the issue is in progress or in review",
            ))
        }
        Some(_) => {
            return Err(DomainError::conflict(
                "Issue monitor requires an agent assignee and an open issue",
            ))
        }
        None => {}
    }
    let due = issue.monitor.due_at().is_some_and(|at| at <= now);
    if by_sweep && !(due && company_active(ctx.state, &issue.company_id)) {
        return Err(DomainError::conflict(format!(
            "the monitor of {} is not due (next check {}, or its company is not active)",
            issue.identifier, policy.next_check_at
        )));
    }
    let agent_id = issue.assignee_agent_id.clone().unwrap_or_default();
    let attempt = state.attempt_count.saturating_add(1);
    let mut next = issue.clone().into_owned();
    next.updated_at = now;
    let mut changes = Vec::new();
    let mut details = json!({
        "nextCheckAt": policy.next_check_at, "attemptCount": attempt, "source": source(ctx),
    });
    if let Some(reason) = policy.exhausted(attempt, now) {
        next.monitor = IssueMonitor::new(Some(state.cleared(reason, now)));
        let recovery = recover(ctx, &mut changes, &next, &policy, reason, attempt, id)?;
        details["clearReason"] = json!(reason);
        details["recovery"] = recovery;
    } else {
        let req = WakeRequest {
            payload: wake_payload(ctx, &issue, &policy, attempt),
            ..WakeRequest::event(
                id.into(),
                &agent_id,
                &issue.id,
                WakeReason::IssueMonitorDue,
                None,
            )
        };
        let wake = enqueue(
            ctx,
            &mut Pending {
                changes: &mut changes,
            },
            req,
        )?;
        let skipped = wake.status == WakeStatus::Skipped;
        if skipped && !by_sweep {
            return Err(DomainError::conflict(format!(
                "the monitor's wake was not made: {}",
                wake.status_reason.as_deref().unwrap_or("skipped")
            )));
        }
        next.monitor = IssueMonitor::new(Some(if skipped {
            details["clearReason"] = json!(ClearReason::DispatchSkipped);
            state.cleared(ClearReason::DispatchSkipped, now)
        } else {
            state.triggered(now)
        }));
        details["wakeId"] = json!(wake.id);
        details["wakeStatus"] = json!(wake.status);
    }
    show_policy(&mut next);
    let next = Arc::new(next);
    changes.push(Change::Issue(next.clone()));
    Ok(Decision {
        outcome: Outcome::Issue {
            issue: next,
            comment: None,
        },
        changes,
        note: ActivityNote {
            company_id: Some(issue.company_id.clone()),
            entity_type: "issue",
            entity_id: issue.id.clone(),
            details,
        },
    })
}

/// What a wake for the monitor tells the run (`PAPERCLIP_WAKE_PAYLOAD_JSON`), as Paperclip's:
/// `source` is `scheduled` (the sweep) or `manual` (a check now).
fn wake_payload(ctx: &Ctx<'_>, issue: &Issue, policy: &MonitorPolicy, attempt: u32) -> Value {
    json!({
        "issueId": issue.id,
        "nextCheckAt": policy.next_check_at,
        "monitorAttemptCount": attempt,
        "monitorNotes": policy.notes,
        "serviceName": policy.service_name,
        "timeoutAt": policy.timeout_at,
        "maxAttempts": policy.max_attempts,
        "recoveryPolicy": policy.recovery_policy,
        "source": source(ctx),
    })
}

/// `scheduled` when the sweep fires a monitor, `manual` for a check now.
fn source(ctx: &Ctx<'_>) -> &'static str {
    if ctx.actor.kind == ActorKind::System {
        "scheduled"
    } else {
        "manual"
    }
}

/// A monitor cleared by its bounds acts on its `recoveryPolicy`; returns what it did, for the
/// activity entry. `id` names the comment, or the sub-issue and its wake (another table), or
/// the wake. A recovery sub-issue that cannot be opened (the company at its open-issue cap), or
/// an open one with no assignee, falls back to waking the monitor's owner.
fn recover(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    issue: &Issue,
    policy: &MonitorPolicy,
    reason: ClearReason,
    attempt: u32,
    id: &str,
) -> Result<Value, DomainError> {
    let recovery = policy.recovery_policy.unwrap_or(MonitorRecovery::WakeOwner);
    let why = if reason == ClearReason::TimeoutExceeded {
        "its timeout was reached"
    } else {
        "its maximum attempt count was reached"
    };
    let text = format!(
        "Roost cleared the scheduled external-service monitor for {} because {why}.\n\n\
         - Attempt count: {attempt}\n- Recovery policy: {recovery}\n\n\
         Next action: inspect the external service state, record the result on this issue, \
         and restore an explicit execution or waiting path if more work remains.",
        issue.identifier
    );
    let mut payload = wake_payload(ctx, issue, policy, attempt);
    payload["clearReason"] = json!(reason);
    let wake = |changes: &mut Vec<Change>, agent: &str, on: &str, payload: Value| {
        let req = WakeRequest {
            payload,
            ..WakeRequest::event(id.into(), agent, on, WakeReason::IssueMonitorRecovery, None)
        };
        enqueue(ctx, &mut Pending { changes }, req)
    };
    let owner = issue.assignee_agent_id.clone().unwrap_or_default();
    match recovery {
        MonitorRecovery::EscalateToBoard => {
            let new = crate::command::NewComment {
                id: id.to_string(),
                body: text,
            };
            changes.push(Change::Comment(super::issue::new_comment(
                ctx, issue, &new,
            )?));
            return Ok(json!({ "policy": recovery, "commentId": id }));
        }
        MonitorRecovery::CreateRecoveryIssue => {
            let title = format!("Recover external-service monitor for {}", issue.identifier);
            let child = match open_child_titled(ctx.state, &issue.id, &title) {
                Some(open) => Some(open),
                None => {
                    let patch = IssuePatch {
                        title: Some(title),
                        description: Some(Some(text)),
                        status: Some(IssueStatus::Todo),
                        priority: Some(Priority::High),
                        assignee_agent_id: Some(issue.assignee_agent_id.clone()),
                        parent_id: Some(Some(issue.id.clone())),
                        project_id: issue.project_id.clone().map(Some),
                        goal_id: issue.goal_id.clone().map(Some),
                        billing_code: issue.billing_code.clone().map(Some),
                        ..Default::default()
                    };
                    match super::issue::create(ctx, id, &issue.company_id, &patch) {
                        Ok(made) => {
                            changes.extend(made.changes);
                            Some((id.to_string(), Some(owner.clone())))
                        }
                        // The company at its open-issue cap: the owner is woken instead.
                        Err(DomainError::QuotaExceeded { .. }) => None,
                        Err(e) => return Err(e),
                    }
                }
            };
            // An open one nobody holds now: its owner is woken instead.
            if let Some((child, Some(assignee))) = child {
                // The sub-issue's assignee is woken about it with the monitor's recovery in
                // the payload (merged into its assignment wake when that one is pending:
                // `rules/wake.rs`), also when its assignment wake was its own check now's.
                payload["sourceIssueId"] = json!(issue.id);
                let w = wake(changes, &assignee, &child, payload)?;
                return Ok(json!({ "policy": recovery, "recoveryIssueId": child, "wakeId": w.id }));
            }
        }
        MonitorRecovery::WakeOwner => {}
    }
    let w = wake(changes, &owner, &issue.id, payload)?;
    Ok(json!({ "policy": recovery, "wakeId": w.id, "wakeStatus": w.status }))
}

/// An open sub-issue of `parent` titled `title` (the recovery issue an earlier clearing
/// opened) and its assignee. Reads the open children only (a closed one's row
/// is in `state.db`).
fn open_child_titled(state: &State, parent: &str, title: &str) -> Option<(String, Option<String>)> {
    state
        .child_ids_of(parent)
        .filter(|id| state.issues.status(id).is_some_and(|s| !s.is_terminal()))
        .filter_map(|id| state.issues.get(id))
        .find(|c| c.title == title)
        .map(|c| (c.id.clone(), c.assignee_agent_id.clone()))
}
