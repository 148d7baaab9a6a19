//! No double checkout: per issue, the acknowledged checkouts' fencing tokens increase in real
//! time, two runs never get the same token, and no run's checkout succeeds while another run
//! certainly holds the issue.
//!
//! A hold by run `r` certainly lasts from its checkout's return until the earliest call of
//! anything that may have ended it: a release of the issue by `r` or by an administrator, or
//! `r`'s end, whose outcome is `ok` or `unknown` and which did not return before the checkout
//! was called. With no such operation it lasts to the end of the history (see the recording
//! rules in [`crate::history`]).

use std::collections::BTreeMap;

use crate::history::{Action, Op};
use crate::verdict::Verdict;

pub const NAME: &str = "no_double_checkout";

/// An acknowledged checkout with its token.
struct Held<'a> {
    op: &'a Op,
    run: &'a str,
    token: u64,
}

pub fn check_no_double_checkout(ops: &[Op]) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    let mut by_issue: BTreeMap<&str, Vec<Held<'_>>> = BTreeMap::new();
    for op in ops {
        let (
            Action::Checkout {
                issue_id, run_id, ..
            },
            Some(result),
        ) = (&op.action, op.ok_result())
        else {
            continue;
        };
        match result.token {
            Some(token) => by_issue.entry(issue_id).or_default().push(Held {
                op,
                run: run_id,
                token,
            }),
            None => verdict.violation(
                format!("issue {issue_id}"),
                "acknowledged checkout has no token in its result",
                vec![op.id],
            ),
        }
    }

    for (issue, held) in &by_issue {
        let subject = format!("issue {issue}");
        // Tokens increase in real time (a run checking out again gets its own token back).
        for b in held {
            let earlier = held
                .iter()
                .filter(|a| a.op.precedes(b.op))
                .filter(|a| !(a.token < b.token || (a.token == b.token && a.run == b.run)))
                .max_by_key(|a| a.token);
            if let Some(a) = earlier {
                verdict.violation(
                    subject.clone(),
                    format!(
                        "token went backwards: run {} got {} after run {} had got {}",
                        b.run, b.token, a.run, a.token
                    ),
                    vec![a.op.id, b.op.id],
                );
            }
        }
        // One token, one run.
        for (i, a) in held.iter().enumerate() {
            for b in &held[i + 1..] {
                if a.token == b.token && a.run != b.run {
                    verdict.violation(
                        subject.clone(),
                        format!(
                            "token {} was given to two runs, {} and {}",
                            a.token, a.run, b.run
                        ),
                        vec![a.op.id, b.op.id],
                    );
                }
            }
        }
        // No checkout completes inside another run's certain hold.
        for a in held {
            let (end, ender) = hold_end(ops, issue, a);
            for b in held {
                if b.run != a.run && b.op.call_ns > a.op.return_ns && b.op.return_ns < end {
                    let until = match ender {
                        Some(id) => format!("op {id} could end it"),
                        None => "nothing recorded ends it".to_string(),
                    };
                    let mut involved = vec![a.op.id, b.op.id];
                    involved.extend(ender);
                    verdict.violation(
                        subject.clone(),
                        format!(
                            "run {} checked out (token {}) while run {} held the issue \
                             (token {}; {until})",
                            b.run, b.token, a.run, a.token
                        ),
                        involved,
                    );
                }
            }
        }
    }
    verdict
}

