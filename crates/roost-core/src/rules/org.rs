//! The org chart: an agent's manager (`reportsTo`, set by `UpdateAgent`),
//! its chain of command, the company's tree, and escalation. An issue `blocked` for its
//! company's `escalateBlockedAfterSecs` (default an hour, 0 off) wakes its assignee's manager
//! with `issue_escalated`, once per blocked spell: the issue records the start of the spell it
//! escalated (`escalatedBlockedSince`), and a spell starts at the status change into `blocked`
//! (`statusChangedAt`, stamped in apply), so unblocking and blocking again escalates again.
//! The leader's escalation timer (roost-server `workers/issue_sweep.rs`) proposes an
//! `EscalateIssue` for each issue [`escalations_due`] names; apply decides again, so a second
//! proposal (the next tick, another leader) is refused and wakes nobody twice.
//! An incident that pauses agents (a hard budget stop, a wake loop) wakes each paused agent's
//! manager with `incident_escalated`, in the same apply ([`escalate_incident`]).

use serde::Serialize;
use serde_json::json;

use super::wake::{enqueue, Pending, WakeRequest};
use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

/// A company's escalation threshold when it sets none: an hour.
pub const DEFAULT_ESCALATE_SECS: u32 = 3600;
/// The longest threshold: 30 days.
pub const MAX_ESCALATE_SECS: u32 = 30 * 24 * 3600;

pub fn default_escalate_secs() -> u32 {
    DEFAULT_ESCALATE_SECS
}

pub fn is_default_escalate_secs(secs: &u32) -> bool {
    *secs == DEFAULT_ESCALATE_SECS
}

/// The manager `agent` may report to: `None` clears it; otherwise an agent of its company,
/// not terminated, not itself, and not one of its own reports (no cycle).
pub(crate) fn check_manager(
    ctx: &Ctx<'_>,
    agent: &Agent,
    manager_id: Option<&str>,
) -> Result<Option<String>, DomainError> {
    let Some(manager_id) = manager_id else {
        return Ok(None);
    };
    super::require_id("reportsTo", manager_id)?;
    if manager_id == agent.id {
        return Err(DomainError::invalid(
            "reportsTo",
            "an agent cannot report to itself; name another agent of its company",
        ));
    }
    let manager = ctx
        .state
        .agents
        .get(manager_id)
        .filter(|m| {
            ctx.require_company(&m.company_id, "agent", manager_id)
                .is_ok()
        })
        .ok_or_else(|| {
            DomainError::invalid(
                "reportsTo",
                format!("there is no agent {manager_id}; name an agent of the same company"),
            )
        })?;
    if manager.company_id != agent.company_id {
        return Err(DomainError::invalid(
            "reportsTo",
            format!(
                "agent {manager_id} belongs to another company; an agent reports to an agent of its own company"
            ),
        ));
    }
    if manager.status == AgentStatus::Terminated {
        return Err(DomainError::invalid(
            "reportsTo",
            format!("agent {manager_id} is terminated; name a manager that is not"),
        ));
    }
    // Walk up from the manager: meeting the agent means it would manage its own manager.
    // Every step is a distinct agent of the company, so the walk ends within its agent count.
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = Some(manager);
    while let Some(m) = cursor {
        if m.id == agent.id {
            return Err(DomainError::invalid(
                "reportsTo",
                format!(
                    "agent {manager_id} already reports to {} (directly or through others); this would make a cycle",
                    agent.id
                ),
            ));
        }
        if !seen.insert(m.id.as_str()) {
            break;
        }
        cursor = m
            .reports_to
            .as_deref()
            .and_then(|id| ctx.state.agents.get(id));
    }
    Ok(Some(manager.id.clone()))
}

/// `agent_id`'s managers, its direct manager first, up to the top (Paperclip's
/// `chainOfCommand`). Stops at an agent already listed, so it ends on any state.
pub fn chain_of_command<'a>(state: &'a State, agent_id: &str) -> Vec<&'a Agent> {
    let mut chain: Vec<&Agent> = Vec::new();
    let mut cursor = state
        .agents
        .get(agent_id)
        .and_then(|a| a.reports_to.as_deref());
    while let Some(id) = cursor {
        if id == agent_id || chain.iter().any(|m| m.id == id) {
            break;
        }
        let Some(manager) = state.agents.get(id) else {
            break;
        };
        chain.push(manager);
        cursor = manager.reports_to.as_deref();
    }
    chain
}

