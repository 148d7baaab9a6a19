//! Editing a company (its status stops and restarts runs) and deleting an issue (everything
//! that named it is let go, and a live run's issue cannot be deleted under it).

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::state_hash::RowDigests;

fn set_company_status(w: &mut World, status: CompanyStatus) -> Company {
    match w.ok(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                status: Some(status),
                ..Default::default()
            },
        },
    ) {
        Outcome::Company(c) => c,
        other => panic!("unexpected {other:?}"),
    }
}

fn wake(w: &mut World, id: &str, agent: &str) -> Wake {
    match w.ok(
        admin(),
        Command::Wakeup {
            id: id.into(),
            agent_id: agent.into(),
            issue_id: None,
            reason: WakeReason::OnDemand,
            payload: serde_json::Value::Null,
            wake_key: None,
        },
    ) {
        Outcome::Wake(wake) => wake,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_company_update_changes_only_the_fields_it_names() {
    let mut w = world();
    let company = match w.ok(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                name: Some("  Acme Robotics ".into()),
                description: Some(Some("makes robots".into())),
                require_board_approval_for_new_agents: Some(true),
                ..Default::default()
            },
        },
    ) {
        Outcome::Company(c) => c,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(company.name, "Acme Robotics");
    assert_eq!(company.description.as_deref(), Some("makes robots"));
    assert!(company.require_board_approval_for_new_agents);
    assert_eq!(company.status, CompanyStatus::Active);
    assert_eq!(company.issue_prefix, "ACM");
    // A null description clears it; the rest stays.
    w.ok(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                description: Some(None),
                ..Default::default()
            },
        },
    );
    let stored = &w.state.companies["c1"];
    assert_eq!(stored.description, None);
    assert_eq!(stored.name, "Acme Robotics");
}

#[test]
fn only_an_administrator_of_the_company_may_change_it() {
    let mut w = world();
    let before = w.fingerprint();
    let patch = CompanyPatch {
        name: Some("mine".into()),
        ..Default::default()
    };
    let by_agent = w.run(
        agent_actor("a1", "c1", None),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: patch.clone(),
        },
    );
    assert!(
        matches!(by_agent, Err(DomainError::Forbidden { .. })),
        "{by_agent:?}"
    );
    let mut other_admin = admin();
    other_admin.company_id = Some("c2".into());
    let across = w.run(
        other_admin,
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: patch.clone(),
        },
    );
    assert!(
        matches!(across, Err(DomainError::NotFound { .. })),
        "{across:?}"
    );
    let blank = w.run(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                name: Some("   ".into()),
                ..Default::default()
            },
        },
    );
    assert!(
        matches!(blank, Err(DomainError::Invalid { .. })),
        "{blank:?}"
    );
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn a_paused_company_skips_new_wakes_holds_queued_ones_and_starts_no_run_until_active() {
    let mut w = world();
    let queued = wake(&mut w, "wk-before", "a1");
    assert_eq!(queued.status, WakeStatus::Queued);
    set_company_status(&mut w, CompanyStatus::Paused);
    let skipped = wake(&mut w, "wk-during", "a2");
    assert_eq!(skipped.status, WakeStatus::Skipped);
    assert_eq!(skipped.status_reason.as_deref(), Some("company_paused"));
    let blocker = super::run::claim_blocker(&w.state, &w.state.wakes["wk-before"]);
    assert_eq!(blocker.as_deref(), Some("company paused"));
    let start = w.run(
        admin(),
        Command::StartRun {
            id: "r1".into(),
            agent_id: "a1".into(),
            issue_id: None,
            invocation_source: "on_demand".into(),
        },
    );
    assert!(
        matches!(start, Err(DomainError::Conflict { .. })),
        "{start:?}"
    );
    // The other company is not affected.
    assert_eq!(wake(&mut w, "wk-other", "b1").status, WakeStatus::Queued);

    set_company_status(&mut w, CompanyStatus::Active);
    assert_eq!(
        super::run::claim_blocker(&w.state, &w.state.wakes["wk-before"]),
        None
    );
    let run = claim(&mut w, "a1", "r2").expect("claimed once active again");
    assert_eq!(run.agent_id, "a1");
}

