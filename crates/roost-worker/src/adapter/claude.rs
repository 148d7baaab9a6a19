//! The `claude` adapter: Claude Code's CLI in print mode with stream-json output
//! (`claude --print - --output-format stream-json --verbose [--resume <id>]`).

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct Claude;

fn count(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

impl SessionCli for Claude {
    fn default_command(&self) -> &'static str {
        "claude"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        let mut args: Vec<String> = [
            "--print",
            "-",
            "--output-format",
            "stream-json",
            "--verbose",
        ]
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

    fn parse_line(&self, line: &str, parsed: &mut Parsed) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if let Some(id) = event["session_id"].as_str().filter(|s| !s.is_empty()) {
            parsed.session_id = Some(id.to_string());
        }
        match event["type"].as_str() {
            Some("assistant") => {
                // Each API call's usage, summed for metering while the run runs.
                let usage = &event["message"]["usage"];
                parsed.input_tokens += count(usage, "input_tokens");
                parsed.cached_input_tokens += count(usage, "cache_read_input_tokens");
                parsed.output_tokens += count(usage, "output_tokens");
            }
            Some("result") => {
                // The totals of the whole invocation.
                let usage = &event["usage"];
                parsed.input_tokens = parsed.input_tokens.max(count(usage, "input_tokens"));
                parsed.cached_input_tokens = parsed
                    .cached_input_tokens
                    .max(count(usage, "cache_read_input_tokens"));
                parsed.output_tokens = parsed.output_tokens.max(count(usage, "output_tokens"));
                if let Some(cost) = event["total_cost_usd"].as_f64() {
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
                "-",
                "--output-format",
                "stream-json",
                "--verbose",
                "--resume",
                "s-1"
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
}
