//! Stranded work (`rules/recovery.rs`): an assigned open issue with nothing left to wake its
//! assignee is woken again, with a growing wait, and blocked once its recoveries are used up.

use super::recovery::{recoveries_due, DEFAULT_RECOVER_SECS, MAX_RECOVERIES};
use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::time::Timestamp;

/// Well after the set-up's commands (stamped a second apart from 1 s).
const T0: i64 = 10_000_000;
/// The default quiet time, in milliseconds.
const RECOVERY_QUIET_MS: i64 = DEFAULT_RECOVER_SECS as i64 * 1000;

fn system() -> Actor {
    Actor::system()
}

/// What the leader's recovery timer does at `at`: a `RecoverIssue` for each issue due.
fn sweep(w: &mut World, at: i64) -> Vec<Result<Outcome, DomainError>> {
    recoveries_due(&w.state, Timestamp(at))
        .into_iter()
        .enumerate()
        .map(|(n, issue_id)| {
            let wake_id = format!("rec-{at}-{n}");
            w.run_at(at, system(), Command::RecoverIssue { issue_id, wake_id })
        })
        .collect()
}

/// Claims a1's queued wake as `run` and ends it at `at` without touching the issue.
fn run_and_end(w: &mut World, run: &str, at: i64) {
    let wake = pending(w, "a1")
        .into_iter()
        .find(|x| x.status == WakeStatus::Queued)
        .map(|x| x.id.clone())
        .expect("a queued wake");
    w.run_at(
        at,
        system(),
        Command::AssignRun {
            wake_id: wake,
            run_id: run.into(),
            worker_id: "wk1".into(),
            token_hash: None,
        },
    )
    .expect("claimed");
    w.run_at(
        at,
        system(),
        Command::FinishRun {
            run_id: run.into(),
            status: RunStatus::Failed,
            error: Some("the agent exited 1".into()),
            report: Default::default(),
        },
    )
    .expect("finished");
}

/// Issue i1, in progress for a1, whose run ended without finishing it.
fn stranded_world() -> World {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r0").expect("claimed");
    w.checkout("i1", "a1", &run.id).expect("checked out");
    finish(&mut w, &run.id);
    assert_eq!(w.state.issues.status("i1"), Some(IssueStatus::InProgress));
    assert!(pending(&w, "a1").is_empty());
    w
}

fn recovery_wakes(w: &World) -> Vec<&Wake> {
    wakes_of(w, "a1")
        .into_iter()
        .filter(|x| {
            matches!(
                x.reason,
                WakeReason::IssueContinuationNeeded | WakeReason::IssueAssignmentRecovery
            )
        })
        .collect()
}

