//! Roost's storage: the Raft log and the state machine, each in its own SQLite file (written
//! through rusqlite, read through sqlx: see `db.rs`).
//!
//! The log (`raft-log.db`) is fsynced before an append is acknowledged (one fsync per batch of
//! queued appends: group commit). The state machine
//! (`state.db`) holds every entity as a row and records the last applied log id in the same
//! transaction as the effects, so a restart resumes exactly where apply stopped. A copy of the
//! entities is kept in memory ([`roost_core::State`]) for the rules and for fast reads.

mod abort_on_panic;
mod bulk;
mod db;
mod error;
mod files;
mod log_store;
mod log_tail;
mod log_writer;
#[cfg(test)]
mod log_writer_tests;
mod purge_gate;
#[cfg(test)]
mod purge_gate_tests;
mod reader;
mod row_batch;
mod rows;
mod search;
mod snapshot_dir;
mod state_machine;
mod state_writer;
pub mod stats;
mod types;

pub use bulk::BulkDb;
pub use error::Error;
pub use log_store::LogStore;
pub use reader::{ActivityFilter, CommentQuery, CommentSearch, InteractionLookup, StateReader};
pub use search::{check_query_len, SearchQuery, SearchText, MAX_QUERY_CHARS};
pub use state_machine::StateMachineStore;
pub use types::{ApplyResult, NodeInfo, SharedEnvelope, TypeConfig};

use std::path::Path;

/// Opens (creating if needed) node `node_id`'s storage in `dir`, private to this user
/// (`files.rs`); another node's directory is refused before anything in it is read or changed.
pub async fn open(
    dir: &Path,
    node_id: u64,
) -> Result<(LogStore, StateMachineStore, StateReader), Error> {
    files::private_dir(dir)?;
    files::tighten_tree(dir)?;
    log_store::claim(&dir.join("raft-log.db"), node_id)?;
    files::private_dir(&dir.join("snapshots"))?;
    let (sm, reader) = StateMachineStore::open(dir).await?;
    let log = LogStore::open(&dir.join("raft-log.db"), sm.on_disk()).await?;
    Ok((log, sm, reader))
}

#[allow(dead_code)]
fn assert_send_futures(path: &Path, conn: &mut sqlx::SqliteConnection) {
    fn is_send<T: Send>(_: T) {}
    is_send(LogStore::open(
        path,
        tokio::sync::watch::channel(Default::default()).1,
    ));
    is_send(rows::load_state(conn, None));
    is_send(StateMachineStore::open(path));
    is_send(open(path, 1));
}
