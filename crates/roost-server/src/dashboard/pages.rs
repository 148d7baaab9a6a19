//! The dashboard's pages and actions: the board (columns by status, filters by agent and
//! project, paged per column), an issue (description, comments, holder, sub-issues, activity),
//! agents (status, pause, resume), and the event stream the board follows. Each calls the same
//! `Api` function as its REST route, as the signed-in operator.

use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use roost_core::command::IssuePatch;
use roost_core::{Agent, Issue, IssueStatus, PauseReason};
use serde::Deserialize;

use super::html::{self, dollars, esc};
use super::{Operator, Refusal};
use crate::api::{Api, IssueFilter};

/// Cards shown per column; the rest are counted.
const PER_COLUMN: usize = 50;

type Page = Result<Response, Refusal>;

#[derive(Deserialize, Default)]
pub struct BoardQuery {
    pub(super) company: Option<String>,
    agent: Option<String>,
    project: Option<String>,
}

/// The company the query names, else the operator's oldest one.
pub(super) async fn company_of(
    api: &Api,
    op: &Operator,
    named: Option<&str>,
) -> Result<String, Refusal> {
    if let Some(id) = named.filter(|c| !c.is_empty()) {
        return Ok(api.get_company(&op.0, id).await?.id);
    }
    let companies = api.list_companies(&op.0).await?;
    companies
        .first()
        .map(|c| c.id.clone())
        .ok_or_else(|| Refusal::Forbidden("there is no company yet: create one first".into()))
}

fn agent_name(agents: &[Agent], id: Option<&str>) -> String {
    match id {
        Some(id) => agents
            .iter()
            .find(|a| a.id == id)
            .map(|a| a.name.clone())
            .unwrap_or_else(|| id.to_string()),
        None => "unassigned".into(),
    }
}

/// The columns alone: the board's body, fetched again on each event.
async fn columns(api: &Api, op: &Operator, cid: &str, q: &BoardQuery) -> Result<String, Refusal> {
    let agents = api.list_agents(&op.0, cid).await?;
    let mut out = String::new();
    for status in IssueStatus::ALL {
        let filter = IssueFilter {
            statuses: vec![*status],
            assignee_agent_id: q.agent.clone().filter(|a| !a.is_empty()),
            parent_id: None,
            limit: None,
            ..Default::default()
        };
        let issues: Vec<Issue> = api
            .list_issues(&op.0, cid, &filter)
            .await?
            .into_iter()
            .filter(|i| {
                q.project
                    .as_deref()
                    .filter(|p| !p.is_empty())
                    .is_none_or(|p| i.project_id.as_deref() == Some(p))
            })
            .collect();
        out.push_str(&format!(
            "<section class=\"column\" data-status=\"{s}\"><h2>{s} <span class=\"muted\">{n}</span></h2>",
            s = status.as_str(),
            n = issues.len()
        ));
        for i in issues.iter().take(PER_COLUMN) {
            let holder = i
                .checkout
                .as_ref()
                .map(|c| {
                    format!(
                        " · held by {}",
                        esc(&agent_name(&agents, Some(&c.agent_id)))
                    )
                })
                .unwrap_or_default();
            out.push_str(&format!(
                "<a class=\"card\" data-identifier=\"{ident}\" href=\"/ui/issues/{id}\">\
                 <strong>{ident}</strong> {title}<br><span class=\"muted\">{who}{holder}</span></a>",
                ident = esc(&i.identifier),
                id = esc(&i.id),
                title = esc(&i.title),
                who = esc(&agent_name(&agents, i.assignee_agent_id.as_deref())),
            ));
        }
        if issues.len() > PER_COLUMN {
            out.push_str(&format!(
                "<p class=\"muted\">and {} more: filter by agent or project</p>",
                issues.len() - PER_COLUMN
            ));
        }
        out.push_str("</section>");
    }
    Ok(out)
}

fn board_query_string(cid: &str, q: &BoardQuery) -> String {
    let mut s = format!("company={}", urlencode(cid));
    for (k, v) in [("agent", &q.agent), ("project", &q.project)] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            s.push_str(&format!("&{k}={}", urlencode(v)));
        }
    }
    s
}

pub(super) fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

