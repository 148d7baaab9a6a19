//! Runs in their minimal form: started by an administrator for an agent, ended with a terminal
//! status. Ending a run releases every checkout it holds in the same command.

use serde_json::json;

use super::agent::visible_agent;
use super::{end_run, require_id, require_text, Ctx};
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn start(
    ctx: &Ctx<'_>,
    id: &str,
    agent_id: &str,
    issue_id: Option<&str>,
    source: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("start a run")?;
    require_id("id", id)?;
    let source = require_text("invocationSource", source, 50)?;
    let agent = visible_agent(ctx, agent_id)?;
    if agent.status != AgentStatus::Active {
        return Err(DomainError::conflict(format!(
            "agent {agent_id} is {}",
            agent.status
        )));
    }
    if let Some(issue_id) = issue_id {
        if ctx
            .state
            .issues
            .get(issue_id)
            .is_none_or(|i| i.company_id != agent.company_id)
        {
            return Err(DomainError::not_found("issue", issue_id));
        }
    }
    if ctx.state.runs.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "run".into(),
            id: id.into(),
        });
    }
    let run = Run {
        id: id.into(),
        company_id: agent.company_id.clone(),
        agent_id: agent_id.into(),
        issue_id: issue_id.map(str::to_string),
        status: RunStatus::Running,
        invocation_source: source,
        error: None,
        created_at: ctx.now(),
        started_at: Some(ctx.now()),
        finished_at: None,
    };
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "agentId": agent_id, "issueId": issue_id }),
    };
    Ok(Decision {
        outcome: Outcome::Run(run.clone()),
        changes: vec![Change::Run(run)],
        note,
    })
}

pub(crate) fn finish(
    ctx: &Ctx<'_>,
    run_id: &str,
    status: RunStatus,
    error: Option<&str>,
) -> Result<Decision, DomainError> {
    let run = ctx
        .state
        .runs
        .get(run_id)
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    ctx.require_company(&run.company_id, "run", run_id)?;
    match ctx.actor.agent_id() {
        Some(agent) if agent != run.agent_id => return Err(DomainError::not_found("run", run_id)),
        _ => {}
    }
    if status.is_live() {
        return Err(DomainError::invalid(
            "status",
            "a run can only be finished with a terminal status",
        ));
    }
    if !run.status.is_live() {
        return Err(DomainError::StaleRun {
            run_id: run_id.into(),
            status: run.status.as_str().into(),
        });
    }
    let released: Vec<String> = ctx
        .state
        .issues_checked_out_by(run_id)
        .map(|i| i.id.clone())
        .collect();
    let changes = end_run(ctx, run, status, error);
    let ended = changes
        .iter()
        .find_map(|c| match c {
            Change::Run(r) => Some(r.clone()),
            _ => None,
        })
        .ok_or_else(|| DomainError::conflict("run could not be ended"))?;
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "status": status, "releasedIssues": released }),
    };
    Ok(Decision {
        outcome: Outcome::Run(ended),
        changes,
        note,
    })
}
