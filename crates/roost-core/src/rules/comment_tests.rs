//! Deleting a comment: a tombstone that names who deleted it and when, once, on the comment's
//! own issue and company only, fenced for runs.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::state::{Change, CommentRef};
use crate::time::Timestamp;

fn delete(issue: &str, comment: &str) -> Command {
    Command::DeleteComment {
        issue_id: issue.into(),
        comment_id: comment.into(),
    }
}

fn deleted(w: &World, comment: &str) -> bool {
    w.state.comments.get(comment).expect("comment").deleted
}

#[test]
fn a_deleted_comment_is_marked_and_its_tombstone_names_who_deleted_it_and_when() {
    let mut w = world();
    w.todo_issue("i1");
    comment(
        &mut w,
        agent_actor("a1", "c1", None),
        "i1",
        "cm1",
        "secret plan",
    );
    comment(&mut w, admin(), "i1", "cm2", "keep me");

    let applied = w.applied_at(7_000, agent_actor("a1", "c1", None), delete("i1", "cm1"));
    match applied.outcome {
        Ok(Outcome::Issue { issue, comment }) => {
            assert_eq!(issue.id, "i1");
            assert!(comment.is_none());
        }
        other => panic!("unexpected {other:?}"),
    }
    let tombstones: Vec<&CommentTombstone> = applied
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::CommentTombstoned(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        tombstones,
        [&CommentTombstone {
            comment_id: "cm1".into(),
            issue_id: "i1".into(),
            deleted_at: Timestamp(7_000),
            deleted_by_type: ActorKind::Agent,
            deleted_by_agent_id: Some("a1".into()),
            deleted_by_user_id: None,
            deleted_by_run_id: None,
        }]
    );
    assert!(deleted(&w, "cm1"));
    assert!(!deleted(&w, "cm2"), "only the named comment");

    // What the store writes: the body emptied, the author and time kept.
    let mut row = Comment {
        id: "cm1".into(),
        company_id: "c1".into(),
        issue_id: "i1".into(),
        body: "secret plan".into(),
        author_agent_id: Some("a1".into()),
        created_at: Timestamp(3_000),
        ..Default::default()
    };
    tombstones[0].apply_to(&mut row);
    assert_eq!(row.body, "");
    assert_eq!(row.author_agent_id.as_deref(), Some("a1"));
    assert_eq!(row.created_at, Timestamp(3_000));
    assert_eq!(row.deleted_at, Some(Timestamp(7_000)));
    assert_eq!(row.deleted_by_type, Some(ActorKind::Agent));

    // An administrator's deletion names the person.
    let applied = w.applied(admin(), delete("i1", "cm2"));
    assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
    assert!(applied.changes.iter().any(|c| matches!(c,
        Change::CommentTombstoned(t) if t.deleted_by_type == ActorKind::User
            && t.deleted_by_user_id.as_deref() == Some("admin")
            && t.deleted_by_agent_id.is_none())));
}

#[test]
fn a_comment_is_deleted_once_and_only_through_its_own_issue_and_company() {
    let mut w = world();
    w.todo_issue("i1");
    w.todo_issue("i2");
    comment(&mut w, agent_actor("a1", "c1", None), "i1", "cm1", "hello");
    let before = w.fingerprint();
    let comments_before = w.state.comments.clone();
    for (actor, issue, comment, code) in [
        // Through another issue of the company.
        (agent_actor("a1", "c1", None), "i2", "cm1", "not_found"),
        // No such comment, no such issue.
        (agent_actor("a1", "c1", None), "i1", "cm9", "not_found"),
        (agent_actor("a1", "c1", None), "i9", "cm1", "not_found"),
        // An agent of another company.
        (agent_actor("b1", "c2", None), "i1", "cm1", "not_found"),
    ] {
        let err = w.run(actor, delete(issue, comment)).unwrap_err();
        assert_eq!(err.code(), code, "{issue}/{comment}: {err}");
        assert_eq!(w.fingerprint(), before);
        assert_eq!(w.state.comments, comments_before);
    }
    w.ok(agent_actor("a1", "c1", None), delete("i1", "cm1"));
    // A second deletion (one that lost a race) finds nothing to delete, as Paperclip's does.
    let err = w
        .run(agent_actor("a1", "c1", None), delete("i1", "cm1"))
        .unwrap_err();
    assert_eq!(err.code(), "not_found", "{err}");
}

#[test]
fn a_runs_deletion_of_a_comment_is_fenced_once_the_run_ended() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    comment(
        &mut w,
        agent_actor("a1", "c1", Some("r1")),
        "i1",
        "cm1",
        "from the run",
    );
    finish(&mut w, "r1");
    let err = w
        .run(agent_actor("a1", "c1", Some("r1")), delete("i1", "cm1"))
        .unwrap_err();
    assert_eq!(err.code(), "stale_run", "{err}");
    assert!(!deleted(&w, "cm1"));
}

#[test]
fn a_live_comment_digests_as_it_did_before_deletion_existed() {
    let live = CommentRef {
        issue_id: "i1".into(),
        company_id: "c1".into(),
        deleted: false,
    };
    assert_eq!(
        serde_json::to_value(&live).expect("json"),
        serde_json::json!({ "issue_id": "i1", "company_id": "c1" })
    );
    let gone = CommentRef {
        deleted: true,
        ..live
    };
    assert_eq!(
        serde_json::to_value(&gone).expect("json")["deleted"],
        serde_json::json!(true)
    );
}

#[test]
fn a_pending_wake_lets_go_of_a_deleted_comment_and_still_runs() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    comment(&mut w, admin(), "i1", "cm1", "first thought");
    comment(&mut w, admin(), "i1", "cm2", "second thought");
    let before: Vec<(String, Vec<String>)> = pending(&w, "a1")
        .iter()
        .map(|x| (x.id.clone(), x.comment_ids.clone()))
        .collect();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].1, ["cm1", "cm2"]);
    w.ok(admin(), delete("i1", "cm2"));
    let after: Vec<(String, Vec<String>)> = pending(&w, "a1")
        .iter()
        .map(|x| (x.id.clone(), x.comment_ids.clone()))
        .collect();
    assert_eq!(after, [(before[0].0.clone(), vec!["cm1".to_string()])]);
}
