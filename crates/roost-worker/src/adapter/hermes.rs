//! The `hermes` adapter: Hermes Agent's quiet single query
//! (`hermes chat -Q --source tool --yolo --accept-hooks [--resume <id>] --query=<prompt>`).
//! Hermes reads no prompt on stdin there and prints plain text: the answer on stdout, a
//! `session_id: <id>` line on stderr. It prints no usage either: that is read after the run
//! from `hermes sessions export --session-id <id> -` (the session's totals, less what they
//! were before a resumed session ran).

use roost_core::RunStatus;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use roost_proto::v1::RunUsage;
use serde::Deserialize;

use super::session_cli::{self, cost_of, micro_usd, Parsed, SessionCli};
use super::{process_environment, raise_usage, CommonConfig, Ended, Run};

pub(crate) struct Hermes;

const SUMMARY_CHARS: usize = 2000;
/// An export reads one session from Hermes' SQLite store: well under a second here.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(20);

fn session_line(line: &str) -> Option<&str> {
    let id = line.trim().strip_prefix("session_id:")?.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then_some(id)
}

impl SessionCli for Hermes {
    fn default_command(&self) -> &'static str {
        "hermes"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        // `--yolo` bypasses the dangerous-command approvals and `--accept-hooks` the prompt
        // for unseen shell hooks, neither of which a run without a terminal can answer.
        // `--source tool` keeps these sessions out of the user's own session lists.
        let mut args: Vec<String> = ["chat", "-Q", "--source", "tool", "--yolo", "--accept-hooks"]
            .map(String::from)
            .to_vec();
        if let Some(id) = resume {
            args.extend(["--resume".into(), id.into()]);
        }
        if let Some(model) = &config.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args.extend(config.args.iter().cloned());
        args
    }

    fn prompt_args(&self, prompt: &str) -> Option<Vec<String>> {
        // One `--query=` word, so a prompt starting with `-` is never read as an option.
        Some(vec![format!("--query={prompt}")])
    }

    fn parse_line(&self, line: &str, parsed: &mut Parsed) {
        if let Some(id) = session_line(line) {
            parsed.session_id = Some(id.to_string());
            return;
        }
        // Startup notices (`⚠ tirith security scanner enabled but not available ...`) come
        // before the answer on stdout.
        if line.trim_start().starts_with('\u{26a0}') {
            return;
        }
        let line = line.trim_end_matches('\r');
        match &mut parsed.summary {
            None if line.trim().is_empty() => {}
            None => parsed.summary = Some(line.chars().take(SUMMARY_CHARS).collect()),
            Some(summary) => {
                if summary.chars().count() < SUMMARY_CHARS {
                    summary.push('\n');
                    summary.push_str(line);
                    *summary = summary.chars().take(SUMMARY_CHARS).collect();
                }
            }
        }
    }

    fn parse_stderr(&self, line: &str, parsed: &mut Parsed) {
        if let Some(id) = session_line(line) {
            parsed.session_id = Some(id.to_string());
        } else if !line.trim_start().starts_with('\u{21bb}') {
            // `↻ Resumed session <id> (...)` is no error.
            parsed.add_error(line);
        }
    }
}

/// A session's totals as `hermes sessions export` prints them (one JSON line per session).
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq)]
struct Totals {
    input_tokens: Option<u64>,
    /// Includes the reasoning tokens, which Hermes also counts apart.
    output_tokens: Option<u64>,
    cache_read_tokens: Option<u64>,
    estimated_cost_usd: Option<f64>,
    actual_cost_usd: Option<f64>,
}

impl Totals {
    /// Hermes' own figure; `None` when it knows no price for the model (`cost_status`
    /// `unknown`, `estimated_cost_usd` 0).
    fn cost(&self, status: Option<&str>) -> Option<f64> {
        self.actual_cost_usd.or(self
            .estimated_cost_usd
            .filter(|_| status.is_some_and(|s| s != "unknown")))
    }
}

#[derive(Deserialize, Debug, PartialEq)]
struct Export {
    id: String,
    model: Option<String>,
    cost_status: Option<String>,
    #[serde(flatten)]
    totals: Totals,
}

fn read_export(stdout: &str, id: &str) -> Option<Export> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Export>(line).ok())
        .find(|line| line.id == id)
}

