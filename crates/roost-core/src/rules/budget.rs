//! Budgets (docs/budgets.md): policies, cost events, reservations and incidents.
//!
//! A run holds `reserved_cents` against every budget of its agent and company while it is
//! live. A claim is refused while spent + reserved + the agent's per-run reserve would pass a
//! hard limit: the wake waits. When spend alone leaves no room for one more run, or reaches the
//! limit, a hard incident opens (once) and the scope pauses with reason `budget`. Usage reported
//! during a run grows its reservation while the budget allows; when it does not, the run is
//! cancelled. At the end the run's usage is settled as a cost event and its reservation goes.

use serde_json::json;

use super::agent::visible_agent;
use super::{require_id, require_text, Ctx};
use crate::approval::{Approval, ApprovalStatus, ApprovalType};
use crate::command::{NewCostEvent, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

/// The reason a project stopped by its budget is paused with (Paperclip's `budget`).
pub const BUDGET_PAUSE_REASON: &str = "budget";

/// Why no run of `agent` on an issue of `project` may be claimed at time `now`, if none may.
pub fn budget_blocker(
    state: &State,
    agent: &Agent,
    project: Option<&str>,
    now: Timestamp,
) -> Option<String> {
    let reserve = agent.heartbeat.run_reserve_cents;
    state.hard_budgets(agent, project).find_map(|p| {
        let (spent, reserved) = (state.spent(p, now), state.reserved(p, None));
        (spent.saturating_add(reserved).saturating_add(reserve) > p.amount).then(|| {
            format!(
                "budget_blocked: {} budget {}: {spent}¢ spent + {reserved}¢ reserved + {reserve}¢ for this run > {}¢",
                p.scope_type, p.id, p.amount
            )
        })
    })
}

/// The hard budgets of `agent` (on an issue of `project`) where spend alone leaves no room
/// for one more run.
pub fn exhausted<'a>(
    state: &'a State,
    agent: &'a Agent,
    project: Option<&'a str>,
    now: Timestamp,
) -> Vec<&'a BudgetPolicy> {
    state
        .hard_budgets(agent, project)
        .filter(|p| {
            let spent = state.spent(p, now);
            spent >= p.amount || spent.saturating_add(agent.heartbeat.run_reserve_cents) > p.amount
        })
        .collect()
}

/// Whether a hard incident for `policy` is open now (then its scope is already stopped).
pub fn hard_incident_open(state: &State, policy: &BudgetPolicy) -> bool {
    state.budget_incidents.values().any(|i| {
        i.policy_id == policy.id && i.kind == IncidentKind::Hard && i.status == IncidentStatus::Open
    })
}

/// How many more cents a run of `agent` may hold, over every hard budget (`u64::MAX` when
/// none binds), not counting the run's own reservation.
pub(crate) fn room_for(state: &State, agent: &Agent, run_id: &str, now: Timestamp) -> u64 {
    let project = state.project_of(state.runs.get(run_id).and_then(|r| r.issue_id.as_deref()));
    state
        .hard_budgets(agent, project.as_deref())
        .map(|p| {
            p.amount.saturating_sub(
                state
                    .spent(p, now)
                    .saturating_add(state.reserved(p, Some(run_id))),
            )
        })
        .min()
        .unwrap_or(u64::MAX)
}

/// Applies `f` to agent `id` within `changes` (on the copy already there, if any).
pub(crate) fn upsert_agent(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    id: &str,
    f: impl FnOnce(&mut Agent),
) {
    for change in changes.iter_mut() {
        if let Change::Agent(a) = change {
            if a.id == id {
                f(a);
                return;
            }
        }
    }
    if let Some(agent) = ctx.state.agents.get(id) {
        let mut agent = agent.clone();
        f(&mut agent);
        changes.push(Change::Agent(agent));
    }
}

fn pending_incident(changes: &[Change], policy: &str, kind: IncidentKind) -> bool {
    changes.iter().any(|c| {
        matches!(c, Change::BudgetIncident(i) if i.policy_id == policy && i.kind == kind && i.status == IncidentStatus::Open)
    })
}

