//! Runs in their minimal form: started by an administrator for an agent, ended with a terminal
//! status. Ending a run releases every checkout it holds in the same command.

use serde_json::json;

use super::agent::visible_agent;
use super::{budget, end_run, require_id, require_text, Ctx};
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::limits::MAX_RUNS_PER_HOUR_PER_COMPANY;
use crate::state::{ActivityNote, Change, Decision};
use crate::time::Timestamp;

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
    if let Some(why) = super::wake::company_halt(ctx.state, &agent.company_id) {
        return Err(DomainError::conflict(format!(
            "company {} starts no runs ({why}); set its status to active first",
            agent.company_id
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
    check_quota(ctx, &agent.company_id)?;
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
        wake_id: None,
        wake_reason: None,
        comment_ids: Vec::new(),
        payload: serde_json::Value::Null,
        worker_id: None,
        assigned_at: None,
        retry_of_run_id: None,
        token_hashes: Vec::new(),
        usage: Usage::default(),
        session_id_before: None,
        session_id_after: None,
        session_reset: false,
        session_rotated: None,
        log_tail: String::new(),
        log_bytes: 0,
        summary: None,
        reserved_cents: 0,
        workspace_path: None,
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
    report: &RunReport,
) -> Result<Decision, DomainError> {
    check_report(report)?;
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
    if ctx.actor.kind == crate::command::ActorKind::Worker
        && run.worker_id.as_deref() != Some(ctx.actor.id.as_str())
    {
        return Err(DomainError::StaleRun {
            run_id: run_id.into(),
            status: "reassigned".into(),
        });
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
        .issue_ids_checked_out_by(run_id)
        .map(str::to_string)
        .collect();
    if !run.usage.can_grow_to(&report.usage) && report.usage != Usage::default() {
        return Err(DomainError::invalid(
            "usage",
            "usage is cumulative and cannot go down",
        ));
    }
    // The final usage is what gets settled.
    let mut base = run.clone();
    if report.usage != Usage::default() {
        base.usage = report.usage;
    }
    let mut changes = end_run(ctx, &base, status, error);
    for change in &mut changes {
        match change {
            Change::Run(r) if r.id == run.id => record_report(r, report),
            Change::Agent(a) if a.id == run.agent_id => save_session(ctx, a, run, report),
            _ => {}
        }
    }
    let ended = changes
        .iter()
        .find_map(|c| match c {
            Change::Run(r) if r.id == run.id => Some(r.clone()),
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

fn check_report(report: &RunReport) -> Result<(), DomainError> {
    if report.log_tail.len() > LOG_TAIL_MAX_BYTES {
        return Err(DomainError::invalid(
            "logTail",
            format!("at most {LOG_TAIL_MAX_BYTES} bytes"),
        ));
    }
    if report.summary.as_ref().is_some_and(|s| s.len() > 4000) {
        return Err(DomainError::invalid("summary", "at most 4000 bytes"));
    }
    if report
        .workspace_path
        .as_ref()
        .is_some_and(|p| p.len() > 4096 || p.chars().any(char::is_control))
    {
        return Err(DomainError::invalid(
            "workspacePath",
            "at most 4096 bytes, no control characters",
        ));
    }
    if let Some(id) = &report.session_id {
        if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
            return Err(DomainError::invalid(
                "sessionId",
                "1-200 printable characters",
            ));
        }
    }
    Ok(())
}

fn record_report(run: &mut Run, report: &RunReport) {
    if report.usage != Usage::default() {
        run.usage = report.usage;
    }
    run.session_id_after = report.session_id.clone();
    run.session_reset = report.session_reset;
    run.log_tail = report.log_tail.clone();
    run.log_bytes = report.log_bytes;
    run.summary = report.summary.clone();
    if report.workspace_path.is_some() {
        run.workspace_path = report.workspace_path.clone();
    }
}

/// The session the run ended in becomes the agent's session for the task.
fn save_session(ctx: &Ctx<'_>, agent: &mut Agent, run: &Run, report: &RunReport) {
    let Some(session_id) = &report.session_id else {
        return;
    };
    let task = task_key(run.issue_id.as_deref()).to_string();
    let key = format!("{}:{task}", agent.adapter_type);
    let usage = if report.usage == Usage::default() {
        run.usage
    } else {
        report.usage
    };
    let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
    // The same session again counts on; a new one (fresh, reset or rotated) counts from one.
    let previous = agent
        .task_sessions
        .get(&key)
        .filter(|p| &p.session_id == session_id);
    let (runs, tokens, started_at) = match previous {
        Some(p) => (
            p.runs.saturating_add(1),
            p.tokens.saturating_add(tokens),
            p.started_at.or(Some(p.updated_at)),
        ),
        None => (1, tokens, Some(ctx.now())),
    };
    agent.task_sessions.insert(
        key,
        TaskSession {
            task_key: task,
            adapter_type: agent.adapter_type,
            session_id: session_id.clone(),
            worker_id: run.worker_id.clone(),
            last_run_id: run.id.clone(),
            updated_at: ctx.now(),
            runs,
            tokens,
            started_at,
        },
    );
}

/// Which saved session a run for `wake` resumes at `now`: none for a timer or a new assignment
/// (they start fresh, as in Paperclip), nor when the wake asks for `forceFreshSession`, nor
/// when the session passed the agent's rotation limits (then also why, for the prompt's
/// hand-off note).
pub fn session_to_resume<'a>(
    agent: &'a Agent,
    wake: &Wake,
    now: Timestamp,
) -> (Option<&'a str>, Option<String>) {
    if matches!(
        wake.reason,
        WakeReason::HeartbeatTimer | WakeReason::IssueAssigned
    ) || wake.payload["forceFreshSession"] == serde_json::Value::Bool(true)
    {
        return (None, None);
    }
    let Some(session) = agent.task_session(task_key(wake.issue_id.as_deref())) else {
        return (None, None);
    };
    match agent.session_rotation.passed(session, now) {
        Some(why) => (
            None,
            Some(format!("session {} was retired: {why}", session.session_id)),
        ),
        None => (Some(session.session_id.as_str()), None),
    }
}

/// `ReportUsage`: a running run's cumulative usage, from its worker's lease renewal.
pub(crate) fn report_usage(
    ctx: &Ctx<'_>,
    run_id: &str,
    usage: &Usage,
) -> Result<Decision, DomainError> {
    let run = ctx
        .state
        .runs
        .get(run_id)
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    let by_its_worker = ctx.actor.kind == crate::command::ActorKind::Worker
        && run.worker_id.as_deref() == Some(ctx.actor.id.as_str());
    if !by_its_worker && !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only the run's worker reports its usage",
        ));
    }
    if !run.status.is_live() {
        return Err(DomainError::StaleRun {
            run_id: run_id.into(),
            status: run.status.as_str().into(),
        });
    }
    if !run.usage.can_grow_to(usage) {
        return Err(DomainError::invalid(
            "usage",
            "usage is cumulative and cannot go down",
        ));
    }
    let mut next = run.clone();
    next.usage = *usage;
    let cents = usage.cost_cents();
    if cents > run.reserved_cents {
        // Metering: the reservation grows by the agent's reserve while every budget has room;
        // when one has none, the run is cancelled and what it used is settled.
        let agent = ctx
            .state
            .agents
            .get(&run.agent_id)
            .ok_or_else(|| DomainError::not_found("agent", &run.agent_id))?;
        let room = budget::room_for(ctx.state, agent, run_id, ctx.now());
        if cents > room {
            let why = format!("budget_exceeded: the run used {cents}¢ with room for {room}¢");
            let changes = end_run(ctx, &next, RunStatus::Cancelled, Some(&why));
            let ended = changes
                .iter()
                .find_map(|c| match c {
                    Change::Run(r) if r.id == run.id => Some(r.clone()),
                    _ => None,
                })
                .unwrap_or(next);
            let note = ActivityNote {
                company_id: Some(run.company_id.clone()),
                entity_type: "run",
                entity_id: run.id.clone(),
                details: json!({ "usage": usage, "cancelled": why }),
            };
            return Ok(Decision {
                outcome: Outcome::Run(ended),
                changes,
                note,
            });
        }
        next.reserved_cents = cents
            .saturating_add(agent.heartbeat.run_reserve_cents)
            .min(room);
    }
    let changes = if next == *run {
        Vec::new()
    } else {
        vec![Change::Run(next.clone())]
    };
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "usage": usage }),
    };
    Ok(Decision {
        outcome: Outcome::Run(next),
        changes,
        note,
    })
}

