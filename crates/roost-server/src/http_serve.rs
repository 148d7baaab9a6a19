//! Serves the REST router on HTTP/1.1 connections, each bounded in time, and at most
//! `limits.http_max_connections` of them at once (`limits.rs`). `axum::serve` has no header
//! timeout, no body timeout and no connection cap: issue 21 held 3000 idle connections and 400
//! slowloris ones. Takes any `axum::serve::Listener`: plain TCP, or the TLS listener of
//! `tls.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;

use crate::limits::LimitsConfig;

/// Serves `router` on `listener` until `shutdown`, then finishes the requests in flight.
pub(crate) async fn serve<L: axum::serve::Listener>(
    mut listener: L,
    router: Router,
    limits: &LimitsConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let body_timeout = limits.body_read_timeout();
    let router = router.layer(axum::middleware::from_fn(move |req, next| {
        body_deadline(req, next, body_timeout)
    }));
    let service = TowerToHyperService::new(router);
    let mut http = hyper::server::conn::http1::Builder::new();
    // hyper starts this timer whenever it waits for a request head: for the first request, and
    // on a keep-alive connection for each next one, so it closes idle connections too.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout())
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.http_max_connections));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // At the cap, accept nothing: new connections wait in the listen backlog until a
        // connection closes (the timeouts above see that one does).
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let (io, _addr) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let conn = graceful.watch(http.serve_connection(TokioIo::new(io), service.clone()));
        tokio::spawn(async move {
            if let Err(error) = conn.await {
                tracing::debug!(%error, "http connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Gives the request's body `timeout` to arrive in full; a body still arriving after it fails
/// to read, and the request is answered `400` ("could not read request body").
async fn body_deadline(req: Request, next: Next, timeout: Duration) -> Response {
    let (parts, body) = req.into_parts();
    let deadline = tokio::time::Instant::now() + timeout;
    let frames = futures::stream::unfold(Some(body.into_data_stream()), move |state| async move {
        let mut frames = state?;
        match tokio::time::timeout_at(deadline, frames.next()).await {
            Ok(Some(frame)) => Some((frame, Some(frames))),
            Ok(None) => None,
            Err(_) => Some((
                Err(axum::Error::new(format!(
                    "the request body did not arrive within {} ms",
                    timeout.as_millis()
                ))),
                None,
            )),
        }
    });
    next.run(Request::from_parts(parts, Body::from_stream(frames)))
        .await
}
