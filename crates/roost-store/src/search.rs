//! Recall: full-text search over what an agent remembers, with SQLite FTS5
//! and its bm25 ranking (the bundled SQLite that rusqlite and sqlx link is built with FTS5).
//!
//! The index is derived from replicated rows, on every node: it is written in the same
//! transaction as the rows it follows (`row_batch.rs`), rebuilt from them when `state.db` has
//! none or an older one (a data dir made before it existed) and after a snapshot is copied in
//! (snapshots carry only the tables of `rows::TABLES`, never the index). What it holds:
//! - every memory log entry (its `what`, `did`, `next` and errors);
//! - the current version of each agent-scope document (`MEMORY.md`, `STATE.md`);
//! - every comment, with its issue and author: a search keeps those of issues of the agent's
//!   company that the agent is assigned to now or has commented on (a deleted issue's comments
//!   leave the index with it).
//!
//! `memory_search_rows` keys each indexed text (`entry:<id>`, `document:<agent>/<name>`,
//! `comment:<id>`) and holds what a search filters on; the FTS5 table `memory_search` holds
//! the text under the same rowid, so replacing or dropping one text is two lookups by key.
//!
//! Whose a text is lives in the FTS5 index too: its `scope` column holds one token per text
//! ([`scope_token`]: the company and agent of an entry or document, the company and issue of a
//! comment), and a search matches `scope : (<the agent's> OR <its issues'>) AND body : (...)`,
//! so FTS5 walks only that agent's postings, skipping the rest of each word's list, instead
//! of every agent's texts holding the words (BENCHMARKS.md "Agent memory").

use roost_core::views::{MemoryHitKind, MemoryRanking, MemorySearchHit};
use roost_core::{Comment, Timestamp};
use rusqlite::OptionalExtension;
use sqlx::Row;

use crate::error::Error;

/// The index's version in `sm_meta` (`search_index`): a `state.db` without it, or with another,
/// is reindexed when opened. Raise it when what is indexed or how changes.
const INDEX_VERSION: &str = "2";

/// The FTS5 table (rows.rs `SCHEMA` creates the same): `body` the text, `scope` its
/// [`scope_token`]. Version 1 had `body` only: [`rebuild`] drops and creates it again.
pub(crate) const CREATE_FTS: &str = "CREATE VIRTUAL TABLE IF NOT EXISTS memory_search \
    USING fts5(body, scope, tokenize = 'porter unicode61 remove_diacritics 2');";

/// The token naming whose a text is: `a` (an agent's entry or document) or `i` (a comment on
/// an issue), the company id and the agent's or issue's id in hex, and a final `0`. Hex and
/// the separating `x` keep it one Unicode word; ending in a digit, Porter stemming leaves it
/// as it is.
pub(crate) fn scope_token(kind: char, company_id: &str, id: &str) -> String {
    use std::fmt::Write;
    let mut token = String::with_capacity(3 + 2 * (company_id.len() + id.len()));
    token.push(kind);
    for b in company_id.bytes() {
        let _ = write!(token, "{b:02x}");
    }
    token.push('x');
    for b in id.bytes() {
        let _ = write!(token, "{b:02x}");
    }
    token.push('0');
    token
}

/// Longest query text accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;

/// Refuses a search text past [`MAX_QUERY_CHARS`] (memory's search and an issue list's `q`).
pub fn check_query_len(text: &str) -> Result<(), String> {
    let chars = text.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(format!(
            "the query is {chars} characters long; at most {MAX_QUERY_CHARS} are searched"
        ));
    }
    Ok(())
}

/// One text in the index.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SearchRow {
    pub key: String,
    pub kind: MemoryHitKind,
    /// The entry id, the document name, the comment id.
    pub ref_id: String,
    pub company_id: String,
    /// The entry's or document's agent; a comment's author agent (none for a user).
    pub agent_id: Option<String>,
    pub issue_id: Option<String>,
    pub created_at: Timestamp,
    pub body: String,
}