pub async fn board(State(api): State<Api>, op: Operator, Query(q): Query<BoardQuery>) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await?;
    let agents = api.list_agents(&op.0, &cid).await?;
    let projects = api.list_projects(&op.0, &cid).await?;
    // The stream starts after the newest event the page already shows.
    let head = api.reader().read(|s| s.activity_seq);
    let cols = columns(&api, &op, &cid, &q).await?;
    let option = |id: &str, name: &str, chosen: &Option<String>| {
        format!(
            "<option value=\"{}\"{}>{}</option>",
            esc(id),
            if chosen.as_deref() == Some(id) {
                " selected"
            } else {
                ""
            },
            esc(name)
        )
    };
    let agent_options: String = agents
        .iter()
        .map(|a| option(&a.id, &a.name, &q.agent))
        .collect();
    let project_options: String = projects
        .iter()
        .map(|p| option(&p.id, &p.name, &q.project))
        .collect();
    let assignees: String = agents
        .iter()
        .map(|a| format!("<option value=\"{}\">{}</option>", esc(&a.id), esc(&a.name)))
        .collect();
    let body = format!(
        "<form method=\"get\" action=\"/board\"><input type=\"hidden\" name=\"company\" value=\"{c}\">\
         <select name=\"agent\"><option value=\"\">every agent</option>{agent_options}</select> \
         <select name=\"project\"><option value=\"\">every project</option>{project_options}</select> \
         <button>Filter</button></form>\
         <form method=\"post\" action=\"/board/issues\"><input type=\"hidden\" name=\"company\" value=\"{c}\">\
         <input id=\"new-title\" name=\"title\" placeholder=\"New issue title\" required size=\"30\"> \
         <select id=\"new-assignee\" name=\"assignee\"><option value=\"\">unassigned</option>{assignees}</select> \
         <button id=\"create-issue\">Create</button></form>\
         <div id=\"board\" class=\"board\">{cols}</div>{script}",
        c = esc(&cid),
        script = html::live_board_script(
            &cid,
            &format!("/board/columns?{}", board_query_string(&cid, &q)),
            head
        ),
    );
    Ok(Html(html::page("Board", Some(&cid), &body)).into_response())
}

pub async fn board_columns(
    State(api): State<Api>,
    op: Operator,
    Query(q): Query<BoardQuery>,
) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await?;
    Ok(Html(columns(&api, &op, &cid, &q).await?).into_response())
}

#[derive(Deserialize)]
pub struct NewIssue {
    company: String,
    title: String,
    assignee: Option<String>,
}

pub async fn create_issue(State(api): State<Api>, op: Operator, Form(f): Form<NewIssue>) -> Page {
    let fields = IssuePatch {
        title: Some(f.title),
        status: Some(IssueStatus::Todo),
        assignee_agent_id: f.assignee.filter(|a| !a.is_empty()).map(Some),
        ..Default::default()
    };
    api.create_issue(&op.0, &f.company, fields).await?;
    Ok(Redirect::to(&format!("/board?company={}", urlencode(&f.company))).into_response())
}

