//! The batched writes leave the file exactly as writing each change in order would.

use roost_core::entity::{Company, CostEvent};
use roost_core::idempotency::Remembered;
use roost_core::{Change, Outcome, Timestamp};
use rusqlite::Connection;

use super::RowBatch;
use crate::rows::SCHEMA;

fn db() -> Connection {
    let conn = Connection::open_in_memory().expect("in-memory sqlite");
    conn.execute_batch(SCHEMA).expect("schema");
    conn
}

fn company(id: &str, name: &str) -> Company {
    Company {
        id: id.into(),
        name: name.into(),
        description: None,
        status: Default::default(),
        require_board_approval_for_new_agents: false,
        loop_breaker: Default::default(),
        escalate_blocked_after_secs: 3600,
        recover_stranded_after_secs: 60,
        issue_prefix: "T".into(),
        issue_counter: 0,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    }
}

fn remembered(key: &str, company_name: &str) -> Change {
    Change::Remembered(Remembered {
        key: key.into(),
        at: Timestamp(7),
        index: 1,
        outcome: Ok(Outcome::Company(company("c", company_name))),
        fingerprint: None,
    })
}

fn cost(id: &str, cents: u64) -> Change {
    Change::CostEvent(CostEvent {
        id: id.into(),
        company_id: "c".into(),
        agent_id: "a".into(),
        issue_id: None,
        heartbeat_run_id: None,
        provider: "p".into(),
        model: "m".into(),
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_cents: cents,
        occurred_at: Timestamp(1),
        created_at: Timestamp(1),
        source: "agent".into(),
        project_id: None,
        biller: None,
        billing_type: None,
    })
}

fn strings(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn.prepare(sql).expect("prepare");
    let rows = statement
        .query_map([], |r| r.get::<_, String>(0))
        .expect("query");
    rows.collect::<Result<_, _>>().expect("rows")
}

#[test]
fn a_hundred_rows_and_rewrites_of_one_row_land_as_the_last_write() {
    let conn = db();
    let mut batch = RowBatch::default();
    for i in 0..100 {
        batch
            .add(&Change::Company(company(&format!("c{i:03}"), "first")))
            .expect("add");
    }
    batch
        .add(&Change::Company(company("c007", "second")))
        .expect("add");
    batch.write(&conn).expect("write");
    let names = strings(&conn, "SELECT json_extract(data, '$.name') FROM companies");
    assert_eq!(names.len(), 100, "100 rows across 64/16/4/1-row statements");
    let c7 = strings(
        &conn,
        "SELECT json_extract(data, '$.name') FROM companies WHERE id = 'c007'",
    );
    assert_eq!(c7, ["second"]);
}

#[test]
fn a_forgotten_key_is_deleted_and_a_key_remembered_after_it_survives() {
    let conn = db();
    let mut first = RowBatch::default();
    for key in ["k1", "k2", "k3"] {
        first.add(&remembered(key, "old")).expect("add");
    }
    first.write(&conn).expect("write");

    let mut batch = RowBatch::default();
    batch.add(&Change::Forgotten("k1".into())).expect("add");
    batch.add(&remembered("k2", "new")).expect("add");
    batch.add(&Change::Forgotten("k2".into())).expect("add");
    batch.add(&Change::Forgotten("k3".into())).expect("add");
    batch.add(&remembered("k3", "again")).expect("add");
    batch.add(&remembered("k4", "fresh")).expect("add");
    batch.write(&conn).expect("write");

    let keys = strings(&conn, "SELECT key FROM idempotency ORDER BY key");
    assert_eq!(keys, ["k3", "k4"]);
}

#[test]
fn a_cost_event_written_twice_keeps_its_first_version() {
    let conn = db();
    let mut first = RowBatch::default();
    first.add(&cost("e1", 5)).expect("add");
    first.write(&conn).expect("write");
    let mut batch = RowBatch::default();
    batch.add(&cost("e1", 9)).expect("add");
    batch.add(&cost("e2", 3)).expect("add");
    batch.add(&cost("e2", 4)).expect("add");
    batch.write(&conn).expect("write");
    let cents = strings(
        &conn,
        "SELECT id || ':' || json_extract(data, '$.costCents') FROM cost_events ORDER BY id",
    );
    assert_eq!(cents, ["e1:5", "e2:3"]);
}

