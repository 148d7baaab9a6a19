//! Issue monitors: who schedules one and on which issues, what clears one, what the sweep and a
//! check now wake, and how a monitor past its bounds recovers.

use serde_json::json;

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::monitor::*;
use crate::time::Timestamp;
use crate::DomainError;

/// The time the tests schedule from, well after the world's setup stamps.
const T0: i64 = 100_000_000;

fn policy(at: i64) -> MonitorPolicy {
    MonitorPolicy::parse(&json!({
        "nextCheckAt": Timestamp(at).to_rfc3339(),
        "notes": "CI run 42", "kind": "external_service", "serviceName": "GitHub Actions",
        "externalRef": "https://ci.example/runs/42",
    }))
    .expect("a valid policy")
}

fn set_monitor(issue: &str, monitor: Option<MonitorPolicy>) -> Command {
    Command::UpdateIssue {
        issue_id: issue.into(),
        patch: IssuePatch {
            monitor: Some(monitor),
            ..Default::default()
        },
        comment: None,
    }
}

fn trigger(issue: &str, id: &str) -> Command {
    Command::TriggerIssueMonitor {
        issue_id: issue.into(),
        id: id.into(),
    }
}

fn system() -> Actor {
    Actor::system()
}

/// The outcome and changes of the sweep's `command` at `at`.
fn applied_at(w: &mut World, at: i64, command: Command) -> crate::state::Applied {
    w.index += 1;
    let env = Envelope {
        request_id: None,
        at: Timestamp(at),
        actor: system(),
        command,
        idempotency_key: None,
    };
    w.state.apply(w.index, &env)
}

/// Issue `i1` assigned to a1 and in progress under a1's run `r1`; a1 acting from that run.
fn in_progress(w: &mut World) -> Actor {
    assigned_issue(w, "i1", "a1");
    claim(w, "a1", "r1").expect("a1 claims its assignment");
    w.checkout("i1", "a1", "r1").expect("a1 checks out");
    agent_actor("a1", "c1", Some("r1"))
}

fn monitor_of(w: &World, issue: &str) -> MonitorState {
    w.state
        .issues
        .get(issue)
        .expect("issue")
        .monitor
        .state()
        .cloned()
        .expect("a monitor")
}

#[test]
fn an_agent_schedules_a_monitor_and_the_sweep_wakes_it_once_when_due() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    let out = w.run_at(T0, a1, set_monitor("i1", Some(policy(T0 + 60_000))));
    let Ok(Outcome::Issue { issue, .. }) = out else {
        panic!("scheduled: {out:?}")
    };
    let shown = serde_json::to_value(&*issue).expect("serializes");
    assert_eq!(
        shown["monitorNextCheckAt"],
        Timestamp(T0 + 60_000).to_rfc3339()
    );
    assert_eq!(shown["monitorScheduledBy"], "assignee");
    assert_eq!(shown["executionState"]["monitor"]["status"], "scheduled");
    assert_eq!(
        shown["executionPolicy"]["monitor"]["serviceName"],
        "GitHub Actions"
    );
    assert_eq!(shown["executionPolicy"]["monitor"]["externalRef"], REDACTED);

    assert!(monitors_due(&w.state, Timestamp(T0 + 59_999)).is_empty());
    assert_eq!(monitors_due(&w.state, Timestamp(T0 + 60_000)), vec!["i1"]);
    // Not due yet: the sweep's firing is refused.
    let early = w.run_at(T0 + 1_000, system(), trigger("i1", "w-early"));
    assert!(
        matches!(early, Err(DomainError::Conflict { .. })),
        "{early:?}"
    );

    let before = wakes_of(&w, "a1").len();
    w.run_at(T0 + 60_500, system(), trigger("i1", "w-due"))
        .expect("fires");
    let wake = w.state.wakes.get("w-due").expect("the monitor's wake");
    assert_eq!(wake.reason, WakeReason::IssueMonitorDue);
    assert_eq!(wake.issue_id.as_deref(), Some("i1"));
    assert_eq!(wake.payload["monitorAttemptCount"], 1);
    assert_eq!(wake.payload["serviceName"], "GitHub Actions");
    assert_eq!(wakes_of(&w, "a1").len(), before + 1);
    let m = monitor_of(&w, "i1");
    assert_eq!(m.status, MonitorStatus::Triggered);
    assert_eq!((m.attempt_count, m.next_check_at), (1, None));
    assert_eq!(m.last_triggered_at, Some(Timestamp(T0 + 60_500)));
    let issue = w.state.issues.get("i1").expect("issue");
    assert!(
        !issue.paperclip.contains_key("executionPolicy"),
        "{:?}",
        issue.paperclip
    );
    // It fired once: nothing is due, and a second firing is refused.
    assert!(monitors_due(&w.state, Timestamp(T0 + 120_000)).is_empty());
    let again = w.run_at(T0 + 61_000, system(), trigger("i1", "w-again"));
    assert!(
        matches!(again, Err(DomainError::Conflict { .. })),
        "{again:?}"
    );
}

