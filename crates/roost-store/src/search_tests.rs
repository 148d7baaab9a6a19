//! The memory search index: FTS5 is linked, bm25 ranks, hostile query text is harmless, the
//! index follows entries, documents and comments (and deleted issues), and is rebuilt.

use roost_core::memory::{MemoryChange, MemoryDocument, MemoryEntry};
use roost_core::views::{MemoryHitKind, MemorySearchHit};
use roost_core::{Change, Comment, Timestamp};

use super::{ensure, search, SearchQuery, MAX_QUERY_CHARS};
use crate::row_batch::RowBatch;

struct Db {
    _dir: tempfile::TempDir,
    writer: rusqlite::Connection,
    pool: sqlx::SqlitePool,
}

async fn db() -> Db {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.db");
    let writer = crate::db::open_write_connection(&path).expect("writer");
    writer.execute_batch(crate::rows::SCHEMA).expect("schema");
    let pool = crate::db::open_readers(&path, 1).await.expect("readers");
    Db {
        _dir: dir,
        writer,
        pool,
    }
}

impl Db {
    fn apply(&self, changes: Vec<Change>) {
        let mut batch = RowBatch::default();
        for c in &changes {
            batch.add(c).expect("add");
        }
        batch.write(&self.writer).expect("write");
    }

    async fn find(&self, agent: &str, assigned: &[&str], q: &str) -> Vec<MemorySearchHit> {
        let assigned: Vec<String> = assigned.iter().map(|s| s.to_string()).collect();
        let query = SearchQuery::parse(q).expect("query");
        search(&self.pool, "c1", agent, &assigned, &query, 20)
            .await
            .expect("search")
    }
}

fn entry(id: &str, agent: &str, what: &str) -> Change {
    Change::Memory(MemoryChange::Entry(MemoryEntry {
        id: id.into(),
        company_id: "c1".into(),
        agent_id: agent.into(),
        seq: 1,
        run_id: "r1".into(),
        wake_reason: None,
        issue_id: None,
        what: what.into(),
        did: "ran the tests".into(),
        next: String::new(),
        errors: vec!["error[E0433]: failed to resolve".into()],
        created_at: Timestamp(10),
        summary_of: 0,
        shared: false,
    }))
}

fn document(agent: &str, name: &str, version: u64, content: &str) -> Change {
    Change::Memory(MemoryChange::Document(MemoryDocument {
        company_id: "c1".into(),
        agent_id: Some(agent.into()),
        name: name.into(),
        version,
        content: content.into(),
        updated_at: Timestamp(20 + version as i64),
        updated_by_type: "agent".into(),
        updated_by_id: agent.into(),
        run_id: None,
    }))
}

fn comment(id: &str, issue: &str, author: Option<&str>, body: &str) -> Change {
    Change::Comment(Comment {
        id: id.into(),
        company_id: "c1".into(),
        issue_id: issue.into(),
        body: body.into(),
        author_agent_id: author.map(str::to_string),
        author_user_id: None,
        created_by_run_id: None,
        created_at: Timestamp(30),
        ..Default::default()
    })
}

fn ids(hits: &[MemorySearchHit]) -> Vec<(MemoryHitKind, &str)> {
    hits.iter().map(|h| (h.kind, h.id.as_str())).collect()
}

