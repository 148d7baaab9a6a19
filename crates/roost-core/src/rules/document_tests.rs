//! Issue documents: revisions guarded by `baseRevisionId`, locks, restores, who may write,
//! and a deleted issue taking its documents with it.

use super::test_world::*;
use crate::command::*;
use crate::document::*;
use crate::state::Change;
use crate::DomainError;

fn text(body: &str) -> DocumentText {
    DocumentText {
        title: Some("Plan".into()),
        format: MARKDOWN.into(),
        body: body.into(),
    }
}

fn put_op(doc: &str, rev: &str, body: &str, base: Option<&str>) -> DocumentOp {
    DocumentOp::Put {
        document_id: doc.into(),
        revision_id: rev.into(),
        text: text(body),
        change_summary: None,
        base_revision_id: base.map(str::to_string),
    }
}

fn on(issue: &str, key: &str, op: DocumentOp) -> Command {
    Command::IssueDocument {
        issue_id: issue.into(),
        key: key.into(),
        op,
    }
}

fn doc_of(outcome: Outcome) -> (IssueDocument, Option<String>, bool, Option<String>) {
    match outcome {
        Outcome::IssueDocument {
            document,
            body,
            created,
            redirected_from,
        } => (document, body, created, redirected_from),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_put_creates_revision_one_and_an_update_must_name_the_latest_revision() {
    let mut w = world();
    w.todo_issue("i1");
    let (doc, body, created, _) = doc_of(w.ok(
        admin(),
        on("i1", "plan", put_op("d1", "r1", "# Plan", None)),
    ));
    assert!(created);
    assert_eq!(body.as_deref(), Some("# Plan"));
    assert_eq!(
        (doc.latest_revision_id.as_str(), doc.latest_revision_number),
        ("r1", 1)
    );
    assert_eq!(doc.created_by_user_id.as_deref(), Some("admin"));

    // No base: refused, naming the revision to send.
    let err = w
        .run(admin(), on("i1", "plan", put_op("d2", "r2", "v2", None)))
        .unwrap_err();
    assert!(
        matches!(&err, DomainError::Conflict { message } if message.contains("r1")),
        "{err:?}"
    );
    // The latest revision as base: revision two.
    let (doc, _, created, _) = doc_of(w.ok(
        admin(),
        on("i1", "plan", put_op("d2", "r2", "v2", Some("r1"))),
    ));
    assert!(!created);
    assert_eq!(
        (doc.latest_revision_id.as_str(), doc.latest_revision_number),
        ("r2", 2)
    );
    // A stale base: refused, nothing written.
    let err = w
        .run(
            admin(),
            on("i1", "plan", put_op("d3", "r3", "v3 from r1", Some("r1"))),
        )
        .unwrap_err();
    assert!(
        matches!(&err, DomainError::Conflict { message } if message.contains("updated by someone else"))
    );
    let doc = w.state.documents.get("i1", "plan").expect("kept");
    assert_eq!(
        (doc.latest_revision_id.as_str(), doc.latest_revision_number),
        ("r2", 2)
    );
    assert_eq!(doc.id, "d1", "an update keeps the document's id");

    // A base on a key that has no document yet is refused too.
    let err = w
        .run(
            admin(),
            on("i1", "notes", put_op("d4", "r4", "x", Some("r1"))),
        )
        .unwrap_err();
    assert!(
        matches!(&err, DomainError::Conflict { message } if message.contains("does not exist yet"))
    );
}

#[test]
fn a_revision_is_written_to_the_store_but_not_kept_in_memory() {
    let mut w = world();
    w.todo_issue("i1");
    let applied = w.applied(
        admin(),
        on("i1", "plan", put_op("d1", "r1", "the body", None)),
    );
    let revision = applied.changes.iter().find_map(|c| match c {
        Change::Document(DocumentChange::Revision(r)) => Some(r),
        _ => None,
    });
    let revision = revision.expect("a revision row");
    assert_eq!(
        (revision.body.as_str(), revision.revision_number),
        ("the body", 1)
    );
    let in_memory = format!("{:?}", w.state.documents.documents);
    assert!(
        !in_memory.contains("the body"),
        "memory keeps no body: {in_memory}"
    );
}

#[test]
fn keys_are_checked_and_another_companys_issue_is_not_found() {
    let mut w = world();
    w.todo_issue("i1");
    w.issue("o1", "c2", Default::default());
    let err = w
        .run(admin(), on("i1", "Plan", put_op("d1", "r1", "x", None)))
        .unwrap_err();
    assert!(matches!(err, DomainError::Invalid { ref field, .. } if field == "key"));
    w.start_run("rb", "b1");
    let err = w
        .run(
            agent_actor("b1", "c2", Some("rb")),
            on("i1", "plan", put_op("d1", "r1", "x", None)),
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");
    assert!(w.state.documents.documents.is_empty());
}

#[test]
fn an_agent_writes_from_its_live_run_and_not_over_another_runs_checkout() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("ra1", "a1");
    w.start_run("ra2", "a2");
    w.checkout("i1", "a1", "ra1").expect("a1 holds i1");
    let err = w
        .run(
            agent_actor("a2", "c1", Some("ra2")),
            on("i1", "plan", put_op("d1", "r1", "x", None)),
        )
        .unwrap_err();
    assert!(
        matches!(err, DomainError::CheckoutConflict { .. }),
        "{err:?}"
    );
    let (doc, ..) = doc_of(w.ok(
        agent_actor("a1", "c1", Some("ra1")),
        on("i1", "plan", put_op("d1", "r1", "x", None)),
    ));
    assert_eq!(doc.created_by_agent_id.as_deref(), Some("a1"));
    finish(&mut w, "ra1");
    let err = w
        .run(
            agent_actor("a1", "c1", Some("ra1")),
            on("i1", "plan", put_op("d2", "r2", "y", Some("r1"))),
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::StaleRun { .. }), "{err:?}");
}

#[test]
fn a_locked_document_sends_an_agents_write_beside_it_and_refuses_anyone_elses() {
    let mut w = world();
    w.todo_issue("i1");
    w.ok(admin(), on("i1", "plan", put_op("d1", "r1", "v1", None)));
    w.start_run("ra1", "a1");
    let agent = agent_actor("a1", "c1", Some("ra1"));
    let err = w
        .run(agent.clone(), on("i1", "plan", DocumentOp::Lock))
        .unwrap_err();
    assert!(
        matches!(err, DomainError::Forbidden { .. }),
        "only an administrator locks"
    );
    let (locked, ..) = doc_of(w.ok(admin(), on("i1", "plan", DocumentOp::Lock)));
    assert!(locked.locked_at.is_some());
    assert_eq!(locked.locked_by_user_id.as_deref(), Some("admin"));

    let (beside, _, created, from) = doc_of(w.ok(
        agent.clone(),
        on("i1", "plan", put_op("d2", "r2", "agent's", Some("r1"))),
    ));
    assert!(created);
    assert_eq!(
        (beside.key.as_str(), from.as_deref()),
        ("plan-2", Some("plan"))
    );
    let (again, ..) = doc_of(w.ok(agent, on("i1", "plan", put_op("d3", "r3", "again", None))));
    assert_eq!(again.key, "plan-3");
    assert_eq!(
        w.state
            .documents
            .get("i1", "plan")
            .map(|d| d.latest_revision_number),
        Some(1)
    );

    let err = w
        .run(
            admin(),
            on("i1", "plan", put_op("d4", "r4", "x", Some("r1"))),
        )
        .unwrap_err();
    assert!(matches!(&err, DomainError::Conflict { message } if message.contains("unlock")));
    let err = w
        .run(admin(), on("i1", "plan", DocumentOp::Delete))
        .unwrap_err();
    assert!(
        matches!(err, DomainError::Conflict { .. }),
        "a locked document is not deleted"
    );
    let (unlocked, ..) = doc_of(w.ok(admin(), on("i1", "plan", DocumentOp::Unlock)));
    assert_eq!(unlocked.locked_at, None);
    doc_of(w.ok(
        admin(),
        on("i1", "plan", put_op("d4", "r4", "x", Some("r1"))),
    ));
}

#[test]
fn a_restore_saves_an_earlier_revision_as_the_newest() {
    let mut w = world();
    w.todo_issue("i1");
    w.ok(admin(), on("i1", "plan", put_op("d1", "r1", "v1", None)));
    w.ok(
        admin(),
        on("i1", "plan", put_op("d1", "r2", "v2", Some("r1"))),
    );
    let restore = |from: &str, number: u64, rev: &str| {
        on(
            "i1",
            "plan",
            DocumentOp::Restore {
                document_id: "d1".into(),
                from_revision_id: from.into(),
                from_revision_number: number,
                revision_id: rev.into(),
                text: text("v1"),
            },
        )
    };
    let err = w.run(admin(), restore("r2", 2, "r3")).unwrap_err();
    assert!(
        matches!(err, DomainError::Conflict { .. }),
        "the latest is not restored"
    );
    let err = w.run(admin(), restore("later", 5, "r3")).unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }), "{err:?}");
    let err = w.run(admin(), restore("none", 0, "r3")).unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");
    let applied = w.applied(admin(), restore("r1", 1, "r3"));
    let (doc, body, created, _) = doc_of(applied.outcome.clone().expect("restored"));
    assert!(!created);
    assert_eq!(
        (doc.latest_revision_number, body.as_deref()),
        (3, Some("v1"))
    );
    let summary = applied.changes.iter().find_map(|c| match c {
        Change::Document(DocumentChange::Revision(r)) => r.change_summary.clone(),
        _ => None,
    });
    assert_eq!(summary.as_deref(), Some("Restored from revision 1"));
}

