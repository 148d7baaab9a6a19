//! Transition tests: every rule of issues, checkouts and runs applied to an in-memory state.

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::time::Timestamp;

use super::test_world::*;

#[test]
fn identifiers_count_up_per_company() {
    let mut w = World::new();
    assert_eq!(
        w.issue("i1", "c1", IssuePatch::default()).identifier,
        "ACM-1"
    );
    assert_eq!(
        w.issue("i2", "c1", IssuePatch::default()).identifier,
        "ACM-2"
    );
    assert_eq!(
        w.issue("i3", "c2", IssuePatch::default()).identifier,
        "OTH-1"
    );
    assert_eq!(
        w.state.issue_by_ref("acm-2").map(|i| i.id.clone()),
        Some("i2".to_string())
    );
}

#[test]
fn second_agent_checkout_conflicts_naming_the_holder() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.start_run("r2", "a2");
    let token = token_of(w.checkout("i1", "a1", "r1").unwrap());
    let before = w.fingerprint();
    match w.checkout("i1", "a2", "r2") {
        Err(DomainError::CheckoutConflict {
            holder_agent_id,
            holder_run_id,
            token: t,
            ..
        }) => {
            assert_eq!(
                (holder_agent_id.as_str(), holder_run_id.as_str(), t),
                ("a1", "r1", token)
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(w.fingerprint(), before);
    let issue = &w.state.issues["i1"];
    assert_eq!(issue.status, IssueStatus::InProgress);
    assert_eq!(issue.assignee_agent_id.as_deref(), Some("a1"));
}

#[test]
fn same_run_checkout_is_idempotent_with_the_same_token() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    let first = token_of(w.checkout("i1", "a1", "r1").unwrap());
    let again = token_of(w.checkout("i1", "a1", "r1").unwrap());
    assert_eq!(first, again);
}

#[test]
fn tokens_strictly_increase_across_holders() {
    let mut w = World::new();
    w.todo_issue("i1");
    let mut last = 0;
    for round in 0..5 {
        let agent = if round % 2 == 0 { "a1" } else { "a2" };
        let run = format!("r{round}");
        w.start_run(&run, agent);
        let token = token_of(w.checkout("i1", agent, &run).unwrap());
        assert!(token > last, "token {token} after {last}");
        last = token;
        w.ok(
            admin(),
            Command::FinishRun {
                run_id: run,
                status: RunStatus::Succeeded,
                error: None,
                report: Default::default(),
            },
        );
        // The issue stays in_progress after its run ends; put it back for the next round.
        w.ok(
            admin(),
            Command::UpdateIssue {
                issue_id: "i1".into(),
                patch: IssuePatch {
                    status: Some(IssueStatus::Todo),
                    ..Default::default()
                },
                comment: None,
            },
        );
    }
}

#[test]
fn ending_a_run_releases_its_checkout_so_a_dead_holder_blocks_nobody() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").unwrap();
    w.ok(
        admin(),
        Command::FinishRun {
            run_id: "r1".into(),
            status: RunStatus::Lost,
            error: None,
            report: Default::default(),
        },
    );
    assert!(w.state.issues["i1"].checkout.is_none());
    w.start_run("r2", "a2");
    let issue = w.run(
        agent_actor("a2", "c1", Some("r2")),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a2".into(),
            expected_statuses: vec![IssueStatus::InProgress],
        },
    );
    assert!(issue.is_ok(), "{issue:?}");
}

