//! Issue attachments and work products: who uploads, what every replica stores, the bounds,
//! the artifact an agent run's upload records, one primary per type, and a deleted issue
//! taking both with it.

use base64::Engine;
use serde_json::json;
use sha2::Digest;

use super::test_world::*;
use crate::attachment::*;
use crate::command::*;
use crate::state::Change;
use crate::work_product::*;
use crate::DomainError;

fn chunk(issue: &str, id: &str, index: u32, bytes: &[u8]) -> Command {
    Command::PutAttachmentChunk {
        issue_id: issue.into(),
        attachment_id: id.into(),
        index,
        content: base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}

fn make(issue: &str, id: &str, name: &str, bytes: &[u8]) -> Command {
    Command::AddIssueAttachment {
        issue_id: issue.into(),
        attachment_id: id.into(),
        work_product_id: format!("wp-{id}"),
        upload: AttachmentUpload {
            original_filename: Some(name.into()),
            content_type: "text/plain".into(),
            issue_comment_id: None,
            chunks: bytes.chunks(CHUNK_BYTES as usize).len() as u32,
            byte_size: bytes.len() as u64,
            sha256: hex::encode(sha2::Sha256::digest(bytes)),
        },
    }
}

/// Uploads `bytes` as `actor`, chunk by chunk, then makes the attachment: the last outcome.
fn upload(
    w: &mut World,
    actor: Actor,
    issue: &str,
    id: &str,
    name: &str,
    bytes: &[u8],
) -> Result<Outcome, DomainError> {
    for (i, part) in bytes.chunks(CHUNK_BYTES as usize).enumerate() {
        w.run(actor.clone(), chunk(issue, id, i as u32, part))?;
    }
    w.run(actor, make(issue, id, name, bytes))
}

fn attachment(outcome: Outcome) -> IssueAttachment {
    match outcome {
        Outcome::Attachment(a) => a,
        other => panic!("unexpected {other:?}"),
    }
}

fn product(outcome: Outcome) -> WorkProduct {
    match outcome {
        Outcome::WorkProduct(w) => w,
        other => panic!("unexpected {other:?}"),
    }
}

fn fields(v: serde_json::Value) -> WorkProductFields {
    serde_json::from_value(v).expect("work product fields")
}

fn create(issue: &str, id: &str, v: serde_json::Value) -> Command {
    Command::CreateWorkProduct {
        issue_id: issue.into(),
        work_product_id: id.into(),
        fields: fields(v),
    }
}

#[test]
fn a_file_arrives_in_chunks_and_memory_keeps_only_its_summary() {
    let mut w = world();
    w.todo_issue("i1");
    // Three chunks: every replica stores each chunk's bytes, memory only their sizes.
    let file: Vec<u8> = (0..2 * CHUNK_BYTES + 5).map(|i| (i % 251) as u8).collect();
    let parts: Vec<&[u8]> = file.chunks(CHUNK_BYTES as usize).collect();
    for (i, part) in parts.iter().enumerate() {
        let applied = w.applied(admin(), chunk("i1", "at1", i as u32, part));
        applied.outcome.expect("chunk");
        let stored: Vec<&Vec<u8>> = applied
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Attachment(AttachmentChange::Chunk { content, .. }) => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(stored, vec![&part.to_vec()]);
    }
    assert_eq!(
        w.state.attachments.uploads["at1"].bytes(),
        file.len() as u64
    );
    // A restarted node loads the upload in progress with the same hash.
    let reloaded = super::memory_tests::reloaded(&w.state);
    assert_eq!(reloaded.hash(), w.state.hash());
    assert_eq!(reloaded.attachments.uploads["at1"].sizes.len(), 3);

    let a = attachment(w.ok(admin(), make("i1", "at1", "notes.txt", &file)));
    assert_eq!(a.byte_size, file.len() as u64);
    assert_eq!(a.sha256, hex::encode(sha2::Sha256::digest(&file)));
    assert_eq!(a.created_by_user_id.as_deref(), Some("admin"));
    assert_eq!(a.originating_run_id, None);
    assert!(w.state.attachments.uploads.is_empty());
    // No work product for the board's upload.
    assert!(w.state.work_products.of_issue("i1").is_empty());
    assert_eq!(w.state.attachments.company_bytes("c1"), file.len() as u64);

    // Newest first.
    upload(&mut w, admin(), "i1", "at2", "b.txt", b"second").expect("upload");
    let ids: Vec<&str> = w
        .state
        .attachments
        .of_issue("i1")
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(ids, ["at2", "at1"]);
    let reloaded = super::memory_tests::reloaded(&w.state);
    assert_eq!(reloaded.hash(), w.state.hash());
    assert_eq!(
        reloaded.attachments.company_bytes("c1"),
        file.len() as u64 + 6
    );
}

#[test]
fn empty_oversized_incomplete_undecodable_and_foreign_uploads_change_nothing() {
    let mut w = world();
    w.todo_issue("i1");
    w.issue("o1", "c2", Default::default());
    w.start_run("r1", "a1");
    w.ok(admin(), chunk("i1", "mine", 0, b"first"));
    let before = w.fingerprint();
    let refused =
        |w: &mut World, actor: Actor, command: Command| w.run(actor, command).expect_err("refused");
    let err = refused(&mut w, admin(), chunk("i1", "e", 0, b""));
    assert!(
        matches!(&err, DomainError::Invariant { message, .. } if message == "Attachment is empty"),
        "{err:?}"
    );
    let err = refused(&mut w, admin(), chunk("i1", "b", MAX_CHUNKS, b"x"));
    assert!(
        matches!(&err, DomainError::Invariant { message, .. } if message.contains("10 MB limit")),
        "{err:?}"
    );
    let big = vec![7u8; CHUNK_BYTES as usize + 1];
    assert!(matches!(
        refused(&mut w, admin(), chunk("i1", "b", 0, &big)),
        DomainError::TooLarge { .. }
    ));
    let mut over = make("i1", "mine", "f", b"first");
    if let Command::AddIssueAttachment { upload, .. } = &mut over {
        upload.byte_size = MAX_ATTACHMENT_BYTES + 1;
    }
    assert!(matches!(
        refused(&mut w, admin(), over),
        DomainError::Invariant { .. }
    ));
    let bad = Command::PutAttachmentChunk {
        issue_id: "i1".into(),
        attachment_id: "x".into(),
        index: 0,
        content: "not base64!".into(),
    };
    assert!(matches!(
        refused(&mut w, admin(), bad),
        DomainError::Invalid { .. }
    ));
    // A chunk twice, a file whose chunks are not all there, a finish with none.
    assert!(matches!(
        refused(&mut w, admin(), chunk("i1", "mine", 0, b"again")),
        DomainError::Conflict { .. }
    ));
    assert!(matches!(
        refused(&mut w, admin(), make("i1", "mine", "f", b"first and more")),
        DomainError::Conflict { .. }
    ));
    assert!(matches!(
        refused(&mut w, admin(), make("i1", "nothing", "f", b"x")),
        DomainError::Invariant { .. }
    ));
    // Another writer cannot add to or finish the upload.
    let agent = agent_actor("a1", "c1", Some("r1"));
    assert!(matches!(
        refused(&mut w, agent.clone(), chunk("i1", "mine", 1, b"theirs")),
        DomainError::Conflict { .. }
    ));
    assert!(matches!(
        refused(&mut w, agent.clone(), make("i1", "mine", "f", b"first")),
        DomainError::Conflict { .. }
    ));
    // Another company's issue is not found for an agent of c1.
    assert!(matches!(
        refused(&mut w, agent, chunk("o1", "f", 0, b"f")),
        DomainError::NotFound { .. }
    ));
    // A comment id of no comment of the issue.
    let mut orphan = make("i1", "mine", "c", b"first");
    if let Command::AddIssueAttachment { upload, .. } = &mut orphan {
        upload.issue_comment_id = Some("nope".into());
    }
    assert!(matches!(
        refused(&mut w, admin(), orphan),
        DomainError::Invalid { field, .. } if field == "issueCommentId"
    ));
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn an_upload_left_for_an_hour_is_dropped_and_a_company_has_few_in_progress() {
    let mut w = world();
    w.todo_issue("i1");
    w.run_at(0, admin(), chunk("i1", "old", 0, b"stale"))
        .expect("chunk");
    for n in 1..MAX_UPLOADS_IN_PROGRESS {
        w.run_at(1, admin(), chunk("i1", &format!("u{n}"), 0, b"x"))
            .expect("chunk");
    }
    // The company is at its bound: a new upload waits.
    assert!(matches!(
        w.run_at(2, admin(), chunk("i1", "one-more", 0, b"x")),
        Err(DomainError::QuotaExceeded { .. })
    ));
    // An hour after its last chunk, the next chunk of the company drops the stale upload,
    // bytes and all, and the new one fits.
    let later = 1 + ABANDONED_AFTER_MS;
    let applied = w.applied_at(later, admin(), chunk("i1", "one-more", 0, b"x"));
    applied.outcome.expect("chunk");
    assert!(applied.changes.iter().any(|c| matches!(
        c,
        Change::Attachment(AttachmentChange::Removed(id)) if id == "old"
    )));
    assert!(!w.state.attachments.uploads.contains_key("old"));
}

#[test]
fn an_agent_runs_upload_records_an_artifact_that_its_work_product_post_updates() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    let agent = agent_actor("a1", "c1", Some("r1"));
    let a = attachment(
        upload(&mut w, agent.clone(), "i1", "at1", "report.md", b"# R").expect("upload"),
    );
    assert_eq!(a.originating_run_id.as_deref(), Some("r1"));
    assert_eq!(a.created_by_agent_id.as_deref(), Some("a1"));
    let auto = w.state.work_products.of_issue("i1");
    assert_eq!(auto.len(), 1);
    let auto = auto[0].clone();
    assert_eq!(
        (
            auto.kind.as_str(),
            auto.provider.as_str(),
            auto.title.as_str()
        ),
        ("artifact", "paperclip", "report.md")
    );
    assert_eq!(auto.external_id.as_deref(), Some("at1"));
    assert_eq!(auto.created_by_run_id.as_deref(), Some("r1"));

    // Paperclip's helper then posts the artifact with its own title and paths of its own: the
    // same work product is updated, and its metadata comes from the attachment.
    let wp = product(w.ok(
        agent.clone(),
        create(
            "i1",
            "wp-helper",
            json!({"type": "artifact", "provider": "paperclip", "title": "Weekly report",
                   "status": "ready_for_review", "isPrimary": true, "createdByRunId": "r1",
                   "metadata": {"attachmentId": "at1", "contentPath": "/elsewhere", "byteSize": 99}}),
        ),
    ));
    assert_eq!(wp.id, auto.id);
    assert_eq!(wp.title, "Weekly report");
    assert_eq!(wp.status, "ready_for_review");
    let meta = wp.metadata.clone().expect("metadata");
    assert_eq!(meta["contentPath"], "/api/attachments/at1/content");
    assert_eq!(
        meta["downloadPath"],
        "/api/attachments/at1/content?download=1"
    );
    assert_eq!(meta["byteSize"], 3);
    assert_eq!(w.state.work_products.of_issue("i1").len(), 1);

    // Another run's id is refused; so is an attachment of another issue.
    assert!(matches!(
        w.run(
            agent.clone(),
            create(
                "i1",
                "wp2",
                json!({"type": "branch", "provider": "git", "title": "b",
                                        "createdByRunId": "r-other"})
            )
        ),
        Err(DomainError::Forbidden { .. })
    ));
    w.todo_issue("i2");
    upload(&mut w, admin(), "i2", "at9", "other.txt", b"o").expect("upload");
    assert!(matches!(
        w.run(
            agent,
            create(
                "i1",
                "wp3",
                json!({"type": "artifact", "provider": "paperclip", "title": "x",
                                        "metadata": {"attachmentId": "at9"}})
            )
        ),
        Err(DomainError::Invariant { .. })
    ));
}

#[test]
fn one_primary_work_product_per_issue_and_type() {
    let mut w = world();
    w.todo_issue("i1");
    let pr = |id: &str| {
        create(
            "i1",
            id,
            json!({"type": "pull_request", "provider": "github",
                                                 "title": id, "isPrimary": true}),
        )
    };
    w.ok(admin(), pr("p1"));
    w.ok(
        admin(),
        create(
            "i1",
            "b1",
            json!({"type": "branch", "provider": "git", "title": "b", "isPrimary": true}),
        ),
    );
    w.ok(admin(), pr("p2"));
    let primary = |w: &World, id: &str| w.state.work_products.products[id].is_primary;
    assert!(!primary(&w, "p1"));
    assert!(primary(&w, "p2"));
    assert!(primary(&w, "b1"), "another type keeps its primary");
    // Primary first, then the most recently updated.
    let order: Vec<&str> = w
        .state
        .work_products
        .of_issue("i1")
        .iter()
        .map(|p| p.id.as_str())
        .collect();
    assert_eq!(order, ["p2", "b1", "p1"]);
    // An update making p1 primary clears p2.
    w.ok(
        admin(),
        Command::UpdateWorkProduct {
            work_product_id: "p1".into(),
            fields: fields(json!({"isPrimary": true, "summary": "merged"})),
        },
    );
    assert!(primary(&w, "p1") && !primary(&w, "p2"));
    let removed = product(w.ok(
        admin(),
        Command::DeleteWorkProduct {
            work_product_id: "p2".into(),
        },
    ));
    assert_eq!(removed.id, "p2");
    assert!(!w.state.work_products.products.contains_key("p2"));
}

#[test]
fn a_held_issue_refuses_another_agents_upload_and_deletion_takes_everything() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.checkout("i1", "a1", "r1").expect("checkout");
    w.start_run("r2", "a2");
    assert!(matches!(
        upload(
            &mut w,
            agent_actor("a2", "c1", Some("r2")),
            "i1",
            "at1",
            "a.txt",
            b"a"
        ),
        Err(DomainError::CheckoutConflict { .. })
    ));
    // The holder's run uploads; once it ends, the issue's deletion removes the file, its
    // bytes and the artifact.
    let holder = agent_actor("a1", "c1", Some("r1"));
    upload(&mut w, holder.clone(), "i1", "at1", "a.txt", b"a").expect("upload");
    assert_eq!(w.state.work_products.of_issue("i1").len(), 1);
    // An upload in progress on the issue goes with it too.
    w.ok(holder, chunk("i1", "half", 0, b"half"));
    super::test_world::finish(&mut w, "r1");
    let applied = w.applied(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    applied.outcome.expect("delete");
    assert!(applied.changes.iter().any(|c| matches!(
        c,
        Change::Attachment(AttachmentChange::Removed(id)) if id == "at1"
    )));
    assert!(w.state.attachments.attachments.is_empty());
    assert!(w.state.attachments.uploads.is_empty());
    assert!(w.state.work_products.products.is_empty());
    assert_eq!(w.state.attachments.company_bytes("c1"), 0);
}

#[test]
fn an_upload_is_given_up_by_its_uploader_only_and_a_full_issue_refuses_the_first_chunk() {
    let mut w = world();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.ok(admin(), chunk("i1", "half", 0, b"half"));
    let give_up = Command::RemoveIssueAttachment {
        attachment_id: "half".into(),
    };
    // Another writer of the company does not see it.
    assert!(matches!(
        w.run(agent_actor("a1", "c1", Some("r1")), give_up.clone()),
        Err(DomainError::NotFound { .. })
    ));
    w.ok(admin(), give_up);
    assert!(w.state.attachments.uploads.is_empty());

    // An issue with as many attachments as it may have refuses the next upload's first chunk,
    // before its bytes go through the log.
    for n in 0..MAX_ATTACHMENTS_PER_ISSUE {
        upload(&mut w, admin(), "i1", &format!("a{n}"), "f", b"f").expect("upload");
    }
    assert!(matches!(
        w.run(admin(), chunk("i1", "one-more", 0, b"x")),
        Err(DomainError::QuotaExceeded { .. })
    ));
    assert!(!w.state.attachments.uploads.contains_key("one-more"));
}
