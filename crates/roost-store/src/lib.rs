//! roost-store
