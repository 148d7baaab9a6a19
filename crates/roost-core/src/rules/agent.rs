//! Agents and their credentials.

use serde_json::{json, Map, Value};

use super::{end_run, require_id, require_text, Ctx};
use crate::adapter_config;
use crate::command::{AgentPatch, Command, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

/// An activity note about `agent`, in its company.
pub(super) fn agent_note(agent: &Agent, details: serde_json::Value) -> ActivityNote {
    ActivityNote {
        company_id: Some(agent.company_id.clone()),
        entity_type: "agent",
        entity_id: agent.id.clone(),
        details,
    }
}

/// Finds an agent the actor may see.
pub(crate) fn visible_agent<'a>(ctx: &Ctx<'a>, agent_id: &str) -> Result<&'a Agent, DomainError> {
    let agent = ctx
        .state
        .agents
        .get(agent_id)
        .ok_or_else(|| DomainError::not_found("agent", agent_id))?;
    ctx.require_company(&agent.company_id, "agent", agent_id)?;
    Ok(agent)
}

fn name_taken(ctx: &Ctx<'_>, company_id: &str, name: &str, except: Option<&str>) -> bool {
    ctx.state.agents.values().any(|a| {
        a.company_id == company_id
            && a.status != AgentStatus::Terminated
            && Some(a.id.as_str()) != except
            && a.name.eq_ignore_ascii_case(name)
    })
}

fn validate_heartbeat(policy: &HeartbeatPolicy) -> Result<(), DomainError> {
    if policy.max_concurrent_runs == 0 || policy.max_concurrent_runs > 50 {
        return Err(DomainError::invalid(
            "heartbeat.maxConcurrentRuns",
            "must be between 1 and 50",
        ));
    }
    if policy.enabled && policy.interval_sec < 10 {
        return Err(DomainError::invalid(
            "heartbeat.intervalSec",
            "must be at least 10 when enabled",
        ));
    }
    Ok(())
}

pub(crate) fn create(ctx: &Ctx<'_>, command: &Command) -> Result<Decision, DomainError> {
    ctx.require_admin("create an agent")?;
    let agent = new_agent(ctx, command)?;
    let note = agent_note(
        &agent,
        json!({ "name": agent.name, "role": agent.role, "adapterType": agent.adapter_type }),
    );
    Ok(Decision {
        outcome: Outcome::Agent(agent.clone()),
        changes: vec![Change::Agent(agent)],
        note,
    })
}

/// `HireAgent`: an administrator, or an agent granted `canCreateAgents`, adds an agent to its
/// company; with the company's `requireBoardApprovalForNewAgents` it waits in
/// `pending_approval` on a `hire_agent` approval (`rules/approval.rs`) whose payload is the
/// caller's.
pub(crate) fn hire(
    ctx: &Ctx<'_>,
    approval_id: &str,
    command: &Command,
    payload: &serde_json::Value,
) -> Result<Decision, DomainError> {
    if let Some(own) = ctx.actor.agent_id() {
        let granted = ctx
            .state
            .agents
            .get(own)
            .is_some_and(|a| a.permissions.can_create_agents && a.exercises_grants());
        if !granted {
            return Err(DomainError::forbidden(
                "this agent may not hire agents: an administrator grants canCreateAgents",
            ));
        }
    } else {
        ctx.require_admin("hire an agent")?;
    }
    ctx.fence()?;
    let mut agent = new_agent(ctx, command)?;
    if ctx.actor.agent_id().is_some() && agent.is_ceo() {
        return Err(DomainError::forbidden(
            "only an administrator makes an agent its company's ceo",
        ));
    }
    let company = ctx
        .state
        .companies
        .get(&agent.company_id)
        .ok_or_else(|| DomainError::not_found("company", &agent.company_id))?;
    let approval = if company.require_board_approval_for_new_agents {
        agent.status = AgentStatus::PendingApproval;
        let mut body = payload.clone();
        if let Some(map) = body.as_object_mut() {
            map.insert("agentId".into(), json!(agent.id));
        }
        Some(super::approval::new_approval(
            ctx,
            approval_id,
            &agent.company_id,
            crate::approval::ApprovalType::HireAgent,
            &body,
            None,
            &[],
            Some(&agent.id),
        )?)
    } else {
        None
    };
    let note = agent_note(
        &agent,
        json!({ "name": agent.name, "hired": true, "approvalId": approval.as_ref().map(|a| &a.id) }),
    );
    let mut changes = vec![Change::Agent(agent.clone())];
    changes.extend(approval.clone().map(Change::Approval));
    Ok(Decision {
        outcome: Outcome::Hire { agent, approval },
        changes,
        note,
    })
}

