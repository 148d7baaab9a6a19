//! Every due firing of a schedule happened exactly once: on every replica, a routine's schedule
//! runs name each nominal instant (`scheduledFor`) at most once, the instants follow the
//! trigger's period from its first instant with no gap (except the instants a drop record,
//! made past the catch-up cap, says were dropped), and none is missing at the end: every
//! instant due long enough before the routine was stopped fired.
//!
//! The rules this mirrors are in roost-core/src/rules/routine.rs (`fire`): an instant fires
//! once, and after downtime `enqueue_missed_with_cap` makes up missed instants one by one until
//! the cap, then records one `skipped` run at the next missed instant and resumes at the first
//! instant after that command's time. A drop record excuses its instants only if it came after
//! downtime: when it was made, the instant after it was overdue, past the routine's stagger
//! (estimated as the least lateness of its firings). A drop on time is a lost firing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::snapshot::{ReplicaSnapshot, RoutineRunSnapshot};
use crate::verdict::Verdict;

pub const NAME: &str = "routine_firings";
/// Slack on the stagger estimate: one round of the leader's routine timer
/// (roost-server/src/workers/routine_timer.rs).
const TIMER_ROUND_MS: i64 = 200;

/// What a routine's schedule should have done: an `every` trigger's period and first instant,
/// and when the routine stopped firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineSchedule {
    pub routine_id: String,
    /// The trigger's period (`every 2s`: 2000).
    pub period_ms: i64,
    /// The trigger's first nominal instant (its `nextRunAt` when it was created), Unix ms.
    pub first_due_ms: i64,
    /// When the routine was paused (the pause's first request, wall clock, Unix ms): it was
    /// active until at least then.
    pub stopped_at_ms: i64,
    /// How late a firing may come after its instant: the stagger window, one period for the
    /// timer's round and the apply, and a margin.
    pub allowed_lateness_ms: i64,
}

impl RoutineSchedule {
    /// `t` relative to the first instant, for messages.
    fn at(&self, t: i64) -> String {
        let offset = (t - self.first_due_ms) as f64 / 1000.0;
        format!("{t} (first{offset:+.1}s)")
    }

    /// The first instant of the schedule after `t`.
    fn next_after(&self, t: i64) -> i64 {
        if t < self.first_due_ms {
            return self.first_due_ms;
        }
        let k = (t - self.first_due_ms) / self.period_ms + 1;
        self.first_due_ms + k * self.period_ms
    }
}

pub fn check_routine_firings(replicas: &[ReplicaSnapshot], schedule: &RoutineSchedule) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    if replicas.is_empty() {
        verdict.violation("replicas", "no replica snapshots to check against", vec![]);
        return verdict;
    }
    if schedule.period_ms <= 0 {
        verdict.violation(
            format!("routine {}", schedule.routine_id),
            format!("period of {} ms: not a schedule", schedule.period_ms),
            vec![],
        );
        return verdict;
    }
    for replica in replicas {
        let subject = format!("replica {} routine {}", replica.node, schedule.routine_id);
        let Some(routine) = replica.routines.get(&schedule.routine_id) else {
            verdict.violation(subject, "the routine is missing", vec![]);
            continue;
        };
        for why in problems(&routine.runs, routine.complete, schedule) {
            verdict.violation(subject.clone(), why, vec![]);
        }
    }
    verdict
}

/// What is wrong with one replica's runs, in words.
fn problems(runs: &[RoutineRunSnapshot], complete: bool, s: &RoutineSchedule) -> Vec<String> {
    let mut out = Vec::new();
    // Instant → the schedule runs naming it.
    let mut by_instant: BTreeMap<i64, Vec<&RoutineRunSnapshot>> = BTreeMap::new();
    for run in runs.iter().filter(|r| r.source == "schedule") {
        match run.scheduled_for_ms {
            Some(t) => by_instant.entry(t).or_default().push(run),
            None => out.push(format!("schedule run {} has no scheduledFor", run.id)),
        }
    }
    for (t, named) in &by_instant {
        if named.len() > 1 {
            let mut ids: Vec<&str> = named.iter().map(|r| r.id.as_str()).collect();
            ids.sort_unstable();
            out.push(format!(
                "instant {} fired {} times: runs {}",
                s.at(*t),
                named.len(),
                ids.join(", ")
            ));
        }
        if *t < s.first_due_ms || (t - s.first_due_ms) % s.period_ms != 0 {
            out.push(format!(
                "instant {} is not one of the schedule's (every {} ms from {})",
                s.at(*t),
                s.period_ms,
                s.first_due_ms
            ));
        }
    }
    // The routine's stagger, at most: every firing comes at least that late.
    let stagger = runs
        .iter()
        .filter(|r| r.source == "schedule" && !r.is_drop_record())
        .filter_map(|r| Some(r.triggered_at_ms? - r.scheduled_for_ms?))
        .min()
        .unwrap_or(0);
    let mut expected = match by_instant.keys().next() {
        Some(first) if !complete => *first,
        _ => s.first_due_ms,
    };
    for (t, named) in &by_instant {
        if *t > expected {
            let lost = (t - expected) / s.period_ms;
            out.push(format!(
                "{lost} firing(s) lost: nothing fired from {} to {}",
                s.at(expected),
                s.at(t - s.period_ms)
            ));
        } else if *t < expected {
            out.push(format!(
                "instant {} fired although the schedule had moved on to {} (dropped, or off \
                 the period)",
                s.at(*t),
                s.at(expected)
            ));
        }
        expected = expected.max(expected_after(s, stagger, *t, named, &mut out));
    }
    // The end: the next instant was not due long enough before the pause to have fired.
    let due_by = s.stopped_at_ms - s.allowed_lateness_ms;
    if expected <= due_by {
        out.push(format!(
            "firings lost at the end: instant {} and those after it never fired, though the \
             routine was active until {} (a firing may come {} ms late)",
            s.at(expected),
            s.at(s.stopped_at_ms),
            s.allowed_lateness_ms
        ));
    }
    out
}

/// Where the schedule went after instant `t`, named by the runs `named`: the next period, or
/// for a drop record made after downtime the first instant after the command that dropped the
/// rest. A drop record made on time is a violation, pushed to `out`.
fn expected_after(
    s: &RoutineSchedule,
    stagger: i64,
    t: i64,
    named: &[&RoutineRunSnapshot],
    out: &mut Vec<String>,
) -> i64 {
    let mut after = t + s.period_ms;
    for r in named.iter().filter(|r| r.is_drop_record()) {
        let Some(at) = r.triggered_at_ms else {
            out.push(format!("drop record {} has no triggeredAt", r.id));
            continue;
        };
        if at < t + s.period_ms + stagger - TIMER_ROUND_MS {
            out.push(format!(
                "instant {} and those after it up to {} dropped by run {} without downtime: \
                 made {} ms after the instant, before the next one was overdue (period {} ms, \
                 stagger about {} ms)",
                s.at(t),
                s.at(at),
                r.id,
                at - t,
                s.period_ms,
                stagger
            ));
        }
        after = after.max(s.next_after(at.max(t)));
    }
    after
}

#[cfg(test)]
mod tests;
