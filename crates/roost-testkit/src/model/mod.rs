//! A scripted model server for tests of real agent CLIs (Claude Code, Codex, Gemini CLI,
//! OpenCode, Hermes): the only fake is the model. It listens on plain HTTP on 127.0.0.1 and
//! speaks the APIs these CLIs call through their base-URL settings: Anthropic Messages
//! (`anthropic.rs`), OpenAI Responses and Chat Completions (`openai.rs`) and Gemini's
//! `generateContent` (`gemini.rs`), streamed (SSE) or not. It answers with a script
//! (`script.rs`): run this shell command (a call of the shell tool the request offers), or end
//! with this text. It keeps no state per conversation: the step is the number of tool results
//! after the last real user message, so a resumed session starts the script again. Every
//! request is recorded (a test can check that a resumed request carries the previous run's
//! history), and every answer reports the same scripted token usage. Paths it does not know are
//! answered 404 and listed in [`ScriptedModel::unknown_paths`]. The model lists CLIs probe
//! (`GET /v1/models`; Hermes' probes of Ollama's, OpenRouter's and llama.cpp's APIs) are
//! answered too: the one model asked for, 404 for the other servers' own APIs (not listed as
//! unknown).

mod anthropic;
mod gemini;
mod openai;
mod script;

pub use script::{reply, shell_tool, ArgShape, Reply, ShellTool, Step, Turn, Usage};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// One answer's bytes.
pub(crate) struct Answer {
    content_type: &'static str,
    body: String,
}

impl Answer {
    fn json(v: Value) -> Answer {
        Answer {
            content_type: "application/json",
            body: v.to_string(),
        }
    }

    /// Server-sent events: `event:` (when named) and `data:` lines, a blank line after each.
    fn sse<'a>(events: impl IntoIterator<Item = (Option<&'a str>, &'a Value)>) -> Answer {
        let mut body = String::new();
        for (name, data) in events {
            if let Some(name) = name {
                body.push_str(&format!("event: {name}\n"));
            }
            let data = match data {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            body.push_str(&format!("data: {data}\n\n"));
        }
        Answer {
            content_type: "text/event-stream",
            body,
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        ([(header::CONTENT_TYPE, self.content_type)], self.body).into_response()
    }
}

/// Which API a request came in through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    AnthropicMessages,
    OpenAiResponses,
    OpenAiChat,
    Gemini,
}

/// One request the model answered.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub api: Api,
    pub path: String,
    pub body: Value,
    pub turn: Turn,
    pub reply: Reply,
}

impl Recorded {
    /// Whether `text` appears anywhere in the request (its history, prompt, tools).
    pub fn mentions(&self, text: &str) -> bool {
        self.body.to_string().contains(text)
    }
}

struct Shared {
    script: Mutex<Vec<Step>>,
    usage: Usage,
    requests: Mutex<Vec<Recorded>>,
    unknown: Mutex<Vec<String>>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running server; stops when dropped.
pub struct ScriptedModel {
    base_url: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ScriptedModel {
    /// Starts a server answering with `script`, every answer reporting `usage`.
    pub async fn start(script: Vec<Step>, usage: Usage) -> anyhow::Result<ScriptedModel> {
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            usage,
            requests: Mutex::default(),
            unknown: Mutex::default(),
            next_id: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/responses", post(responses))
            .route("/v1/chat/completions", post(chat))
            .route("/v1beta/models/{model_method}", post(generate_content))
            .route("/v1/models", get(models))
            .route("/v1/models/{*model}", get(one_model))
            // Hermes probes what kind of server this is (OpenRouter's, Ollama's, llama.cpp's
            // APIs) for the model's context length: not this one.
            .route("/api/v1/models", get(not_this_api))
            .route("/api/show", post(not_this_api))
            .route("/api/tags", get(not_this_api))
            .route("/v1/props", get(not_this_api))
            .route("/props", get(not_this_api))
            .route("/version", get(not_this_api))
            .fallback(unknown)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScriptedModel {
            base_url,
            shared,
            task,
        })
    }