#[tokio::test]
async fn fts5_is_compiled_into_the_linked_sqlite() {
    let db = db().await;
    db.writer
        .execute_batch("CREATE VIRTUAL TABLE probe USING fts5(x); INSERT INTO probe VALUES ('ok');")
        .expect("rusqlite's SQLite has FTS5");
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM probe WHERE probe MATCH 'ok'")
        .fetch_one(&db.pool)
        .await
        .expect("sqlx's SQLite has FTS5");
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_document_matching_twice_ranks_above_one_matching_once() {
    let db = db().await;
    db.apply(vec![
        document(
            "a1",
            "STATE.md",
            1,
            "The nightly deploy runs at noon. Nothing else here.",
        ),
        document(
            "a1",
            "MEMORY.md",
            1,
            "Deploy from main; a deploy needs the staging key.",
        ),
        entry("e1", "a1", "wrote the release notes"),
    ]);
    let hits = db.find("a1", &[], "deploy").await;
    assert_eq!(
        ids(&hits),
        vec![
            (MemoryHitKind::Document, "MEMORY.md"),
            (MemoryHitKind::Document, "STATE.md")
        ]
    );
    assert!(hits[0].score > hits[1].score, "{hits:?}");
    assert!(hits[0].snippet.contains("[Deploy]"), "{hits:?}");
    assert_eq!(hits[0].created_at, Timestamp(21));
    // Stemmed: `deploying` finds `deploy`; every word is required.
    assert_eq!(db.find("a1", &[], "deploying").await.len(), 2);
    assert_eq!(db.find("a1", &[], "deploy staging").await.len(), 1);
    // Another agent's memory is not searched.
    assert!(db.find("a2", &[], "deploy").await.is_empty());
}

#[tokio::test]
async fn only_current_versions_and_kept_entries_are_found() {
    let db = db().await;
    db.apply(vec![
        document("a1", "MEMORY.md", 1, "remember the walrus"),
        entry("e1", "a1", "fed the penguins"),
    ]);
    db.apply(vec![
        document("a1", "MEMORY.md", 2, "remember the pelican"),
        Change::Memory(MemoryChange::EntryDropped("e1".into())),
        Change::Memory(MemoryChange::DocumentDropped("agent:a1/MEMORY.md/1".into())),
    ]);
    assert!(db.find("a1", &[], "walrus").await.is_empty());
    assert!(db.find("a1", &[], "penguins").await.is_empty());
    assert_eq!(db.find("a1", &[], "pelican").await.len(), 1);
    // A company-scope document is not an agent's memory.
    let mut shared = document("a1", "STATE.md", 1, "company pelican");
    if let Change::Memory(MemoryChange::Document(d)) = &mut shared {
        d.agent_id = None;
    }
    db.apply(vec![shared]);
    assert_eq!(db.find("a1", &[], "pelican").await.len(), 1);
}

#[tokio::test]
async fn comments_of_issues_assigned_or_commented_on_and_not_of_deleted_issues() {
    let db = db().await;
    db.apply(vec![
        comment("k1", "i1", Some("a1"), "the flaky test is the clock skew"),
        comment("k2", "i1", None, "clock skew confirmed by the operator"),
        comment("k3", "i2", None, "clock skew on the assigned issue"),
        comment("k4", "i3", Some("a2"), "clock skew elsewhere"),
    ]);
    let hits = db.find("a1", &["i2"], "clock skew").await;
    let mut found: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    found.sort();
    assert_eq!(found, vec!["k1", "k2", "k3"]);
    assert!(hits.iter().all(|h| h.kind == MemoryHitKind::Comment));
    let k2 = hits.iter().find(|h| h.id == "k2").expect("k2");
    assert_eq!(k2.issue_id.as_deref(), Some("i1"));

    // A deleted issue's comments leave the index, one written in the same batch too.
    db.apply(vec![
        comment("k5", "i1", None, "clock skew again"),
        Change::IssueDeleted("i1".into()),
    ]);
    let hits = db.find("a1", &["i2"], "clock skew").await;
    assert_eq!(ids(&hits), vec![(MemoryHitKind::Comment, "k3")]);
}

#[tokio::test]
async fn hostile_query_text_is_a_sentence_or_a_valid_search() {
    let db = db().await;
    db.apply(vec![entry(
        "e1",
        "a1",
        "NEAR the quote \" and star * and (parens",
    )]);
    let long = "deploy ".repeat(10_000 / 7);
    let too_long = "x".repeat(MAX_QUERY_CHARS + 1);
    let hostile: Vec<&str> = vec![
        "",
        "   ",
        "\"",
        "\"unbalanced",
        "\"\"",
        "*",
        "star*",
        "NEAR",
        "NEAR(quote star)",
        "quote NEAR/2 star",
        "-star",
        "NOT star",
        "star OR quote",
        "AND",
        "(((",
        ")",
        "body:star",
        "{body}: star",
        "^star",
        "'; DROP TABLE memory_search; --",
        "\0",
        "naïve café",
        "\u{0915}\u{093e}",
        "\u{0301}",
        "²",
        "🦀 crab",
        &long,
        &too_long,
    ];
    for q in hostile {
        match SearchQuery::parse(q) {
            Err(sentence) => assert!(!sentence.is_empty()),
            Ok(query) => {
                search(&db.pool, "c1", "a1", &[], &query, 20)
                    .await
                    .unwrap_or_else(|e| panic!("{q:?} ({:?}): {e}", query.expression()));
            }
        }
    }
    assert_eq!(
        SearchQuery::parse("").map(|q| q.expression().is_none()),
        Ok(true)
    );
    assert_eq!(
        SearchQuery::parse("(*)").map(|q| q.expression().is_none()),
        Ok(true)
    );
    assert_eq!(
        SearchQuery::parse("\"a\" NEAR(b*)").map(|q| q.expression().map(str::to_string)),
        Ok(Some("\"a\" AND \"NEAR\" AND \"b\"".to_string()))
    );
    assert!(SearchQuery::parse(&too_long).is_err());
    // Operators are words: `NEAR(quote star)` finds the entry holding all three.
    assert_eq!(db.find("a1", &[], "NEAR(quote star)").await.len(), 1);
    assert_eq!(db.find("a1", &[], "\"star").await.len(), 1);
}

#[tokio::test]
async fn the_index_is_rebuilt_when_missing() {
    let db = db().await;
    db.apply(vec![
        entry("e1", "a1", "tuned the garbage collector"),
        document("a1", "MEMORY.md", 1, "collector notes v1"),
        document("a1", "MEMORY.md", 2, "collector notes v2"),
        comment("k1", "i1", Some("a1"), "collector paused"),
    ]);
    // A data dir from before the index: its tables empty, no version recorded.
    db.writer
        .execute_batch(
            "DELETE FROM memory_search; DELETE FROM memory_search_rows; \
             DELETE FROM sm_meta WHERE key = 'search_index';",
        )
        .expect("empty the index");
    assert!(db.find("a1", &[], "collector").await.is_empty());
    ensure(&db.writer).expect("rebuild");
    let hits = db.find("a1", &[], "collector").await;
    assert_eq!(hits.len(), 3, "{hits:?}");
    assert!(db.find("a1", &[], "v1").await.is_empty());
    // Its version is recorded: opening again leaves the index alone.
    db.writer
        .execute_batch("DELETE FROM memory_search; DELETE FROM memory_search_rows;")
        .expect("empty the index");
    ensure(&db.writer).expect("no rebuild");
    assert!(db.find("a1", &[], "collector").await.is_empty());
}

/// A data dir from before the index: opening it builds the index, and searches through the
/// node's reader find what its rows hold.
#[tokio::test]
async fn opening_a_data_dir_without_the_index_builds_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let writer = rusqlite::Connection::open(dir.path().join("state.db")).expect("state.db");
        writer.execute_batch(crate::rows::SCHEMA).expect("schema");
        let mut batch = RowBatch::default();
        batch
            .add(&entry("e1", "a1", "migrated the queue"))
            .expect("add");
        batch.write(&writer).expect("write");
        writer
            .execute_batch(
                "DROP TABLE memory_search; DROP TABLE memory_search_rows; \
                 DELETE FROM sm_meta WHERE key = 'search_index';",
            )
            .expect("as before the index");
    }
    let (_sm, reader) = crate::StateMachineStore::open(dir.path())
        .await
        .expect("open");
    let query = SearchQuery::parse("queue").expect("query");
    let hits = reader
        .search_memory("c1", "a1", &query, 10)
        .await
        .expect("search");
    assert_eq!(ids(&hits), vec![(MemoryHitKind::Entry, "e1")]);
}

