//! Stranded work (Paperclip's recovery sweep): an open issue assigned to an agent that could
//! run, with nothing left that will wake it (no pending wake, no live run, no timer), is woken
//! again once it has been quiet a while: `issue_assignment_recovery` for a `todo` issue,
//! `issue_continuation_needed` for one `in_progress`. Without this, an issue whose run failed
//! or ended with the work unfinished waits for the next comment, forever on a quiet issue.
//!
//! Each company sets the quiet time (`recoverStrandedAfterSecs`: a minute for a company created
//! now; 0, off, for one created before this rule, so an upgrade wakes nobody unasked).
//! "Quiet" means no update of the issue, no run of its agent ended (an agent at work is not
//! stranded) and no recovery or recovery run, for that long. Bounded: at most
//! [`MAX_RECOVERIES`] recovery wakes, each after twice the quiet of the one before; after that
//! the issue moves to `blocked`, where a person (and the company's escalation to the
//! assignee's manager, `rules/org.rs`) sees it. A new assignee, or anyone but the assignee
//! moving the issue (a person, its manager), starts the count over (`rules/issue.rs`,
//! `rules/checkout.rs`); the assignee's own moves do not. The leader's sweep
//! proposes a `RecoverIssue` for each issue [`recoveries_due`] names; apply decides again, so
//! a repeat or a second leader does nothing.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::wake::{company_halt, daily_cap, enqueue, Pending, WakeRequest};
use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

/// How long an issue must have been quiet before its first recovery wake in a company created
/// now (`recoverStrandedAfterSecs`); each later one waits twice as long as the one before.
pub const DEFAULT_RECOVER_SECS: u32 = 60;
/// The longest quiet a company may set: a day (its last wait before the block is eight times
/// that).
pub const MAX_RECOVER_SECS: u32 = 24 * 3600;

/// A company row without the field (written before it existed) has recovery off.
pub fn is_off(secs: &u32) -> bool {
    *secs == 0
}

/// Recovery wakes before the issue is moved to `blocked`.
pub const MAX_RECOVERIES: u32 = 3;

/// The recovery wakes an issue had since its assignee was set or someone else last moved it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueRecovery {
    pub attempts: u32,
    /// The last recovery's wake: the next one waits from its making, or its run's end.
    pub wake_id: String,
}

/// What the recovery does for an issue now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Wake(WakeReason),
    /// The recoveries are used up: the issue moves to `blocked`.
    Block,
}

/// The issues whose recovery is due at `now` (the leader's recovery timer proposes one
/// `RecoverIssue` each). Reads the open issues of the agents that could be woken for them,
/// and of those only the ones in `todo` or `in_progress` with no pending wake or live run of
/// the agent.
pub fn recoveries_due(state: &State, now: Timestamp) -> Vec<String> {
    let live: BTreeSet<(&str, &str)> = state
        .live_runs()
        .filter_map(|r| Some((r.agent_id.as_str(), r.issue_id.as_deref()?)))
        .collect();
    let mut due_ids = Vec::new();
    for agent in state.agents.values() {
        if !agent_recoverable(state, agent, now) {
            continue;
        }
        let candidates = state.open_issue_ids_assigned_to(&agent.id).filter(|id| {
            !live.contains(&(agent.id.as_str(), *id))
                && state.pending_wake(&agent.id, Some(id)).is_none()
                && state
                    .issues
                    .status(id)
                    .is_some_and(super::issue::is_workable)
        });
        for id in candidates {
            if let Some(issue) = state.issues.get(id) {
                if due(state, &issue, now).is_some() {
                    due_ids.push(issue.id.clone());
                }
            }
        }
    }
    due_ids
}

/// An agent whose stranded issues are recovered: one that would run a wake now and has no
/// timer of its own (an enabled timer wakes it for its open issues: `rules/wake.rs`).
fn agent_recoverable(state: &State, agent: &Agent, now: Timestamp) -> bool {
    agent.status == AgentStatus::Active
        && !agent.heartbeat.enabled
        && quiet_ms(state, &agent.company_id).is_some()
        && company_halt(state, &agent.company_id).is_none()
        && daily_cap(state, agent, now).is_none()
}

/// What the recovery does for `issue` at `now`, if it is stranded and due. The cheap checks
/// (status, agent, quiet time) come first: the leader's sweep calls this for every open issue
/// of its agents.
pub fn due(state: &State, issue: &Issue, now: Timestamp) -> Option<Step> {
    let reason = match issue.status {
        IssueStatus::Todo => WakeReason::IssueAssignmentRecovery,
        IssueStatus::InProgress => WakeReason::IssueContinuationNeeded,
        _ => return None,
    };
    let agent = state.agents.get(issue.assignee_agent_id.as_deref()?)?;
    let attempts = issue.recovery.as_ref().map_or(0, |r| r.attempts);
    let wait =
        quiet_ms(state, &issue.company_id)?.saturating_mul(1_i64 << attempts.min(MAX_RECOVERIES));
    if now.0.saturating_sub(quiet_since(state, agent, issue).0) < wait
        || !agent_recoverable(state, agent, now)
        || state.pending_wake(&agent.id, Some(&issue.id)).is_some()
        || waits_on_purpose(state, issue)
        || has_live_path(state, &agent.id, issue)
    {
        return None;
    }
    let project = state.project_of(Some(&issue.id));
    if super::budget::budget_blocker(state, agent, project.as_deref(), now).is_some() {
        return None;
    }
    Some(if attempts >= MAX_RECOVERIES {
        Step::Block
    } else {
        Step::Wake(reason)
    })
}