/// Opens a hard incident for `policy` (unless one is open) and pauses its scope.
pub(crate) fn stop_scope(
    ctx: &Ctx<'_>,
    policy: &BudgetPolicy,
    observed: u64,
    why: &str,
    changes: &mut Vec<Change>,
) {
    if hard_incident_open(ctx.state, policy)
        || pending_incident(changes, &policy.id, IncidentKind::Hard)
    {
        return;
    }
    let incident_id = format!("inc-{}-{}-hard", ctx.slot, policy.id);
    changes.push(Change::Approval(override_approval(
        ctx,
        policy,
        &incident_id,
        observed,
        why,
    )));
    let incident = BudgetIncident {
        id: incident_id,
        company_id: policy.company_id.clone(),
        policy_id: policy.id.clone(),
        kind: IncidentKind::Hard,
        status: IncidentStatus::Open,
        window_key: policy.window_kind.key(ctx.now()),
        amount: policy.amount,
        observed,
        message: why.to_string(),
        created_at: ctx.now(),
        resolved_at: None,
        resolution: None,
        wake_loop: None,
    };
    changes.push(Change::BudgetIncident(incident.clone()));
    if policy.scope_type == BudgetScopeType::Project {
        // A project stops by pausing it: its issues start no run (`run::claim_blocker`),
        // while its agents go on with other work.
        if let Some(project) = ctx.state.projects.get(&policy.scope_id) {
            if project.paused_at.is_none() {
                let mut paused = project.clone();
                paused.paused_at = Some(ctx.now());
                paused.pause_reason = Some(BUDGET_PAUSE_REASON.into());
                paused.updated_at = ctx.now();
                changes.push(Change::Project(paused));
            }
        }
        return;
    }
    let agents: Vec<String> = ctx
        .state
        .agents
        .values()
        .filter(|a| {
            policy.applies_to(&a.company_id, &a.id, None) && a.status == AgentStatus::Active
        })
        .map(|a| a.id.clone())
        .collect();
    for id in &agents {
        upsert_agent(ctx, changes, id, |a| {
            a.status = AgentStatus::Paused;
            a.pause_reason = Some(PauseReason::Budget);
            a.updated_at = ctx.now();
        });
    }
    super::org::escalate_incident(ctx, changes, &incident, &agents);
}

/// After `added` cents were spent by `agent_id` in `company_id` (on an issue of `project`):
/// a soft incident at the warning (once per policy, window and amount), a hard stop at the
/// limit.
pub(crate) fn after_spend(
    ctx: &Ctx<'_>,
    company_id: &str,
    agent_id: &str,
    project: Option<&str>,
    added: u64,
    changes: &mut Vec<Change>,
) {
    let now = ctx.now();
    let policies: Vec<&BudgetPolicy> = ctx
        .state
        .budget_policies
        .values()
        .filter(|p| p.applies_to(company_id, agent_id, project) && p.amount > 0)
        .collect();
    for policy in policies {
        let observed = ctx.state.spent(policy, now).saturating_add(added);
        let window = policy.window_kind.key(now);
        // In u128: amount × percent passes u64 for amounts above u64::MAX / 100.
        let warn_at = (u128::from(policy.amount) * u128::from(policy.warn_percent)).div_ceil(100);
        let warn_at = u64::try_from(warn_at).unwrap_or(u64::MAX);
        let warned = ctx.state.budget_incidents.values().any(|i| {
            i.policy_id == policy.id
                && i.kind == IncidentKind::Soft
                && i.window_key == window
                && i.amount == policy.amount
        }) || pending_incident(changes, &policy.id, IncidentKind::Soft);
        if observed >= warn_at && !warned {
            changes.push(Change::BudgetIncident(BudgetIncident {
                id: format!("inc-{}-{}-soft", ctx.slot, policy.id),
                company_id: policy.company_id.clone(),
                policy_id: policy.id.clone(),
                kind: IncidentKind::Soft,
                status: IncidentStatus::Open,
                window_key: window,
                amount: policy.amount,
                observed,
                message: format!(
                    "{}% of the {} budget spent ({observed}¢ of {}¢)",
                    policy.warn_percent, policy.scope_type, policy.amount
                ),
                created_at: now,
                resolved_at: None,
                resolution: None,
                wake_loop: None,
            }));
        }
        if policy.hard_stop_enabled && observed >= policy.amount {
            let why = format!("spent {observed}¢ of a {}¢ budget", policy.amount);
            stop_scope(ctx, policy, observed, &why, changes);
        }
    }
}

