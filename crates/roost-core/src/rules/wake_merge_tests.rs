//! Regression tests for wakes one command raises more than once: every event of the command
//! lands in one pending wake per agent and issue, under ids of its own, the same on a replica
//! that rebuilt its indexes from rows.

use crate::command::*;
use crate::entity::*;
use crate::state::{State, StateRows};

use super::test_world::*;

/// A replica's state rebuilt from the wake and issue rows of `w`, as a node restarting loads it.
fn rebuilt(w: &World) -> State {
    State::from_rows(StateRows {
        companies: w.state.companies.values().cloned().collect(),
        agents: w.state.agents.values().cloned().collect(),
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        wakes: w.state.wakes.values().cloned().collect(),
        ..Default::default()
    })
}

/// The pending wake of `agent` for `issue` as the index names it, on the running state and on a
/// rebuilt one: the two must agree, or later merges diverge between replicas.
fn indexed_pending(w: &World, agent: &str, issue: &str) -> Option<String> {
    let running = w
        .state
        .pending_wake(agent, Some(issue))
        .map(|x| x.id.clone());
    let reloaded = rebuilt(w);
    let loaded = reloaded
        .pending_wake(agent, Some(issue))
        .map(|x| x.id.clone());
    assert_eq!(
        running, loaded,
        "running and rebuilt replicas name one wake"
    );
    running
}

/// Bug: the assignee's comment wake merged into its pending wake, and the scan for a wake to
/// merge into then stopped at that merged (not pending) record, so the same comment's @mention
/// of the assignee made a second pending wake for one agent and issue. The running node's index
/// named the later, a node rebuilt from rows the greater id, and replicas diverged after.
#[test]
fn a_comment_mentioning_an_assignee_with_a_pending_wake_leaves_one_pending_wake() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    assert_eq!(pending(&w, "a1").len(), 1, "the assignment wake waits");
    comment(&mut w, admin(), "i1", "cm1", "@a1 please look again");
    comment(&mut w, admin(), "i1", "cm2", "and @a1 once more");
    let waiting = pending(&w, "a1");
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(
        waiting[0].count, 5,
        "assignment, two comments, two mentions"
    );
    assert_eq!(waiting[0].comment_ids, vec!["cm1", "cm1", "cm2", "cm2"]);
    assert_eq!(
        indexed_pending(&w, "a1", "i1").as_deref(),
        Some(waiting[0].id.as_str())
    );
    let merged = wakes_of(&w, "a1")
        .into_iter()
        .filter(|x| x.status == WakeStatus::Coalesced)
        .count();
    assert_eq!(merged, 4);
}

/// Bug: closing an issue with a comment numbered the comment's wakes from 1, then its parent's
/// wakes from 1 again, so the parent's assignee's wake took the id of the mentioned agent's and
/// overwrote it: the mentioned agent was never woken.
#[test]
fn closing_an_issue_with_a_mention_wakes_the_mentioned_agent_and_the_parents_assignee() {
    let mut w = world();
    parent_with_child(&mut w);
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "k1".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::Done),
                ..Default::default()
            },
            comment: Some(NewComment {
                id: "cm1".into(),
                body: "done; @a2 please check it".into(),
            }),
        },
    );
    let a1 = pending(&w, "a1");
    let a2 = pending(&w, "a2");
    assert_eq!(a1.len(), 1, "{a1:#?}");
    assert_eq!(a2.len(), 1, "{a2:#?}");
    assert_eq!(
        (a1[0].reason, a1[0].issue_id.as_deref()),
        (WakeReason::IssueChildrenCompleted, Some("parent"))
    );
    assert_eq!(
        (a2[0].reason, a2[0].issue_id.as_deref()),
        (WakeReason::IssueCommentMentioned, Some("k1"))
    );
    assert_ne!(a1[0].id, a2[0].id);
}

/// Bug: a child that also blocked its parent woke the parent's assignee twice in one command
/// under one id, and the second merged into the first, which was itself: the one wake ended
/// coalesced into itself and the parent's assignee never ran.
#[test]
fn closing_a_child_that_also_blocks_its_parent_wakes_the_parents_assignee_once() {
    let mut w = world();
    parent_with_child(&mut w);
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "parent".into(),
            patch: IssuePatch {
                blocked_by_issue_ids: Some(vec!["k1".into()]),
                ..Default::default()
            },
            comment: None,
        },
    );
    w.ok(admin(), status_update("k1", IssueStatus::Done));
    let a1 = pending(&w, "a1");
    assert_eq!(a1.len(), 1, "{a1:#?}");
    assert_eq!(
        (a1[0].reason, a1[0].count, a1[0].coalesced_into.as_deref()),
        (WakeReason::IssueChildrenCompleted, 2, None)
    );
    assert!(wakes_of(&w, "a1")
        .iter()
        .all(|x| x.coalesced_into.as_deref() != Some(x.id.as_str())));
    assert_eq!(
        indexed_pending(&w, "a1", "parent").as_deref(),
        Some(a1[0].id.as_str())
    );
}

/// One command may wake the assignees of thousands of dependents. Each wake gets the next id
/// after the greatest the command has used, found in one pass (the first fix searched from 1
/// for every wake, a cost that grew with the cube of the dependents).
#[test]
fn closing_a_blocker_of_many_issues_wakes_each_under_its_own_id() {
    let mut w = world();
    w.issue("k1", "c1", IssuePatch::default());
    for n in 0..300 {
        w.issue(
            &format!("d{n}"),
            "c1",
            IssuePatch {
                blocked_by_issue_ids: Some(vec!["k1".into()]),
                assignee_agent_id: Some(Some("a2".into())),
                status: Some(IssueStatus::Backlog),
                ..Default::default()
            },
        );
    }
    w.ok(admin(), status_update("k1", IssueStatus::Done));
    let woken = pending(&w, "a2");
    assert_eq!(woken.len(), 300);
    let ids: std::collections::BTreeSet<&str> = woken.iter().map(|x| x.id.as_str()).collect();
    let issues: std::collections::BTreeSet<_> =
        woken.iter().map(|x| x.issue_id.as_deref()).collect();
    assert_eq!((ids.len(), issues.len()), (300, 300));
    assert!(woken
        .iter()
        .all(|x| x.reason == WakeReason::IssueBlockersResolved));
}
