//! The log's single writer thread: group commit. Every change to `raft-log.db` goes through one
//! queue; the writer takes everything queued, writes it in one SQLite transaction and fsyncs once,
//! then tells each caller. While one fsync runs, the next appends pile up behind it, so under load
//! a leader makes one fsync per batch of client writes instead of one per write (etcd's WAL does
//! the same).
//!
//! Appended entries are readable from the [`LogTail`] before their transaction is on disk;
//! openraft requires entries to be readable as soon as `append` returns, and must learn of
//! durability only through the flush callback.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::{Entry, LogId, RaftLogId};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::error::Error;
use crate::log_tail::LogTail;
use crate::types::TypeConfig;

/// Entries written per transaction at most; the rest wait for the next one.
const MAX_BATCH_ENTRIES: usize = 4096;
/// Rows per multi-row INSERT (two bound values each, far below SQLite's variable limit).
const ROWS_PER_INSERT: usize = 256;
/// Purged rows deleted per transaction. A purge records its bound at once (openraft's core
/// waits for it) and the rows go a few at a time while the writer has nothing queued: deleting
/// 9,000 entries in one transaction held every append, and the core, for hundreds of ms.
const PURGE_ROWS_PER_TRANSACTION: i64 = 16;
/// Batches after which a purge chunk goes in even if appends are queued, so it ends under load.
const BATCHES_PER_FORCED_PURGE: u32 = 32;
/// Meta rows nobody waits for ([`Riding`]) go in with a transaction at most this often. In
/// every transaction, the committed id's row added a page to each write's WAL frames (five
/// `pwrite`s per transaction where three do); a row up to this much older only makes a
/// restarted node re-apply a little less of its log before the leader tells it the rest.
const RIDING_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// One change to the log file, in the order openraft asked for it.
pub(crate) enum WriteOp {
    Append {
        entries: Vec<Entry<TypeConfig>>,
        /// Called once the entries are on disk (openraft's flush callback).
        flushed: Box<dyn FnOnce(Result<(), String>) + Send + Sync>,
    },
    /// A `meta` row; `done` is told once it is durable (none: nobody waits, a [`Riding`] row
    /// that waited behind a purge).
    Meta {
        key: &'static str,
        value: String,
        done: Option<oneshot::Sender<Result<(), String>>>,
    },
    Truncate {
        since: u64,
        done: oneshot::Sender<Result<(), String>>,
    },
    Purge {
        upto: u64,
        log_id_json: String,
        done: oneshot::Sender<Result<(), String>>,
    },
}

impl WriteOp {
    fn entries(&self) -> usize {
        match self {
            WriteOp::Append { entries, .. } => entries.len(),
            _ => 1,
        }
    }
}

