//! The REST API under `/api`, compatible with Paperclip's routes and JSON shapes for the
//! agent loop, plus `/healthz` and `/readyz`.

mod admin;
mod approvals;
mod attachments;
mod budgets;
mod cluster;
mod compat;
mod costs;
mod credentials;
mod documents;
mod dto;
mod events;
mod interactions;
pub(crate) use events::{last_event_id, sse_response};
mod extract;
#[doc(hidden)]
pub mod fuzzing;
mod home;
mod issues;
mod labels;
mod memory;
mod paperclip;
mod projects;
mod routines;
mod run_events;
mod runs;
mod skills;
mod traced;
mod wakes;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
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
        .route(
            "/companies/{cid}",
            get(admin::get_company).patch(admin::update_company),
        )
        .route(
            "/companies/{cid}/branding",
            axum::routing::patch(admin::update_branding),
        )
        .route("/companies/{cid}/archive", post(admin::archive_company))
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
        .route("/health", get(compat::health))
        .route("/cli-auth/me", get(compat::cli_auth_me))
        .route("/companies/stats", get(compat::company_stats))
        .route("/companies/{cid}/live-runs", get(compat::company_live_runs))
        .route("/companies/{cid}/org", get(compat::org))
        .route("/companies/{cid}/dashboard", get(compat::dashboard))
        .route("/companies/{cid}/costs/by-agent", get(costs::by_agent))
        // The event stream (SSE): rest/events.rs.
        .route("/companies/{cid}/events", get(events::events))
        .route("/companies/{cid}/costs/by-project", get(costs::by_project))
        .route(
            "/companies/{cid}/costs/by-provider",
            get(costs::by_provider),
        )
        .route("/companies/{cid}/costs/by-biller", get(costs::by_biller))
        .route(
            "/companies/{cid}/costs/by-agent-model",
            get(costs::by_agent_model),
        )
        .route(
            "/companies/{cid}/costs/window-spend",
            get(costs::window_spend),
        )
        .route(
            "/companies/{cid}/budgets",
            axum::routing::patch(compat::set_company_budget),
        )
        .route("/issues/{id}/activity", get(runs::issue_activity))
        .route("/issues/{id}/runs", get(compat::issue_runs))
        .route("/issues/{id}/live-runs", get(compat::issue_live_runs))
        .route("/issues/{id}/cost-summary", get(compat::issue_cost_summary))
        .route(
            "/issues/{id}/admin/force-release",
            post(compat::force_release),
        )
        .route("/heartbeat-runs/{id}/issues", get(compat::run_issues))
        .route(
            "/agents/{id}/configuration",
            get(compat::agent_configuration),
        )
        .route(
            "/agents/{id}/config-revisions",
            get(compat::agent_config_revisions),
        )
        .route(
            "/agents/{id}/config-revisions/{revision_id}",
            get(compat::agent_config_revision),
        )
        .route(
            "/agents/{id}/config-revisions/{revision_id}/rollback",
            post(compat::rollback_agent_config),
        )
        .route(
            "/agents/{id}/runtime-state",
            get(compat::agent_runtime_state),
        )
        .route(
            "/agents/{id}/runtime-state/reset-session",
            post(compat::reset_agent_session),
        )
        .route(
            "/agents/{id}/heartbeat/invoke",
            post(compat::heartbeat_invoke),
        )
        .route("/agents/me", get(admin::me))
        .route("/agents/me/inbox-lite", get(issues::inbox))
        .route(
            "/agents/{id}",
            get(admin::get_agent)
                .patch(admin::update_agent)
                .delete(admin::delete_agent),
        )
        .route(
            "/agents/{id}/budgets",
            axum::routing::patch(compat::set_agent_budget),
        )
        .route("/agents/{id}/pause", post(admin::pause_agent))
        .route("/agents/{id}/resume", post(admin::resume_agent))
        .route("/agents/{id}/terminate", post(admin::terminate_agent))
        .route("/agents/{id}/approve", post(admin::approve_agent))
        .route(
            "/agents/{id}/permissions",
            axum::routing::patch(admin::update_agent_permissions),
        )
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
            "/workers/credentials",
            get(credentials::list_worker_credentials),
        )
        .route(
            "/workers/{id}",
            axum::routing::delete(credentials::revoke_worker),
        )
        .route(
            "/admin/tokens",
            get(credentials::list_admin_tokens).post(credentials::create_admin_token),
        )
        .route(
            "/admin/tokens/{id}",
            axum::routing::delete(credentials::revoke_admin_token),
        )
        .route(
            "/issues/{id}",
            get(issues::get)
                .patch(issues::update)
                .delete(issues::delete),
        )
        .route("/issues/{id}/checkout", post(issues::checkout))
        .route("/issues/{id}/release", post(issues::release))
        .route(
            "/issues/{id}/monitor/check-now",
            post(issues::check_monitor),
        )
        .route(
            "/issues/{id}/comments",
            get(issues::list_comments).post(issues::add_comment),
        )
        .route(
            "/issues/{id}/comments/{comment_id}",
            get(issues::get_comment).delete(issues::delete_comment),
        )
        // Attachments and work products: rest/attachments.rs. An upload may be bigger than
        // other bodies.
        .route(
            "/companies/{cid}/issues/{id}/attachments",
            post(attachments::upload)
                .layer::<_, std::convert::Infallible>(DefaultBodyLimit::max(
                    attachments::UPLOAD_BODY_BYTES,
                ))
                .layer::<_, std::convert::Infallible>(Extension(BodyLimit(
                    attachments::UPLOAD_BODY_BYTES,
                ))),
        )
        .route("/issues/{id}/attachments", get(attachments::list))
        .route(
            "/attachments/{id}",
            axum::routing::delete(attachments::delete),
        )
        .route("/attachments/{id}/content", get(attachments::content))
        .route(
            "/issues/{id}/work-products",
            get(attachments::list_work_products).post(attachments::create_work_product),
        )
        .route(
            "/work-products/{id}",
            axum::routing::patch(attachments::update_work_product)
                .delete(attachments::delete_work_product),
        )
        .route("/issues/{id}/documents", get(documents::list))
        .route(
            "/issues/{id}/documents/{key}",
            get(documents::get)
                .put(documents::put)
                .delete(documents::delete),
        )
        .route(
            "/issues/{id}/documents/{key}/revisions",
            get(documents::revisions),
        )
        .route(
            "/issues/{id}/documents/{key}/revisions/{revision_id}/restore",
            post(documents::restore),
        )
        .route("/issues/{id}/documents/{key}/lock", post(documents::lock))
        .route(
            "/issues/{id}/documents/{key}/unlock",
            post(documents::unlock),
        )
        .route(
            "/issues/{id}/interactions",
            get(interactions::list).post(interactions::create),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/accept",
            post(interactions::accept),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/reject",
            post(interactions::reject),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/respond",
            post(interactions::respond),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/verdicts",
            post(interactions::verdicts),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/withdraw",
            post(interactions::withdraw),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/skip",
            post(interactions::skip),
        )
        .route(
            "/issues/{id}/interactions/{interaction_id}/cancel",
            post(interactions::cancel),
        )
        .route("/issues/{id}/children", post(issues::create_child))
        .route(
            "/issues/{id}/heartbeat-context",
            get(issues::heartbeat_context),
        )
        .route("/issues/{id}/active-run", get(issues::active_run))
        .route("/heartbeat-runs/{id}", get(runs::get))
        .route("/heartbeat-runs/{id}/log", get(runs::log))
        .route("/heartbeat-runs/{id}/events", get(run_events::events))
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
        // Agent memory: rest/memory.rs.
        .route("/agents/me/memory", get(memory::own_summary))
        .route(
            "/agents/me/memory/entries",
            get(memory::list_own_entries).post(memory::append_entry),
        )
        .route("/agents/me/memory/live", put(memory::set_live))
        .route("/agents/me/memory/search", get(memory::search_own))
        // Goals and projects: rest/projects.rs.
        .route(
            "/companies/{cid}/goals",
            get(projects::list_goals).post(projects::create_goal),
        )
        .route(
            "/goals/{id}",
            get(projects::get_goal)
                .patch(projects::update_goal)
                .delete(projects::delete_goal),
        )
        .route(
            "/companies/{cid}/projects",
            get(projects::list_projects).post(projects::create_project),
        )
        .route(
            "/projects/{id}",
            get(projects::get_project)
                .patch(projects::update_project)
                .delete(projects::delete_project),
        )
        // Issue labels: rest/labels.rs.
        .route(
            "/companies/{cid}/labels",
            get(labels::list).post(labels::create),
        )
        .route("/labels/{id}", delete(labels::delete))
        // Company skills and agents' assignments: rest/skills.rs.
        .route(
            "/companies/{cid}/skills",
            get(skills::list).post(skills::create),
        )
        .route(
            "/companies/{cid}/skills/{id}",
            get(skills::get)
                .patch(skills::update)
                .delete(skills::delete),
        )
        .route(
            "/companies/{cid}/skills/{id}/files",
            get(skills::get_file)
                .patch(skills::put_file)
                .put(skills::put_file)
                .delete(skills::delete_file),
        )
        .route("/agents/{id}/skills", get(skills::agent_skills))
        .route("/agents/{id}/skills/sync", post(skills::sync_agent_skills))
        .route("/projects/{id}/pause", post(projects::pause_project))
        .route("/projects/{id}/resume", post(projects::resume_project))
        // Approvals and hires: rest/approvals.rs.
        .route(
            "/companies/{cid}/approvals",
            get(approvals::list).post(approvals::create),
        )
        .route("/companies/{cid}/agent-hires", post(approvals::hire))
        .route("/approvals/{id}", get(approvals::get))
        .route("/approvals/{id}/issues", get(approvals::issues))
        .route("/approvals/{id}/approve", post(approvals::approve))
        .route("/approvals/{id}/reject", post(approvals::reject))
        .route(
            "/approvals/{id}/request-revision",
            post(approvals::request_revision),
        )
        .route("/approvals/{id}/resubmit", post(approvals::resubmit))
        .route(
            "/approvals/{id}/comments",
            get(approvals::comments).post(approvals::add_comment),
        )
        .route(
            "/issues/{id}/approvals",
            get(approvals::of_issue).post(approvals::link),
        )
        .route(
            "/issues/{id}/approvals/{approval_id}",
            axum::routing::delete(approvals::unlink),
        )
        // The agent's home files: rest/home.rs.
        .route("/agents/me/home", get(home::get_own).put(home::save))
        .route("/agents/me/home/chunks", post(home::upload))
        .route("/agents/{id}/home", get(home::get))
        // `me` reaches this one too: a chunk is read by hash whoever asks.
        .route("/agents/{id}/home/chunks/{hash}", get(home::chunk))
        .route("/agents/{id}/memory", get(memory::summary))
        .route("/agents/{id}/memory/entries", get(memory::list_entries))
        .route("/agents/{id}/memory/search", get(memory::search))
        .route(
            "/agents/{id}/memory/documents/{name}",
            get(memory::get_document).put(memory::put_document),
        )
        .route(
            "/agents/{id}/memory/documents/{name}/history",
            get(memory::document_history),
        )
        .route(
            "/companies/{cid}/memory/entries",
            get(memory::list_shared_entries).post(memory::append_shared_entry),
        )
        .route(
            "/companies/{cid}/memory/live",
            get(memory::get_company_live).put(memory::set_company_live),
        )
        .route(
            "/companies/{cid}/memory/documents/{name}",
            get(memory::get_company_document).put(memory::put_company_document),
        )
        .route(
            "/companies/{cid}/memory/documents/{name}/history",
            get(memory::company_document_history),
        )
        // Routines (rest/routines.rs): Paperclip's routes.
        .route(
            "/companies/{cid}/routines",
            get(routines::list).post(routines::create),
        )
        .route("/routines/{id}", get(routines::get).patch(routines::update))
        .route("/routines/{id}/runs", get(routines::runs))
        .route(
            "/routines/{id}/triggers",
            get(routines::triggers).post(routines::create_trigger),
        )
        .route("/routines/{id}/run", post(routines::run))
        .route(
            "/routine-triggers/{id}",
            axum::routing::patch(routines::update_trigger).delete(routines::delete_trigger),
        )
        .route(
            "/routine-triggers/{id}/rotate-secret",
            post(routines::rotate_secret),
        )
        .route("/routine-triggers/public/{id}/fire", post(routines::fire))
        .fallback(unknown_api_route);
    Router::new()
        .nest("/api", api_routes)
        // The web dashboard (dashboard/): HTML pages at `/`, cookie sessions, its own stream.
        .merge(crate::dashboard::router())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // Prometheus (metrics.rs): outside /api and unauthenticated like /readyz, so it holds
        // aggregates only; the layer counts every route above by its template.
        .route("/metrics", get(crate::metrics::scrape))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            crate::metrics::track,
        ))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            traced::trace,
        ))
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
    let readiness = api.ready(&tasks).await;
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness))
}

/// A path under `/api` that is no route (the nested router sees the path without `/api`).
async fn unknown_api_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    no_route(&method, &format!("/api{}", uri.path()))
}

async fn unknown_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    no_route(&method, uri.path())
}

fn no_route(method: &axum::http::Method, path: &str) -> Response {
    ApiError::NoRoute {
        method: method.to_string(),
        path: path.to_string(),
    }
    .into_response()
}

async fn method_not_allowed() -> impl IntoResponse {
    let sentence = "This route does not take that HTTP method.";
    let body = serde_json::json!({ "error": sentence, "code": "method_not_allowed", "message": sentence, "details": null });
    (StatusCode::METHOD_NOT_ALLOWED, Json(body))
}

/// `201 Created` with a JSON body.
pub(crate) fn created<T: serde::Serialize>(value: T) -> (StatusCode, Json<T>) {
    (StatusCode::CREATED, Json(value))
}
