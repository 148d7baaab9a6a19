//! The `openclaw_gateway` adapter: hands the wake to an OpenClaw gateway over its WebSocket
//! protocol (`gateway.rs`) as one `agent` turn, and reads the session, usage, cost and result
//! from the turn's final answer.
//!
//! The gateway runs the agent's commands on its own machine, in its own environment, so the
//! run's variables travel in the message: the run context block names them, the run-scoped
//! key included. That key authenticates only while the run is live (`roost-core/src/rules/
//! run.rs`), so what the gateway keeps in its transcript opens nothing afterwards.
//!
//! Sessions: a turn goes to a session key chosen as Paperclip's adapter chooses it
//! (`sessionKeyStrategy` `issue`, `run` or `fixed`). The saved session is the gateway's session
//! id; a resume whose turn comes back under another id was refused (the gateway lost it) and is
//! reported as a fresh session of the same run. A fresh start resets the key's history first.

mod device;
mod gateway;

use roost_core::RunStatus;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::Instant;

use roost_proto::v1::{Assignment, RunUsage};

use self::device::Device;
use self::gateway::{error_text, ConnectError, Frame, Gateway};
use super::session_cli::{cost_of, micro_usd, Parsed};
use super::{env_value, environment, raise_usage, Ended, Run};
use crate::prompt::{self, Session};

/// Paperclip's default turn budget for this adapter.
const DEFAULT_TIMEOUT_SEC: u64 = 120;
/// How long a gateway may take to come up (its sidecars start in 10 to 25 s).
const DEFAULT_CONNECT_TIMEOUT_SEC: u64 = 60;
/// How long a question to the gateway before the turn (its session, a reset) may take.
const ASK: Duration = Duration::from_secs(15);
/// Past the turn's own timeout, how long to wait for the gateway to end it before aborting.
const TIMEOUT_SLACK: Duration = Duration::from_secs(10);

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct GatewayConfig {
    /// `ws://` or `wss://`.
    url: String,
    auth_token: Option<String>,
    token: Option<String>,
    /// `OPENCLAW_GATEWAY_TOKEN` here, as a secret value, keeps the token redacted.
    #[serde(deserialize_with = "env_value::env_map")]
    env: BTreeMap<String, String>,
    session_key_strategy: Option<String>,
    session_key: Option<String>,
    agent_id: Option<String>,
    timeout_sec: Option<u64>,
    connect_timeout_sec: Option<u64>,
    disable_device_auth: bool,
    /// The API URL the agent calls, when the gateway reaches the cluster by another address.
    paperclip_api_url: Option<String>,
    bootstrap_prompt: Option<String>,
    /// Names the model for the worker's `[prices]` when the gateway reports no cost.
    model: Option<String>,
}

impl GatewayConfig {
    fn token(&self) -> String {
        self.auth_token
            .clone()
            .or_else(|| self.token.clone())
            .or_else(|| self.env.get("OPENCLAW_GATEWAY_TOKEN").cloned())
            .unwrap_or_default()
    }

    /// The session key of this turn, as Paperclip's adapter derives it.
    fn session_key(&self, a: &Assignment) -> String {
        let fallback = || {
            self.session_key
                .clone()
                .unwrap_or_else(|| format!("paperclip:agent:{}", a.agent_id))
        };
        let key = match self.session_key_strategy.as_deref() {
            Some("run") => format!("paperclip:run:{}", a.run_id),
            Some("fixed") => fallback(),
            // Scoped to the agent too: two agents on one issue must not share (or reset) a
            // conversation.
            _ => match &a.issue_id {
                Some(issue) => format!("paperclip:issue:{issue}:agent:{}", a.agent_id),
                None => fallback(),
            },
        };
        match &self.agent_id {
            Some(agent) if !key.starts_with("agent:") => format!("agent:{agent}:{key}"),
            _ => key,
        }
    }
}

