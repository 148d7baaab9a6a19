//! The invariants checked after each step: what a refusal may write, what an agent may
//! touch and be shown, what spend reads, and that the reads the leader's dispatcher and timer
//! make (`roost_core::scheduling`) hold on any state.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use roost_core::command::AgentPatch;
use roost_core::scheduling::{budget_blocker, claim_blocker, exhausted, next_tick, worker_fits};
use roost_core::*;

use super::tenant::{outcome_companies, Foreign};
use super::world::World;

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, turning a panic into an error naming its message and place. The panic is not
/// printed: proptest re-runs a failing case hundreds of times while it shrinks it. Panics
/// outside `caught` print as usual.
pub fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.get() {
                CAUGHT.set(Some(info.to_string()));
            } else {
                default(info);
            }
        }));
    });
    CATCHING.set(true);
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.set(false);
    result.map_err(|_| CAUGHT.take().unwrap_or_else(|| "a panic".into()))
}

/// Applies `env` to `world`; a panic is an error naming the command.
pub fn apply(world: &mut World, env: &Envelope) -> Result<Vec<Applied>, String> {
    caught(|| world.apply(env.clone()))
        .map_err(|p| format!("apply {p}\n command: {}", describe(env)))
}

/// The envelopes a log entry applies, in order: a batch's, or itself.
pub fn inner(env: &Envelope) -> Vec<&Envelope> {
    match &env.command {
        Command::Batch { envelopes } => envelopes.iter().collect(),
        _ => vec![env],
    }
}

/// A short description of an envelope for failure messages (huge strings cut).
pub fn describe(env: &Envelope) -> String {
    let text = serde_json::to_string(env).unwrap_or_default();
    let cut: String = text.chars().take(1500).collect();
    if cut.len() < text.len() {
        format!("{cut}... ({} bytes)", text.len())
    } else {
        cut
    }
}

/// A refused command writes nothing but the expiry of old idempotency keys, and, for a keyed
/// command, the refusal itself, remembered so a retry gets the same answer
/// (roost-core/src/state.rs, `apply_at`).
pub fn refusal_writes_nothing(env: &Envelope, applied: &Applied) -> Result<(), String> {
    let Err(refusal) = &applied.outcome else {
        return Ok(());
    };
    for change in &applied.changes {
        let allowed = match change {
            Change::Forgotten(_) => true,
            Change::Remembered(r) => {
                env.idempotency_key.is_some() && r.outcome.as_ref().err() == Some(refusal)
            }
            _ => false,
        };
        if !allowed {
            let row: String = format!("{change:?}").chars().take(800).collect();
            return Err(format!(
                "refused ({refusal}) but wrote {row}\n command: {}",
                describe(env)
            ));
        }
    }
    Ok(())
}

/// An agent's accepted `UpdateAgent` is a ceo's grant of `canCreateAgents` alone, to another
/// agent of its company; an agent's accepted `HireAgent` never makes a ceo
/// (roost-core/src/rules/agent.rs). Read after the apply: no accepted write changes its
/// sender's own role or company.
pub fn agents_keep_to_their_grants(
    state: &State,
    env: &Envelope,
    applied: &Applied,
) -> Result<(), String> {
    let (Some(own), Ok(outcome)) = (env.actor.agent_id(), &applied.outcome) else {
        return Ok(());
    };
    let ok = match (&env.command, outcome) {
        (Command::UpdateAgent { agent_id, patch }, _) => {
            let alone = AgentPatch {
                can_create_agents: patch.can_create_agents,
                ..Default::default()
            };
            let sender = state.agents.get(own);
            let target = state.agents.get(agent_id);
            patch.can_create_agents.is_some()
                && *patch == alone
                && agent_id != own
                && sender.zip(target).is_some_and(|(s, t)| {
                    s.is_ceo() && s.exercises_grants() && s.company_id == t.company_id
                })
        }
        (Command::HireAgent { .. }, Outcome::Hire { agent, .. }) => !agent.is_ceo(),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "an agent's write went past its grants: {}",
            describe(env)
        ))
    }
}

