//! The Raft log and vote in `raft-log.db`. Writes go through one writer thread that commits
//! whatever is queued in one fsynced transaction (`synchronous=FULL`, see [`crate::log_writer`]);
//! openraft is told an append is durable only after its transaction is on disk. Reads of the
//! recent tail of the log (appended, durable or not) are served from memory
//! ([`crate::log_tail`]); older ones use their own read connections.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, Vote};
use sqlx::sqlite::SqlitePool;
use sqlx::Row;
use tokio::sync::{oneshot, watch};

use crate::db;
use crate::error::{log_err, read_log_err, vote_err, Error};
use crate::log_tail::LogTail;
use crate::log_writer::{self, WriteOp, WriterStats};
use crate::purge_gate::{writer_gone, OnDisk, PurgeGate, Sent};
use crate::types::TypeConfig;

type NodeId = u64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log (idx INTEGER PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

/// Read connections to the log file.
const LOG_READERS: u32 = 4;

#[derive(Clone)]
pub struct LogStore {
    readers: SqlitePool,
    pub(crate) tail: LogTail,
    /// The way to the writer thread's queue (`purge_gate.rs`).
    pub(crate) gate: PurgeGate,
    stats: WriterStats,
    /// The last committed id handed to `save_committed`, which is written without waiting.
    committed: Arc<Mutex<Option<Option<LogId<NodeId>>>>>,
    /// The first index not purged: rows below it may still be in the file until the writer
    /// deletes them, and readers skip them.
    first_kept: Arc<AtomicU64>,
}

/// Ties the log at `path` to node `node_id`, or refuses it if it is another node's, before the
/// log store or the state machine opens. A log and its vote belong to one Raft identity:
/// started under another id, a node would vote twice in a term and could lose committed
/// entries. A log from before the tie (no `node_id` row) is taken, with a warning, by the first
/// node that opens it.
pub(crate) fn claim(path: &Path, node_id: NodeId) -> Result<(), Error> {
    use rusqlite::OptionalExtension;
    db::blocking(|| {
        let conn = db::open_write_connection(path)?;
        conn.execute_batch(SCHEMA)
            .map_err(Error::write("create log schema"))?;
        let found: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'node_id'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(Error::write("read the log's node id"))?;
        match found {
            None => {
                // A log from before logs named their node: nothing here says whose it is.
                let used: bool = conn
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM log) OR EXISTS (SELECT 1 FROM meta)",
                        [],
                        |r| r.get(0),
                    )
                    .map_err(Error::write("read the log"))?;
                if used {
                    tracing::warn!(
                        path = %path.display(),
                        node_id,
                        "this Raft log names no node (written before logs did): taking it as \
                         this node's; if it is another node's, stop now and give each node its \
                         own data directory"
                    );
                }
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('node_id', ?)",
                    [node_id.to_string()],
                )
                .map_err(Error::write("record the log's node id"))?;
                Ok(())
            }
            Some(text) => match text.parse::<NodeId>() {
                Ok(found) if found == node_id => Ok(()),
                Ok(found) => Err(Error::OtherNode {
                    path: path.parent().unwrap_or(path).display().to_string(),
                    found,
                    configured: node_id,
                }),
                Err(e) => Err(Error::corrupt("the log's node id", e)),
            },
        }
    })
}

fn meta_json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::corrupt("log meta", e))
}

impl LogStore {
    /// Opens the log at `path`; once snapshots arrive, a purge past what `on_disk` says the
    /// state machine's `state.db` holds waits for it (`purge_gate.rs`).
    pub(crate) async fn open(path: &Path, on_disk: watch::Receiver<OnDisk>) -> Result<Self, Error> {
        let conn = db::blocking(|| -> Result<_, Error> {
            let conn = db::open_write_connection(path)?;
            conn.execute_batch(SCHEMA)
                .map_err(Error::write("create log schema"))?;
            Ok(conn)
        })?;
        let readers = db::open_readers(path, LOG_READERS).await?;
        let tail = LogTail::default();
        let (writer, riding, stats) = log_writer::spawn(conn, tail.clone())?;
        let store = LogStore {
            readers,
            tail,
            gate: PurgeGate::new((writer, riding), on_disk),
            stats,
            committed: Arc::default(),
            first_kept: Arc::default(),
        };
        let purged: Option<LogId<NodeId>> = store.meta("last_purged").await?;
        store.set_purged(purged);
        Ok(store)
    }

    fn set_purged(&self, purged: Option<LogId<NodeId>>) {
        if let Some(id) = purged {
            self.first_kept.fetch_max(id.index + 1, Ordering::SeqCst);
        }
    }

    fn first_kept(&self) -> u64 {
        self.first_kept.load(Ordering::SeqCst)
    }