/// A run's usage settled as a cost event at its end (its reservation ends with it).
pub(crate) fn settle(ctx: &Ctx<'_>, run: &Run, changes: &mut Vec<Change>) {
    let cents = run.usage.cost_cents();
    if cents == 0 && run.usage == Usage::default() {
        return;
    }
    let adapter = ctx.state.agents.get(&run.agent_id).map(|a| a.adapter_type);
    let provider = match adapter {
        Some(AdapterType::Claude) => "anthropic",
        Some(AdapterType::Codex) => "openai",
        Some(AdapterType::Gemini) => "google",
        _ => "unknown",
    };
    let project = ctx.state.project_of(run.issue_id.as_deref());
    changes.push(Change::CostEvent(CostEvent {
        id: format!("run-{}", run.id),
        company_id: run.company_id.clone(),
        agent_id: run.agent_id.clone(),
        issue_id: run.issue_id.clone(),
        heartbeat_run_id: Some(run.id.clone()),
        provider: provider.into(),
        model: String::new(),
        input_tokens: run.usage.input_tokens,
        cached_input_tokens: run.usage.cached_input_tokens,
        output_tokens: run.usage.output_tokens,
        cost_cents: cents,
        occurred_at: ctx.now(),
        created_at: ctx.now(),
        source: "run".into(),
        project_id: project.clone(),
        biller: None,
        billing_type: None,
    }));
    after_spend(
        ctx,
        &run.company_id,
        &run.agent_id,
        project.as_deref(),
        cents,
        changes,
    );
}

/// `SetBudgetPolicy`: creates or replaces the policy of a scope and window.
#[allow(clippy::too_many_arguments)]
pub(crate) fn set_policy(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    scope_type: BudgetScopeType,
    scope_id: &str,
    window_kind: BudgetWindow,
    amount: u64,
    warn_percent: u8,
    hard_stop_enabled: bool,
) -> Result<Decision, DomainError> {
    ctx.require_admin("set budgets")?;
    require_id("id", id)?;
    ctx.require_company(company_id, "company", company_id)?;
    if !ctx.state.companies.contains_key(company_id) {
        return Err(DomainError::not_found("company", company_id));
    }
    match scope_type {
        BudgetScopeType::Company if scope_id != company_id => {
            return Err(DomainError::invalid(
                "scopeId",
                "a company budget's scopeId is the company's id",
            ))
        }
        BudgetScopeType::Agent => {
            let agent = visible_agent(ctx, scope_id)?;
            if agent.company_id != company_id {
                return Err(DomainError::not_found("agent", scope_id));
            }
        }
        BudgetScopeType::Project => {
            ctx.state
                .projects
                .get(scope_id)
                .filter(|p| p.company_id == company_id)
                .ok_or_else(|| DomainError::not_found("project", scope_id))?;
        }
        BudgetScopeType::Company => {}
    }
    if !(1..=100).contains(&warn_percent) {
        return Err(DomainError::invalid("warnPercent", "between 1 and 100"));
    }
    let existing = ctx.state.budget_policies.values().find(|p| {
        p.company_id == company_id
            && p.scope_type == scope_type
            && p.scope_id == scope_id
            && p.window_kind == window_kind
    });
    if let Some(old) = existing {
        let spent = ctx.state.spent(old, ctx.now());
        if amount > old.amount && amount <= spent {
            return Err(DomainError::invariant(
                "budget_above_spend",
                format!("raising the budget to {amount}¢ leaves it at or below the {spent}¢ already spent"),
            ));
        }
    }
    let policy = BudgetPolicy {
        id: existing
            .map(|p| p.id.clone())
            .unwrap_or_else(|| id.to_string()),
        company_id: company_id.into(),
        scope_type,
        scope_id: scope_id.into(),
        window_kind,
        amount,
        warn_percent,
        hard_stop_enabled,
        created_at: existing.map(|p| p.created_at).unwrap_or(ctx.now()),
        updated_at: ctx.now(),
    };
    let note = ActivityNote {
        company_id: Some(company_id.into()),
        entity_type: "budget_policy",
        entity_id: policy.id.clone(),
        details: json!({ "scopeType": scope_type, "scopeId": scope_id, "amount": amount, "windowKind": window_kind }),
    };
    Ok(Decision {
        outcome: Outcome::BudgetPolicy(policy.clone()),
        changes: vec![Change::BudgetPolicy(policy)],
        note,
    })
}

