//! Transition tests for what a run reports: usage with heartbeats, the session it ended in
//! (saved per agent, adapter and task, resumed by the next run that should resume), its log
//! tail (DESIGN.md section 7).

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;

use super::test_world::*;

fn usage(input: u64, output: u64, micro_usd: u64) -> Usage {
    Usage {
        input_tokens: input,
        cached_input_tokens: 0,
        output_tokens: output,
        cost_micro_usd: micro_usd,
    }
}

fn finish_with(w: &mut World, run: &str, report: RunReport) -> Result<Outcome, DomainError> {
    w.run(
        worker_actor("wk1"),
        Command::FinishRun {
            run_id: run.into(),
            status: RunStatus::Succeeded,
            error: None,
            report,
        },
    )
}

fn session(id: &str) -> RunReport {
    RunReport {
        session_id: Some(id.into()),
        ..Default::default()
    }
}

fn start(w: &mut World, run: &str) {
    w.ok(
        worker_actor("wk1"),
        Command::RunStarted { run_id: run.into() },
    );
}

#[test]
fn a_finished_run_saves_its_session_and_a_comment_wake_resumes_it() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let first = claim(&mut w, "a1", "r1").expect("claimed");
    assert_eq!(
        first.session_id_before, None,
        "a new assignment starts fresh"
    );
    start(&mut w, "r1");
    finish_with(&mut w, "r1", session("sess-1")).expect("finished");
    let saved = w.state.agents["a1"].task_session("i1").expect("saved");
    assert_eq!(
        (saved.session_id.as_str(), saved.worker_id.as_deref()),
        ("sess-1", Some("wk1"))
    );

    comment(&mut w, admin(), "i1", "cm1", "please also add tests");
    let second = claim(&mut w, "a1", "r2").expect("claimed");
    assert_eq!(second.session_id_before.as_deref(), Some("sess-1"));
}

#[test]
fn timer_wakes_and_forced_fresh_wakes_do_not_resume() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    finish_with(&mut w, "r1", session("sess-1")).expect("finished");
    w.ok(
        admin(),
        Command::Wakeup {
            id: "wk-fresh".into(),
            agent_id: "a1".into(),
            issue_id: Some("i1".into()),
            reason: WakeReason::OnDemand,
            payload: serde_json::json!({ "forceFreshSession": true }),
            wake_key: None,
        },
    );
    let fresh = claim(&mut w, "a1", "r2").expect("claimed");
    assert_eq!(fresh.session_id_before, None);
}

#[test]
fn a_reset_session_replaces_the_saved_one() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    finish_with(&mut w, "r1", session("sess-1")).expect("finished");
    comment(&mut w, admin(), "i1", "cm1", "again");
    claim(&mut w, "a1", "r2").expect("claimed");
    let report = RunReport {
        session_reset: true,
        ..session("sess-2")
    };
    match finish_with(&mut w, "r2", report).expect("finished") {
        Outcome::Run(r) => {
            assert_eq!(r.session_id_before.as_deref(), Some("sess-1"));
            assert_eq!(r.session_id_after.as_deref(), Some("sess-2"));
            assert!(r.session_reset);
        }
        other => panic!("unexpected {other:?}"),
    }
    let saved = w.state.agents["a1"].task_session("i1").expect("saved");
    assert_eq!(saved.session_id, "sess-2");
}

#[test]
fn usage_reports_are_cumulative_and_only_from_the_runs_worker() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    start(&mut w, "r1");
    let report = |run: &str, u: Usage| Command::ReportUsage {
        run_id: run.into(),
        usage: u,
    };
    w.ok(worker_actor("wk1"), report("r1", usage(100, 10, 1_500)));
    assert_eq!(w.state.runs["r1"].usage.cost_cents(), 1);
    let before = w.fingerprint();
    let down = w.run(worker_actor("wk1"), report("r1", usage(50, 10, 1_500)));
    assert!(matches!(down, Err(DomainError::Invalid { .. })), "{down:?}");
    let stranger = w.run(worker_actor("wk2"), report("r1", usage(200, 20, 3_000)));
    assert!(
        matches!(stranger, Err(DomainError::Forbidden { .. })),
        "{stranger:?}"
    );
    assert_eq!(w.fingerprint(), before, "refused reports change nothing");
    w.ok(worker_actor("wk1"), report("r1", usage(200, 20, 30_001)));
    assert_eq!(w.state.runs["r1"].usage.cost_cents(), 4, "cents round up");
    finish_with(
        &mut w,
        "r1",
        RunReport {
            usage: usage(300, 30, 40_000),
            ..Default::default()
        },
    )
    .expect("finished");
    assert_eq!(w.state.runs["r1"].usage, usage(300, 30, 40_000));
    let late = w.run(worker_actor("wk1"), report("r1", usage(400, 40, 50_000)));
    assert!(
        matches!(late, Err(DomainError::StaleRun { .. })),
        "{late:?}"
    );
}

#[test]
fn an_oversized_log_tail_or_a_bad_session_id_is_refused_and_changes_nothing() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    let before = w.fingerprint();
    let huge = RunReport {
        log_tail: "x".repeat(LOG_TAIL_MAX_BYTES + 1),
        ..Default::default()
    };
    assert!(matches!(
        finish_with(&mut w, "r1", huge),
        Err(DomainError::Invalid { .. })
    ));
    assert!(matches!(
        finish_with(&mut w, "r1", session("bad\nid")),
        Err(DomainError::Invalid { .. })
    ));
    assert_eq!(w.fingerprint(), before);
    let tail = RunReport {
        log_tail: "last line\n".into(),
        log_bytes: 123_456,
        summary: Some("did the thing".into()),
        ..Default::default()
    };
    finish_with(&mut w, "r1", tail).expect("finished");
    let run = &w.state.runs["r1"];
    assert_eq!(
        (run.log_tail.as_str(), run.log_bytes, run.summary.as_deref()),
        ("last line\n", 123_456, Some("did the thing"))
    );
}
