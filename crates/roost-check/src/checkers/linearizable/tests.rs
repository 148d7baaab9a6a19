use std::collections::HashSet;

use super::*;
use crate::checkers::testutil::*;
use crate::history::{Action, OkResult, Outcome};

fn check(ops: &[Op]) -> Verdict {
    check_checkout_linearizable(ops, &SearchLimits::default())
}

fn assert_linearizable(ops: &[Op]) {
    let verdict = check(ops);
    assert!(verdict.is_ok(), "{verdict}");
}

fn assert_not_linearizable(ops: &[Op]) -> Verdict {
    let verdict = check(ops);
    assert!(verdict.inconclusive.is_empty(), "{verdict}");
    assert_eq!(verdict.violations.len(), 1, "{verdict}");
    verdict
}

#[test]
fn sequential_lock_history_is_linearizable() {
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        checkout(2, "i1", "r1", 12, 14, token(3)),
        release(3, "i1", "r1", 20, 30, ok()),
        checkout(4, "i1", "r2", 40, 50, token(8)),
        run_end(5, "r2", 60, 70, ok()),
        checkout(6, "i1", "r3", 80, 90, token(11)),
        release(7, "i1", "r2", 100, 110, failed()),
        checkout(8, "i1", "r1", 100, 110, failed()),
    ]);
}

#[test]
fn concurrent_calls_may_take_effect_out_of_call_order() {
    // r1 is called first but takes effect last: r2 checks out (5) and releases meanwhile.
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 100, token(10)),
        checkout(2, "i1", "r2", 10, 20, token(5)),
        release(3, "i1", "r2", 30, 40, ok()),
    ]);
}

#[test]
fn equal_timestamps_are_concurrent() {
    // 2 is called when 1 returns, so it may be ordered before 1.
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(9)),
        checkout(2, "i1", "r2", 10, 20, token(4)),
        release(3, "i1", "r2", 10, 10, ok()),
    ]);
}

#[test]
fn an_unknown_release_that_must_have_happened_is_allowed() {
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        release(2, "i1", "r1", 20, 1_000, unknown()),
        checkout(3, "i1", "r2", 30, 40, token(7)),
    ]);
}

#[test]
fn an_unknown_checkout_that_must_not_have_happened_is_allowed() {
    // Had r2's unknown checkout taken effect, r3 could not have checked out.
    assert_linearizable(&[
        checkout(1, "i1", "r2", 0, 1_000, unknown()),
        checkout(2, "i1", "r3", 10, 20, token(4)),
        release(3, "i1", "r3", 30, 40, ok()),
        checkout(4, "i1", "r1", 50, 60, token(6)),
    ]);
}

#[test]
fn an_unknown_checkout_revealed_by_a_repeat_is_allowed() {
    // The timed-out checkout took token 5; the run's retry is a repeat that returns it.
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 1_000, unknown()),
        checkout(2, "i1", "r1", 2_000, 2_010, token(5)),
        release(3, "i1", "r1", 2_020, 2_030, ok()),
        checkout(4, "i1", "r2", 2_040, 2_050, token(6)),
    ]);
}

#[test]
fn a_possible_run_end_frees_the_issue() {
    // r1's worker was cut off at 15: its run may have been lost then, releasing the issue.
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        run_end(2, "r1", 15, 15, unknown()),
        checkout(3, "i1", "r2", 30, 40, token(7)),
    ]);
}

#[test]
fn an_administrator_release_frees_any_holder() {
    let admin = Action::Release {
        issue_id: "i1".into(),
        run_id: None,
    };
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        op(2, 20, 30, admin, ok()),
        checkout(3, "i1", "r2", 40, 50, token(7)),
    ]);
}

#[test]
fn issues_are_checked_separately() {
    assert_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        checkout(2, "i2", "r2", 0, 10, token(4)),
        checkout(3, "i3", "r1", 20, 30, token(5)),
    ]);
}

#[test]
fn two_holders_without_a_release_fail() {
    let verdict = assert_not_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        checkout(2, "i1", "r2", 20, 30, token(7)),
    ]);
    assert_eq!(verdict.violations[0].ops, vec![1, 2], "{verdict}");
    assert_eq!(verdict.violations[0].subject, "issue i1");
}

