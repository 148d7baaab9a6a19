//! The web dashboard every node serves at `/`: HTML rendered here over the
//! same `Api` as REST, so every action is the operator's own write in the audit log. Login
//! takes an admin token (the bootstrap one or a named one from `roost token create`) and keeps
//! it in an HTTP-only, same-site cookie; agent keys cannot log in. A form post must come from
//! this origin (`Origin`/`Sec-Fetch-Site`), on top of the same-site cookie.

mod fleet;
mod html;
mod pages;
mod runs;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;

use crate::api::Api;
use crate::auth::Caller;

pub use html::esc;

/// The session cookie: the operator's admin token.
const COOKIE: &str = "roost_session";

pub fn router() -> Router<Api> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/board") }))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/board", get(pages::board))
        .route("/board/columns", get(pages::board_columns))
        .route("/board/issues", post(pages::create_issue))
        .route("/ui/issues/{id}", get(pages::issue))
        .route("/ui/issues/{id}/comments", post(pages::comment))
        .route("/agents", get(pages::agents))
        .route("/agents/{id}/pause", post(pages::pause_agent))
        .route("/agents/{id}/resume", post(pages::resume_agent))
        .route("/agents/{id}/wake", post(pages::wake_agent))
        .route("/ui/runs/{id}/cancel", post(runs::cancel))
        .route("/ui/events", get(pages::events))
        .route("/budgets", get(fleet::budgets))
        .route("/budgets/incidents/{id}", post(fleet::resolve_incident))
        .route("/workers", get(fleet::workers))
        .route("/cluster", get(fleet::cluster))
        .route("/ui/runs/{id}", get(runs::run))
        .route("/ui/runs/{id}/log", get(runs::log))
}

/// An operator signed in through the cookie, and the token it holds (a follower relays a live
/// log from the leader with it). Without one (or with one no longer valid), a page redirects
/// to the login form.
pub struct Operator(pub Caller, pub String);

/// Why a dashboard request was not served.
pub enum Refusal {
    Login,
    Forbidden(String),
    Error(crate::error::ApiError),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Login => Redirect::to("/login").into_response(),
            Refusal::Forbidden(why) => (
                StatusCode::FORBIDDEN,
                axum::response::Html(html::page(
                    "Refused",
                    None,
                    &format!("<p class=\"error\">{}</p>", esc(&why)),
                )),
            )
                .into_response(),
            Refusal::Error(e) => {
                let status = e.codes().http;
                (
                    status,
                    axum::response::Html(html::page(
                        "Error",
                        None,
                        &format!(
                            "<p class=\"error\">{}</p><p><a href=\"/board\">Back to the board</a></p>",
                            esc(&e.to_string())
                        ),
                    )),
                )
                    .into_response()
            }
        }
    }
}

impl From<crate::error::ApiError> for Refusal {
    fn from(e: crate::error::ApiError) -> Self {
        Refusal::Error(e)
    }
}

fn session_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
        .filter(|v| !v.is_empty())
}

/// A state-changing request must come from a page of this origin.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return site == "same-origin";
    }
    match (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        headers.get(header::HOST).and_then(|v| v.to_str().ok()),
    ) {
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest == host),
        // No Origin: not a browser's cross-site form post.
        (None, _) => true,
        _ => false,
    }
}

impl FromRequestParts<Api> for Operator {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, Refusal> {
        let token = session_token(&parts.headers).ok_or(Refusal::Login)?;
        let caller = api
            .authenticate(Some(&token), None)
            .await
            .map_err(|_| Refusal::Login)?;
        if !caller.is_admin() {
            return Err(Refusal::Login);
        }
        if parts.method != axum::http::Method::GET && !same_origin(&parts.headers) {
            return Err(Refusal::Forbidden(
                "this form was posted from another site: use the dashboard's own pages".into(),
            ));
        }
        Ok(Operator(caller, token))
    }
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

async fn login_form() -> impl IntoResponse {
    axum::response::Html(login_page(None))
}

fn login_page(error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"error\">{}</p>", esc(e)))
        .unwrap_or_default();
    html::page(
        "Log in",
        None,
        &format!(
            "<h1>Log in</h1>{error}<form method=\"post\" action=\"/login\">\
             <p><label>Admin token<br><input id=\"token\" name=\"token\" type=\"password\" \
             autocomplete=\"current-password\" size=\"40\" required></label></p>\
             <p><button id=\"login\">Log in</button></p></form>\
             <p class=\"muted\">An administrator's token: the one `roost dev` printed, or one \
             made with <code>roost token create</code>.</p>"
        ),
    )
}

async fn login(
    State(api): State<Api>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
        return Refusal::Forbidden("log in from the dashboard's own login page".into())
            .into_response();
    }
    let token = form.token.trim();
    let caller = api.authenticate(Some(token), None).await;
    match caller {
        Ok(c) if c.is_admin() => {
            // HTTP-only: no script reads it; SameSite=Strict: no other site sends it; Secure
            // when the node serves TLS: never sent in the clear.
            let secure = if api.https() { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200{secure}"
            );
            ([(header::SET_COOKIE, cookie)], Redirect::to("/board")).into_response()
        }
        Ok(_) => (
            StatusCode::FORBIDDEN,
            axum::response::Html(login_page(Some(
                "That is an agent's key: the dashboard is for administrators' tokens.",
            ))),
        )
            .into_response(),
        Err(_) => (
            StatusCode::UNAUTHORIZED,
            axum::response::Html(login_page(Some(
                "That token is not valid (unknown or revoked).",
            ))),
        )
            .into_response(),
    }
}

async fn logout() -> Response {
    let cookie = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    ([(header::SET_COOKIE, cookie)], Redirect::to("/login")).into_response()
}