/// `RecordCostEvent`: money an agent reports spending (only its own), or an administrator
/// records for it.
pub(crate) fn record_cost(ctx: &Ctx<'_>, e: &NewCostEvent) -> Result<Decision, DomainError> {
    require_id("id", &e.id)?;
    ctx.require_company(&e.company_id, "company", &e.company_id)?;
    if let Some(me) = ctx.actor.agent_id() {
        if me != e.agent_id {
            return Err(DomainError::forbidden(
                "an agent may only report its own costs",
            ));
        }
    } else if !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only agents and administrators report costs",
        ));
    }
    // A cost is a write on behalf of the reporting run, fenced like every such write
    // (ARCHITECTURE.md, "Invariants"): a run that has ended reports none, or a late worker would add spend its successor is charged for. A run
    // reports its own spend, not an ended run's under that run's id.
    let reporting_run = ctx.fence()?.map(|r| r.id.clone());
    if let (Some(mine), Some(named)) = (&reporting_run, &e.heartbeat_run_id) {
        if mine != named {
            return Err(DomainError::forbidden(format!(
                "run {mine} reports its own cost: heartbeatRunId must be {mine} or absent, not \
                 {named}"
            )));
        }
    }
    let agent = visible_agent(ctx, &e.agent_id)?;
    if agent.company_id != e.company_id {
        return Err(DomainError::not_found("agent", &e.agent_id));
    }
    if let Some(issue) = &e.issue_id {
        if ctx
            .state
            .issues
            .get(issue)
            .is_none_or(|i| i.company_id != e.company_id)
        {
            return Err(DomainError::not_found("issue", issue));
        }
    }
    if let Some(run) = &e.heartbeat_run_id {
        if ctx
            .state
            .runs
            .get(run)
            .is_none_or(|r| r.agent_id != e.agent_id)
        {
            return Err(DomainError::not_found("run", run));
        }
    }
    if ctx.state.cost_events.contains_key(&e.id) {
        return Err(DomainError::AlreadyExists {
            entity: "cost event".into(),
            id: e.id.clone(),
        });
    }
    let event = CostEvent {
        id: e.id.clone(),
        company_id: e.company_id.clone(),
        agent_id: e.agent_id.clone(),
        issue_id: e.issue_id.clone(),
        heartbeat_run_id: e.heartbeat_run_id.clone().or(reporting_run),
        provider: require_text("provider", &e.provider, 100)?,
        model: require_text("model", &e.model, 200)?,
        input_tokens: e.input_tokens,
        cached_input_tokens: e.cached_input_tokens,
        output_tokens: e.output_tokens,
        cost_cents: e.cost_cents,
        occurred_at: e.occurred_at.unwrap_or(ctx.now()),
        created_at: ctx.now(),
        source: "agent".into(),
        project_id: ctx.state.project_of(e.issue_id.as_deref()),
        biller: e
            .biller
            .as_deref()
            .map(|b| require_text("biller", b, 100))
            .transpose()?,
        billing_type: e.billing_type,
    };
    let mut changes = vec![Change::CostEvent(event.clone())];
    // The window of the event is where it counts; thresholds are checked for now's window.
    after_spend(
        ctx,
        &event.company_id,
        &event.agent_id,
        event.project_id.as_deref(),
        event.cost_cents,
        &mut changes,
    );
    let note = ActivityNote {
        company_id: Some(event.company_id.clone()),
        entity_type: "cost_event",
        entity_id: event.id.clone(),
        details: json!({ "agentId": event.agent_id, "costCents": event.cost_cents }),
    };
    Ok(Decision {
        outcome: Outcome::CostEvent(event),
        changes,
        note,
    })
}

