//! The client listener's standard gRPC services, so a client in any language (or `grpcurl`)
//! needs nothing from Roost's source: `grpc.health.v1.Health`, answering what `/readyz`
//! answers, and server reflection (`grpc.reflection.v1` and `v1alpha`) over the descriptor set
//! checked in beside the generated code (`roost_proto::FILE_DESCRIPTOR_SET`). Neither needs a
//! credential, like `/readyz`; neither is served on the peer listener.

use std::time::Duration;

use tokio::sync::watch;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::api::Api;
use crate::supervise::Supervisor;

/// The Roost services of the client listener, each reported by the health service (beside the
/// whole server, `""`) and listed by reflection. `roost.v1.Raft` is on the peer listener only.
pub(crate) const SERVICES: [&str; 3] = [
    roost_proto::v1::control_server::SERVICE_NAME,
    roost_proto::v1::cluster_server::SERVICE_NAME,
    roost_proto::v1::worker_server::SERVICE_NAME,
];

/// How often the health service asks the readiness checks again (each passes a read barrier,
/// as one `/readyz` does, so this is one ReadIndex round trip a second).
pub(crate) const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

const HEALTH: &str = "grpc.health.v1.Health";
const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";

/// The health service, `NOT_SERVING` for everything until [`report_health`] has seen the node
/// ready.
pub(crate) async fn health_service() -> (HealthReporter, HealthServer<impl Health>) {
    let (reporter, service) = tonic_health::server::health_reporter();
    set_all(&reporter, ServingStatus::NotServing).await;
    (reporter, service)
}

async fn set_all(reporter: &HealthReporter, status: ServingStatus) {
    for name in std::iter::once("").chain(SERVICES) {
        reporter.set_service_status(name, status).await;
    }
}

/// Keeps the health service's statuses on this node's readiness (`health.rs`, what `/readyz`
/// answers): `SERVING` while ready, `NOT_SERVING` otherwise, checked every
/// [`HEALTH_INTERVAL`] and set only when it changes; `NOT_SERVING` from the moment the node
/// begins to stop.
pub(crate) async fn report_health(
    reporter: HealthReporter,
    api: Api,
    tasks: Supervisor,
    stop: watch::Receiver<bool>,
) {
    let stopping = crate::stopped(stop);
    tokio::pin!(stopping);
    let mut shown = ServingStatus::NotServing;
    let mut ticks = tokio::time::interval(HEALTH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let ready = tokio::select! {
            biased;
            () = &mut stopping => break,
            _ = ticks.tick() => tokio::select! {
                biased;
                () = &mut stopping => break,
                readiness = api.ready(&tasks) => readiness.ready,
            },
        };
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        if status != shown {
            set_all(&reporter, status).await;
            shown = status;
        }
    }
    set_all(&reporter, ServingStatus::NotServing).await;
}

/// Server reflection, v1 and v1alpha (grpcurl and most tools ask v1 first, grpcio's Python
/// client v1alpha), listing the client listener's services and describing Roost's messages
/// and the health service's.
pub(crate) fn reflection_services() -> (
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::v1alpha::ServerReflectionServer<
        impl tonic_reflection::server::v1alpha::ServerReflection,
    >,
) {
    let builder = || {
        [HEALTH, REFLECTION_V1, REFLECTION_V1ALPHA]
            .into_iter()
            .chain(SERVICES)
            .fold(
                tonic_reflection::server::Builder::configure()
                    .register_encoded_file_descriptor_set(roost_proto::FILE_DESCRIPTOR_SET)
                    .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                    // Both versions in both, as both are listed.
                    .register_encoded_file_descriptor_set(
                        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
                    )
                    .register_encoded_file_descriptor_set(
                        tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
                    ),
                |builder, name| builder.with_service_name(name),
            )
    };
    // The descriptor sets are compiled in and checked by roost-proto's freshness test and
    // tonic's own: a failure here is a build that can never serve.
    (
        builder()
            .build_v1()
            .expect("the checked-in descriptor sets decode"),
        builder()
            .build_v1alpha()
            .expect("the checked-in descriptor sets decode"),
    )
}
