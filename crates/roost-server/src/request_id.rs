//! The id of the request being served on this task (REST's `X-Request-Id`, `rest/traced.rs`),
//! for `Api::submit` to put into the log entry it proposes (`Envelope::request_id`). A
//! task-local scoped to one request's handler: nothing outlives the request.

use std::future::Future;

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
