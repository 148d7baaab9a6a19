//! Issues and comments: identifiers, the one-assignee rule, parents and `blocked_by` without
//! cycles, and who may write to an issue another run has checked out.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::json;

use super::interaction::{self, Expiry};
use super::{require_id, require_text, wake, Ctx};
use crate::command::{IssuePatch, NewComment, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision, State};

use crate::limits::{
    MAX_BLOCKERS, MAX_COMMENT_CHARS as MAX_COMMENT, MAX_DESCRIPTION_CHARS as MAX_DESCRIPTION,
    MAX_OPEN_ISSUES_PER_COMPANY, MAX_TITLE_CHARS as MAX_TITLE,
};

/// An issue that becomes open (created open, or reopened from done or cancelled) needs a free
/// slot under the company's open-issue quota; one that stays open or stays closed does not.
pub(crate) fn require_open_slot(
    ctx: &Ctx<'_>,
    before: Option<&Issue>,
    after: &Issue,
) -> Result<(), DomainError> {
    let opens = !after.status.is_terminal() && before.is_none_or(|b| b.status.is_terminal());
    let open = ctx.state.open_issue_count(&after.company_id);
    if opens && open >= MAX_OPEN_ISSUES_PER_COMPANY {
        return Err(DomainError::quota(
            "open_issues",
            MAX_OPEN_ISSUES_PER_COMPANY as u64,
            format!("this company has {open} open issues, the most it may have; close or cancel some first"),
        ));
    }
    Ok(())
}

/// Finds an issue the actor may see.
pub(crate) fn visible_issue<'a>(
    ctx: &Ctx<'a>,
    issue_id: &str,
) -> Result<Cow<'a, Issue>, DomainError> {
    let issue = ctx
        .state
        .issues
        .get(issue_id)
        .ok_or_else(|| DomainError::not_found("issue", issue_id))?;
    ctx.require_company(&issue.company_id, "issue", issue_id)?;
    Ok(issue)
}

/// An agent may not write to an issue that another live run holds.
pub(crate) fn require_not_held_by_other(ctx: &Ctx<'_>, issue: &Issue) -> Result<(), DomainError> {
    let (Some(checkout), Some(_)) = (&issue.checkout, ctx.actor.agent_id()) else {
        return Ok(());
    };
    if ctx.actor.run_id.as_deref() == Some(checkout.run_id.as_str()) {
        return Ok(());
    }
    Err(DomainError::CheckoutConflict {
        issue_id: issue.id.clone(),
        status: issue.status.as_str().into(),
        holder_agent_id: checkout.agent_id.clone(),
        holder_run_id: checkout.run_id.clone(),
        token: checkout.token,
    })
}

