//! The gRPC client API, `roost.v1.Control`, over the same service layer as REST.

mod agent_revisions;
mod attachments;
mod budgets;
mod cluster;
mod convert;
mod credentials;
mod documents;
mod events;
mod governance;
mod interactions;
mod issues;
mod memory;
mod metadata;
pub(crate) mod metered;
mod monitors;
mod records;
mod routine_triggers;
mod routines;
mod service;
mod skills;
pub(crate) mod standard;
mod wakes;

use roost_proto::v1::control_server::ControlServer;

/// The largest message a client or worker may send (roost.v1.Control, Cluster, Worker): a
/// REST body is at most `max_body_bytes` (1 MiB) and every field is bounded
/// (roost-core/src/limits.rs), so 4 MiB (tonic's default) holds any valid request. An oversize
/// one is refused (tonic answers OUT_OF_RANGE) from its length prefix, before it is read.
pub(crate) const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// The largest reply: a page of issues (up to 5000, descriptions of up to 100,000 characters)
/// can be large; a bigger page is refused with RESOURCE_EXHAUSTED, and the client asks for a
/// smaller `limit`.
pub(crate) const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;

/// The tonic service to add to the node's gRPC server.
pub(crate) fn control_service(api: crate::api::Api) -> ControlServer<service::ControlService> {
    ControlServer::new(service::ControlService::new(api))
        .max_decoding_message_size(MAX_REQUEST_BYTES)
        .max_encoding_message_size(MAX_REPLY_BYTES)
}

/// The cluster administration service.
pub(crate) fn cluster_service(
    api: crate::api::Api,
) -> roost_proto::v1::cluster_server::ClusterServer<cluster::ClusterService> {
    roost_proto::v1::cluster_server::ClusterServer::new(cluster::ClusterService::new(api))
        .max_decoding_message_size(MAX_REQUEST_BYTES)
        .max_encoding_message_size(MAX_REPLY_BYTES)
}
