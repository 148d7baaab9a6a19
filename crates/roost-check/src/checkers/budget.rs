//! No committed reservation past a hard limit.
//!
//! The invariant (docs/budgets.md) holds where reservations grow: every `AssignRun`
//! and every extension commits only if `spent + reserved <= limit` in the state it is applied
//! to. Spend alone may pass the limit (agents' cost reports are never refused, and a run's last
//! usage report may overshoot), so `spent + reserved > limit` at an arbitrary sampled index is
//! not by itself a violation. From observations of one scope on one replica, ordered by applied
//! index, the checker flags what must be a violation whatever happened between samples:
//!
//! - `reserved > limit`: reservations alone never exceed the limit;
//! - reservations grew between two samples `p` and `n` and `spent(p) + reserved(n) > limit`:
//!   spend never decreases within a window and reservations only shrink between growths, so the
//!   last growth saw at least `spent(p)` spent and at least `reserved(n)` reserved.
//!
//! At consecutive applied indices this is exactly `spent + reserved > limit` after a growth.
//! Spend going down means the window rolled over; that sample starts afresh. Observe hard-stop
//! policies only; a limit lowered (or a policy created) while runs hold reservations is not
//! modeled.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::snapshot::ReplicaSnapshot;
use crate::verdict::Verdict;

pub const NAME: &str = "reservations_within_limit";

/// One scope's budget on one replica at one applied index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetObservation {
    pub node: String,
    pub applied_index: u64,
    /// Scope key: `agent:<id>` or `company:<id>`.
    pub scope: String,
    /// Spent in the current window.
    pub spent_cents: u64,
    /// Held by live runs in the scope.
    pub reserved_cents: u64,
    /// The hard limit.
    pub limit_cents: u64,
}

impl BudgetObservation {
    /// One observation per hard-stop policy of a replica snapshot.
    pub fn from_snapshot(snapshot: &ReplicaSnapshot) -> Vec<BudgetObservation> {
        snapshot
            .budget_policies
            .values()
            .filter(|policy| policy.hard_stop)
            .map(|policy| BudgetObservation {
                node: snapshot.node.clone(),
                applied_index: snapshot.applied_index,
                scope: policy.scope.clone(),
                spent_cents: snapshot
                    .spent_cents
                    .get(&policy.scope)
                    .copied()
                    .unwrap_or(0),
                reserved_cents: snapshot.reserved_cents(&policy.scope),
                limit_cents: policy.amount_cents,
            })
            .collect()
    }
}

pub fn check_reservations(observations: &[BudgetObservation]) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    let mut series: BTreeMap<(&str, &str), Vec<&BudgetObservation>> = BTreeMap::new();
    for o in observations {
        series.entry((&o.node, &o.scope)).or_default().push(o);
    }
    for ((node, scope), mut points) in series {
        points.sort_by_key(|o| o.applied_index);
        let mut previous: Option<&BudgetObservation> = None;
        for o in points {
            // The spend the last growth at or before `o` must have seen, and its limit.
            let (floor, limit, since) = match previous {
                Some(p)
                    if p.spent_cents <= o.spent_cents && o.reserved_cents > p.reserved_cents =>
                {
                    (
                        p.spent_cents,
                        p.limit_cents.max(o.limit_cents),
                        Some(p.applied_index),
                    )
                }
                _ => (0, o.limit_cents, None),
            };
            if floor.saturating_add(o.reserved_cents) > limit {
                let message = match since {
                    Some(p) => format!(
                        "reservations grew to {} cents between index {p} and {}, with {floor} \
                         spent already at {p}: {} > limit {limit}",
                        o.reserved_cents,
                        o.applied_index,
                        floor + o.reserved_cents
                    ),
                    None => format!(
                        "{} cents reserved at index {}, above the limit {limit}",
                        o.reserved_cents, o.applied_index
                    ),
                };
                verdict.violation(format!("scope {scope} on replica {node}"), message, vec![]);
            }
            previous = Some(o);
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{PolicySnapshot, RunSnapshot, RunStatus};

    fn at(index: u64, spent: u64, reserved: u64, limit: u64) -> BudgetObservation {
        BudgetObservation {
            node: "n1".into(),
            applied_index: index,
            scope: "agent:a1".into(),
            spent_cents: spent,
            reserved_cents: reserved,
            limit_cents: limit,
        }
    }

    #[test]
    fn within_the_limit_passes() {
        let obs = vec![
            at(1, 0, 0, 100),
            at(2, 0, 40, 100),
            at(3, 30, 70, 100),
            at(4, 100, 0, 100),
        ];
        let verdict = check_reservations(&obs);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn spend_passing_the_limit_without_growth_passes() {
        // A cost report pushes spend over while a run still holds its reservation.
        let obs = vec![at(1, 50, 40, 100), at(2, 95, 40, 100), at(3, 130, 30, 100)];
        let verdict = check_reservations(&obs);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn growth_then_cost_between_sparse_samples_passes() {
        // Between 1 and 9: a claim reserved 20 (10 + 20 <= 100), then costs raised spend to 95.
        let obs = vec![at(1, 10, 0, 100), at(9, 95, 20, 100)];
        let verdict = check_reservations(&obs);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn a_window_rollover_starts_afresh() {
        let obs = vec![at(1, 90, 0, 100), at(2, 0, 30, 100)];
        let verdict = check_reservations(&obs);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn reservations_alone_above_the_limit_fail() {
        let obs = vec![at(1, 0, 0, 100), at(2, 0, 120, 100)];
        let verdict = check_reservations(&obs);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert!(verdict.violations[0].message.contains("120"), "{verdict}");
    }

    #[test]
    fn reservation_growing_past_the_limit_fails() {
        let obs = vec![at(1, 90, 0, 100), at(2, 90, 20, 100)];
        let verdict = check_reservations(&obs);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(
            verdict.violations[0].subject,
            "scope agent:a1 on replica n1"
        );
    }

    #[test]
    fn unsorted_input_and_separate_replicas_are_handled() {
        let mut other = at(2, 90, 20, 100);
        other.node = "n2".into();
        // n1 grows past the limit (given out of order); n2's single sample is 20 <= 100.
        let obs = vec![at(7, 90, 20, 100), other, at(3, 90, 0, 100)];
        let verdict = check_reservations(&obs);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert!(verdict.violations[0].subject.ends_with("n1"));
    }

    #[test]
    fn observations_from_a_snapshot() {
        let mut snapshot = ReplicaSnapshot {
            node: "n3".into(),
            applied_index: 40,
            ..ReplicaSnapshot::default()
        };
        let policy = |scope: &str, amount, hard_stop| PolicySnapshot {
            scope: scope.into(),
            amount_cents: amount,
            hard_stop,
        };
        snapshot
            .budget_policies
            .insert("p1".into(), policy("agent:a1", 100, true));
        snapshot
            .budget_policies
            .insert("p2".into(), policy("company:co", 10, false));
        snapshot.spent_cents.insert("agent:a1".into(), 30);
        let run = RunSnapshot {
            agent_id: "a1".into(),
            company_id: "co".into(),
            status: RunStatus::Running,
            reserved_cents: 25,
        };
        snapshot.runs.insert("r1".into(), run);
        let obs = BudgetObservation::from_snapshot(&snapshot);
        assert_eq!(obs.len(), 1, "soft policies are not observed");
        assert_eq!((obs[0].spent_cents, obs[0].reserved_cents), (30, 25));
        assert_eq!((obs[0].applied_index, obs[0].limit_cents), (40, 100));
        assert!(check_reservations(&obs).is_ok());
    }
}