pub(crate) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    fields: &IssuePatch,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    ctx.fence()?;
    let company = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(company_id, "company", company_id)?;
    if ctx.state.issues.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "issue".into(),
            id: id.into(),
        });
    }
    let title = fields
        .title
        .as_deref()
        .ok_or_else(|| DomainError::invalid("title", "is required"))?;
    let mut company = company.clone();
    company.issue_counter = company.issue_counter.checked_add(1).ok_or_else(|| {
        DomainError::invariant("issue_counter", "the company has no issue numbers left")
    })?;
    company.updated_at = ctx.now();
    let mut issue = Issue {
        id: id.into(),
        company_id: company_id.into(),
        identifier: format!("{}-{}", company.issue_prefix, company.issue_counter),
        issue_number: company.issue_counter,
        title: require_text("title", title, MAX_TITLE)?,
        description: None,
        status: IssueStatus::Backlog,
        priority: Priority::Medium,
        assignee_agent_id: None,
        assignee_user_id: None,
        parent_id: None,
        blocked_by_issue_ids: Vec::new(),
        billing_code: None,
        checkout: None,
        checkout_run_id: None,
        execution_run_id: None,
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        started_at: None,
        completed_at: None,
        cancelled_at: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
        status_changed_at: None,
        escalated_blocked_since: None,
        recovery: None,
        project_id: None,
        goal_id: None,
        monitor: Default::default(),
        paperclip: BTreeMap::new(),
    };
    // Paperclip's create default: without a status, an issue created with an assignee is
    // `todo` (work for that assignee, who is woken), one without is `backlog`.
    let assigned = |a: &Option<Option<String>>| a.as_ref().is_some_and(|a| a.is_some());
    if fields.status.is_none()
        && (assigned(&fields.assignee_agent_id) || assigned(&fields.assignee_user_id))
    {
        issue.status = IssueStatus::Todo;
    }
    apply_patch(ctx, &mut issue, fields)?;
    super::monitor::follow_update(ctx, None, &mut issue, fields.monitor.as_ref())?;
    // An issue created done or cancelled (a record of finished work) takes no open slot.
    require_open_slot(ctx, None, &issue)?;
    let note = ActivityNote {
        company_id: Some(company_id.into()),
        entity_type: "issue",
        entity_id: id.into(),
        details: json!({ "identifier": issue.identifier, "title": issue.title, "status": issue.status }),
    };
    let issue = Arc::new(issue);
    let mut changes = vec![Change::Company(company), Change::Issue(issue.clone())];
    if issue.assignee_agent_id.is_some() && is_workable(issue.status) {
        wake::wake_for_issue_event(
            ctx,
            &mut changes,
            &issue,
            Some(WakeReason::IssueAssigned),
            None,
        )?;
    }
    Ok(Decision {
        outcome: Outcome::Issue {
            issue,
            comment: None,
        },
        changes,
        note,
    })
}

pub(crate) fn update(
    ctx: &Ctx<'_>,
    issue_id: &str,
    patch: &IssuePatch,
    comment: Option<&NewComment>,
) -> Result<Decision, DomainError> {
    let current = visible_issue(ctx, issue_id)?;
    let current: &Issue = &current;
    ctx.fence()?;
    require_not_held_by_other(ctx, current)?;
    let mut issue = current.clone();
    apply_patch(ctx, &mut issue, patch)?;
    super::monitor::follow_update(ctx, Some(current), &mut issue, patch.monitor.as_ref())?;
    require_open_slot(ctx, Some(current), &issue)?;
    issue.updated_at = ctx.now();
    // A new assignee, or anyone but the assignee moving the issue (a person, a manager taking
    // it out of `blocked`), starts its recoveries over; the assignee's own moves do not, or an
    // agent that sets its issue back each run would be recovered without end
    // (`rules/recovery.rs`).
    let moved_by_another = issue.status != current.status
        && ctx.actor.agent_id() != current.assignee_agent_id.as_deref();
    if issue.assignee_agent_id != current.assignee_agent_id || moved_by_another {
        issue.recovery = None;
    }
    let issue = Arc::new(issue);
    let mut changes = vec![Change::Issue(issue.clone())];
    let comment = match comment {
        Some(c) => {
            let comment = new_comment(ctx, &issue, c)?;
            changes.push(Change::Comment(comment.clone()));
            Some(comment)
        }
        None => None,
    };
    // Its pending interactions expire when it closes, or those that ask for it when a person
    // comments (`rules/interaction.rs`).
    if issue.status.is_terminal() && !current.status.is_terminal() {
        interaction::expire_on(ctx, &mut changes, &issue.id, Expiry::IssueClosed);
    } else if let Some(c) = comment.as_ref().filter(|c| c.author_user_id.is_some()) {
        let by_person = Expiry::PersonCommented { comment_id: &c.id };
        interaction::expire_on(ctx, &mut changes, &issue.id, by_person);
    }
    // Wakes: a new assignee, a reactivated issue, a comment (and its mentions), a closed issue's
    // parent and dependents; and deferred wakes when the checkout ended here.
    let reassigned =
        issue.assignee_agent_id.is_some() && issue.assignee_agent_id != current.assignee_agent_id;
    let reason = if reassigned && is_workable(issue.status) {
        Some(WakeReason::IssueAssigned)
    } else if current.status != issue.status && issue.status == IssueStatus::Todo {
        Some(WakeReason::IssueStatusChanged)
    } else if comment.is_some() && !issue.status.is_terminal() {
        Some(WakeReason::IssueCommented)
    } else {
        None
    };
    let comment_ref = comment.as_ref().map(|c| (c.id.as_str(), c.body.as_str()));
    if reason.is_some() || comment_ref.is_some() {
        wake::wake_for_issue_event(ctx, &mut changes, &issue, reason, comment_ref)?;
    }
    if issue.status.is_terminal() && !current.status.is_terminal() {
        wake::wake_for_closed_issue(ctx, &mut changes, &issue)?;
    }
    if issue.status == IssueStatus::Done && current.status != IssueStatus::Done {
        wake::wake_for_done_blocker(ctx, &mut changes, &issue)?;
    }
    // Its blockers edited so that none holds it back any more (a cancelled one removed, say):
    // its assignee is woken as if the last had been done.
    if patch.blocked_by_issue_ids.is_some()
        && reason.is_none()
        && is_workable(issue.status)
        && !unresolved_blockers(ctx, current).is_empty()
        && unresolved_blockers(ctx, &issue).is_empty()
    {
        wake::wake_for_issue_event(
            ctx,
            &mut changes,
            &issue,
            Some(WakeReason::IssueBlockersResolved),
            None,
        )?;
    }
    if let (Some(held), None) = (&current.checkout, &issue.checkout) {
        wake::promote_deferred(ctx, &held.run_id, Some(&issue.id), &mut changes);
    }
    let mut details = serde_json::to_value(patch).unwrap_or(serde_json::Value::Null);
    if let (Some(c), Some(obj)) = (&comment, details.as_object_mut()) {
        obj.insert("commentId".into(), json!(c.id));
    }
    if current.status != issue.status {
        if let Some(obj) = details.as_object_mut() {
            obj.insert("previousStatus".into(), json!(current.status));
        }
    }
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details,
    };
    Ok(Decision {
        outcome: Outcome::Issue { issue, comment },
        changes,
        note,
    })
}