/// Since when the issue has been quiet: its last update, the end of its agent's last run (on
/// it or not: an agent at work is not stranded, and its next lull comes), and its last
/// recovery and that recovery's run.
fn quiet_since(state: &State, agent: &Agent, issue: &Issue) -> Timestamp {
    let recovered = issue
        .recovery
        .as_ref()
        .map(|r| ended_at(state, r))
        .unwrap_or(Timestamp(i64::MIN));
    issue
        .updated_at
        .max(agent.last_heartbeat_at.unwrap_or(Timestamp(i64::MIN)))
        .max(recovered)
}

/// The issue waits for something on purpose: an open blocker, an open approval linked to it,
/// its paused project (whose runs wait for the resume: `rules/run.rs`), or a scheduled
/// monitor that will wake its assignee (`rules/monitor.rs`).
fn waits_on_purpose(state: &State, issue: &Issue) -> bool {
    let blocked = issue
        .blocked_by_issue_ids
        .iter()
        .any(|b| !super::issue::blocker_resolved(state, b));
    let paused_project = issue
        .project_id
        .as_deref()
        .and_then(|p| state.projects.get(p))
        .is_some_and(|p| p.paused_at.is_some());
    blocked
        || paused_project
        || issue.monitor.is_scheduled()
        || state.approvals.open_for_issue(&issue.id).next().is_some()
}

/// When the last recovery was made (its wake's making), or its run ended (its wake's, or the
/// wake it merged into), whichever is later.
fn ended_at(state: &State, recovery: &IssueRecovery) -> Timestamp {
    let Some(made) = state.wakes.get(&recovery.wake_id) else {
        return Timestamp(i64::MIN);
    };
    let answered = made
        .coalesced_into
        .as_ref()
        .and_then(|id| state.wakes.get(id))
        .unwrap_or(made);
    state
        .runs
        .get(answered.run_id.as_deref().unwrap_or_default())
        .and_then(|r| r.finished_at)
        .map_or(made.created_at, |end| end.max(made.created_at))
}

/// The company's quiet time before a first recovery, in milliseconds; `None` when it turned
/// recovery off.
fn quiet_ms(state: &State, company_id: &str) -> Option<i64> {
    let secs = state.companies.get(company_id)?.recover_stranded_after_secs;
    (secs > 0).then(|| i64::from(secs) * 1000)
}

/// A live run holds the issue's checkout, or the agent has a live run on it.
fn has_live_path(state: &State, agent_id: &str, issue: &Issue) -> bool {
    let holder_live = issue
        .checkout
        .as_ref()
        .and_then(|c| state.runs.get(&c.run_id))
        .is_some_and(|r| r.status.is_live());
    holder_live
        || state
            .live_runs()
            .any(|r| r.agent_id == agent_id && r.issue_id.as_deref() == Some(issue.id.as_str()))
}

/// `RecoverIssue`: wakes a stranded issue's assignee, or moves the issue to `blocked` once its
/// recoveries are used up. Refused when no recovery is due, so a repeat is harmless.
pub(crate) fn recover_issue(
    ctx: &Ctx<'_>,
    issue_id: &str,
    wake_id: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("recover issues")?;
    super::require_id("wakeId", wake_id)?;
    let issue = ctx
        .state
        .issues
        .get(issue_id)
        .ok_or_else(|| DomainError::not_found("issue", issue_id))?;
    ctx.require_company(&issue.company_id, "issue", issue_id)?;
    let Some(step) = due(ctx.state, &issue, ctx.now()) else {
        return Err(DomainError::conflict(format!(
            "issue {} is not due for recovery: it must be todo or in_progress, assigned to an \
             active agent without a timer in an active company with recovery on, not held by a \
             budget or a daily cap, with no pending wake, live run, open blocker, open approval, \
             paused project or scheduled monitor, and quiet long enough",
            issue.identifier
        )));
    };
    let attempts = issue.recovery.as_ref().map_or(0, |r| r.attempts);
    let mut next = issue.clone().into_owned();
    let mut changes = Vec::new();
    let (outcome, details) = match step {
        Step::Wake(reason) => {
            let agent_id = issue.assignee_agent_id.clone().unwrap_or_default();
            let req = WakeRequest {
                id: wake_id.to_string(),
                agent_id,
                issue_id: Some(issue.id.clone()),
                reason,
                comment_ids: Vec::new(),
                payload: json!({
                    "reason": reason,
                    "issueId": issue.id,
                    "identifier": issue.identifier,
                    "attempt": attempts + 1,
                    "maxAttempts": MAX_RECOVERIES,
                }),
                idempotency_key: None,
                retry_of_run_id: None,
            };
            let wake = enqueue(
                ctx,
                &mut Pending {
                    changes: &mut changes,
                },
                req,
            )?;
            next.recovery = Some(IssueRecovery {
                attempts: attempts + 1,
                wake_id: wake.id.clone(),
            });
            let details = json!({
                "wakeId": wake.id, "wakeStatus": wake.status, "wakeReason": reason,
                "attempt": attempts + 1, "status": issue.status,
            });
            (Outcome::Wake(wake), details)
        }
        Step::Block => {
            next.move_to(IssueStatus::Blocked, ctx.now());
            next.updated_at = ctx.now();
            let details = json!({
                "status": IssueStatus::Blocked, "previousStatus": issue.status,
                "attempts": attempts,
                "why": "recovery wakes used up: the issue still has no run working on it",
            });
            let shared = std::sync::Arc::new(next.clone());
            (
                Outcome::Issue {
                    issue: shared,
                    comment: None,
                },
                details,
            )
        }
    };
    changes.push(Change::Issue(next.into()));
    Ok(Decision {
        outcome,
        changes,
        note: ActivityNote {
            company_id: Some(issue.company_id.clone()),
            entity_type: "issue",
            entity_id: issue.id.clone(),
            details,
        },
    })
}
