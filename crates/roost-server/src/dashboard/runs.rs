//! A run's page: its status, agent, issue, usage and cost, and its log followed live (the
//! leader's buffer while it runs, relayed by a follower; the kept tail once it ended), read by
//! the page's script from `/ui/runs/{id}/log` as it grows.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use futures::StreamExt;

use super::html::{self, esc};
use super::{Operator, Refusal};
use crate::api::Api;

type Page = Result<Response, Refusal>;

pub async fn run(State(api): State<Api>, op: Operator, Path(id): Path<String>) -> Page {
    let run = api.get_run(&op.0, &id).await?.into_run();
    let agent = api
        .reader()
        .read(|s| s.agents.get(&run.agent_id).map(|a| a.name.clone()))
        .unwrap_or_else(|| run.agent_id.clone());
    let issue = match &run.issue_id {
        Some(i) => format!("<a href=\"/ui/issues/{id}\">{id}</a>", id = esc(i)),
        None => "no issue".into(),
    };
    let usage = &run.usage;
    let body = format!(
        "<p><a href=\"/board?company={cid}\">← Board</a></p>\
         <h1>Run <code>{id}</code></h1>\
         <p>Status <strong id=\"run-status\">{status}</strong> · agent {agent} · {issue} · \
         woken by {reason}</p>\
         <p class=\"muted\">{input} input, {cached} cached, {output} output tokens · \
         ${cost:.2}</p>{cancel}<h2>Log</h2><pre id=\"log\" style=\"white-space:pre-wrap;background:#fff;\
         padding:.6em;border-radius:5px;max-height:60vh;overflow:auto\"></pre>\
         <script>(function(){{var pre=document.getElementById('log');\
         fetch('/ui/runs/'+encodeURIComponent({id_js})+'/log',{{credentials:'same-origin'}})\
         .then(function(r){{var reader=r.body.getReader(),dec=new TextDecoder();\
         function pump(){{return reader.read().then(function(c){{\
         if(c.done){{pre.dataset.ended='true';return}}\
         pre.textContent+=dec.decode(c.value,{{stream:true}});pre.scrollTop=pre.scrollHeight;\
         return pump()}})}}return pump()}});}})();</script>",
        cid = esc(&run.company_id),
        id = esc(&run.id),
        id_js = serde_json::Value::String(run.id.clone()),
        status = run.status.as_str(),
        agent = esc(&agent),
        reason = esc(&run.invocation_source),
        input = usage.input_tokens,
        cached = usage.cached_input_tokens,
        output = usage.output_tokens,
        cost = usage.cost_micro_usd as f64 / 1_000_000.0,
        cancel = if run.status.is_live() {
            format!(
                "<form method=\"post\" action=\"/ui/runs/{}/cancel\"><button id=\"cancel\">Cancel the run</button></form>",
                esc(&run.id)
            )
        } else {
            String::new()
        },
    );
    Ok(Html(html::page("Run", Some(&run.company_id), &body)).into_response())
}

/// Cancels a live run, as `POST /api/heartbeat-runs/{id}/cancel` does.
pub async fn cancel(State(api): State<Api>, op: Operator, Path(id): Path<String>) -> Page {
    api.finish_run(
        &op.0,
        &id,
        roost_core::RunStatus::Cancelled,
        Some("cancelled from the dashboard".into()),
    )
    .await?;
    Ok(
        axum::response::Redirect::to(&format!("/ui/runs/{}", super::pages::urlencode(&id)))
            .into_response(),
    )
}

/// The run's log as it grows, as plain text, until the run ends.
pub async fn log(State(api): State<Api>, op: Operator, Path(id): Path<String>) -> Page {
    let stream = api.run_log(&op.0, Some(&op.1), &id, 0, true).await?;
    let body = Body::from_stream(stream.map(|c| c.map(|c| Bytes::from(c.data))));
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}
