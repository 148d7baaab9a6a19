//! `GET /api/companies/{cid}/events`: the company's event stream as Server-Sent Events
//! (`api/events.rs`). Each event's SSE `id` is its `seq`, so a browser's `EventSource`
//! resumes by itself after a reconnect (it sends `Last-Event-ID`); other clients pass
//! `?after=<seq>`. `?follow=false` returns the events so far and ends.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use roost_core::views::Event;
use serde::Deserialize;

use super::extract::QueryParams;
use crate::api::{Api, StreamItem};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsQuery {
    /// Events after this `seq` (0: from the first); wins over `Last-Event-ID`.
    pub after: Option<u64>,
    /// Keep the stream open for new events (the default).
    pub follow: Option<bool>,
}

/// The `seq` a reconnecting `EventSource` last saw.
pub(crate) fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(
                "Last-Event-ID must be the seq of an event this stream sent (a whole number)",
            )
        })
}

/// One SSE frame: an event as `id` and JSON `data`, or a comment that keeps the stream open.
fn sse_frame(item: StreamItem) -> Bytes {
    match item {
        StreamItem::Event(entry) => {
            let event = Event::from(*entry);
            let data = serde_json::to_string(&event).unwrap_or_else(|_| "{}".into());
            Bytes::from(format!("id: {}\ndata: {data}\n\n", event.seq))
        }
        StreamItem::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
    }
}

/// An event stream as a `text/event-stream` response (this route's and the dashboard's).
pub(crate) fn sse_response(stream: crate::api::EventStream) -> Response {
    let body = Body::from_stream(stream.map(|item| item.map(sse_frame)));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub async fn events(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    headers: HeaderMap,
    QueryParams(q): QueryParams<EventsQuery>,
) -> Result<Response> {
    let after = match q.after {
        Some(after) => after,
        None => last_event_id(&headers)?.unwrap_or(0),
    };
    let stream = api
        .events(&caller, &cid, after, q.follow.unwrap_or(true))
        .await?;
    Ok(sse_response(stream))
}
