//! Adapters run one run of an agent each: `process` (any command), `claude` (Claude Code's
//! stream-json), `codex` (Codex's JSON events), `gemini` (Gemini CLI's stream-json), `opencode`
//! (OpenCode's JSON events), `hermes` (Hermes Agent's quiet mode, metered from its session
//! export), `openclaw_gateway` (one turn of an OpenClaw gateway over its WebSocket protocol) and
//! `http` (POST the wake to a URL). They share
//! the run environment, the prompt, supervision and the run log; the CLI adapters also resume
//! the agent's saved session and fall back to a fresh one when the CLI refuses it.

mod child;
pub(crate) use child::SHUTTING_DOWN;
mod claude;
mod codex;
mod env_value;
mod gemini;
mod hermes;
mod http;
mod openclaw;
mod opencode;
mod process;
mod session_cli;
#[cfg(test)]
mod tests;
pub(crate) mod trust;
mod wake_payload;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roost_core::{AdapterType, RunStatus, WakeReason};
use roost_proto::v1::{Assignment, RunUsage};
use roost_proto::ProtoEnum;
use serde::Deserialize;
use tokio::sync::oneshot;

use crate::config::WorkerConfig;
use crate::memory::Memory;
use crate::runlog::RunLog;

/// How a run ended, as reported to the cluster.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    /// A terminal status.
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub error: String,
    /// The session the agent ended in, to be resumed by the next run on the task.
    pub session_id: Option<String>,
    /// The saved session was refused and a fresh one started.
    pub session_reset: bool,
    pub summary: Option<String>,
}

/// A run that ends without saying how has failed.
impl Default for Ended {
    fn default() -> Ended {
        Ended {
            status: RunStatus::Failed,
            exit_code: None,
            error: String::new(),
            session_id: None,
            session_reset: false,
            summary: None,
        }
    }
}

impl Ended {
    pub(crate) fn failed(error: String) -> Ended {
        Ended {
            status: RunStatus::Failed,
            error,
            ..Default::default()
        }
    }

    fn from_exit(exit: &child::Exit) -> Ended {
        match exit {
            child::Exit::Exited { code, success } => Ended {
                status: if *success {
                    RunStatus::Succeeded
                } else {
                    RunStatus::Failed
                },
                exit_code: *code,
                error: if *success {
                    String::new()
                } else {
                    format!("exited with code {}", code.unwrap_or(-1))
                },
                ..Default::default()
            },
            child::Exit::Stopped(why) => Ended {
                status: RunStatus::Cancelled,
                error: why.to_string(),
                ..Default::default()
            },
            child::Exit::TimedOut => Ended {
                status: RunStatus::TimedOut,
                error: "timed out".into(),
                ..Default::default()
            },
            child::Exit::NotStarted(e) => Ended::failed(e.clone()),
        }
    }
}

/// Usage so far, shared with the connection, which reports it with lease renewals.
pub(crate) type UsageCell = Arc<Mutex<RunUsage>>;

/// Everything an adapter gets for one run.
pub(crate) struct Run<'a> {
    pub assignment: &'a Assignment,
    pub config: &'a WorkerConfig,
    pub stop: oneshot::Receiver<&'static str>,
    pub log: RunLog,
    pub usage: UsageCell,
    /// The agent's memory, written into its home before the run (`memory/mod.rs`); `None` when
    /// the worker keeps no memory or it could not be read.
    pub memory: Option<Memory>,
    /// Where the agent process starts (`workspace.rs`), set by [`run`] before the adapter.
    pub workspace: std::path::PathBuf,
}

/// Raises the run's usage to `totals`; counters never go down, whatever an agent printed.
pub(crate) fn raise_usage(cell: &UsageCell, totals: &RunUsage) {
    let mut u = cell.lock().unwrap_or_else(|p| p.into_inner());
    u.input_tokens = u.input_tokens.max(totals.input_tokens);
    u.cached_input_tokens = u.cached_input_tokens.max(totals.cached_input_tokens);
    u.output_tokens = u.output_tokens.max(totals.output_tokens);
    u.cost_micro_usd = u.cost_micro_usd.max(totals.cost_micro_usd);
}

/// Adapter settings every CLI adapter understands (`adapterConfig`, camelCase).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct CommonConfig {
    pub command: String,
    pub args: Vec<String>,
    #[serde(deserialize_with = "env_value::env_map")]
    pub env: BTreeMap<String, String>,
    pub timeout_sec: Option<u64>,
    pub grace_sec: Option<u64>,
    pub bootstrap_prompt: Option<String>,
    pub model: Option<String>,
}

impl CommonConfig {
    fn parse(json: &str) -> Result<CommonConfig, String> {
        if json.trim().is_empty() {
            return Ok(CommonConfig::default());
        }
        serde_json::from_str(json).map_err(|e| format!("adapterConfig: {e}"))
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout_sec.filter(|s| *s > 0).map(Duration::from_secs)
    }

