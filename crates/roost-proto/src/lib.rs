//! roost-proto