/// Whether `worker` can take a run of `agent` now: online, the adapter, the labels, a free slot.
pub fn worker_fits(
    state: &crate::state::State,
    worker: &Worker,
    agent: &Agent,
) -> Result<(), String> {
    worker_suits(worker, agent)?;
    let busy = state
        .live_runs()
        .filter(|r| r.worker_id.as_deref() == Some(worker.id.as_str()))
        .count();
    if busy as u32 >= worker.slots {
        return Err(format!(
            "worker {} has no free slot ({busy} of {})",
            worker.id, worker.slots
        ));
    }
    Ok(())
}

/// Whether `worker` could ever run `agent`: online, the adapter, the placement labels (free
/// slots aside).
pub fn worker_suits(worker: &Worker, agent: &Agent) -> Result<(), String> {
    if worker.status != WorkerStatus::Online {
        return Err(format!("worker {} is {}", worker.id, worker.status));
    }
    if !worker.adapters.contains(&agent.adapter_type) {
        return Err(format!(
            "worker {} has no {} adapter",
            worker.id, agent.adapter_type
        ));
    }
    if let Some((k, v)) = agent
        .placement_labels
        .iter()
        .find(|(k, v)| worker.labels.get(*k) != Some(*v))
    {
        return Err(format!("worker {} lacks label {k}={v}", worker.id));
    }
    Ok(())
}