#[test]
fn scheduling_needs_the_board_or_the_assignee_on_an_agents_open_work() {
    let mut w = world();
    in_progress(&mut w);
    // Its run over, the issue stays a1's, in progress, and held by no run.
    finish(&mut w, "r1");
    let a1 = agent_actor("a1", "c1", None);
    w.todo_issue("t1");
    let before = w.fingerprint();
    let cases = [
        // Another agent of the company, and one of another company.
        (agent_actor("a2", "c1", None), "i1", "forbidden"),
        (agent_actor("b1", "c2", None), "i1", "not found"),
        // An issue in todo, with nobody assigned.
        (admin(), "t1", "invariant"),
    ];
    for (actor, issue, want) in cases {
        let out = w.run_at(T0, actor, set_monitor(issue, Some(policy(T0 + 60_000))));
        let got = match &out {
            Err(DomainError::Forbidden { .. }) => "forbidden",
            Err(DomainError::NotFound { .. }) => "not found",
            Err(DomainError::Invariant { .. }) => "invariant",
            _ => "other",
        };
        assert_eq!(got, want, "{issue}: {out:?}");
    }
    // Bounds already used: a timeout in the past.
    let mut late = policy(T0 + 60_000);
    late.timeout_at = Some(Timestamp(T0 - 1));
    let out = w.run_at(T0, a1.clone(), set_monitor("i1", Some(late)));
    assert!(matches!(out, Err(DomainError::Invariant { .. })), "{out:?}");
    assert_eq!(w.fingerprint(), before, "a refusal changes nothing");
    // The board may, and is recorded as the board.
    w.run_at(T0, admin(), set_monitor("i1", Some(policy(T0 + 60_000))))
        .expect("the board schedules");
    assert_eq!(monitor_of(&w, "i1").scheduled_by, Some(ScheduledBy::Board));
}

#[test]
fn an_update_that_leaves_an_agents_open_work_clears_the_monitor_saying_why() {
    let cases = [
        (Some(IssueStatus::Done), None, ClearReason::Done),
        (Some(IssueStatus::Cancelled), None, ClearReason::Cancelled),
        (Some(IssueStatus::Todo), None, ClearReason::InvalidStatus),
        (
            None,
            Some("person@example.com"),
            ClearReason::InvalidAssignee,
        ),
    ];
    for (status, user, reason) in cases {
        let mut w = world();
        let a1 = in_progress(&mut w);
        w.run_at(T0, a1, set_monitor("i1", Some(policy(T0 + 60_000))))
            .expect("scheduled");
        finish(&mut w, "r1");
        let patch = IssuePatch {
            status,
            assignee_user_id: user.map(|u| Some(u.to_string())),
            assignee_agent_id: user.map(|_| None),
            ..Default::default()
        };
        let update = Command::UpdateIssue {
            issue_id: "i1".into(),
            patch,
            comment: None,
        };
        w.run_at(T0 + 1_000, admin(), update).expect("updated");
        let m = monitor_of(&w, "i1");
        assert_eq!(
            (m.status, m.clear_reason),
            (MonitorStatus::Cleared, Some(reason))
        );
        assert_eq!(m.cleared_at, Some(Timestamp(T0 + 1_000)));
        assert!(monitors_due(&w.state, Timestamp(T0 + 120_000)).is_empty());
    }
    // An executionPolicy without a monitor clears it by hand; one with the same monitor keeps it.
    let mut w = world();
    let a1 = in_progress(&mut w);
    w.run_at(T0, a1.clone(), set_monitor("i1", Some(policy(T0 + 60_000))))
        .expect("scheduled");
    w.run_at(
        T0 + 1,
        a1.clone(),
        set_monitor("i1", Some(policy(T0 + 60_000))),
    )
    .expect("the same monitor again");
    assert_eq!(monitor_of(&w, "i1").status, MonitorStatus::Scheduled);
    w.run_at(T0 + 2, a1, set_monitor("i1", None))
        .expect("cleared");
    let m = monitor_of(&w, "i1");
    assert_eq!(m.clear_reason, Some(ClearReason::Manual));
}