#[test]
fn writes_for_a_finished_run_are_fenced_and_change_nothing() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").unwrap();
    w.ok(
        admin(),
        Command::FinishRun {
            run_id: "r1".into(),
            status: RunStatus::Succeeded,
            error: None,
            report: Default::default(),
        },
    );
    let before = w.fingerprint();
    let stale = agent_actor("a1", "c1", Some("r1"));
    let attempts = vec![
        Command::AddComment {
            issue_id: "i1".into(),
            comment: NewComment {
                id: "cm1".into(),
                body: "late".into(),
            },
        },
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::Done),
                ..Default::default()
            },
            comment: None,
        },
        Command::Release {
            issue_id: "i1".into(),
        },
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a1".into(),
            expected_statuses: vec![IssueStatus::InProgress],
        },
        Command::RecordCostEvent {
            event: NewCostEvent {
                issue_id: Some("i1".into()),
                heartbeat_run_id: Some("r1".into()),
                ..super::budget_tests::cost_event("ce1", "a1", 5)
            },
        },
    ];
    for command in attempts {
        match w.run(stale.clone(), command.clone()) {
            Err(DomainError::StaleRun { run_id, status }) => {
                assert_eq!((run_id.as_str(), status.as_str()), ("r1", "succeeded"))
            }
            other => panic!("{command:?}: expected stale_run, got {other:?}"),
        }
    }
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn another_agents_run_cannot_write_to_a_held_issue() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.start_run("r2", "a2");
    w.checkout("i1", "a1", "r1").unwrap();
    let result = w.run(
        agent_actor("a2", "c1", Some("r2")),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::Done),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(
        matches!(result, Err(DomainError::CheckoutConflict { .. })),
        "{result:?}"
    );
    let release = w.run(
        agent_actor("a2", "c1", Some("r2")),
        Command::Release {
            issue_id: "i1".into(),
        },
    );
    assert!(
        matches!(release, Err(DomainError::CheckoutConflict { .. })),
        "{release:?}"
    );
}

#[test]
fn release_by_the_holder_returns_the_issue_to_todo() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").unwrap();
    w.ok(
        agent_actor("a1", "c1", Some("r1")),
        Command::Release {
            issue_id: "i1".into(),
        },
    );
    let issue = &w.state.issues["i1"];
    assert_eq!(
        (
            issue.status,
            issue.assignee_agent_id.as_deref(),
            issue.checkout.as_ref()
        ),
        (IssueStatus::Todo, None, None)
    );
}

/// A checkout and a release each move the issue's status, stamp `statusChangedAt` with the
/// command's time, and answer with the very issue the state holds: the outcome shares it, so
/// apply copies an issue once (to change it), not once more for the reply and once for memory.
#[test]
fn a_checkout_and_its_release_stamp_the_move_in_the_one_issue_the_state_holds() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    let release = Command::Release {
        issue_id: "i1".into(),
    };
    let commands = [
        (
            Command::Checkout {
                issue_id: "i1".into(),
                agent_id: "a1".into(),
                expected_statuses: vec![IssueStatus::Todo],
            },
            IssueStatus::InProgress,
        ),
        (release, IssueStatus::Todo),
    ];
    for (command, status) in commands {
        let at = 1_000 * (w.index as i64 + 1);
        let outcome = w
            .run_at(at, agent_actor("a1", "c1", Some("r1")), command)
            .unwrap();
        let Outcome::Issue { issue, .. } = outcome else {
            panic!("unexpected {outcome:?}");
        };
        let held = w.state.issues.get("i1").unwrap();
        assert_eq!(
            (issue.status, issue.status_changed_at),
            (status, Some(Timestamp(at)))
        );
        assert!(
            std::ptr::eq(&*issue, &*held),
            "the outcome is a copy of the issue the state holds"
        );
    }
}

#[test]
fn checkout_refuses_unresolved_blockers_and_unexpected_status() {
    let mut w = World::new();
    w.issue("blocker", "c1", IssuePatch::default());
    w.issue(
        "i1",
        "c1",
        IssuePatch {
            blocked_by_issue_ids: Some(vec!["blocker".into()]),
            ..Default::default()
        },
    );
    w.issue(
        "i2",
        "c1",
        IssuePatch {
            status: Some(IssueStatus::InReview),
            ..Default::default()
        },
    );
    w.start_run("r1", "a1");
    assert!(
        matches!(w.checkout("i1", "a1", "r1"), Err(DomainError::Invariant { ref rule, .. }) if rule == "unresolved_blockers")
    );
    assert!(matches!(
        w.checkout("i2", "a1", "r1"),
        Err(DomainError::StatusConflict { .. })
    ));
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "blocker".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::Done),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(w.checkout("i1", "a1", "r1").is_ok());
}