/// The agent a `CreateAgent` describes, checked against the state (not against the actor).
fn new_agent(ctx: &Ctx<'_>, command: &Command) -> Result<Agent, DomainError> {
    let Command::CreateAgent {
        id,
        company_id,
        name,
        role,
        title,
        adapter_type,
        adapter_config,
        heartbeat,
        placement_labels,
    } = command
    else {
        return Err(DomainError::invalid("command", "not an agent creation"));
    };
    require_id("id", id)?;
    let company = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(&company.id, "company", company_id)?;
    let name = require_text("name", name, 100)?;
    let role = require_text("role", role, 50)?;
    let adapter_config = adapter_config::resolve(adapter_config, None)?;
    validate_heartbeat(heartbeat)?;
    if ctx.state.agents.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "agent".into(),
            id: id.clone(),
        });
    }
    let agents = ctx
        .state
        .agents
        .values()
        .filter(|a| a.company_id == *company_id)
        .count();
    if agents >= crate::limits::MAX_AGENTS_PER_COMPANY {
        return Err(DomainError::quota(
            "agents",
            crate::limits::MAX_AGENTS_PER_COMPANY as u64,
            format!("this company has {agents} agents, the most it may have"),
        ));
    }
    if name_taken(ctx, company_id, &name, None) {
        return Err(DomainError::conflict(format!(
            "an agent named {name} already exists in this company"
        )));
    }
    let agent = Agent {
        id: id.clone(),
        company_id: company_id.clone(),
        name,
        role,
        title: title.clone(),
        status: AgentStatus::Active,
        pause_reason: None,
        adapter_type: *adapter_type,
        adapter_config,
        heartbeat: heartbeat.clone(),
        placement_labels: placement_labels.clone(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
        last_heartbeat_at: None,
        task_sessions: Default::default(),
        permissions: Default::default(),
        session_rotation: Default::default(),
        home_max_bytes: crate::home::DEFAULT_HOME_MAX_BYTES,
        loop_breaker: Default::default(),
        loop_window_since: None,
        reports_to: None,
        desired_skills: Vec::new(),
    };
    Ok(agent)
}

pub(crate) fn update(
    ctx: &Ctx<'_>,
    agent_id: &str,
    patch: &AgentPatch,
) -> Result<Decision, DomainError> {
    let current = visible_agent(ctx, agent_id)?;
    if ctx.actor.agent_id().is_some() {
        ceo_grants_only(ctx, current, patch)?;
    } else {
        ctx.require_admin("update an agent")?;
    }
    if current.status == AgentStatus::Terminated {
        return Err(DomainError::conflict(
            "a terminated agent cannot be changed",
        ));
    }
    let mut agent = current.clone();
    if let Some(name) = &patch.name {
        agent.name = require_text("name", name, 100)?;
        if name_taken(ctx, &agent.company_id, &agent.name, Some(agent_id)) {
            return Err(DomainError::conflict(format!(
                "an agent named {} already exists in this company",
                agent.name
            )));
        }
    }
    if let Some(role) = &patch.role {
        agent.role = require_text("role", role, 50)?;
    }
    if let Some(title) = &patch.title {
        agent.title = title.clone();
    }
    if let Some(adapter_type) = patch.adapter_type {
        agent.adapter_type = adapter_type;
    }
    if let Some(config) = &patch.adapter_config {
        agent.adapter_config = adapter_config::resolve(config, Some(&current.adapter_config))?;
    }
    if let Some(policy) = &patch.heartbeat {
        validate_heartbeat(policy)?;
        agent.heartbeat = policy.clone();
    }
    if let Some(labels) = &patch.placement_labels {
        agent.placement_labels = labels.clone();
    }
    if let Some(permissions) = patch.permissions {
        agent.permissions = permissions;
    }
    if let Some(can) = patch.can_create_agents {
        agent.permissions.can_create_agents = can;
    }
    if let Some(rotation) = patch.session_rotation {
        agent.session_rotation = rotation;
    }
    if let Some(cap) = patch.home_max_bytes {
        agent.home_max_bytes = cap;
    }
    if let Some(lb) = patch.loop_breaker {
        agent.loop_breaker = lb;
    }
    if let Some(manager) = &patch.reports_to {
        agent.reports_to = super::org::check_manager(ctx, &agent, manager.as_deref())?;
    }
    agent.updated_at = ctx.now();
    let note = agent_note(&agent, update_details(current, &agent, patch));
    let revision = crate::agent_revision::record(ctx, current, &agent, patch);
    let mut changes = vec![Change::Agent(agent.clone())];
    changes.extend(revision.map(|r| Change::AgentRevision(Box::new(r))));
    Ok(Decision {
        outcome: Outcome::Agent(agent),
        changes,
        note,
    })
}

