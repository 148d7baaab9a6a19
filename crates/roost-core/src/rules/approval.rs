//! Approvals.
//!
//! - Created by an agent of the company (for itself) or an administrator, with Paperclip's
//!   types and a JSON payload, linked to issues of the company. While it is open, a linked
//!   issue waits on it: no agent but the requester checks it out (`rules/checkout.rs`).
//! - Decided by an administrator only (Paperclip's board): approve and reject from `pending`
//!   or `revision_requested`, request a revision from `pending`. The same decision again
//!   changes nothing and answers the approval (Paperclip's idempotent approve); another
//!   decision on a decided approval is refused (422).
//! - A decision wakes the requesting agent once, reason `approval_resolved`, with the
//!   decision in the wake's payload (`reason` holds Paperclip's name, e.g. `approval_approved`).
//! - `hire_agent`: approving activates the hired agent (`pending_approval` → `active`);
//!   rejecting terminates it.
//! - The requester (or an administrator) resubmits after a revision request; anyone of the
//!   company comments.

use serde_json::{json, Value};

use super::wake::{enqueue, Pending, WakeRequest};
use super::{require_id, Ctx};
use crate::approval::*;
use crate::command::Outcome;
use crate::entity::{AgentStatus, WakeReason};
use crate::error::DomainError;
use crate::limits::{MAX_APPROVAL_COMMENTS, MAX_APPROVAL_ISSUES};
use crate::state::{ActivityNote, Change, Decision};

fn note(a: &Approval, details: Value) -> ActivityNote {
    ActivityNote {
        company_id: Some(a.company_id.clone()),
        entity_type: "approval",
        entity_id: a.id.clone(),
        details,
    }
}

/// The approval, if the actor may see it (another company's is not found).
fn visible<'a>(ctx: &Ctx<'a>, id: &str) -> Result<&'a Approval, DomainError> {
    let a = ctx
        .state
        .approvals
        .approvals
        .get(id)
        .ok_or_else(|| DomainError::not_found("approval", id))?;
    ctx.require_company(&a.company_id, "approval", id)?;
    Ok(a)
}

/// A new approval (also the one `agent::create` makes for a hire, with `agent_id`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn new_approval(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    approval_type: ApprovalType,
    payload: &Value,
    requested_by_agent_id: Option<&str>,
    issue_ids: &[String],
    agent_id: Option<&str>,
) -> Result<Approval, DomainError> {
    require_id("id", id)?;
    if ctx.state.approvals.approvals.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "approval".into(),
            id: id.into(),
        });
    }
    if !payload.is_object() {
        return Err(DomainError::invalid(
            "payload",
            "must be a JSON object (an empty one is fine)",
        ));
    }
    let requester = match (ctx.actor.agent_id(), requested_by_agent_id) {
        (Some(own), Some(other)) if own != other => {
            return Err(DomainError::forbidden(
                "an agent requests approvals for itself only",
            ))
        }
        (Some(own), _) => Some(own.to_string()),
        (None, other) => other.map(str::to_string),
    };
    if let Some(agent) = &requester {
        ctx.state
            .agents
            .get(agent)
            .filter(|a| a.company_id == company_id)
            .ok_or_else(|| DomainError::not_found("agent", agent))?;
    }
    if issue_ids.len() > MAX_APPROVAL_ISSUES {
        return Err(DomainError::too_large(
            "issueIds",
            MAX_APPROVAL_ISSUES as u64,
            "issues",
        ));
    }
    let mut issues: Vec<String> = Vec::new();
    for r in issue_ids {
        let issue = ctx
            .state
            .issue_by_ref(r)
            .filter(|i| i.company_id == company_id)
            .ok_or_else(|| DomainError::not_found("issue", r))?;
        if !issues.contains(&issue.id) {
            issues.push(issue.id.clone());
        }
    }
    Ok(Approval {
        id: id.into(),
        company_id: company_id.into(),
        approval_type,
        status: ApprovalStatus::Pending,
        payload: payload.clone(),
        requested_by_agent_id: requester,
        requested_by_user_id: ctx.is_admin().then(|| ctx.actor.id.clone()),
        decision_note: None,
        decided_by_user_id: None,
        decided_at: None,
        issue_ids: issues,
        agent_id: agent_id.map(str::to_string),
        comments: Vec::new(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
    })
}

pub(crate) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    approval_type: ApprovalType,
    payload: &Value,
    requested_by_agent_id: Option<&str>,
    issue_ids: &[String],
) -> Result<Decision, DomainError> {
    let company = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(&company.id, "company", company_id)?;
    if approval_type == ApprovalType::HireAgent {
        return Err(DomainError::invalid(
            "type",
            "a hire_agent approval is made with the agent: POST /api/companies/{companyId}/agent-hires",
        ));
    }
    ctx.fence()?;
    let a = new_approval(
        ctx,
        id,
        company_id,
        approval_type,
        payload,
        requested_by_agent_id,
        issue_ids,
        None,
    )?;
    Ok(Decision {
        note: note(
            &a,
            json!({ "type": a.approval_type, "issueIds": a.issue_ids }),
        ),
        outcome: Outcome::Approval(a.clone()),
        changes: vec![Change::Approval(a)],
    })
}