/// A snapshot carries rows, never the index: installing one rebuilds the index from them.
#[tokio::test]
async fn installing_a_snapshot_rebuilds_the_index_from_its_rows() {
    let db = db().await;
    db.apply(vec![entry("e1", "a1", "stale text before the snapshot")]);
    let snapshot = db._dir.path().join("snapshot.db");
    {
        let conn = rusqlite::Connection::open(&snapshot).expect("snapshot");
        conn.execute_batch(crate::rows::SCHEMA).expect("schema");
        let mut batch = RowBatch::default();
        batch
            .add(&entry("e2", "a1", "fresh text from the leader"))
            .expect("add");
        batch.write(&conn).expect("write");
        // As a node from before the index would send it.
        conn.execute_batch("DELETE FROM memory_search; DELETE FROM memory_search_rows;")
            .expect("empty");
    }
    let mut writer =
        crate::db::open_write_connection(&db._dir.path().join("state.db")).expect("writer");
    crate::state_machine::copy_from_snapshot_file(&mut writer, &snapshot).expect("install");
    assert!(db.find("a1", &[], "stale").await.is_empty());
    assert_eq!(
        ids(&db.find("a1", &[], "fresh").await),
        vec![(MemoryHitKind::Entry, "e2")]
    );
}

/// A comment its author deleted leaves the index, and neither a rebuild from the emptied rows
/// nor a snapshot's install brings it back: an agent whose only comment on an issue was deleted
/// has not commented on it, whichever way a node came by its rows.
#[tokio::test]
async fn a_deleted_comment_leaves_the_index_and_no_rebuild_brings_it_back() {
    let db = db().await;
    let tombstone = |id: &str| {
        Change::CommentTombstoned(roost_core::CommentTombstone {
            comment_id: id.into(),
            issue_id: "i1".into(),
            deleted_at: Timestamp(50),
            deleted_by_type: roost_core::ActorKind::Agent,
            deleted_by_agent_id: Some("a1".into()),
            deleted_by_user_id: None,
            deleted_by_run_id: None,
        })
    };
    db.apply(vec![
        comment("k1", "i1", Some("a1"), "the token leaked into the log"),
        comment("k2", "i1", None, "rotate the leaked token"),
    ]);
    assert_eq!(db.find("a1", &[], "leaked").await.len(), 2);
    db.apply(vec![tombstone("k1")]);
    let shown = |hits: Vec<MemorySearchHit>| {
        hits.iter()
            .map(|h| (h.kind, h.id.clone()))
            .collect::<Vec<_>>()
    };
    let expect = || vec![(MemoryHitKind::Comment, "k2".to_string())];
    assert!(db.find("a1", &[], "leaked").await.is_empty());
    assert_eq!(shown(db.find("a1", &["i1"], "leaked").await), expect());

    // A rebuild from the rows (a new index version).
    db.writer
        .execute_batch("DELETE FROM sm_meta WHERE key = 'search_index';")
        .expect("forget the index version");
    ensure(&db.writer).expect("rebuild");
    assert!(db.find("a1", &[], "leaked").await.is_empty());
    assert_eq!(shown(db.find("a1", &["i1"], "leaked").await), expect());

    // A snapshot holding the emptied row, installed.
    let snapshot = db._dir.path().join("snapshot.db");
    {
        let conn = rusqlite::Connection::open(&snapshot).expect("snapshot");
        conn.execute_batch(crate::rows::SCHEMA).expect("schema");
        let mut batch = RowBatch::default();
        for change in [
            comment("k1", "i1", Some("a1"), "the token leaked into the log"),
            comment("k2", "i1", None, "rotate the leaked token"),
            tombstone("k1"),
        ] {
            batch.add(&change).expect("add");
        }
        batch.write(&conn).expect("write");
    }
    let mut writer =
        crate::db::open_write_connection(&db._dir.path().join("state.db")).expect("writer");
    crate::state_machine::copy_from_snapshot_file(&mut writer, &snapshot).expect("install");
    assert!(db.find("a1", &[], "leaked").await.is_empty());
    assert_eq!(shown(db.find("a1", &["i1"], "leaked").await), expect());
}

