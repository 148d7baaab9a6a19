//! `DeleteAgent` (Paperclip's `DELETE /api/agents/{id}`): the agent leaves its company's work
//! for good. Roost keeps an agent's history (its runs, costs, memory, activity: the audit chain
//! names it), so the agent is terminated rather than erased, and what it held is let go in the
//! same command, as Paperclip's delete does: its live runs are cancelled, its keys revoked, its
//! pending wakes cancelled (`agent_deleted`), its open issues left without an assignee (one
//! `in_progress` goes back to `todo`, as a release leaves it: an issue in progress has an
//! assignee, `rules/issue.rs`) and its reports without a manager. A second delete finds
//! nothing left to let go of and only records itself again.

use std::collections::BTreeMap;

use serde_json::json;

use super::agent::{agent_note, stop_for_good, visible_agent};
use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{Change, Decision};

/// Ids listed in the activity entry, each list at most this long (the counts are whole).
const LISTED_IDS: usize = 100;

pub(crate) fn delete(ctx: &Ctx<'_>, agent_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("delete an agent")?;
    let current = visible_agent(ctx, agent_id)?;
    let stopped = stop_for_good(ctx, current, "agent_deleted");
    let mut changes = stopped.changes;
    let cancelled_wakes =
        super::loop_breaker::cancel_pending(ctx, &mut changes, &current.id, "agent_deleted");
    // The runs cancelled above released their checkouts in this command: start from those
    // copies (the last of each), found once rather than per issue.
    let released: BTreeMap<String, Issue> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Issue(i) => Some((i.id.clone(), Issue::clone(i))),
            _ => None,
        })
        .collect();
    let mut unassigned = Vec::new();
    for issue in ctx.state.open_issues_assigned_to(&current.id) {
        let mut issue = released
            .get(&issue.id)
            .cloned()
            .unwrap_or_else(|| issue.into_owned());
        issue.assignee_agent_id = None;
        issue.recovery = None;
        if issue.status == IssueStatus::InProgress {
            issue.move_to(IssueStatus::Todo, ctx.now());
        }
        issue.updated_at = ctx.now();
        // Nobody's now, it holds no monitor (`rules/monitor.rs`).
        super::monitor::settle(ctx.now(), &mut issue);
        unassigned.push(issue.id.clone());
        changes.push(Change::Issue(issue.into()));
    }
    // Through any row this command wrote for them already (a budget stop of the cancelled
    // runs' spend may have paused one), not over it.
    let reports: Vec<String> = ctx
        .state
        .agents
        .values()
        .filter(|a| a.reports_to.as_deref() == Some(current.id.as_str()))
        .map(|a| a.id.clone())
        .collect();
    for id in &reports {
        super::budget::upsert_agent(ctx, &mut changes, id, |r| {
            r.reports_to = None;
            r.updated_at = ctx.now();
        });
    }
    let listed = |ids: &[String]| ids.iter().take(LISTED_IDS).cloned().collect::<Vec<_>>();
    let note = agent_note(
        &stopped.agent,
        json!({
            "cancelledRuns": stopped.cancelled_runs,
            "revokedKeys": stopped.revoked_keys,
            "cancelledWakes": cancelled_wakes,
            "unassignedIssues": unassigned.len(),
            "unassignedIssueIds": listed(&unassigned),
            "reportsCleared": listed(&reports),
        }),
    );
    Ok(Decision {
        outcome: Outcome::Agent(stopped.agent),
        changes,
        note,
    })
}