    fn grace(&self, worker: &WorkerConfig) -> Duration {
        Duration::from_secs(self.grace_sec.unwrap_or(worker.grace_sec))
    }
}

/// The run environment, under Roost's names and Paperclip's, so agents written for Paperclip
/// work unchanged. `WAKE_PAYLOAD_PATH` names `payload_file` (agent processes get one for every
/// run); `WAKE_PAYLOAD_JSON` carries the payload itself only up to
/// [`wake_payload::ENV_PAYLOAD_MAX_BYTES`], as a large one cannot be exec'd (`wake_payload.rs`).
pub(crate) fn environment(
    a: &Assignment,
    api_url: &str,
    payload_file: Option<&Path>,
) -> Vec<(String, String)> {
    let mut pairs = vec![
        ("API_URL", api_url.to_string()),
        ("RUN_ID", a.run_id.clone()),
        ("AGENT_ID", a.agent_id.clone()),
        ("COMPANY_ID", a.company_id.clone()),
        ("TASK_ID", a.issue_id.clone().unwrap_or_default()),
        ("WAKE_REASON", wake_reason(a).to_string()),
        (
            "WAKE_COMMENT_ID",
            a.comment_ids.last().cloned().unwrap_or_default(),
        ),
        ("API_KEY", a.run_token.clone()),
    ];
    if a.payload_json.len() <= wake_payload::ENV_PAYLOAD_MAX_BYTES {
        pairs.push(("WAKE_PAYLOAD_JSON", a.payload_json.clone()));
    }
    if wake_reason(a) == WakeReason::ApprovalResolved.as_str() {
        pairs.extend(approval_context(&a.payload_json));
    }
    if let Some(path) = payload_file {
        pairs.push(("WAKE_PAYLOAD_PATH", path.display().to_string()));
    }
    pairs
        .iter()
        .flat_map(|(k, v)| {
            [
                (format!("ROOST_{k}"), v.clone()),
                (format!("PAPERCLIP_{k}"), v.clone()),
            ]
        })
        .collect()
}

