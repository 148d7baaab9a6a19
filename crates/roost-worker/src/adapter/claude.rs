//! The `claude` adapter: Claude Code's CLI in print mode with stream-json output, the prompt
//! on stdin, unattended (`claude --print --output-format stream-json --verbose
//! --dangerously-skip-permissions [--resume <id>]`). Checked against the real CLI (2.1.332) in
//! `crates/roost/tests/e2e/runtimes/claude.rs`. As root, Claude Code refuses to skip its
//! permission prompts unless `IS_SANDBOX=1` is in the agent's `env`.

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct Claude;

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// What this invocation cost. On a resumed session `total_cost_usd` is the whole session's
/// (every earlier run's too); `model_usage_since_last_result` holds this invocation's, per model.
fn invocation_cost(result: &Value) -> Option<f64> {
    match result["model_usage_since_last_result"].as_object() {
        Some(models) if !models.is_empty() => {
            Some(models.values().filter_map(|m| m["costUSD"].as_f64()).sum())
        }
        _ => result["total_cost_usd"].as_f64(),
    }
}

impl SessionCli for Claude {
    fn default_command(&self) -> &'static str {
        "claude"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        // No `-` argument: `--print` reads the prompt from stdin by itself, and a `-` became
        // the first line of the prompt.
        let mut args: Vec<String> = ["--print", "--output-format", "stream-json", "--verbose"]
            .map(String::from)
            .to_vec();
        if let Some(id) = resume {
            args.extend(["--resume".into(), id.into()]);
        }
        // Nobody answers a permission prompt in a heartbeat run (Paperclip's default too); an
        // agent's own `--permission-mode` in `args` decides instead.
        if !config
            .args
            .iter()
            .any(|a| a.starts_with("--permission-mode"))
        {
            args.push("--dangerously-skip-permissions".into());
        }
        if let Some(model) = &config.model {
            args.extend(["--model".into(), model.clone()]);
        }
        args.extend(config.args.iter().cloned());
        args
    }

    fn parse_line(&self, line: &str, parsed: &mut Parsed) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if let Some(id) = event["session_id"].as_str().filter(|s| !s.is_empty()) {
            parsed.session_id = Some(id.to_string());
        }
        match event["type"].as_str() {
            Some("system") if event["subtype"] == "init" => {
                if let Some(model) = event["model"].as_str().filter(|m| !m.is_empty()) {
                    parsed.model = Some(model.to_string());
                }
            }
            Some("assistant") => {
                // Each API call's usage, summed for metering while the run runs. Claude Code
                // prints one event per content block of a message, each with the message's
                // usage: a message is counted once.
                let message = &event["message"];
                if let Some(id) = message["id"].as_str() {
                    if parsed.last_message.as_deref() == Some(id) {
                        return;
                    }
                    parsed.last_message = Some(id.to_string());
                }
                let usage = &message["usage"];
                parsed.input_tokens += count(usage, "input_tokens");
                parsed.cached_input_tokens += count(usage, "cache_read_input_tokens");
                parsed.output_tokens += count(usage, "output_tokens");
            }
            Some("result") => {
                // The totals of the whole invocation: they replace the running sum (whose
                // output counts are the messages' first, partial ones).
                let usage = &event["usage"];
                if usage.is_object() {
                    parsed.input_tokens = count(usage, "input_tokens");
                    parsed.cached_input_tokens = count(usage, "cache_read_input_tokens");
                    parsed.output_tokens = count(usage, "output_tokens");
                }
                if let Some(cost) = invocation_cost(&event) {
                    parsed.cost_usd = Some(cost);
                }
                let text = event["result"].as_str().unwrap_or("");
                if event["is_error"].as_bool() == Some(true) {
                    parsed.add_error(text);
                } else if !text.is_empty() {
                    parsed.summary = Some(text.chars().take(2000).collect());
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream as Claude Code prints it (trimmed), recorded from a real run's shape.
    const STREAM: &str = r#"{"type":"system","subtype":"init","session_id":"8f9c1e2a-1111-4c3d-9e8f-0a1b2c3d4e5f","model":"claude-sonnet-4","tools":["Bash"]}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Checking out."}],"usage":{"input_tokens":1200,"cache_read_input_tokens":300,"output_tokens":40}},"session_id":"8f9c1e2a-1111-4c3d-9e8f-0a1b2c3d4e5f"}
not json: a warning line
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"usage":{"input_tokens":1500,"cache_read_input_tokens":900,"output_tokens":60}},"session_id":"8f9c1e2a-1111-4c3d-9e8f-0a1b2c3d4e5f"}
{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Fixed the parser and commented on ACM-7.","session_id":"8f9c1e2a-1111-4c3d-9e8f-0a1b2c3d4e5f","total_cost_usd":0.0421,"usage":{"input_tokens":2700,"cache_read_input_tokens":1200,"output_tokens":100}}"#;

    #[test]
    fn the_stream_yields_session_usage_cost_and_result() {
        let mut parsed = Parsed::default();
        for line in STREAM.lines() {
            Claude.parse_line(line, &mut parsed);
        }
        assert_eq!(
            parsed.session_id.as_deref(),
            Some("8f9c1e2a-1111-4c3d-9e8f-0a1b2c3d4e5f")
        );
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (2700, 1200, 100)
        );
        assert_eq!(parsed.cost_usd, Some(0.0421));
        assert_eq!(
            parsed.summary.as_deref(),
            Some("Fixed the parser and commented on ACM-7.")
        );
        assert!(parsed.errors.is_empty());
    }

    #[test]
    fn a_resume_adds_the_flag_and_an_error_result_is_an_error() {
        let args = Claude.args(&CommonConfig::default(), Some("s-1"));
        assert_eq!(
            args,
            [
                "--print",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                "s-1",
                "--dangerously-skip-permissions"
            ]
        );
        let mut parsed = Parsed::default();
        Claude.parse_line(
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"No conversation found with session ID: s-1"}"#,
            &mut parsed,
        );
        assert!(parsed.errors.contains("No conversation found"));
        assert_eq!(parsed.summary, None);
    }

    /// Regression: the adapter passed `--print -`; Claude Code read `-` as the prompt argument
    /// and sent the model "-" followed by the prompt from stdin.
    #[test]
    fn claude_prompt_is_read_from_stdin_alone_not_after_a_dash_argument() {
        let args = Claude.args(&CommonConfig::default(), None);
        assert!(!args.iter().any(|a| a == "-"), "{args:?}");
    }

    /// Regression: without `--dangerously-skip-permissions` Claude Code in print mode denies
    /// every Bash call (nobody answers the prompt), so an agent could not reach the API.
    #[test]
    fn claude_runs_unattended_unless_the_agent_sets_a_permission_mode() {
        let args = Claude.args(&CommonConfig::default(), None);
        assert!(args.contains(&"--dangerously-skip-permissions".to_string()));
        let own = CommonConfig {
            args: vec!["--permission-mode".into(), "acceptEdits".into()],
            ..Default::default()
        };
        let args = Claude.args(&own, None);
        assert!(!args.contains(&"--dangerously-skip-permissions".to_string()));
    }

    /// Regression: a resumed session's `total_cost_usd` is the whole session's (Claude Code
    /// 2.1.332), so every resumed run was charged again for the runs before it.
    #[test]
    fn a_resumed_claude_session_is_charged_for_this_invocation_not_the_sessions_total() {
        let mut parsed = Parsed::default();
        Claude.parse_line(
            r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-sonnet-4-5"}"#,
            &mut parsed,
        );
        Claude.parse_line(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-1","total_cost_usd":0.01524,"usage":{"input_tokens":2000,"cache_read_input_tokens":400,"output_tokens":100},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":4000,"costUSD":0.01524}},"model_usage_since_last_result":{"claude-sonnet-4-5":{"inputTokens":2000,"outputTokens":100,"cacheReadInputTokens":400,"costUSD":0.00762}}}"#,
            &mut parsed,
        );
        assert_eq!(parsed.cost_usd, Some(0.00762));
        assert_eq!(parsed.model.as_deref(), Some("claude-sonnet-4-5"));
        // An older CLI without the per-invocation figure: the total, as before.
        let mut old = Parsed::default();
        Claude.parse_line(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.0421}"#,
            &mut old,
        );
        assert_eq!(old.cost_usd, Some(0.0421));
    }

    /// Regression: Claude Code prints one `assistant` event per content block of a message
    /// (text, then a tool call), each with the whole message's usage; the adapter added each,
    /// and kept the larger sum over the result's totals (2.1.332: 3000 input tokens metered
    /// for two calls of 1000).
    #[test]
    fn claude_counted_one_api_call_once_per_content_block() {
        let mut parsed = Parsed::default();
        for line in [
            r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"Let me check."}],"usage":{"input_tokens":1000,"cache_read_input_tokens":200,"output_tokens":0}}}"#,
            r#"{"type":"assistant","message":{"id":"msg_1","content":[{"type":"tool_use","name":"Bash","input":{}}],"usage":{"input_tokens":1000,"cache_read_input_tokens":200,"output_tokens":0}}}"#,
        ] {
            Claude.parse_line(line, &mut parsed);
        }
        assert_eq!(parsed.input_tokens, 1000, "while the run runs");
        Claude.parse_line(
            r#"{"type":"assistant","message":{"id":"msg_2","content":[{"type":"text","text":"Done."}],"usage":{"input_tokens":1000,"cache_read_input_tokens":200,"output_tokens":0}}}"#,
            &mut parsed,
        );
        Claude.parse_line(
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Done.","total_cost_usd":0.00762,"usage":{"input_tokens":2000,"cache_read_input_tokens":400,"output_tokens":100}}"#,
            &mut parsed,
        );
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (2000, 400, 100)
        );
    }
}
