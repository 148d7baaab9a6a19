//! The `codex` adapter: the Codex CLI's non-interactive JSON mode, unattended
//! (`codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//! -c shell_environment_policy.ignore_default_excludes=true [resume <thread id>] -`, the prompt
//! on stdin). Checked against the real CLI (0.171.0) in `crates/roost/tests/e2e/runtimes/codex.rs`.
//! Codex reports tokens but no cost: the worker's `[prices]` table prices them
//! (`session_cli.rs`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct Codex;

/// Flags with which an agent's own `args` choose Codex's sandbox; without one, the adapter
/// turns the sandbox and approvals off.
const SANDBOX_FLAGS: [&str; 5] = [
    "--sandbox",
    "-s",
    "--full-auto",
    "--dangerously-bypass-approvals-and-sandbox",
    "--yolo",
];

fn tokens(usage: &Value) -> (u64, u64, u64) {
    let n = |k: &str| usage[k].as_u64().unwrap_or(0);
    (
        n("input_tokens"),
        n("cached_input_tokens"),
        n("output_tokens"),
    )
}

/// Where Codex keeps its sessions for this agent: `CODEX_HOME` (the agent's `env`, else the
/// worker's), else `~/.codex`.
fn codex_home(config: &CommonConfig) -> Option<PathBuf> {
    let from = |key: &str| {
        config
            .env
            .get(key)
            .cloned()
            .or_else(|| std::env::var(key).ok())
            .filter(|v| !v.is_empty())
    };
    from("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| from("HOME").map(|h| Path::new(&h).join(".codex")))
}

/// The rollout file of `thread` under `dir` (`sessions/YYYY/MM/DD/rollout-...-<id>.jsonl`).
fn find_rollout(dir: &Path, thread: &str, depth: usize) -> Option<PathBuf> {
    let suffix = format!("-{thread}.jsonl");
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() && depth > 0 {
            if let Some(found) = find_rollout(&path, thread, depth - 1) {
                return Some(found);
            }
        } else if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(&suffix))
        {
            return Some(path);
        }
    }
    None
}

/// The thread's token totals so far: the last `token_count` event of its rollout.
fn thread_totals(rollout: &str) -> Option<(u64, u64, u64)> {
    rollout
        .lines()
        .rev()
        .filter(|l| l.contains("\"token_count\""))
        .find_map(|l| {
            let event: Value = serde_json::from_str(l).ok()?;
            let total = &event["payload"]["info"]["total_token_usage"];
            total.is_object().then(|| tokens(total))
        })
}