/// Why `company_id` may start no run at `now`: its runs-per-hour quota is used up.
pub fn quota_blocker(
    state: &crate::state::State,
    company_id: &str,
    now: Timestamp,
) -> Option<String> {
    let started = state.runs_in_hour(company_id, now);
    (started >= MAX_RUNS_PER_HOUR_PER_COMPANY).then(|| {
        format!(
            "quota: this company started {started} runs this hour, the most it may; the next hour starts more"
        )
    })
}

fn check_quota(ctx: &Ctx<'_>, company_id: &str) -> Result<(), DomainError> {
    match quota_blocker(ctx.state, company_id, ctx.now()) {
        Some(why) => Err(DomainError::quota(
            "runs_per_hour",
            u64::from(MAX_RUNS_PER_HOUR_PER_COMPANY),
            why,
        )),
        None => Ok(()),
    }
}

/// Why a queued wake cannot become a run now, if it cannot: the agent's state, its
/// concurrency limit, a run of its own already on the issue (the wake is then a follow-up).
pub fn claim_blocker(state: &crate::state::State, wake: &Wake) -> Option<String> {
    let agent = state.agents.get(&wake.agent_id)?;
    if agent.status != AgentStatus::Active {
        return Some(format!("agent is {}", agent.status));
    }
    if let Some(why) = super::wake::company_halt(state, &agent.company_id) {
        return Some(why.replace('_', " "));
    }
    // A paused project holds its issues' runs until it is resumed (`rules/project.rs`).
    let project = wake
        .issue_id
        .as_ref()
        .and_then(|i| state.project_of(Some(i)))
        .and_then(|p| state.projects.get(&p));
    if let Some(p) = project.filter(|p| p.paused_at.is_some()) {
        return Some(format!(
            "project {} is paused{}",
            p.name,
            p.pause_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    let live: Vec<&Run> = state
        .live_runs()
        .filter(|r| r.agent_id == agent.id)
        .collect();
    if wake.issue_id.is_some() && live.iter().any(|r| r.issue_id == wake.issue_id) {
        return Some("follow-up: waits for the agent's run on this issue to end".into());
    }
    if live.len() as u32 >= agent.heartbeat.max_concurrent_runs {
        return Some(format!(
            "max_concurrent_runs ({}) reached",
            agent.heartbeat.max_concurrent_runs
        ));
    }
    None
}

/// `AssignRun`: the dispatcher turns a queued wake into a run on a worker. Everything is checked
/// again here, so concurrency limits hold cluster-wide whatever the dispatcher believed.
pub(crate) fn assign(
    ctx: &Ctx<'_>,
    wake_id: &str,
    run_id: &str,
    worker_id: &str,
    token_hash: Option<&str>,
) -> Result<Decision, DomainError> {
    ctx.require_admin("assign runs")?;
    require_id("runId", run_id)?;
    if let Some(hash) = token_hash {
        require_token_hash(ctx, hash)?;
    }
    let wake = ctx
        .state
        .wakes
        .get(wake_id)
        .ok_or_else(|| DomainError::not_found("wake", wake_id))?;
    if wake.status != WakeStatus::Queued {
        return Err(DomainError::conflict(format!(
            "wake {wake_id} is {}",
            wake.status
        )));
    }
    if ctx.state.runs.contains_key(run_id) {
        return Err(DomainError::AlreadyExists {
            entity: "run".into(),
            id: run_id.into(),
        });
    }
    let agent = ctx
        .state
        .agents
        .get(&wake.agent_id)
        .ok_or_else(|| DomainError::not_found("agent", &wake.agent_id))?;
    if let Some(holder) = super::wake::foreign_holder(ctx, &agent.id, wake.issue_id.as_deref()) {
        // Another agent's run took the issue since the wake was queued: wait for it.
        let mut deferred = wake.clone();
        deferred.status = WakeStatus::Deferred;
        deferred.status_reason = Some(format!(
            "issue held by run {} of agent {}",
            holder.id, holder.agent_id
        ));
        deferred.waiting_on_run = Some(holder.id.clone());
        deferred.updated_at = ctx.now();
        let note = ActivityNote {
            company_id: Some(wake.company_id.clone()),
            entity_type: "wake",
            entity_id: wake.id.clone(),
            details: super::wake::wake_details(&deferred),
        };
        return Ok(Decision {
            outcome: Outcome::Wake(deferred.clone()),
            changes: vec![Change::Wake(deferred)],
            note,
        });
    }
    // Checked again at the claim, as Paperclip does: wakes queued before the day's runs
    // reached a cap, or before a lower cap was set, start no run past it.
    if let Some(why) = super::claim::stale_at_claim(ctx, wake)
        .or_else(|| super::wake::daily_cap(ctx.state, agent, ctx.now()))
    {
        return Ok(super::claim::skip_at_claim(ctx, wake, why));
    }
    if let Some(why) = claim_blocker(ctx.state, wake) {
        return Err(DomainError::conflict(format!(
            "wake {wake_id} cannot run now: {why}"
        )));
    }
    let worker = ctx
        .state
        .workers
        .get(worker_id)
        .ok_or_else(|| DomainError::not_found("worker", worker_id))?;
    worker_fits(ctx.state, worker, agent).map_err(DomainError::conflict)?;
    let project = ctx.state.project_of(wake.issue_id.as_deref());
    if let Some(why) = budget::budget_blocker(ctx.state, agent, project.as_deref(), ctx.now()) {
        return budget_blocked(ctx, wake, agent, why);
    }
    check_quota(ctx, &agent.company_id)?;
    let (resume, rotated) = session_to_resume(agent, wake, ctx.now());
    let run = Run {
        id: run_id.into(),
        company_id: agent.company_id.clone(),
        agent_id: agent.id.clone(),
        issue_id: wake.issue_id.clone(),
        status: RunStatus::Assigned,
        invocation_source: wake.reason.as_str().into(),
        error: None,
        created_at: ctx.now(),
        started_at: None,
        finished_at: None,
        wake_id: Some(wake.id.clone()),
        wake_reason: Some(wake.reason),
        comment_ids: wake.comment_ids.clone(),
        payload: wake.payload.clone(),
        worker_id: Some(worker_id.into()),
        assigned_at: Some(ctx.now()),
        retry_of_run_id: wake.retry_of_run_id.clone(),
        token_hashes: token_hash.map(|h| vec![h.to_string()]).unwrap_or_default(),
        usage: Usage::default(),
        session_id_before: resume.map(str::to_string),
        session_id_after: None,
        session_reset: false,
        session_rotated: rotated,
        log_tail: String::new(),
        log_bytes: 0,
        summary: None,
        reserved_cents: agent.heartbeat.run_reserve_cents,
        workspace_path: None,
    };
    let mut claimed = wake.clone();
    claimed.status = WakeStatus::Claimed;
    claimed.run_id = Some(run_id.into());
    claimed.status_reason = None;
    claimed.updated_at = ctx.now();
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "wakeId": wake.id, "workerId": worker_id, "reason": wake.reason }),
    };
    Ok(Decision {
        outcome: Outcome::Run(run.clone()),
        changes: vec![Change::Wake(claimed), Change::Run(run)],
        note,
    })
}

