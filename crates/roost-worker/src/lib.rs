//! The Roost worker: holds a connection with the cluster's leader, runs the agents' runs it
//! is assigned as local processes, reports what they do, and stops them when it can no longer
//! renew its lease (self-fencing). Links neither Raft nor SQLite.

mod adapter;
mod config;
mod connection;
mod credential;
mod dial;
mod memory;
mod prompt;
mod runlog;
mod skills;
mod workspace;
mod worktree;

pub use config::{
    check_shutdown_grace, Price, WorkerConfig, WorkerTls, CREDENTIAL_FILE,
    DEFAULT_SHUTDOWN_GRACE_SECS, MAX_SHUTDOWN_GRACE_SECS,
};
pub use connection::{run, run_until, Stop, Stopped};
pub use credential::WORKER_CREDENTIAL_PREFIX;
pub use memory::recent_entries_text;

/// What can stop a worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The worker's credential file cannot be read or written, or holds no credential.
    #[error("worker credential: {0}")]
    Credential(String),
}