/// An agent changes another agent only as Paperclip's `PATCH /api/agents/{id}/permissions`
/// lets it: its company's `ceo`, granting or withdrawing `canCreateAgents` of another agent and
/// nothing else, fenced on its run like any agent's write. The other grants stay with
/// administrators (reading every run's logs is not a hiring right), and a ceo does not grant
/// itself: hiring stays a right someone else gave it.
fn ceo_grants_only(ctx: &Ctx<'_>, target: &Agent, patch: &AgentPatch) -> Result<(), DomainError> {
    let own = ctx.actor.agent_id();
    let ceo = own
        .and_then(|own| ctx.state.agents.get(own))
        .is_some_and(|a| a.is_ceo() && a.exercises_grants() && a.company_id == target.company_id);
    if !ceo {
        return Err(DomainError::forbidden(
            "only an administrator, or the company's ceo agent granting canCreateAgents, may \
             change an agent",
        ));
    }
    let grants_only = patch.can_create_agents.is_some()
        && *patch
            == AgentPatch {
                can_create_agents: patch.can_create_agents,
                ..AgentPatch::default()
            };
    if !grants_only {
        return Err(DomainError::forbidden(
            "a ceo agent may only grant or withdraw canCreateAgents; an administrator changes \
             the rest",
        ));
    }
    if own == Some(target.id.as_str()) {
        return Err(DomainError::forbidden(
            "a ceo agent cannot change its own grants; an administrator can",
        ));
    }
    ctx.fence()?;
    Ok(())
}

/// What the activity log keeps of an update: the names of the fields that changed, and the new
/// values of the harmless ones. Never an `adapterConfig` value: every agent of the company reads
/// the activity log, and an entry stays in the hash chain for good.
fn update_details(before: &Agent, after: &Agent, patch: &AgentPatch) -> Value {
    let mut changed = Vec::new();
    let mut details = Map::new();
    // A field the patch sent: its new value, and its name if the value changed.
    macro_rules! harmless {
        ($($name:literal => $field:ident),+) => {$(
            if patch.$field.is_some() {
                details.insert($name.into(), json!(after.$field));
                if before.$field != after.$field {
                    changed.push($name.to_string());
                }
            }
        )+};
    }
    harmless!(
        "name" => name,
        "role" => role,
        "title" => title,
        "adapterType" => adapter_type,
        "heartbeat" => heartbeat,
        "placementLabels" => placement_labels,
        "permissions" => permissions,
        "sessionRotation" => session_rotation,
        "homeMaxBytes" => home_max_bytes,
        "loopBreaker" => loop_breaker,
        "reportsTo" => reports_to
    );
    if patch.can_create_agents.is_some() {
        let (was, is) = (
            before.permissions.can_create_agents,
            after.permissions.can_create_agents,
        );
        details.insert("canCreateAgents".into(), json!(is));
        if was != is {
            changed.push("permissions.canCreateAgents".to_string());
        }
    }
    changed.extend(adapter_config::changed_paths(
        "adapterConfig",
        &before.adapter_config,
        &after.adapter_config,
    ));
    details.insert("changed".into(), json!(changed));
    if let Some(revision) = &patch.rolled_back_from {
        details.insert("rolledBackFromRevisionId".into(), json!(revision));
    }
    Value::Object(details)
}

/// Cancels the agent's live runs with `why` (their checkouts released): the changes, and the
/// runs' ids. The live runs' index, not every run the fleet ever made (in id order).
fn cancel_live_runs(ctx: &Ctx<'_>, agent_id: &str, why: &str) -> (Vec<Change>, Vec<String>) {
    let mut changes = Vec::new();
    let mut cancelled = Vec::new();
    for run in ctx.state.live_runs().filter(|r| r.agent_id == agent_id) {
        cancelled.push(run.id.clone());
        changes.extend(end_run(ctx, run, RunStatus::Cancelled, Some(why)));
    }
    (changes, cancelled)
}