#[test]
fn a_row_already_in_the_file_is_rewritten_by_a_later_apply() {
    let conn = db();
    let mut first = RowBatch::default();
    first
        .add(&Change::Company(company("c1", "first")))
        .expect("add");
    first
        .add(&Change::Company(company("c2", "other")))
        .expect("add");
    first.add(&remembered("k", "first")).expect("add");
    first.write(&conn).expect("write");
    let mut later = RowBatch::default();
    later
        .add(&Change::Company(company("c1", "second")))
        .expect("add");
    later.add(&remembered("k", "second")).expect("add");
    later.write(&conn).expect("write");
    let names = strings(
        &conn,
        "SELECT id || '=' || json_extract(data, '$.name') FROM companies ORDER BY id",
    );
    assert_eq!(names, ["c1=second", "c2=other"]);
    let kept = strings(&conn, "SELECT data FROM idempotency");
    assert_eq!(kept.len(), 1, "one row per key");
    assert!(kept[0].contains("\"second\""), "{}", kept[0]);
}

fn memory_entry(id: &str) -> Change {
    Change::Memory(roost_core::memory::MemoryChange::Entry(
        roost_core::memory::MemoryEntry {
            id: id.into(),
            company_id: "c".into(),
            agent_id: "a".into(),
            seq: 1,
            run_id: "r".into(),
            wake_reason: None,
            issue_id: None,
            what: "w".into(),
            did: String::new(),
            next: String::new(),
            errors: Vec::new(),
            created_at: Timestamp(1),
            summary_of: 0,
            shared: false,
        },
    ))
}

fn memory_dropped(id: &str) -> Change {
    Change::Memory(roost_core::memory::MemoryChange::EntryDropped(id.into()))
}

#[test]
fn a_dropped_memory_entry_is_deleted_in_the_file_and_within_a_batch() {
    let conn = db();
    let mut first = RowBatch::default();
    for id in ["e1", "e2"] {
        first.add(&memory_entry(id)).expect("add");
    }
    first.write(&conn).expect("write");
    let mut batch = RowBatch::default();
    batch.add(&memory_dropped("e1")).expect("add");
    batch.add(&memory_entry("e3")).expect("add");
    batch.add(&memory_dropped("e3")).expect("add");
    batch.add(&memory_entry("e4")).expect("add");
    batch.write(&conn).expect("write");
    let ids = strings(&conn, "SELECT id FROM memory_entries ORDER BY id");
    assert_eq!(ids, ["e2", "e4"]);
}

#[test]
fn the_companys_shared_log_and_live_state_are_rows_and_the_shared_log_is_not_indexed() {
    let conn = db();
    let mut batch = RowBatch::default();
    let Change::Memory(roost_core::memory::MemoryChange::Entry(mut shared)) = memory_entry("s1")
    else {
        unreachable!("memory_entry makes an entry")
    };
    shared.shared = true;
    batch
        .add(&Change::Memory(roost_core::memory::MemoryChange::Entry(
            shared,
        )))
        .expect("add");
    batch.add(&memory_entry("e1")).expect("add");
    batch
        .add(&Change::Memory(
            roost_core::memory::MemoryChange::CompanyLive(roost_core::memory::CompanyLive {
                company_id: "c".into(),
                parts: roost_core::memory::LiveParts {
                    coordinates: Some(serde_json::json!({ "release": "1.3" })),
                    coordinates_updated_at: Some(Timestamp(2)),
                    ..Default::default()
                },
                updated_by_type: "user".into(),
                updated_by_id: "admin".into(),
                run_id: None,
            }),
        ))
        .expect("add");
    batch.write(&conn).expect("write");
    assert_eq!(
        strings(&conn, "SELECT id FROM memory_entries ORDER BY id"),
        ["e1", "s1"]
    );
    assert_eq!(
        strings(&conn, "SELECT ref_id FROM memory_search_rows"),
        ["e1"],
        "recall searches an agent's own memory, not the company's log"
    );
    assert_eq!(
        strings(
            &conn,
            "SELECT company_id || ' ' || json_extract(data, '$.coordinates.release') \
             FROM memory_company_live"
        ),
        ["c 1.3"]
    );
}