/// Meta rows nobody waits for (openraft's committed id, optional and read only at start), the
/// latest per key. They go in with a later transaction of the writer's (at most every
/// [`RIDING_INTERVAL`]) and wake nobody: with a transaction of their own they cost an fsync
/// after every commit, and sent as ops they still woke the writer thread once per write on
/// every node (BENCHMARKS.md "One fsync per write", "Fewer wake-ups per write").
///
/// A row may wait here only if every write openraft asked for before it is queued; while writes
/// wait behind a purge it waits there too, as an op (`PurgeGate::ride_along`). The writer takes
/// the rows before it drains its queue and writes them only once the queue is drained, so a row
/// never reaches the file before those writes: a committed id ahead of the log on disk would
/// make a restarted node apply entries it lacks. (An older row may follow a newer one into the
/// file: a stale committed id only means less to re-apply.)
#[derive(Clone, Default)]
pub(crate) struct Riding(Arc<Mutex<Vec<(&'static str, String)>>>);

impl Riding {
    fn lock(&self) -> MutexGuard<'_, Vec<(&'static str, String)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `key` is to be `value` with the next transaction.
    pub(crate) fn set(&self, key: &'static str, value: String) {
        let mut rows = self.lock();
        rows.retain(|(k, _)| *k != key);
        rows.push((key, value));
    }

    fn take(&self) -> Vec<WriteOp> {
        std::mem::take(&mut *self.lock())
            .into_iter()
            .map(|(key, value)| WriteOp::Meta {
                key,
                value,
                done: None,
            })
            .collect()
    }

    /// Rows taken but not written; a key set again since keeps its newer value.
    fn put_back(&self, taken: Vec<WriteOp>) {
        let mut rows = self.lock();
        for op in taken {
            if let WriteOp::Meta { key, value, .. } = op {
                if rows.iter().all(|(k, _)| *k != key) {
                    rows.push((key, value));
                }
            }
        }
    }
}

/// How many transactions the writer committed, and the entries in them.
#[derive(Clone, Default)]
pub(crate) struct WriterStats(Arc<(AtomicU64, AtomicU64)>);

impl WriterStats {
    pub(crate) fn transactions(&self) -> u64 {
        self.0 .0.load(Ordering::Relaxed)
    }

    pub(crate) fn entries(&self) -> u64 {
        self.0 .1.load(Ordering::Relaxed)
    }
}

/// Starts the writer thread on `conn` (the file's only writing connection). It stops when every
/// sender is dropped, after finishing what was queued. A thread, not a task: it blocks in SQLite
/// and fsync, and one wake-up per batch is all the handoff an append costs.
pub(crate) fn spawn(
    conn: Connection,
    tail: LogTail,
) -> Result<(mpsc::UnboundedSender<WriteOp>, Riding, WriterStats), Error> {
    let (tx, rx) = mpsc::unbounded_channel();
    let stats = WriterStats::default();
    let riding = Riding::default();
    let (thread_stats, thread_riding) = (stats.clone(), riding.clone());
    std::thread::Builder::new()
        .name("raft-log-writer".into())
        .spawn(move || run(conn, tail, rx, thread_riding, thread_stats))
        .map_err(|source| Error::Io {
            path: "raft log writer thread".into(),
            source,
        })?;
    Ok((tx, riding, stats))
}

fn run(
    mut conn: Connection,
    tail: LogTail,
    mut rx: mpsc::UnboundedReceiver<WriteOp>,
    slot: Riding,
    stats: WriterStats,
) {
    // Rows left behind by a purge before a restart are deleted like any other.
    let mut purge_upto = read_last_purged(&conn);
    let mut batches_since_purge = 0u32;
    let mut rode_at: Option<std::time::Instant> = None;
    loop {
        if purge_upto.is_some() && batches_since_purge >= BATCHES_PER_FORCED_PURGE {
            purge_chunk(&mut conn, &mut purge_upto);
            batches_since_purge = 0;
        }
        let first = if purge_upto.is_some() {
            match rx.try_recv() {
                Ok(op) => op,
                Err(mpsc::error::TryRecvError::Empty) => {
                    purge_chunk(&mut conn, &mut purge_upto);
                    batches_since_purge = 0;
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            }
        } else {
            match rx.blocking_recv() {
                Some(op) => op,
                None => break,
            }
        };
        // Taken before the queue is drained: what was queued ahead of them is in this batch.
        let ride = rode_at.is_none_or(|at| at.elapsed() >= RIDING_INTERVAL);
        let ridden = if ride { slot.take() } else { Vec::new() };
        let mut queued = first.entries();
        let mut batch = vec![first];
        let mut drained = false;
        while queued < MAX_BATCH_ENTRIES {
            match rx.try_recv() {
                Ok(op) => {
                    queued += op.entries();
                    batch.push(op);
                }
                Err(_) => {
                    drained = true;
                    break;
                }
            }
        }
        if drained {
            if !ridden.is_empty() {
                rode_at = Some(std::time::Instant::now());
            }
            batch.extend(ridden);
        } else {
            slot.put_back(ridden);
        }
        batches_since_purge += 1;
        let result = write_batch(&mut conn, &batch);
        if result.is_ok() {
            for op in &batch {
                if let WriteOp::Purge { upto, .. } = op {
                    purge_upto = Some(purge_upto.map_or(*upto, |p| p.max(*upto)));
                }
            }
            let appended: usize = batch
                .iter()
                .map(|op| match op {
                    WriteOp::Append { entries, .. } => entries.len(),
                    _ => 0,
                })
                .sum();
            stats.0 .0.fetch_add(1, Ordering::Relaxed);
            stats.0 .1.fetch_add(appended as u64, Ordering::Relaxed);
        }
        if let Err(e) = &result {
            tracing::error!(error = %e, ops = batch.len(), "raft log write failed");
        }
        finish(batch, result.map_err(|e| e.to_string()), &tail);
    }
    // Every sender is gone: what rides along still goes in.
    let riding = slot.take();
    if !riding.is_empty() {
        if let Err(error) = write_batch(&mut conn, &riding) {
            tracing::warn!(%error, "the last log meta rows could not be written");
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &[WriteOp]) -> Result<(), Error> {
    let tx = conn
        .transaction()
        .map_err(Error::write("begin log batch"))?;
    let mut rows: Vec<(i64, String)> = Vec::new();
    for op in batch {
        match op {
            WriteOp::Append { entries, .. } => {
                for entry in entries {
                    let text =
                        serde_json::to_string(entry).map_err(|e| Error::corrupt("log entry", e))?;
                    rows.push((entry.get_log_id().index as i64, text));
                }
            }
            other => {
                // Keep the file's order of effects: rows queued before a delete go in first.
                insert_rows(&tx, &mut rows)?;
                apply_other(&tx, other)?;
            }
        }
    }
    insert_rows(&tx, &mut rows)?;
    tx.commit().map_err(Error::write("commit log batch"))
}

fn insert_rows(tx: &Connection, rows: &mut Vec<(i64, String)>) -> Result<(), Error> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut sql = String::from("INSERT OR REPLACE INTO log (idx, entry) VALUES ");
        for i in 0..chunk.len() {
            sql.push_str(if i == 0 { "(?, ?)" } else { ", (?, ?)" });
        }
        let values = chunk
            .iter()
            .flat_map(|(idx, text)| [idx as &dyn rusqlite::ToSql, text]);
        tx.prepare_cached(&sql)
            .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(values)))
            .map_err(Error::write("append"))?;
    }
    rows.clear();
    Ok(())
}

