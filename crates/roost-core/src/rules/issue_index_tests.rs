//! The issue indexes that list reads walk (by company, by assignee) follow every change.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;

fn ids<'a>(issues: impl Iterator<Item = &'a str>) -> Vec<String> {
    issues.map(str::to_string).collect()
}

#[test]
fn lists_by_company_and_by_assignee_follow_creation_order_and_reassignment() {
    let mut w = World::new();
    for id in ["i1", "i2", "i3"] {
        assigned_issue(&mut w, id, "a1");
    }
    w.issue("other", "c2", IssuePatch::default());
    assert_eq!(ids(w.state.issue_ids_of_company("c1")), ["i1", "i2", "i3"]);
    assert_eq!(ids(w.state.issue_ids_of_company("c2")), ["other"]);
    w.issue(
        "child",
        "c1",
        IssuePatch {
            parent_id: Some(Some("i1".into())),
            ..Default::default()
        },
    );
    assert_eq!(ids(w.state.child_ids_of("i1")), ["child"]);
    assert!(w.state.child_ids_of("i2").next().is_none());

    // i2 moves to a2, i3 loses its assignee: a1's inbox follows.
    for (issue, assignee) in [("i2", Some("a2")), ("i3", None)] {
        w.ok(
            admin(),
            Command::UpdateIssue {
                issue_id: issue.into(),
                patch: IssuePatch {
                    assignee_agent_id: Some(assignee.map(str::to_string)),
                    ..Default::default()
                },
                comment: None,
            },
        );
    }
    assert_eq!(ids(w.state.issue_ids_assigned_to("a1")), ["i1"]);
    assert_eq!(ids(w.state.issue_ids_assigned_to("a2")), ["i2"]);
    assert_eq!(
        ids(w.state.issue_ids_of_company("c1")),
        ["i1", "i2", "i3", "child"]
    );

    // The indexes are derived: a state rebuilt from its rows has the same ones.
    let rows = crate::StateRows {
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(ids(rebuilt.issue_ids_assigned_to("a2")), ["i2"]);
    assert_eq!(
        ids(rebuilt.issue_ids_of_company("c1")),
        ["i1", "i2", "i3", "child"]
    );
    assert_eq!(ids(rebuilt.child_ids_of("i1")), ["child"]);
}

/// Regression (closing an issue cost a scan of every issue on every node, two for an issue
/// with a parent: at 10^6 issues each close walked all of them to find the issues waiting on it
/// and the parent's other children): the blocker index those walks now read follows every
/// change of `blockedByIssueIds`, the blocked issue's deletion, and a rebuild from rows.
#[test]
fn the_blocker_index_follows_every_change_so_closing_an_issue_scans_no_other_issue() {
    let mut w = World::new();
    for id in ["b1", "b2"] {
        w.issue(id, "c1", IssuePatch::default());
    }
    let blocked_by = |ids: &[&str]| IssuePatch {
        blocked_by_issue_ids: Some(ids.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    w.issue("d1", "c1", blocked_by(&["b1"]));
    w.issue("d2", "c1", blocked_by(&["b1", "b2"]));
    assert_eq!(ids(w.state.issue_ids_blocked_by("b1")), ["d1", "d2"]);
    assert_eq!(ids(w.state.issue_ids_blocked_by("b2")), ["d2"]);

    // d1 now waits on b2 instead; d2 is deleted.
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "d1".into(),
            patch: blocked_by(&["b2"]),
            comment: None,
        },
    );
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "d2".into(),
        },
    );
    assert!(w.state.issue_ids_blocked_by("b1").next().is_none());
    assert_eq!(ids(w.state.issue_ids_blocked_by("b2")), ["d1"]);

    // Deleting a blocker frees who waited on it, and its index entries go.
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "b2".into(),
        },
    );
    assert!(w.state.issues["d1"].blocked_by_issue_ids.is_empty());
    assert!(w.state.issue_ids_blocked_by("b2").next().is_none());

    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "d1".into(),
            patch: blocked_by(&["b1"]),
            comment: None,
        },
    );
    let rows = crate::StateRows {
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(ids(rebuilt.issue_ids_blocked_by("b1")), ["d1"]);
    assert_eq!(w.state.issues_blocked_by, rebuilt.issues_blocked_by);
}