/// `ResolveBudgetIncident`: the operator's decision, audited.
pub(crate) fn resolve_incident(
    ctx: &Ctx<'_>,
    incident_id: &str,
    action: IncidentAction,
    amount: Option<u64>,
) -> Result<Decision, DomainError> {
    ctx.require_admin("resolve budget incidents")?;
    let incident = ctx
        .state
        .budget_incidents
        .get(incident_id)
        .ok_or_else(|| DomainError::not_found("budget incident", incident_id))?;
    ctx.require_company(&incident.company_id, "budget incident", incident_id)?;
    if incident.status != IncidentStatus::Open {
        return Err(DomainError::conflict(format!(
            "incident {incident_id} is already {}",
            incident.status
        )));
    }
    if incident.kind == IncidentKind::WakeLoop {
        return super::loop_breaker::resolve(ctx, incident, action);
    }
    if action == IncidentAction::Resume {
        return Err(DomainError::invalid(
            "action",
            "resume resolves wake-loop incidents: resolve a budget incident with raise_and_resume, keep_paused or dismiss",
        ));
    }
    let resolved = resolved_incident(incident, action, ctx.now());
    let mut changes = Vec::new();
    if action == IncidentAction::RaiseAndResume {
        let policy = ctx
            .state
            .budget_policies
            .get(&incident.policy_id)
            .ok_or_else(|| DomainError::not_found("budget policy", &incident.policy_id))?;
        let amount = amount.ok_or_else(|| {
            DomainError::invalid("amount", "raise_and_resume needs the new amount")
        })?;
        let spent = ctx.state.spent(policy, ctx.now());
        if amount <= spent {
            return Err(DomainError::invariant(
                "budget_above_spend",
                format!("the new budget {amount}¢ must be above the {spent}¢ already spent"),
            ));
        }
        let mut raised = policy.clone();
        raised.amount = amount;
        raised.updated_at = ctx.now();
        changes.push(Change::BudgetPolicy(raised.clone()));
        resume_scope(ctx, &raised, &mut changes);
    }
    close_override_approval(ctx, incident, action, &mut changes);
    changes.push(Change::BudgetIncident(resolved.clone()));
    let note = ActivityNote {
        company_id: Some(incident.company_id.clone()),
        entity_type: "budget_incident",
        entity_id: incident.id.clone(),
        details: json!({ "action": action, "amount": amount }),
    };
    Ok(Decision {
        outcome: Outcome::BudgetIncident(resolved),
        changes,
        note,
    })
}

/// The incident as `action` closes it at `now`.
pub(super) fn resolved_incident(
    incident: &BudgetIncident,
    action: IncidentAction,
    now: Timestamp,
) -> BudgetIncident {
    let mut resolved = incident.clone();
    resolved.resolved_at = Some(now);
    resolved.resolution = Some(action);
    resolved.status = if action == IncidentAction::Dismiss {
        IncidentStatus::Dismissed
    } else {
        IncidentStatus::Resolved
    };
    resolved
}

/// The id of the `budget_override_required` approval a hard incident opens with.
pub fn override_approval_id(incident_id: &str) -> String {
    format!("{incident_id}-override")
}

