//! Bounds on the terms, log indexes and offsets of incoming Raft messages, checked before a
//! message reaches openraft. openraft 0.9 does plain arithmetic on them (`term + 1` when it
//! stands for election, `index + 1` for the next entry, `offset += len` for a snapshot chunk):
//! an AppendEntries with term 2^64-1 made a node panic on overflow, and since the forged term
//! had been saved as its vote, panic again at once on every restart. No honest
//! cluster comes near these bounds, so a message beyond them is refused as malformed.

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{LogId, RaftLogId, Vote};
use roost_store::TypeConfig;

/// Terms below 2^63: a term grows by one per election, so an honest cluster electing a leader
/// every millisecond would take 292 million years to get there, and openraft keeps the other
/// half of the range for its `term + 1`.
pub(crate) const MAX_TERM: u64 = (1 << 63) - 1;

/// Log indexes whose every slot fits a u64 (`roost_core::state::slot`: index ×
/// `SLOTS_PER_ENTRY` + position), about 1.8 × 10^16: at a million entries a second, 570 years
/// of writes. Fencing tokens and generated ids are slots, so an index past this would make them
/// collide (the slot saturates), and openraft's `index + 1` would come next.
pub(crate) const MAX_INDEX: u64 = u64::MAX / roost_core::state::SLOTS_PER_ENTRY - 1;

/// Snapshot chunk offsets: far above any snapshot, far below where `offset + len` wraps.
pub(crate) const MAX_SNAPSHOT_OFFSET: u64 = 1 << 62;

/// Why a message was refused: which field, and its value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OutOfBounds {
    field: &'static str,
    value: u64,
    bound: u64,
}

impl std::fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "raft message refused: {} is {}, above the bound {} (crates/roost-raft/src/bounds.rs)",
            self.field, self.value, self.bound
        )
    }
}

fn at_most(field: &'static str, value: u64, bound: u64) -> Result<(), OutOfBounds> {
    if value > bound {
        return Err(OutOfBounds {
            field,
            value,
            bound,
        });
    }
    Ok(())
}

fn vote(field: &'static str, vote: &Vote<u64>) -> Result<(), OutOfBounds> {
    at_most(field, vote.leader_id().term, MAX_TERM)
}

fn log_id(field: &'static str, log_id: Option<&LogId<u64>>) -> Result<(), OutOfBounds> {
    match log_id {
        Some(id) => {
            at_most(field, id.leader_id.term, MAX_TERM)?;
            at_most(field, id.index, MAX_INDEX)
        }
        None => Ok(()),
    }
}

pub(crate) fn check_vote(req: &VoteRequest<u64>) -> Result<(), OutOfBounds> {
    vote("vote.term", &req.vote)?;
    log_id("last_log_id", req.last_log_id.as_ref())
}

pub(crate) fn check_append(req: &AppendEntriesRequest<TypeConfig>) -> Result<(), OutOfBounds> {
    vote("vote.term", &req.vote)?;
    log_id("prev_log_id", req.prev_log_id.as_ref())?;
    log_id("leader_commit", req.leader_commit.as_ref())?;
    req.entries
        .iter()
        .try_for_each(|entry| log_id("entries.log_id", Some(entry.get_log_id())))
}

pub(crate) fn check_snapshot(req: &InstallSnapshotRequest<TypeConfig>) -> Result<(), OutOfBounds> {
    vote("vote.term", &req.vote)?;
    log_id("meta.last_log_id", req.meta.last_log_id.as_ref())?;
    log_id(
        "meta.last_membership.log_id",
        req.meta.last_membership.log_id().as_ref(),
    )?;
    at_most("offset", req.offset, MAX_SNAPSHOT_OFFSET)
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Vote};

    use super::*;

    fn append(term: u64, prev_index: u64) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(term, 1),
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), prev_index)),
            entries: Vec::new(),
            leader_commit: None,
        }
    }

    #[test]
    fn terms_and_indexes_at_the_bound_pass_and_past_it_are_refused() {
        assert_eq!(check_append(&append(MAX_TERM, MAX_INDEX)), Ok(()));
        assert!(check_append(&append(u64::MAX, 1)).is_err());
        assert!(check_append(&append(MAX_TERM + 1, 1)).is_err());
        assert!(check_append(&append(1, MAX_INDEX + 1)).is_err());
        let vote = VoteRequest::new(Vote::new(u64::MAX, 2), None);
        assert!(check_vote(&vote).is_err());
    }
}