    /// Queues `op` for the writer and waits until it is durable.
    async fn write_and_wait(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), String>>) -> WriteOp,
    ) -> Result<(), Error> {
        let (done, wait) = oneshot::channel();
        self.gate.send(make(done))?;
        written(wait).await
    }

    async fn meta<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        let row = sqlx::query("SELECT value FROM meta WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.readers)
            .await
            .map_err(Error::sql("read log meta"))?;
        match row {
            None => Ok(None),
            Some(row) => {
                let text: String = row.get(0);
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| Error::corrupt("log meta", e))
            }
        }
    }

    /// Writes a meta row and waits until it is durable.
    async fn set_meta<T: serde::Serialize>(
        &self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let value = meta_json(value)?;
        self.write_and_wait(|done| WriteOp::Meta {
            key,
            value,
            done: Some(done),
        })
        .await
    }

    async fn read_range(
        &self,
        start: u64,
        end_exclusive: Option<u64>,
    ) -> Result<Vec<Entry<TypeConfig>>, Error> {
        let end = end_exclusive
            .unwrap_or(i64::MAX as u64)
            .min(i64::MAX as u64);
        let start = start.max(self.first_kept());
        if start >= end {
            return Ok(Vec::new());
        }
        if let Some(entries) = self.tail.covering(start, end) {
            return Ok(entries);
        }
        // The tail first: an entry that leaves it afterwards is already committed to the file,
        // so the query below sees it.
        let recent = self.tail.range(start, end);
        let rows = sqlx::query("SELECT entry FROM log WHERE idx >= ? AND idx < ? ORDER BY idx")
            .bind(start as i64)
            .bind(end as i64)
            .fetch_all(&self.readers)
            .await
            .map_err(Error::sql("read log"))?;
        let mut entries = std::collections::BTreeMap::new();
        for row in &rows {
            let text: &str = row.get(0);
            let entry: Entry<TypeConfig> =
                serde_json::from_str(text).map_err(|e| Error::corrupt("log entry", e))?;
            entries.insert(entry.log_id.index, entry);
        }
        for entry in recent {
            entries.insert(entry.log_id.index, entry);
        }
        Ok(entries.into_values().collect())
    }

    async fn last_entry_id(&self) -> Result<Option<LogId<NodeId>>, Error> {
        if let Some(last) = self.tail.last() {
            return Ok(Some(last));
        }
        let row = sqlx::query("SELECT entry FROM log WHERE idx >= ? ORDER BY idx DESC LIMIT 1")
            .bind(self.first_kept() as i64)
            .fetch_optional(&self.readers)
            .await
            .map_err(Error::sql("read last log entry"))?;
        row.map(|row| {
            let text: &str = row.get(0);
            serde_json::from_str::<Entry<TypeConfig>>(text)
                .map(|e| e.log_id)
                .map_err(|e| Error::corrupt("log entry", e))
        })
        .transpose()
    }
}

impl LogStore {
    /// Transactions committed and entries appended since open (for tests and benchmarks).
    pub fn write_stats(&self) -> (u64, u64) {
        (self.stats.transactions(), self.stats.entries())
    }
}

/// Waits for the writer to say the op behind `wait` is durable.
async fn written(wait: oneshot::Receiver<Result<(), String>>) -> Result<(), Error> {
    match wait.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(Error::LogWrite { message }),
        Err(_) => Err(writer_gone()),
    }
}

fn range_to_bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => Some(e.saturating_add(1)),
        Bound::Excluded(e) => Some(*e),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let (start, end) = range_to_bounds(&range);
        self.read_range(start, end).await.map_err(read_log_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged: Option<LogId<NodeId>> =
            self.meta("last_purged").await.map_err(read_log_err)?;
        let last = self.last_entry_id().await.map_err(read_log_err)?;
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        // A vote must be on disk before the reply that grants it.
        self.set_meta("vote", vote).await.map_err(vote_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.meta("vote").await.map_err(vote_err)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // Optional in openraft and only read at start-up: it goes in with the writer's next
        // transaction, not awaited (`log_writer::Riding`).
        *self.committed.lock().unwrap_or_else(|p| p.into_inner()) = Some(committed);
        self.gate
            .ride_along("committed", meta_json(&committed).map_err(log_err)?);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        if let Some(saved) = *self.committed.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(saved);
        }
        Ok(self
            .meta::<Option<LogId<NodeId>>>("committed")
            .await
            .map_err(read_log_err)?
            .flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        self.tail.insert(&entries);
        self.gate
            .send(WriteOp::Append {
                entries,
                flushed: Box::new(move |result| {
                    callback.log_io_completed(result.map_err(std::io::Error::other))
                }),
            })
            .map(drop)
            .map_err(log_err)
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.tail.remove_from(log_id.index);
        self.write_and_wait(|done| WriteOp::Truncate {
            since: log_id.index,
            done,
        })
        .await
        .map_err(log_err)
    }

    /// Purges up to `log_id`. A purge past what `state.db` holds on disk, once snapshots arrive,
    /// is an install's: it returns at once and reaches the file after the install
    /// (`purge_gate.rs`). openraft reads no purged entry, so they are gone from memory at once.
    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let log_id_json =
            serde_json::to_string(&log_id).map_err(|e| log_err(Error::corrupt("log id", e)))?;
        self.tail.remove_upto(log_id.index);
        self.set_purged(Some(log_id));
        let (done, wait) = oneshot::channel();
        let sent = self
            .gate
            .send(WriteOp::Purge {
                upto: log_id.index,
                log_id_json,
                done,
            })
            .map_err(log_err)?;
        if sent == Sent::Now {
            written(wait).await.map_err(log_err)?;
        }
        Ok(())
    }
}