/// The words of a text: runs of id characters.
fn words(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Ids of objects of other companies than `company`: agents, issues, runs, wakes.
pub fn foreign_ids(state: &State, company: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    ids.extend(
        state
            .agents
            .values()
            .filter(|a| a.company_id != company)
            .map(|a| a.id.clone()),
    );
    ids.extend(
        state
            .issues
            .values()
            .filter(|i| i.company_id != company)
            .flat_map(|i| [i.id.clone(), i.identifier.clone()]),
    );
    ids.extend(
        state
            .runs
            .values()
            .filter(|r| r.company_id != company)
            .map(|r| r.id.clone()),
    );
    ids.extend(
        state
            .wakes
            .values()
            .filter(|w| w.company_id != company)
            .map(|w| w.id.clone()),
    );
    ids
}

/// What an agent of `company` was answered must show nothing of another company: an
/// accepted command only its own company's objects, a refusal no id of another company's
/// objects that the envelope did not itself name.
pub fn answer_stays_in_tenant(
    env: &Envelope,
    company: &str,
    applied: &Applied,
    foreign: &BTreeSet<String>,
) -> Result<(), String> {
    match &applied.outcome {
        Ok(outcome) => {
            for shown in outcome_companies(outcome) {
                if shown.as_deref() != Some(company) {
                    let o: String = format!("{outcome:?}").chars().take(800).collect();
                    return Err(format!(
                        "agent {} of {company} was answered with an object of {shown:?}: {o}\n command: {}",
                        env.actor.id,
                        describe(env)
                    ));
                }
            }
        }
        Err(e) => {
            let sent = serde_json::to_string(env).unwrap_or_default();
            let sent = words(&sent);
            let said = format!("{e} {}", e.details());
            let leak = words(&said)
                .into_iter()
                .find(|w| foreign.contains(*w) && !sent.contains(w))
                .map(str::to_string);
            if let Some(leak) = leak {
                return Err(format!(
                    "agent {} of {company} was told about {leak} of another company: {said}\n command: {}",
                    env.actor.id,
                    describe(env)
                ));
            }
        }
    }
    Ok(())
}

/// The company an entry's every envelope acts for as an agent, if they all do for one.
pub fn agent_company(env: &Envelope) -> Option<String> {
    let companies: BTreeSet<Option<&String>> = inner(env)
        .iter()
        .map(|e| {
            (e.actor.kind == ActorKind::Agent)
                .then_some(e.actor.company_id.as_ref())
                .flatten()
        })
        .collect();
    match companies.into_iter().collect::<Vec<_>>()[..] {
        [Some(company)] => Some(company.clone()),
        _ => None,
    }
}

/// Applies `env`, checking that an agent never changes another company's rows.
pub fn apply_as_tenant(world: &mut World, env: &Envelope) -> Result<Vec<Applied>, String> {
    let Some(company) = agent_company(env) else {
        return apply(world, env);
    };
    let before = Foreign::of(&world.state, &company);
    let foreign = foreign_ids(&world.state, &company);
    let applied = apply(world, env)?;
    let after = Foreign::of(&world.state, &company);
    if let Some(diff) = before.first_difference(&after) {
        return Err(format!(
            "an agent of {company} changed another company's row: {diff}\n command: {}",
            describe(env)
        ));
    }
    for (e, a) in inner(env).into_iter().zip(&applied) {
        answer_stays_in_tenant(e, &company, a, &foreign)?;
    }
    Ok(applied)
}

/// Spend as `State::spent` reads it, against the cost events recorded: per scope (each
/// company and agent) and window (the event's month, lifetime), it is the sum of the
/// events' cents (saturated, never wrapped), so at least every single cost, and it never
/// goes down from one step to the next (`seen`).
pub fn spend_is_the_sum(
    state: &State,
    seen: &mut BTreeMap<(String, i64), u64>,
) -> Result<(), String> {
    type Scope = (BudgetScopeType, String, BudgetWindow);
    let mut expected: BTreeMap<(String, i64), (Scope, Timestamp, u64, u64)> = BTreeMap::new();
    for e in state.cost_events.values() {
        for (scope_type, scope_id) in [
            (BudgetScopeType::Company, &e.company_id),
            (BudgetScopeType::Agent, &e.agent_id),
        ] {
            for window in [BudgetWindow::CalendarMonthUtc, BudgetWindow::Lifetime] {
                let key = (scope_key(scope_type, scope_id), window.key(e.occurred_at));
                let entry = expected.entry(key).or_insert((
                    (scope_type, scope_id.clone(), window),
                    e.occurred_at,
                    0,
                    0,
                ));
                entry.2 = entry.2.saturating_add(e.cost_cents);
                entry.3 = entry.3.max(e.cost_cents);
            }
        }
    }
    for (key, ((scope_type, scope_id, window_kind), at, sum, largest)) in expected {
        let probe = BudgetPolicy {
            id: "probe".into(),
            company_id: String::new(),
            scope_type,
            scope_id,
            window_kind,
            amount: 0,
            warn_percent: 80,
            hard_stop_enabled: false,
            created_at: at,
            updated_at: at,
        };
        let spent = state.spent(&probe, at);
        if spent < largest || spent != sum {
            return Err(format!(
                "{key:?}: spent reads {spent}¢; its events sum to {sum}¢, the largest {largest}¢"
            ));
        }
        let before = seen.insert(key.clone(), spent).unwrap_or(0);
        if spent < before {
            return Err(format!(
                "{key:?}: spent went down from {before}¢ to {spent}¢"
            ));
        }
    }
    Ok(())
}

/// The reads the leader's timer and dispatcher make on every agent, wake and worker, and the
/// budget reads of every policy: they must not panic on any state apply can reach.
pub fn reads_hold(state: &State, now: Timestamp) -> Result<(), String> {
    caught(|| reads(state, now)).map_err(|p| format!("a read {p}"))
}

fn reads(state: &State, now: Timestamp) {
    for agent in state.agents.values() {
        let _ = next_tick(agent);
        let _ = budget_blocker(state, agent, None, now);
        let _ = exhausted(state, agent, None, now);
        for project in state.projects.keys() {
            let _ = budget_blocker(state, agent, Some(project), now);
            let _ = exhausted(state, agent, Some(project), now);
        }
        for worker in state.workers.values() {
            let _ = worker_fits(state, worker, agent);
        }
    }
    for wake in state.queued_wakes() {
        let _ = claim_blocker(state, wake);
    }
    for policy in state.budget_policies.values() {
        let _ = state.spent(policy, now);
        let _ = state.reserved(policy, None);
    }
}