pub(crate) fn decide(
    ctx: &Ctx<'_>,
    id: &str,
    decision: ApprovalDecision,
    decision_note: Option<&str>,
) -> Result<Decision, DomainError> {
    ctx.require_admin("decide an approval")?;
    let current = visible(ctx, id)?;
    let target = decision.status();
    if current.status == target {
        // The same decision again: nothing changes, nobody is woken twice.
        return Ok(Decision {
            note: note(current, json!({ "decision": decision, "applied": false })),
            outcome: Outcome::Approval(current.clone()),
            changes: Vec::new(),
        });
    }
    let allowed = match decision {
        ApprovalDecision::Approve | ApprovalDecision::Reject => current.status.is_open(),
        ApprovalDecision::RequestRevision => current.status == ApprovalStatus::Pending,
    };
    if !allowed {
        return Err(DomainError::invariant(
            "approval_decided",
            format!(
                "approval {id} is {}; it can no longer be {}",
                current.status,
                match decision {
                    ApprovalDecision::Approve => "approved",
                    ApprovalDecision::Reject => "rejected",
                    ApprovalDecision::RequestRevision => "sent back for revision",
                }
            ),
        ));
    }
    let mut a = current.clone();
    a.status = target;
    a.decision_note = decision_note.map(str::to_string);
    a.decided_by_user_id = Some(ctx.actor.id.clone());
    a.decided_at = Some(ctx.now());
    a.updated_at = ctx.now();
    let mut changes = Vec::new();
    if let Some(agent_id) = &a.agent_id {
        if decision != ApprovalDecision::RequestRevision {
            if let Some(agent) = ctx.state.agents.get(agent_id) {
                if agent.status == AgentStatus::PendingApproval {
                    let mut hired = agent.clone();
                    hired.status = if decision == ApprovalDecision::Approve {
                        AgentStatus::Active
                    } else {
                        AgentStatus::Terminated
                    };
                    hired.updated_at = ctx.now();
                    changes.push(Change::Agent(hired));
                }
            }
        }
    }
    if a.approval_type == ApprovalType::BudgetOverrideRequired
        && decision != ApprovalDecision::RequestRevision
    {
        super::budget::override_decided(
            ctx,
            &a,
            decision == ApprovalDecision::Approve,
            &mut changes,
        );
    }
    let mut woke = None;
    if let Some(requester) = &a.requested_by_agent_id {
        let req = WakeRequest {
            id: format!("w{}-1", ctx.slot),
            agent_id: requester.clone(),
            issue_id: a.issue_ids.first().cloned(),
            reason: WakeReason::ApprovalResolved,
            comment_ids: Vec::new(),
            payload: json!({
                "reason": decision.wake_reason_name(),
                "approvalId": a.id,
                "approvalStatus": a.status,
                "decisionNote": a.decision_note,
                "issueId": a.issue_ids.first(),
                "issueIds": a.issue_ids,
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
        woke = Some(wake.id);
    }
    changes.push(Change::Approval(a.clone()));
    Ok(Decision {
        note: note(
            &a,
            json!({ "decision": decision, "type": a.approval_type, "applied": true, "wakeId": woke }),
        ),
        outcome: Outcome::Approval(a),
        changes,
    })
}

pub(crate) fn resubmit(
    ctx: &Ctx<'_>,
    id: &str,
    payload: Option<&Value>,
) -> Result<Decision, DomainError> {
    let current = visible(ctx, id)?;
    if let Some(own) = ctx.actor.agent_id() {
        if current.requested_by_agent_id.as_deref() != Some(own) {
            return Err(DomainError::forbidden(
                "only the requesting agent can resubmit this approval",
            ));
        }
    } else if !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only the requesting agent or an administrator resubmits an approval",
        ));
    }
    if current.status != ApprovalStatus::RevisionRequested {
        return Err(DomainError::invariant(
            "approval_not_in_revision",
            format!(
                "approval {id} is {}; only one sent back for revision is resubmitted",
                current.status
            ),
        ));
    }
    if payload.is_some_and(|p| !p.is_object()) {
        return Err(DomainError::invalid("payload", "must be a JSON object"));
    }
    let mut a = current.clone();
    if let Some(p) = payload {
        a.payload = p.clone();
    }
    a.status = ApprovalStatus::Pending;
    a.updated_at = ctx.now();
    Ok(Decision {
        note: note(&a, json!({ "resubmitted": true })),
        outcome: Outcome::Approval(a.clone()),
        changes: vec![Change::Approval(a)],
    })
}