impl SearchRow {
    /// Its [`scope_token`].
    fn scope(&self) -> String {
        match (self.kind, &self.agent_id, &self.issue_id) {
            (MemoryHitKind::Comment, _, Some(issue)) => scope_token('i', &self.company_id, issue),
            (_, Some(agent), _) => scope_token('a', &self.company_id, agent),
            _ => String::new(),
        }
    }

    pub fn entry_key(id: &str) -> String {
        format!("entry:{id}")
    }

    /// An entry of an agent's own log; the company's shared log is not indexed, as its
    /// shared documents are not (recall searches an agent's own memory).
    pub fn entry(e: &roost_core::memory::MemoryEntry) -> Option<SearchRow> {
        if e.shared {
            return None;
        }
        let mut body = vec![e.what.as_str(), e.did.as_str(), e.next.as_str()];
        body.extend(e.errors.iter().map(String::as_str));
        Some(SearchRow {
            key: Self::entry_key(&e.id),
            kind: MemoryHitKind::Entry,
            ref_id: e.id.clone(),
            company_id: e.company_id.clone(),
            agent_id: Some(e.agent_id.clone()),
            issue_id: e.issue_id.clone(),
            created_at: e.created_at,
            body: body.join("\n"),
        })
    }

    /// The version `d` as its document's current text; company-scope documents are not indexed.
    pub fn document(d: &roost_core::memory::MemoryDocument) -> Option<SearchRow> {
        let agent = d.agent_id.as_ref()?;
        Some(SearchRow {
            key: format!("document:{agent}/{}", d.name),
            kind: MemoryHitKind::Document,
            ref_id: d.name.clone(),
            company_id: d.company_id.clone(),
            agent_id: Some(agent.clone()),
            issue_id: None,
            created_at: d.updated_at,
            body: d.content.clone(),
        })
    }

    /// None for a comment its author deleted: its text is gone, and an issue with only deleted
    /// comments of an agent is not one it "commented on" (`Scope::of`), on every node alike,
    /// whether it deleted the row's text or rebuilt the index from the emptied row.
    pub fn comment(c: &Comment) -> Option<SearchRow> {
        c.deleted_at.is_none().then(|| SearchRow {
            key: comment_key(&c.id),
            kind: MemoryHitKind::Comment,
            ref_id: c.id.clone(),
            company_id: c.company_id.clone(),
            agent_id: c.author_agent_id.clone(),
            issue_id: Some(c.issue_id.clone()),
            created_at: c.created_at,
            body: c.body.clone(),
        })
    }
}

/// The search index's key of comment `id`'s text.
pub(crate) fn comment_key(id: &str) -> String {
    format!("comment:{id}")
}

/// Drops the text under `key`, if indexed.
pub(crate) fn remove(conn: &rusqlite::Connection, key: &str) -> Result<(), Error> {
    let rowid: Option<i64> = conn
        .prepare_cached("SELECT rowid FROM memory_search_rows WHERE key = ?1")
        .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
        .map_err(Error::write("read search index"))?;
    if let Some(rowid) = rowid {
        for sql in [
            "DELETE FROM memory_search WHERE rowid = ?1",
            "DELETE FROM memory_search_rows WHERE rowid = ?1",
        ] {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute([rowid]))
                .map_err(Error::write("write search index"))?;
        }
    }
    Ok(())
}

/// Indexes `row`, replacing what its key held.
pub(crate) fn put(conn: &rusqlite::Connection, row: &SearchRow) -> Result<(), Error> {
    remove(conn, &row.key)?;
    conn.prepare_cached(
        "INSERT INTO memory_search_rows (key, kind, ref_id, company_id, agent_id, issue_id, \
         created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(rusqlite::params![
            row.key,
            row.kind.as_str(),
            row.ref_id,
            row.company_id,
            row.agent_id,
            row.issue_id,
            row.created_at.millis(),
        ])
    })
    .map_err(Error::write("write search index"))?;
    let rowid = conn.last_insert_rowid();
    conn.prepare_cached("INSERT INTO memory_search (rowid, body, scope) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(rusqlite::params![rowid, row.body, row.scope()]))
        .map_err(Error::write("write search index"))?;
    Ok(())
}

