//! Every acknowledged write is present after the heal: each `ok` comment is in its issue's
//! comments, and each `ok` cost report's event is recorded, on every replica.
//!
//! `failed` and `unknown` writes are not required. An `ok` write whose result lacks the id is a
//! violation too (the harness recorded something the checker cannot check).

use crate::history::{Action, Op};
use crate::snapshot::ReplicaSnapshot;
use crate::verdict::Verdict;

pub const NAME: &str = "acknowledged_writes";

pub fn check_acknowledged_writes(ops: &[Op], replicas: &[ReplicaSnapshot]) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    if replicas.is_empty() {
        verdict.violation("replicas", "no replica snapshots to check against", vec![]);
        return verdict;
    }
    for op in ops {
        let Some(result) = op.ok_result() else {
            continue;
        };
        match &op.action {
            Action::Comment { issue_id, .. } => {
                let Some(comment_id) = &result.comment_id else {
                    verdict.violation(
                        format!("issue {issue_id}"),
                        "acknowledged comment has no comment id in its result",
                        vec![op.id],
                    );
                    continue;
                };
                for replica in replicas {
                    let present = replica
                        .issues
                        .get(issue_id)
                        .is_some_and(|issue| issue.comment_ids.contains(comment_id));
                    if !present {
                        verdict.violation(
                            format!("replica {}", replica.node),
                            format!(
                                "acknowledged comment {comment_id} on issue {issue_id} is missing"
                            ),
                            vec![op.id],
                        );
                    }
                }
            }
            Action::CostReport { agent_id, .. } => {
                let Some(event_id) = &result.cost_event_id else {
                    verdict.violation(
                        format!("agent {agent_id}"),
                        "acknowledged cost report has no cost event id in its result",
                        vec![op.id],
                    );
                    continue;
                };
                for replica in replicas {
                    if !replica.cost_event_ids.contains(event_id) {
                        verdict.violation(
                            format!("replica {}", replica.node),
                            format!(
                                "acknowledged cost event {event_id} of agent {agent_id} is missing"
                            ),
                            vec![op.id],
                        );
                    }
                }
            }
            Action::MemoryEntry { agent_id, .. } => {
                let (Some(entry_id), Some(seq)) =
                    (&result.memory_entry_id, result.memory_entry_seq)
                else {
                    verdict.violation(
                        format!("agent {agent_id}"),
                        "acknowledged memory entry has no id and sequence in its result",
                        vec![op.id],
                    );
                    continue;
                };
                for replica in replicas {
                    let memory = replica.memory.get(agent_id);
                    let present = memory.is_some_and(|m| m.entry_ids.contains(entry_id));
                    // Older than every entry the replica keeps: dropped for newer ones (the
                    // per-agent cap), not lost.
                    let dropped = memory.is_some_and(|m| seq < m.kept_from_seq);
                    if !present && !dropped {
                        verdict.violation(
                            format!("replica {}", replica.node),
                            format!(
                                "acknowledged memory entry {entry_id} (seq {seq}) of agent \
                                 {agent_id} is missing"
                            ),
                            vec![op.id],
                        );
                    }
                }
            }
            _ => {}
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::testutil::*;
    use crate::history::{OkResult, Outcome};
    use crate::snapshot::IssueSnapshot;

    fn comment(id: u64, issue: &str, outcome: Outcome) -> Op {
        let action = Action::Comment {
            issue_id: issue.into(),
            run_id: None,
        };
        op(id, 0, 10, action, outcome)
    }

    fn comment_ok(id: u64, issue: &str, comment_id: &str) -> Op {
        let result = OkResult {
            comment_id: Some(comment_id.into()),
            ..OkResult::default()
        };
        comment(id, issue, Outcome::Ok(result))
    }

    fn cost_ok(id: u64, event_id: &str) -> Op {
        let action = Action::CostReport {
            agent_id: "a1".into(),
            run_id: None,
            amount_cents: 5,
        };
        let result = OkResult {
            cost_event_id: Some(event_id.into()),
            ..OkResult::default()
        };
        op(id, 0, 10, action, Outcome::Ok(result))
    }

    fn replica(node: &str, comments: &[(&str, &str)], events: &[&str]) -> ReplicaSnapshot {
        let mut snapshot = ReplicaSnapshot {
            node: node.into(),
            ..ReplicaSnapshot::default()
        };
        for (issue, comment) in comments {
            let entry: &mut IssueSnapshot = snapshot.issues.entry(issue.to_string()).or_default();
            entry.comment_ids.push(comment.to_string());
        }
        snapshot.cost_event_ids = events.iter().map(|e| e.to_string()).collect();
        snapshot
    }

    #[test]
    fn writes_present_everywhere_pass() {
        let ops = vec![
            comment_ok(1, "i1", "c1"),
            comment_ok(2, "i2", "c2"),
            cost_ok(3, "ce1"),
            comment(4, "i1", unknown()),
            comment(5, "i1", failed()),
        ];
        let all = [("i1", "c1"), ("i2", "c2")];
        let replicas = vec![replica("n1", &all, &["ce1"]), replica("n2", &all, &["ce1"])];
        let verdict = check_acknowledged_writes(&ops, &replicas);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn a_comment_missing_on_one_replica_fails() {
        let ops = vec![comment_ok(1, "i1", "c1"), comment_ok(2, "i1", "c2")];
        let replicas = vec![
            replica("n1", &[("i1", "c1"), ("i1", "c2")], &[]),
            replica("n2", &[("i1", "c1")], &[]),
        ];
        let verdict = check_acknowledged_writes(&ops, &replicas);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].subject, "replica n2");
        assert_eq!(verdict.violations[0].ops, vec![2]);
    }

    #[test]
    fn a_comment_on_the_wrong_issue_fails() {
        let ops = vec![comment_ok(1, "i1", "c1")];
        let replicas = vec![replica("n1", &[("i2", "c1")], &[])];
        assert!(!check_acknowledged_writes(&ops, &replicas).is_ok());
    }

    #[test]
    fn a_cost_event_missing_fails() {
        let ops = vec![cost_ok(1, "ce1"), cost_ok(2, "ce2")];
        let replicas = vec![
            replica("n1", &[], &["ce1", "ce2"]),
            replica("n2", &[], &["ce1"]),
        ];
        let verdict = check_acknowledged_writes(&ops, &replicas);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].ops, vec![2]);
    }

    #[test]
    fn an_ok_comment_without_id_fails() {
        let ops = vec![comment(1, "i1", ok())];
        let verdict = check_acknowledged_writes(&ops, &[replica("n1", &[], &[])]);
        assert_eq!(verdict.violations[0].ops, vec![1], "{verdict}");
    }

    #[test]
    fn no_replicas_fails() {
        let verdict = check_acknowledged_writes(&[comment_ok(1, "i1", "c1")], &[]);
        assert!(!verdict.is_ok());
    }

    fn memory_ok(id: u64, entry_id: &str, seq: u64) -> Op {
        let action = Action::MemoryEntry {
            agent_id: "a1".into(),
            run_id: Some("r1".into()),
        };
        let result = OkResult {
            memory_entry_id: Some(entry_id.into()),
            memory_entry_seq: Some(seq),
            ..OkResult::default()
        };
        op(id, 0, 10, action, Outcome::Ok(result))
    }

    fn with_memory(node: &str, entries: &[&str], kept_from_seq: u64) -> ReplicaSnapshot {
        let mut snapshot = replica(node, &[], &[]);
        snapshot.memory.insert(
            "a1".into(),
            crate::snapshot::MemorySnapshot {
                entry_ids: entries.iter().map(|e| e.to_string()).collect(),
                kept_from_seq,
            },
        );
        snapshot
    }

    #[test]
    fn a_memory_entry_missing_on_a_replica_fails_unless_newer_entries_displaced_it() {
        let ops = vec![memory_ok(1, "e1", 100), memory_ok(2, "e2", 200)];
        let everywhere = vec![
            with_memory("n1", &["e1", "e2"], 0),
            with_memory("n2", &["e1", "e2"], 0),
        ];
        assert!(check_acknowledged_writes(&ops, &everywhere).is_ok());
        let lost = vec![
            with_memory("n1", &["e1", "e2"], 0),
            with_memory("n2", &["e2"], 0),
        ];
        let verdict = check_acknowledged_writes(&ops, &lost);
        assert_eq!(verdict.violations.len(), 1, "{verdict}");
        assert_eq!(verdict.violations[0].subject, "replica n2");
        assert_eq!(verdict.violations[0].ops, vec![1]);
        // n2 keeps entries from seq 150 on: e1 (seq 100) was dropped for newer ones.
        let capped = vec![
            with_memory("n1", &["e1", "e2"], 0),
            with_memory("n2", &["e2"], 150),
        ];
        assert!(check_acknowledged_writes(&ops, &capped).is_ok());
        // But an entry newer than the floor must be there.
        let hole = vec![with_memory("n1", &["e1"], 50)];
        assert!(!check_acknowledged_writes(&ops, &hole).is_ok());
    }
}