#[test]
fn a_monitor_past_its_bounds_is_cleared_and_recovers_as_its_policy_says() {
    for recovery in MonitorRecovery::ALL {
        let mut w = world();
        let a1 = in_progress(&mut w);
        let mut p = policy(T0 + 1_000);
        p.max_attempts = Some(1);
        p.recovery_policy = Some(*recovery);
        w.run_at(T0, a1.clone(), set_monitor("i1", Some(p.clone())))
            .expect("scheduled");
        w.run_at(T0 + 1_000, system(), trigger("i1", "x1"))
            .expect("the one attempt");
        // Its one attempt used, the same bound cannot be scheduled again; a larger one can.
        p.next_check_at = Timestamp(T0 + 2_000);
        let out = w.run_at(T0 + 1_500, a1.clone(), set_monitor("i1", Some(p.clone())));
        assert!(matches!(out, Err(DomainError::Invariant { .. })), "{out:?}");
        p.max_attempts = Some(2);
        w.run_at(T0 + 1_500, a1.clone(), set_monitor("i1", Some(p.clone())))
            .expect("two attempts");
        w.run_at(T0 + 2_000, system(), trigger("i1", "x2"))
            .expect("the second attempt");
        p.next_check_at = Timestamp(T0 + 3_000);
        p.timeout_at = Some(Timestamp(T0 + 2_500));
        p.max_attempts = Some(3);
        w.run_at(T0 + 2_100, a1.clone(), set_monitor("i1", Some(p.clone())))
            .expect("a third, with a timeout before it is due");
        let applied = applied_at(&mut w, T0 + 3_000, trigger("i1", "x3"));
        assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
        let m = monitor_of(&w, "i1");
        assert_eq!(
            m.clear_reason,
            Some(ClearReason::TimeoutExceeded),
            "{recovery}"
        );
        assert_eq!(m.attempt_count, 2, "a cleared monitor made no attempt");
        match recovery {
            MonitorRecovery::WakeOwner => {
                let wake = w.state.wakes.get("x3").expect("a recovery wake");
                assert_eq!(wake.reason, WakeReason::IssueMonitorRecovery);
                assert_eq!(wake.payload["clearReason"], "timeout_exceeded");
            }
            MonitorRecovery::EscalateToBoard => {
                let c = applied
                    .changes
                    .iter()
                    .find_map(|c| match c {
                        crate::state::Change::Comment(c) if c.id == "x3" => Some(c),
                        _ => None,
                    })
                    .expect("a comment for the board");
                assert!(c.body.contains("its timeout was reached"), "{}", c.body);
                assert_eq!(
                    (c.author_agent_id.as_ref(), c.author_user_id.as_ref()),
                    (None, None)
                );
            }
            MonitorRecovery::CreateRecoveryIssue => {
                let child = w
                    .state
                    .issues
                    .get("x3")
                    .expect("a recovery sub-issue")
                    .into_owned();
                assert_eq!(child.parent_id.as_deref(), Some("i1"));
                assert_eq!(child.assignee_agent_id.as_deref(), Some("a1"));
                assert_eq!(
                    (child.status, child.priority),
                    (IssueStatus::Todo, Priority::High)
                );
                // The wake that will run: its assignment wake, the recovery merged into it.
                let woken = |w: &World, made: &str| {
                    let about = pending(w, "a1").iter().any(|x| {
                        x.issue_id.as_deref() == Some("x3")
                            && x.payload["sourceIssueId"] == "i1"
                            && x.payload["clearReason"] == "timeout_exceeded"
                    });
                    about && w.state.wakes.contains_key(made)
                };
                assert!(
                    woken(&w, "x3"),
                    "the sub-issue's assignee is woken about it"
                );
                // A second clearing while it is open opens no other, and wakes about that one.
                p.next_check_at = Timestamp(T0 + 4_000);
                p.timeout_at = Some(Timestamp(T0 + 5_000));
                w.run_at(T0 + 3_500, a1.clone(), set_monitor("i1", Some(p.clone())))
                    .expect("scheduled again");
                w.run_at(T0 + 6_000, system(), trigger("i1", "x4"))
                    .expect("cleared again");
                assert!(
                    w.state.issues.get("x4").is_none(),
                    "no second recovery issue"
                );
                assert!(
                    woken(&w, "x4"),
                    "the open sub-issue's assignee is woken again"
                );
            }
        }
    }
}