/// Drops the comments of a deleted issue.
pub(crate) fn remove_issue_comments(
    conn: &rusqlite::Connection,
    issue_id: &str,
) -> Result<(), Error> {
    for sql in [
        "DELETE FROM memory_search WHERE rowid IN \
         (SELECT rowid FROM memory_search_rows WHERE issue_id = ?1 AND kind = 'comment')",
        "DELETE FROM memory_search_rows WHERE issue_id = ?1 AND kind = 'comment'",
    ] {
        conn.prepare_cached(sql)
            .and_then(|mut s| s.execute([issue_id]))
            .map_err(Error::write("write search index"))?;
    }
    Ok(())
}

/// Reindexes unless `state.db` holds this version of the index already.
pub(crate) fn ensure(conn: &rusqlite::Connection) -> Result<(), Error> {
    let found: Option<String> = conn
        .query_row(
            "SELECT value FROM sm_meta WHERE key = 'search_index'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(Error::write("read search index version"))?;
    if found.as_deref() == Some(INDEX_VERSION) {
        return Ok(());
    }
    tracing::info!("building the memory search index from state.db's rows");
    let tx = conn
        .unchecked_transaction()
        .map_err(Error::write("begin reindex"))?;
    rebuild(&tx)?;
    tx.commit().map_err(Error::write("commit reindex"))
}

/// Empties the index and fills it again from the rows (inside the caller's transaction), then
/// records its version. `sm_meta` may have come from a snapshot: the version is written here.
/// The FTS5 table is dropped and created again, so one of an older shape gets this one.
pub(crate) fn rebuild(conn: &rusqlite::Connection) -> Result<(), Error> {
    conn.execute_batch("DROP TABLE IF EXISTS main.memory_search; DELETE FROM memory_search_rows;")
        .map_err(Error::write("empty search index"))?;
    conn.execute_batch(CREATE_FTS)
        .map_err(Error::write("create search index"))?;
    for_each_json(conn, "SELECT data FROM memory_entries", |e| {
        SearchRow::entry(&e).map_or(Ok(()), |row| put(conn, &row))
    })?;
    // Versions of a scope and name sort oldest first by key: the last put of a name wins.
    for_each_json(
        conn,
        "SELECT data FROM memory_documents WHERE key LIKE 'agent:%' ORDER BY key",
        |d| match SearchRow::document(&d) {
            Some(row) => put(conn, &row),
            None => Ok(()),
        },
    )?;
    for_each_json(conn, "SELECT data FROM comments ORDER BY seq", |c| {
        SearchRow::comment(&c).map_or(Ok(()), |row| put(conn, &row))
    })?;
    conn.execute(
        "INSERT INTO sm_meta (key, value) VALUES ('search_index', ?1) \
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [INDEX_VERSION],
    )
    .map_err(Error::write("write search index version"))?;
    Ok(())
}

fn for_each_json<T: serde::de::DeserializeOwned>(
    conn: &rusqlite::Connection,
    sql: &str,
    mut f: impl FnMut(T) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut statement = conn.prepare(sql).map_err(Error::write("read rows"))?;
    let mut rows = statement.query([]).map_err(Error::write("read rows"))?;
    while let Some(row) = rows.next().map_err(Error::write("read rows"))? {
        let text: String = row.get(0).map_err(Error::write("read rows"))?;
        f(serde_json::from_str(&text).map_err(|e| Error::corrupt("state row", e))?)?;
    }
    Ok(())
}

/// A user's query text as an FTS5 expression: every word (a run of letters and digits) a
/// quoted term, all of them required ([`SearchQuery::parse`]) or any of them
/// ([`SearchQuery::parse_any`], ranked by how many and how rare). Nothing typed reaches FTS5's syntax (`"`, `*`, `NEAR`,
/// `-`, `:`, parentheses are separators or quoted words), so any text is a valid expression,
/// or none (a text without words, which finds nothing), or too long (a sentence saying so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchQuery(Option<String>);

impl SearchQuery {
    pub fn parse(text: &str) -> Result<SearchQuery, String> {
        Self::parse_joined(text, " AND ")
    }

    /// As [`SearchQuery::parse`], a hit needing any one of the words (auto-recall asks with a
    /// whole issue title, which no single text holds every word of).
    pub fn parse_any(text: &str) -> Result<SearchQuery, String> {
        Self::parse_joined(text, " OR ")
    }

    fn parse_joined(text: &str, join: &str) -> Result<SearchQuery, String> {
        check_query_len(text)?;
        let terms: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| format!("\"{w}\""))
            .collect();
        Ok(SearchQuery((!terms.is_empty()).then(|| terms.join(join))))
    }

    /// The FTS5 expression; `None` for a text without words.
    pub fn expression(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// A hit with its whole text (hybrid ranking embeds it: roost-server/src/recall/).
#[derive(Clone, Debug, PartialEq)]
pub struct SearchText {
    pub hit: MemorySearchHit,
    pub body: String,
}

/// Whose texts a search may find: `agent_id`'s entries and documents, and the comments of
/// `issue_ids` (the issues it is assigned to and those it commented on), within `company_id`.
struct Scope {
    company_id: String,
    agent_id: String,
    issue_ids: Vec<String>,
}

impl Scope {
    async fn of(
        pool: &sqlx::SqlitePool,
        company_id: &str,
        agent_id: &str,
        assigned_issue_ids: &[String],
    ) -> Result<Scope, Error> {
        let commented: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT issue_id FROM memory_search_rows \
             WHERE agent_id = ?1 AND kind = 'comment' AND company_id = ?2",
        )
        .bind(agent_id)
        .bind(company_id)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("search memory"))?;
        let mut issue_ids: Vec<String> = assigned_issue_ids.to_vec();
        issue_ids.extend(commented);
        issue_ids.sort();
        issue_ids.dedup();
        Ok(Scope {
            company_id: company_id.to_string(),
            agent_id: agent_id.to_string(),
            issue_ids,
        })
    }

    /// `scope : ("<agent token>" OR "<issue token>" ...)`.
    fn expression(&self) -> String {
        let mut tokens = vec![format!(
            "\"{}\"",
            scope_token('a', &self.company_id, &self.agent_id)
        )];
        tokens.extend(
            self.issue_ids
                .iter()
                .map(|i| format!("\"{}\"", scope_token('i', &self.company_id, i))),
        );
        format!("scope : ({})", tokens.join(" OR "))
    }

    fn issue_ids_json(&self) -> Result<String, Error> {
        serde_json::to_string(&self.issue_ids).map_err(|e| Error::corrupt("issue ids", e))
    }
}

