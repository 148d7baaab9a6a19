//! The gRPC client API, `roost.v1.Control`, over the same service layer as REST.

mod budgets;
mod cluster;
mod convert;
mod service;

use roost_proto::v1::control_server::ControlServer;

/// The tonic service to add to the node's gRPC server.
pub(crate) fn control_service(api: crate::api::Api) -> ControlServer<service::ControlService> {
    ControlServer::new(service::ControlService::new(api))
}

/// The cluster administration service.
pub(crate) fn cluster_service(
    api: crate::api::Api,
) -> roost_proto::v1::cluster_server::ClusterServer<cluster::ClusterService> {
    roost_proto::v1::cluster_server::ClusterServer::new(cluster::ClusterService::new(api))
}
