//! The REST API's request parsing, callable without a node: for the fuzz targets
//! (crates/roost-fuzz). Each function runs the extractors and conversions the routes run
//! on their input and says whether the input was accepted; none may panic. Not an API.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::{HeaderValue, Request};
use roost_core::command::{AgentPatch, IssuePatch};
use roost_core::{IssueStatus, Timestamp, WakeStatus};
use serde::de::DeserializeOwned;

use super::extract::{parse_csv, run_id_header, Bearer, JsonBody, QueryParams};
use super::{budgets, cluster, dto};
use crate::api::{CostEventRequest, NewBudgetPolicy};
use crate::error::ApiError;

/// The JSON bodies the routes take, by name.
pub const BODIES: &[&str] = &[
    "create_company",
    "create_agent",
    "patch_agent",
    "pause_agent",
    "empty",
    "create_key",
    "create_issue",
    "patch_issue",
    "checkout",
    "new_comment",
    "start_run",
    "finish_run",
    "wakeup",
    "create_join_token",
    "resolve_incident",
    "budget_policy",
    "cost_event",
    "cluster_init",
    "add_node",
];

/// The query strings the routes take, by name.
pub const QUERIES: &[&str] = &[
    "issue_list",
    "comment_list",
    "heartbeat_context",
    "run_log",
    "run_list",
    "activity",
    "wake_list",
    "events",
];

fn request(uri: &str, body: &[u8]) -> Option<Request<Body>> {
    Request::builder()
        .method("POST")
        .uri(uri)
        .body(Body::from(body.to_vec()))
        .ok()
}

/// `bytes` through `JsonBody<T>`, as a route with a `T` body extracts it.
fn json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let req = request("/", bytes).ok_or_else(|| ApiError::bad_request("no request"))?;
    futures::executor::block_on(JsonBody::<T>::from_request(req, &())).map(|JsonBody(t)| t)
}

/// Parses `bytes` as the body named `BODIES[n % BODIES.len()]`, and converts it as its
/// handler does before calling the API.
pub fn parse_body(n: usize, bytes: &[u8]) -> Result<(), ApiError> {
    match BODIES[n % BODIES.len()] {
        "create_company" => json::<dto::CreateCompany>(bytes).map(drop),
        "create_agent" => {
            let c = json::<dto::CreateAgent>(bytes)?;
            let base = roost_core::HeartbeatPolicy::default();
            super::paperclip::heartbeat_of(&base, c.heartbeat, c.runtime_config.as_ref()).map(drop)
        }
        "patch_agent" => {
            let p = json::<dto::PatchAgent>(bytes)?;
            let base = roost_core::HeartbeatPolicy::default();
            let heartbeat = super::paperclip::heartbeat_of(
                &base,
                p.heartbeat.clone(),
                p.runtime_config.as_ref(),
            )?;
            let patch: AgentPatch = p.into_patch(heartbeat);
            drop(patch);
            Ok(())
        }
        "pause_agent" => json::<dto::PauseAgent>(bytes).map(drop),
        "empty" => json::<dto::Empty>(bytes).map(drop),
        "create_key" => json::<dto::CreateKey>(bytes).map(drop),
        "create_issue" => json::<dto::CreateIssue>(bytes).map(|c| drop(IssuePatch::from(c))),
        "patch_issue" => json::<dto::PatchIssue>(bytes).map(|p| drop(p.split())),
        "checkout" => json::<dto::Checkout>(bytes).map(drop),
        "new_comment" => json::<dto::NewComment>(bytes).map(drop),
        "start_run" => json::<dto::StartRun>(bytes).map(drop),
        "finish_run" => json::<dto::FinishRun>(bytes).map(drop),
        "wakeup" => json::<dto::Wakeup>(bytes).map(drop),
        "create_join_token" => json::<dto::CreateJoinToken>(bytes).map(drop),
        "resolve_incident" => json::<budgets::Resolve>(bytes).map(drop),
        "budget_policy" => json::<NewBudgetPolicy>(bytes).map(drop),
        "cost_event" => json::<CostEventRequest>(bytes).map(|c| {
            // The API parses the time before it builds the command.
            if let Some(at) = c.occurred_at.as_deref().and_then(Timestamp::parse_rfc3339) {
                drop(at.to_rfc3339());
            }
        }),
        "cluster_init" => json::<cluster::Init>(bytes).map(drop),
        _ => json::<cluster::AddNode>(bytes).map(drop),
    }
}

/// `query` through `QueryParams<T>`, as a route with a `T` query extracts it.
fn query<T: DeserializeOwned>(query: &[u8]) -> Result<T, ApiError> {
    let uri = format!("/?{}", String::from_utf8_lossy(query));
    let req = request(&uri, b"").ok_or_else(|| ApiError::bad_request("not a URI"))?;
    let (mut parts, _) = req.into_parts();
    futures::executor::block_on(QueryParams::<T>::from_request_parts(&mut parts, &()))
        .map(|QueryParams(q)| q)
}

/// Parses `bytes` as the query string named `QUERIES[n % QUERIES.len()]`, and its status
/// lists as the handlers do.
pub fn parse_query(n: usize, bytes: &[u8]) -> Result<(), ApiError> {
    match QUERIES[n % QUERIES.len()] {
        "issue_list" => query::<dto::IssueListQuery>(bytes).and_then(|q| {
            q.status
                .as_deref()
                .map(parse_csv::<IssueStatus>)
                .transpose()
                .map(drop)
        }),
        "comment_list" => query::<dto::CommentListQuery>(bytes).map(drop),
        "heartbeat_context" => query::<dto::HeartbeatContextQuery>(bytes).map(drop),
        "run_log" => query::<dto::RunLogQuery>(bytes).map(drop),
        "events" => query::<super::events::EventsQuery>(bytes).map(drop),
        "run_list" => query::<dto::RunListQuery>(bytes).map(drop),
        "activity" => query::<dto::ActivityQuery>(bytes).map(drop),
        _ => query::<dto::WakeListQuery>(bytes).and_then(|q| {
            q.status
                .as_deref()
                .map(parse_csv::<WakeStatus>)
                .transpose()
                .map(drop)
        }),
    }
}

/// Reads a request's caller headers as the caller extractor does, before it authenticates:
/// the bearer token, the run id, the idempotency key. Header values that HTTP forbids
/// (`HeaderValue` refuses them) are left out, as a server never receives them.
pub fn parse_headers(
    authorization: &[u8],
    run_id: &[u8],
    idempotency_key: &[u8],
) -> [Result<(), ApiError>; 3] {
    let mut req = request("/", b"").expect("a plain request");
    for (name, value) in [
        ("authorization", authorization),
        ("x-paperclip-run-id", run_id),
        ("idempotency-key", idempotency_key),
    ] {
        if let Ok(value) = HeaderValue::from_bytes(value) {
            req.headers_mut().insert(name, value);
        }
    }
    let (mut parts, _) = req.into_parts();
    let bearer = futures::executor::block_on(Bearer::from_request_parts(&mut parts, &()));
    let key = parts
        .headers
        .get("idempotency-key")
        .map(|v| crate::auth::idempotency_key(v.as_bytes(), "the Idempotency-Key header"));
    [
        bearer.map(drop),
        run_id_header(&parts).map(drop),
        key.transpose().map(drop),
    ]
}
