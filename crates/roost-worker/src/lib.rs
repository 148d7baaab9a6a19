//! The Roost worker: holds a session with the cluster's leader, runs the agent heartbeats it
//! is assigned as local processes, reports what they do, and stops them when it can no longer
//! renew its lease (self-fencing). Links neither Raft nor SQLite.

mod adapter;
mod config;
mod prompt;
mod runlog;
mod session;

pub use config::{WorkerConfig, WorkerTls};
pub use session::run;

/// What can stop a worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid worker configuration: {0}")]
    Config(String),
}