pub(crate) fn add_comment(
    ctx: &Ctx<'_>,
    issue_id: &str,
    new: &NewComment,
) -> Result<Decision, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    ctx.fence()?;
    let comment = new_comment(ctx, issue, new)?;
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details: json!({ "commentId": comment.id }),
    };
    let mut changes = vec![Change::Comment(comment.clone())];
    if comment.author_user_id.is_some() {
        let by_person = Expiry::PersonCommented {
            comment_id: &comment.id,
        };
        interaction::expire_on(ctx, &mut changes, &issue.id, by_person);
    }
    // A closed issue's assignee is not woken by a comment; a mentioned agent still is.
    let reason = (!issue.status.is_terminal()).then_some(WakeReason::IssueCommented);
    wake::wake_for_issue_event(
        ctx,
        &mut changes,
        issue,
        reason,
        Some((&comment.id, &comment.body)),
    )?;
    Ok(Decision {
        outcome: Outcome::Comment(comment),
        changes,
        note,
    })
}

pub(crate) fn new_comment(
    ctx: &Ctx<'_>,
    issue: &Issue,
    new: &NewComment,
) -> Result<Comment, DomainError> {
    require_id("comment.id", &new.id)?;
    if ctx.state.comments.contains_key(&new.id) {
        return Err(DomainError::AlreadyExists {
            entity: "comment".into(),
            id: new.id.clone(),
        });
    }
    let body = require_text("body", &new.body, MAX_COMMENT)?;
    Ok(Comment {
        id: new.id.clone(),
        company_id: issue.company_id.clone(),
        issue_id: issue.id.clone(),
        body,
        author_agent_id: ctx.actor.agent_id().map(str::to_string),
        author_user_id: ctx.actor.user_id(),
        created_by_run_id: ctx.actor.run_id.clone(),
        created_at: ctx.now(),
        ..Default::default()
    })
}

