//! Goals and projects.
//!
//! - Administrators and the company's agents create and edit them; administrators delete them.
//! - A goal's parent is a goal of the same company and never one of its own descendants; its
//!   owner and a project's lead are agents of the company; a project's goals exist.
//! - Deleting a goal detaches its child goals, its projects and its issues; deleting a project
//!   detaches its issues. Nothing else goes with them.
//! - A paused project (`paused_at`) holds new runs on its issues (`rules/run.rs`,
//!   `claim_blocker`); resuming it lets them run.

use serde_json::json;

use super::{require_id, require_text, Ctx};
use crate::command::Outcome;
use crate::error::DomainError;
use crate::limits::{
    MAX_DESCRIPTION_CHARS, MAX_GOALS_PER_COMPANY, MAX_NAME_CHARS, MAX_PROJECTS_PER_COMPANY,
};
use crate::project::*;
use crate::state::{ActivityNote, Change, Decision};

fn note(
    company_id: &str,
    entity_type: &'static str,
    id: &str,
    details: serde_json::Value,
) -> ActivityNote {
    ActivityNote {
        company_id: Some(company_id.into()),
        entity_type,
        entity_id: id.into(),
        details,
    }
}

/// Agents of the company and administrators write goals, projects and labels.
pub(crate) fn require_member(
    ctx: &Ctx<'_>,
    company_id: &str,
    entity: &str,
    id: &str,
) -> Result<(), DomainError> {
    ctx.state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(company_id, entity, id)?;
    if ctx.actor.agent_id().is_none() && !ctx.is_admin() {
        return Err(DomainError::forbidden(format!(
            "only an administrator or an agent of the company writes a {entity}"
        )));
    }
    Ok(())
}

pub(crate) fn project_in<'a>(
    ctx: &Ctx<'a>,
    company_id: &str,
    id: &str,
) -> Result<&'a Project, DomainError> {
    ctx.state
        .projects
        .get(id)
        .filter(|p| p.company_id == company_id)
        .ok_or_else(|| DomainError::not_found("project", id))
}

pub(crate) fn goal_in<'a>(
    ctx: &Ctx<'a>,
    company_id: &str,
    id: &str,
) -> Result<&'a Goal, DomainError> {
    ctx.state
        .goals
        .get(id)
        .filter(|g| g.company_id == company_id)
        .ok_or_else(|| DomainError::not_found("goal", id))
}

fn agent_in(ctx: &Ctx<'_>, company_id: &str, field: &str, id: &str) -> Result<(), DomainError> {
    match ctx.state.agents.get(id) {
        Some(a) if a.company_id == company_id => Ok(()),
        _ => Err(DomainError::invalid(
            field,
            format!("agent {id} is not an agent of this company"),
        )),
    }
}

fn text(field: &str, value: &Option<String>, max: usize) -> Result<(), DomainError> {
    match value {
        Some(v) if v.chars().count() > max => Err(DomainError::invalid(
            field,
            format!("must be at most {max} characters"),
        )),
        _ => Ok(()),
    }
}

fn apply_goal(ctx: &Ctx<'_>, goal: &mut Goal, patch: &GoalPatch) -> Result<(), DomainError> {
    if let Some(title) = &patch.title {
        goal.title = require_text("title", title, MAX_NAME_CHARS)?;
    }
    if let Some(d) = &patch.description {
        text("description", d, MAX_DESCRIPTION_CHARS)?;
        goal.description = d.clone();
    }
    if let Some(level) = patch.level {
        goal.level = level;
    }
    if let Some(status) = patch.status {
        goal.status = status;
    }
    if let Some(owner) = &patch.owner_agent_id {
        if let Some(id) = owner {
            agent_in(ctx, &goal.company_id, "ownerAgentId", id)?;
        }
        goal.owner_agent_id = owner.clone();
    }
    if let Some(parent) = &patch.parent_id {
        if let Some(id) = parent {
            goal_in(ctx, &goal.company_id, id)?;
            // Walk up from the new parent: meeting the goal itself is a cycle.
            let mut at = Some(id.clone());
            let mut steps = 0usize;
            while let Some(g) = at {
                if g == goal.id {
                    return Err(DomainError::invalid(
                        "parentId",
                        format!("goal {id} is {} itself or one of its sub-goals", goal.id),
                    ));
                }
                steps += 1;
                if steps > MAX_GOALS_PER_COMPANY {
                    break;
                }
                at = ctx.state.goals.get(&g).and_then(|x| x.parent_id.clone());
            }
        }
        goal.parent_id = parent.clone();
    }
    Ok(())
}

