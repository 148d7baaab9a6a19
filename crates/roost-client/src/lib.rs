//! roost-client