/// The changes of `commands` applied in order by an administrator, one log index each.
fn applied(commands: Vec<roost_core::Command>) -> Vec<Vec<Change>> {
    let mut state = roost_core::State::new();
    let admin = roost_core::Actor {
        kind: roost_core::ActorKind::User,
        id: "admin".into(),
        credential_id: None,
        run_id: None,
        company_id: None,
    };
    commands
        .into_iter()
        .enumerate()
        .map(|(n, command)| {
            let env = roost_core::Envelope {
                request_id: None,
                at: Timestamp(1_000 * (n as i64 + 1)),
                actor: admin.clone(),
                command,
                idempotency_key: None,
            };
            let applied = state.apply(n as u64 + 1, &env);
            assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
            applied.changes
        })
        .collect()
}

#[test]
fn a_deleted_issue_leaves_no_row_nor_comment_whether_written_before_or_in_the_same_batch() {
    use roost_core::command::{IssuePatch, NewComment};
    use roost_core::Command;
    let issue = |id: &str| Command::CreateIssue {
        id: id.into(),
        company_id: "c".into(),
        fields: IssuePatch {
            title: Some(format!("issue {id}")),
            ..Default::default()
        },
    };
    let comment = |issue: &str, id: &str| Command::AddComment {
        issue_id: issue.into(),
        comment: NewComment {
            id: id.into(),
            body: "hello".into(),
        },
    };
    let steps = applied(vec![
        Command::CreateCompany {
            id: "c".into(),
            name: "c".into(),
            issue_prefix: "C".into(),
        },
        issue("i1"),
        issue("i2"),
        comment("i1", "early"),
        comment("i2", "kept"),
        comment("i1", "late"),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    ]);
    // The first five applies reach the file; the last comment and the delete share a batch.
    let conn = db();
    let mut batch = RowBatch::default();
    for changes in &steps[..5] {
        for change in changes {
            batch.add(change).expect("add");
        }
    }
    batch.write(&conn).expect("write");
    for changes in &steps[5..] {
        for change in changes {
            batch.add(change).expect("add");
        }
    }
    batch.write(&conn).expect("write");
    assert_eq!(
        strings(&conn, "SELECT id FROM issues"),
        vec!["i2".to_string()]
    );
    assert_eq!(
        strings(&conn, "SELECT id FROM comments"),
        vec!["kept".to_string()]
    );
}

#[test]
fn a_deleted_comments_row_keeps_its_place_emptied_whether_written_before_or_in_the_same_batch() {
    use roost_core::command::{IssuePatch, NewComment};
    use roost_core::Command;
    let comment = |id: &str| Command::AddComment {
        issue_id: "i1".into(),
        comment: NewComment {
            id: id.into(),
            body: format!("secret {id}"),
        },
    };
    let delete = |id: &str| Command::DeleteComment {
        issue_id: "i1".into(),
        comment_id: id.into(),
    };
    let steps = applied(vec![
        Command::CreateCompany {
            id: "c".into(),
            name: "c".into(),
            issue_prefix: "C".into(),
        },
        Command::CreateIssue {
            id: "i1".into(),
            company_id: "c".into(),
            fields: IssuePatch {
                title: Some("issue".into()),
                ..Default::default()
            },
        },
        Command::CreateIssue {
            id: "i2".into(),
            company_id: "c".into(),
            fields: IssuePatch {
                title: Some("gone".into()),
                ..Default::default()
            },
        },
        comment("m1"),
        comment("m2"),
        Command::AddComment {
            issue_id: "i2".into(),
            comment: NewComment {
                id: "n1".into(),
                body: "on the issue that goes".into(),
            },
        },
        comment("m3"),
        delete("m1"),
        comment("m4"),
        delete("m4"),
        Command::DeleteComment {
            issue_id: "i2".into(),
            comment_id: "n1".into(),
        },
        Command::DeleteIssue {
            issue_id: "i2".into(),
        },
    ]);
    // The first seven applies reach the file; the rest share a batch: m1's deletion, m4 and its
    // deletion, and n1's deletion before its issue's.
    let conn = db();
    let mut batch = RowBatch::default();
    for (n, changes) in steps.iter().enumerate() {
        for change in changes {
            batch.add(change).expect("add");
        }
        if n == 6 {
            batch.write(&conn).expect("write");
        }
    }
    batch.write(&conn).expect("write");
    let rows: Vec<roost_core::Comment> = strings(&conn, "SELECT data FROM comments ORDER BY seq")
        .iter()
        .map(|d| serde_json::from_str(d).expect("a comment row"))
        .collect();
    let shown: Vec<(&str, &str, bool)> = rows
        .iter()
        .map(|c| (c.id.as_str(), c.body.as_str(), c.deleted_at.is_some()))
        .collect();
    assert_eq!(
        shown,
        [
            ("m1", "", true),
            ("m2", "secret m2", false),
            ("m3", "secret m3", false),
            ("m4", "", true),
        ]
    );
    assert_eq!(rows[0].deleted_at, Some(Timestamp(8_000)));
    assert_eq!(rows[0].deleted_by_user_id.as_deref(), Some("admin"));
    assert_eq!(rows[0].author_user_id.as_deref(), Some("admin"));
    // Their text leaves the search index.
    assert_eq!(
        strings(
            &conn,
            "SELECT ref_id FROM memory_search_rows WHERE kind = 'comment' ORDER BY ref_id"
        ),
        vec!["m2".to_string(), "m3".to_string()]
    );
}

