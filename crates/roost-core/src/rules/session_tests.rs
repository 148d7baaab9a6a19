//! Transition tests for what a run reports: usage with heartbeats, the session it ended in
//! (saved per agent, adapter and task, resumed by the next run that should resume), its log
//! tail.

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

fn rotate_after(w: &mut World, rotation: SessionRotation) {
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                session_rotation: Some(rotation),
                ..Default::default()
            },
        },
    );
}

/// Runs `n` comment-woken runs on issue i1 that each end in session `sess`, from run index
/// `from`; returns the last run's `session_id_before`.
fn runs_in_session(w: &mut World, from: usize, n: usize, sess: &str, tokens: u64) -> Vec<Run> {
    let mut claimed = Vec::new();
    for i in from..from + n {
        comment(w, admin(), "i1", &format!("cm{i}"), "more");
        let run = claim(w, "a1", &format!("r{i}")).expect("claimed");
        start(w, &run.id);
        let report = RunReport {
            session_id: Some(sess.into()),
            usage: usage(tokens, tokens, 0),
            ..Default::default()
        };
        finish_with(w, &run.id, report).expect("finished");
        claimed.push(run);
    }
    claimed
}

#[test]
fn a_session_past_its_run_limit_is_retired_and_the_next_run_says_why() {
    let mut w = world();
    rotate_after(
        &mut w,
        SessionRotation {
            max_runs: 3,
            max_tokens: 0,
            max_age_secs: 0,
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    // The assignment's run starts fresh and ends in sess-1; two resumes follow.
    let runs = runs_in_session(&mut w, 1, 3, "sess-1", 10);
    assert_eq!(runs[0].session_id_before, None, "nothing saved yet");
    assert_eq!(runs[2].session_id_before.as_deref(), Some("sess-1"));
    let saved = w.state.agents["a1"].task_session("i1").expect("saved");
    assert_eq!((saved.runs, saved.tokens), (3, 60));

    let fourth = runs_in_session(&mut w, 4, 1, "sess-2", 10).remove(0);
    assert_eq!(fourth.session_id_before, None, "three runs served: retired");
    let why = fourth.session_rotated.expect("the run says why");
    assert!(why.contains("sess-1") && why.contains("maxRuns 3"), "{why}");
    let saved = w.state.agents["a1"].task_session("i1").expect("saved");
    assert_eq!(
        (saved.session_id.as_str(), saved.runs),
        ("sess-2", 1),
        "the new session counts from one"
    );
    let fifth = runs_in_session(&mut w, 5, 1, "sess-2", 10).remove(0);
    assert_eq!(fifth.session_id_before.as_deref(), Some("sess-2"));
    assert_eq!(fifth.session_rotated, None);
}

#[test]
fn a_session_past_its_token_or_age_limit_is_retired_at_the_boundary() {
    let mut w = world();
    rotate_after(
        &mut w,
        SessionRotation {
            max_runs: 0,
            max_tokens: 100,
            max_age_secs: 0,
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    runs_in_session(&mut w, 1, 1, "sess-1", 49);
    let under = runs_in_session(&mut w, 2, 1, "sess-1", 1).remove(0);
    assert_eq!(
        under.session_id_before.as_deref(),
        Some("sess-1"),
        "98 tokens < 100"
    );
    let over = runs_in_session(&mut w, 3, 1, "sess-2", 1).remove(0);
    assert_eq!(over.session_id_before, None, "100 tokens reached");
    assert!(over
        .session_rotated
        .is_some_and(|w| w.contains("maxTokens 100")));

    let rotation = SessionRotation {
        max_runs: 0,
        max_tokens: 0,
        max_age_secs: 60,
    };
    let session = TaskSession {
        task_key: "i1".into(),
        adapter_type: AdapterType::Claude,
        session_id: "s".into(),
        worker_id: None,
        last_run_id: "r".into(),
        updated_at: crate::Timestamp(500_000),
        runs: 1,
        tokens: 0,
        started_at: Some(crate::Timestamp(100_000)),
    };
    assert_eq!(rotation.passed(&session, crate::Timestamp(159_999)), None);
    assert!(rotation
        .passed(&session, crate::Timestamp(160_000))
        .is_some());
    // A session saved before rotation existed counts its age from its last save.
    let old = TaskSession {
        started_at: None,
        ..session
    };
    assert_eq!(rotation.passed(&old, crate::Timestamp(559_999)), None);
    assert!(SessionRotation::default()
        .passed(&old, crate::Timestamp(i64::MIN))
        .is_none());
}

/// Paperclip's `runtime-state/reset-session`: an operator forgets one task's saved session, or
/// all of them; the next run on that task starts fresh.
#[test]
fn an_operator_resets_one_tasks_session_or_all_and_the_next_run_starts_fresh() {
    let mut w = world();
    for (issue, run, sess) in [("i1", "r1", "sess-1"), ("i2", "r2", "sess-2")] {
        assigned_issue(&mut w, issue, "a1");
        claim(&mut w, "a1", run).expect("claimed");
        start(&mut w, run);
        finish_with(&mut w, run, session(sess)).expect("finished");
    }
    let reset = |key: Option<&str>| Command::ResetAgentSession {
        agent_id: "a1".into(),
        task_key: key.map(str::to_string),
    };
    let refused = w.run(agent_actor("a1", "c1", None), reset(None));
    assert!(
        matches!(refused, Err(DomainError::Forbidden { .. })),
        "{refused:?}"
    );
    w.ok(admin(), reset(Some("i1")));
    let a1 = &w.state.agents["a1"];
    assert!(a1.task_session("i1").is_none());
    assert_eq!(
        a1.task_session("i2").map(|s| s.session_id.as_str()),
        Some("sess-2")
    );
    // A comment wake on i1 would resume its session; there is none now.
    comment(&mut w, admin(), "i1", "cm1", "one more thing");
    let next = claim(&mut w, "a1", "r3").expect("claimed");
    assert_eq!(next.session_id_before, None, "fresh after the reset");
    w.ok(admin(), reset(None));
    assert!(w.state.agents["a1"].task_sessions.is_empty());
}