pub async fn issue(State(api): State<Api>, op: Operator, Path(id): Path<String>) -> Page {
    let issue = api.get_issue(&op.0, &id).await?;
    let agents = api.list_agents(&op.0, &issue.company_id).await?;
    let comments = api
        .list_comments(
            &op.0,
            &issue.id,
            &roost_store::CommentQuery {
                after: None,
                descending: false,
                limit: 200,
            },
        )
        .await?;
    let activity = api.issue_activity(&op.0, &issue.id, None, 20).await?;
    let holder = match &issue.checkout {
        Some(c) => format!(
            "held by <strong>{}</strong> for run <a id=\"holder-run\" href=\"/ui/runs/{run}\"><code>{run}</code></a>",
            esc(&agent_name(&agents, Some(&c.agent_id))),
            run = esc(&c.run_id)
        ),
        None => "not checked out".into(),
    };
    let monitor = issue.monitor.state().map_or(String::new(), |m| {
        let what = match (m.next_check_at, m.clear_reason) {
            (Some(at), _) => format!("next check {at}"),
            (None, Some(reason)) => format!("cleared ({reason})"),
            (None, None) => "fired, nothing scheduled".into(),
        };
        format!(
            "<p id=\"monitor\">Monitor: {} · {} attempt(s){}</p>",
            esc(&what),
            m.attempt_count,
            m.notes
                .as_deref()
                .map(|n| format!(" · {}", esc(n)))
                .unwrap_or_default()
        )
    });
    let comment_list: String = comments
        .iter()
        .map(|c| {
            let who = c
                .author_agent_id
                .as_deref()
                .map(|a| agent_name(&agents, Some(a)))
                .or_else(|| c.author_user_id.clone())
                .unwrap_or_else(|| "system".into());
            let body = match c.deleted_at {
                Some(at) => format!("<em class=\"muted\">deleted at {at}</em>"),
                None => esc(&c.body),
            };
            format!(
                "<li><span class=\"muted\">{} · {}</span><br>{body}</li>",
                esc(&who),
                c.created_at,
            )
        })
        .collect();
    let activity_list: String = activity
        .iter()
        .map(|a| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}:{}</td></tr>",
                a.at,
                esc(&a.action),
                esc(&a.actor_type),
                esc(&a.actor_id)
            )
        })
        .collect();
    let body = format!(
        "<p><a href=\"/board?company={cid}\">← Board</a></p>\
         <h1>{ident} {title}</h1><p>Status <strong id=\"status\">{status}</strong> · assignee {who} · {holder}</p>\
         {monitor}<div>{desc}</div><h2>Comments</h2><ul>{comment_list}</ul>\
         <form method=\"post\" action=\"/ui/issues/{id}/comments\">\
         <textarea name=\"body\" rows=\"3\" cols=\"50\" required></textarea><br><button>Comment</button></form>\
         <h2>Activity</h2><table>{activity_list}</table>",
        cid = esc(&issue.company_id),
        ident = esc(&issue.identifier),
        title = esc(&issue.title),
        status = issue.status.as_str(),
        who = esc(&agent_name(&agents, issue.assignee_agent_id.as_deref())),
        desc = esc(issue.description.as_deref().unwrap_or("")),
        id = esc(&issue.id),
    );
    Ok(Html(html::page(
        &issue.identifier,
        Some(&issue.company_id),
        &body,
    ))
    .into_response())
}

#[derive(Deserialize)]
pub struct NewComment {
    body: String,
}

pub async fn comment(
    State(api): State<Api>,
    op: Operator,
    Path(id): Path<String>,
    Form(f): Form<NewComment>,
) -> Page {
    api.add_comment(&op.0, &id, f.body).await?;
    Ok(Redirect::to(&format!("/ui/issues/{}", urlencode(&id))).into_response())
}