/// Bug: an issue whose run failed, or ended with the work unfinished, waited for the next
/// comment (forever on a quiet issue: the timer is off by default), where Paperclip's recovery
/// sweep wakes its assignee again.
#[test]
fn a_stranded_issue_wakes_its_assignee_with_a_growing_wait_then_is_blocked() {
    let mut w = stranded_world();
    let quiet = w.state.issues.get("i1").expect("i1").updated_at.0;
    assert!(
        sweep(&mut w, quiet + RECOVERY_QUIET_MS - 1).is_empty(),
        "not quiet long enough"
    );
    let mut at = quiet + RECOVERY_QUIET_MS;
    for attempt in 1..=MAX_RECOVERIES {
        let done = sweep(&mut w, at);
        assert_eq!(done.len(), 1, "attempt {attempt}: {done:?}");
        let Ok(Outcome::Wake(wake)) = &done[0] else {
            panic!("attempt {attempt}: {done:?}")
        };
        assert_eq!(wake.reason, WakeReason::IssueContinuationNeeded);
        assert_eq!(wake.status, WakeStatus::Queued);
        assert_eq!(wake.payload["attempt"], attempt);
        // A repeat (a second tick, a new leader) changes nothing.
        let before = w.fingerprint();
        let again = w.run_at(
            at,
            system(),
            Command::RecoverIssue {
                issue_id: "i1".into(),
                wake_id: "rec-again".into(),
            },
        );
        assert_eq!(again.map(|_| ()).unwrap_err().code(), "conflict");
        assert_eq!(before, w.fingerprint());
        run_and_end(&mut w, &format!("rr{attempt}"), at + 1_000);
        // The next waits twice as long after the run's end.
        let wait = RECOVERY_QUIET_MS << attempt;
        assert!(sweep(&mut w, at + 1_000 + wait - 1).is_empty());
        at = at + 1_000 + wait;
    }
    assert_eq!(recovery_wakes(&w).len(), MAX_RECOVERIES as usize);
    let blocked = sweep(&mut w, at);
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    let issue = w.state.issues.get("i1").expect("i1");
    assert_eq!(issue.status, IssueStatus::Blocked, "recoveries used up");
    assert_eq!(issue.status_changed_at, Some(Timestamp(at)));
    assert!(sweep(&mut w, at + 100 * RECOVERY_QUIET_MS).is_empty());

    // Back to work by a person: the count starts over.
    w.run_at(
        at + 1,
        admin(),
        status_update("i1", IssueStatus::InProgress),
    )
    .expect("reopened");
    let later = at + 1 + RECOVERY_QUIET_MS;
    let again = sweep(&mut w, later);
    assert!(
        matches!(&again[..], [Ok(Outcome::Wake(x))] if x.payload["attempt"] == 1),
        "{again:?}"
    );
}

#[test]
fn nothing_is_recovered_while_something_else_will_wake_the_agent_or_it_cannot_run() {
    let late = T0;
    // A pending wake.
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    assert_eq!(pending(&w, "a1").len(), 1);
    assert!(sweep(&mut w, late).is_empty(), "the assignment wake waits");
    // A live run on it.
    let run = claim(&mut w, "a1", "r0").expect("claimed");
    assert!(sweep(&mut w, late).is_empty(), "a run works on it");
    finish(&mut w, &run.id);
    assert_eq!(recoveries_due(&w.state, Timestamp(late)), ["i1"]);

    // A paused agent, an agent with its own timer, an open blocker.
    let mut paused = clone_world(&w);
    paused.ok(
        admin(),
        Command::PauseAgent {
            agent_id: "a1".into(),
            reason: PauseReason::Manual,
        },
    );
    assert!(recoveries_due(&paused.state, Timestamp(late)).is_empty());
    paused.ok(
        admin(),
        Command::ResumeAgent {
            agent_id: "a1".into(),
        },
    );
    assert_eq!(
        recoveries_due(&paused.state, Timestamp(late)),
        ["i1"],
        "resumed: recovered"
    );

    let mut timer = clone_world(&w);
    timer.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                heartbeat: Some(HeartbeatPolicy {
                    enabled: true,
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    );
    assert!(recoveries_due(&timer.state, Timestamp(late)).is_empty());

    let mut blocked = clone_world(&w);
    blocked.todo_issue("k1");
    blocked.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                blocked_by_issue_ids: Some(vec!["k1".into()]),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(recoveries_due(&blocked.state, Timestamp(late)).is_empty());

    // Unassigned: nobody to wake.
    let mut unassigned = clone_world(&w);
    unassigned.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                assignee_agent_id: Some(None),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(recoveries_due(&unassigned.state, Timestamp(late)).is_empty());
}

/// A recovery wake still queued when the issue is reassigned is skipped at its claim, as the
/// assignment's own wake would be.
#[test]
fn a_recovery_wake_for_an_issue_reassigned_since_is_skipped_at_its_claim() {
    let mut w = stranded_world();
    let done = sweep(&mut w, T0);
    assert!(matches!(&done[..], [Ok(Outcome::Wake(_))]), "{done:?}");
    w.run_at(
        T0 + 1,
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                assignee_agent_id: Some(Some("a2".into())),
                ..Default::default()
            },
            comment: None,
        },
    )
    .expect("reassigned");
    let wake = recovery_wakes(&w)[0].id.clone();
    let claimed = w.run_at(
        T0 + 2,
        system(),
        Command::AssignRun {
            wake_id: wake.clone(),
            run_id: "late".into(),
            worker_id: "wk1".into(),
            token_hash: None,
        },
    );
    let Ok(Outcome::Wake(skipped)) = claimed else {
        panic!("{claimed:?}")
    };
    assert_eq!(skipped.status, WakeStatus::Skipped);
    assert_eq!(
        skipped.status_reason.as_deref(),
        Some("issue_assignee_changed")
    );
}