fn document_changes(doc: &str, revisions: &[u64]) -> Vec<Change> {
    use roost_core::document::{DocumentChange, DocumentRevision, IssueDocument};
    let latest = revisions.iter().copied().max().unwrap_or(1);
    let mut changes = vec![Change::Document(DocumentChange::Document(IssueDocument {
        id: doc.into(),
        company_id: "c".into(),
        issue_id: "i".into(),
        key: doc.into(),
        title: None,
        format: "markdown".into(),
        latest_revision_id: format!("{doc}-r{latest}"),
        latest_revision_number: latest,
        created_by_agent_id: None,
        created_by_user_id: None,
        updated_by_agent_id: None,
        updated_by_user_id: None,
        locked_at: None,
        locked_by_agent_id: None,
        locked_by_user_id: None,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    }))];
    changes.extend(revisions.iter().map(|n| {
        Change::Document(DocumentChange::Revision(DocumentRevision {
            id: format!("{doc}-r{n}"),
            company_id: "c".into(),
            document_id: doc.into(),
            issue_id: "i".into(),
            key: doc.into(),
            revision_number: *n,
            title: None,
            format: "markdown".into(),
            body: format!("body {n}"),
            change_summary: None,
            created_by_agent_id: None,
            created_by_user_id: None,
            created_by_run_id: None,
            created_at: Timestamp(1),
        }))
    }));
    changes
}

/// A deleted document's revisions go with it: those already in the file, and those written
/// earlier in the same batch (the batch's deletes run before its inserts), none orphaned.
#[test]
fn a_deleted_documents_revisions_go_with_it_in_the_file_and_within_a_batch() {
    use roost_core::document::DocumentChange;
    let conn = db();
    let mut first = RowBatch::default();
    for change in document_changes("kept", &[1, 2])
        .iter()
        .chain(&document_changes("gone", &[1]))
    {
        first.add(change).expect("add");
    }
    first.write(&conn).expect("write");
    let mut batch = RowBatch::default();
    for change in &document_changes("gone", &[2]) {
        batch.add(change).expect("add");
    }
    batch
        .add(&Change::Document(DocumentChange::Deleted("gone".into())))
        .expect("add");
    for change in &document_changes("fresh", &[1]) {
        batch.add(change).expect("add");
    }
    batch
        .add(&Change::Document(DocumentChange::Deleted("fresh".into())))
        .expect("add");
    batch.write(&conn).expect("write");
    let docs = strings(&conn, "SELECT id FROM issue_documents ORDER BY id");
    assert_eq!(docs, ["kept"]);
    let revisions = strings(&conn, "SELECT id FROM document_revisions ORDER BY id");
    assert_eq!(revisions, ["kept-r1", "kept-r2"]);
}

