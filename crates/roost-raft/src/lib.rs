//! roost-raft