/// A `todo` issue whose assignment wake was skipped while its agent was paused is woken as an
/// assignment's recovery once the agent runs again.
#[test]
fn a_todo_issue_skipped_while_its_agent_was_paused_is_woken_after_the_resume() {
    let mut w = world();
    w.ok(
        admin(),
        Command::PauseAgent {
            agent_id: "a1".into(),
            reason: PauseReason::Manual,
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    assert!(pending(&w, "a1").is_empty(), "skipped: agent_paused");
    w.ok(
        admin(),
        Command::ResumeAgent {
            agent_id: "a1".into(),
        },
    );
    let done = sweep(&mut w, T0);
    let [Ok(Outcome::Wake(wake))] = &done[..] else {
        panic!("{done:?}")
    };
    assert_eq!(wake.reason, WakeReason::IssueAssignmentRecovery);
    assert_eq!(wake.issue_id.as_deref(), Some("i1"));
    let run = claim(&mut w, "a1", "r1").expect("claimed");
    assert_eq!(run.wake_reason, Some(WakeReason::IssueAssignmentRecovery));
}

/// An agent cannot propose a recovery (the leader's timer does; no route offers it).
#[test]
fn an_agent_cannot_propose_a_recovery() {
    let mut w = stranded_world();
    let before = w.fingerprint();
    let refused = w.run_at(
        T0,
        agent_actor("a1", "c1", None),
        Command::RecoverIssue {
            issue_id: "i1".into(),
            wake_id: "x".into(),
        },
    );
    assert_eq!(refused.map(|_| ()).unwrap_err().code(), "forbidden");
    assert_eq!(before, w.fingerprint());
}

fn clone_world(w: &World) -> World {
    World {
        state: w.state.clone(),
        index: w.index,
    }
}

/// A company sets the quiet time (`recoverStrandedAfterSecs`): 0 turns recovery off, a day is
/// the most, and a refusal changes nothing.
#[test]
fn a_company_sets_the_quiet_time_or_turns_recovery_off() {
    let mut w = stranded_world();
    let set = |w: &mut World, secs: u32| {
        w.run(
            admin(),
            Command::UpdateCompany {
                company_id: "c1".into(),
                patch: CompanyPatch {
                    recover_stranded_after_secs: Some(secs),
                    ..Default::default()
                },
            },
        )
    };
    let before = w.fingerprint();
    let too_long = set(&mut w, super::recovery::MAX_RECOVER_SECS + 1);
    assert_eq!(too_long.map(|_| ()).unwrap_err().code(), "bad_request");
    assert_eq!(before, w.fingerprint());

    set(&mut w, 600).expect("ten minutes");
    let quiet = w.state.issues.get("i1").expect("i1").updated_at.0;
    assert!(recoveries_due(&w.state, Timestamp(quiet + 599_999)).is_empty());
    assert_eq!(recoveries_due(&w.state, Timestamp(quiet + 600_000)), ["i1"]);

    set(&mut w, 0).expect("off");
    assert!(recoveries_due(&w.state, Timestamp(T0 * 100)).is_empty());
    let refused = w.run_at(
        T0 * 100,
        Actor::system(),
        Command::RecoverIssue {
            issue_id: "i1".into(),
            wake_id: "w-off".into(),
        },
    );
    assert_eq!(refused.map(|_| ()).unwrap_err().code(), "conflict");
}

fn patch_issue(w: &mut World, actor: Actor, at: i64, patch: IssuePatch) {
    w.run_at(
        at,
        actor,
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch,
            comment: None,
        },
    )
    .expect("patched");
}

/// Bug (review): the count of recoveries started over at every status change, so an agent that
/// set its issue back to `todo` in each run was woken about once a minute without end. Only a
/// new assignee or a person's move starts it over.
#[test]
fn an_agents_own_moves_do_not_start_its_recoveries_over_and_a_new_assignee_does() {
    let mut w = stranded_world();
    let mut at = T0;
    for attempt in 1..=MAX_RECOVERIES {
        let done = sweep(&mut w, at);
        assert!(
            matches!(&done[..], [Ok(Outcome::Wake(_))]),
            "{attempt}: {done:?}"
        );
        let wake = recovery_wakes(&w)
            .last()
            .map(|x| x.id.clone())
            .expect("a wake");
        w.run_at(
            at,
            system(),
            Command::AssignRun {
                wake_id: wake,
                run_id: format!("r{attempt}"),
                worker_id: "wk1".into(),
                token_hash: None,
            },
        )
        .expect("claimed");
        // The run moves the issue back and forth, then ends.
        let run = format!("r{attempt}");
        patch_issue(
            &mut w,
            agent_actor("a1", "c1", Some(&run)),
            at,
            IssuePatch {
                status: Some(IssueStatus::Todo),
                ..Default::default()
            },
        );
        w.run_at(
            at + 1_000,
            system(),
            Command::FinishRun {
                run_id: run,
                status: RunStatus::Succeeded,
                error: None,
                report: Default::default(),
            },
        )
        .expect("finished");
        at += 1_000 + (RECOVERY_QUIET_MS << attempt);
    }
    let issue = w.state.issues.get("i1").expect("i1");
    assert_eq!(
        issue.recovery.as_ref().map(|r| r.attempts),
        Some(MAX_RECOVERIES)
    );
    let blocked = sweep(&mut w, at);
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(w.state.issues.status("i1"), Some(IssueStatus::Blocked));

    // A new assignee starts over.
    patch_issue(
        &mut w,
        admin(),
        at + 1,
        IssuePatch {
            assignee_agent_id: Some(Some("a2".into())),
            status: Some(IssueStatus::Todo),
            ..Default::default()
        },
    );
    assert_eq!(w.state.issues.get("i1").expect("i1").recovery, None);
}

/// An issue that waits on purpose is not stranded: an open approval linked to it, its paused
/// project, a paused company, an assignee that is a person.
#[test]
fn an_issue_waiting_on_an_approval_a_paused_project_or_company_is_not_recovered() {
    let w = stranded_world();
    assert_eq!(recoveries_due(&w.state, Timestamp(T0)), ["i1"]);

    let mut approval = clone_world(&w);
    approval.ok(
        agent_actor("a1", "c1", None),
        Command::CreateApproval {
            id: "ap1".into(),
            company_id: "c1".into(),
            approval_type: crate::approval::ApprovalType::RequestBoardApproval,
            payload: serde_json::json!({ "plan": "ship it" }),
            requested_by_agent_id: None,
            issue_ids: vec!["i1".into()],
        },
    );
    assert!(recoveries_due(&approval.state, Timestamp(T0)).is_empty());

    let mut project = clone_world(&w);
    project.ok(
        admin(),
        Command::CreateProject {
            id: "p1".into(),
            company_id: "c1".into(),
            fields: crate::project::ProjectPatch {
                name: Some("Launch".into()),
                ..Default::default()
            },
        },
    );
    project.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                project_id: Some(Some("p1".into())),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert_eq!(recoveries_due(&project.state, Timestamp(T0)), ["i1"]);
    project.ok(
        admin(),
        Command::UpdateProject {
            project_id: "p1".into(),
            patch: crate::project::ProjectPatch {
                paused: Some(true),
                ..Default::default()
            },
        },
    );
    assert!(recoveries_due(&project.state, Timestamp(T0)).is_empty());

    let mut company = clone_world(&w);
    company.ok(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                status: Some(CompanyStatus::Paused),
                ..Default::default()
            },
        },
    );
    assert!(recoveries_due(&company.state, Timestamp(T0)).is_empty());

    let mut person = clone_world(&w);
    person.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                assignee_agent_id: Some(None),
                assignee_user_id: Some(Some("ops".into())),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(recoveries_due(&person.state, Timestamp(T0)).is_empty());
}