impl SessionCli for Codex {
    fn default_command(&self) -> &'static str {
        "codex"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        // `exec` refuses a directory that is not a git repository it trusts unless told.
        let mut args: Vec<String> = vec![
            "exec".into(),
            "--json".into(),
            "--skip-git-repo-check".into(),
        ];
        // A heartbeat run is unattended: by default Codex's sandbox is read-only with no
        // network, so the agent could neither write its files nor call the API.
        if !config
            .args
            .iter()
            .any(|a| SANDBOX_FLAGS.contains(&a.split('=').next().unwrap_or(a)))
        {
            args.push("--dangerously-bypass-approvals-and-sandbox".into());
        }
        // Codex strips variables whose names contain KEY, SECRET or TOKEN from its commands'
        // environment by default; the agent's run key (`PAPERCLIP_API_KEY`) is one.
        args.extend([
            "-c".into(),
            "shell_environment_policy.ignore_default_excludes=true".into(),
        ]);
        if let Some(model) = &config.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args.extend(config.args.iter().cloned());
        if let Some(id) = resume {
            args.extend(["resume".into(), id.into()]);
        }
        args.push("-".into());
        args
    }

    fn before_attempt(&self, config: &CommonConfig, resume: Option<&str>, parsed: &mut Parsed) {
        let Some(thread) = resume else { return };
        let totals = codex_home(config)
            .and_then(|home| find_rollout(&home.join("sessions"), thread, 4))
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| thread_totals(&text));
        if let Some(totals) = totals {
            parsed.session_tokens_before = totals;
        }
    }

    fn input_includes_cached(&self) -> bool {
        true
    }

    fn parse_line(&self, line: &str, parsed: &mut Parsed) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match event["type"].as_str() {
            Some("thread.started") => {
                if let Some(id) = event["thread_id"].as_str().filter(|s| !s.is_empty()) {
                    parsed.session_id = Some(id.to_string());
                }
            }
            Some("turn.completed") => {
                // The thread's running totals, not this turn's: a resumed thread's include
                // every earlier run's tokens, which `before_attempt` read from its rollout.
                let (input, cached, output) = tokens(&event["usage"]);
                let (b_input, b_cached, b_output) = parsed.session_tokens_before;
                parsed.input_tokens = input.saturating_sub(b_input);
                parsed.cached_input_tokens = cached.saturating_sub(b_cached);
                parsed.output_tokens = output.saturating_sub(b_output);
            }
            Some("item.completed") if event["item"]["type"] == "agent_message" => {
                if let Some(text) = event["item"]["text"].as_str() {
                    parsed.summary = Some(text.chars().take(2000).collect());
                }
            }
            Some("turn.failed") => {
                parsed.add_error(event["error"]["message"].as_str().unwrap_or("turn failed"))
            }
            Some("error") => parsed.add_error(event["message"].as_str().unwrap_or("error")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENTS: &str = r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"Reading the issue"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"curl ...","exit_code":0}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Commented and closed ACM-7."}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}"#;

    #[test]
    fn the_events_yield_thread_usage_and_last_message() {
        let mut parsed = Parsed::default();
        for line in EVENTS.lines() {
            Codex.parse_line(line, &mut parsed);
        }
        assert_eq!(
            parsed.session_id.as_deref(),
            Some("0199a213-81c0-7800-8aa1-bbab2a035a53")
        );
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (24763, 24448, 122)
        );
        assert_eq!(
            parsed.summary.as_deref(),
            Some("Commented and closed ACM-7.")
        );
    }

    #[test]
    fn resume_goes_before_the_stdin_marker() {
        let args = Codex.args(&CommonConfig::default(), Some("t-1"));
        assert_eq!(&args[args.len() - 3..], ["resume", "t-1", "-"]);
    }

    /// Regression: `codex exec` outside a git repository it trusts (a worker's work dir)
    /// refused to start: "Not inside a trusted directory and --skip-git-repo-check was not
    /// specified".
    #[test]
    fn codex_runs_outside_a_git_repository() {
        let args = Codex.args(&CommonConfig::default(), None);
        assert_eq!(&args[..3], ["exec", "--json", "--skip-git-repo-check"]);
    }

    /// Regression: Codex's default environment policy removed `PAPERCLIP_API_KEY` and
    /// `ROOST_API_KEY` (names with KEY) from the commands it ran, and its default read-only
    /// sandbox blocked the network: the agent could not call the API.
    #[test]
    fn codex_commands_keep_the_run_key_and_reach_the_api() {
        let args = Codex.args(&CommonConfig::default(), None);
        assert!(args.contains(&"--dangerously-bypass-approvals-and-sandbox".to_string()));
        let policy = args.iter().position(|a| a == "-c").expect("-c");
        assert_eq!(
            args[policy + 1],
            "shell_environment_policy.ignore_default_excludes=true"
        );
        let own = CommonConfig {
            args: vec!["--sandbox".into(), "workspace-write".into()],
            ..Default::default()
        };
        let args = Codex.args(&own, None);
        assert!(!args.contains(&"--dangerously-bypass-approvals-and-sandbox".to_string()));
    }

    /// Regression: `turn.completed` carries the thread's running totals (Codex 0.171.0), so a
    /// resumed run was metered with every earlier run's tokens too, and two turns in one run
    /// were added twice.
    #[test]
    fn a_resumed_codex_thread_is_metered_for_this_run_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let day = dir.path().join("sessions/2026/11/27");
        std::fs::create_dir_all(&day).expect("dirs");
        std::fs::write(
            day.join("rollout-2026-11-27T14-15-36-t-1.jsonl"),
            concat!(
                r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":50}}}}"#,
                "\n",
                r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":2400,"cached_input_tokens":400,"output_tokens":100}}}}"#,
                "\n",
                r#"{"type":"event_msg","payload":{"type":"task_complete"}}"#,
                "\n"
            ),
        )
        .expect("rollout");
        let config = CommonConfig {
            env: [("CODEX_HOME".to_string(), dir.path().display().to_string())].into(),
            ..Default::default()
        };
        let mut parsed = Parsed::default();
        Codex.before_attempt(&config, Some("t-1"), &mut parsed);
        assert_eq!(parsed.session_tokens_before, (2400, 400, 100));
        for line in [
            r#"{"type":"thread.started","thread_id":"t-1"}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":3600,"cached_input_tokens":600,"output_tokens":150}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":4800,"cached_input_tokens":800,"output_tokens":200}}"#,
        ] {
            Codex.parse_line(line, &mut parsed);
        }
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (2400, 400, 100)
        );
    }
}