/// Auto-recall asks with a whole issue title: any one word finds a text, and a text with more
/// of the words ranks first; "all words" finds neither.
#[tokio::test]
async fn any_word_matching_finds_texts_holding_some_of_the_words_best_first() {
    let db = db().await;
    db.apply(vec![
        entry("e1", "a1", "the parser drops the last line"),
        entry("e2", "a1", "the parser is slow"),
        entry("e3", "a1", "unrelated deploy work"),
    ]);
    let title = "Fix parser dropping trailing line";
    let all = db.find("a1", &[], title).await;
    assert!(all.is_empty(), "{all:?}");
    let query = SearchQuery::parse_any(title).expect("query");
    let hits = search(&db.pool, "c1", "a1", &[], &query, 20)
        .await
        .expect("search");
    let found: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(found, ["e1", "e2"], "{hits:?}");
}

/// The FTS5 table rows.rs creates is the one `rebuild` creates again.
#[test]
fn the_schema_creates_the_index_rebuild_creates() {
    assert!(
        crate::rows::SCHEMA.contains(super::CREATE_FTS),
        "{}",
        super::CREATE_FTS
    );
}

/// Whose a text is goes into the index as one token: ids with any characters, an agent's and
/// an issue's of the same id, and another company's, never meet.
#[tokio::test]
async fn the_scope_is_matched_in_the_index_for_any_id() {
    let db = db().await;
    let odd = "ag ent\"*:(x)-é";
    db.apply(vec![
        entry("e1", odd, "the walrus sang"),
        entry("e2", "a2", "the walrus sang too"),
        comment("k1", odd, None, "a walrus on an issue named like the agent"),
    ]);
    assert_eq!(
        ids(&db.find(odd, &[], "walrus").await),
        vec![(MemoryHitKind::Entry, "e1")]
    );
    let mut found: Vec<&str> = Vec::new();
    let hits = db.find(odd, &[odd], "walrus").await;
    found.extend(hits.iter().map(|h| h.id.as_str()));
    found.sort();
    assert_eq!(found, ["e1", "k1"]);
    let query = SearchQuery::parse("walrus").expect("query");
    let other_company = search(&db.pool, "c2", odd, &[], &query, 20)
        .await
        .expect("search");
    assert!(other_company.is_empty(), "{other_company:?}");
    assert_ne!(
        super::scope_token('a', "c1", "x"),
        super::scope_token('i', "c1", "x")
    );
    assert!(super::scope_token('a', "c1", "ab")
        .chars()
        .all(|c| c.is_ascii_alphanumeric()));
}

