//! roost-server