#[test]
fn a_check_now_fires_early_and_a_skipped_wake_is_refused_there_but_cleared_by_the_sweep() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    w.run_at(
        T0,
        a1.clone(),
        set_monitor("i1", Some(policy(T0 + 3_600_000))),
    )
    .expect("scheduled an hour ahead");
    // Another agent may not check it; the assignee may, an hour early.
    let other = w.run_at(T0 + 1, agent_actor("a2", "c1", None), trigger("i1", "c0"));
    assert!(
        matches!(other, Err(DomainError::Forbidden { .. })),
        "{other:?}"
    );
    w.run_at(T0 + 2, a1.clone(), trigger("i1", "c1"))
        .expect("checked now");
    assert_eq!(
        w.state.wakes.get("c1").map(|x| x.reason),
        Some(WakeReason::IssueMonitorDue)
    );
    assert_eq!(monitor_of(&w, "i1").status, MonitorStatus::Triggered);

    // Paused, a1's wake would be skipped: a check now is refused and keeps the monitor; the
    // sweep clears it.
    w.run_at(
        T0 + 3,
        a1.clone(),
        set_monitor("i1", Some(policy(T0 + 10_000))),
    )
    .expect("scheduled again");
    w.run_at(
        T0 + 4,
        admin(),
        Command::PauseAgent {
            agent_id: "a1".into(),
            reason: PauseReason::Manual,
        },
    )
    .expect("paused");
    let out = w.run_at(T0 + 5, admin(), trigger("i1", "c2"));
    assert!(matches!(out, Err(DomainError::Conflict { .. })), "{out:?}");
    assert_eq!(monitor_of(&w, "i1").status, MonitorStatus::Scheduled);
    w.run_at(T0 + 10_000, system(), trigger("i1", "c3"))
        .expect("the sweep");
    let m = monitor_of(&w, "i1");
    assert_eq!(m.clear_reason, Some(ClearReason::DispatchSkipped));
}

#[test]
fn a_create_schedules_a_monitor_under_the_same_rules() {
    let mut w = world();
    let create = |id: &str, status: IssueStatus, at: i64| Command::CreateIssue {
        id: id.into(),
        company_id: "c1".into(),
        fields: IssuePatch {
            title: Some(format!("issue {id}")),
            status: Some(status),
            assignee_agent_id: Some(Some("a1".into())),
            monitor: Some(Some(policy(at))),
            ..Default::default()
        },
    };
    let by_a2 = w.run_at(
        T0,
        agent_actor("a2", "c1", None),
        create("n1", IssueStatus::InProgress, T0 + 1),
    );
    assert!(
        matches!(by_a2, Err(DomainError::Forbidden { .. })),
        "{by_a2:?}"
    );
    let todo = w.run_at(T0, admin(), create("n2", IssueStatus::Todo, T0 + 1));
    assert!(
        matches!(todo, Err(DomainError::Invariant { .. })),
        "{todo:?}"
    );
    w.run_at(
        T0,
        agent_actor("a1", "c1", None),
        create("n3", IssueStatus::InReview, T0 + 1),
    )
    .expect("its assignee schedules one on a create");
    assert_eq!(monitor_of(&w, "n3").status, MonitorStatus::Scheduled);
    assert_eq!(monitors_due(&w.state, Timestamp(T0 + 1)), vec!["n3"]);
}

/// An issue row with a monitor and the Paperclip fields kept beside it reads back whole; a
/// policy's own stages outlive the monitor leaving it.
#[test]
fn an_issue_with_a_monitor_and_paperclip_fields_round_trips_and_keeps_its_stages() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    let stages = json!({ "mode": "review", "stages": [{ "type": "review", "participants": [] }] });
    let patch = IssuePatch {
        monitor: Some(Some(policy(T0 + 1_000))),
        paperclip: Some([("executionPolicy".to_string(), stages.clone())].into()),
        ..Default::default()
    };
    let update = Command::UpdateIssue {
        issue_id: "i1".into(),
        patch,
        comment: None,
    };
    w.run_at(T0, a1, update).expect("scheduled with stages");
    let issue = w.state.issues.get("i1").expect("issue").into_owned();
    assert_eq!(
        issue.paperclip["executionPolicy"]["stages"],
        stages["stages"]
    );
    assert!(issue.paperclip["executionPolicy"]["monitor"].is_object());
    let row = serde_json::to_string(&issue).expect("a row");
    let back: Issue = serde_json::from_str(&row).expect("reads back");
    assert_eq!(back, issue, "{row}");
    w.run_at(T0 + 1_000, system(), trigger("i1", "t1"))
        .expect("fired");
    let issue = w.state.issues.get("i1").expect("issue").into_owned();
    assert_eq!(
        issue.paperclip["executionPolicy"], stages,
        "the stages stay, the monitor goes"
    );
}