/// An agent whose hire waits for approval is neither paused nor resumed, as in Paperclip: its
/// `hire_agent` approval's decision activates or terminates it.
fn refuse_pending_hire(agent: &Agent, verb: &str) -> Result<(), DomainError> {
    if agent.status == AgentStatus::PendingApproval {
        return Err(DomainError::conflict(format!(
            "agent {} is waiting for its hire to be approved and cannot be {verb}; approve or \
             reject its hire_agent approval instead",
            agent.id
        )));
    }
    Ok(())
}

/// An operator's pause stops the agent now, as in Paperclip: its live runs are cancelled
/// (their checkouts released, their workers told), and no wake starts another until it is
/// resumed. It is the kill switch short of terminating.
pub(crate) fn pause(
    ctx: &Ctx<'_>,
    agent_id: &str,
    reason: PauseReason,
) -> Result<Decision, DomainError> {
    ctx.require_admin("pause an agent")?;
    let current = visible_agent(ctx, agent_id)?;
    if current.status == AgentStatus::Terminated {
        return Err(DomainError::conflict("a terminated agent cannot be paused"));
    }
    refuse_pending_hire(current, "paused")?;
    let (mut changes, cancelled_runs) = cancel_live_runs(ctx, agent_id, "agent_paused");
    // Through the row the runs' ends may have written (their `lastHeartbeatAt`), not over it.
    let mut agent = current.clone();
    super::budget::upsert_agent(ctx, &mut changes, agent_id, |a| {
        a.status = AgentStatus::Paused;
        a.pause_reason = Some(reason);
        a.updated_at = ctx.now();
        agent = a.clone();
    });
    let note = agent_note(
        &agent,
        json!({ "reason": reason, "cancelledRuns": cancelled_runs }),
    );
    Ok(Decision {
        outcome: Outcome::Agent(agent),
        changes,
        note,
    })
}

pub(crate) fn resume(ctx: &Ctx<'_>, agent_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("resume an agent")?;
    let current = visible_agent(ctx, agent_id)?;
    if current.status == AgentStatus::Terminated {
        return Err(DomainError::conflict(
            "a terminated agent cannot be resumed",
        ));
    }
    // Resuming would activate it past its hire's approval, whose decision then found no
    // pending agent to activate or terminate.
    refuse_pending_hire(current, "resumed")?;
    let mut agent = current.clone();
    agent.status = AgentStatus::Active;
    agent.pause_reason = None;
    // The loop breaker counts none of its earlier wakes (`rules/loop_breaker.rs`).
    agent.loop_window_since = Some(ctx.now());
    agent.updated_at = ctx.now();
    let note = agent_note(&agent, json!({}));
    Ok(Decision {
        outcome: Outcome::Agent(agent.clone()),
        changes: vec![Change::Agent(agent)],
        note,
    })
}

/// Forgets the agent's saved adapter sessions, all or one task's (Paperclip's
/// `runtime-state/reset-session`): the next run on that task starts fresh, with its memory.
pub(crate) fn reset_session(
    ctx: &Ctx<'_>,
    agent_id: &str,
    task_key: Option<&str>,
) -> Result<Decision, DomainError> {
    ctx.require_admin("reset an agent's sessions")?;
    let mut agent = visible_agent(ctx, agent_id)?.clone();
    let before = agent.task_sessions.len();
    match task_key {
        Some(key) => agent.task_sessions.retain(|_, s| s.task_key != key),
        None => agent.task_sessions.clear(),
    }
    let removed = before - agent.task_sessions.len();
    agent.updated_at = ctx.now();
    let note = agent_note(
        &agent,
        json!({ "taskKey": task_key, "sessionsRemoved": removed }),
    );
    Ok(Decision {
        outcome: Outcome::Agent(agent.clone()),
        changes: vec![Change::Agent(agent)],
        note,
    })
}