/// The rows a scope admits, on `memory_search_rows r` (?2 company, ?3 agent, ?4 issue ids):
/// the same filter as the scope tokens, kept so a search never relies on tokens alone.
const IN_SCOPE: &str = "r.company_id = ?2 \
    AND ((r.kind IN ('entry', 'document') AND r.agent_id = ?3) \
      OR (r.kind = 'comment' AND r.issue_id IN (SELECT value FROM json_each(?4))))";

/// The best `limit` hits for `query` in `agent_id`'s memory and the comments of the issues
/// `issue_ids` names or the agent commented on, within `company_id`.
pub(crate) async fn search(
    pool: &sqlx::SqlitePool,
    company_id: &str,
    agent_id: &str,
    assigned_issue_ids: &[String],
    query: &SearchQuery,
    limit: u32,
) -> Result<Vec<MemorySearchHit>, Error> {
    let scope = Scope::of(pool, company_id, agent_id, assigned_issue_ids).await?;
    Ok(matching(pool, &scope, query, limit, false)
        .await?
        .into_iter()
        .map(|t| t.hit)
        .collect())
}

/// As [`search`], each hit with its text.
pub(crate) async fn search_texts(
    pool: &sqlx::SqlitePool,
    company_id: &str,
    agent_id: &str,
    assigned_issue_ids: &[String],
    query: &SearchQuery,
    limit: u32,
) -> Result<Vec<SearchText>, Error> {
    let scope = Scope::of(pool, company_id, agent_id, assigned_issue_ids).await?;
    matching(pool, &scope, query, limit, true).await
}