/// Applies `patch` to `issue` and checks every invariant of the result.
fn apply_patch(ctx: &Ctx<'_>, issue: &mut Issue, patch: &IssuePatch) -> Result<(), DomainError> {
    let before_status = issue.status;
    if let Some(title) = &patch.title {
        issue.title = require_text("title", title, MAX_TITLE)?;
    }
    if let Some(description) = &patch.description {
        if let Some(d) = description {
            if d.chars().count() > MAX_DESCRIPTION {
                return Err(DomainError::invalid(
                    "description",
                    format!("must be at most {MAX_DESCRIPTION} characters"),
                ));
            }
        }
        issue.description = description.clone();
    }
    if let Some(status) = patch.status {
        issue.status = status;
    }
    if let Some(priority) = patch.priority {
        issue.priority = priority;
    }
    if let Some(agent) = &patch.assignee_agent_id {
        issue.assignee_agent_id = agent.clone();
    }
    if let Some(user) = &patch.assignee_user_id {
        issue.assignee_user_id = user.clone();
    }
    if let Some(parent) = &patch.parent_id {
        issue.parent_id = parent.clone();
    }
    if let Some(blockers) = &patch.blocked_by_issue_ids {
        let mut seen = BTreeSet::new();
        issue.blocked_by_issue_ids = blockers
            .iter()
            .filter(|b| seen.insert(b.as_str()))
            .cloned()
            .collect();
    }
    if let Some(code) = &patch.billing_code {
        issue.billing_code = code.clone();
    }
    if let Some(project) = &patch.project_id {
        if let Some(id) = project {
            super::project::project_in(ctx, &issue.company_id, id)?;
        }
        issue.project_id = project.clone();
    }
    if let Some(goal) = &patch.goal_id {
        if let Some(id) = goal {
            super::project::goal_in(ctx, &issue.company_id, id)?;
        }
        issue.goal_id = goal.clone();
    }
    if let Some(fields) = &patch.paperclip {
        for (key, value) in fields {
            if value.is_null() {
                issue.paperclip.remove(key);
            } else if key == crate::label::LABEL_IDS {
                let ids = super::label::checked_label_ids(ctx, &issue.company_id, value)?;
                issue.paperclip.insert(key.clone(), ids);
            } else {
                issue.paperclip.insert(key.clone(), value.clone());
            }
        }
        if super::monitor::kept_bytes(&issue.paperclip) > crate::limits::MAX_PAPERCLIP_FIELDS_BYTES
        {
            return Err(DomainError::too_large(
                "paperclipFields",
                crate::limits::MAX_PAPERCLIP_FIELDS_BYTES as u64,
                "bytes of JSON",
            ));
        }
    }

    if issue.assignee_agent_id.is_some() && issue.assignee_user_id.is_some() {
        return Err(DomainError::invariant(
            "single_assignee",
            "Issue can only have one assignee",
        ));
    }
    if let Some(agent_id) = &issue.assignee_agent_id {
        match ctx.state.agents.get(agent_id) {
            Some(a) if a.company_id == issue.company_id && a.status != AgentStatus::Terminated => {}
            Some(a) if a.company_id == issue.company_id => {
                return Err(DomainError::invariant(
                    "assignee_active",
                    "a terminated agent cannot be assigned",
                ))
            }
            _ => {
                return Err(DomainError::invariant(
                    "assignee_exists",
                    format!("no agent {agent_id} in this company"),
                ))
            }
        }
    }
    if let Some(user) = &issue.assignee_user_id {
        require_text("assigneeUserId", user, 200)?;
    }
    if issue.status == IssueStatus::InProgress
        && issue.assignee_agent_id.is_none()
        && issue.assignee_user_id.is_none()
    {
        return Err(DomainError::invariant(
            "in_progress_needs_assignee",
            "an in_progress issue must have an assignee",
        ));
    }
    check_parent(ctx, issue)?;
    check_blockers(ctx, issue)?;

    // A checkout belongs to one agent's run: it ends when the issue goes to someone else or is
    // closed, and only an administrator may take an issue away from a live holder.
    if let Some(checkout) = issue.checkout.clone() {
        let reassigned = issue.assignee_agent_id.as_deref() != Some(checkout.agent_id.as_str());
        if reassigned && !ctx.is_admin() {
            return Err(DomainError::conflict(
                "only an administrator can reassign an issue that is checked out",
            ));
        }
        if reassigned || issue.status.is_terminal() {
            issue.set_checkout(None);
        }
    }
    if issue.status != before_status {
        match issue.status {
            IssueStatus::InProgress if issue.started_at.is_none() => {
                issue.started_at = Some(ctx.now())
            }
            IssueStatus::Done => issue.completed_at = Some(ctx.now()),
            IssueStatus::Cancelled => issue.cancelled_at = Some(ctx.now()),
            _ => {}
        }
    }
    Ok(())
}

