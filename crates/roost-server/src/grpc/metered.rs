//! Counts every gRPC call a node serves, by method and status code, with its latency: a tower
//! layer in front of the client listener's and the peer listener's services (`lib.rs`), the
//! gRPC twin of `metrics::track` for REST. On the client listener a call also runs in a span
//! with its request id (the client's `x-request-id` metadata, or a new one), the node's id and
//! the method, and its write's log entry carries that id, as REST's do (`rest/traced.rs`); the
//! reply's metadata names it.
//!
//! The code is read from the response head: a failed unary call (and any call refused before it
//! started) carries `grpc-status` there; a call whose head has none is counted `OK` (a unary
//! call's status then follows in the trailers, and it is `OK` unless the body fails on the way;
//! a stream that fails later is counted by how it started). Latency is to the response's head.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::metrics::Metrics;

/// The layer: one per server, sharing the node's [`Metrics`].
#[derive(Clone)]
pub(crate) struct Metered {
    metrics: Metrics,
    /// The node's id, to run each call in a request span; `None` on the peer listener, whose
    /// Raft calls the apply logs already follow.
    traced_node: Option<u64>,
}

impl Metered {
    pub(crate) fn new(metrics: Metrics, traced_node: Option<u64>) -> Metered {
        Metered {
            metrics,
            traced_node,
        }
    }
}

impl<S> tower::Layer<S> for Metered {
    type Service = MeteredService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MeteredService {
            inner,
            metrics: self.metrics.clone(),
            traced_node: self.traced_node,
        }
    }
}

#[derive(Clone)]
pub(crate) struct MeteredService<S> {
    inner: S,
    metrics: Metrics,
    traced_node: Option<u64>,
}

/// gRPC's status code names (`grpc-status` values 0 to 16).
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The code a response head names; an unknown value is `UNKNOWN`, as gRPC reads it.
pub(crate) fn code_of(headers: &axum::http::HeaderMap) -> &'static str {
    match headers.get("grpc-status") {
        None => CODES[0],
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .and_then(|n| CODES.get(n).copied())
            .unwrap_or("UNKNOWN"),
    }
}

/// The method label: the path of a served method; anything a client made up (answered
/// `UNIMPLEMENTED`) is one series, not one per path.
pub(crate) fn method_of(path: &str, code: &str) -> String {
    if code == "UNIMPLEMENTED" || path.len() > 128 || path.matches('/').count() != 2 {
        "unmatched".into()
    } else {
        path.to_string()
    }
}

impl<S, B, RB> tower::Service<axum::http::Request<B>> for MeteredService<S>
where
    S: tower::Service<axum::http::Request<B>, Response = axum::http::Response<RB>> + Send,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let path = request.uri().path().to_string();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let traced = self.traced_node.map(|node_id| {
            let id = crate::request_id::from_headers(request.headers());
            let span = tracing::info_span!("grpc", request_id = %id, node_id, method = %path);
            (id, span)
        });
        let call = self.inner.call(request);
        Box::pin(async move {
            let (mut response, id) = match traced {
                Some((id, span)) => {
                    let call = tracing::Instrument::instrument(call, span);
                    (crate::request_id::scope(id.clone(), call).await?, Some(id))
                }
                None => (call.await?, None),
            };
            let code = code_of(response.headers());
            metrics.record_grpc(method_of(&path, code), code, started.elapsed());
            if let Some(value) = id.and_then(|id| axum::http::HeaderValue::from_str(&id).ok()) {
                response
                    .headers_mut()
                    .insert(crate::request_id::HEADER, value);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_from_the_head_and_made_up_methods_are_one_series() {
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(code_of(&h), "OK");
        h.insert("grpc-status", axum::http::HeaderValue::from_static("5"));
        assert_eq!(code_of(&h), "NOT_FOUND");
        h.insert("grpc-status", axum::http::HeaderValue::from_static("99"));
        assert_eq!(code_of(&h), "UNKNOWN");
        assert_eq!(
            method_of("/roost.v1.Control/CreateIssue", "OK"),
            "/roost.v1.Control/CreateIssue"
        );
        assert_eq!(
            method_of("/roost.v1.Control/Nope", "UNIMPLEMENTED"),
            "unmatched"
        );
        assert_eq!(method_of("/a/b/c", "OK"), "unmatched");
    }
}
