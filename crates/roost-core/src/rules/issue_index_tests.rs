//! The issue indexes that list reads walk (by company, by assignee) follow every change.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;

fn ids<'a>(issues: impl Iterator<Item = &'a Issue>) -> Vec<String> {
    issues.map(|i| i.id.clone()).collect()
}

#[test]
fn lists_by_company_and_by_assignee_follow_creation_order_and_reassignment() {
    let mut w = World::new();
    for id in ["i1", "i2", "i3"] {
        assigned_issue(&mut w, id, "a1");
    }
    w.issue("other", "c2", IssuePatch::default());
    assert_eq!(ids(w.state.issues_of_company("c1")), ["i1", "i2", "i3"]);
    assert_eq!(ids(w.state.issues_of_company("c2")), ["other"]);
    w.issue(
        "child",
        "c1",
        IssuePatch {
            parent_id: Some(Some("i1".into())),
            ..Default::default()
        },
    );
    assert_eq!(ids(w.state.children_of("i1")), ["child"]);
    assert!(w.state.children_of("i2").next().is_none());

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
    assert_eq!(ids(w.state.issues_assigned_to("a1")), ["i1"]);
    assert_eq!(ids(w.state.issues_assigned_to("a2")), ["i2"]);
    assert_eq!(
        ids(w.state.issues_of_company("c1")),
        ["i1", "i2", "i3", "child"]
    );

    // The indexes are derived: a state rebuilt from its rows has the same ones.
    let rows = crate::StateRows {
        issues: w.state.issues.values().cloned().collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(ids(rebuilt.issues_assigned_to("a2")), ["i2"]);
    assert_eq!(
        ids(rebuilt.issues_of_company("c1")),
        ["i1", "i2", "i3", "child"]
    );
    assert_eq!(ids(rebuilt.children_of("i1")), ["child"]);
}