pub(crate) fn comment(
    ctx: &Ctx<'_>,
    id: &str,
    comment_id: &str,
    body: &str,
) -> Result<Decision, DomainError> {
    require_id("commentId", comment_id)?;
    let current = visible(ctx, id)?;
    if body.trim().is_empty() {
        return Err(DomainError::invalid("body", "must not be empty"));
    }
    if current.comments.len() >= MAX_APPROVAL_COMMENTS {
        return Err(DomainError::quota(
            "approval_comments",
            MAX_APPROVAL_COMMENTS as u64,
            format!("approval {id} has {MAX_APPROVAL_COMMENTS} comments, the most it may have"),
        ));
    }
    ctx.fence()?;
    let mut a = current.clone();
    let c = ApprovalComment {
        id: comment_id.into(),
        body: body.into(),
        author_agent_id: ctx.actor.agent_id().map(str::to_string),
        author_user_id: ctx.is_admin().then(|| ctx.actor.id.clone()),
        created_at: ctx.now(),
    };
    a.comments.push(c.clone());
    a.updated_at = ctx.now();
    Ok(Decision {
        note: note(&a, json!({ "commentId": c.id })),
        outcome: Outcome::ApprovalComment(c),
        changes: vec![Change::Approval(a)],
    })
}

/// Why `agent_id` may not check out `issue_id` now: it waits on an approval someone else
/// asked for.
pub(crate) fn waiting_on(ctx: &Ctx<'_>, issue_id: &str, agent_id: &str) -> Option<DomainError> {
    let a = ctx
        .state
        .approvals
        .open_for_issue(issue_id)
        .find(|a| a.requested_by_agent_id.as_deref() != Some(agent_id))?;
    Some(DomainError::conflict(format!(
        "issue {issue_id} waits on approval {} ({}, {}); only its requester works on it until it \
         is decided",
        a.id, a.approval_type, a.status
    )))
}

/// Links (`linked`) or unlinks `approval_id` and an issue of its company, as Paperclip's
/// `POST /api/issues/{id}/approvals` and `DELETE .../approvals/{approvalId}` do: an
/// administrator, or an agent that may hire (its company's `ceo` or one with
/// `canCreateAgents`), and such an agent not while another run holds the issue. Linking what is
/// linked, or unlinking what is not, changes nothing. In Roost an open approval holds its
/// issues' checkout (`waiting_on`), so an agent links and unlinks only approvals it requested:
/// it cannot lift a board's approval off an issue.
pub(crate) fn link_issue(
    ctx: &Ctx<'_>,
    approval_id: &str,
    issue_id: &str,
    linked: bool,
) -> Result<Decision, DomainError> {
    let issue = super::issue::visible_issue(ctx, issue_id)?;
    ctx.fence()?;
    super::issue::require_not_held_by_other(ctx, &issue)?;
    if let Some(own) = ctx.actor.agent_id() {
        let granted = ctx.state.agents.get(own).is_some_and(|a| {
            (a.is_ceo() || a.permissions.can_create_agents) && a.exercises_grants()
        });
        if !granted {
            return Err(DomainError::forbidden(
                "this agent may not link approvals to issues: its company's ceo may, or an agent \
                 an administrator granted canCreateAgents",
            ));
        }
    } else {
        ctx.require_admin("link approvals to issues")?;
    }
    let mut a = ctx
        .state
        .approvals
        .approvals
        .get(approval_id)
        .filter(|a| a.company_id == issue.company_id)
        .cloned()
        .ok_or_else(|| DomainError::not_found("approval", approval_id))?;
    if let Some(own) = ctx.actor.agent_id() {
        if a.requested_by_agent_id.as_deref() != Some(own) {
            return Err(DomainError::forbidden(format!(
                "approval {} was not requested by this agent: an agent links and unlinks only \
                 approvals it requested; an administrator may link any",
                a.id
            )));
        }
    }
    let has = a.issue_ids.contains(&issue.id);
    if linked && !has && a.issue_ids.len() >= MAX_APPROVAL_ISSUES {
        return Err(DomainError::too_large(
            "issueIds",
            MAX_APPROVAL_ISSUES as u64,
            "issues",
        ));
    }
    let changes = if linked != has {
        if linked {
            a.issue_ids.push(issue.id.clone());
        } else {
            a.issue_ids.retain(|i| *i != issue.id);
        }
        a.updated_at = ctx.now();
        vec![Change::Approval(a.clone())]
    } else {
        Vec::new()
    };
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(issue.company_id.clone()),
            entity_type: "issue",
            entity_id: issue.id.clone(),
            details: json!({ "approvalId": a.id }),
        },
        outcome: Outcome::Approval(a),
        changes,
    })
}