/// When `held`'s hold may first have ended, and the operation that may have ended it.
fn hold_end(ops: &[Op], issue: &str, held: &Held<'_>) -> (i64, Option<u64>) {
    ops.iter()
        .filter(|op| op.is_ok() || op.is_unknown())
        .filter(|op| op.is_unknown() || op.return_ns >= held.op.call_ns)
        .filter(|op| match &op.action {
            Action::Release { issue_id, run_id } => {
                issue_id == issue && run_id.as_deref().is_none_or(|run| run == held.run)
            }
            Action::RunEnd { run_id } => run_id == held.run,
            _ => false,
        })
        .map(|op| (op.call_ns, Some(op.id)))
        .min()
        .unwrap_or((i64::MAX, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkers::testutil::*;
    use crate::history::Action;

    fn assert_fails(ops: &[Op], involved: &[u64]) {
        let verdict = check_no_double_checkout(ops);
        assert!(!verdict.violations.is_empty(), "expected a violation");
        let named = verdict.violations.iter().any(|v| v.ops == involved);
        assert!(named, "no violation names ops {involved:?}:\n{verdict}");
    }

    #[test]
    fn sequential_checkouts_with_releases_pass() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            release(2, "i1", "r1", 20, 30, ok()),
            checkout(3, "i1", "r2", 40, 50, token(9)),
            run_end(4, "r2", 60, 70, ok()),
            checkout(5, "i1", "r3", 80, 90, token(12)),
            checkout(6, "i2", "r1", 0, 10, token(3)),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn concurrent_calls_may_take_effect_in_either_order() {
        // r2's call overlaps r1's: r2 took effect first (token 7), released, then r1 (9).
        let ops = vec![
            checkout(1, "i1", "r1", 0, 100, token(9)),
            checkout(2, "i1", "r2", 5, 15, token(7)),
            release(3, "i1", "r2", 20, 30, ok()),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn same_run_checking_out_again_gets_the_same_token() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            checkout(2, "i1", "r1", 20, 30, token(5)),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn equal_timestamps_are_concurrent() {
        // 1 returns at 10 and 2 is called at 10: 2 may have taken effect first.
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(9)),
            checkout(2, "i1", "r2", 10, 20, token(4)),
            release(3, "i1", "r2", 10, 30, ok()),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn an_unknown_release_may_have_ended_the_hold() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            release(2, "i1", "r1", 20, 1000, unknown()),
            checkout(3, "i1", "r2", 30, 40, token(8)),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn an_unknown_run_end_may_have_ended_the_hold() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            run_end(2, "r1", 15, 15, unknown()),
            checkout(3, "i1", "r2", 30, 40, token(8)),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn failed_and_unknown_checkouts_are_ignored() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            checkout(2, "i1", "r2", 20, 30, failed()),
            checkout(3, "i1", "r3", 20, 30, unknown()),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn token_going_backwards_in_real_time_fails() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(9)),
            release(2, "i1", "r1", 20, 30, ok()),
            checkout(3, "i1", "r2", 40, 50, token(7)),
        ];
        assert_fails(&ops, &[1, 3]);
    }

    #[test]
    fn equal_tokens_in_real_time_order_fail_for_different_runs() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(9)),
            release(2, "i1", "r1", 20, 30, ok()),
            checkout(3, "i1", "r2", 40, 50, token(9)),
        ];
        assert_fails(&ops, &[1, 3]);
    }

    #[test]
    fn one_token_for_two_concurrent_runs_fails() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 50, token(9)),
            checkout(2, "i1", "r2", 0, 50, token(9)),
            release(3, "i1", "r1", 0, 60, ok()),
            release(4, "i1", "r2", 0, 60, ok()),
        ];
        assert_fails(&ops, &[1, 2]);
    }

    #[test]
    fn overlapping_holders_fail() {
        // Tokens increase, but r1 never released before r2 got the issue.
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            checkout(2, "i1", "r2", 20, 30, token(8)),
            release(3, "i1", "r1", 40, 50, ok()),
        ];
        assert_fails(&ops, &[1, 2, 3]);
    }

    #[test]
    fn a_failed_release_does_not_end_the_hold() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            release(2, "i1", "r1", 15, 18, failed()),
            checkout(3, "i1", "r2", 20, 30, token(8)),
        ];
        assert_fails(&ops, &[1, 3]);
    }

    #[test]
    fn another_runs_release_does_not_end_the_hold() {
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            release(2, "i1", "r9", 12, 14, ok()),
            run_end(3, "r9", 12, 14, ok()),
            checkout(4, "i1", "r2", 20, 30, token(8)),
        ];
        assert_fails(&ops, &[1, 4]);
    }

    #[test]
    fn an_administrator_release_ends_any_hold() {
        let admin = op(
            2,
            12,
            14,
            Action::Release {
                issue_id: "i1".into(),
                run_id: None,
            },
            ok(),
        );
        let ops = vec![
            checkout(1, "i1", "r1", 0, 10, token(5)),
            admin,
            checkout(3, "i1", "r2", 20, 30, token(8)),
        ];
        let verdict = check_no_double_checkout(&ops);
        assert!(verdict.is_ok(), "{verdict}");
    }

    #[test]
    fn a_release_that_returned_before_the_checkout_was_called_does_not_count() {
        let ops = vec![
            release(1, "i1", "r1", 0, 5, ok()),
            checkout(2, "i1", "r1", 10, 20, token(5)),
            checkout(3, "i1", "r2", 30, 40, token(8)),
        ];
        assert_fails(&ops, &[2, 3]);
    }

    #[test]
    fn an_ok_checkout_without_token_fails() {
        let ops = vec![checkout(1, "i1", "r1", 0, 10, ok())];
        assert_fails(&ops, &[1]);
    }
}