fn check_parent(ctx: &Ctx<'_>, issue: &Issue) -> Result<(), DomainError> {
    let Some(parent_id) = &issue.parent_id else {
        return Ok(());
    };
    if parent_id == &issue.id {
        return Err(DomainError::invariant(
            "parent_cycle",
            "an issue cannot be its own parent",
        ));
    }
    let mut cursor = Some(parent_id.clone());
    let mut steps = 0usize;
    while let Some(id) = cursor {
        let Some(p) = ctx
            .state
            .issues
            .get(&id)
            .filter(|p| p.company_id == issue.company_id)
        else {
            return Err(DomainError::invariant(
                "parent_exists",
                format!("no issue {id} in this company"),
            ));
        };
        if p.id == issue.id {
            return Err(DomainError::invariant(
                "parent_cycle",
                "the parent chain would form a cycle",
            ));
        }
        steps += 1;
        if steps > ctx.state.issues.len() {
            break;
        }
        cursor = p.parent_id.clone();
    }
    Ok(())
}

/// `blocked_by` must name issues of the same company and never form a cycle.
fn check_blockers(ctx: &Ctx<'_>, issue: &Issue) -> Result<(), DomainError> {
    if issue.blocked_by_issue_ids.len() > MAX_BLOCKERS {
        return Err(DomainError::invalid(
            "blockedByIssueIds",
            format!("at most {MAX_BLOCKERS} blockers"),
        ));
    }
    for blocker in &issue.blocked_by_issue_ids {
        if blocker == &issue.id {
            return Err(DomainError::invariant(
                "self_block",
                "an issue cannot block itself",
            ));
        }
        if ctx
            .state
            .issues
            .get(blocker)
            .is_none_or(|b| b.company_id != issue.company_id)
        {
            return Err(DomainError::invariant(
                "blocker_exists",
                format!("no issue {blocker} in this company"),
            ));
        }
    }
    // Walk from each new blocker along blocked_by edges; reaching the issue means a cycle.
    let mut stack: Vec<String> = issue.blocked_by_issue_ids.clone();
    let mut visited = BTreeSet::new();
    while let Some(id) = stack.pop() {
        if id == issue.id {
            return Err(DomainError::invariant(
                "blocked_by_cycle",
                "blocked_by would form a cycle",
            ));
        }
        if visited.contains(&id) {
            continue;
        }
        if let Some(i) = ctx.state.issues.get(&id) {
            stack.extend(i.blocked_by_issue_ids.iter().cloned());
        }
        visited.insert(id);
    }
    Ok(())
}

/// Blockers of `issue` that are not done. A cancelled blocker stays unresolved until the
/// relation changes, as in Paperclip: cancelling work another issue waits on must not let
/// that issue start as if the work were there. A deleted blocker is gone.
pub(crate) fn unresolved_blockers<'a>(ctx: &Ctx<'a>, issue: &'a Issue) -> Vec<&'a str> {
    issue
        .blocked_by_issue_ids
        .iter()
        .filter(|b| !blocker_resolved(ctx.state, b))
        .map(String::as_str)
        .collect()
}

/// Whether blocker `id` no longer holds its dependents back: done, or deleted.
pub(crate) fn blocker_resolved(state: &State, id: &str) -> bool {
    state
        .issues
        .status(id)
        .is_none_or(|s| s == IssueStatus::Done)
}

/// Statuses in which an assigned issue is work to do now (not parked, not closed).
pub(crate) fn is_workable(status: IssueStatus) -> bool {
    matches!(status, IssueStatus::Todo | IssueStatus::InProgress)
}

