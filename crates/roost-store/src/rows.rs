//! The state machine's tables: their schema and loading a [`State`] back (writing: [`crate::row_batch`]).

use roost_core::activity::ActivityEntry;
use roost_core::state::CommentRef;
use std::sync::Arc;

use roost_core::{IssueRows, State, StateRows, Timestamp};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use crate::error::Error;

pub(crate) const SCHEMA_VERSION: &str = "1";

/// The last three statements are the memory search index (`search.rs`): derived from the rows,
/// rebuilt rather than copied, so not in [`TABLES`]. Porter stemming on Unicode words.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sm_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS companies (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS issues (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, identifier TEXT NOT NULL,
    status TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    status TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS comments (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, company_id TEXT NOT NULL,
    issue_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS comments_by_issue ON comments (issue_id, seq);
CREATE TABLE IF NOT EXISTS activity (seq INTEGER PRIMARY KEY, log_index INTEGER NOT NULL, company_id TEXT,
    at INTEGER NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT NOT NULL, credential_id TEXT, run_id TEXT,
    action TEXT NOT NULL, entity_type TEXT NOT NULL, entity_id TEXT NOT NULL, details TEXT NOT NULL,
    prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS activity_by_company ON activity (company_id, seq);
CREATE TABLE IF NOT EXISTS idempotency (key TEXT PRIMARY KEY, at INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wakes (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    status TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS wakes_by_agent ON wakes (agent_id);
CREATE TABLE IF NOT EXISTS workers (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budget_policies (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cost_events (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS budget_incidents (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_entries (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, agent_id TEXT NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_documents (key TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_live (agent_id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_company_live (company_id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS routines (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS routine_triggers (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, routine_id TEXT NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS routine_runs (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, routine_id TEXT NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS goals (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projects (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS skills (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agent_homes (agent_id TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS home_chunks (key TEXT PRIMARY KEY, company_id TEXT NOT NULL, data TEXT NOT NULL,
    bytes BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS issue_documents (id TEXT PRIMARY KEY, company_id TEXT NOT NULL, issue_id TEXT NOT NULL,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS document_revisions (id TEXT PRIMARY KEY, company_id TEXT NOT NULL,
    document_id TEXT NOT NULL, revision_number INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS document_revisions_by_document ON document_revisions (document_id, revision_number);
CREATE TABLE IF NOT EXISTS agent_config_revisions (id TEXT PRIMARY KEY, company_id TEXT NOT NULL,
    agent_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS agent_config_revisions_by_agent ON agent_config_revisions (agent_id, seq);
CREATE TABLE IF NOT EXISTS issue_interactions (id TEXT PRIMARY KEY, company_id TEXT NOT NULL,
    issue_id TEXT NOT NULL, idempotency_key TEXT, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS issue_interactions_by_issue ON issue_interactions (issue_id, created_at);
CREATE TABLE IF NOT EXISTS issue_attachments (id TEXT PRIMARY KEY, company_id TEXT NOT NULL,
    issue_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attachment_chunks (key TEXT PRIMARY KEY, attachment_id TEXT NOT NULL,
    company_id TEXT NOT NULL, data TEXT NOT NULL, bytes BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS attachment_chunks_by_attachment ON attachment_chunks (attachment_id, key);
CREATE TABLE IF NOT EXISTS work_products (id TEXT PRIMARY KEY, company_id TEXT NOT NULL,
    issue_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_search_rows (rowid INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL, ref_id TEXT NOT NULL, company_id TEXT NOT NULL, agent_id TEXT, issue_id TEXT,
    created_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS memory_search_by_issue ON memory_search_rows (issue_id, kind);
CREATE INDEX IF NOT EXISTS memory_search_by_agent ON memory_search_rows (agent_id, kind);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_search USING fts5(body, scope, tokenize = 'porter unicode61 remove_diacritics 2');
";

/// Tables added after the first release: a snapshot made by an older node lacks them, and
/// installing it empties them.
pub(crate) const NEWER_TABLES: &[&str] = &[
    "memory_entries",
    "memory_documents",
    "memory_live",
    "memory_company_live",
    "routines",
    "routine_triggers",
    "routine_runs",
    "agent_homes",
    "home_chunks",
    "approvals",
    "goals",
    "projects",
    "skills",
    "issue_documents",
    "document_revisions",
    "issue_interactions",
    "issue_attachments",
    "attachment_chunks",
    "work_products",
    "labels",
    "agent_config_revisions",
];

/// Every table a snapshot carries, in the order they are copied.
pub(crate) const TABLES: &[&str] = &[
    "sm_meta",
    "companies",
    "agents",
    "issues",
    "runs",
    "credentials",
    "comments",
    "activity",
    "idempotency",
    "wakes",
    "workers",
    "budget_policies",
    "cost_events",
    "budget_incidents",
    "memory_entries",
    "memory_documents",
    "memory_live",
    "memory_company_live",
    "routines",
    "routine_triggers",
    "routine_runs",
    "agent_homes",
    "home_chunks",
    "approvals",
    "goals",
    "projects",
    "skills",
    "issue_documents",
    "document_revisions",
    "issue_interactions",
    "issue_attachments",
    "attachment_chunks",
    "work_products",
    "labels",
    "agent_config_revisions",
];

/// Every row of `table`, parsed from its `data` column. A row that does not parse is named by
/// its table and rowid, so an operator can find it with the `sqlite3` shell.
async fn load_json<T: serde::de::DeserializeOwned>(
    conn: &mut SqliteConnection,
    table: &'static str,
) -> Result<Vec<T>, Error> {
    let rows = sqlx::query(&format!("SELECT rowid, data FROM {table}"))
        .fetch_all(&mut *conn)
        .await
        .map_err(Error::sql("load state"))?;
    rows.iter().map(|row| parse_row(table, row)).collect()
}

fn parse_row<T: serde::de::DeserializeOwned>(
    table: &'static str,
    row: &SqliteRow,
) -> Result<T, Error> {
    serde_json::from_str(row.get(1)).map_err(|e| {
        let rowid: i64 = row.get(0);
        Error::corrupt("state row", format!("table {table}, rowid {rowid}: {e}"))
    })
}

/// Issues read per page while loading (a few in tests, so that their loads cross pages).
const ISSUES_PER_PAGE: i64 = if cfg!(test) { 3 } else { 10_000 };

/// Loads the in-memory copy of the state machine from its tables. With `closed_from`, closed
/// issues are read back from there when asked (`roost_core::issue_map`), and the load lets
/// each go as soon as it is indexed: issues come a page at a time, so a load never holds
/// every issue (at 10^6 issues, about 700 MB of row text and 1.2 GB of issues at once).
/// Callers run it inside one read transaction (`state_machine::load`, `BulkDb::load_state`), so
/// that every table and page of issues, and what they read with it, come from one moment.
pub(crate) async fn load_state(
    conn: &mut SqliteConnection,
    closed_from: Option<Arc<dyn IssueRows>>,
) -> Result<State, Error> {
    let companies = load_json(conn, "companies").await?;
    let agents = load_json(conn, "agents").await?;
    let runs = load_json(conn, "runs").await?;
    let credentials = load_json(conn, "credentials").await?;
    let remembered = load_json(conn, "idempotency").await?;
    let wakes = load_json(conn, "wakes").await?;
    let workers = load_json(conn, "workers").await?;
    let budget_policies = load_json(conn, "budget_policies").await?;
    let cost_events = load_json(conn, "cost_events").await?;
    let budget_incidents = load_json(conn, "budget_incidents").await?;
    let memory_entries = load_json(conn, "memory_entries").await?;
    let memory_documents = load_json(conn, "memory_documents").await?;
    let memory_live = load_json(conn, "memory_live").await?;
    let memory_company_live = load_json(conn, "memory_company_live").await?;
    let routines = load_json(conn, "routines").await?;
    let routine_triggers = load_json(conn, "routine_triggers").await?;
    let routine_runs = load_json(conn, "routine_runs").await?;
    // A chunk's bytes stay on disk: only its metadata is in memory.
    let home_chunks = load_json(conn, "home_chunks").await?;
    let agent_homes = load_json(conn, "agent_homes").await?;
    let approvals = load_json(conn, "approvals").await?;
    let goals = load_json(conn, "goals").await?;
    let projects = load_json(conn, "projects").await?;
    let skills = load_json(conn, "skills").await?;
    let labels = load_json(conn, "labels").await?;
    // A revision's body stays on disk: memory keeps each document's summary.
    let issue_documents = load_json(conn, "issue_documents").await?;
    // An attachment's bytes stay on disk: memory keeps its summary, and the chunks of uploads
    // in progress.
    let issue_attachments = load_json(conn, "issue_attachments").await?;
    let attachment_chunks = sqlx::query(
        "SELECT rowid, data FROM attachment_chunks \
         WHERE attachment_id NOT IN (SELECT id FROM issue_attachments)",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(Error::sql("load state"))?
    .iter()
    .map(|row| parse_row("attachment_chunks", row))
    .collect::<Result<Vec<_>, _>>()?;
    let work_products = load_json(conn, "work_products").await?;
    // Answered interactions stay on disk: memory keeps the pending ones.
    let pending_interactions =
        sqlx::query("SELECT rowid, data FROM issue_interactions WHERE status = 'pending'")
            .fetch_all(&mut *conn)
            .await
            .map_err(Error::sql("load state"))?
            .iter()
            .map(|row| parse_row("issue_interactions", row))
            .collect::<Result<Vec<_>, _>>()?;
    let comment_rows = sqlx::query(
        "SELECT id, issue_id, company_id, json_extract(data, '$.deletedAt') IS NOT NULL \
         FROM comments",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(Error::sql("load comments"))?;
    let comments = comment_rows
        .iter()
        .map(|r| {
            (
                r.get::<String, _>(0),
                CommentRef {
                    issue_id: r.get(1),
                    company_id: r.get(2),
                    deleted: r.get(3),
                },
            )
        })
        .collect();
    let head = sqlx::query("SELECT seq, hash FROM activity ORDER BY seq DESC LIMIT 1")
        .fetch_optional(&mut *conn)
        .await
        .map_err(Error::sql("load activity head"))?;
    let (seq, hash) = match head {
        Some(r) => (r.get::<i64, _>(0) as u64, Some(r.get::<String, _>(1))),
        None => (0, None),
    };
    let mut state = State::from_rows(StateRows {
        companies,
        agents,
        issues: Vec::new(),
        runs,
        credentials,
        comments,
        remembered,
        wakes,
        workers,
        budget_policies,
        cost_events,
        budget_incidents,
        memory_entries,
        memory_documents,
        memory_live,
        memory_company_live,
        home_chunks,
        agent_homes,
        approvals,
        goals,
        projects,
        skills,
        labels,
        issue_documents,
        issue_attachments,
        attachment_chunks,
        work_products,
        pending_interactions,
        activity_seq: seq,
        activity_head: hash,
    });
    state.load_routines(routines, routine_triggers, routine_runs);
    if let Some(rows) = closed_from {
        state.read_closed_issues_from(rows);
    }
    let mut after: i64 = 0;
    loop {
        let page =
            sqlx::query("SELECT rowid, data FROM issues WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")
                .bind(after)
                .bind(ISSUES_PER_PAGE)
                .fetch_all(&mut *conn)
                .await
                .map_err(Error::sql("load issues"))?;
        let Some(last) = page.last() else { break };
        after = last.get(0);
        for row in &page {
            state.load_issue(parse_row("issues", row)?);
        }
    }
    Ok(state)
}

pub(crate) fn activity_from_row(row: &SqliteRow) -> Result<ActivityEntry, Error> {
    let details: String = row.get("details");
    Ok(ActivityEntry {
        seq: row.get::<i64, _>("seq") as u64,
        log_index: row.get::<i64, _>("log_index") as u64,
        company_id: row.get("company_id"),
        at: Timestamp(row.get("at")),
        actor_type: row.get("actor_type"),
        actor_id: row.get("actor_id"),
        credential_id: row.get("credential_id"),
        run_id: row.get("run_id"),
        action: row.get("action"),
        entity_type: row.get("entity_type"),
        entity_id: row.get("entity_id"),
        details: serde_json::from_str(&details)
            .map_err(|e| Error::corrupt("activity details", e))?,
        prev_hash: row.get("prev_hash"),
        hash: row.get("hash"),
    })
}