#[test]
fn deleting_a_document_or_its_issue_removes_it() {
    let mut w = world();
    w.todo_issue("i1");
    w.ok(admin(), on("i1", "plan", put_op("d1", "r1", "v1", None)));
    w.ok(admin(), on("i1", "notes", put_op("d2", "r2", "n", None)));
    w.start_run("ra1", "a1");
    let err = w
        .run(
            agent_actor("a1", "c1", Some("ra1")),
            on("i1", "notes", DocumentOp::Delete),
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }));
    w.ok(admin(), on("i1", "notes", DocumentOp::Delete));
    assert_eq!(w.state.documents.of_issue("i1").count(), 1);
    let err = w
        .run(admin(), on("i1", "notes", DocumentOp::Delete))
        .unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }));

    let applied = w.applied(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(applied.outcome.is_ok());
    assert!(applied
        .changes
        .iter()
        .any(|c| *c == Change::Document(DocumentChange::Deleted("d1".into()))));
    assert!(w.state.documents.documents.is_empty());
}

#[test]
fn documents_survive_a_reload_from_rows_with_the_same_hash() {
    let mut w = world();
    w.todo_issue("i1");
    let before = w.state.hash();
    w.ok(admin(), on("i1", "plan", put_op("d1", "r1", "v1", None)));
    w.ok(admin(), on("i1", "plan", DocumentOp::Lock));
    assert_ne!(before, w.state.hash(), "documents are in the state hash");
    let reloaded = super::memory_tests::reloaded(&w.state);
    assert_eq!(
        reloaded.documents.get("i1", "plan"),
        w.state.documents.get("i1", "plan")
    );
    assert_eq!(reloaded.hash(), w.state.hash());
}

/// A revision read from a document that was deleted and made again under the same key is not
/// restored into the new one.
#[test]
fn a_restore_names_its_document_and_a_new_document_under_the_same_key_refuses_it() {
    let mut w = world();
    w.todo_issue("i1");
    w.ok(
        admin(),
        on("i1", "plan", put_op("d1", "r1", "old v1", None)),
    );
    w.ok(
        admin(),
        on("i1", "plan", put_op("d1", "r2", "old v2", Some("r1"))),
    );
    w.ok(admin(), on("i1", "plan", DocumentOp::Delete));
    w.ok(
        admin(),
        on("i1", "plan", put_op("d2", "s1", "new v1", None)),
    );
    w.ok(
        admin(),
        on("i1", "plan", put_op("d2", "s2", "new v2", Some("s1"))),
    );
    let restore = DocumentOp::Restore {
        document_id: "d1".into(),
        from_revision_id: "r1".into(),
        from_revision_number: 1,
        revision_id: "s3".into(),
        text: text("old v1"),
    };
    let err = w.run(admin(), on("i1", "plan", restore)).unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");
    assert_eq!(
        w.state
            .documents
            .get("i1", "plan")
            .map(|d| d.latest_revision_number),
        Some(2)
    );
}