/// A company row written before `recoverStrandedAfterSecs` existed reads as off, so an upgrade
/// wakes nobody unasked; a company created now has a minute.
#[test]
fn a_company_from_before_has_recovery_off_and_a_new_one_has_a_minute() {
    let w = stranded_world();
    let company = w.state.companies.get("c1").expect("c1");
    assert_eq!(company.recover_stranded_after_secs, DEFAULT_RECOVER_SECS);
    let mut row = serde_json::to_value(company).expect("row");
    row.as_object_mut()
        .expect("an object")
        .remove("recoverStrandedAfterSecs");
    let old: Company = serde_json::from_value(row).expect("an older row");
    assert_eq!(old.recover_stranded_after_secs, 0);
}

/// Bug (review): after the recoveries were used up and the issue blocked, its manager (an
/// agent) moving it back kept the count at its end, so the issue was blocked again at once; and
/// another agent checking it out inherited the count. Anyone but the assignee moving it, or a
/// checkout by another agent, starts it over.
#[test]
fn a_manager_moving_the_issue_or_another_agents_checkout_starts_the_count_over() {
    let mut w = stranded_world();
    let set_attempts = |w: &mut World| {
        let mut issue = w.state.issues.get("i1").expect("i1").into_owned();
        issue.recovery = Some(super::recovery::IssueRecovery {
            attempts: MAX_RECOVERIES,
            wake_id: "gone".into(),
        });
        w.state.put(crate::state::Change::Issue(issue.into()));
    };
    set_attempts(&mut w);
    patch_issue(
        &mut w,
        agent_actor("a2", "c1", None),
        T0,
        IssuePatch {
            status: Some(IssueStatus::Todo),
            ..Default::default()
        },
    );
    assert_eq!(w.state.issues.get("i1").expect("i1").recovery, None);

    set_attempts(&mut w);
    w.start_run("r9", "a2");
    w.checkout("i1", "a2", "r9").expect("a2 checks it out");
    assert_eq!(w.state.issues.get("i1").expect("i1").recovery, None);
}