/// What this run used: the session's totals after it, less those before when it resumed the
/// same session, as a [`Parsed`] for the price table. Hermes' `input_tokens` leave out the
/// cached part.
fn used(before: Option<&Export>, after: &Export) -> Parsed {
    let (b, a) = (before.map(|e| e.totals).unwrap_or_default(), after.totals);
    let less = |a: Option<u64>, b: Option<u64>| a.unwrap_or(0).saturating_sub(b.unwrap_or(0));
    let cost = after
        .totals
        .cost(after.cost_status.as_deref())
        .map(|total| {
            let earlier = before.and_then(|e| e.totals.cost(e.cost_status.as_deref()));
            (total - earlier.unwrap_or(0.0)).max(0.0)
        });
    Parsed {
        input_tokens: less(a.input_tokens, b.input_tokens),
        cached_input_tokens: less(a.cache_read_tokens, b.cache_read_tokens),
        output_tokens: less(a.output_tokens, b.output_tokens),
        cost_usd: cost,
        model: after.model.clone().filter(|m| !m.is_empty()),
        ..Default::default()
    }
}

async fn export(program: &str, env: &[(String, String)], cwd: &Path, id: &str) -> Option<Export> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(["sessions", "export", "--session-id", id, "-"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(EXPORT_TIMEOUT, command.output())
        .await
        .ok()?
        .ok()?;
    if !out.status.success() {
        return None;
    }
    read_export(&String::from_utf8_lossy(&out.stdout), id)
}

/// Runs Hermes through [`session_cli::run`], then meters the session it ended in.
pub(crate) async fn run(run: &mut Run<'_>, payload_file: &Path) -> Ended {
    let config = match CommonConfig::parse(&run.assignment.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return Ended::failed(e),
    };
    let program = if config.command.is_empty() {
        Hermes.default_command().to_string()
    } else {
        config.command.clone()
    };
    // The agent's `env` may move Hermes' home (`HERMES_HOME`): the export must see the same.
    let env = process_environment(run.assignment, run.config, payload_file, &config.env);
    let cwd = run.workspace.clone();
    let saved = run.assignment.session_id.clone();
    let before = if saved.is_empty() {
        None
    } else {
        export(&program, &env, &cwd, &saved).await
    };
    let mut ended = session_cli::run(run, &Hermes, payload_file).await;
    ended.summary = ended.summary.map(|s| s.trim_end().to_string());
    // A stopped run (cancelled, cut off, the worker stopping) is not held up for its meter.
    if let (Some(id), RunStatus::Succeeded | RunStatus::Failed) =
        (ended.session_id.clone(), ended.status)
    {
        let resumed = !ended.session_reset && id == saved;
        match export(&program, &env, &cwd, &id).await {
            // Without the totals from before, a resumed session's would count every earlier
            // run again.
            Some(_) if resumed && before.is_none() => run.log.note(&format!(
                "hermes: usage not metered: no totals of session {id} from before the run"
            )),
            Some(after) => {
                let parsed = used(before.as_ref().filter(|_| resumed), &after);
                let model = parsed.model.clone().or_else(|| config.model.clone());
                let (cost, note) = cost_of(
                    &parsed,
                    model.as_deref(),
                    &run.config.prices,
                    Hermes.input_includes_cached(),
                );
                run.log.note(&format!("hermes session {id}: {note}"));
                let usage = RunUsage {
                    input_tokens: parsed.input_tokens,
                    cached_input_tokens: parsed.cached_input_tokens,
                    output_tokens: parsed.output_tokens,
                    cost_micro_usd: cost.map(micro_usd).unwrap_or(0),
                    ..Default::default()
                };
                raise_usage(&run.usage, &usage);
            }
            None => run.log.note(&format!(
                "hermes: usage not metered: `{program} sessions export --session-id {id}` failed"
            )),
        }
    }
    // A failed model call is Hermes' answer (`HTTP 400: ...` on stdout), not an error line.
    if ended.status == RunStatus::Failed && !ended.error.contains(": ") {
        if let Some(first) = ended.summary.as_deref().and_then(|s| s.lines().next()) {
            ended.error = format!("{}: {first}", ended.error);
        }
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::session_cli::refused_resume;

    /// Captured from hermes-agent 0.19.0 (`chat -Q`) against a local stub of the Chat
    /// Completions API (`model.provider: custom`, `model.base_url` in config.yaml).
    const STDOUT: &str = "  \u{26a0}  tirith security scanner enabled but not available \u{2014} command scanning will use pattern matching only\r\nDone: commented on ACM-7.\n";
    const STDERR: &str = "\nsession_id: 20261127_141252_363803\n";
    /// The same run resumed: its stderr.
    const RESUMED_STDERR: &str = "\u{21bb} Resumed session 20261127_141252_363803 (1 user message, 2 total messages)\n\nsession_id: 20261127_141252_363803\n";

    fn parse(stdout: &str, stderr: &str) -> Parsed {
        let mut parsed = Parsed::default();
        for line in stdout.lines() {
            Hermes.parse_line(line, &mut parsed);
        }
        for line in stderr.lines() {
            Hermes.parse_stderr(line, &mut parsed);
        }
        parsed
    }

    #[test]
    fn the_output_yields_session_and_answer_and_no_usage() {
        let parsed = parse(STDOUT, STDERR);
        assert_eq!(parsed.session_id.as_deref(), Some("20261127_141252_363803"));
        assert_eq!(parsed.summary.as_deref(), Some("Done: commented on ACM-7."));
        assert_eq!((parsed.input_tokens, parsed.cost_usd), (0, None));
        assert!(parsed.errors.is_empty(), "{}", parsed.errors);
        let resumed = parse(STDOUT, RESUMED_STDERR);
        assert!(resumed.errors.is_empty(), "{}", resumed.errors);
    }

    #[test]
    fn usage_comes_from_the_export_less_the_totals_before() {
        // Trimmed from `hermes sessions export --session-id ... -` after the first run and
        // after the resumed one; the stub's price unknown to Hermes.
        let first = r#"{"id": "20261127_141252_363803", "source": "tool", "model": "stub-model", "message_count": 2, "input_tokens": 1034, "output_tokens": 56, "cache_read_tokens": 200, "cache_write_tokens": 0, "reasoning_tokens": 0, "billing_provider": "custom", "estimated_cost_usd": 0.0, "actual_cost_usd": null, "cost_status": "unknown", "api_call_count": 1, "messages": [{"role": "user", "content": "Say done."}]}"#;
        let second = r#"{"id": "20261127_141252_363803", "model": "stub-model", "input_tokens": 2068, "output_tokens": 112, "cache_read_tokens": 400, "reasoning_tokens": 0, "estimated_cost_usd": 0.0, "actual_cost_usd": null, "cost_status": "unknown", "messages": []}"#;
        let id = "20261127_141252_363803";
        let before = read_export(first, id).expect("totals");
        let after = read_export(&format!("not json\n{second}"), id).expect("totals");
        let run = used(Some(&before), &after);
        assert_eq!(
            (run.input_tokens, run.cached_input_tokens, run.output_tokens),
            (1034, 200, 56)
        );
        // `unknown`: no cost from Hermes, the model named for the price table.
        assert_eq!(run.cost_usd, None);
        assert_eq!(run.model.as_deref(), Some("stub-model"));
        let fresh = used(None, &before);
        assert_eq!(fresh.input_tokens, 1034);
        assert!(read_export(first, "another").is_none());
    }

    #[test]
    fn a_cost_hermes_knows_is_taken_less_the_cost_before() {
        // Written from hermes-agent 0.19.0's export fields (`agent/usage_pricing.py` sets
        // `cost_status` other than `unknown` when it prices the model).
        let before = read_export(
            r#"{"id": "s1", "model": "m", "input_tokens": 10, "estimated_cost_usd": 0.01, "actual_cost_usd": null, "cost_status": "estimated"}"#,
            "s1",
        );
        let after = read_export(
            r#"{"id": "s1", "model": "m", "input_tokens": 30, "estimated_cost_usd": 0.0223, "actual_cost_usd": null, "cost_status": "estimated"}"#,
            "s1",
        )
        .expect("totals");
        let run = used(before.as_ref(), &after);
        assert_eq!(run.input_tokens, 20);
        assert_eq!(run.cost_usd.map(micro_usd), Some(12_300));
    }

    #[test]
    fn a_resume_adds_the_flag_and_the_prompt_is_one_argument() {
        let args = Hermes.args(&CommonConfig::default(), Some("20261127_141252_363803"));
        assert_eq!(
            args,
            [
                "chat",
                "-Q",
                "--source",
                "tool",
                "--yolo",
                "--accept-hooks",
                "--resume",
                "20261127_141252_363803"
            ]
        );
        assert_eq!(
            Hermes.prompt_args("-x\nwake"),
            Some(vec!["--query=-x\nwake".to_string()])
        );
    }

    #[test]
    fn its_refusal_is_recognised() {
        // Captured from hermes-agent 0.19.0 `--resume` with an unknown id (exit code 1).
        let parsed = parse(
            "",
            "Session not found: 20260101_000000_abcdef\nUse a session ID from a previous CLI run (hermes sessions list).",
        );
        assert!(refused_resume(&parsed.errors));
        assert_eq!(parsed.session_id, None);
    }
}
