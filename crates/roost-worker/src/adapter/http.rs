//! The `http` adapter: POSTs the wake (the assignment, the prompt, the run environment) as
//! JSON to `adapterConfig.url` and takes the reply as the run's result. A 2xx reply succeeds;
//! its JSON may carry `summary`, `sessionId` and `usage` ({inputTokens, cachedInputTokens,
//! outputTokens, costUsd}). `https://` URLs are checked against the public web roots.

use roost_core::RunStatus;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use roost_proto::v1::RunUsage;

use super::session_cli::micro_usd;
use super::{environment, raise_usage, Ended, Run};
use crate::prompt::{self, Session};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct HttpConfig {
    url: String,
    headers: BTreeMap<String, String>,
    timeout_sec: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Reply {
    summary: Option<String>,
    session_id: Option<String>,
    usage: ReplyUsage,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ReplyUsage {
    input_tokens: u64,
    cached_input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
}

fn body(run: &Run<'_>) -> Value {
    let a = run.assignment;
    // The payload travels in the body's `payload`; there is no file on the agent's side.
    let env: BTreeMap<String, String> = environment(a, &run.config.api_url, None)
        .into_iter()
        .filter(|(k, _)| k.starts_with("ROOST_"))
        .collect();
    let session = Session::assigned(a);
    json!({
        "runId": a.run_id,
        "agentId": a.agent_id,
        "companyId": a.company_id,
        "taskId": a.issue_id,
        "wakeReason": super::wake_reason(a),
        "commentIds": a.comment_ids,
        "payload": serde_json::from_str::<Value>(&a.payload_json).unwrap_or(Value::Null),
        "sessionId": (!a.session_id.is_empty()).then_some(&a.session_id),
        "prompt": prompt::compose(a, session, None, run.memory.as_ref()),
        "env": env,
    })
}

pub(crate) async fn run(run: &mut Run<'_>) -> Ended {
    let config: HttpConfig = match serde_json::from_str(&run.assignment.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return Ended::failed(format!("adapterConfig: {e}")),
    };
    if !config.url.starts_with("http://") && !config.url.starts_with("https://") {
        return Ended::failed("adapterConfig.url must be an http:// or https:// URL".into());
    }
    let timeout = Duration::from_secs(config.timeout_sec.unwrap_or(600).max(1));
    // https:// endpoints are checked against the public web roots (roost-tls).
    let tls = match roost_tls::client_config(None, None) {
        Ok(c) => c,
        Err(e) => return Ended::failed(format!("http client: {e}")),
    };
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .use_preconfigured_tls(tls)
        .build()
    {
        Ok(c) => c,
        Err(e) => return Ended::failed(format!("http client: {e}")),
    };
    let mut request = client.post(&config.url).json(&body(run));
    for (k, v) in &config.headers {
        request = request.header(k, v);
    }
    run.log.note(&format!("POST {}", config.url));
    let sent = async {
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        Ok::<_, reqwest::Error>((status, text))
    };
    let (status, text) = tokio::select! {
        r = sent => match r {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Ended { status: RunStatus::TimedOut, error: "timed out".into(), ..Default::default() }
            }
            Err(e) => return Ended::failed(format!("POST {}: {e}", config.url)),
        },
        why = &mut run.stop => {
            return Ended { status: RunStatus::Cancelled, error: why.unwrap_or("cancelled").into(), ..Default::default() }
        }
    };
    run.log.write(text.as_bytes());
    if !text.ends_with('\n') {
        run.log.write(b"\n");
    }
    if !status.is_success() {
        return Ended::failed(format!("the endpoint answered {status}"));
    }
    let reply: Reply = serde_json::from_str(&text).unwrap_or_default();
    let u = &reply.usage;
    let totals = RunUsage {
        input_tokens: u.input_tokens,
        cached_input_tokens: u.cached_input_tokens,
        output_tokens: u.output_tokens,
        cost_micro_usd: micro_usd(u.cost_usd),
        ..Default::default()
    };
    raise_usage(&run.usage, &totals);
    Ended {
        status: RunStatus::Succeeded,
        session_id: reply.session_id.filter(|s| !s.is_empty()),
        summary: reply.summary.or_else(|| run.log.last_line()),
        ..Default::default()
    }
}
