//! The `codex` adapter: the Codex CLI's non-interactive JSON mode
//! (`codex exec --json [resume <thread id>] -`, the prompt on stdin).

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct Codex;

impl SessionCli for Codex {
    fn default_command(&self) -> &'static str {
        "codex"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        let mut args: Vec<String> = vec!["exec".into(), "--json".into()];
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
                // Per turn; a run may take several.
                let usage = &event["usage"];
                parsed.input_tokens += usage["input_tokens"].as_u64().unwrap_or(0);
                parsed.cached_input_tokens += usage["cached_input_tokens"].as_u64().unwrap_or(0);
                parsed.output_tokens += usage["output_tokens"].as_u64().unwrap_or(0);
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
        assert_eq!(args, ["exec", "--json", "resume", "t-1", "-"]);
    }
}