/// Termination is final: the agent's keys are revoked and its live runs are cancelled, which
/// releases their checkouts.
pub(crate) fn terminate(ctx: &Ctx<'_>, agent_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("terminate an agent")?;
    let current = visible_agent(ctx, agent_id)?;
    if current.status == AgentStatus::Terminated {
        return Err(DomainError::conflict("the agent is already terminated"));
    }
    let stopped = stop_for_good(ctx, current, "agent_terminated");
    let note = agent_note(
        &stopped.agent,
        json!({ "cancelledRuns": stopped.cancelled_runs, "revokedKeys": stopped.revoked_keys }),
    );
    Ok(Decision {
        outcome: Outcome::Agent(stopped.agent),
        changes: stopped.changes,
        note,
    })
}

/// An agent stopped for good: terminated, its live runs cancelled (`why`), its keys revoked.
/// `agent` is its row as `changes` leave it (the cancelled runs' ends stamp it too).
pub(super) struct Stopped {
    pub agent: Agent,
    pub changes: Vec<Change>,
    pub cancelled_runs: Vec<String>,
    pub revoked_keys: Vec<String>,
}

pub(super) fn stop_for_good(ctx: &Ctx<'_>, current: &Agent, why: &str) -> Stopped {
    let (mut changes, cancelled_runs) = cancel_live_runs(ctx, &current.id, why);
    let mut revoked_keys = Vec::new();
    for cred in ctx
        .state
        .credentials
        .values()
        .filter(|c| c.agent_id.as_deref() == Some(current.id.as_str()) && !c.revoked)
    {
        let mut revoked = cred.clone();
        revoked.revoked = true;
        revoked.revoked_at = Some(ctx.now());
        revoked_keys.push(cred.id.clone());
        changes.push(Change::Credential(revoked));
    }
    // Through the row the runs' ends may have written (their `lastHeartbeatAt`), not over it.
    let mut agent = current.clone();
    super::budget::upsert_agent(ctx, &mut changes, &current.id, |a| {
        a.status = AgentStatus::Terminated;
        a.pause_reason = None;
        a.updated_at = ctx.now();
        agent = a.clone();
    });
    Stopped {
        agent,
        changes,
        cancelled_runs,
        revoked_keys,
    }
}

pub(crate) fn create_credential(
    ctx: &Ctx<'_>,
    id: &str,
    kind: CredentialKind,
    name: &str,
    agent_id: Option<&str>,
    token_hash: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("create credentials")?;
    require_id("id", id)?;
    let name = require_text("name", name, 100)?;
    if token_hash.len() != 64 || !token_hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(DomainError::invalid(
            "tokenHash",
            "must be a hex SHA-256 digest",
        ));
    }
    if ctx.state.credentials.contains_key(id)
        || ctx.state.credential_by_token_hash(token_hash).is_some()
    {
        return Err(DomainError::AlreadyExists {
            entity: "credential".into(),
            id: id.into(),
        });
    }
    let (agent_id, company_id) = match kind {
        CredentialKind::Admin | CredentialKind::WorkerJoin => {
            if agent_id.is_some() {
                return Err(DomainError::invalid(
                    "agentId",
                    "admin tokens and worker join tokens belong to no agent",
                ));
            }
            if ctx.actor.company_id.is_some() {
                return Err(DomainError::forbidden(
                    "a company-scoped token cannot mint admin tokens",
                ));
            }
            (None, None)
        }
        CredentialKind::Worker => {
            return Err(DomainError::invalid(
                "kind",
                "a worker credential is made only by a worker exchanging its join token",
            ))
        }
        CredentialKind::AgentKey => {
            let agent_id = agent_id
                .ok_or_else(|| DomainError::invalid("agentId", "an agent key needs an agent"))?;
            let agent = visible_agent(ctx, agent_id)?;
            if agent.status == AgentStatus::Terminated {
                return Err(DomainError::conflict("a terminated agent cannot get keys"));
            }
            (Some(agent.id.clone()), Some(agent.company_id.clone()))
        }
    };
    let credential = Credential {
        agent_id: agent_id.clone(),
        company_id: company_id.clone(),
        ..Credential::new(id, kind, name.clone(), token_hash, ctx.now())
    };
    let note = ActivityNote {
        company_id,
        entity_type: "credential",
        entity_id: id.into(),
        details: json!({ "kind": kind, "name": name, "agentId": agent_id }),
    };
    Ok(Decision {
        outcome: Outcome::Credential(credential.clone()),
        changes: vec![Change::Credential(credential)],
        note,
    })
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
