//! Paperclip's per-agent daily caps (`maxDailyRuns`, `maxDailyCostCents`): a new wake is
//! skipped once the agent's runs or cost in the current UTC day reach a cap; a wake merged
//! into a pending one is not; 0 stops every new wake; the next UTC day starts afresh.

use super::budget_tests::cost_event;
use super::test_world::*;
use crate::command::*;
use crate::entity::*;

const DAY: i64 = 86_400_000;
/// Noon of some UTC day.
const NOON: i64 = 20_000 * DAY + DAY / 2;

/// Sets a1's caps; issues `i-a` and `i-b` exist for wakes to name.
fn caps(w: &mut World, runs: Option<u32>, cents: Option<u64>) {
    for issue in ["i-a", "i-b"] {
        if !w.state.issues.contains_key(issue) {
            w.todo_issue(issue);
        }
    }
    w.run_at(
        NOON - 3_600_000,
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                heartbeat: Some(HeartbeatPolicy {
                    max_daily_runs: runs,
                    max_daily_cost_cents: cents,
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    )
    .expect("caps set");
}

fn start_run_at(w: &mut World, at: i64, id: &str) {
    w.run_at(
        at,
        admin(),
        Command::StartRun {
            id: id.into(),
            agent_id: "a1".into(),
            issue_id: None,
            invocation_source: "on_demand".into(),
        },
    )
    .expect("run started");
    w.run_at(
        at,
        admin(),
        Command::FinishRun {
            run_id: id.into(),
            status: RunStatus::Succeeded,
            error: None,
            report: Default::default(),
        },
    )
    .expect("run finished");
}

fn wake_at(w: &mut World, at: i64, id: &str, issue: Option<&str>) -> Wake {
    match w.run_at(
        at,
        admin(),
        Command::Wakeup {
            id: id.into(),
            agent_id: "a1".into(),
            issue_id: issue.map(str::to_string),
            reason: WakeReason::OnDemand,
            payload: serde_json::Value::Null,
            wake_key: None,
        },
    ) {
        Ok(Outcome::Wake(w)) => w,
        other => panic!("unexpected {other:?}"),
    }
}

fn skipped_because(wake: &Wake) -> Option<&str> {
    (wake.status == WakeStatus::Skipped)
        .then_some(wake.status_reason.as_deref())
        .flatten()
}

#[test]
fn a_new_wake_is_skipped_once_the_days_runs_reach_the_cap_until_the_next_utc_day() {
    let mut w = world();
    caps(&mut w, Some(2), None);
    // A run of yesterday does not count.
    start_run_at(&mut w, NOON - DAY, "r0");
    start_run_at(&mut w, NOON, "r1");
    let one = wake_at(&mut w, NOON + 1, "w1", Some("i-a"));
    assert_eq!(one.status, WakeStatus::Queued, "1 run of 2 today: {one:?}");
    start_run_at(&mut w, NOON + 2, "r2");
    // A wake for the issue of a pending wake merges into it: no new run, no cap.
    let merged = wake_at(&mut w, NOON + 3, "w2", Some("i-a"));
    assert_eq!(merged.status, WakeStatus::Coalesced, "{merged:?}");
    let capped = wake_at(&mut w, NOON + 4, "w3", Some("i-b"));
    assert_eq!(
        skipped_because(&capped),
        Some("daily_run_cap"),
        "{capped:?}"
    );
    // The next UTC day starts afresh.
    let tomorrow = wake_at(&mut w, 20_001 * DAY, "w4", Some("i-b"));
    assert_eq!(tomorrow.status, WakeStatus::Queued, "{tomorrow:?}");
}

#[test]
fn a_new_wake_is_skipped_once_the_days_cost_reaches_the_cap() {
    let mut w = world();
    caps(&mut w, None, Some(100));
    let spend = |w: &mut World, id: &str, cents: u64, at: i64| {
        let mut event = cost_event(id, "a1", cents);
        event.occurred_at = Some(crate::time::Timestamp(at));
        w.run_at(at, admin(), Command::RecordCostEvent { event })
            .expect("cost recorded");
    };
    spend(&mut w, "yesterday", 500, NOON - DAY);
    // Recorded today, dated yesterday: yesterday's, as Paperclip counts it (by occurredAt).
    let mut dated = cost_event("dated-yesterday", "a1", 40);
    dated.occurred_at = Some(crate::time::Timestamp(NOON - DAY));
    w.run_at(NOON - 1, admin(), Command::RecordCostEvent { event: dated })
        .expect("cost recorded");
    spend(&mut w, "c1", 99, NOON);
    let under = wake_at(&mut w, NOON + 1, "w1", Some("i-a"));
    assert_eq!(
        under.status,
        WakeStatus::Queued,
        "99 of 100 cents: {under:?}"
    );
    spend(&mut w, "c2", 1, NOON + 2);
    let capped = wake_at(&mut w, NOON + 3, "w2", Some("i-b"));
    assert_eq!(
        skipped_because(&capped),
        Some("daily_cost_cap"),
        "{capped:?}"
    );
    // Restarted nodes count the same from their rows.
    let again = super::memory_tests::reloaded(&w.state);
    assert_eq!(
        again.agent_day("a1", crate::time::Timestamp(NOON)),
        w.state.agent_day("a1", crate::time::Timestamp(NOON))
    );
    assert_eq!(
        again.agent_day("a1", crate::time::Timestamp(NOON)).cents,
        100
    );
}

#[test]
fn a_cap_of_zero_stops_every_new_wake_and_no_cap_stops_none() {
    let mut w = world();
    caps(&mut w, Some(0), None);
    let stopped = wake_at(&mut w, NOON, "w1", None);
    assert_eq!(
        skipped_because(&stopped),
        Some("daily_run_cap"),
        "{stopped:?}"
    );
    caps(&mut w, None, None);
    for n in 0..5 {
        start_run_at(&mut w, NOON + n, &format!("r{n}"));
    }
    let free = wake_at(&mut w, NOON + 10, "w2", None);
    assert_eq!(free.status, WakeStatus::Queued, "{free:?}");
}

/// The caps are checked again when a worker claims a wake: wakes queued while the day had
/// room start no run past the cap (Paperclip re-checks at claim too).
#[test]
fn wakes_queued_before_the_cap_was_reached_start_no_run_past_it() {
    let mut w = world();
    caps(&mut w, Some(1), None);
    let a = wake_at(&mut w, NOON, "w1", Some("i-a"));
    let b = wake_at(&mut w, NOON + 1, "w2", Some("i-b"));
    assert_eq!(
        (a.status, b.status),
        (WakeStatus::Queued, WakeStatus::Queued)
    );
    let assign = |wake: &str, run: &str| Command::AssignRun {
        wake_id: wake.into(),
        run_id: run.into(),
        worker_id: "wk1".into(),
        token_hash: None,
    };
    let first = w.run_at(NOON + 2, admin(), assign("w1", "r1"));
    assert!(matches!(first, Ok(Outcome::Run(_))), "{first:?}");
    let second = w.run_at(NOON + 3, admin(), assign("w2", "r2"));
    let Ok(Outcome::Wake(skipped)) = second else {
        panic!("unexpected {second:?}")
    };
    assert_eq!(skipped_because(&skipped), Some("daily_run_cap"));
    assert_eq!(w.state.wakes["w2"].status, WakeStatus::Skipped);
    assert!(!w.state.runs.contains_key("r2"));
}