/// Regression (a list of open work, an agent's inbox and the idle-heartbeat check walked every
/// issue the company or the agent ever had, closed ones too: at 10^6 closed issues a
/// `?status=in_progress` list walked all of them under the state's read lock): the open-issue
/// indexes they read hold exactly the open issues through closing, reopening, reassignment and
/// deletion, and a rebuild from rows.
#[test]
fn the_open_issue_indexes_hold_exactly_the_open_issues() {
    let mut w = World::new();
    for id in ["i1", "i2", "i3"] {
        assigned_issue(&mut w, id, "a1");
    }
    w.ok(admin(), status_update("i1", IssueStatus::Done));
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i3".into(),
            patch: IssuePatch {
                assignee_agent_id: Some(Some("a2".into())),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert_eq!(ids(w.state.open_issue_ids_of_company("c1")), ["i2", "i3"]);
    assert_eq!(ids(w.state.open_issue_ids_assigned_to("a1")), ["i2"]);
    assert_eq!(ids(w.state.open_issue_ids_assigned_to("a2")), ["i3"]);
    assert_eq!(ids(w.state.issue_ids_assigned_to("a1")), ["i1", "i2"]);

    // Reopened, cancelled, deleted.
    w.ok(admin(), status_update("i1", IssueStatus::Todo));
    w.ok(admin(), status_update("i2", IssueStatus::Cancelled));
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i3".into(),
        },
    );
    assert_eq!(ids(w.state.open_issue_ids_of_company("c1")), ["i1"]);
    assert_eq!(ids(w.state.open_issue_ids_assigned_to("a1")), ["i1"]);
    assert!(w.state.open_issue_ids_assigned_to("a2").next().is_none());

    let rows = crate::StateRows {
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(rebuilt.open_by_number, w.state.open_by_number);
    assert_eq!(rebuilt.open_by_assignee, w.state.open_by_assignee);
}

/// Regression (found in review): deleting an issue that was both the parent and a blocker of a
/// child wrote the child twice, the second row cloned with the parent still set, so the child
/// kept a parent that no longer existed.
#[test]
fn deleting_an_issue_that_is_parent_and_blocker_of_a_child_clears_both() {
    let mut w = World::new();
    w.issue("x", "c1", IssuePatch::default());
    w.issue(
        "child",
        "c1",
        IssuePatch {
            parent_id: Some(Some("x".into())),
            blocked_by_issue_ids: Some(vec!["x".into()]),
            ..Default::default()
        },
    );
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "x".into(),
        },
    );
    let child = &w.state.issues["child"];
    assert_eq!(child.parent_id, None);
    assert!(child.blocked_by_issue_ids.is_empty());
    assert!(w.state.child_ids_of("x").next().is_none());
}