/// Bug found in review: a release, or the deletion of the issue's agent, left the monitor
/// scheduled on an issue nobody held, to fire for whoever took it next.
#[test]
fn a_release_or_the_agents_deletion_clears_the_monitor() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    w.run_at(T0, a1.clone(), set_monitor("i1", Some(policy(T0 + 60_000))))
        .expect("scheduled");
    let release = Command::Release {
        issue_id: "i1".into(),
    };
    w.run_at(T0 + 1, a1, release).expect("released");
    let m = monitor_of(&w, "i1");
    assert_eq!(m.clear_reason, Some(ClearReason::InvalidAssignee));
    assert!(monitors_due(&w.state, Timestamp(i64::MAX)).is_empty());

    let mut w = world();
    let a1 = in_progress(&mut w);
    w.run_at(T0, a1, set_monitor("i1", Some(policy(T0 + 60_000))))
        .expect("scheduled");
    finish(&mut w, "r1");
    let delete = Command::DeleteAgent {
        agent_id: "a1".into(),
    };
    w.run_at(T0 + 1, admin(), delete).expect("deleted");
    assert_eq!(
        monitor_of(&w, "i1").clear_reason,
        Some(ClearReason::InvalidAssignee)
    );
}

/// Bug found in review: an update after a monitor's `timeoutAt` cleared it without its
/// recovery; now the sweep fires it at its timeout (before its next check) and it recovers.
#[test]
fn a_monitor_past_its_timeout_recovers_at_the_timeout_whatever_updates_came_first() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    let mut p = policy(T0 + 60_000);
    p.timeout_at = Some(Timestamp(T0 + 10_000));
    w.run_at(T0, a1, set_monitor("i1", Some(p)))
        .expect("scheduled");
    let retitle = Command::UpdateIssue {
        issue_id: "i1".into(),
        patch: IssuePatch {
            title: Some("still waiting".into()),
            ..Default::default()
        },
        comment: None,
    };
    w.run_at(T0 + 20_000, admin(), retitle)
        .expect("an update past the timeout");
    assert_eq!(monitor_of(&w, "i1").status, MonitorStatus::Scheduled);
    assert_eq!(monitors_due(&w.state, Timestamp(T0 + 10_000)), vec!["i1"]);
    w.run_at(T0 + 20_001, system(), trigger("i1", "rw"))
        .expect("fired at its timeout");
    assert_eq!(
        monitor_of(&w, "i1").clear_reason,
        Some(ClearReason::TimeoutExceeded)
    );
    let wake = w.state.wakes.get("rw").expect("the owner's recovery wake");
    assert_eq!(wake.reason, WakeReason::IssueMonitorRecovery);
}

/// Bug found in review: the board sending back the policy its assignee scheduled counted as a
/// new schedule, so closing the issue in the same update was refused instead of clearing it.
#[test]
fn a_policy_sent_back_unchanged_is_no_new_schedule() {
    let mut w = world();
    let a1 = in_progress(&mut w);
    w.run_at(T0, a1, set_monitor("i1", Some(policy(T0 + 60_000))))
        .expect("scheduled by the assignee");
    let close = Command::UpdateIssue {
        issue_id: "i1".into(),
        patch: IssuePatch {
            status: Some(IssueStatus::Done),
            monitor: Some(Some(policy(T0 + 60_000))),
            ..Default::default()
        },
        comment: None,
    };
    w.run_at(T0 + 1, admin(), close)
        .expect("closed with the policy sent back");
    let m = monitor_of(&w, "i1");
    assert_eq!(m.clear_reason, Some(ClearReason::Done));
    assert_eq!(m.scheduled_by, Some(ScheduledBy::Assignee));
}