fn apply_other(tx: &Connection, op: &WriteOp) -> Result<(), Error> {
    match op {
        WriteOp::Append { .. } => Ok(()),
        WriteOp::Meta { key, value, .. } => upsert_meta(tx, key, value),
        WriteOp::Truncate { since, .. } => {
            tx.execute("DELETE FROM log WHERE idx >= ?1", [*since as i64])
                .map_err(Error::write("truncate"))?;
            Ok(())
        }
        // The rows themselves go later, a few at a time (`purge_chunk`); readers skip them.
        WriteOp::Purge { log_id_json, .. } => upsert_meta(tx, "last_purged", log_id_json),
    }
}

/// The index of the last purged entry recorded in the file.
fn read_last_purged(conn: &Connection) -> Option<u64> {
    let text: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'last_purged'",
            [],
            |r| r.get(0),
        )
        .ok()?;
    serde_json::from_str::<Option<LogId<u64>>>(&text)
        .ok()
        .flatten()
        .map(|id| id.index)
}

/// Deletes a few purged rows; clears `upto` once none are left.
fn purge_chunk(conn: &mut Connection, upto: &mut Option<u64>) {
    let Some(bound) = *upto else {
        return;
    };
    let deleted = conn.execute(
        "DELETE FROM log WHERE idx IN (SELECT idx FROM log WHERE idx <= ?1 ORDER BY idx LIMIT ?2)",
        [bound as i64, PURGE_ROWS_PER_TRANSACTION],
    );
    match deleted {
        Ok(n) if (n as i64) < PURGE_ROWS_PER_TRANSACTION => *upto = None,
        Ok(_) => {}
        Err(error) => {
            // Harmless to leave: readers skip purged rows, the next purge retries.
            tracing::warn!(%error, "deleting purged log rows failed");
            *upto = None;
        }
    }
}

fn upsert_meta(tx: &Connection, key: &str, value: &str) -> Result<(), Error> {
    tx.prepare_cached(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) \
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )
    .and_then(|mut statement| statement.execute([key, value]))
    .map_err(Error::write("write log meta"))?;
    Ok(())
}

/// Tells every caller of the batch how it went, after marking its entries durable in the tail.
fn finish(batch: Vec<WriteOp>, result: Result<(), String>, tail: &LogTail) {
    for op in batch {
        match op {
            WriteOp::Append { entries, flushed } => match &result {
                Ok(()) => {
                    let ids: Vec<LogId<u64>> = entries.iter().map(|e| *e.get_log_id()).collect();
                    tail.settle(&ids);
                    flushed(Ok(()));
                }
                Err(e) => flushed(Err(e.clone())),
            },
            WriteOp::Meta { done, .. } => {
                if let Some(done) = done {
                    let _ = done.send(result.clone());
                }
            }
            WriteOp::Truncate { done, .. } | WriteOp::Purge { done, .. } => {
                let _ = done.send(result.clone());
            }
        }
    }
}
