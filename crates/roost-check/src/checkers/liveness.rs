//! Liveness: after the heal, a new write succeeded within the window (5 s in the issue): some
//! write called at or after `heal_ns` returned `ok` by `heal_ns + window_ns`.

use crate::history::Op;
use crate::verdict::Verdict;

pub const NAME: &str = "liveness";

/// The issue's window: 5 s in nanoseconds.
pub const LIVENESS_WINDOW_NS: i64 = 5_000_000_000;

pub fn check_liveness(ops: &[Op], heal_ns: i64, window_ns: i64) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    let deadline = heal_ns.saturating_add(window_ns);
    let after: Vec<&Op> = ops
        .iter()
        .filter(|op| op.action.is_write() && op.call_ns >= heal_ns)
        .collect();
    if after
        .iter()
        .any(|op| op.is_ok() && op.return_ns <= deadline)
    {
        return verdict;
    }
    let first_ok = after
        .iter()
        .filter(|op| op.is_ok())
        .min_by_key(|op| op.return_ns);
    let secs = |ns: i64| ns as f64 / 1e9;
    let (message, involved) = match first_ok {
        Some(op) => (
            format!(
                "the first write after the heal succeeded {:.3} s after it (window {:.3} s)",
                secs(op.return_ns - heal_ns),
                secs(window_ns)
            ),
            vec![op.id],
        ),
        None if after.is_empty() => ("no write was attempted after the heal".to_string(), vec![]),
        None => (
            format!(
                "none of the {} writes attempted after the heal succeeded",
                after.len()
            ),
            after.iter().take(10).map(|op| op.id).collect(),
        ),
    };
    verdict.violation(format!("heal at {heal_ns} ns"), message, involved);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::testutil::*;
    use crate::history::{Action, OkResult, Outcome};

    const S: i64 = 1_000_000_000;
    const HEAL: i64 = 100 * S;

    fn comment(id: u64, call: i64, ret: i64, outcome: Outcome) -> Op {
        let action = Action::Comment {
            issue_id: "i1".into(),
            run_id: None,
        };
        op(id, call, ret, action, outcome)
    }

    #[test]
    fn a_write_within_the_window_passes() {
        let ops = vec![
            comment(1, HEAL - S, HEAL + S, ok()),
            comment(2, HEAL + S, HEAL + 3 * S, unknown()),
            comment(3, HEAL + 2 * S, HEAL + 4 * S, ok()),
        ];
        let verdict = check_liveness(&ops, HEAL, LIVENESS_WINDOW_NS);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn the_window_bounds_are_inclusive() {
        let ops = vec![comment(1, HEAL, HEAL + 5 * S, ok())];
        assert!(check_liveness(&ops, HEAL, LIVENESS_WINDOW_NS).is_ok());
    }

    #[test]
    fn a_late_success_fails() {
        let ops = vec![
            comment(1, HEAL + S, HEAL + 5 * S + 1, ok()),
            comment(2, HEAL, HEAL + 9 * S, failed()),
        ];
        let verdict = check_liveness(&ops, HEAL, LIVENESS_WINDOW_NS);
        assert_eq!(verdict.violations[0].ops, vec![1], "{verdict}");
    }

    #[test]
    fn writes_called_before_the_heal_do_not_count() {
        let ops = vec![comment(1, HEAL - 1, HEAL + S, ok())];
        let verdict = check_liveness(&ops, HEAL, LIVENESS_WINDOW_NS);
        assert!(
            verdict.violations[0].message.contains("no write"),
            "{verdict}"
        );
    }

    #[test]
    fn reads_do_not_count() {
        let read = Action::ReadState { node: "n1".into() };
        let result = Outcome::Ok(OkResult::default());
        let ops = vec![
            op(1, HEAL + S, HEAL + 2 * S, read, result),
            comment(2, HEAL + S, HEAL + 6 * S, unknown()),
            comment(3, HEAL + S, HEAL + 2 * S, failed()),
        ];
        let verdict = check_liveness(&ops, HEAL, LIVENESS_WINDOW_NS);
        assert_eq!(verdict.violations[0].ops, vec![2, 3], "{verdict}");
    }
}
