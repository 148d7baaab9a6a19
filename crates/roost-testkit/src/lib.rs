//! roost-testkit