#[test]
fn an_agent_checks_out_only_for_itself_and_needs_a_run() {
    let mut w = World::new();
    w.issue("i1", "c1", IssuePatch::default());
    w.start_run("r2", "a2");
    let as_other = w.run(
        agent_actor("a1", "c1", Some("r2")),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a2".into(),
            expected_statuses: vec![IssueStatus::Backlog],
        },
    );
    assert!(
        matches!(as_other, Err(DomainError::Forbidden { .. })),
        "{as_other:?}"
    );
    let no_run = w.run(
        agent_actor("a1", "c1", None),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a1".into(),
            expected_statuses: vec![IssueStatus::Backlog],
        },
    );
    assert!(
        matches!(no_run, Err(DomainError::Invalid { .. })),
        "{no_run:?}"
    );
}

#[test]
fn blocked_by_rejects_self_and_cycles() {
    let mut w = World::new();
    w.issue("x", "c1", IssuePatch::default());
    w.issue(
        "y",
        "c1",
        IssuePatch {
            blocked_by_issue_ids: Some(vec!["x".into()]),
            ..Default::default()
        },
    );
    w.issue(
        "z",
        "c1",
        IssuePatch {
            blocked_by_issue_ids: Some(vec!["y".into()]),
            ..Default::default()
        },
    );
    let before = w.fingerprint();
    let update = |ids: Vec<&str>| Command::UpdateIssue {
        issue_id: "x".into(),
        patch: IssuePatch {
            blocked_by_issue_ids: Some(ids.into_iter().map(String::from).collect()),
            ..Default::default()
        },
        comment: None,
    };
    assert!(
        matches!(w.run(admin(), update(vec!["x"])), Err(DomainError::Invariant { ref rule, .. }) if rule == "self_block")
    );
    assert!(
        matches!(w.run(admin(), update(vec!["z"])), Err(DomainError::Invariant { ref rule, .. }) if rule == "blocked_by_cycle")
    );
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn parent_chain_cannot_cycle() {
    let mut w = World::new();
    w.issue("p", "c1", IssuePatch::default());
    w.issue(
        "c",
        "c1",
        IssuePatch {
            parent_id: Some(Some("p".into())),
            ..Default::default()
        },
    );
    let r = w.run(
        admin(),
        Command::UpdateIssue {
            issue_id: "p".into(),
            patch: IssuePatch {
                parent_id: Some(Some("c".into())),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(
        matches!(r, Err(DomainError::Invariant { ref rule, .. }) if rule == "parent_cycle"),
        "{r:?}"
    );
}

#[test]
fn status_invariants_hold() {
    let mut w = World::new();
    w.issue("i1", "c1", IssuePatch::default());
    let r = w.run(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::InProgress),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(
        matches!(r, Err(DomainError::Invariant { ref rule, .. }) if rule == "in_progress_needs_assignee"),
        "{r:?}"
    );
    let r = w.run(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                assignee_agent_id: Some(Some("a1".into())),
                assignee_user_id: Some(Some("bob".into())),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(
        matches!(r, Err(DomainError::Invariant { ref rule, .. }) if rule == "single_assignee"),
        "{r:?}"
    );
}

#[test]
fn another_companys_objects_are_invisible() {
    let mut w = World::new();
    w.issue("foreign", "c2", IssuePatch::default());
    w.start_run("r1", "a1");
    let before = w.fingerprint();
    let r = w.run(
        agent_actor("a1", "c1", Some("r1")),
        Command::AddComment {
            issue_id: "foreign".into(),
            comment: NewComment {
                id: "cm".into(),
                body: "hi".into(),
            },
        },
    );
    assert!(matches!(r, Err(DomainError::NotFound { .. })), "{r:?}");
    let r = w.run(
        agent_actor("a1", "c1", Some("r1")),
        Command::CreateIssue {
            id: "n".into(),
            company_id: "c2".into(),
            fields: IssuePatch {
                title: Some("x".into()),
                ..Default::default()
            },
        },
    );
    assert!(matches!(r, Err(DomainError::NotFound { .. })), "{r:?}");
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn terminating_an_agent_cancels_its_runs_and_revokes_its_keys() {
    let mut w = World::new();
    w.todo_issue("i1");
    w.ok(
        admin(),
        Command::CreateCredential {
            id: "k1".into(),
            kind: CredentialKind::AgentKey,
            name: "key".into(),
            agent_id: Some("a1".into()),
            token_hash: "ab".repeat(32),
        },
    );
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").unwrap();
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a1".into(),
        },
    );
    assert_eq!(w.state.runs["r1"].status, RunStatus::Cancelled);
    assert!(w.state.issues["i1"].checkout.is_none());
    assert!(w.state.credentials["k1"].revoked);
    assert_eq!(w.state.agents["a1"].status, AgentStatus::Terminated);
}

#[test]
fn every_accepted_command_extends_the_activity_chain_and_refusals_do_not() {
    let mut w = World::new();
    let seq = w.state.activity_seq;
    w.issue("i1", "c1", IssuePatch::default());
    assert_eq!(w.state.activity_seq, seq + 1);
    let _ = w.run(
        admin(),
        Command::Release {
            issue_id: "missing".into(),
        },
    );
    assert_eq!(w.state.activity_seq, seq + 1);
}

#[test]
fn replicas_applying_the_same_entries_agree() {
    let a = World::new();
    let b = World::new();
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert_eq!(a.state.activity_head, b.state.activity_head);
}

#[test]
fn a_retried_keyed_write_is_applied_once() {
    let mut w = World::new();
    // Each copy of the request has its own minted id, as a retry through another node has.
    let env = |at: i64, id: &str| Envelope {
        request_id: None,
        at: Timestamp(at),
        actor: admin(),
        command: Command::CreateIssue {
            id: format!("id-{id}"),
            company_id: "c1".into(),
            fields: IssuePatch {
                title: Some("the same request".into()),
                ..Default::default()
            },
        },
        idempotency_key: Some("client-key-1".into()),
    };
    let first = w.state.apply(100, &env(10_000, "once"));
    let kept = remembered(&first);
    assert_eq!(
        kept.outcome, first.outcome,
        "the key's row keeps the outcome"
    );
    let seq = w.state.activity_seq;
    // A retry through another leader carries a new envelope (new ids) but the same key: its
    // answer is the first outcome, read from the key's row.
    let retry = w.state.apply(101, &env(11_000, "twice")).outcome.unwrap();
    assert_eq!(
        retry,
        Outcome::Repeated {
            key: kept.key,
            at: kept.at
        }
    );
    assert_eq!(w.state.activity_seq, seq);
    assert_eq!(w.state.issues.len(), 1);
    // Past the retention window the key is forgotten and the command applies anew.
    let later = 10_000 + crate::idempotency::RETENTION_MS + 1;
    assert!(w.state.apply(102, &env(later, "again")).outcome.is_ok());
    assert_eq!(w.state.issues.len(), 2);
}

#[test]
fn the_state_hash_tracks_every_change() {
    let mut a = World::new();
    let b = World::new();
    assert_eq!(a.state.hash(), b.state.hash());
    a.issue("i1", "c1", IssuePatch::default());
    assert_ne!(a.state.hash(), b.state.hash());
}

#[test]
fn comment_counts_follow_comments() {
    let mut w = World::new();
    w.issue("i1", "c1", IssuePatch::default());
    for n in 0..3 {
        w.ok(
            admin(),
            Command::AddComment {
                issue_id: "i1".into(),
                comment: NewComment {
                    id: format!("cm{n}"),
                    body: "x".into(),
                },
            },
        );
    }
    assert_eq!(w.state.comment_count("i1"), 3);
    assert_eq!(w.state.comment_count("nope"), 0);
}