/// An issue whose assignee scheduled a monitor is waiting on purpose: the monitor wakes it, and
/// the recovery sweep leaves it alone until the monitor is gone.
#[test]
fn a_scheduled_monitor_keeps_an_issue_from_being_recovered() {
    let mut w = stranded_world();
    let quiet = w.state.issues.get("i1").expect("i1").updated_at.0;
    let monitor = crate::monitor::MonitorPolicy::parse(&serde_json::json!({
        "nextCheckAt": Timestamp(quiet + 100 * RECOVERY_QUIET_MS).to_rfc3339(),
    }))
    .expect("a valid monitor");
    let schedule = |m: Option<crate::monitor::MonitorPolicy>| Command::UpdateIssue {
        issue_id: "i1".into(),
        patch: IssuePatch {
            monitor: Some(m),
            ..Default::default()
        },
        comment: None,
    };
    w.run_at(quiet, admin(), schedule(Some(monitor)))
        .expect("scheduled");
    assert!(recoveries_due(&w.state, Timestamp(quiet + 10 * RECOVERY_QUIET_MS)).is_empty());
    w.run_at(quiet + 1, admin(), schedule(None))
        .expect("cleared");
    assert_eq!(
        recoveries_due(&w.state, Timestamp(quiet + 10 * RECOVERY_QUIET_MS)),
        vec!["i1"]
    );
}