pub(crate) fn create_goal(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    fields: &GoalPatch,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    require_member(ctx, company_id, "goal", id)?;
    if ctx.state.goals.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "goal".into(),
            id: id.into(),
        });
    }
    let count = ctx
        .state
        .goals
        .values()
        .filter(|g| g.company_id == company_id)
        .count();
    if count >= MAX_GOALS_PER_COMPANY {
        return Err(DomainError::quota(
            "goals",
            MAX_GOALS_PER_COMPANY as u64,
            format!("this company has {count} goals, the most it may have"),
        ));
    }
    let title = fields
        .title
        .as_deref()
        .ok_or_else(|| DomainError::invalid("title", "a goal needs a title"))?;
    let mut goal = Goal {
        id: id.into(),
        company_id: company_id.into(),
        title: require_text("title", title, MAX_NAME_CHARS)?,
        description: None,
        level: GoalLevel::Task,
        status: GoalStatus::Planned,
        parent_id: None,
        owner_agent_id: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    apply_goal(ctx, &mut goal, fields)?;
    Ok(Decision {
        note: note(
            company_id,
            "goal",
            id,
            json!({ "title": goal.title, "level": goal.level }),
        ),
        outcome: Outcome::Goal(goal.clone()),
        changes: vec![Change::Goal(goal)],
    })
}

pub(crate) fn update_goal(
    ctx: &Ctx<'_>,
    id: &str,
    patch: &GoalPatch,
) -> Result<Decision, DomainError> {
    let current = ctx
        .state
        .goals
        .get(id)
        .ok_or_else(|| DomainError::not_found("goal", id))?;
    require_member(ctx, &current.company_id, "goal", id)?;
    let mut goal = current.clone();
    apply_goal(ctx, &mut goal, patch)?;
    goal.updated_at = ctx.now();
    Ok(Decision {
        note: note(
            &goal.company_id,
            "goal",
            id,
            json!({ "status": goal.status }),
        ),
        outcome: Outcome::Goal(goal.clone()),
        changes: vec![Change::Goal(goal)],
    })
}

pub(crate) fn delete_goal(ctx: &Ctx<'_>, id: &str) -> Result<Decision, DomainError> {
    let goal = ctx
        .state
        .goals
        .get(id)
        .ok_or_else(|| DomainError::not_found("goal", id))?;
    ctx.require_company(&goal.company_id, "goal", id)?;
    ctx.require_admin("delete a goal")?;
    let mut changes = Vec::new();
    for child in ctx
        .state
        .goals
        .values()
        .filter(|g| g.parent_id.as_deref() == Some(id))
    {
        let mut c = child.clone();
        c.parent_id = None;
        c.updated_at = ctx.now();
        changes.push(Change::Goal(c));
    }
    for p in ctx
        .state
        .projects
        .values()
        .filter(|p| p.goal_ids.iter().any(|g| g == id))
    {
        let mut p = p.clone();
        p.goal_ids.retain(|g| g != id);
        p.goal_id = p.goal_ids.first().cloned();
        p.updated_at = ctx.now();
        changes.push(Change::Project(p));
    }
    // By the goal index (`issue_index.rs`): most of a company's issues may be closed and in
    // state.db only. The rows commute, so their order does not change the state.
    for issue in ctx.state.issues_of_goal(id) {
        let mut i = issue.into_owned();
        i.goal_id = None;
        i.updated_at = ctx.now();
        changes.push(Change::Issue(i.into()));
    }
    changes.push(Change::GoalDeleted(id.into()));
    Ok(Decision {
        note: note(
            &goal.company_id,
            "goal",
            id,
            json!({ "deleted": true, "title": goal.title }),
        ),
        outcome: Outcome::Goal(goal.clone()),
        changes,
    })
}

