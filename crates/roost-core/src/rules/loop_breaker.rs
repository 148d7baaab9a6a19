//! The loop breaker: runaway wake loops are found where wakes are recorded,
//! inside apply, from the state and the command's time alone, so every replica trips at the
//! same wake. Three patterns, each counted in a window that ends at the command's time:
//! one issue woken `issueWakes` times with no status change of it, two agents waking each
//! other `pingPongWakes` times back and forth, one agent's run-starting wakes reaching
//! `runWakes`. A trip pauses the agents (`loop_detected`), cancels their pending wakes, skips
//! the tripping wake and opens a `wake_loop` incident naming the loop, agents, issues and wakes.
//! A resume (`rules/agent.rs`, or the incident's `resume`) starts the agent's window afresh.

use serde_json::json;

use super::budget::upsert_agent;
use super::Ctx;
use crate::command::Outcome;
use crate::entity::*;
use crate::error::DomainError;
use crate::loop_breaker::{LoopKind, LoopPolicy, RecentWake, WakeLoop, MAX_INCIDENT_WAKE_IDS};
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

/// A tripped check: what the incident will name.
#[derive(Debug)]
pub(crate) struct Trip {
    pub kind: LoopKind,
    pub agents: Vec<String>,
    pub issues: Vec<String>,
    pub wakes: Vec<String>,
    pub count: u32,
    pub threshold: u32,
    pub window_minutes: u32,
}

/// The thresholds in force for `agent`.
pub(crate) fn policy_of(state: &State, agent: &Agent) -> LoopPolicy {
    let company = state.companies.get(&agent.company_id);
    LoopPolicy::effective(company.map(|c| &c.loop_breaker), &agent.loop_breaker)
}

/// The agent as this command leaves it so far.
fn latest_agent<'a>(ctx: &Ctx<'a>, changes: &'a [Change], id: &str) -> Option<&'a Agent> {
    changes
        .iter()
        .rev()
        .find_map(|c| match c {
            Change::Agent(a) if a.id == id => Some(a),
            _ => None,
        })
        .or_else(|| ctx.state.agents.get(id))
}

/// Called by `wake::enqueue` for a wake about to be recorded as queued, deferred or
/// coalesced: skips it when this command already paused its agent, trips the loop breaker
/// when the wake completes a loop.
pub(crate) fn guard(ctx: &Ctx<'_>, changes: &mut Vec<Change>, wake: &mut Wake) {
    if latest_agent(ctx, changes, &wake.agent_id).is_some_and(|a| a.status == AgentStatus::Paused) {
        wake.status = WakeStatus::Skipped;
        wake.status_reason = Some("agent_paused_loop".into());
        wake.coalesced_into = None;
        wake.waiting_on_run = None;
        return;
    }
    if let Some(trip) = check(ctx, changes, wake) {
        apply_trip(ctx, changes, wake, trip);
    }
}

/// Whether recording `wake` trips a check, and which.
pub(crate) fn check(ctx: &Ctx<'_>, changes: &[Change], wake: &Wake) -> Option<Trip> {
    let agent = ctx.state.agents.get(&wake.agent_id)?;
    let policy = policy_of(ctx.state, agent);
    if !policy.enabled {
        return None;
    }
    let me = RecentWake::of(wake)?;
    // Wakes this command recorded before this one (not in the state's window yet).
    let fresh: Vec<RecentWake> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Wake(w) if w.id != wake.id && !ctx.state.wakes.contains_key(&w.id) => {
                RecentWake::of(w)
            }
            _ => None,
        })
        .collect();
    ping_pong(ctx, &policy, &me, &fresh)
        .or_else(|| issue_churn(ctx, changes, &policy, &me, &fresh))
        .or_else(|| run_cap(ctx, &policy, &me, &fresh))
}

/// Counts from `since` of the wake's agent (its last resume) on.
fn after_reset(state: &State, w: &RecentWake) -> bool {
    state
        .agents
        .get(&w.agent_id)
        .and_then(|a| a.loop_window_since)
        .is_none_or(|since| w.at >= since)
}

/// The counted wakes, oldest first, with `me` last among its equals.
fn ordered(mut wakes: Vec<&RecentWake>) -> Vec<&RecentWake> {
    wakes.sort_by(|a, b| (a.at, a.seq, &a.id).cmp(&(b.at, b.seq, &b.id)));
    wakes.dedup_by(|a, b| a.id == b.id);
    wakes
}

