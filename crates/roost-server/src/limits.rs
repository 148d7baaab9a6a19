//! `[limits]`: what one client may hold of a node. Per-credential request rates
//! (`rate_limit.rs`), the REST listener's read timeouts and connection cap (`http_serve.rs`),
//! and the gRPC listener's keepalive, timeouts and concurrency (`grpc_server`). Issue 21:
//! 3000 idle connections, or 400 slowloris ones, were held with no timeout.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::rate_limit::RateLimiter;

/// Requests per second per caller when `roost server` is not told otherwise: far above
/// what an agent's loop or an operator makes, low enough that one runaway caller cannot take
/// a node's whole capacity (a node serves a few thousand writes a second, BENCHMARKS.md).
pub const SERVER_REQUESTS_PER_SECOND: u32 = 500;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Requests per second per caller, an agent's keys together (token bucket, in this node's memory); 0 is off.
    /// Unset: off for `roost dev` and for a `ServerConfig` built in code; `roost server` sets
    /// [`SERVER_REQUESTS_PER_SECOND`].
    pub requests_per_second: Option<u32>,
    /// Requests a credential may make at once (the bucket's size). Unset: twice the rate.
    pub burst: Option<u32>,
    /// A client must send a request's headers within this time. hyper starts the timer
    /// whenever it waits for a request head, so this is also the idle keep-alive timeout: a
    /// connection with no request under way is closed after it.
    pub http_header_read_timeout_ms: u64,
    /// A client must send a request's whole body within this time.
    pub http_body_read_timeout_ms: u64,
    /// Open REST connections at most; more wait in the listen backlog until one closes.
    pub http_max_connections: usize,
    /// gRPC (HTTP/2) pings on an idle connection every this long...
    pub grpc_keepalive_interval_ms: u64,
    /// ...and the connection is closed if a ping is not answered within this.
    pub grpc_keepalive_timeout_ms: u64,
    /// TCP keepalive on gRPC connections (0: off).
    pub grpc_tcp_keepalive_ms: u64,
    /// A gRPC call whose handler has not answered within this is ended with CANCELLED
    /// (a stream's handler answers at once, so worker connections, AppendEntries streams and
    /// run log streams stay open). Above a membership change's 300 s
    /// (roost-raft/src/membership.rs: a learner catching up from a snapshot), which a
    /// follower forwards to the leader as one call.
    pub grpc_request_timeout_ms: u64,
    /// Concurrent streams (calls) on one gRPC connection.
    pub grpc_max_concurrent_streams: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            requests_per_second: None,
            burst: None,
            http_header_read_timeout_ms: 10_000,
            http_body_read_timeout_ms: 30_000,
            http_max_connections: 4096,
            grpc_keepalive_interval_ms: 10_000,
            grpc_keepalive_timeout_ms: 20_000,
            grpc_tcp_keepalive_ms: 60_000,
            grpc_request_timeout_ms: 330_000,
            grpc_max_concurrent_streams: 1024,
        }
    }
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// The node's gRPC server type: tonic's, behind the metering layer.
pub(crate) type GrpcServer = tonic::transport::Server<
    tower::layer::util::Stack<crate::grpc::metered::Metered, tower::layer::util::Identity>,
>;
/// Its router, once services are added.
pub(crate) type GrpcRouter = tonic::transport::server::Router<
    tower::layer::util::Stack<crate::grpc::metered::Metered, tower::layer::util::Identity>,
>;

impl LimitsConfig {
    /// Fills an unset rate with `roost server`'s defaults.
    pub fn with_server_defaults(mut self) -> Self {
        self.requests_per_second
            .get_or_insert(SERVER_REQUESTS_PER_SECOND);
        self
    }

    pub(crate) fn rate_limiter(&self) -> RateLimiter {
        match self.requests_per_second {
            None | Some(0) => RateLimiter::off(),
            Some(rate) => RateLimiter::new(rate, self.burst.unwrap_or(rate.saturating_mul(2))),
        }
    }

    pub(crate) fn header_read_timeout(&self) -> Duration {
        ms(self.http_header_read_timeout_ms)
    }

    pub(crate) fn body_read_timeout(&self) -> Duration {
        ms(self.http_body_read_timeout_ms)
    }

    /// The gRPC server, its connections kept alive and bounded. A connection whose peer stops
    /// answering HTTP/2 pings is closed; that covers TLS connections too, whose TCP keepalive
    /// `grpc_incoming` does not set.
    /// A gRPC server with these limits, every call counted in `metrics` (`grpc/metered.rs`).
    /// `traced_node`: the node's id on the client listener, whose calls run in request spans.
    pub(crate) fn grpc_server(
        &self,
        metrics: &crate::metrics::Metrics,
        traced_node: Option<u64>,
    ) -> GrpcServer {
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(ms(self.grpc_keepalive_interval_ms)))
            .http2_keepalive_timeout(Some(ms(self.grpc_keepalive_timeout_ms)))
            .timeout(ms(self.grpc_request_timeout_ms))
            .max_concurrent_streams(Some(self.grpc_max_concurrent_streams))
            .layer(crate::grpc::metered::Metered::new(
                metrics.clone(),
                traced_node,
            ))
    }

    /// Plaintext gRPC connections, TCP_NODELAY and TCP keepalive set (tonic's own
    /// `tcp_keepalive` is ignored by `serve_with_incoming`).
    pub(crate) fn grpc_incoming(
        &self,
        listener: tokio::net::TcpListener,
    ) -> tonic::transport::server::TcpIncoming {
        tonic::transport::server::TcpIncoming::from(listener)
            .with_nodelay(Some(true))
            .with_keepalive(
                (self.grpc_tcp_keepalive_ms > 0).then(|| ms(self.grpc_tcp_keepalive_ms)),
            )
    }

    /// Refuses values that would make a listener unusable.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            (
                "http_header_read_timeout_ms",
                self.http_header_read_timeout_ms,
            ),
            ("http_body_read_timeout_ms", self.http_body_read_timeout_ms),
            ("http_max_connections", self.http_max_connections as u64),
            (
                "grpc_keepalive_interval_ms",
                self.grpc_keepalive_interval_ms,
            ),
            ("grpc_keepalive_timeout_ms", self.grpc_keepalive_timeout_ms),
            ("grpc_request_timeout_ms", self.grpc_request_timeout_ms),
            (
                "grpc_max_concurrent_streams",
                u64::from(self.grpc_max_concurrent_streams),
            ),
        ];
        match positive.iter().find(|(_, v)| *v == 0) {
            Some((name, _)) => Err(format!("limits.{name} must be at least 1")),
            None => Ok(()),
        }
    }
}
