//! Roost's Raft wiring: openraft over the SQLite store, the gRPC network between nodes
//! (replication, forwarding of writes and read-index requests), membership changes, and
//! [`RaftNode`], the handle the API layer writes and reads through.

mod append_stream;
#[cfg(test)]
mod append_stream_tests;
mod bounds;
mod config;
mod error;
mod faults;
mod handover;
mod membership;
mod network;
#[cfg(test)]
mod network_tests;
mod node;
mod proposer;
mod replication_watch;
mod service;
mod write_stats;

pub use config::RaftTiming;
pub use error::Error;
pub use faults::NetworkFaults;
pub use membership::{ClusterStatus, Leadership, MemberInfo, MemberStatus, NodeReport};
pub use network::{GrpcNetworkFactory, MAX_MESSAGE_BYTES as MAX_RAFT_MESSAGE_BYTES};
pub use node::{LeadershipWatch, RaftNode, WriteOutcome};
pub use proposer::MAX_WRITE_BYTES;
pub use replication_watch::watch_replication;
pub use roost_store::stats::{HistogramSnapshot, StoreStats};
pub use roost_store::{ApplyResult, NodeInfo, StateReader, TypeConfig};
#[doc(hidden)]
pub use service::decode_any as decode_raft_payload;
pub use service::RaftService;
pub use write_stats::WriteStats;
