//! Read access for the API: the in-memory entities, and queries for what lives only in SQLite
//! (comment bodies, the activity log).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use roost_core::activity::{ActivityEntry, ChainBreak, ChainSummary, ChainVerifier};
use roost_core::agent_revision::AgentConfigRevision;
use roost_core::{Comment, State};
use sqlx::sqlite::SqlitePool;
use sqlx::Row;
use tokio::sync::watch;

use crate::error::Error;
use crate::rows::activity_from_row;
use crate::state_writer::StateWriter;

/// The most revisions one list of a document's history holds (the newest): each may hold
/// 512 KiB, and a list is one answer.
pub const MAX_REVISIONS_LISTED: i64 = 100;

/// The most interactions one list of an issue's holds (its newest, oldest first).
pub const MAX_INTERACTIONS_LISTED: i64 = 500;

/// A cheap, cloneable handle for reading a node's state.
#[derive(Clone)]
pub struct StateReader {
    state: Arc<RwLock<State>>,
    /// The last (applied index, state hash) computed: hashing walks the whole state.
    hash_cache: Arc<std::sync::Mutex<Option<(u64, String)>>>,
    pool: SqlitePool,
    /// Flushed before a query, so SQL sees every applied write (`state_writer.rs`).
    writer: StateWriter,
    applied: watch::Receiver<u64>,
    stats: crate::stats::StoreStats,
    /// Closed issues' rows, and whether a snapshot install is replacing them.
    issue_rows: Arc<crate::state_writer::IssueRowReader>,
}

/// Which entries of a company's activity to list; `None` matches any.
#[derive(Clone, Debug, Default)]
pub struct ActivityFilter {
    /// Entries an agent made (its actor).
    pub agent_id: Option<String>,
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
}

/// Which comments of an issue to list.
#[derive(Clone, Debug, Default)]
pub struct CommentQuery {
    /// Only comments after this comment id.
    pub after: Option<String>,
    pub descending: bool,
    pub limit: u32,
}

impl StateReader {
    pub(crate) fn new(
        state: Arc<RwLock<State>>,
        pool: SqlitePool,
        writer: StateWriter,
        applied: watch::Receiver<u64>,
        stats: crate::stats::StoreStats,
        issue_rows: Arc<crate::state_writer::IssueRowReader>,
    ) -> Self {
        StateReader {
            state,
            hash_cache: Arc::default(),
            pool,
            writer,
            applied,
            stats,
            issue_rows,
        }
    }

    /// How long applies and snapshot builds take on this node (`stats.rs`).
    pub fn stats(&self) -> &crate::stats::StoreStats {
        &self.stats
    }