/// An approval's wake's context, as Paperclip's adapters export it (only what the payload has):
/// `APPROVAL_ID`, `APPROVAL_STATUS`, and `LINKED_ISSUE_IDS` comma-separated. Paperclip's skill
/// reads the approval from `PAPERCLIP_APPROVAL_ID` (the payload is `rules/approval.rs`'s).
fn approval_context(payload_json: &str) -> Vec<(&'static str, String)> {
    let Ok(payload) = serde_json::from_str::<serde_json::Value>(payload_json) else {
        return Vec::new();
    };
    let text = |key: &str| {
        payload
            .get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let linked: Vec<&str> = payload
        .get("issueIds")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    let mut pairs = Vec::new();
    pairs.extend(text("approvalId").map(|v| ("APPROVAL_ID", v)));
    pairs.extend(text("approvalStatus").map(|v| ("APPROVAL_STATUS", v)));
    if !linked.is_empty() {
        pairs.push(("LINKED_ISSUE_IDS", linked.join(",")));
    }
    pairs
}

/// The environment of an agent process this worker starts: the run's variables, then what its
/// HTTP clients need to trust the cluster (`trust.rs`), then the agent's own `env`, which wins.
pub(crate) fn process_environment(
    a: &Assignment,
    config: &WorkerConfig,
    payload_file: &Path,
    agent_env: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut env = environment(a, &config.api_url, Some(payload_file));
    // The run's workspace and the skills written into it (`workspace.rs`, `skills.rs`), under
    // Roost's names and Paperclip's.
    let workspace = crate::workspace::path_of(config, a);
    let skills = workspace.join(crate::skills::dir_for(adapter_type(a).ok()));
    for (name, value) in [
        ("ROOST_WORKSPACE", workspace.display().to_string()),
        ("PAPERCLIP_WORKSPACE_CWD", workspace.display().to_string()),
        ("ROOST_SKILLS_DIR", skills.display().to_string()),
    ] {
        env.push((name.into(), value));
    }
    // The agent's home (`memory/mod.rs`): where its memory files are, and where file-based
    // memory schemes (Paperclip's `para-memory-files` skill) keep theirs.
    let home = crate::memory::home_of(config, &a.agent_id)
        .display()
        .to_string();
    env.push(("AGENT_HOME".into(), home.clone()));
    env.push(("ROOST_AGENT_HOME".into(), home));
    env.extend(trust::environment(config));
    env.extend(agent_env.clone());
    env
}

/// Runs the assignment with its adapter to its end, or until `run.stop` says why it must
/// end early. The log's tail and length are the caller's to report.
pub(crate) async fn run(run: &mut Run<'_>) -> Ended {
    match prepare_workspace(run).await {
        Ok(dir) => run.workspace = dir,
        Err(e) => {
            run.log.note(&e);
            run.log.flush();
            return Ended::failed(e);
        }
    }
    if run.config.agent_memory && run.memory.is_none() {
        match Memory::prepare(run.assignment, run.config).await {
            Ok(memory) => {
                for note in memory.start_notes() {
                    run.log.note(&note);
                }
                run.memory = Some(memory);
            }
            Err(e) => run
                .log
                .note(&format!("{e}; the run starts without its memory")),
        }
    }
    let ended = run_adapter(run).await;
    if let Some(memory) = &run.memory {
        // A run stopped from outside (cancelled, cut off, the worker stopping) ends without
        // its key or its cluster: its edits stay in the home and are not sent.
        if matches!(ended.status, RunStatus::Succeeded | RunStatus::Failed) {
            let a = run.assignment;
            let harvest = memory
                .harvest(
                    a,
                    ended.status.as_str(),
                    &ended.error,
                    ended.summary.as_deref(),
                )
                .await;
            for saved in harvest.saved {
                tracing::info!(run_id = %a.run_id, "{saved}");
            }
            for problem in harvest.problems {
                run.log.note(&problem);
            }
        }
    }
    if ended.status != RunStatus::Succeeded {
        run.log
            .note(&format!("run {}: {}", ended.status, ended.error));
    }
    run.log.flush();
    ended
}

/// Makes the run's workspace (a git worktree when the agent names a repository), removes idle
/// ones, and writes the agent's skills into it.
async fn prepare_workspace(run: &mut Run<'_>) -> Result<std::path::PathBuf, String> {
    let (a, config) = (run.assignment, run.config);
    let dir = crate::workspace::prepare(config, a)?;
    tracing::info!(run_id = %a.run_id, workspace = %dir.display(), "run workspace");
    if let Some((repository, git_ref)) = crate::worktree::configured(&a.adapter_config_json) {
        let made = crate::worktree::ensure(&config.work_dir, &dir, &repository, git_ref.as_deref())
            .await
            .map_err(|e| format!("the agent's repository could not be checked out: {e}"))?;
        if let Some(note) = made {
            run.log.note(&note);
        }
    }
    if config.workspace_retention_hours > 0 {
        let retention = Duration::from_secs(config.workspace_retention_hours.saturating_mul(3600));
        for old in crate::workspace::clean(&config.work_dir, retention, &dir) {
            tracing::info!(dir = %old.display(), "idle workspace removed");
        }
    }
    let skills_dir = dir.join(crate::skills::dir_for(adapter_type(a).ok()));
    let synced = crate::skills::sync(&skills_dir, &a.skills)
        .map_err(|e| format!("the agent's skills could not be written: {e}"))?;
    if let Some(note) = synced.note(&skills_dir) {
        run.log.note(&note);
    }
    Ok(dir)
}

/// The wake's reason as the REST API names it (`issue_commented`); empty when the run had no
/// wake.
pub(crate) fn wake_reason(a: &Assignment) -> &'static str {
    WakeReason::from_proto(a.wake_reason).map_or("", WakeReason::as_str)
}

/// The adapter the assignment asks for, or why this worker's build does not know it.
pub(crate) fn adapter_type(a: &Assignment) -> Result<AdapterType, String> {
    AdapterType::from_proto(a.adapter_type)
        .map_err(|e| format!("this worker has no such adapter: {e}"))
}

async fn run_adapter(run: &mut Run<'_>) -> Ended {
    let kind = match adapter_type(run.assignment) {
        Ok(kind) => kind,
        Err(e) => return Ended::failed(e),
    };
    match kind {
        AdapterType::Http => http::run(run).await,
        AdapterType::OpenClawGateway => openclaw::run(run).await,
        AdapterType::Process
        | AdapterType::Claude
        | AdapterType::Codex
        | AdapterType::Gemini
        | AdapterType::OpenCode
        | AdapterType::Hermes => {
            // Kept for the whole run (a refused resume starts a second process), then removed.
            let a = run.assignment;
            match wake_payload::PayloadFile::write(&run.config.work_dir, &a.run_id, &a.payload_json)
            {
                Ok(payload) => {
                    let payload = payload.path();
                    match kind {
                        AdapterType::Claude => {
                            session_cli::run(run, &claude::Claude, payload).await
                        }
                        AdapterType::Codex => session_cli::run(run, &codex::Codex, payload).await,
                        AdapterType::Gemini => {
                            session_cli::run(run, &gemini::Gemini, payload).await
                        }
                        AdapterType::OpenCode => {
                            session_cli::run(run, &opencode::OpenCode, payload).await
                        }
                        AdapterType::Hermes => hermes::run(run, payload).await,
                        _ => process::run(run, payload).await,
                    }
                }
                Err(e) => Ended::failed(e),
            }
        }
    }
}

/// The adapters this worker offers, as registered with the cluster: all of them.
pub(crate) const ADAPTERS: &[AdapterType] = AdapterType::ALL;
