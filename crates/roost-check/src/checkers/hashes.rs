//! Identical state hashes on every replica at the same applied index.
//!
//! Observations come from the final snapshots and from `ok` `read_state` operations. If two or
//! more replicas were observed but never two of them at the same applied index, nothing could
//! be compared and the verdict is inconclusive.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::history::{Action, Op, OpId};
use crate::snapshot::ReplicaSnapshot;
use crate::verdict::Verdict;

pub const NAME: &str = "state_hashes";

/// A replica's state hash at an applied index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HashObservation {
    pub node: String,
    pub applied_index: u64,
    pub state_hash: String,
    /// The `read_state` operation it came from, if any.
    #[serde(default)]
    pub op: Option<OpId>,
}

impl HashObservation {
    pub fn from_snapshot(snapshot: &ReplicaSnapshot) -> HashObservation {
        HashObservation {
            node: snapshot.node.clone(),
            applied_index: snapshot.applied_index,
            state_hash: snapshot.state_hash.clone(),
            op: None,
        }
    }

    /// One per `ok` `read_state` operation that reported both an index and a hash.
    pub fn from_history(ops: &[Op]) -> Vec<HashObservation> {
        ops.iter()
            .filter_map(|op| {
                let Action::ReadState { node } = &op.action else {
                    return None;
                };
                let result = op.ok_result()?;
                Some(HashObservation {
                    node: node.clone(),
                    applied_index: result.applied_index?,
                    state_hash: result.state_hash.clone()?,
                    op: Some(op.id),
                })
            })
            .collect()
    }
}

pub fn check_state_hashes(observations: &[HashObservation]) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    let mut by_index: BTreeMap<u64, Vec<&HashObservation>> = BTreeMap::new();
    for o in observations {
        by_index.entry(o.applied_index).or_default().push(o);
    }
    let mut compared = false;
    for (index, group) in &by_index {
        let nodes: BTreeSet<&str> = group.iter().map(|o| o.node.as_str()).collect();
        compared |= nodes.len() > 1;
        let hashes: BTreeSet<&str> = group.iter().map(|o| o.state_hash.as_str()).collect();
        if hashes.len() > 1 {
            let seen: Vec<String> = group
                .iter()
                .map(|o| format!("{}={}", o.node, o.state_hash))
                .collect();
            verdict.violation(
                format!("applied index {index}"),
                format!("replicas disagree: {}", seen.join(", ")),
                group.iter().filter_map(|o| o.op).collect(),
            );
        }
    }
    let nodes: BTreeSet<&str> = observations.iter().map(|o| o.node.as_str()).collect();
    if nodes.len() > 1 && !compared {
        verdict
            .inconclusive
            .push("no two replicas were observed at the same applied index".into());
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::testutil::*;
    use crate::history::{OkResult, Outcome};

    fn seen(node: &str, index: u64, hash: &str) -> HashObservation {
        HashObservation {
            node: node.into(),
            applied_index: index,
            state_hash: hash.into(),
            op: None,
        }
    }

    #[test]
    fn equal_hashes_at_equal_indices_pass() {
        let obs = vec![
            seen("n1", 10, "aa"),
            seen("n2", 10, "aa"),
            seen("n3", 12, "bb"),
            seen("n1", 12, "bb"),
            seen("n2", 11, "cc"),
        ];
        let verdict = check_state_hashes(&obs);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn different_hashes_at_one_index_fail() {
        let obs = vec![
            seen("n1", 10, "aa"),
            seen("n2", 10, "aa"),
            seen("n3", 10, "ab"),
        ];
        let verdict = check_state_hashes(&obs);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert!(verdict.violations[0].message.contains("n3=ab"));
    }

    #[test]
    fn one_replica_reporting_two_hashes_for_an_index_fails() {
        let obs = vec![
            seen("n1", 10, "aa"),
            seen("n1", 10, "zz"),
            seen("n2", 10, "aa"),
        ];
        assert!(!check_state_hashes(&obs).violations.is_empty());
    }

    #[test]
    fn nothing_comparable_is_inconclusive() {
        let obs = vec![seen("n1", 10, "aa"), seen("n2", 11, "bb")];
        let verdict = check_state_hashes(&obs);
        assert!(verdict.violations.is_empty());
        assert!(!verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn observations_from_reads_and_snapshots() {
        let read = |id, node: &str, hash: &str, outcome_ok: bool| {
            let outcome = if outcome_ok {
                Outcome::Ok(OkResult {
                    applied_index: Some(7),
                    state_hash: Some(hash.into()),
                    ..OkResult::default()
                })
            } else {
                unknown()
            };
            op(id, 0, 1, Action::ReadState { node: node.into() }, outcome)
        };
        let ops = vec![
            read(1, "n1", "aa", true),
            read(2, "n2", "ab", true),
            read(3, "n3", "x", false),
        ];
        let mut obs = HashObservation::from_history(&ops);
        assert_eq!(obs.len(), 2);
        let snapshot = ReplicaSnapshot {
            node: "n3".into(),
            applied_index: 7,
            state_hash: "aa".into(),
            ..ReplicaSnapshot::default()
        };
        obs.push(HashObservation::from_snapshot(&snapshot));
        let verdict = check_state_hashes(&obs);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].ops, vec![1, 2]);
    }
}
