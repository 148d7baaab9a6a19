//! The REST API under `/api`, compatible with Paperclip's routes and JSON shapes for the
//! agent loop, plus `/healthz` and `/readyz`.

mod admin;
mod budgets;
mod cluster;
mod credentials;
mod dto;
mod extract;
#[doc(hidden)]
pub mod fuzzing;
mod issues;
mod runs;
mod wakes;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};

pub use extract::BodyLimit;

use crate::api::Api;
use crate::error::ApiError;
use crate::supervise::Supervisor;

pub fn router(api: Api, max_body_bytes: usize, tasks: Supervisor) -> Router {
    let api_routes = Router::new()
        .route(
            "/companies",
            get(admin::list_companies).post(admin::create_company),
        )
        .route("/companies/{cid}", get(admin::get_company))
        .route(
            "/companies/{cid}/agents",
            get(admin::list_agents).post(admin::create_agent),
        )
        .route(
            "/companies/{cid}/issues",
            get(issues::list).post(issues::create),
        )
        .route("/companies/{cid}/heartbeat-runs", get(runs::list))
        .route("/companies/{cid}/activity", get(runs::activity))
        .route("/companies/{cid}/wakes", get(wakes::list))
        .route("/companies/{cid}/cost-events", post(budgets::record_cost))
        .route("/companies/{cid}/costs/summary", get(budgets::summary))
        .route("/companies/{cid}/budgets/overview", get(budgets::overview))
        .route(
            "/companies/{cid}/budgets/policies",
            post(budgets::set_policy),
        )
        .route(
            "/companies/{cid}/budget-incidents/{id}/resolve",
            post(budgets::resolve),
        )
        .route("/agents/me", get(admin::me))
        .route("/agents/me/inbox-lite", get(issues::inbox))
        .route(
            "/agents/{id}",
            get(admin::get_agent).patch(admin::update_agent),
        )
        .route("/agents/{id}/pause", post(admin::pause_agent))
        .route("/agents/{id}/resume", post(admin::resume_agent))
        .route("/agents/{id}/terminate", post(admin::terminate_agent))
        .route(
            "/agents/{id}/keys",
            get(credentials::list_agent_keys).post(admin::create_key),
        )
        .route(
            "/agents/{id}/keys/{key_id}",
            axum::routing::delete(credentials::revoke_agent_key),
        )
        .route("/agents/{id}/runs", post(runs::start))
        .route("/agents/{id}/wakeup", post(wakes::wakeup))
        .route("/wakes/{id}", get(wakes::get))
        .route("/workers", get(wakes::list_workers))
        .route(
            "/workers/join-tokens",
            get(credentials::list_join_tokens).post(wakes::create_join_token),
        )
        .route(
            "/workers/join-tokens/{id}",
            axum::routing::delete(credentials::revoke_join_token),
        )
        .route(
            "/admin/tokens",
            get(credentials::list_admin_tokens).post(credentials::create_admin_token),
        )
        .route(
            "/admin/tokens/{id}",
            axum::routing::delete(credentials::revoke_admin_token),
        )
        .route("/issues/{id}", get(issues::get).patch(issues::update))
        .route("/issues/{id}/checkout", post(issues::checkout))
        .route("/issues/{id}/release", post(issues::release))
        .route(
            "/issues/{id}/comments",
            get(issues::list_comments).post(issues::add_comment),
        )
        .route(
            "/issues/{id}/comments/{comment_id}",
            get(issues::get_comment),
        )
        .route("/issues/{id}/children", post(issues::create_child))
        .route(
            "/issues/{id}/heartbeat-context",
            get(issues::heartbeat_context),
        )
        .route("/issues/{id}/active-run", get(issues::active_run))
        .route("/heartbeat-runs/{id}", get(runs::get))
        .route("/heartbeat-runs/{id}/log", get(runs::log))
        .route("/agents/{id}/task-sessions", get(runs::task_sessions))
        .route("/heartbeat-runs/{id}/finish", post(runs::finish))
        .route("/heartbeat-runs/{id}/cancel", post(runs::cancel))
        .route("/audit/verify", get(runs::verify_audit))
        .route("/cluster/status", get(cluster::status))
        .route("/cluster/node", get(cluster::node))
        .route("/cluster/init", post(cluster::init))
        .route("/cluster/nodes", post(cluster::add_node))
        .route(
            "/cluster/nodes/{id}",
            axum::routing::delete(cluster::remove_node),
        )
        .fallback(unknown_route);
    Router::new()
        .nest("/api", api_routes)
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(Extension(BodyLimit(max_body_bytes)))
        .layer(Extension(tasks))
        .with_state(api)
}

/// `200` or `503`, with every check and which failed (`health.rs`).
async fn ready(
    State(api): State<Api>,
    Extension(tasks): Extension<Supervisor>,
) -> impl IntoResponse {
    let readiness = api.ready(&tasks);
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness))
}

async fn unknown_route() -> ApiError {
    ApiError::Domain(roost_core::DomainError::NotFound {
        entity: "route".into(),
        id: "API route not found".into(),
    })
}

async fn method_not_allowed() -> impl IntoResponse {
    let body = serde_json::json!({ "error": "method_not_allowed", "message": "method not allowed on this route", "details": null });
    (StatusCode::METHOD_NOT_ALLOWED, Json(body))
}

/// `201 Created` with a JSON body.
pub(crate) fn created<T: serde::Serialize>(value: T) -> (StatusCode, Json<T>) {
    (StatusCode::CREATED, Json(value))
}