fn apply_project(ctx: &Ctx<'_>, p: &mut Project, patch: &ProjectPatch) -> Result<(), DomainError> {
    if let Some(name) = &patch.name {
        p.name = require_text("name", name, MAX_NAME_CHARS)?;
    }
    if let Some(d) = &patch.description {
        text("description", d, MAX_DESCRIPTION_CHARS)?;
        p.description = d.clone();
    }
    if let Some(status) = patch.status {
        p.status = status;
    }
    if let Some(lead) = &patch.lead_agent_id {
        if let Some(id) = lead {
            agent_in(ctx, &p.company_id, "leadAgentId", id)?;
        }
        p.lead_agent_id = lead.clone();
    }
    if let Some(goals) = &patch.goal_ids {
        if goals.len() > 50 {
            return Err(DomainError::too_large("goalIds", 50, "goals"));
        }
        let mut kept: Vec<String> = Vec::new();
        for g in goals {
            goal_in(ctx, &p.company_id, g)?;
            if !kept.contains(g) {
                kept.push(g.clone());
            }
        }
        p.goal_id = kept.first().cloned();
        p.goal_ids = kept;
    }
    if let Some(date) = &patch.target_date {
        text("targetDate", date, 64)?;
        p.target_date = date.clone();
    }
    if let Some(color) = &patch.color {
        text("color", color, 64)?;
        p.color = color.clone();
    }
    if let Some(reason) = &patch.pause_reason {
        text("pauseReason", reason, MAX_NAME_CHARS)?;
        p.pause_reason = reason.clone();
    }
    match patch.paused {
        Some(true) if p.paused_at.is_none() => p.paused_at = Some(ctx.now()),
        Some(false) => {
            p.paused_at = None;
            p.pause_reason = None;
        }
        _ => {}
    }
    Ok(())
}

pub(crate) fn create_project(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    fields: &ProjectPatch,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    require_member(ctx, company_id, "project", id)?;
    if ctx.state.projects.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "project".into(),
            id: id.into(),
        });
    }
    let count = ctx
        .state
        .projects
        .values()
        .filter(|p| p.company_id == company_id)
        .count();
    if count >= MAX_PROJECTS_PER_COMPANY {
        return Err(DomainError::quota(
            "projects",
            MAX_PROJECTS_PER_COMPANY as u64,
            format!("this company has {count} projects, the most it may have"),
        ));
    }
    let name = fields
        .name
        .as_deref()
        .ok_or_else(|| DomainError::invalid("name", "a project needs a name"))?;
    let mut project = Project {
        id: id.into(),
        company_id: company_id.into(),
        name: require_text("name", name, MAX_NAME_CHARS)?,
        description: None,
        status: ProjectStatus::Backlog,
        lead_agent_id: None,
        goal_ids: Vec::new(),
        goal_id: None,
        target_date: None,
        color: None,
        paused_at: None,
        pause_reason: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    apply_project(ctx, &mut project, fields)?;
    Ok(Decision {
        note: note(company_id, "project", id, json!({ "name": project.name })),
        outcome: Outcome::Project(project.clone()),
        changes: vec![Change::Project(project)],
    })
}

pub(crate) fn update_project(
    ctx: &Ctx<'_>,
    id: &str,
    patch: &ProjectPatch,
) -> Result<Decision, DomainError> {
    let current = ctx
        .state
        .projects
        .get(id)
        .ok_or_else(|| DomainError::not_found("project", id))?;
    require_member(ctx, &current.company_id, "project", id)?;
    let mut p = current.clone();
    apply_project(ctx, &mut p, patch)?;
    p.updated_at = ctx.now();
    Ok(Decision {
        note: note(
            &p.company_id,
            "project",
            id,
            json!({ "status": p.status, "paused": p.paused_at.is_some() }),
        ),
        outcome: Outcome::Project(p.clone()),
        changes: vec![Change::Project(p)],
    })
}

pub(crate) fn delete_project(ctx: &Ctx<'_>, id: &str) -> Result<Decision, DomainError> {
    let p = ctx
        .state
        .projects
        .get(id)
        .ok_or_else(|| DomainError::not_found("project", id))?;
    ctx.require_company(&p.company_id, "project", id)?;
    ctx.require_admin("delete a project")?;
    let mut changes = Vec::new();
    // By the project index, as a goal's deletion does.
    for issue in ctx.state.issues_of_project(id) {
        let mut i = issue.into_owned();
        i.project_id = None;
        i.updated_at = ctx.now();
        changes.push(Change::Issue(i.into()));
    }
    changes.push(Change::ProjectDeleted(id.into()));
    Ok(Decision {
        note: note(
            &p.company_id,
            "project",
            id,
            json!({ "deleted": true, "name": p.name }),
        ),
        outcome: Outcome::Project(p.clone()),
        changes,
    })
}