/// The message of the turn: the prompt every adapter sends, then the run's variables.
fn message(run: &Run<'_>, config: &GatewayConfig, session: Session<'_>) -> String {
    let a = run.assignment;
    let api_url = config
        .paperclip_api_url
        .clone()
        .unwrap_or_else(|| run.config.api_url.clone());
    let mut text = prompt::compose(
        a,
        session,
        config.bootstrap_prompt.as_deref(),
        run.memory.as_ref(),
    );
    text.push_str(
        "\n\nRun context. Your commands do not run with this run's environment: set these \
         variables yourself before calling the API (the key works only while this run lasts).\n",
    );
    for (name, value) in environment(a, &api_url, None) {
        if name.starts_with("PAPERCLIP_") && !value.is_empty() && !value.contains('\n') {
            text.push_str(&format!("{name}={value}\n"));
        }
    }
    text.push_str(
        "Send Authorization: Bearer $PAPERCLIP_API_KEY and X-Paperclip-Run-Id: $PAPERCLIP_RUN_ID \
         with every API call.\n",
    );
    text
}

pub(crate) async fn run(run: &mut Run<'_>) -> Ended {
    let config: GatewayConfig = match serde_json::from_str(&run.assignment.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return Ended::failed(format!("adapterConfig: {e}")),
    };
    if !config.url.starts_with("ws://") && !config.url.starts_with("wss://") {
        return Ended::failed(
            "adapterConfig.url must be the gateway's ws:// or wss:// URL (for example \
             ws://127.0.0.1:18789)"
                .into(),
        );
    }
    let device = if config.disable_device_auth {
        None
    } else {
        match Device::load_or_create(&run.config.work_dir) {
            Ok(d) => Some(d),
            Err(e) => return Ended::failed(e),
        }
    };
    let tls = match roost_tls::client_config(None, None) {
        Ok(c) => Arc::new(c),
        Err(e) => return Ended::failed(format!("TLS client: {e}")),
    };
    let key = config.session_key(run.assignment);
    run.log.note(&format!(
        "OpenClaw gateway {}, session key {key}{}",
        config.url,
        device
            .as_ref()
            .map(|d| format!(", device {}", &d.id()[..12]))
            .unwrap_or_default()
    ));
    let connect_by = Instant::now()
        + Duration::from_secs(
            config
                .connect_timeout_sec
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT_SEC),
        );
    let token = config.token();
    let mut gw = loop {
        let attempt = Gateway::connect(&config.url, &token, device.as_ref(), tls.clone());
        let failed = tokio::select! {
            r = attempt => match r {
                Ok(gw) => break gw,
                Err(e) => e,
            },
            why = &mut run.stop => return stopped(why),
        };
        match failed {
            ConnectError::Refused(why) => return Ended::failed(why),
            ConnectError::Retry { why, after } => {
                if Instant::now() + after > connect_by {
                    return Ended::failed(format!("no OpenClaw gateway to run with: {why}"));
                }
                tokio::select! {
                    _ = tokio::time::sleep(after) => {}
                    why = &mut run.stop => return stopped(why),
                }
            }
        }
    };
    let a = run.assignment;
    let refused = if a.session_id.is_empty() {
        None
    } else {
        tokio::select! {
            r = tokio::time::timeout(ASK, refused_resume(&mut gw, &key, &a.session_id)) => {
                r.unwrap_or(None)
            }
            why = &mut run.stop => return stopped(why),
        }
    };
    let session = if let Some(why) = &refused {
        run.log.note(&format!(
            "session {} could not be resumed: {why}; starting a fresh one",
            a.session_id
        ));
        Session::HandedOff {
            id: &a.session_id,
            why,
        }
    } else {
        Session::assigned(a)
    };
    if !matches!(session, Session::Resumed) {
        // A fresh session: what the gateway keeps under this key belongs to an earlier one.
        let reset = tokio::select! {
            r = tokio::time::timeout(ASK, gw.call("sessions.reset", json!({ "key": key }))) => {
                matches!(r, Ok(Ok(_)))
            }
            why = &mut run.stop => return stopped(why),
        };
        if reset {
            run.log.note(&format!(
                "reset the gateway's session {key} for a fresh start"
            ));
        }
    }
    let resumed = matches!(session, Session::Resumed).then(|| a.session_id.clone());
    let message = message(run, &config, session);
    let timeout_sec = config.timeout_sec.unwrap_or(DEFAULT_TIMEOUT_SEC);
    let mut params = json!({
        "message": message,
        "idempotencyKey": a.run_id,
        "sessionKey": key,
    });
    if timeout_sec > 0 {
        params["timeout"] = timeout_sec.into();
    }
    if let Some(agent) = &config.agent_id {
        params["agentId"] = agent.clone().into();
    }
    let id = match gw.send("agent", params).await {
        Ok(id) => id,
        Err(e) => return Ended::failed(e),
    };
    // The gateway ends the turn at its timeout; this deadline only covers a gateway that does not.
    let sent = Instant::now();
    let timeout = (timeout_sec > 0).then(|| Duration::from_secs(timeout_sec));
    let give_up = timeout.map(|t| sent + t + TIMEOUT_SLACK);
    loop {
        let frame = tokio::select! {
            f = gw.next() => f,
            _ = sleep_until(give_up) => {
                abort(&mut gw, &key).await;
                return Ended { status: RunStatus::TimedOut, error: "timed out".into(), ..Default::default() };
            }
            why = &mut run.stop => {
                abort(&mut gw, &key).await;
                return stopped(why);
            }
        };
        match frame {
            Ok(Frame::Res {
                id: answered,
                ok,
                payload,
                error,
            }) if answered == id => {
                if !ok {
                    return Ended::failed(format!(
                        "the gateway refused the turn: {}",
                        error_text(&error)
                    ));
                }
                if payload["status"] == "accepted" {
                    run.log.note("the gateway accepted the turn");
                    continue;
                }
                let out_of_time = timeout.is_some_and(|t| sent.elapsed() >= t);
                let mut ended = finished(run, &config, &payload, out_of_time, resumed.as_deref());
                ended.session_reset |= refused.is_some();
                return ended;
            }
            Ok(Frame::Event { event, payload }) if event == "agent" => log_event(run, &payload),
            Ok(_) => {}
            Err(e) => return Ended::failed(e),
        }
    }
}

