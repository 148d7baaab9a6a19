//! Every acknowledged wake eventually ran or says why not: on every replica, each `ok` wake is
//! `claimed` by a run the replica has, or `skipped`, `suppressed` or `deferred`, or `coalesced`
//! into a wake that itself passes this check. `queued` (never ran), `cancelled` and a missing
//! wake are violations.

use std::collections::BTreeSet;

use crate::history::{Action, Op};
use crate::snapshot::{ReplicaSnapshot, WakeStatus};
use crate::verdict::Verdict;

pub const NAME: &str = "acknowledged_wakes";

pub fn check_acknowledged_wakes(ops: &[Op], replicas: &[ReplicaSnapshot]) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    if replicas.is_empty() {
        verdict.violation("replicas", "no replica snapshots to check against", vec![]);
        return verdict;
    }
    for op in ops {
        let (Action::Wake { agent_id, .. }, Some(result)) = (&op.action, op.ok_result()) else {
            continue;
        };
        let Some(wake_id) = &result.wake_id else {
            verdict.violation(
                format!("agent {agent_id}"),
                "acknowledged wake has no wake id in its result",
                vec![op.id],
            );
            continue;
        };
        for replica in replicas {
            if let Err(why) = accounted_for(replica, wake_id) {
                verdict.violation(
                    format!("replica {}", replica.node),
                    format!("acknowledged wake {wake_id} of agent {agent_id}: {why}"),
                    vec![op.id],
                );
            }
        }
    }
    verdict
}