async fn matching(
    pool: &sqlx::SqlitePool,
    scope: &Scope,
    query: &SearchQuery,
    limit: u32,
    with_body: bool,
) -> Result<Vec<SearchText>, Error> {
    let Some(words) = query.expression() else {
        return Ok(Vec::new());
    };
    let expression = format!("{} AND body : ({words})", scope.expression());
    // bm25 is lower for better matches; the scope column weighs nothing in it. `CROSS JOIN`
    // keeps the FTS5 table the outer loop whatever the planner thinks: snippet() and bm25()
    // work only on its MATCH cursor.
    let body = if with_body {
        "memory_search.body"
    } else {
        "''"
    };
    let sql = format!(
        "SELECT r.kind, r.ref_id, r.issue_id, r.created_at, \
         snippet(memory_search, 0, '[', ']', '…', 16) AS snippet, \
         bm25(memory_search, 1.0, 0.0) AS rank, {body} \
         FROM memory_search CROSS JOIN memory_search_rows r ON r.rowid = memory_search.rowid \
         WHERE memory_search MATCH ?1 AND {IN_SCOPE} \
         ORDER BY rank, r.created_at DESC LIMIT ?5"
    );
    let rows = sqlx::query(&sql)
        .bind(&expression)
        .bind(&scope.company_id)
        .bind(&scope.agent_id)
        .bind(scope.issue_ids_json()?)
        .bind(limit.clamp(1, 1000) as i64)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("search memory"))?;
    rows.iter()
        .map(|r| {
            Ok(SearchText {
                hit: hit(r, r.get(4), -r.get::<f64, _>(5))?,
                body: r.get(6),
            })
        })
        .collect()
}

/// The newest `limit` texts in the agent's scope (as [`search`] would search), whatever they
/// say: hybrid ranking's candidates beyond the lexical ones. Score 0, the text's start as its
/// snippet.
pub(crate) async fn recent_texts(
    pool: &sqlx::SqlitePool,
    company_id: &str,
    agent_id: &str,
    assigned_issue_ids: &[String],
    limit: u32,
) -> Result<Vec<SearchText>, Error> {
    let scope = Scope::of(pool, company_id, agent_id, assigned_issue_ids).await?;
    let sql = format!(
        "SELECT r.kind, r.ref_id, r.issue_id, r.created_at, \
         (SELECT body FROM memory_search WHERE rowid = r.rowid) \
         FROM memory_search_rows r WHERE {IN_SCOPE} \
         ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?5"
    );
    let rows = sqlx::query(&sql)
        .bind("")
        .bind(&scope.company_id)
        .bind(&scope.agent_id)
        .bind(scope.issue_ids_json()?)
        .bind(limit.clamp(1, 1000) as i64)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("recent memory"))?;
    rows.iter()
        .map(|r| {
            let body: Option<String> = r.get(4);
            let body = body.unwrap_or_default();
            Ok(SearchText {
                hit: hit(r, opening(&body), 0.0)?,
                body,
            })
        })
        .collect()
}

/// The first 160 characters of `body`, with `…` if cut.
fn opening(body: &str) -> String {
    match body.char_indices().nth(160) {
        Some((at, _)) => format!("{}…", &body[..at]),
        None => body.to_string(),
    }
}

fn hit(r: &sqlx::sqlite::SqliteRow, snippet: String, score: f64) -> Result<MemorySearchHit, Error> {
    let kind: String = r.get(0);
    Ok(MemorySearchHit {
        kind: MemoryHitKind::parse(&kind)
            .ok_or_else(|| Error::corrupt("search row", format!("kind {kind:?}")))?,
        id: r.get(1),
        issue_id: r.get(2),
        created_at: Timestamp(r.get(3)),
        snippet,
        score,
        ranking: MemoryRanking::Lexical,
        vector_score: None,
    })
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
