//! Opening SQLite files with the settings Roost relies on.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::Error;

/// One writer connection: every write to a file is serialized through it.
pub(crate) async fn open_writer(path: &Path) -> Result<SqlitePool, Error> {
    let options = base_options(path)?.create_if_missing(true);
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(options)
        .await
        .map_err(Error::sql("open writer"))
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
        // FULL: a commit is on disk before it returns. The log needs it for Raft's promise; the
        // state machine uses it too so its applied index never runs behind a purged log.
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(false))
}
