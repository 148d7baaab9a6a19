//! Every REST request runs in a span carrying its request id (the client's `X-Request-Id`, or
//! a new one), the node's id and the ids its path names (`company_id`, `agent_id`, `issue_id`,
//! `run_id`), and answers with `X-Request-Id`. A write it proposes carries the request id in
//! its log entry (`Envelope::request_id`, taken by `Api::submit` from `request_id.rs`), and every
//! replica's apply logs it (`roost-store/src/state_machine.rs`): one id finds the request, its
//! proposal and its apply on each node.

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::api::Api;

use crate::request_id::HEADER;

/// The ids a path names, by its route template: `/api/issues/{id}/...` names an issue.
fn path_ids(template: &str, path: &str) -> [(&'static str, Option<String>); 4] {
    let mut ids: [(&'static str, Option<String>); 4] = [
        ("company_id", None),
        ("agent_id", None),
        ("issue_id", None),
        ("run_id", None),
    ];
    let mut previous = "";
    for (t, p) in template.split('/').zip(path.split('/')) {
        if t.starts_with('{') {
            let slot = match previous {
                "companies" => 0,
                "agents" => 1,
                "issues" => 2,
                "heartbeat-runs" | "runs" => 3,
                _ => usize::MAX,
            };
            if let Some((_, id)) = ids.get_mut(slot) {
                *id = Some(p.to_string());
            }
        }
        previous = t;
    }
    ids
}

/// The middleware in front of every REST route (`rest/mod.rs`).
pub(crate) async fn trace(State(api): State<Api>, request: Request, next: Next) -> Response {
    let id = crate::request_id::from_headers(request.headers());
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let [company, agent, issue, run] =
        path_ids(template.as_deref().unwrap_or(""), request.uri().path()).map(|(_, v)| v);
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        node_id = api.node().id(),
        method = %request.method(),
        route = template.as_deref().unwrap_or("unmatched"),
        company_id = company,
        agent_id = agent,
        issue_id = issue,
        run_id = run,
    );
    let mut response =
        crate::request_id::scope(id.clone(), next.run(request).instrument(span)).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_ids_by_the_template() {
        let ids = path_ids("/api/companies/{cid}/issues", "/api/companies/c-1/issues");
        assert_eq!(ids[0], ("company_id", Some("c-1".into())));
        let ids = path_ids("/api/issues/{id}/checkout", "/api/issues/i-9/checkout");
        assert_eq!(ids[2], ("issue_id", Some("i-9".into())));
        let ids = path_ids(
            "/api/heartbeat-runs/{id}/log",
            "/api/heartbeat-runs/r-2/log",
        );
        assert_eq!(ids[3], ("run_id", Some("r-2".into())));
        assert!(path_ids("/healthz", "/healthz")
            .iter()
            .all(|(_, v)| v.is_none()));
    }
}