/// A claim refused by a hard budget. The wake stays queued; when spend alone leaves no room
/// for the run (no reservation will free enough), a hard incident opens and the scope pauses.
fn budget_blocked(
    ctx: &Ctx<'_>,
    wake: &Wake,
    agent: &Agent,
    why: String,
) -> Result<Decision, DomainError> {
    let mut changes = Vec::new();
    let project = ctx.state.project_of(wake.issue_id.as_deref());
    for policy in budget::exhausted(ctx.state, agent, project.as_deref(), ctx.now()) {
        let spent = ctx.state.spent(policy, ctx.now());
        budget::stop_scope(ctx, policy, spent, &why, &mut changes);
    }
    if changes.is_empty() {
        return Err(DomainError::conflict(format!(
            "wake {} waits: {why}",
            wake.id
        )));
    }
    let mut waiting = wake.clone();
    waiting.status_reason = Some(why);
    waiting.updated_at = ctx.now();
    changes.push(Change::Wake(waiting.clone()));
    let note = ActivityNote {
        company_id: Some(wake.company_id.clone()),
        entity_type: "wake",
        entity_id: wake.id.clone(),
        details: super::wake::wake_details(&waiting),
    };
    Ok(Decision {
        outcome: Outcome::Wake(waiting),
        changes,
        note,
    })
}

