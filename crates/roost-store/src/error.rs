//! Storage errors.

use openraft::{AnyError, StorageError, StorageIOError};

use crate::types::TypeConfig;

type NodeId = <TypeConfig as openraft::RaftTypeConfig>::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sqlite error during {context}: {source}")]
    Sqlite {
        context: &'static str,
        source: sqlx::Error,
    },
    #[error("sqlite error during {context}: {source}")]
    SqliteWrite {
        context: &'static str,
        source: rusqlite::Error,
    },
    #[error("an earlier write to state.db failed ({message}); the node must restart")]
    StateWriterFailed { message: String },
    #[error("writing the raft log failed: {message}")]
    LogWrite { message: String },
    #[error("corrupt {what}: {message}")]
    Corrupt { what: &'static str, message: String },
    #[error("io error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the data directory {path} holds node {found}'s Raft log and vote, but this node is \
         node {configured}: start it with node_id = {found}, or give node {configured} a data \
         directory of its own (an empty one joins the cluster and catches up)"
    )]
    OtherNode {
        path: String,
        found: u64,
        configured: u64,
    },
    #[error("the data directory {path} was written by an incompatible version (schema {found}, expected {expected})")]
    Schema {
        path: String,
        found: String,
        expected: String,
    },
}

impl Error {
    pub(crate) fn sql(context: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
        move |source| Error::Sqlite { context, source }
    }

    pub(crate) fn write(context: &'static str) -> impl FnOnce(rusqlite::Error) -> Error {
        move |source| Error::SqliteWrite { context, source }
    }

    pub(crate) fn corrupt(what: &'static str, e: impl std::fmt::Display) -> Error {
        Error::Corrupt {
            what,
            message: e.to_string(),
        }
    }
}

/// Openraft wants its own error type; the subject says what failed.
pub(crate) fn log_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

pub(crate) fn read_log_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

pub(crate) fn vote_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_vote(AnyError::new(&e)).into()
}

pub(crate) fn sm_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

pub(crate) fn read_sm_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::read_state_machine(AnyError::new(&e)).into()
}

pub(crate) fn snapshot_err(e: Error) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}
