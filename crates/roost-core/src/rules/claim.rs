//! What a claim (`AssignRun`, `rules/run.rs`) checks of a queued wake besides the agent and
//! its limits: whether the wake still calls for a run, as Paperclip's claim decides, and the
//! answer when it does not.

use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::state::{ActivityNote, Change, Decision};

/// Why a queued wake about an issue no longer calls for a run when a worker claims it, as
/// Paperclip's claim decides: the issue is gone, done or cancelled; or, for a wake its
/// ownership caused (assignment, status, children, blockers, a lost run's retry, a stranded
/// issue's recovery, its monitor), it was
/// reassigned or has unresolved blockers. A wake carrying comments (someone spoke to the
/// agent) still runs, on a closed or blocked issue too. Such a wake is skipped, not kept: the
/// issue's new state wakes whoever it concerns now.
pub(super) fn stale_at_claim(ctx: &Ctx<'_>, wake: &Wake) -> Option<&'static str> {
    let issue_id = wake.issue_id.as_deref()?;
    if !wake.comment_ids.is_empty() {
        return None;
    }
    let Some(status) = ctx.state.issues.status(issue_id) else {
        return Some("issue_not_found");
    };
    if status.is_terminal() {
        return Some("issue_terminal_status");
    }
    let owners_wake = matches!(
        wake.reason,
        WakeReason::IssueAssigned
            | WakeReason::IssueStatusChanged
            | WakeReason::IssueChildrenCompleted
            | WakeReason::IssueBlockersResolved
            | WakeReason::ProcessLostRetry
            | WakeReason::IssueAssignmentRecovery
            | WakeReason::IssueContinuationNeeded
            | WakeReason::IssueMonitorDue
            | WakeReason::IssueMonitorRecovery
    );
    if !owners_wake {
        return None;
    }
    let issue = ctx.state.issues.get(issue_id)?;
    if issue.assignee_agent_id.as_deref() != Some(wake.agent_id.as_str()) {
        return Some("issue_assignee_changed");
    }
    if !super::issue::unresolved_blockers(ctx, &issue).is_empty() {
        return Some("issue_dependencies_blocked");
    }
    None
}

/// The claim's answer for a wake that starts no run: it is skipped, saying why.
pub(super) fn skip_at_claim(ctx: &Ctx<'_>, wake: &Wake, why: &str) -> Decision {
    let mut skipped = wake.clone();
    skipped.status = WakeStatus::Skipped;
    skipped.status_reason = Some(why.into());
    skipped.updated_at = ctx.now();
    let note = ActivityNote {
        company_id: Some(wake.company_id.clone()),
        entity_type: "wake",
        entity_id: wake.id.clone(),
        details: super::wake::wake_details(&skipped),
    };
    Decision {
        outcome: Outcome::Wake(skipped.clone()),
        changes: vec![Change::Wake(skipped)],
        note,
    }
}
