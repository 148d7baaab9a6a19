//! Paperclip's semantics that Roost's rules had otherwise: each test is named after what was
//! wrong.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;

fn status_of(w: &World, id: &str) -> IssueStatus {
    w.state.issues.status(id).expect("the issue exists")
}

/// Paperclip's create schema makes an issue created with an assignee and no status `todo`
/// (and wakes the assignee); Roost made it `backlog`, where no one ever worked it.
#[test]
fn an_issue_created_with_an_assignee_and_no_status_sat_in_backlog() {
    let mut w = world();
    let assigned = w.issue(
        "i1",
        "c1",
        IssuePatch {
            assignee_agent_id: Some(Some("a1".into())),
            ..Default::default()
        },
    );
    assert_eq!(assigned.status, IssueStatus::Todo);
    assert_eq!(pending(&w, "a1").len(), 1, "the assignee is woken");
    assert_eq!(pending(&w, "a1")[0].reason, WakeReason::IssueAssigned);
    let unassigned = w.issue("i2", "c1", IssuePatch::default());
    assert_eq!(unassigned.status, IssueStatus::Backlog);
    // A status sent is kept, with or without an assignee.
    let parked = w.issue(
        "i3",
        "c1",
        IssuePatch {
            assignee_agent_id: Some(Some("a2".into())),
            status: Some(IssueStatus::Backlog),
            ..Default::default()
        },
    );
    assert_eq!(parked.status, IssueStatus::Backlog);
    assert!(pending(&w, "a2").is_empty(), "backlog work wakes no one");
}

/// Paperclip keeps a cancelled blocker unresolved ("until the relation changes"): Roost let
/// the blocked issue be checked out, and woke its assignee, as if the work were done.
#[test]
fn a_cancelled_blocker_let_the_blocked_issue_start() {
    let mut w = world();
    w.todo_issue("b1");
    w.todo_issue("b2");
    w.issue(
        "dep",
        "c1",
        IssuePatch {
            status: Some(IssueStatus::Backlog),
            assignee_agent_id: Some(Some("a1".into())),
            blocked_by_issue_ids: Some(vec!["b1".into(), "b2".into()]),
            ..Default::default()
        },
    );
    w.ok(admin(), status_update("b1", IssueStatus::Done));
    w.ok(admin(), status_update("b2", IssueStatus::Cancelled));
    assert_eq!(status_of(&w, "b2"), IssueStatus::Cancelled);
    assert!(
        pending(&w, "a1").is_empty(),
        "a cancelled blocker resolves nothing: no blockers-resolved wake"
    );
    w.start_run("r1", "a1");
    let refused = w.checkout("dep", "a1", "r1");
    assert!(
        matches!(refused, Err(DomainError::Invariant { ref rule, .. }) if rule == "unresolved_blockers"),
        "{refused:?}"
    );
    // Done (straight from cancelled, which nothing forbids), it resolves: the assignee is
    // woken and may check it out.
    w.ok(admin(), status_update("b2", IssueStatus::Done));
    let woken = pending(&w, "a1");
    assert_eq!(woken.len(), 1, "{woken:?}");
    assert_eq!(woken[0].reason, WakeReason::IssueBlockersResolved);
    w.checkout("dep", "a1", "r1").expect("both blockers done");
}

/// Paperclip's pause cancels the agent's active runs; Roost's only set the status, so a paused
/// agent's run went on spending until it ended (the only stop was to terminate the agent).
#[test]
fn pausing_an_agent_left_its_running_run_going() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").expect("checked out");
    w.start_run("r2", "a2");
    w.ok(
        admin(),
        Command::PauseAgent {
            agent_id: "a1".into(),
            reason: PauseReason::Manual,
        },
    );
    assert_eq!(w.state.runs["r1"].status, RunStatus::Cancelled);
    assert_eq!(w.state.runs["r1"].error.as_deref(), Some("agent_paused"));
    assert!(
        w.state.issues["i1"].checkout.is_none(),
        "its checkout is released"
    );
    assert!(
        w.state.runs["r2"].status.is_live(),
        "another agent's run goes on"
    );
    let a1 = &w.state.agents["a1"];
    assert_eq!(a1.status, AgentStatus::Paused);
    assert!(a1.last_heartbeat_at.is_some());
}

fn reassign(w: &mut World, issue: &str, agent: &str) {
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: issue.into(),
            patch: IssuePatch {
                assignee_agent_id: Some(Some(agent.into())),
                ..Default::default()
            },
            comment: None,
        },
    );
}