/// One agent of the org tree and those reporting to it (Paperclip's lean org node).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgNode {
    pub id: String,
    pub name: String,
    pub role: String,
    pub status: AgentStatus,
    pub reports: Vec<OrgNode>,
}

/// The company's agents that are not terminated, as a forest: the roots are those reporting
/// to nobody, or to an agent not in the tree (terminated); siblings in creation order.
pub fn org_tree(state: &State, company_id: &str) -> Vec<OrgNode> {
    let mut members: Vec<&Agent> = state
        .agents
        .values()
        .filter(|a| a.company_id == company_id && a.status != AgentStatus::Terminated)
        .collect();
    members.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    let in_tree = |id: &str| members.iter().any(|m| m.id == id);
    let mut by_manager: std::collections::BTreeMap<Option<&str>, Vec<&Agent>> = Default::default();
    for m in &members {
        let manager = m.reports_to.as_deref().filter(|id| in_tree(id));
        by_manager.entry(manager).or_default().push(m);
    }
    fn build(
        by_manager: &std::collections::BTreeMap<Option<&str>, Vec<&Agent>>,
        manager: Option<&str>,
        depth: usize,
    ) -> Vec<OrgNode> {
        // Reporting lines have no cycles (`check_manager`); the depth bound keeps a forged
        // state from recursing without end.
        if depth > crate::limits::MAX_AGENTS_PER_COMPANY {
            return Vec::new();
        }
        by_manager
            .get(&manager)
            .map(|agents| {
                agents
                    .iter()
                    .map(|a| OrgNode {
                        id: a.id.clone(),
                        name: a.name.clone(),
                        role: a.role.clone(),
                        status: a.status,
                        reports: build(by_manager, Some(a.id.as_str()), depth + 1),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    build(&by_manager, None, 0)
}

/// When `issue`'s current blocked spell (or status) began.
pub fn blocked_since(issue: &Issue) -> Timestamp {
    issue.status_changed_at.unwrap_or(issue.created_at)
}

/// An escalation due: the manager to wake and how long the issue has been blocked.
struct Due<'a> {
    assignee: &'a Agent,
    manager: &'a Agent,
    since: Timestamp,
    blocked_ms: i64,
    threshold_secs: u32,
}

/// Whether `issue` escalates at `now`: blocked for its company's threshold, this spell not
/// escalated yet, assigned to an agent whose manager is not terminated.
fn due<'a>(state: &'a State, issue: &Issue, now: Timestamp) -> Option<Due<'a>> {
    if issue.status != IssueStatus::Blocked {
        return None;
    }
    let since = blocked_since(issue);
    if issue.escalated_blocked_since == Some(since) {
        return None;
    }
    let threshold_secs = state
        .companies
        .get(&issue.company_id)?
        .escalate_blocked_after_secs;
    if threshold_secs == 0 {
        return None;
    }
    let blocked_ms = now.0.saturating_sub(since.0);
    if blocked_ms < i64::from(threshold_secs) * 1000 {
        return None;
    }
    let assignee = state.agents.get(issue.assignee_agent_id.as_deref()?)?;
    let manager = state.agents.get(assignee.reports_to.as_deref()?)?;
    if manager.status == AgentStatus::Terminated || manager.company_id != issue.company_id {
        return None;
    }
    Some(Due {
        assignee,
        manager,
        since,
        blocked_ms,
        threshold_secs,
    })
}

/// The issues whose escalation is due at `now` (the leader's escalation timer proposes one
/// `EscalateIssue` each). Reads only the blocked issues' index.
pub fn escalations_due(state: &State, now: Timestamp) -> Vec<String> {
    state
        .blocked_issues
        .iter()
        .filter_map(|id| state.issues.get(id))
        .filter(|i| due(state, i, now).is_some())
        .map(|i| i.id.clone())
        .collect()
}

/// `EscalateIssue`: wakes the manager of a blocked issue's assignee (`issue_escalated`) and
/// records the spell as escalated. Refused when the escalation is not due, so a repeat is
/// harmless.
pub(crate) fn escalate_issue(ctx: &Ctx<'_>, issue_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("escalate issues")?;
    let issue = ctx
        .state
        .issues
        .get(issue_id)
        .ok_or_else(|| DomainError::not_found("issue", issue_id))?;
    ctx.require_company(&issue.company_id, "issue", issue_id)?;
    let Some(d) = due(ctx.state, &issue, ctx.now()) else {
        return Err(DomainError::conflict(format!(
            "issue {} is not due for escalation: it must be blocked past its company's escalateBlockedAfterSecs, not escalated in this blocked spell, and assigned to an agent with a manager",
            issue.identifier
        )));
    };
    let blocked_secs = d.blocked_ms / 1000;
    let payload = json!({
        "reason": WakeReason::IssueEscalated,
        "issueId": issue.id,
        "identifier": issue.identifier,
        "title": issue.title,
        "assigneeAgentId": d.assignee.id,
        "assigneeName": d.assignee.name,
        "blockedSince": d.since,
        "blockedSecs": blocked_secs,
        "blockedMinutes": blocked_secs / 60,
        "thresholdSecs": d.threshold_secs,
    });
    let mut changes = Vec::new();
    let req = WakeRequest {
        id: format!("w{}-esc", ctx.slot),
        agent_id: d.manager.id.clone(),
        issue_id: Some(issue.id.clone()),
        reason: WakeReason::IssueEscalated,
        comment_ids: Vec::new(),
        payload,
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
    let mut escalated = issue.clone().into_owned();
    escalated.escalated_blocked_since = Some(d.since);
    changes.push(Change::Issue(escalated.into()));
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details: json!({
            "wakeId": wake.id,
            "wakeStatus": wake.status,
            "managerAgentId": d.manager.id,
            "assigneeAgentId": d.assignee.id,
            "blockedSecs": blocked_secs,
        }),
    };
    Ok(Decision {
        outcome: Outcome::Wake(wake),
        changes,
        note,
    })
}

/// Wakes the managers of the agents an incident paused (`incident_escalated`), each once, and
/// only those still active after this command: a manager paused by the same incident is not
/// woken to find itself paused.
pub(crate) fn escalate_incident(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    incident: &BudgetIncident,
    paused: &[String],
) {
    let latest = |changes: &[Change], id: &str| -> Option<Agent> {
        changes
            .iter()
            .rev()
            .find_map(|c| match c {
                Change::Agent(a) if a.id == id => Some(a.clone()),
                _ => None,
            })
            .or_else(|| ctx.state.agents.get(id).cloned())
    };
    let mut managers: Vec<(String, Vec<String>)> = Vec::new();
    for id in paused {
        let Some(manager) = latest(changes, id).and_then(|a| a.reports_to) else {
            continue;
        };
        match managers.iter_mut().find(|(m, _)| *m == manager) {
            Some((_, reports)) => reports.push(id.clone()),
            None => managers.push((manager, vec![id.clone()])),
        }
    }
    for (n, (manager, reports)) in managers.into_iter().enumerate() {
        if latest(changes, &manager).is_none_or(|m| m.status != AgentStatus::Active) {
            continue;
        }
        let req = WakeRequest {
            id: format!("w{}-inc-{n}", ctx.slot),
            agent_id: manager,
            issue_id: None,
            reason: WakeReason::IncidentEscalated,
            comment_ids: Vec::new(),
            payload: json!({
                "reason": WakeReason::IncidentEscalated,
                "incidentId": incident.id,
                "incidentKind": incident.kind,
                "message": incident.message,
                "pausedAgentIds": reports,
            }),
            idempotency_key: None,
            retry_of_run_id: None,
        };
        // A manager that cannot be woken (a wake id taken, a company halted) is recorded as
        // such by enqueue; nothing else of the incident depends on it.
        let _ = enqueue(ctx, &mut Pending { changes }, req);
    }
}
