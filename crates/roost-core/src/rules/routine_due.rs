//! What the leader's routine timer proposes: the schedule firings and the alerts due now
//! (`rules/routine.rs` decides each again in apply).

use super::routine::alert_due;
use crate::routine::*;
use crate::state::State;
use crate::time::Timestamp;

/// A firing the leader should propose: the trigger, its instant and the routine's stagger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueFiring {
    pub trigger_id: String,
    pub scheduled_for: Timestamp,
    pub stagger_ms: u64,
}

/// The schedule firings the leader should propose at `now`: each enabled schedule trigger of
/// an active routine whose `next_run_at`, delayed by its routine's stagger, has come.
pub fn due_firings(state: &State, now: Timestamp, stagger_window_ms: u64) -> Vec<DueFiring> {
    let rs = &state.routines;
    rs.triggers
        .values()
        .filter(|t| t.kind == TriggerKind::Schedule && t.enabled)
        .filter_map(|t| {
            let at = t.next_run_at?;
            let r = rs.routines.get(&t.routine_id)?;
            let stagger = stagger_ms(&r.id, stagger_window_ms);
            let due = at.0.saturating_add(stagger);
            (r.status == RoutineStatus::Active && due <= now.0).then(|| DueFiring {
                trigger_id: t.id.clone(),
                scheduled_for: at,
                stagger_ms: stagger.unsigned_abs(),
            })
        })
        .collect()
}

/// Routines whose failures in a row call for their alert issue.
pub fn alerts_due(state: &State) -> Vec<String> {
    state
        .routines
        .routines
        .values()
        .filter(|r| alert_due(r))
        .map(|r| r.id.clone())
        .collect()
}