/// The agent's oldest queued wake claimed on `wk1`: the wake's state after the claim and
/// whether a run started.
fn claim_oldest(w: &mut World, agent: &str, run_id: &str) -> (Wake, bool) {
    let wake = pending(w, agent)
        .into_iter()
        .find(|x| x.status == WakeStatus::Queued)
        .map(|x| x.id.clone())
        .expect("a queued wake");
    let outcome = w.run(
        admin(),
        Command::AssignRun {
            wake_id: wake.clone(),
            run_id: run_id.into(),
            worker_id: "wk1".into(),
            token_hash: None,
        },
    );
    (
        w.state.wakes[&wake].clone(),
        matches!(outcome, Ok(Outcome::Run(_))),
    )
}

/// Paperclip cancels a queued run at its claim when its issue was reassigned or closed
/// meanwhile; Roost started it anyway, spending a run on work that was no longer the agent's.
#[test]
fn a_wake_queued_for_an_issue_since_reassigned_or_closed_still_started_a_run() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    reassign(&mut w, "i1", "a2");
    let (wake, ran) = claim_oldest(&mut w, "a1", "r1");
    assert!(!ran);
    assert_eq!(
        (wake.status, wake.status_reason.as_deref()),
        (WakeStatus::Skipped, Some("issue_assignee_changed"))
    );
    // The new assignee's wake runs.
    let (_, ran) = claim_oldest(&mut w, "a2", "r2");
    assert!(ran);

    assigned_issue(&mut w, "i2", "a1");
    w.ok(admin(), status_update("i2", IssueStatus::Cancelled));
    let (wake, ran) = claim_oldest(&mut w, "a1", "r3");
    assert!(!ran);
    assert_eq!(wake.status_reason.as_deref(), Some("issue_terminal_status"));
}

/// Someone speaking to the agent (a comment or mention wake) is answered even on an issue
/// that is no longer its, and an on-demand wake is the operator's call.
#[test]
fn a_wake_with_comments_or_on_demand_still_runs_after_a_reassignment() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    reassign(&mut w, "i1", "a2");
    // A mention of a1 merges into its queued wake on the issue, which now carries a comment.
    comment(
        &mut w,
        admin(),
        "i1",
        "cm1",
        "@a1 please hand over your notes",
    );
    let queued: Vec<&Wake> = pending(&w, "a1")
        .into_iter()
        .filter(|x| x.status == WakeStatus::Queued)
        .collect();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0].comment_ids, ["cm1"]);
    let (_, ran) = claim_oldest(&mut w, "a1", "r1");
    assert!(ran, "a wake carrying a comment runs");
    finish(&mut w, "r1");
    // An operator's wake of a1 about a2's issue.
    w.ok(
        admin(),
        Command::Wakeup {
            id: "od".into(),
            agent_id: "a1".into(),
            issue_id: Some("i1".into()),
            reason: WakeReason::OnDemand,
            payload: serde_json::Value::Null,
            wake_key: None,
        },
    );
    let (_, ran) = claim_oldest(&mut w, "a1", "r2");
    assert!(ran, "an on-demand wake runs");
}

/// Removing the cancelled blocker from an issue's blockers (or deleting it) lets it start: its
/// assignee is woken, or the work would wait for a timer that may be off.
#[test]
fn an_issue_freed_of_its_cancelled_blocker_by_an_edit_or_a_delete_wakes_its_assignee() {
    let mut w = world();
    for (dep, blocker) in [("dep1", "b1"), ("dep2", "b2")] {
        w.todo_issue(blocker);
        w.ok(admin(), status_update(blocker, IssueStatus::Cancelled));
        w.issue(
            dep,
            "c1",
            IssuePatch {
                status: Some(IssueStatus::Todo),
                assignee_agent_id: Some(Some("a1".into())),
                blocked_by_issue_ids: Some(vec![blocker.into()]),
                ..Default::default()
            },
        );
    }
    // Their assignment wakes were skipped at the claim: the blockers held them back.
    for run in ["r1", "r2"] {
        let (wake, ran) = claim_oldest(&mut w, "a1", run);
        assert!(!ran);
        assert_eq!(
            wake.status_reason.as_deref(),
            Some("issue_dependencies_blocked")
        );
    }
    assert!(pending(&w, "a1").is_empty());
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "dep1".into(),
            patch: IssuePatch {
                blocked_by_issue_ids: Some(Vec::new()),
                ..Default::default()
            },
            comment: None,
        },
    );
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "b2".into(),
        },
    );
    let woken: Vec<(Option<&str>, WakeReason)> = pending(&w, "a1")
        .iter()
        .map(|x| (x.issue_id.as_deref(), x.reason))
        .collect();
    assert_eq!(
        woken,
        [
            (Some("dep1"), WakeReason::IssueBlockersResolved),
            (Some("dep2"), WakeReason::IssueBlockersResolved)
        ]
    );
    let (_, ran) = claim_oldest(&mut w, "a1", "r3");
    assert!(ran, "nothing holds it back now");
}