/// The `budget_override_required` approval opened with a hard stop (Paperclip opens one too):
/// approving it raises the budget to `proposedAmountCents` and resumes the scope, rejecting it
/// keeps the scope stopped (`rules/approval.rs` decides it through [`override_decided`]).
fn override_approval(
    ctx: &Ctx<'_>,
    policy: &BudgetPolicy,
    incident_id: &str,
    observed: u64,
    why: &str,
) -> Approval {
    // Twice the old limit, and above what is spent: enough room to go on, a person decides.
    let proposed = policy
        .amount
        .saturating_mul(2)
        .max(observed.saturating_add(1));
    Approval {
        id: override_approval_id(incident_id),
        company_id: policy.company_id.clone(),
        approval_type: ApprovalType::BudgetOverrideRequired,
        status: ApprovalStatus::Pending,
        payload: json!({
            "incidentId": incident_id,
            "policyId": policy.id,
            "scopeType": policy.scope_type,
            "scopeId": policy.scope_id,
            "windowKind": policy.window_kind,
            "amountCents": policy.amount,
            "observedCents": observed,
            "proposedAmountCents": proposed,
            "reason": why,
        }),
        requested_by_agent_id: None,
        requested_by_user_id: None,
        decision_note: None,
        decided_by_user_id: None,
        decided_at: None,
        issue_ids: Vec::new(),
        agent_id: None,
        comments: Vec::new(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
    }
}

/// Resumes what `policy` (raised) stopped: its project, or its agents paused for budget.
fn resume_scope(ctx: &Ctx<'_>, policy: &BudgetPolicy, changes: &mut Vec<Change>) {
    if policy.scope_type != BudgetScopeType::Project {
        let paused: Vec<String> = ctx
            .state
            .agents
            .values()
            .filter(|a| {
                policy.applies_to(&a.company_id, &a.id, None)
                    && a.status == AgentStatus::Paused
                    && a.pause_reason == Some(PauseReason::Budget)
            })
            .map(|a| a.id.clone())
            .collect();
        for id in paused {
            upsert_agent(ctx, changes, &id, |a| {
                a.status = AgentStatus::Active;
                a.pause_reason = None;
                a.updated_at = ctx.now();
            });
        }
        return;
    }
    let paused = ctx.state.projects.get(&policy.scope_id).filter(|p| {
        p.paused_at.is_some() && p.pause_reason.as_deref() == Some(BUDGET_PAUSE_REASON)
    });
    if let Some(project) = paused {
        let mut resumed = project.clone();
        resumed.paused_at = None;
        resumed.pause_reason = None;
        resumed.updated_at = ctx.now();
        changes.push(Change::Project(resumed));
    }
}

/// An incident resolved directly closes its override approval with the same meaning.
fn close_override_approval(
    ctx: &Ctx<'_>,
    incident: &BudgetIncident,
    action: IncidentAction,
    changes: &mut Vec<Change>,
) {
    let id = override_approval_id(&incident.id);
    let Some(approval) = ctx.state.approvals.approvals.get(&id) else {
        return;
    };
    if !approval.status.is_open() {
        return;
    }
    let mut closed = approval.clone();
    closed.status = if action == IncidentAction::RaiseAndResume {
        ApprovalStatus::Approved
    } else {
        ApprovalStatus::Rejected
    };
    closed.decision_note = Some(format!("the incident was resolved with {action}"));
    closed.decided_by_user_id = Some(ctx.actor.id.clone());
    closed.decided_at = Some(ctx.now());
    closed.updated_at = ctx.now();
    changes.push(Change::Approval(closed));
}

/// A `budget_override_required` approval decided: approving raises the budget to the
/// proposed amount and resumes the scope, rejecting keeps it stopped; either resolves the
/// incident. Nothing happens when the incident was resolved already.
pub(crate) fn override_decided(
    ctx: &Ctx<'_>,
    approval: &Approval,
    approved: bool,
    changes: &mut Vec<Change>,
) {
    let incident = approval.payload["incidentId"]
        .as_str()
        .and_then(|id| ctx.state.budget_incidents.get(id))
        .filter(|i| i.status == IncidentStatus::Open && i.kind == IncidentKind::Hard);
    let Some(incident) = incident else {
        return;
    };
    let action = if approved {
        IncidentAction::RaiseAndResume
    } else {
        IncidentAction::KeepPaused
    };
    if approved {
        let Some(policy) = ctx.state.budget_policies.get(&incident.policy_id) else {
            return;
        };
        let spent = ctx.state.spent(policy, ctx.now());
        let proposed = approval.payload["proposedAmountCents"]
            .as_u64()
            .unwrap_or(0)
            .max(spent.saturating_add(1));
        let mut raised = policy.clone();
        raised.amount = proposed;
        raised.updated_at = ctx.now();
        resume_scope(ctx, &raised, changes);
        changes.push(Change::BudgetPolicy(raised));
    }
    changes.push(Change::BudgetIncident(resolved_incident(
        incident,
        action,
        ctx.now(),
    )));
}