/// A data dir whose index has version 1's shape (no `scope` column) gets the new one when
/// opened, and searches find what its rows hold.
#[tokio::test]
async fn an_index_of_the_old_shape_is_rebuilt_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let writer = rusqlite::Connection::open(dir.path().join("state.db")).expect("state.db");
        writer.execute_batch(crate::rows::SCHEMA).expect("schema");
        let mut batch = RowBatch::default();
        batch
            .add(&entry("e1", "a1", "migrated the queue"))
            .expect("add");
        batch.write(&writer).expect("write");
        writer
            .execute_batch(
                "DROP TABLE memory_search; \
                 CREATE VIRTUAL TABLE memory_search USING fts5(body, \
                   tokenize = 'porter unicode61 remove_diacritics 2'); \
                 INSERT INTO memory_search (rowid, body) \
                   SELECT rowid, 'migrated the queue' FROM memory_search_rows; \
                 INSERT INTO sm_meta (key, value) VALUES ('search_index', '1') \
                   ON CONFLICT(key) DO UPDATE SET value = excluded.value;",
            )
            .expect("as version 1 left it");
    }
    let (_sm, reader) = crate::StateMachineStore::open(dir.path())
        .await
        .expect("open");
    let query = SearchQuery::parse("queue").expect("query");
    let hits = reader
        .search_memory("c1", "a1", &query, 10)
        .await
        .expect("search");
    assert_eq!(ids(&hits), vec![(MemoryHitKind::Entry, "e1")]);
}

/// Hybrid ranking's candidates: hits with their whole text, and the scope's newest texts
/// whatever they say.
#[tokio::test]
async fn texts_and_recent_texts_of_the_scope() {
    let db = db().await;
    let mut older = entry("e1", "a1", "parked the automobile");
    if let Change::Memory(MemoryChange::Entry(e)) = &mut older {
        e.created_at = Timestamp(5);
    }
    db.apply(vec![
        older,
        entry("e2", "a1", "washed the car"),
        entry("e3", "a2", "another agent's car"),
        comment("k1", "i9", None, "a comment on an assigned issue"),
    ]);
    let query = SearchQuery::parse_any("car").expect("query");
    let found = super::search_texts(&db.pool, "c1", "a1", &["i9".into()], &query, 10)
        .await
        .expect("search");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].body.starts_with("washed the car\n"), "{found:?}");
    let recent = super::recent_texts(&db.pool, "c1", "a1", &["i9".into()], 10)
        .await
        .expect("recent");
    let order: Vec<&str> = recent.iter().map(|t| t.hit.id.as_str()).collect();
    assert_eq!(order, ["k1", "e2", "e1"], "{recent:?}");
    assert_eq!(recent[2].body.lines().next(), Some("parked the automobile"));
    assert_eq!(recent[0].hit.snippet, "a comment on an assigned issue");
}
