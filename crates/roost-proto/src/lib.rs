//! Generated protobuf messages and tonic clients/servers for Roost's gRPC APIs.
//!
//! The `.proto` sources live in `proto/roost/v1/` at the repository root. The Rust code
//! generated from them is checked in at `src/gen/roost.v1.rs`, so building needs no `protoc`;
//! the test `tests/generated_code_is_fresh.rs` proves it matches the sources. After editing a
//! `.proto` file, refresh it with:
//!
//! ```text
//! ROOST_REGENERATE=1 cargo test -p roost-proto --test generated_code_is_fresh
//! ```
//!
//! The same test keeps `src/gen/roost_descriptor.bin`, the encoded descriptor set of those files
//! ([`FILE_DESCRIPTOR_SET`]), which the node's gRPC server reflection serves.
//!
//! Services (package `roost.v1`):
//! - `Control`, the typed client API: [`v1::control_client::ControlClient`],
//!   [`v1::control_server::ControlServer`] and [`v1::control_server::Control`];
//! - `Raft`, the node-to-node Raft transport carrying openraft's JSON: [`v1::raft_client::RaftClient`],
//!   [`v1::raft_server::RaftServer`] and [`v1::raft_server::Raft`].

/// The encoded `google.protobuf.FileDescriptorSet` of `proto/roost/v1/*.proto`, comments
/// included, for gRPC server reflection (checked in beside the generated code, kept fresh by
/// `tests/generated_code_is_fresh.rs`).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("gen/roost_descriptor.bin");

/// Package `roost.v1`.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::nursery,
    missing_docs,
    rustdoc::all
)]
pub mod v1 {
    include!("gen/roost.v1.rs");
}

/// The codec of every generated client and server.
pub mod codec;

/// The proto enums and the roost-core enums they carry.
pub mod enums;
pub use enums::{NotAValue, ProtoEnum};