/// An administrator deletes an issue: its comments go with it, its sub-issues lose their
/// parent, other issues stop waiting on it and its pending wakes are cancelled. A live run
/// working on it must end (or be force-released) first, so no run loses its issue mid-work.
pub(crate) fn delete(ctx: &Ctx<'_>, issue_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("delete an issue")?;
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    if let Some(held) = &issue.checkout {
        return Err(DomainError::conflict(format!(
            "issue {} is checked out by run {}; release it (POST /api/issues/{}/admin/force-release) \
             or wait for the run to end before deleting it",
            issue.identifier, held.run_id, issue.id
        )));
    }
    if let Some(run) = ctx
        .state
        .live_runs()
        .find(|r| r.issue_id.as_deref() == Some(issue_id))
    {
        return Err(DomainError::conflict(format!(
            "run {} is working on issue {}; cancel it or wait for it to end before deleting the issue",
            run.id, issue.identifier
        )));
    }
    // A child that also waited on the issue gets one row with both edits: two rows each
    // cloned from the state would leave the second, with the parent still set, as the last.
    let mut edited: Vec<Issue> = ctx
        .state
        .children_of(issue_id)
        .map(|child| {
            let mut child = child.into_owned();
            child.parent_id = None;
            child
        })
        .collect();
    for other in ctx.state.issues_blocked_by(issue_id) {
        let at = match edited.iter().position(|e| e.id == other.id) {
            Some(at) => at,
            None => {
                edited.push(other.into_owned());
                edited.len() - 1
            }
        };
        edited[at].blocked_by_issue_ids.retain(|b| b != issue_id);
    }
    let mut changes = vec![Change::IssueDeleted(issue.id.clone())];
    // Approvals linked to it let it go: a link to a deleted issue could never be unlinked.
    for approval in ctx.state.approvals.approvals.values() {
        if approval.company_id == issue.company_id && approval.issue_ids.contains(&issue.id) {
            let mut a = approval.clone();
            a.issue_ids.retain(|i| *i != issue.id);
            a.updated_at = ctx.now();
            changes.push(Change::Approval(a));
        }
    }
    // Its documents go with it, each with its revisions (`rules/document.rs`).
    changes.extend(
        ctx.state
            .documents
            .of_issue(issue_id)
            .map(|d| Change::Document(crate::document::DocumentChange::Deleted(d.id.clone()))),
    );
    // So do its attachments, with their bytes, and its work products.
    changes.extend(super::attachment::of_deleted_issue(ctx, issue_id));
    interaction::delete_with_issue(ctx, &mut changes, issue_id);
    let was_unresolved = !blocker_resolved(ctx.state, issue_id);
    let mut unblocked = Vec::new();
    for mut other in edited {
        other.updated_at = ctx.now();
        // The deleted issue was the last unresolved blocker of this one: wake its assignee.
        let waited = was_unresolved
            && ctx
                .state
                .issue_ids_blocked_by(issue_id)
                .any(|d| d == other.id);
        let other = Arc::new(other);
        if waited
            && is_workable(other.status)
            && other
                .blocked_by_issue_ids
                .iter()
                .all(|b| blocker_resolved(ctx.state, b))
        {
            unblocked.push(other.clone());
        }
        changes.push(Change::Issue(other));
    }
    for other in unblocked {
        wake::wake_for_issue_event(
            ctx,
            &mut changes,
            &other,
            Some(WakeReason::IssueBlockersResolved),
            None,
        )?;
    }
    // The issue's pending wakes from their index, not a walk of every wake ever made; in id
    // order, as that walk gave them.
    let pending: Vec<&Wake> = ctx.state.pending_wakes_for_issue(issue_id).collect();
    for wake in pending {
        let mut w = wake.clone();
        w.status = WakeStatus::Cancelled;
        w.status_reason = Some("issue_deleted".into());
        w.waiting_on_run = None;
        w.updated_at = ctx.now();
        changes.push(Change::Wake(w));
    }
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details: json!({ "identifier": issue.identifier, "title": issue.title }),
    };
    Ok(Decision {
        outcome: Outcome::Issue {
            issue: Arc::new(issue.clone()),
            comment: None,
        },
        changes,
        note,
    })
}
