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
    /// A write bigger than [`crate::MAX_WRITE_BYTES`] of JSON: refused before it is proposed,
    /// so that no log entry is big.
    #[error("a write of {bytes} bytes of JSON is past the {max} a log entry may hold", max = crate::MAX_WRITE_BYTES)]
    TooLarge { bytes: usize },
}

impl Error {
    /// openraft's stopped core, for a client: its own message Debug-prints log ids and peers'
    /// addresses, so that goes to the log and the client gets a sentence.
    pub(crate) fn core_stopped(detail: impl std::fmt::Display) -> Error {
        tracing::error!(%detail, "the Raft core stopped");
        Error::Fatal {
            message: "the Raft core on this node has stopped (its log says why); use another node"
                .into(),
        }
    }

    /// No quorum, for a client; openraft's message lists every voter's address.
    pub(crate) fn no_quorum(detail: impl std::fmt::Display) -> Error {
        tracing::warn!(%detail, "no quorum");
        Error::Unavailable {
            message: "the leader cannot reach a majority of the voters right now; retry shortly"
                .into(),
        }
    }
}