    /// `http://127.0.0.1:PORT` (the CLIs add `/v1/...`, or are given `{base_url}/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Replaces the script for the requests from now on.
    pub fn set_script(&self, script: Vec<Step>) {
        *lock(&self.shared.script) = script;
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// `METHOD path` of every request to a path this server does not know.
    pub fn unknown_paths(&self) -> Vec<String> {
        lock(&self.shared.unknown).clone()
    }

    /// The scripted usage each answer reports.
    pub fn usage(&self) -> Usage {
        self.shared.usage
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the request, picks the step, records it; `None` for a body that is not JSON.
fn answer(
    shared: &Shared,
    api: Api,
    path: &str,
    body: &Bytes,
    turn_of: fn(&Value) -> Turn,
) -> Option<(Reply, Value, u64)> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let turn = turn_of(&body);
    let reply = script::reply(&lock(&shared.script), &turn);
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    lock(&shared.requests).push(Recorded {
        api,
        path: path.to_string(),
        body: body.clone(),
        turn,
        reply: reply.clone(),
    });
    Some((reply, body, id))
}

fn bad_request() -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": { "type": "invalid_request_error", "message": "not JSON" } })),
    )
        .into_response()
}

fn model_of(body: &Value) -> &str {
    body["model"].as_str().unwrap_or("scripted-model")
}

fn streams(body: &Value) -> bool {
    body["stream"].as_bool() == Some(true)
}

async fn messages(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.to_string();
    let api = Api::AnthropicMessages;
    match answer(&shared, api, &path, &body, anthropic::turn) {
        Some((reply, body, id)) => {
            anthropic::answer(&reply, shared.usage, model_of(&body), id, streams(&body))
                .into_response()
        }
        None => bad_request(),
    }
}

async fn count_tokens(State(shared): State<Arc<Shared>>) -> Response {
    anthropic::count_tokens(shared.usage).into_response()
}

async fn responses(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.to_string();
    let api = Api::OpenAiResponses;
    match answer(&shared, api, &path, &body, openai::responses_turn) {
        Some((reply, body, id)) => {
            openai::responses_answer(&reply, shared.usage, model_of(&body), id, streams(&body))
                .into_response()
        }
        None => bad_request(),
    }
}

async fn chat(State(shared): State<Arc<Shared>>, uri: Uri, body: Bytes) -> Response {
    let path = uri.to_string();
    let api = Api::OpenAiChat;
    match answer(&shared, api, &path, &body, openai::chat_turn) {
        Some((reply, body, id)) => {
            openai::chat_answer(&reply, shared.usage, model_of(&body), id, streams(&body))
                .into_response()
        }
        None => bad_request(),
    }
}

async fn generate_content(
    State(shared): State<Arc<Shared>>,
    Path(model_method): Path<String>,
    uri: Uri,
    body: Bytes,
) -> Response {
    let path = uri.to_string();
    let (model, method) = match gemini::model_and_method(&model_method) {
        Some((model, method)) => (model.to_string(), method.to_string()),
        None => return unknown(State(shared), axum::http::Method::POST, uri).await,
    };
    match method.as_str() {
        "countTokens" => gemini::count_tokens(shared.usage).into_response(),
        "generateContent" | "streamGenerateContent" => {
            match answer(&shared, Api::Gemini, &path, &body, gemini::turn) {
                Some((reply, _, id)) => {
                    let stream = method == "streamGenerateContent";
                    gemini::answer(&reply, shared.usage, &model, id, stream).into_response()
                }
                None => bad_request(),
            }
        }
        _ => unknown(State(shared), axum::http::Method::POST, uri).await,
    }
}

fn model_entry(id: &str) -> Value {
    json!({ "id": id, "object": "model", "created": 0, "owned_by": "scripted" })
}

/// `GET /v1/models`: the scripted model, under the one name it answers to whatever is asked.
async fn models() -> Response {
    axum::Json(json!({ "object": "list", "data": [model_entry("scripted-model")] })).into_response()
}

async fn one_model(Path(model): Path<String>) -> Response {
    axum::Json(model_entry(&model)).into_response()
}

/// Another vendor's API, probed by a CLI to learn what kind of server this is: 404, expected.
async fn not_this_api() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "error": { "type": "not_found_error", "message": "not served" } })),
    )
        .into_response()
}

async fn unknown(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: Uri,
) -> Response {
    lock(&shared.unknown).push(format!("{method} {uri}"));
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({ "error": {
            "type": "not_found_error",
            "message": format!("the scripted model does not serve {uri}"),
        } })),
    )
        .into_response()
}