/// Follows `coalesced_into` until a wake that ran or says why it did not.
fn accounted_for(replica: &ReplicaSnapshot, wake_id: &str) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let mut current = wake_id.to_string();
    loop {
        if !seen.insert(current.clone()) {
            return Err(format!("coalesced in a cycle through wake {current}"));
        }
        let via = if current == wake_id {
            String::new()
        } else {
            format!(" (merged into wake {current})")
        };
        let Some(wake) = replica.wakes.get(&current) else {
            return Err(format!("missing{via}"));
        };
        match wake.status {
            WakeStatus::Skipped | WakeStatus::Suppressed | WakeStatus::Deferred => return Ok(()),
            WakeStatus::Claimed => {
                return match &wake.run_id {
                    Some(run) if replica.runs.contains_key(run) => Ok(()),
                    Some(run) => Err(format!("claimed by run {run}, which is missing{via}")),
                    None => Err(format!("claimed without a run{via}")),
                };
            }
            WakeStatus::Coalesced => match &wake.coalesced_into {
                Some(into) => current = into.clone(),
                None => return Err(format!("coalesced into no wake{via}")),
            },
            WakeStatus::Queued => return Err(format!("still queued, never ran{via}")),
            WakeStatus::Cancelled => return Err(format!("cancelled{via}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::testutil::*;
    use crate::history::{OkResult, Outcome};
    use crate::snapshot::{RunSnapshot, RunStatus, WakeSnapshot};

    fn wake_ok(id: u64, wake_id: &str) -> Op {
        let action = Action::Wake {
            agent_id: "a1".into(),
            issue_id: None,
        };
        let result = OkResult {
            wake_id: Some(wake_id.into()),
            ..OkResult::default()
        };
        op(id, 0, 10, action, Outcome::Ok(result))
    }

    fn wake(status: WakeStatus, run: Option<&str>, into: Option<&str>) -> WakeSnapshot {
        WakeSnapshot {
            status,
            run_id: run.map(Into::into),
            coalesced_into: into.map(Into::into),
        }
    }

    fn replica(node: &str, wakes: Vec<(&str, WakeSnapshot)>) -> ReplicaSnapshot {
        let mut snapshot = ReplicaSnapshot {
            node: node.into(),
            ..ReplicaSnapshot::default()
        };
        for (id, w) in wakes {
            snapshot.wakes.insert(id.into(), w);
        }
        let run = RunSnapshot {
            agent_id: "a1".into(),
            company_id: "co".into(),
            status: RunStatus::Succeeded,
            reserved_cents: 0,
        };
        snapshot.runs.insert("r1".into(), run);
        snapshot
    }

    fn good_wakes() -> Vec<(&'static str, WakeSnapshot)> {
        vec![
            ("w1", wake(WakeStatus::Claimed, Some("r1"), None)),
            ("w2", wake(WakeStatus::Coalesced, None, Some("w1"))),
            ("w3", wake(WakeStatus::Skipped, None, None)),
            ("w4", wake(WakeStatus::Suppressed, None, None)),
            ("w5", wake(WakeStatus::Deferred, None, None)),
            ("w6", wake(WakeStatus::Coalesced, None, Some("w2"))),
        ]
    }

    fn all_ok_wakes() -> Vec<Op> {
        ["w1", "w2", "w3", "w4", "w5", "w6"]
            .iter()
            .enumerate()
            .map(|(i, w)| wake_ok(i as u64 + 1, w))
            .collect()
    }

    #[test]
    fn ran_or_explained_wakes_pass() {
        let mut ops = all_ok_wakes();
        // Not acknowledged: need not exist anywhere.
        let unacked = Action::Wake {
            agent_id: "a1".into(),
            issue_id: None,
        };
        ops.push(op(10, 0, 10, unacked.clone(), unknown()));
        ops.push(op(11, 0, 10, unacked, failed()));
        let replicas = vec![replica("n1", good_wakes()), replica("n2", good_wakes())];
        let verdict = check_acknowledged_wakes(&ops, &replicas);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn a_wake_still_queued_fails() {
        let mut wakes = good_wakes();
        wakes[2].1 = wake(WakeStatus::Queued, None, None);
        let replicas = vec![replica("n1", good_wakes()), replica("n2", wakes)];
        let verdict = check_acknowledged_wakes(&all_ok_wakes(), &replicas);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].subject, "replica n2");
        assert_eq!(verdict.violations[0].ops, vec![3]);
    }

    #[test]
    fn a_wake_missing_on_a_replica_fails() {
        let mut wakes = good_wakes();
        wakes.remove(3);
        let replicas = vec![replica("n1", good_wakes()), replica("n2", wakes)];
        let verdict = check_acknowledged_wakes(&all_ok_wakes(), &replicas);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].ops, vec![4]);
    }

    #[test]
    fn claimed_without_a_known_run_fails() {
        let mut wakes = good_wakes();
        wakes[0].1 = wake(WakeStatus::Claimed, Some("r404"), None);
        let verdict = check_acknowledged_wakes(&all_ok_wakes(), &[replica("n1", wakes)]);
        // w1, and w2 and w6 merged into it.
        let named: Vec<u64> = verdict
            .violations
            .iter()
            .flat_map(|v| v.ops.clone())
            .collect();
        assert_eq!(named, vec![1, 2, 6], "{verdict}");
    }

    #[test]
    fn coalesced_into_a_queued_wake_fails() {
        let wakes = vec![
            ("w1", wake(WakeStatus::Queued, None, None)),
            ("w2", wake(WakeStatus::Coalesced, None, Some("w1"))),
        ];
        let verdict = check_acknowledged_wakes(&[wake_ok(2, "w2")], &[replica("n1", wakes)]);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert!(verdict.violations[0]
            .message
            .contains("merged into wake w1"));
    }

    #[test]
    fn a_coalescing_cycle_fails() {
        let wakes = vec![
            ("w1", wake(WakeStatus::Coalesced, None, Some("w2"))),
            ("w2", wake(WakeStatus::Coalesced, None, Some("w1"))),
        ];
        let verdict = check_acknowledged_wakes(&[wake_ok(1, "w1")], &[replica("n1", wakes)]);
        assert!(verdict.violations[0].message.contains("cycle"), "{verdict}");
    }

    #[test]
    fn a_cancelled_wake_fails() {
        let wakes = vec![("w1", wake(WakeStatus::Cancelled, None, None))];
        let verdict = check_acknowledged_wakes(&[wake_ok(1, "w1")], &[replica("n1", wakes)]);
        assert!(!verdict.is_ok());
    }

    #[test]
    fn an_ok_wake_without_id_and_no_replicas_fail() {
        let action = Action::Wake {
            agent_id: "a1".into(),
            issue_id: None,
        };
        let no_id = op(1, 0, 10, action, ok());
        let verdict = check_acknowledged_wakes(&[no_id], &[replica("n1", good_wakes())]);
        assert_eq!(verdict.violations[0].ops, vec![1]);
        assert!(!check_acknowledged_wakes(&all_ok_wakes(), &[]).is_ok());
    }
}