    /// Runs `f` on the in-memory state. Keep `f` short: apply waits for it.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let guard = self.state.read().unwrap_or_else(|p| p.into_inner());
        f(&guard)
    }

    /// Commits `state.db`'s open transaction: a node that stops calls it last, so the file
    /// holds every applied entry and a restart replays nothing (`state_writer.rs`).
    pub fn flush(&self) -> Result<(), Error> {
        self.writer.flush()
    }

    /// The pool for SQL reads, after committing what apply left in the open transaction.
    fn flushed(&self) -> Result<&SqlitePool, Error> {
        self.writer.flush()?;
        Ok(&self.pool)
    }

    /// The index of the last entry applied to this node's state machine.
    pub fn applied_index(&self) -> u64 {
        *self.applied.borrow()
    }

    /// The state hash and the applied index it belongs to, computed at most once per index.
    pub fn state_hash(&self) -> (u64, String) {
        let index = self.read(|s| s.applied_index);
        let cached = self
            .hash_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((i, h)) = cached.filter(|(i, _)| *i == index) {
            return (i, h);
        }
        // A step at a time, releasing the state's lock in between: apply, and every reader
        // queued behind a waiting apply, never wait for more than one step.
        // Not across a snapshot install, whose copy replaces the rows the old state's closed
        // issues are read from: a hash taken then would mix two states under one index.
        let fresh = crate::db::blocking(|| loop {
            let installs = self.issue_rows.after_installs();
            let hashed = loop {
                let step = self.read(|s| {
                    s.hash_step(HASH_ROWS_PER_STEP)
                        .map(|h| (s.applied_index, h))
                });
                if let Some(done) = step {
                    break done;
                }
            };
            if self.issue_rows.after_installs() == installs {
                break hashed;
            }
        });
        // Not held across the computation, which may wait out an install: two callers that
        // miss the cache at once hash twice, harmlessly.
        *self.hash_cache.lock().unwrap_or_else(|p| p.into_inner()) = Some(fresh.clone());
        fresh
    }

    /// A watch of the applied index, for loops that act on every change.
    pub fn applied_watch(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }

    /// Waits until this node has applied `index`, or the deadline passes.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        let mut rx = self.applied.clone();
        tokio::time::timeout(timeout, rx.wait_for(|applied| *applied >= index))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub async fn comments(
        &self,
        issue_id: &str,
        query: &CommentQuery,
    ) -> Result<Vec<Comment>, Error> {
        let pool = self.flushed()?;
        let after_seq: i64 = match &query.after {
            Some(id) => sqlx::query("SELECT seq FROM comments WHERE id = ? AND issue_id = ?")
                .bind(id)
                .bind(issue_id)
                .fetch_optional(pool)
                .await
                .map_err(Error::sql("find comment cursor"))?
                .map(|r| r.get::<i64, _>(0))
                .unwrap_or(0),
            None => 0,
        };
        let order = if query.descending { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT data FROM comments WHERE issue_id = ? AND seq > ? ORDER BY seq {order} LIMIT ?"
        );
        let rows = sqlx::query(&sql)
            .bind(issue_id)
            .bind(after_seq)
            .bind(query.limit.clamp(1, 1000) as i64)
            .fetch_all(pool)
            .await
            .map_err(Error::sql("list comments"))?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get::<&str, _>(0)).map_err(|e| Error::corrupt("comment", e))
            })
            .collect()
    }

    /// A search of comments for an issue list's `q`, after one flush: every write applied
    /// before it is visible to each of its queries, and apply's open transaction is committed
    /// once, not once per query.
    pub fn comment_search(&self) -> Result<CommentSearch<'_>, Error> {
        Ok(CommentSearch {
            pool: self.flushed()?,
        })
    }

    pub async fn comment(&self, comment_id: &str) -> Result<Option<Comment>, Error> {
        let pool = self.flushed()?;
        let row = sqlx::query("SELECT data FROM comments WHERE id = ?")
            .bind(comment_id)
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get comment"))?;
        row.map(|r| {
            serde_json::from_str(r.get::<&str, _>(0)).map_err(|e| Error::corrupt("comment", e))
        })
        .transpose()
    }

    /// One revision of an issue document, with its body.
    pub async fn document_revision(
        &self,
        revision_id: &str,
    ) -> Result<Option<roost_core::document::DocumentRevision>, Error> {
        let pool = self.flushed()?;
        let row = sqlx::query("SELECT data FROM document_revisions WHERE id = ?")
            .bind(revision_id)
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get document revision"))?;
        row.map(|r| {
            serde_json::from_str(r.get::<&str, _>(0))
                .map_err(|e| Error::corrupt("document revision", e))
        })
        .transpose()
    }

    /// An issue document's newest revisions, newest first: at most [`MAX_REVISIONS_LISTED`]
    /// (each may hold 512 KiB).
    pub async fn document_revisions(
        &self,
        document_id: &str,
    ) -> Result<Vec<roost_core::document::DocumentRevision>, Error> {
        let pool = self.flushed()?;
        let rows = sqlx::query(
            "SELECT data FROM document_revisions WHERE document_id = ? ORDER BY revision_number DESC LIMIT ?",
        )
        .bind(document_id)
        .bind(MAX_REVISIONS_LISTED)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("list document revisions"))?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get::<&str, _>(0))
                    .map_err(|e| Error::corrupt("document revision", e))
            })
            .collect()
    }

    /// One of an agent's config revisions (`roost_core::agent_revision`).
    pub async fn agent_config_revision(
        &self,
        revision_id: &str,
    ) -> Result<Option<AgentConfigRevision>, Error> {
        let pool = self.flushed()?;
        let row = sqlx::query("SELECT data FROM agent_config_revisions WHERE id = ?")
            .bind(revision_id)
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get agent config revision"))?;
        row.map(|r| {
            serde_json::from_str(r.get::<&str, _>(0))
                .map_err(|e| Error::corrupt("agent config revision", e))
        })
        .transpose()
    }

    /// An agent's newest config revisions, newest first: at most [`MAX_REVISIONS_LISTED`].
    pub async fn agent_config_revisions(
        &self,
        agent_id: &str,
    ) -> Result<Vec<AgentConfigRevision>, Error> {
        let pool = self.flushed()?;
        let rows = sqlx::query(
            "SELECT data FROM agent_config_revisions WHERE agent_id = ? ORDER BY seq DESC LIMIT ?",
        )
        .bind(agent_id)
        .bind(MAX_REVISIONS_LISTED)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("list agent config revisions"))?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get::<&str, _>(0))
                    .map_err(|e| Error::corrupt("agent config revision", e))
            })
            .collect()
    }

    /// An issue's interactions, answered or not, oldest first: its newest
    /// [`MAX_INTERACTIONS_LISTED`].
    pub async fn interactions_of_issue(
        &self,
        issue_id: &str,
    ) -> Result<Vec<roost_core::interaction::Interaction>, Error> {
        let pool = self.flushed()?;
        let rows = sqlx::query(
            "SELECT data FROM (SELECT rowid, created_at, data FROM issue_interactions WHERE issue_id = ? \
             ORDER BY created_at DESC, rowid DESC LIMIT ?) ORDER BY created_at, rowid",
        )
        .bind(issue_id)
        .bind(MAX_INTERACTIONS_LISTED)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("list interactions"))?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get::<&str, _>(0))
                    .map_err(|e| Error::corrupt("interaction", e))
            })
            .collect()
    }

    /// One interaction, by its id, or by its issue and idempotency key.
    pub async fn interaction(
        &self,
        by: InteractionLookup<'_>,
    ) -> Result<Option<roost_core::interaction::Interaction>, Error> {
        let pool = self.flushed()?;
        let query = match by {
            InteractionLookup::Id(id) => {
                sqlx::query("SELECT data FROM issue_interactions WHERE id = ?").bind(id)
            }
            InteractionLookup::Key { issue_id, key } => sqlx::query(
                "SELECT data FROM issue_interactions WHERE issue_id = ? AND idempotency_key = ? \
                 ORDER BY created_at LIMIT 1",
            )
            .bind(issue_id)
            .bind(key),
        };
        let row = query
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get interaction"))?;
        row.map(|r| {
            serde_json::from_str(r.get::<&str, _>(0)).map_err(|e| Error::corrupt("interaction", e))
        })
        .transpose()
    }

    /// The first outcome of the remembered (scoped) idempotency key `key` first used at `at`,
    /// which memory does not keep (`roost_core::idempotency::Seen`); `None` once that use has
    /// expired (the row is gone, or holds a later use of the key). Sees every applied write
    /// (flushes first).
    pub async fn remembered_outcome(
        &self,
        key: &str,
        at: roost_core::Timestamp,
    ) -> Result<Option<Result<roost_core::Outcome, roost_core::DomainError>>, Error> {
        let pool = self.flushed()?;
        let row = sqlx::query("SELECT data FROM idempotency WHERE key = ?")
            .bind(key)
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get idempotency key"))?;
        row.map(|r| {
            serde_json::from_str::<roost_core::idempotency::Remembered>(r.get::<&str, _>(0))
                .map_err(|e| Error::corrupt("idempotency key", e))
        })
        .transpose()
        .map(|kept| kept.filter(|k| k.at == at).map(|k| k.outcome))
    }

    /// An issue attachment's bytes (its chunks in order), or the `len` of them from `start`
    /// (a ranged download): `None` once it is removed. Sees every applied write (flushes first).
    pub async fn attachment_bytes(
        &self,
        id: &str,
        range: Option<(u64, u64)>,
    ) -> Result<Option<Vec<u8>>, Error> {
        let pool = self.flushed()?;
        let rows =
            sqlx::query("SELECT bytes FROM attachment_chunks WHERE attachment_id = ? ORDER BY key")
                .bind(id)
                .fetch_all(pool)
                .await
                .map_err(Error::sql("get attachment bytes"))?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut bytes = Vec::new();
        for row in &rows {
            bytes.extend_from_slice(row.get::<&[u8], _>(0));
        }
        Ok(Some(match range {
            Some((start, len)) => {
                let start = usize::try_from(start)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
                bytes[start..end.min(bytes.len())].to_vec()
            }
            None => bytes,
        }))
    }

    /// The bytes of the home chunk `key` (`roost_core::home::chunk_key`), if stored. Sees every
    /// applied write (flushes first).
    pub async fn home_chunk(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let pool = self.flushed()?;
        let row = sqlx::query("SELECT bytes FROM home_chunks WHERE key = ?")
            .bind(key)
            .fetch_optional(pool)
            .await
            .map_err(Error::sql("get home chunk"))?;
        Ok(row.map(|r| r.get::<Vec<u8>, _>(0)))
    }

    /// Full-text search (`search.rs`) over `agent_id`'s log entries and documents and the
    /// comments of the issues of `company_id` it is assigned to or has commented on, best
    /// first, at most `limit` (1 to 1000) hits. Sees every applied write (flushes first).
    pub async fn search_memory(
        &self,
        company_id: &str,
        agent_id: &str,
        query: &crate::search::SearchQuery,
        limit: u32,
    ) -> Result<Vec<roost_core::views::MemorySearchHit>, Error> {
        let assigned = self.assigned_issue_ids(company_id, agent_id);
        let pool = self.flushed()?;
        crate::search::search(pool, company_id, agent_id, &assigned, query, limit).await
    }

    /// The ids of the issues of `company_id` assigned to `agent_id`, read from the assignee
    /// index alone: most may be closed and in `state.db` only, and an agent is only ever
    /// assigned issues of its own company (`roost-core/src/rules/issue.rs`).
    fn assigned_issue_ids(&self, company_id: &str, agent_id: &str) -> Vec<String> {
        self.read(|s| match s.agents.get(agent_id) {
            Some(a) if a.company_id != company_id => Vec::new(),
            _ => s
                .issue_ids_assigned_to(agent_id)
                .map(str::to_string)
                .collect(),
        })
    }

    /// For hybrid ranking: as [`StateReader::search_memory`] with each hit's whole text, and
    /// the newest `recent` texts of the same scope whatever they say (`search.rs`).
    pub async fn search_memory_texts(
        &self,
        company_id: &str,
        agent_id: &str,
        query: &crate::search::SearchQuery,
        limit: u32,
        recent: u32,
    ) -> Result<(Vec<crate::SearchText>, Vec<crate::SearchText>), Error> {
        let assigned = self.assigned_issue_ids(company_id, agent_id);
        let pool = self.flushed()?;
        let found =
            crate::search::search_texts(pool, company_id, agent_id, &assigned, query, limit)
                .await?;
        let newest = if recent == 0 {
            Vec::new()
        } else {
            crate::search::recent_texts(pool, company_id, agent_id, &assigned, recent).await?
        };
        Ok((found, newest))
    }

    /// Activity of one company (or of every company), newest first, before `before_seq`.
    pub async fn activity(
        &self,
        company_id: Option<&str>,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, Error> {
        let pool = self.flushed()?;
        let before = before_seq.map(|s| s as i64).unwrap_or(i64::MAX);
        let limit = limit.clamp(1, 1000) as i64;
        let rows = match company_id {
            Some(c) => sqlx::query(
                "SELECT * FROM activity WHERE company_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            )
            .bind(c)
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await,
            None => {
                sqlx::query("SELECT * FROM activity WHERE seq < ? ORDER BY seq DESC LIMIT ?")
                    .bind(before)
                    .bind(limit)
                    .fetch_all(pool)
                    .await
            }
        }
        .map_err(Error::sql("list activity"))?;
        rows.iter().map(activity_from_row).collect()
    }

    /// Activity after `after_seq`, oldest first: of one company, or of every company. The
    /// event stream's read (`roost-server/src/api/events.rs`); `seq` is the same on every
    /// node, so a reader resumes on any node where it stopped on another.
    pub async fn activity_after(
        &self,
        company_id: Option<&str>,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, Error> {
        let pool = self.flushed()?;
        let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
        let limit = i64::from(limit.clamp(1, 1000));
        let rows = match company_id {
            Some(c) => sqlx::query(
                "SELECT * FROM activity WHERE company_id = ? AND seq > ? ORDER BY seq ASC LIMIT ?",
            )
            .bind(c)
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await,
            None => {
                sqlx::query("SELECT * FROM activity WHERE seq > ? ORDER BY seq ASC LIMIT ?")
                    .bind(after)
                    .bind(limit)
                    .fetch_all(pool)
                    .await
            }
        }
        .map_err(Error::sql("read activity"))?;
        rows.iter().map(activity_from_row).collect()
    }

    /// A company's activity, newest first, with only the entries `filter` matches.
    pub async fn activity_matching(
        &self,
        company_id: &str,
        filter: &ActivityFilter,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, Error> {
        let pool = self.flushed()?;
        let before = before_seq.map(|s| s as i64).unwrap_or(i64::MAX);
        let limit = limit.clamp(1, 1000) as i64;
        let rows = sqlx::query(
            "SELECT * FROM activity WHERE company_id = ? AND seq < ? \
             AND (? IS NULL OR (actor_type = 'agent' AND actor_id = ?)) \
             AND (? IS NULL OR entity_type = ?) AND (? IS NULL OR entity_id = ?) \
             ORDER BY seq DESC LIMIT ?",
        )
        .bind(company_id)
        .bind(before)
        .bind(&filter.agent_id)
        .bind(&filter.agent_id)
        .bind(&filter.entity_type)
        .bind(&filter.entity_type)
        .bind(&filter.entity_id)
        .bind(&filter.entity_id)
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(Error::sql("list activity"))?;
        rows.iter().map(activity_from_row).collect()
    }

    /// Verifies the whole activity chain from the stored rows, page by page.
    pub async fn verify_activity(&self) -> Result<Result<ChainSummary, ChainBreak>, Error> {
        let pool = self.flushed()?;
        const PAGE: i64 = 2000;
        let mut verifier = ChainVerifier::default();
        let mut after = 0i64;
        loop {
            let rows = sqlx::query("SELECT * FROM activity WHERE seq > ? ORDER BY seq ASC LIMIT ?")
                .bind(after)
                .bind(PAGE)
                .fetch_all(pool)
                .await
                .map_err(Error::sql("read activity"))?;
            for row in &rows {
                let entry = activity_from_row(row)?;
                if let Err(b) = verifier.push(&entry) {
                    return Ok(Err(b));
                }
                after = entry.seq as i64;
            }
            if (rows.len() as i64) < PAGE {
                return Ok(Ok(verifier.finish()));
            }
        }
    }
}

/// Rows rehashed per hold of the state's read lock: a few milliseconds for rows in memory,
/// about 27 ms for closed issues read back from `state.db` (27 µs each at 10^6 issues, BENCHMARKS.md
/// "Closed issues out of memory"). Apply waits for a step; at 10,000 a step of closed rows held
/// it for about 270 ms, on a node whose heartbeat is 30 ms.
const HASH_ROWS_PER_STEP: usize = 1_000;

/// How [`StateReader::interaction`] finds one.
#[derive(Clone, Copy, Debug)]
pub enum InteractionLookup<'a> {
    Id(&'a str),
    Key { issue_id: &'a str, key: &'a str },
}

/// Comment queries of one search ([`StateReader::comment_search`]).
pub struct CommentSearch<'a> {
    pool: &'a SqlitePool,
}

impl CommentSearch<'_> {
    /// Those of `issue_ids` with a comment whose body holds `text` in any case (as an issue
    /// list's `q` finds it in a title), read through the comments' index by issue. Only the
    /// issue ids come back: no comment body is loaded to be compared.
    pub async fn issues_with_text(
        &self,
        issue_ids: &[String],
        text: &str,
    ) -> Result<std::collections::HashSet<String>, Error> {
        if issue_ids.is_empty() || text.is_empty() {
            return Ok(Default::default());
        }
        let ids = serde_json::to_string(issue_ids).map_err(|e| Error::corrupt("issue ids", e))?;
        let rows = sqlx::query(
            "SELECT DISTINCT issue_id FROM comments \
             WHERE issue_id IN (SELECT value FROM json_each(?)) \
             AND json_extract(data, '$.body') GLOB ?",
        )
        .bind(ids)
        .bind(glob_any_case(text))
        .fetch_all(self.pool)
        .await
        .map_err(Error::sql("search comments"))?;
        Ok(rows.iter().map(|r| r.get::<String, _>(0)).collect())
    }
}

/// A GLOB pattern finding `text` anywhere in any case: each letter a class of its forms
/// (`[aA]`, `[üÜ]`: SQLite's `LIKE` folds ASCII letters only, GLOB classes take any), and
/// `*`, `?` and `[` in classes of their own, so that they match themselves.
fn glob_any_case(text: &str) -> String {
    let mut pattern = String::from("*");
    for c in text.chars() {
        let mut forms = vec![c];
        for fold in [
            c.to_lowercase().collect::<Vec<char>>(),
            c.to_uppercase().collect::<Vec<char>>(),
        ] {
            // A fold to several characters ("ß" to "SS") is no class of one character.
            if let [one] = fold.as_slice() {
                if !forms.contains(one) {
                    forms.push(*one);
                }
            }
        }
        if forms.len() == 1 && !matches!(c, '*' | '?' | '[') {
            pattern.push(c);
        } else {
            pattern.push('[');
            pattern.extend(forms);
            pattern.push(']');
        }
    }
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::glob_any_case;

    #[test]
    fn a_glob_finds_the_text_in_any_case_and_its_wildcards_as_themselves() {
        assert_eq!(glob_any_case("Ab"), "*[Aa][bB]*");
        assert_eq!(glob_any_case("1%0"), "*1%0*");
        assert_eq!(glob_any_case("a*?["), "*[aA][*][?][[]*");
        assert_eq!(glob_any_case("]^"), "*]^*");
        assert_eq!(glob_any_case("über"), "*[üÜ][bB][eE][rR]*");
        assert_eq!(glob_any_case("ß"), "*ß*");
    }
}