#[test]
fn a_token_going_backwards_fails() {
    assert_not_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(9)),
        release(2, "i1", "r1", 20, 30, ok()),
        checkout(3, "i1", "r2", 40, 50, token(4)),
    ]);
}

#[test]
fn a_repeat_with_another_token_fails() {
    assert_not_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        checkout(2, "i1", "r1", 20, 30, token(4)),
    ]);
}

#[test]
fn a_release_by_another_run_fails() {
    assert_not_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(3)),
        release(2, "i1", "r2", 20, 30, ok()),
    ]);
}

#[test]
fn a_checkout_by_an_ended_run_fails() {
    // Fencing: once r1 ended, its checkout must be refused (409 stale_run).
    assert_not_linearizable(&[
        run_end(1, "r1", 0, 10, ok()),
        checkout(2, "i1", "r1", 20, 30, token(3)),
    ]);
}

#[test]
fn unknown_operations_cannot_excuse_a_backwards_token() {
    assert_not_linearizable(&[
        checkout(1, "i1", "r1", 0, 10, token(9)),
        release(2, "i1", "r1", 20, 1_000, unknown()),
        checkout(3, "i1", "r2", 15, 1_000, unknown()),
        checkout(4, "i1", "r3", 40, 50, token(9)),
    ]);
}

#[test]
fn an_unknown_token_still_orders_later_tokens() {
    // Whether r1's timed-out checkout took effect or not, r1's token must exceed r0's 4.
    assert_not_linearizable(&[
        checkout(1, "i1", "r0", 0, 5, token(4)),
        release(2, "i1", "r0", 6, 8, ok()),
        checkout(3, "i1", "r1", 10, 1_000, unknown()),
        checkout(4, "i1", "r1", 2_000, 2_010, token(4)),
    ]);
}

#[test]
fn too_many_operations_is_inconclusive() {
    let ops: Vec<Op> = (0..20)
        .map(|i| checkout(i, "i1", "r1", i as i64 * 10, i as i64 * 10 + 5, token(3)))
        .collect();
    let limits = SearchLimits {
        max_ops: 10,
        max_states: 1_000,
    };
    let verdict = check_checkout_linearizable(&ops, &limits);
    assert!(verdict.violations.is_empty());
    assert!(verdict.inconclusive[0].contains("too large"), "{verdict}");
}

#[test]
fn an_exploding_search_gives_up_instead_of_hanging() {
    // Forty concurrent acknowledged releases, then a contradiction: every subset of the
    // releases is a different configuration, and all must fail before the search concludes.
    let admin = Action::Release {
        issue_id: "i1".into(),
        run_id: None,
    };
    let mut ops = vec![checkout(0, "i1", "r0", 0, 10, token(3))];
    for i in 1..=40 {
        ops.push(op(i, 20, 100_000, admin.clone(), ok()));
    }
    ops.push(checkout(999, "i1", "r99", 200_000, 200_010, token(2)));
    let limits = SearchLimits {
        max_ops: 1_000,
        max_states: 5_000,
    };
    let verdict = check_checkout_linearizable(&ops, &limits);
    assert!(verdict.violations.is_empty(), "{verdict}");
    assert!(verdict.inconclusive[0].contains("too large"), "{verdict}");
}