#[test]
fn an_archived_company_starts_nothing() {
    let mut w = world();
    set_company_status(&mut w, CompanyStatus::Archived);
    let skipped = wake(&mut w, "wk1", "a1");
    assert_eq!(skipped.status_reason.as_deref(), Some("company_archived"));
}

#[test]
fn deleting_an_issue_lets_go_of_everything_that_named_it() {
    let mut w = world();
    let parent = assigned_issue(&mut w, "i1", "a1");
    w.issue(
        "i2",
        "c1",
        IssuePatch {
            parent_id: Some(Some("i1".into())),
            ..Default::default()
        },
    );
    w.issue(
        "i3",
        "c1",
        IssuePatch {
            blocked_by_issue_ids: Some(vec!["i1".into()]),
            ..Default::default()
        },
    );
    comment(&mut w, admin(), "i1", "cm1", "first");
    comment(&mut w, admin(), "i1", "cm2", "second");
    assert!(
        !pending(&w, "a1").is_empty(),
        "the assignment queued a wake"
    );
    let open_before = w.state.open_issue_count("c1");

    let deleted = match w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    ) {
        Outcome::Issue { issue, .. } => issue,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(deleted.identifier, parent.identifier);
    assert!(!w.state.issues.contains_key("i1"));
    assert_eq!(
        w.state
            .issue_by_ref(&parent.identifier)
            .map(|i| i.id.clone()),
        None
    );
    assert_eq!(w.state.comment_count("i1"), 0);
    assert!(!w.state.comments.contains_key("cm1"));
    assert!(!w.state.comments.contains_key("cm2"));
    assert_eq!(w.state.issues["i2"].parent_id, None);
    assert_eq!(w.state.children_of("i1").count(), 0);
    assert!(w.state.issues["i3"].blocked_by_issue_ids.is_empty());
    assert!(pending(&w, "a1").is_empty(), "its wake is cancelled");
    assert!(w
        .state
        .wakes
        .values()
        .any(|x| x.status == WakeStatus::Cancelled
            && x.status_reason.as_deref() == Some("issue_deleted")));
    assert_eq!(w.state.open_issue_count("c1"), open_before - 1);
    assert_eq!(w.state.issue_ids_assigned_to("a1").count(), 0);
    // Gone means gone: a second delete, an update and a comment are not found.
    let again = w.run(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(
        matches!(again, Err(DomainError::NotFound { .. })),
        "{again:?}"
    );
    // The next issue does not reuse its number.
    let next = w.issue("i4", "c1", IssuePatch::default());
    assert!(next.issue_number > parent.issue_number);
    // The incremental state digest saw every removed row.
    let mut fresh = w.state.clone();
    fresh.row_digests = RowDigests::default();
    assert_eq!(w.state.hash(), fresh.hash());
}

#[test]
fn an_issue_a_live_run_works_on_cannot_be_deleted_and_agents_cannot_delete() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").expect("claim");
    w.checkout("i1", "a1", &run.id).expect("checkout");
    let before = w.fingerprint();
    let held = w.run(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    match held {
        Err(DomainError::Conflict { message }) => {
            assert!(message.contains("force-release"), "{message}")
        }
        other => panic!("unexpected {other:?}"),
    }
    let by_agent = w.run(
        agent_actor("a1", "c1", Some(&run.id)),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(
        matches!(by_agent, Err(DomainError::Forbidden { .. })),
        "{by_agent:?}"
    );
    assert_eq!(w.fingerprint(), before);
    finish(&mut w, &run.id);
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(!w.state.issues.contains_key("i1"));
}
