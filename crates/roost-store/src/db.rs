//! Opening SQLite files with the settings Roost relies on.
//!
//! Each file has one write connection, driven synchronously through rusqlite by its one writer
//! (the log's writer thread, the state machine's apply), and a pool of read-only sqlx
//! connections for async readers. The writers left sqlx because every sqlx statement is a round
//! trip to the connection's own thread (two context switches): an apply made about ten, a log
//! append four, on every node for every entry, and the handoffs were 14% of the CPU of a loaded
//! cluster (BENCHMARKS.md). Both crates link the same SQLite (libsqlite3-sys).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::Error;

/// Prepared statements a write connection keeps (the row batches use a few per table).
const CACHED_STATEMENTS: usize = 128;

/// Largest WAL file kept after SQLite restarts the log from its start.
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// The file's one write connection (created if missing), in WAL mode with `synchronous=FULL`:
/// a commit is on disk before it returns. The log needs it for Raft's promise; `state.db`
/// commits seldom (`state_writer.rs`), so it costs little there, and its WAL checkpoints (SQLite's
/// own, after a commit that leaves more than 1,000 pages in the WAL) run in its commit thread
/// rather than in an apply. A checkpoint must run between a commit and the next transaction's
/// first read for SQLite to restart the WAL from its start: a checkpointer on another
/// connection, tried, let `state.db`'s WAL grow to 226 MB in 30 s. Statement journals
/// (an upsert of many rows inside an open transaction keeps one, to undo just that statement)
/// stay in memory: in a temporary file they cost a `pwrite` per page, 3% of a loaded cluster's CPU.
pub(crate) fn open_write_connection(path: &Path) -> Result<rusqlite::Connection, Error> {
    crate::files::private_db_file(path)?;
    let conn = rusqlite::Connection::open(path).map_err(Error::write("open writer"))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(Error::write("set busy timeout"))?;
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY; \
         PRAGMA journal_size_limit = {WAL_SIZE_LIMIT};"
    ))
    .map_err(Error::write("set pragmas"))?;
    conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
    Ok(conn)
}

/// Runs blocking SQLite work from async code: on a multi-thread runtime the worker hands its
/// other tasks to another thread first (`block_in_place`); elsewhere (tests on a current-thread
/// runtime, plain threads) it just runs.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Read-only connections for queries, which never wait on the writer in WAL mode.
pub(crate) async fn open_readers(path: &Path, connections: u32) -> Result<SqlitePool, Error> {
    let options = base_options(path)?.read_only(true);
    SqlitePoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await
        .map_err(Error::sql("open readers"))
}

fn base_options(path: &Path) -> Result<SqliteConnectOptions, Error> {
    let url = format!("sqlite://{}", path.display());
    Ok(SqliteConnectOptions::from_str(&url)
        .map_err(Error::sql("parse sqlite path"))?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(false))
}