/// `RunStarted`: the worker launched the agent process.
pub(crate) fn started(ctx: &Ctx<'_>, run_id: &str) -> Result<Decision, DomainError> {
    let run = ctx
        .state
        .runs
        .get(run_id)
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    let by_its_worker = ctx.actor.kind == crate::command::ActorKind::Worker
        && run.worker_id.as_deref() == Some(ctx.actor.id.as_str());
    if !by_its_worker && !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only the run's worker reports it started",
        ));
    }
    match run.status {
        RunStatus::Assigned => {}
        RunStatus::Running => {
            let note = ActivityNote {
                company_id: Some(run.company_id.clone()),
                entity_type: "run",
                entity_id: run.id.clone(),
                details: json!({}),
            };
            return Ok(Decision {
                outcome: Outcome::Run(run.clone()),
                changes: Vec::new(),
                note,
            });
        }
        other => {
            return Err(DomainError::StaleRun {
                run_id: run_id.into(),
                status: other.as_str().into(),
            })
        }
    }
    let mut running = run.clone();
    running.status = RunStatus::Running;
    running.started_at = Some(ctx.now());
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "workerId": run.worker_id }),
    };
    Ok(Decision {
        outcome: Outcome::Run(running.clone()),
        changes: vec![Change::Run(running)],
        note,
    })
}

fn require_token_hash(ctx: &Ctx<'_>, hash: &str) -> Result<(), DomainError> {
    if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(DomainError::invalid(
            "tokenHash",
            "must be a hex SHA-256 digest",
        ));
    }
    if ctx.state.run_by_token_hash(hash).is_some()
        || ctx.state.credential_by_token_hash(hash).is_some()
    {
        return Err(DomainError::AlreadyExists {
            entity: "token".into(),
            id: hash.chars().take(8).collect(),
        });
    }
    Ok(())
}

/// `AddRunToken`: another run-scoped key for a live run (its assignment was sent again and the
/// leader keeps no secrets, only hashes).
pub(crate) fn add_token(
    ctx: &Ctx<'_>,
    run_id: &str,
    token_hash: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("mint run tokens")?;
    require_token_hash(ctx, token_hash)?;
    let run = ctx
        .state
        .runs
        .get(run_id)
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    if !run.status.is_live() {
        return Err(DomainError::StaleRun {
            run_id: run_id.into(),
            status: run.status.as_str().into(),
        });
    }
    let mut next = run.clone();
    next.token_hashes.push(token_hash.into());
    let note = ActivityNote {
        company_id: Some(run.company_id.clone()),
        entity_type: "run",
        entity_id: run.id.clone(),
        details: json!({ "tokens": next.token_hashes.len() }),
    };
    Ok(Decision {
        outcome: Outcome::Run(next.clone()),
        changes: vec![Change::Run(next)],
        note,
    })
}