/// Regression (deleting an issue walked every comment of every issue to find its own, on every
/// node: at 10^6 comments one delete held apply for the whole walk): the comment index it now
/// reads follows every comment, drops only the deleted issue's, and is rebuilt from rows.
#[test]
fn deleting_an_issue_drops_its_comments_from_the_index_and_no_other_issues() {
    let mut w = World::new();
    for id in ["i1", "i2"] {
        w.issue(id, "c1", IssuePatch::default());
    }
    comment(&mut w, admin(), "i1", "k1", "first");
    comment(&mut w, admin(), "i1", "k2", "second");
    comment(&mut w, admin(), "i2", "k3", "other");
    assert_eq!(w.state.comment_count("i1"), 2);
    assert_eq!(w.state.comment_count("i2"), 1);

    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert_eq!(w.state.comment_count("i1"), 0);
    assert_eq!(w.state.comment_count("i2"), 1);
    assert_eq!(
        w.state.comments.keys().collect::<Vec<_>>(),
        ["k3"],
        "the deleted issue's comments go, the other issue's stay"
    );

    let rows = crate::StateRows {
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        comments: w
            .state
            .comments
            .iter()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(rebuilt.comments_of_issue, w.state.comments_of_issue);
}

/// An identifier resolves through its company's prefix and its number (the identifier index
/// it had, one more entry per issue, is gone): every spelling that resolved before still does,
/// and only those.
#[test]
fn an_identifier_resolves_in_any_case_to_its_own_companys_issue_and_nothing_else_does() {
    let mut w = World::new();
    w.issue("a1", "c1", IssuePatch::default());
    w.issue("a2", "c1", IssuePatch::default());
    w.issue("o1", "c2", IssuePatch::default());
    let found = |s: &crate::State, r: &str| s.issue_by_ref(r).map(|i| i.id.clone());
    assert_eq!(found(&w.state, "ACM-2").as_deref(), Some("a2"));
    assert_eq!(found(&w.state, "acm-2").as_deref(), Some("a2"));
    assert_eq!(found(&w.state, "Oth-1").as_deref(), Some("o1"));
    assert_eq!(
        found(&w.state, "a1").as_deref(),
        Some("a1"),
        "an id resolves as itself"
    );
    for nothing in [
        "ACM-3", "ACM-02", "ACM-+2", "ACM-", "-2", "ACM2", "XYZ-1", "ACM-1-1", "",
    ] {
        assert_eq!(found(&w.state, nothing), None, "{nothing:?} names no issue");
    }

    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "a2".into(),
        },
    );
    assert_eq!(
        found(&w.state, "ACM-2"),
        None,
        "a deleted issue's identifier names nothing"
    );
    let rebuilt = crate::State::from_rows(crate::StateRows {
        companies: w.state.companies.values().cloned().collect(),
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        ..Default::default()
    });
    assert_eq!(found(&rebuilt, "acm-1").as_deref(), Some("a1"));
    assert_eq!(rebuilt.issues_by_number, w.state.issues_by_number);
}

/// Regression (deleting an issue walked every wake ever made to find those pending for it,
/// and terminating an agent walked every run ever made for its live ones, on every node): the
/// pending-wake and live-run indexes they read now give what the walks gave.
#[test]
fn deleting_an_issue_cancels_each_agents_pending_wake_for_it_and_no_other() {
    let mut w = world();
    for id in ["i1", "i2"] {
        w.issue(id, "c1", IssuePatch::default());
    }
    let wake = |id: &str, agent: &str, issue: &str| Command::Wakeup {
        id: id.into(),
        agent_id: agent.into(),
        issue_id: Some(issue.into()),
        reason: WakeReason::OnDemand,
        payload: serde_json::Value::Null,
        wake_key: None,
    };
    w.ok(admin(), wake("wa1", "a1", "i1"));
    w.ok(admin(), wake("wa2", "a2", "i1"));
    w.ok(admin(), wake("wb1", "a1", "i2"));
    let mut for_i1: Vec<&str> = (w.state.pending_wakes_for_issue("i1"))
        .map(|x| x.id.as_str())
        .collect();
    for_i1.sort_unstable();
    assert_eq!(for_i1, ["wa1", "wa2"]);

    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    let status = |id: &str| {
        (
            w.state.wakes[id].status,
            w.state.wakes[id].status_reason.clone(),
        )
    };
    for id in ["wa1", "wa2"] {
        assert_eq!(
            status(id),
            (WakeStatus::Cancelled, Some("issue_deleted".into()))
        );
    }
    assert!(
        w.state.wakes["wb1"].status.is_pending(),
        "another issue's wake stays"
    );
    assert!(w.state.pending_wakes_for_issue("i1").next().is_none());

    // Two pending wakes of one agent for one issue (one command can leave two, and rows from
    // before may hold them): the index of one pending wake per agent and issue names only one,
    // and deleting the issue still cancels both (found in review).
    let mut second = w.state.wakes["wb1"].clone();
    second.id = "wb2".into();
    w.state.put_wake(second);
    let both: Vec<&str> = (w.state.pending_wakes_for_issue("i2"))
        .map(|x| x.id.as_str())
        .collect();
    assert_eq!(both, ["wb1", "wb2"]);
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i2".into(),
        },
    );
    for id in ["wb1", "wb2"] {
        assert_eq!(w.state.wakes[id].status, WakeStatus::Cancelled, "{id}");
    }
}
