//! Errors of the Raft layer.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid raft configuration: {message}")]
    Config { message: String },
    #[error(transparent)]
    Store(#[from] roost_store::Error),
    /// This node is not the leader; `leader` says where to go when known.
    #[error("not the leader (leader: {leader_id:?})")]
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    /// No quorum or no leader yet: the caller may retry.
    #[error("cluster unavailable: {message}")]
    Unavailable { message: String },
    /// A membership change was refused (another in progress, unknown node, ...).
    #[error("membership change refused: {message}")]
    Membership { message: String },
    #[error("raft stopped: {message}")]
    Fatal { message: String },
}
