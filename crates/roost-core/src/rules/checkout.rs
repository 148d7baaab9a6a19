//! Checkout and release: a lease held by a live run, with the
//! slot of the checkout command (log index × 1000 + position in its entry) as its fencing token.

use std::sync::Arc;

use serde_json::json;

use super::issue::{
    require_not_held_by_other, require_open_slot, unresolved_blockers, visible_issue,
};
use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn checkout(
    ctx: &Ctx<'_>,
    issue_id: &str,
    agent_id: &str,
    expected: &[IssueStatus],
) -> Result<Decision, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    if let Some(own) = ctx.actor.agent_id() {
        if own != agent_id {
            return Err(DomainError::forbidden(
                "an agent can only check out issues for itself",
            ));
        }
    }
    if expected.is_empty() {
        return Err(DomainError::invalid(
            "expectedStatuses",
            "must name at least one status",
        ));
    }
    let run_id = ctx.actor.run_id.as_deref().ok_or_else(|| {
        DomainError::invalid("runId", "a checkout needs a run (X-Roost-Run-Id header)")
    })?;
    let run = ctx
        .fence()?
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    if run.agent_id != agent_id {
        return Err(DomainError::forbidden(format!(
            "run {run_id} belongs to another agent"
        )));
    }
    let agent = ctx
        .state
        .agents
        .get(agent_id)
        .ok_or_else(|| DomainError::not_found("agent", agent_id))?;
    if agent.company_id != issue.company_id {
        return Err(DomainError::not_found("agent", agent_id));
    }

    if let Some(held) = &issue.checkout {
        if held.run_id == run_id {
            // The same run checking out again: idempotent, same token, nothing written.
            return Ok(decision(issue.clone(), "repeat", held.token));
        }
        // Invariant: a checkout lives exactly as long as its run, so any checkout present is held
        // by a live run and conflicts.
        return Err(DomainError::CheckoutConflict {
            issue_id: issue.id.clone(),
            status: issue.status.as_str().into(),
            holder_agent_id: held.agent_id.clone(),
            holder_run_id: held.run_id.clone(),
            token: held.token,
        });
    }
    if agent.status != AgentStatus::Active {
        return Err(DomainError::conflict(format!(
            "agent {agent_id} is {}",
            agent.status
        )));
    }
    if let Some(waiting) = super::approval::waiting_on(ctx, &issue.id, agent_id) {
        return Err(waiting);
    }
    let blockers = unresolved_blockers(ctx, issue);
    if !blockers.is_empty() {
        return Err(DomainError::invariant(
            "unresolved_blockers",
            format!(
                "issue is blocked by unresolved issues: {}",
                blockers.join(", ")
            ),
        ));
    }
    // An issue left in progress by this agent's run that ended (lost with its worker, failed)
    // is the agent's own abandoned work: its next run adopts it whatever statuses it expects,
    // as Paperclip adopts a stale checkout, so a retry following the agent loop can finish it.
    let abandoned_by_self = issue.status == IssueStatus::InProgress
        && issue.assignee_agent_id.as_deref() == Some(agent_id);
    if !expected.contains(&issue.status) && !abandoned_by_self {
        return Err(DomainError::StatusConflict {
            issue_id: issue.id.clone(),
            status: issue.status.as_str().into(),
            expected: expected.iter().map(|s| s.as_str().to_string()).collect(),
        });
    }
    let mut next = issue.clone();
    if next.assignee_agent_id.as_deref() != Some(agent_id) {
        // A new assignee starts the issue's recoveries over (`rules/recovery.rs`).
        next.recovery = None;
    }
    next.assignee_agent_id = Some(agent_id.into());
    next.assignee_user_id = None;
    next.move_to(IssueStatus::InProgress, ctx.now());
    require_open_slot(ctx, Some(issue), &next)?;
    next.set_checkout(Some(Checkout {
        agent_id: agent_id.into(),
        run_id: run_id.into(),
        token: ctx.slot,
        at: ctx.now(),
    }));
    if next.started_at.is_none() {
        next.started_at = Some(ctx.now());
    }
    next.updated_at = ctx.now();
    Ok(decision(next, "new", ctx.slot))
}

fn decision(issue: Issue, kind: &str, token: u64) -> Decision {
    let issue = Arc::new(issue);
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details: json!({ "token": token, "checkout": kind, "agentId": issue.assignee_agent_id }),
    };
    let changes = if kind == "new" {
        vec![Change::Issue(issue.clone())]
    } else {
        Vec::new()
    };
    Decision {
        outcome: Outcome::Issue {
            issue,
            comment: None,
        },
        changes,
        note,
    }
}

/// Release hands the issue back: status `todo`, no assignee, no checkout. Only the holding run
/// (or an administrator) may release a checked-out issue.
pub(crate) fn release(ctx: &Ctx<'_>, issue_id: &str) -> Result<Decision, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    ctx.fence()?;
    match (&issue.checkout, ctx.actor.agent_id()) {
        (Some(_), Some(_)) => require_not_held_by_other(ctx, issue)?,
        (None, Some(agent)) if issue.assignee_agent_id.as_deref() != Some(agent) => {
            return Err(DomainError::conflict("Only assignee can release issue"));
        }
        _ => {}
    }
    let released_token = issue.checkout.as_ref().map(|c| c.token);
    let mut next = issue.clone();
    next.set_checkout(None);
    next.assignee_agent_id = None;
    next.assignee_user_id = None;
    if !next.status.is_terminal() {
        next.move_to(IssueStatus::Todo, ctx.now());
    }
    next.updated_at = ctx.now();
    // Handed back, it holds no monitor (`rules/monitor.rs`).
    super::monitor::settle(ctx.now(), &mut next);
    let note = ActivityNote {
        company_id: Some(next.company_id.clone()),
        entity_type: "issue",
        entity_id: next.id.clone(),
        details: json!({ "releasedToken": released_token }),
    };
    let next = Arc::new(next);
    let mut changes = vec![Change::Issue(next.clone())];
    if let Some(held) = &issue.checkout {
        super::wake::promote_deferred(ctx, &held.run_id, Some(&issue.id), &mut changes);
    }
    Ok(Decision {
        outcome: Outcome::Issue {
            issue: next,
            comment: None,
        },
        changes,
        note,
    })
}