pub async fn agents(State(api): State<Api>, op: Operator, Query(q): Query<BoardQuery>) -> Page {
    let cid = company_of(&api, &op, q.company.as_deref()).await?;
    let agents = api.list_agents(&op.0, &cid).await?;
    let live: Vec<(String, String)> = api.reader().read(|s| {
        s.live_runs()
            .map(|r| (r.agent_id.clone(), r.id.clone()))
            .collect()
    });
    // Each agent's spend this month against its monthly budget, and its last wake with what
    // became of it (and, while queued, why it has not run).
    let now = crate::api::now();
    let facts: Vec<(String, String, String)> = api.reader().read(|s| {
        agents
            .iter()
            .map(|a| {
                let spent = s.spent_in(
                    roost_core::BudgetScopeType::Agent,
                    &a.id,
                    roost_core::BudgetWindow::CalendarMonthUtc,
                    now,
                );
                let limit =
                    crate::api::monthly_budget_cents(s, roost_core::BudgetScopeType::Agent, &a.id);
                let budget = if limit > 0 {
                    format!("{} of {}", dollars(spent), dollars(limit))
                } else {
                    format!("{} (no budget)", dollars(spent))
                };
                let last = s
                    .wakes
                    .values()
                    .filter(|w| w.agent_id == a.id)
                    .max_by_key(|w| w.seq)
                    .map(|w| {
                        let why = crate::api::blocked_by(s, w)
                            .or_else(|| w.status_reason.clone())
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default();
                        format!("{} {}{}", w.reason.as_str(), w.status.as_str(), why)
                    })
                    .unwrap_or_else(|| "never woken".into());
                (a.id.clone(), budget, last)
            })
            .collect()
    });
    let rows: String = agents
        .iter()
        .map(|a| {
            let (action, label) = if a.status == roost_core::AgentStatus::Paused {
                ("resume", "Resume")
            } else {
                ("pause", "Pause")
            };
            let runs: String = live
                .iter()
                .filter(|(agent, _)| *agent == a.id)
                .map(|(_, run)| format!("<a class=\"run\" href=\"/ui/runs/{r}\">run {r}</a> ", r = esc(run)))
                .collect();
            let (budget, last_wake) = facts
                .iter()
                .find(|(id, _, _)| *id == a.id)
                .map(|(_, b, w)| (b.as_str(), w.as_str()))
                .unwrap_or(("", ""));
            format!(
                "<tr data-agent=\"{name}\"><td>{name}</td><td class=\"status\">{status}{reason}</td>\
                 <td>{adapter}</td><td>{runs}</td><td>{budget}</td><td class=\"wake\">{last_wake}</td><td><form class=\"inline\" method=\"post\" action=\"/agents/{id}/{action}\">\
                 <input type=\"hidden\" name=\"company\" value=\"{cid}\">\
                 <button class=\"{action}\">{label}</button></form> \
                 <form class=\"inline\" method=\"post\" action=\"/agents/{id}/wake\">\
                 <input type=\"hidden\" name=\"company\" value=\"{cid}\">\
                 <button class=\"wake\">Wake</button></form></td></tr>",
                name = esc(&a.name),
                status = a.status.as_str(),
                reason = a
                    .pause_reason
                    .map(|r| format!(" ({})", r.as_str()))
                    .unwrap_or_default(),
                adapter = a.adapter_type.as_str(),
                budget = esc(budget),
                last_wake = esc(last_wake),
                id = esc(&a.id),
                cid = esc(&cid),
            )
        })
        .collect();
    let body = format!(
        "<h1>Agents</h1><table><tr><th>Name</th><th>Status</th><th>Adapter</th><th>Running</th><th>Spent this month</th><th>Last wake</th><th></th></tr>{rows}</table>"
    );
    Ok(Html(html::page("Agents", Some(&cid), &body)).into_response())
}

#[derive(Deserialize)]
pub struct AgentAction {
    company: String,
}

pub async fn pause_agent(
    State(api): State<Api>,
    op: Operator,
    Path(id): Path<String>,
    Form(f): Form<AgentAction>,
) -> Page {
    api.pause_agent(&op.0, &id, PauseReason::Manual).await?;
    Ok(Redirect::to(&format!("/agents?company={}", urlencode(&f.company))).into_response())
}

/// Wakes the agent on demand, as `POST /api/agents/{id}/wakeup` with no body does.
pub async fn wake_agent(
    State(api): State<Api>,
    op: Operator,
    Path(id): Path<String>,
    Form(f): Form<AgentAction>,
) -> Page {
    api.wakeup(&op.0, &id, crate::api::WakeupRequest::default())
        .await?;
    Ok(Redirect::to(&format!("/agents?company={}", urlencode(&f.company))).into_response())
}

pub async fn resume_agent(
    State(api): State<Api>,
    op: Operator,
    Path(id): Path<String>,
    Form(f): Form<AgentAction>,
) -> Page {
    api.resume_agent(&op.0, &id).await?;
    Ok(Redirect::to(&format!("/agents?company={}", urlencode(&f.company))).into_response())
}

#[derive(Deserialize)]
pub struct EventsQuery {
    company: String,
    after: Option<u64>,
}

/// The company's event stream for the board's script, with the session cookie: the same
/// stream and frames as `GET /api/companies/{cid}/events` (`rest/events.rs`).
pub async fn events(
    State(api): State<Api>,
    op: Operator,
    headers: axum::http::HeaderMap,
    Query(q): Query<EventsQuery>,
) -> Page {
    let after = match crate::rest::last_event_id(&headers)? {
        Some(seq) => seq,
        None => q.after.unwrap_or(0),
    };
    let stream = api.events(&op.0, &q.company, after, true).await?;
    Ok(crate::rest::sse_response(stream))
}