/// A deterministic generator of real lock histories: processes run sequential operations whose
/// effects hit one true lock at a random instant inside their call; some time out (their
/// effect then happens or not, except a run's end, which always happens).
fn simulated(seed: u64, processes: u64, per_process: u64, unknown_percent: u64) -> Vec<Op> {
    let mut state = seed;
    let mut next = move |bound: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % bound
    };
    struct Planned {
        op: Op,
        effect_at: i64,
        applies: bool,
    }
    let mut planned = Vec::new();
    for p in 0..processes {
        let mut generation = 0;
        let mut t = next(20) as i64;
        for k in 0..per_process {
            let run = format!("p{p}g{generation}");
            let roll = next(100);
            let action = if roll < 50 {
                Action::Checkout {
                    issue_id: "i1".into(),
                    agent_id: format!("a{p}"),
                    run_id: run,
                }
            } else if roll < 90 {
                Action::Release {
                    issue_id: "i1".into(),
                    run_id: Some(run),
                }
            } else {
                generation += 1;
                Action::RunEnd { run_id: run }
            };
            let effect_at = t + 1 + next(30) as i64;
            let ret = effect_at + 1 + next(30) as i64;
            let timed_out = next(100) < unknown_percent;
            let is_end = matches!(action, Action::RunEnd { .. });
            let applies = !timed_out || is_end || next(2) == 0;
            let (return_ns, outcome) = if timed_out {
                (ret + 40, unknown())
            } else {
                (ret, ok())
            };
            let op = Op {
                id: p * 10_000 + k,
                process: p,
                call_ns: t,
                return_ns,
                action,
                outcome,
            };
            planned.push(Planned {
                op,
                effect_at,
                applies,
            });
            t = return_ns + next(10) as i64;
        }
    }
    planned.sort_by_key(|p| (p.effect_at, p.op.id));
    let mut holder: Option<(String, u64)> = None;
    let mut ended = HashSet::new();
    let mut index = 0;
    for p in &mut planned {
        if !p.applies {
            continue;
        }
        index += 1;
        let outcome = match &p.op.action {
            Action::Checkout { run_id, .. } if ended.contains(run_id) => failed(),
            Action::Checkout { run_id, .. } => match &holder {
                None => {
                    holder = Some((run_id.clone(), index));
                    token(index)
                }
                Some((run, held)) if run == run_id => token(*held),
                Some(_) => failed(),
            },
            Action::Release { run_id, .. } if ended.contains(run_id.as_ref().unwrap()) => failed(),
            Action::Release { run_id, .. } => match &holder {
                Some((run, _)) if Some(run) != run_id.as_ref() => failed(),
                _ => {
                    holder = None;
                    ok()
                }
            },
            Action::RunEnd { run_id } => {
                ended.insert(run_id.clone());
                if holder.as_ref().is_some_and(|(run, _)| run == run_id) {
                    holder = None;
                }
                ok()
            }
            _ => unreachable!(),
        };
        if !p.op.is_unknown() {
            p.op.outcome = outcome;
        }
    }
    let mut ops: Vec<Op> = planned.into_iter().map(|p| p.op).collect();
    ops.sort_by_key(|op| op.id);
    ops
}

/// (processes, operations each, percent timing out)
const SHAPES: [(u64, u64, u64); 3] = [(5, 60, 8), (8, 100, 25), (2, 400, 25)];

#[test]
fn simulated_histories_of_hundreds_of_ops_are_linearizable() {
    for (processes, each, unknown_percent) in SHAPES {
        for seed in 1..=6 {
            let ops = simulated(seed, processes, each, unknown_percent);
            let checkouts = ops
                .iter()
                .filter(|op| op.ok_result().is_some_and(|r| r.token.is_some()))
                .count();
            assert!(checkouts > 10, "seed {seed}: only {checkouts} ok checkouts");
            let verdict = check(&ops);
            assert!(verdict.is_ok(), "seed {seed}: {verdict}");
            let verdict = crate::check_no_double_checkout(&ops);
            assert!(verdict.is_ok(), "seed {seed}: {verdict}");
        }
    }
}

#[test]
fn simulated_histories_with_swapped_tokens_fail() {
    for (processes, each, unknown_percent) in SHAPES {
        for seed in 1..=6 {
            let mut ops = simulated(seed, processes, each, unknown_percent);
            // Swap the tokens of two acknowledged checkouts a third of the history apart.
            let with_token = |op: &Op| op.ok_result().and_then(|r| r.token);
            let mut acked: Vec<usize> = (0..ops.len())
                .filter(|&i| with_token(&ops[i]).is_some())
                .collect();
            acked.sort_by_key(|&i| ops[i].call_ns);
            let (a, b) = (acked[acked.len() / 3], acked[2 * acked.len() / 3]);
            let (token_a, token_b) = (with_token(&ops[a]), with_token(&ops[b]));
            assert_ne!(token_a, token_b);
            let forged = |token| {
                Outcome::Ok(OkResult {
                    token,
                    ..OkResult::default()
                })
            };
            ops[a].outcome = forged(token_b);
            ops[b].outcome = forged(token_a);
            let verdict = check(&ops);
            assert!(verdict.inconclusive.is_empty(), "seed {seed}: {verdict}");
            assert_eq!(verdict.violations.len(), 1, "seed {seed}: {verdict}");
        }
    }
}
