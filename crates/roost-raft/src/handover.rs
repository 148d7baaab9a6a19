//! Handing leadership over before a leader stops. openraft 0.9 has no leadership transfer: a
//! leader that just stops leaves the others to elect after its lease and an election timeout
//! of silence (250-300 ms at the defaults, docs/cluster.md). Instead the
//! stopping leader refuses new proposals, waits until a voter holds its whole log, and asks
//! that voter to stand (`ForwardRequest::Elect`, openraft's `trigger().elect()`). The leader
//! itself grants the vote: openraft 0.9 refuses votes while the vote it holds was updated
//! within the lease (`Engine::handle_vote_req`), and a leader's own vote is not refreshed by
//! its heartbeats, so a leader that has led for longer than `election_timeout_max` votes for
//! the candidate, which wins with it while the other followers still refuse.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::node::{ForwardRequest, RaftNode};

/// How often the hand-over looks at replication while it waits; metrics changes wake it sooner.
const POLL: Duration = Duration::from_millis(10);

impl RaftNode {
    /// Refuses every later proposal on this node (`503`, retryable elsewhere): a stopping
    /// leader's log must stop growing for a follower to catch up with it.
    pub fn stop_proposing(&self) {
        self.stepping_down.store(true, Ordering::SeqCst);
    }

    /// Refuses every later proposal (as [`RaftNode::stop_proposing`], whether or not this node
    /// leads), then, if it leads a cluster with other voters, hands leadership to a caught-up
    /// voter (see the module's comment) and waits, until `timeout`, for another node to lead.
    /// Returns the new leader, or `None` when this node did not lead, had no other voter, its
    /// Raft core stopped, or the hand-over did not finish in time (the others then elect once
    /// it stops).
    pub async fn hand_over_leadership(&self, timeout: Duration) -> Option<u64> {
        self.stop_proposing();
        self.hand_over(Instant::now() + timeout).await
    }

    /// The hand-over itself, with proposals already refused by the caller: stopping
    /// ([`RaftNode::stop_proposing`]) or pausing while a stalled replication is mended
    /// (`replication_watch.rs`).
    pub(crate) async fn hand_over(&self, deadline: Instant) -> Option<u64> {
        let mut metrics = self.raft.metrics();
        let voters: Vec<u64> = {
            let m = metrics.borrow();
            if m.current_leader != Some(self.id) {
                return None;
            }
            m.membership_config
                .membership()
                .voter_ids()
                .filter(|v| *v != self.id)
                .collect()
        };
        if voters.is_empty() {
            return None;
        }
        // Proposals already queued still land in the log: a candidate chosen before them would
        // lack them, this node would refuse it its vote (a shorter log) and step down at its
        // higher term, and stand again itself. So the log stops growing first; a hand-over
        // that still fails is tried again with a caught-up voter until the deadline.
        while self.proposer.pending() > 0 && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
        let lease = self.timing.election_timeout_max();
        let mut attempt = 0u32;
        let mut term = metrics.borrow().current_term;
        // When this node was last elected, if during the hand-over: it refuses every vote for
        // a lease after that (`Engine::handle_vote_req`), so it asks only once that is over.
        let mut elected_at: Option<Instant> = None;
        while Instant::now() < deadline {
            let (leader, now_term) = {
                let m = metrics.borrow();
                (m.current_leader, m.current_term)
            };
            match leader {
                Some(l) if l != self.id => return Some(l),
                // Between leaders (a refused candidate's higher term made this node step
                // down): wait for one; it may be this node again, then it asks again.
                None => {
                    if !changed_within(&mut metrics).await {
                        return None;
                    }
                    continue;
                }
                Some(_) => {}
            }
            if now_term != term {
                term = now_term;
                elected_at = Some(Instant::now());
            }
            if let Some(at) = elected_at {
                let votes_again = at + lease + POLL * 5;
                if Instant::now() < votes_again {
                    tokio::time::sleep_until(votes_again.min(deadline)).await;
                    continue;
                }
            }
            attempt += 1;
            let Some(candidate) = self.caught_up_voter(&voters, deadline).await else {
                tracing::warn!(
                    node_id = self.id,
                    "no voter caught up in time; not handing over"
                );
                return None;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(error) = self.forward(candidate, &ForwardRequest::Elect, left).await {
                tracing::warn!(node_id = self.id, candidate, %error, "could not hand leadership over");
                return None;
            }
            let attempt_by = (Instant::now() + lease).min(deadline);
            loop {
                let (leader, now_term) = {
                    let m = metrics.borrow();
                    (m.current_leader, m.current_term)
                };
                if let Some(leader) = leader.filter(|l| *l != self.id) {
                    return Some(leader);
                }
                // Elected again itself: the candidate lost; wait out this node's lease.
                if leader == Some(self.id) && now_term != term {
                    break;
                }
                if Instant::now() >= attempt_by {
                    break;
                }
                if !changed_within(&mut metrics).await {
                    return None;
                }
            }
            tracing::info!(
                node_id = self.id,
                candidate,
                attempt,
                "the candidate did not win; asking again"
            );
        }
        None
    }

    /// A voter of `voters` whose log matches this node's last entry, waiting until `deadline`.
    async fn caught_up_voter(&self, voters: &[u64], deadline: Instant) -> Option<u64> {
        let mut metrics = self.raft.metrics();
        loop {
            let caught_up = {
                let m = metrics.borrow();
                let last = m.last_log_index;
                m.replication.as_ref().and_then(|r| {
                    voters
                        .iter()
                        .copied()
                        .find(|v| r.get(v).and_then(|l| l.as_ref()).map(|l| l.index) >= last)
                })
            };
            if caught_up.is_some() || Instant::now() >= deadline {
                return caught_up;
            }
            if !changed_within(&mut metrics).await {
                return None;
            }
        }
    }

    /// Stands for election now (the leader, stopping or unable to reach a member, asked this
    /// node to).
    pub(crate) async fn stand_for_election(&self) -> Result<(), crate::Error> {
        tracing::info!(
            node_id = self.id,
            "the leader hands its leadership over: standing for election"
        );
        self.raft
            .trigger()
            .elect()
            .await
            .map_err(|e| crate::Error::Fatal {
                message: e.to_string(),
            })
    }
}

/// Waits up to [`POLL`] for the metrics to change; false once the Raft core has stopped (the
/// wait would return at once for ever).
async fn changed_within(
    metrics: &mut tokio::sync::watch::Receiver<openraft::RaftMetrics<u64, roost_store::NodeInfo>>,
) -> bool {
    !matches!(
        tokio::time::timeout(POLL, metrics.changed()).await,
        Ok(Err(_))
    )
}