fn card(id: &str, issue: &str, status: roost_core::interaction::InteractionStatus) -> Change {
    use roost_core::interaction::*;
    Change::Interaction(InteractionChange::Interaction(Interaction {
        id: id.into(),
        company_id: "c1".into(),
        issue_id: issue.into(),
        kind: InteractionKind::RequestConfirmation,
        status,
        continuation_policy: ContinuationPolicy::None,
        resolver_policy: ResolverPolicy::Anyone,
        resolver_policy_explicit: false,
        addressee_agent_id: None,
        idempotency_key: Some(format!("key-{id}")),
        source_comment_id: None,
        source_run_id: None,
        title: None,
        summary: None,
        payload: serde_json::json!({ "version": 1, "prompt": id }),
        result: None,
        created_by_agent_id: None,
        created_by_user_id: Some("admin".into()),
        resolved_by_agent_id: None,
        resolved_by_user_id: None,
        resolved_by_run_id: None,
        created_at: roost_core::Timestamp(1),
        updated_at: roost_core::Timestamp(1),
        resolved_at: None,
    }))
}

/// An answered card keeps its row (memory no longer holds it), with its status; a deleted
/// issue's cards go with it, those in the file and those written earlier in the same batch.
#[test]
fn an_issues_interaction_rows_outlive_their_answer_and_go_with_the_issue() {
    use roost_core::interaction::InteractionStatus::{Accepted, Pending};
    let conn = db();
    let mut first = RowBatch::default();
    for change in [card("a", "kept", Pending), card("b", "gone", Pending)] {
        first.add(&change).expect("add");
    }
    first.write(&conn).expect("write");
    let mut batch = RowBatch::default();
    for change in [
        card("a", "kept", Accepted),
        card("c", "gone", Pending),
        Change::IssueDeleted("gone".into()),
    ] {
        batch.add(&change).expect("add");
    }
    batch.write(&conn).expect("write");
    let rows = strings(
        &conn,
        "SELECT id || ':' || status FROM issue_interactions ORDER BY id",
    );
    assert_eq!(rows, ["a:accepted"]);
}

fn chunk(attachment: &str, index: u32, bytes: &[u8]) -> Change {
    use roost_core::attachment::{AttachmentChange, AttachmentChunk};
    Change::Attachment(AttachmentChange::Chunk {
        chunk: AttachmentChunk {
            attachment_id: attachment.into(),
            company_id: "c".into(),
            issue_id: "i".into(),
            index,
            size: bytes.len() as u64,
            uploader: "admin".into(),
            at: Timestamp(1),
        },
        content: bytes.to_vec(),
    })
}

/// A removed attachment's or given-up upload's chunks go with it, those in the file and
/// those written earlier in the same batch; a finished attachment keeps its chunks in order.
#[test]
fn a_removed_attachments_chunks_go_with_it_in_the_file_and_within_a_batch() {
    use roost_core::attachment::AttachmentChange;
    let conn = db();
    let mut first = RowBatch::default();
    for change in [
        chunk("kept", 1, b"world"),
        chunk("kept", 0, b"hello "),
        chunk("gone", 0, b"x"),
    ] {
        first.add(&change).expect("add");
    }
    first.write(&conn).expect("write");
    let mut batch = RowBatch::default();
    for change in [
        chunk("gone", 1, b"y"),
        Change::Attachment(AttachmentChange::Removed("gone".into())),
        chunk("fresh", 0, b"z"),
        Change::Attachment(AttachmentChange::Removed("fresh".into())),
    ] {
        batch.add(&change).expect("add");
    }
    batch.write(&conn).expect("write");
    let rows = strings(&conn, "SELECT key FROM attachment_chunks ORDER BY key");
    assert_eq!(rows, ["kept/00000", "kept/00001"]);
    let bytes: Vec<u8> = conn
        .prepare("SELECT bytes FROM attachment_chunks WHERE attachment_id = 'kept' ORDER BY key")
        .expect("query")
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .expect("rows")
        .flat_map(|r| r.expect("row"))
        .collect();
    assert_eq!(bytes, b"hello world");
}
