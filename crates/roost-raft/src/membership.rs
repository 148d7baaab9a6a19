//! Forming the cluster and changing its members, one change at a time, and this node's
//! report for `roost cluster status`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ChangeMembers, ServerState};
pub use roost_core::cluster_view::{
    ClusterStatus, MemberHealth, MemberInfo, MemberStatus, NodeReport, NodeRole,
};
use roost_store::NodeInfo;
use tracing::info;

use crate::error::Error;
use crate::node::{ForwardReply, ForwardRequest, RaftNode};

/// A learner may need a snapshot and the whole log tail before it counts as caught up.
const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `cluster status` waits for each member's own report.
const REPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// Who leads, as this node sees it: cheap (no state hash), for loops that poll it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    pub is_leader: bool,
    pub leader_id: Option<u64>,
    pub leader_grpc_addr: Option<String>,
}

/// A member this many entries behind the leader is reported as lagging.
const LAGGING_AFTER: u64 = 1000;

fn role_of(state: ServerState) -> NodeRole {
    match state {
        ServerState::Leader => NodeRole::Leader,
        ServerState::Follower => NodeRole::Follower,
        ServerState::Candidate => NodeRole::Candidate,
        ServerState::Learner => NodeRole::Learner,
        ServerState::Shutdown => NodeRole::Shutdown,
    }
}

fn membership_error(e: RaftError<u64, ClientWriteError<u64, NodeInfo>>) -> Error {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => Error::NotLeader {
            leader_id: f.leader_id,
            leader_addr: f.leader_node.map(|n| n.grpc_addr),
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => Error::Membership {
            message: e.to_string(),
        },
        RaftError::Fatal(f) => Error::Fatal {
            message: f.to_string(),
        },
    }
}

impl RaftNode {
    /// Forms a cluster with `members` as voters, if this node was never part of one. Returns
    /// whether this call formed it, once a leader is elected.
    pub async fn init_cluster(&self, members: BTreeMap<u64, NodeInfo>) -> Result<bool, Error> {
        let _one_change = self.membership_lock.lock().await;
        if !members.contains_key(&self.id) {
            return Err(Error::Membership {
                message: format!("the members must include this node ({})", self.id),
            });
        }
        if self.raft.is_initialized().await.map_err(|e| Error::Fatal {
            message: e.to_string(),
        })? {
            return Ok(false);
        }
        match self.raft.initialize(members.clone()).await {
            Ok(()) => info!(
                node_id = self.id,
                members = members.len(),
                "initialized cluster"
            ),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => return Ok(false),
            Err(e) => {
                return Err(Error::Membership {
                    message: e.to_string(),
                })
            }
        }
        self.wait_for_leader(self.timing.election_timeout_max() * 20 + Duration::from_secs(5))
            .await?;
        Ok(true)
    }

    /// Makes this node a cluster of one if it has never been part of a cluster.
    pub async fn initialize_single(&self) -> Result<bool, Error> {
        self.init_cluster(BTreeMap::from([(self.id, self.info.clone())]))
            .await
    }

    /// Adds a node: as a learner first, waiting until it has caught up, then as a voter. Run on
    /// the leader; a follower forwards the request.
    pub async fn add_node(&self, id: u64, info: NodeInfo, voter: bool) -> Result<(), Error> {
        let request = ForwardRequest::AddNode {
            id,
            info: info.clone(),
            voter,
        };
        match self.add_node_local(id, info, voter).await {
            Err(Error::NotLeader {
                leader_id: Some(l), ..
            }) if l != self.id => self
                .forward(l, &request, MEMBERSHIP_TIMEOUT)
                .await
                .map(|_| ()),
            other => other,
        }
    }

    /// Removes a node from the voters and the learners. Run on the leader; a follower forwards.
    pub async fn remove_node(&self, id: u64) -> Result<(), Error> {
        match self.remove_node_local(id).await {
            Err(Error::NotLeader {
                leader_id: Some(l), ..
            }) if l != self.id => self
                .forward(l, &ForwardRequest::RemoveNode { id }, MEMBERSHIP_TIMEOUT)
                .await
                .map(|_| ()),
            other => other,
        }
    }