fn wake_ids(wakes: &[&RecentWake]) -> Vec<String> {
    let skip = wakes.len().saturating_sub(MAX_INCIDENT_WAKE_IDS);
    wakes.iter().skip(skip).map(|w| w.id.clone()).collect()
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// (b) Two agents waking each other: consecutive wakes in one direction count once.
fn ping_pong(
    ctx: &Ctx<'_>,
    policy: &LoopPolicy,
    me: &RecentWake,
    fresh: &[RecentWake],
) -> Option<Trip> {
    if policy.ping_pong_wakes == 0 || policy.window_minutes == 0 {
        return None;
    }
    let other = me
        .caused_by_agent
        .as_deref()
        .filter(|o| *o != me.agent_id)?;
    let from = ctx
        .state
        .recent_wakes
        .window_start(ctx.now(), policy.window_minutes);
    let between = |w: &RecentWake| {
        (w.agent_id == me.agent_id && w.caused_by_agent.as_deref() == Some(other))
            || (w.agent_id == other && w.caused_by_agent.as_deref() == Some(me.agent_id.as_str()))
    };
    let window = &ctx.state.recent_wakes;
    let wakes: Vec<&RecentWake> = window
        .of_agent(&me.agent_id, from)
        .chain(window.of_agent(other, from))
        .chain(fresh.iter().filter(|w| w.at >= from))
        .filter(|w| between(w) && after_reset(ctx.state, w))
        .chain(std::iter::once(me))
        .collect();
    let wakes = ordered(wakes);
    let hops = 1 + wakes
        .windows(2)
        .filter(|p| p[0].agent_id != p[1].agent_id)
        .count();
    (count(hops) >= policy.ping_pong_wakes).then(|| {
        let mut issues: Vec<String> = wakes.iter().filter_map(|w| w.issue_id.clone()).collect();
        issues.sort();
        issues.dedup();
        let mut agents = vec![other.to_string(), me.agent_id.clone()];
        agents.sort();
        Trip {
            kind: LoopKind::PingPong,
            agents,
            issues,
            wakes: wake_ids(&wakes),
            count: count(hops),
            threshold: policy.ping_pong_wakes,
            window_minutes: policy.window_minutes,
        }
    })
}

/// When `issue_id`'s status last changed, as this command leaves it (now, if it changes it).
fn status_changed_at(ctx: &Ctx<'_>, changes: &[Change], issue_id: &str) -> Option<Timestamp> {
    let before = ctx.state.issues.get(issue_id);
    let after = changes.iter().rev().find_map(|c| match c {
        Change::Issue(i) if i.id == issue_id => Some(i),
        _ => None,
    });
    match (before, after) {
        (Some(b), Some(a)) if a.status != b.status => Some(ctx.now()),
        (None, Some(_)) => Some(ctx.now()),
        (Some(b), _) => Some(b.status_changed_at.unwrap_or(b.created_at)),
        (None, None) => None,
    }
}

/// (a) One issue woken again and again while its status stays where it is.
fn issue_churn(
    ctx: &Ctx<'_>,
    changes: &[Change],
    policy: &LoopPolicy,
    me: &RecentWake,
    fresh: &[RecentWake],
) -> Option<Trip> {
    if policy.issue_wakes == 0 || policy.window_minutes == 0 {
        return None;
    }
    let issue = me.issue_id.as_deref()?;
    let window_start = ctx
        .state
        .recent_wakes
        .window_start(ctx.now(), policy.window_minutes);
    let from = window_start.max(status_changed_at(ctx, changes, issue)?);
    let wakes: Vec<&RecentWake> = ctx
        .state
        .recent_wakes
        .of_issue(issue, from)
        .chain(fresh.iter().filter(|w| w.at >= from))
        .filter(|w| w.issue_id.as_deref() == Some(issue) && after_reset(ctx.state, w))
        .chain(std::iter::once(me))
        .collect();
    let wakes = ordered(wakes);
    (count(wakes.len()) >= policy.issue_wakes).then(|| {
        let mut agents: Vec<String> = wakes.iter().map(|w| w.agent_id.clone()).collect();
        agents.sort();
        agents.dedup();
        Trip {
            kind: LoopKind::IssueChurn,
            agents,
            issues: vec![issue.to_string()],
            wakes: wake_ids(&wakes),
            count: count(wakes.len()),
            threshold: policy.issue_wakes,
            window_minutes: policy.window_minutes,
        }
    })
}

/// (c) One agent's run-starting wakes in `runWindowMinutes` reached `runWakes`.
fn run_cap(
    ctx: &Ctx<'_>,
    policy: &LoopPolicy,
    me: &RecentWake,
    fresh: &[RecentWake],
) -> Option<Trip> {
    if policy.run_wakes == 0 || policy.run_window_minutes == 0 || !me.starts_run {
        return None;
    }
    let from = ctx
        .state
        .recent_wakes
        .window_start(ctx.now(), policy.run_window_minutes);
    let wakes: Vec<&RecentWake> = ctx
        .state
        .recent_wakes
        .of_agent(&me.agent_id, from)
        .chain(fresh.iter().filter(|w| w.at >= from))
        .filter(|w| w.agent_id == me.agent_id && w.starts_run && after_reset(ctx.state, w))
        .chain(std::iter::once(me))
        .collect();
    let wakes = ordered(wakes);
    (count(wakes.len()) >= policy.run_wakes).then(|| {
        let mut issues: Vec<String> = wakes.iter().filter_map(|w| w.issue_id.clone()).collect();
        issues.sort();
        issues.dedup();
        Trip {
            kind: LoopKind::RunCap,
            agents: vec![me.agent_id.clone()],
            issues,
            wakes: wake_ids(&wakes),
            count: count(wakes.len()),
            threshold: policy.run_wakes,
            window_minutes: policy.run_window_minutes,
        }
    })
}

/// Pauses the trip's agents, cancels their pending wakes, skips `wake` and opens the incident.
fn apply_trip(ctx: &Ctx<'_>, changes: &mut Vec<Change>, wake: &mut Wake, trip: Trip) {
    let incident_id = format!("inc-{}-loop-{}", ctx.slot, wake.id);
    let why = format!("loop_detected: {} (incident {incident_id})", trip.kind);
    wake.status = WakeStatus::Skipped;
    wake.status_reason = Some(why.clone());
    wake.coalesced_into = None;
    wake.waiting_on_run = None;
    for id in &trip.agents {
        let active =
            latest_agent(ctx, changes, id).is_some_and(|a| a.status == AgentStatus::Active);
        if active {
            upsert_agent(ctx, changes, id, |a| {
                a.status = AgentStatus::Paused;
                a.pause_reason = Some(PauseReason::LoopDetected);
                a.updated_at = ctx.now();
            });
        }
        cancel_pending(ctx, changes, id, &why);
    }
    let company_id = wake.company_id.clone();
    let message = format!(
        "{} loop: {} counted {} wakes in {} minutes (threshold {}); paused agent(s) {}",
        trip.kind,
        match trip.kind {
            LoopKind::IssueChurn => "issue with no status change",
            LoopKind::PingPong => "two agents waking each other",
            LoopKind::RunCap => "an agent's run-starting wakes",
        },
        trip.count,
        trip.window_minutes,
        trip.threshold,
        trip.agents.join(", ")
    );
    let paused = trip.agents.clone();
    let incident = BudgetIncident {
        id: incident_id,
        company_id,
        policy_id: String::new(),
        kind: IncidentKind::WakeLoop,
        status: IncidentStatus::Open,
        window_key: 0,
        amount: u64::from(trip.threshold),
        observed: u64::from(trip.count),
        message,
        created_at: ctx.now(),
        resolved_at: None,
        resolution: None,
        wake_loop: Some(WakeLoop {
            loop_kind: trip.kind,
            agent_ids: trip.agents,
            issue_ids: trip.issues,
            wake_ids: trip.wakes,
            count: trip.count,
            threshold: trip.threshold,
            window_minutes: trip.window_minutes,
        }),
    };
    changes.push(Change::BudgetIncident(incident.clone()));
    super::org::escalate_incident(ctx, changes, &incident, &paused);
}

/// Cancels every pending wake of `agent_id`: in the state and made earlier by this command.
/// Returns how many it cancelled.
pub(super) fn cancel_pending(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    agent_id: &str,
    why: &str,
) -> usize {
    let from_state = ctx
        .state
        .pending_wakes
        .range((agent_id.to_string(), None)..)
        .take_while(|((a, _), _)| a == agent_id)
        .map(|(_, id)| id.clone());
    let from_changes = changes.iter().filter_map(|c| match c {
        Change::Wake(w) if w.agent_id == agent_id => Some(w.id.clone()),
        _ => None,
    });
    let mut ids: Vec<String> = from_state.chain(from_changes).collect();
    ids.sort();
    ids.dedup();
    let mut cancelled = 0;
    for id in ids {
        let latest = changes
            .iter()
            .rev()
            .find_map(|c| match c {
                Change::Wake(w) if w.id == id => Some(w.clone()),
                _ => None,
            })
            .or_else(|| ctx.state.wakes.get(&id).cloned());
        if let Some(mut w) = latest.filter(|w| w.status.is_pending()) {
            w.status = WakeStatus::Cancelled;
            w.status_reason = Some(why.to_string());
            w.waiting_on_run = None;
            w.updated_at = ctx.now();
            changes.push(Change::Wake(w));
            cancelled += 1;
        }
    }
    cancelled
}

/// Stamps `statusChangedAt` on every issue `changes` moves to another status, and on the
/// outcome's copy, so the reply shows what the state holds.
pub(crate) fn stamp_status_changes(
    state: &State,
    changes: &mut [Change],
    outcome: &mut Outcome,
    now: Timestamp,
) {
    for change in changes.iter_mut() {
        if let Change::Issue(i) = change {
            let moved = state
                .issues
                .get(&i.id)
                .is_some_and(|b| b.status != i.status);
            // A rule that moved the issue itself (`Issue::move_to`) stamped it already; an
            // issue its outcome shares is copied only when it did not.
            if moved && i.status_changed_at != Some(now) {
                std::sync::Arc::make_mut(i).status_changed_at = Some(now);
            }
        }
    }
    if let Outcome::Issue { issue, .. } = outcome {
        let stamped = changes.iter().rev().find_map(|c| match c {
            Change::Issue(i) if i.id == issue.id => Some(i.status_changed_at),
            _ => None,
        });
        if let Some(at) = stamped.filter(|at| *at != issue.status_changed_at) {
            std::sync::Arc::make_mut(issue).status_changed_at = at;
        }
    }
}

/// Resolving a `wake_loop` incident: `resume` resumes its agents still paused for the loop
/// (their windows start afresh); `keep_paused` and `dismiss` change only the incident.
pub(crate) fn resolve(
    ctx: &Ctx<'_>,
    incident: &BudgetIncident,
    action: IncidentAction,
) -> Result<Decision, DomainError> {
    if action == IncidentAction::RaiseAndResume {
        return Err(DomainError::invalid(
            "action",
            "a wake-loop incident has no budget to raise: resolve it with resume, keep_paused or dismiss",
        ));
    }
    let resolved = super::budget::resolved_incident(incident, action, ctx.now());
    let mut changes = Vec::new();
    let mut resumed = Vec::new();
    if action == IncidentAction::Resume {
        let agents = incident
            .wake_loop
            .as_ref()
            .map(|l| l.agent_ids.clone())
            .unwrap_or_default();
        for id in agents {
            let paused = ctx.state.agents.get(&id).is_some_and(|a| {
                a.status == AgentStatus::Paused && a.pause_reason == Some(PauseReason::LoopDetected)
            });
            if paused {
                upsert_agent(ctx, &mut changes, &id, |a| {
                    a.status = AgentStatus::Active;
                    a.pause_reason = None;
                    a.loop_window_since = Some(ctx.now());
                    a.updated_at = ctx.now();
                });
                resumed.push(id);
            }
        }
    }
    changes.push(Change::BudgetIncident(resolved.clone()));
    let note = ActivityNote {
        company_id: Some(incident.company_id.clone()),
        entity_type: "budget_incident",
        entity_id: incident.id.clone(),
        details: json!({ "action": action, "resumedAgentIds": resumed }),
    };
    Ok(Decision {
        outcome: Outcome::BudgetIncident(resolved),
        changes,
        note,
    })
}

#[cfg(test)]
#[path = "loop_breaker_tests.rs"]
mod tests;
