//! The id of the request being served on this task (REST's `X-Request-Id`, `rest/traced.rs`),
//! for `Api::submit` to put into the log entry it proposes (`Envelope::request_id`). A
//! task-local scoped to one request's handler: nothing outlives the request.

use std::future::Future;

/// The header (REST) and metadata key (gRPC) a client names its request's id in.
pub(crate) const HEADER: &str = "x-request-id";

/// The request's id: the client's, when it is short and printable (it reaches logs and the
/// Raft log); otherwise, or without one, a new one.
pub(crate) fn from_headers(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(crate::api::new_id, str::to_string)
}

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request whose handler runs on this task, if any.
pub(crate) fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `handler` as request `id`.
pub(crate) async fn scope<F: Future>(id: String, handler: F) -> F::Output {
    REQUEST_ID.scope(id, handler).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_request_id_is_seen_only_inside_its_scope() {
        assert_eq!(current(), None);
        let seen = scope("r-1".into(), async { current() }).await;
        assert_eq!(seen.as_deref(), Some("r-1"));
        assert_eq!(current(), None);
    }
}
