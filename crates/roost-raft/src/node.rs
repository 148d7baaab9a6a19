//! [`RaftNode`]: one node's Raft instance and its state, behind a cheap `Clone` handle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, InitializeError, RaftError};
use openraft::Raft;
use roost_core::{DomainError, Envelope, Outcome};
use roost_store::{NodeInfo, StateReader, TypeConfig};
use tracing::info;

use crate::config::RaftTiming;
use crate::error::Error;
use crate::network::GrpcNetworkFactory;

/// The committed result of one write: where it landed in the log and what it produced.
#[derive(Clone, Debug)]
pub struct WriteOutcome {
    pub index: u64,
    pub result: Result<Outcome, DomainError>,
}

#[derive(Clone)]
pub struct RaftNode {
    id: u64,
    info: NodeInfo,
    raft: Raft<TypeConfig>,
    reader: StateReader,
}

impl RaftNode {
    /// Opens the data directory and starts Raft on it. State applied before a restart is
    /// already in `state.db`; openraft replays any committed entries after it.
    pub async fn start(id: u64, info: NodeInfo, data_dir: &Path, timing: &RaftTiming) -> Result<RaftNode, Error> {
        let (log, sm, reader) = roost_store::open(data_dir).await?;
        let config = Arc::new(timing.to_openraft("roost")?);
        let raft = Raft::new(id, config, GrpcNetworkFactory::default(), log, sm)
            .await
            .map_err(|e| Error::Fatal { message: e.to_string() })?;
        Ok(RaftNode { id, info, raft, reader })
    }

    /// Makes this node a cluster of one if it has never been part of a cluster.
    pub async fn initialize_single(&self) -> Result<(), Error> {
        if self.raft.is_initialized().await.map_err(|e| Error::Fatal { message: e.to_string() })? {
            return Ok(());
        }
        let members = BTreeMap::from([(self.id, self.info.clone())]);
        match self.raft.initialize(members).await {
            Ok(()) => {
                info!(node_id = self.id, "initialized single-node cluster");
                Ok(())
            }
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(e) => Err(Error::Fatal { message: e.to_string() }),
        }
    }

    /// Waits until some node is leader, as this node sees it.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<u64, Error> {
        let mut metrics = self.raft.metrics();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if let Some(leader) = metrics.borrow().current_leader {
                    return Ok(leader);
                }
                if metrics.changed().await.is_err() {
                    return Err(Error::Fatal { message: "raft stopped".into() });
                }
            }
        })
        .await;
        match waited {
            Ok(r) => r,
            Err(_) => Err(Error::Unavailable { message: format!("no leader after {timeout:?}") }),
        }
    }

    /// Proposes a command and waits until it is committed and applied here.
    pub async fn write(&self, envelope: Envelope) -> Result<WriteOutcome, Error> {
        match self.raft.client_write(envelope).await {
            Ok(resp) => match resp.data.result {
                Some(result) => Ok(WriteOutcome { index: resp.log_id.index, result }),
                None => Err(Error::Fatal { message: "a command entry produced no result".into() }),
            },
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(Error::NotLeader {
                leader_id: f.leader_id,
                leader_addr: f.leader_node.map(|n| n.grpc_addr),
            }),
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                Err(Error::Unavailable { message: e.to_string() })
            }
            Err(RaftError::Fatal(f)) => Err(Error::Fatal { message: f.to_string() }),
        }
    }

    /// Read barrier: returns once this node's state reflects every write acknowledged before
    /// the call (ReadIndex: leadership confirmed by a quorum, then wait for apply).
    pub async fn linearizable_read(&self) -> Result<(), Error> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => Err(Error::NotLeader {
                leader_id: f.leader_id,
                leader_addr: f.leader_node.map(|n| n.grpc_addr),
            }),
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e))) => {
                Err(Error::Unavailable { message: e.to_string() })
            }
            Err(RaftError::Fatal(f)) => Err(Error::Fatal { message: f.to_string() }),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn info(&self) -> &NodeInfo {
        &self.info
    }

    pub fn reader(&self) -> &StateReader {
        &self.reader
    }

    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(node_id = self.id, error = %e, "raft shutdown failed");
        }
    }
}