    fn require_leader(&self) -> Result<(), Error> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        if m.state == ServerState::Leader {
            return Ok(());
        }
        let leader_addr = m.current_leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| n.grpc_addr.clone())
        });
        Err(Error::NotLeader {
            leader_id: m.current_leader,
            leader_addr,
        })
    }

    pub(crate) async fn add_node_local(
        &self,
        id: u64,
        info: NodeInfo,
        voter: bool,
    ) -> Result<(), Error> {
        self.require_leader()?;
        let _one_change = self.membership_lock.lock().await;
        self.raft
            .add_learner(id, info, true)
            .await
            .map_err(membership_error)?;
        info!(node_id = self.id, added = id, "learner caught up");
        if voter {
            self.raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                .await
                .map_err(membership_error)?;
            info!(node_id = self.id, added = id, "promoted to voter");
        }
        Ok(())
    }

    pub(crate) async fn remove_node_local(&self, id: u64) -> Result<(), Error> {
        self.require_leader()?;
        let _one_change = self.membership_lock.lock().await;
        let (is_voter, is_member) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            let membership = m.membership_config.membership();
            let is_voter = membership.voter_ids().any(|v| v == id);
            let is_member = membership.nodes().any(|(n, _)| *n == id);
            (is_voter, is_member)
        };
        if !is_member {
            return Err(Error::Membership {
                message: format!("node {id} is not a member"),
            });
        }
        if is_voter {
            self.raft
                .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
                .await
                .map_err(membership_error)?;
        } else {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false)
                .await
                .map_err(membership_error)?;
        }
        info!(node_id = self.id, removed = id, "node removed");
        Ok(())
    }

    /// Who leads, as this node sees it.
    pub fn leadership(&self) -> Leadership {
        // From the watch that waiters wait on: openraft sends it before its full metrics.
        let metrics = self.leadership_watch();
        if metrics.has_changed().is_err() {
            // The core has stopped. Its last server metrics still name the state it was in
            // (only its full metrics say `Shutdown`): a stopped core leads nothing.
            return Leadership {
                is_leader: false,
                leader_id: None,
                leader_grpc_addr: None,
            };
        }
        let m = metrics.borrow();
        let leader_grpc_addr = m.current_leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| n.grpc_addr.clone())
        });
        Leadership {
            is_leader: m.state == ServerState::Leader,
            leader_id: m.current_leader,
            leader_grpc_addr,
        }
    }

    /// The leader's peer address, when another node leads (the workers' leader-elsewhere
    /// answer in `roost-server/src/workers/mod.rs` is its gRPC address).
    pub fn leader_peer_addr(&self) -> Option<String> {
        let metrics = self.leadership_watch();
        // A stopped core knows no leader (see `leadership`).
        metrics.has_changed().ok()?;
        let m = metrics.borrow();
        let leader = m.current_leader.filter(|l| *l != self.id)?;
        let node = m.membership_config.membership().get_node(&leader)?;
        Some(node.peer().to_string())
    }

    /// The other members whose answers to this leader's replication it heard within `within`,
    /// with their gRPC addresses: the nodes that reach it now. Empty on a node that does not
    /// lead.
    pub fn members_in_reach(&self, within: Duration) -> Vec<(u64, String)> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        if m.state != ServerState::Leader {
            return Vec::new();
        }
        let now = tokio::time::Instant::now();
        m.membership_config
            .membership()
            .nodes()
            .filter(|(id, _)| **id != self.id)
            .filter(|(id, _)| {
                self.network
                    .peers
                    .last_answer(**id)
                    .is_some_and(|at| now.saturating_duration_since(at) <= within)
            })
            .map(|(id, n)| (*id, n.grpc_addr.clone()))
            .collect()
    }

    /// This node's view: role, term, indexes, the state hash with the index it belongs to.
    /// The hash costs a pass over the whole state; it is cached per applied index.
    pub fn report(&self) -> NodeReport {
        let (state_index, state_hash) = self.reader.state_hash();
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, n)| MemberInfo {
                id: *id,
                grpc_addr: n.grpc_addr.clone(),
                http_addr: n.http_addr.clone(),
                peer_addr: n.peer().to_string(),
                voter: voters.contains(id),
            })
            .collect();
        let matched = m
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .map(|(id, log)| (*id, log.map(|l| l.index).unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        NodeReport {
            id: self.id,
            grpc_addr: self.info.grpc_addr.clone(),
            http_addr: self.info.http_addr.clone(),
            peer_addr: self.info.peer().to_string(),
            role: role_of(m.state),
            term: m.current_term,
            leader_id: m.current_leader,
            last_log_index: m.last_log_index.unwrap_or(0),
            applied_index: m.last_applied.map(|l| l.index).unwrap_or(0),
            state_hash,
            state_index,
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index).unwrap_or(0),
            members,
            matched,
        }
    }
}

impl RaftNode {
    /// The cluster as the leader sees it, with every member's own report.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, Error> {
        let local = self.report();
        let leader_report = match local.leader_id {
            Some(l) if l == self.id => local,
            Some(l) => self.fetch_report(l).await?,
            None => {
                return Err(Error::Unavailable {
                    message: "no leader is known yet".into(),
                })
            }
        };
        let leader = &leader_report;
        let reports = futures::future::join_all(leader_report.members.iter().map(|m| async move {
            if m.id == leader.id {
                Ok(leader.clone())
            } else {
                self.fetch_report(m.id).await
            }
        }))
        .await;
        let members = leader_report
            .members
            .iter()
            .zip(reports)
            .map(|(member, report)| {
                let is_leader = member.id == leader_report.id;
                let matched_index = if is_leader {
                    leader_report.last_log_index
                } else {
                    leader_report.matched.get(&member.id).copied().unwrap_or(0)
                };
                let lag = leader_report.last_log_index.saturating_sub(matched_index);
                let health = match (&report, is_leader) {
                    (_, true) => MemberHealth::Leader,
                    (Err(_), false) => MemberHealth::Unreachable,
                    (Ok(_), false) if lag > LAGGING_AFTER => MemberHealth::Lagging,
                    (Ok(_), false) => MemberHealth::Healthy,
                };
                let (report, error) = match report {
                    Ok(r) => (Some(r), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                MemberStatus {
                    member: member.clone(),
                    matched_index,
                    lag,
                    health,
                    report,
                    error,
                }
            })
            .collect();
        Ok(ClusterStatus {
            leader_id: Some(leader_report.id),
            term: leader_report.term,
            last_log_index: leader_report.last_log_index,
            members,
        })
    }

    async fn fetch_report(&self, id: u64) -> Result<NodeReport, Error> {
        match self
            .forward(id, &ForwardRequest::Report, REPORT_TIMEOUT)
            .await?
        {
            ForwardReply::Report(r) => Ok(*r),
            other => Err(Error::Fatal {
                message: format!("unexpected report reply of kind {}", other.kind()),
            }),
        }
    }
}
