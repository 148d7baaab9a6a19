//! The operator's other pages: budgets (policies with spend and reservations, incidents with
//! their resolutions), workers (status, slots, live runs) and the cluster (members, roles, lag,
//! health). Incidents are resolved here as through `POST .../budget-incidents/{id}/resolve`.

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use roost_core::IncidentStatus;
use serde::Deserialize;

use super::html::{self, dollars, esc};
use super::pages::{company_of, urlencode, BoardQuery};
use super::{Operator, Refusal};
use crate::api::Api;

type Page = Result<Response, Refusal>;

pub async fn budgets(State(api): State<Api>, op: Operator, Query(q): Query<BoardQuery>) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await?;
    let overview = api.budget_overview(&op.0, &cid).await?;
    let policies: String =
        overview
            .policies
            .iter()
            .map(|p| {
                format!(
                "<tr><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                p.policy.scope_type.as_str(),
                esc(&p.policy.scope_id),
                p.policy.window_kind.as_str(),
                dollars(p.policy.amount),
                dollars(p.spent),
                dollars(p.reserved),
                if p.policy.hard_stop_enabled { "hard stop" } else { "warning" },
            )
            })
            .collect();
    let incidents: String = overview
        .incidents
        .iter()
        .map(|i| {
            let actions: &[&str] = match (i.status, i.kind) {
                (IncidentStatus::Open, roost_core::IncidentKind::WakeLoop) => {
                    &["resume", "keep_paused", "dismiss"]
                }
                (IncidentStatus::Open, _) => &["keep_paused", "dismiss"],
                _ => &[],
            };
            let buttons: String = actions
                .iter()
                .map(|a| {
                    format!(
                        "<form class=\"inline\" method=\"post\" action=\"/budgets/incidents/{id}\">\
                         <input type=\"hidden\" name=\"company\" value=\"{cid}\">\
                         <input type=\"hidden\" name=\"action\" value=\"{a}\"><button>{a}</button></form> ",
                        id = esc(&i.id),
                        cid = esc(&cid),
                    )
                })
                .collect();
            format!(
                "<tr data-incident=\"{id}\"><td>{kind}</td><td class=\"status\">{status}</td>\
                 <td>{msg}</td><td>{buttons}</td></tr>",
                id = esc(&i.id),
                kind = i.kind.as_str(),
                status = i.status.as_str(),
                msg = esc(&i.message),
            )
        })
        .collect();
    let body = format!(
        "<h1>Budgets</h1><table><tr><th>Scope</th><th>Window</th><th>Limit</th><th>Spent</th>\
         <th>Reserved</th><th></th></tr>{policies}</table>\
         <h2>Incidents</h2><p class=\"muted\">To raise a budget and resume, use \
         <code>roost budget resolve --action raise_and_resume --usd N</code> or approve the \
         incident's <code>budget_override_required</code> approval.</p>\
         <table><tr><th>Kind</th><th>Status</th><th>What</th><th></th></tr>{incidents}</table>"
    );
    Ok(Html(html::page("Budgets", Some(&cid), &body)).into_response())
}

#[derive(Deserialize)]
pub struct Resolve {
    company: String,
    action: String,
}

pub async fn resolve_incident(
    State(api): State<Api>,
    op: Operator,
    Path(id): Path<String>,
    Form(f): Form<Resolve>,
) -> Page {
    let action = crate::api::parse_action(&f.action)?;
    api.resolve_budget_incident(&op.0, &f.company, &id, action, None)
        .await?;
    Ok(Redirect::to(&format!("/budgets?company={}", urlencode(&f.company))).into_response())
}

pub async fn workers(State(api): State<Api>, op: Operator, Query(q): Query<BoardQuery>) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await.ok();
    let workers = api.list_workers(&op.0).await?;
    let rows: String = workers
        .iter()
        .map(|w| {
            let adapters: Vec<&str> = w.worker.adapters.iter().map(|a| a.as_str()).collect();
            format!(
                "<tr data-worker=\"{id}\"><td>{id}</td><td>{name}</td><td class=\"status\">{status}</td>\
                 <td>{live}/{slots}</td><td class=\"lease\">{lease}</td><td>{adapters}</td>\
                 <td>{version}</td></tr>",
                id = esc(&w.worker.id),
                name = esc(&w.worker.name),
                status = w.worker.status.as_str(),
                live = w.live_runs,
                slots = w.worker.slots,
                lease = w
                    .lease_expires_in_ms
                    .map_or_else(|| "-".to_string(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
                adapters = esc(&adapters.join(", ")),
                version = esc(&w.worker.version),
            )
        })
        .collect();
    let body = format!(
        "<h1>Workers</h1><p>Leases as this node holds them: only the leader holds leases.</p>\
         <table><tr><th>Id</th><th>Name</th><th>Status</th><th>Runs/slots</th>\
         <th>Lease left</th><th>Adapters</th><th>Version</th></tr>{rows}</table>"
    );
    Ok(Html(html::page("Workers", cid.as_deref(), &body)).into_response())
}

pub async fn cluster(State(api): State<Api>, op: Operator, Query(q): Query<BoardQuery>) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await.ok();
    let status = api.cluster_status(&op.0).await?;
    let rows: String = status
        .members
        .iter()
        .map(|m| {
            let (role, applied) = m
                .report
                .as_ref()
                .map(|r| (r.role.as_str(), r.applied_index.to_string()))
                .unwrap_or_else(|| ("-", "-".into()));
            format!(
                "<tr data-node=\"{id}\"><td>{id}</td><td>{addr}</td><td>{role}</td>\
                 <td class=\"health\">{health}</td><td>{matched}</td><td>{lag}</td><td>{applied}</td></tr>",
                id = m.member.id,
                addr = esc(&m.member.http_addr),
                role = esc(role),
                health = esc(m.health.as_str()),
                matched = m.matched_index,
                lag = m.lag,
            )
        })
        .collect();
    let leader = status
        .leader_id
        .map(|l| l.to_string())
        .unwrap_or_else(|| "none".into());
    let body = format!(
        "<h1>Cluster</h1><p>Leader <strong id=\"leader\">{leader}</strong> · term {term} · \
         last log index {last}</p><table><tr><th>Node</th><th>Address</th><th>Role</th>\
         <th>Health</th><th>Matched</th><th>Lag</th><th>Applied</th></tr>{rows}</table>",
        term = status.term,
        last = status.last_log_index,
    );
    Ok(Html(html::page("Cluster", cid.as_deref(), &body)).into_response())
}