/// Why the gateway cannot resume `saved` under `key`, if it cannot: it keeps no session there, or
/// another one. `None` as well when the gateway cannot say (the turn's answer is checked then).
async fn refused_resume(gw: &mut Gateway, key: &str, saved: &str) -> Option<String> {
    let described = gw
        .call("sessions.describe", json!({ "key": key }))
        .await
        .ok()?;
    match described["session"]["sessionId"].as_str() {
        Some(id) if id == saved => None,
        Some(id) => Some(format!("the gateway's session {key} is now {id}")),
        None => Some(format!("the gateway keeps no session {key}")),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn stopped(why: Result<&'static str, tokio::sync::oneshot::error::RecvError>) -> Ended {
    Ended {
        status: RunStatus::Cancelled,
        error: why.unwrap_or("cancelled").into(),
        ..Default::default()
    }
}

/// Asks the gateway to end the session's turn, which stops its model call and commands.
async fn abort(gw: &mut Gateway, key: &str) {
    let asked = gw.call("chat.abort", json!({ "sessionKey": key }));
    let _ = tokio::time::timeout(Duration::from_secs(5), asked).await;
}

/// `text` with the run's key masked: the agent was told the key and puts it in its commands.
fn mask_key(a: &Assignment, text: &str) -> String {
    if a.run_token.is_empty() {
        text.to_string()
    } else {
        text.replace(a.run_token.as_str(), "***")
    }
}

/// Writes what the agent does to the run log (the run's key masked): its commands, their output
/// and its text.
fn log_event(run: &mut Run<'_>, payload: &Value) {
    let data = &payload["data"];
    match (payload["stream"].as_str(), data["phase"].as_str()) {
        (Some("tool"), Some("start")) => {
            let args = &data["args"];
            let shown = args["command"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| args.to_string());
            let name = data["name"].as_str().unwrap_or("tool");
            let line = mask_key(run.assignment, &format!("[{name}] {shown}\n"));
            run.log.write(line.as_bytes());
        }
        (Some("command_output"), Some("end")) => {
            if let Some(output) = data["output"].as_str() {
                let output = mask_key(run.assignment, output);
                run.log.write(output.as_bytes());
                run.log.write(b"\n");
            }
        }
        (Some("lifecycle"), Some("end")) => {
            if let Some(text) = payload["data"]["terminalReceipt"]["effective"]["model"].as_str() {
                run.log.note(&format!("model {text}"));
            }
        }
        _ => {}
    }
}

/// The turn's final answer: status, result text, session, usage and cost. `out_of_time`: the
/// turn outlasted its timeout (the gateway then cuts its command off but answers `ok`).
fn finished(
    run: &mut Run<'_>,
    config: &GatewayConfig,
    payload: &Value,
    out_of_time: bool,
    resumed: Option<&str>,
) -> Ended {
    let result = &payload["result"];
    let meta = &result["meta"]["agentMeta"];
    let text: Vec<&str> = result["payloads"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default();
    let summary = mask_key(run.assignment, &text.join("\n"));
    if !summary.is_empty() {
        run.log.write(summary.as_bytes());
        run.log.write(b"\n");
    }
    let usage = &meta["usage"];
    let count = |k: &str| usage[k].as_u64().unwrap_or(0);
    let tokens = Parsed {
        // The gateway counts input without the cached part (OpenAI's prompt tokens minus
        // cached ones), as Anthropic does.
        // Tokens written to the prompt cache are input too (priced as input here).
        input_tokens: count("input") + count("cacheWrite"),
        cached_input_tokens: count("cacheRead"),
        output_tokens: count("output"),
        cost_usd: meta["costUsd"].as_f64().filter(|c| *c > 0.0),
        ..Default::default()
    };
    let model = config
        .model
        .clone()
        .or_else(|| meta["model"].as_str().map(str::to_string));
    let (cost, note) = cost_of(&tokens, model.as_deref(), &run.config.prices, false);
    run.log.note(&note);
    raise_usage(
        &run.usage,
        &RunUsage {
            input_tokens: tokens.input_tokens,
            cached_input_tokens: tokens.cached_input_tokens,
            output_tokens: tokens.output_tokens,
            cost_micro_usd: cost.map(micro_usd).unwrap_or(0),
            ..Default::default()
        },
    );
    let session = meta["sessionId"].as_str().filter(|s| !s.is_empty());
    // A resume the gateway said it could make, answered from another session after all.
    let session_reset = resumed.is_some_and(|before| session.is_some_and(|s| s != before));
    if let (true, Some(before)) = (session_reset, resumed) {
        run.log.note(&format!(
            "session {before} could not be resumed: the gateway started session {}",
            session.unwrap_or_default()
        ));
    }
    let (status, error) = match payload["status"].as_str() {
        Some("timeout") => (RunStatus::TimedOut, "timed out".to_string()),
        Some("ok") if out_of_time => (RunStatus::TimedOut, "timed out".to_string()),
        Some("ok") => (RunStatus::Succeeded, String::new()),
        other => (
            RunStatus::Failed,
            format!(
                "the turn ended {}: {}",
                other.unwrap_or("without a status"),
                payload["summary"].as_str().unwrap_or(&summary)
            ),
        ),
    };
    Ended {
        status,
        error,
        session_id: session.map(str::to_string),
        session_reset,
        summary: (!summary.is_empty()).then_some(summary),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
