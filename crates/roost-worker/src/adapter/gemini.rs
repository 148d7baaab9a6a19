//! The `gemini` adapter: Gemini CLI in headless mode with stream-json output
//! (`gemini --output-format stream-json --approval-mode yolo --skip-trust [--resume <id>]
//! --prompt ""`, the prompt on stdin, which the CLI puts before the empty `--prompt`).

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct Gemini;

/// What the stream keeps of a result text, like the other CLI adapters.
const SUMMARY_CHARS: usize = 2000;

/// Lines gemini-cli 0.61.0 wrote to stderr on every run here that are not errors; kept out of
/// the error text so that a failed run's error names its cause.
const NOTICES: [&str; 3] = [
    "YOLO mode is enabled",
    "Warning: 256-color support not detected",
    "Ripgrep is not available",
];

/// The stream's error goes before what stderr said: the run's error is the first line.
fn put_first(parsed: &mut Parsed, text: &str) {
    let rest = std::mem::take(&mut parsed.errors);
    parsed.add_error(text);
    parsed.errors.push_str(&rest);
}

impl SessionCli for Gemini {
    fn default_command(&self) -> &'static str {
        "gemini"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        // `yolo` approves every tool call; `--skip-trust` keeps the CLI from falling back to
        // asking for approval (which a headless run cannot answer) in a folder it was never
        // told to trust.
        let mut args: Vec<String> = [
            "--output-format",
            "stream-json",
            "--approval-mode",
            "yolo",
            "--skip-trust",
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
        // Headless mode; the prompt read from stdin is put before this empty one.
        args.extend(["--prompt".into(), String::new()]);
        args
    }

    fn parse_line(&self, line: &str, parsed: &mut Parsed) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            return;
        };
        match event["type"].as_str() {
            Some("init") => {
                if let Some(id) = event["session_id"].as_str().filter(|s| !s.is_empty()) {
                    parsed.session_id = Some(id.to_string());
                }
            }
            Some("message") if event["role"] == "assistant" => {
                // The answer comes in deltas; the result is the last turn's text.
                let text = event["content"].as_str().unwrap_or("");
                let summary = parsed.summary.get_or_insert_with(String::new);
                if summary.chars().count() < SUMMARY_CHARS {
                    summary.push_str(text);
                    *summary = summary.chars().take(SUMMARY_CHARS).collect();
                }
            }
            // A tool call ends a turn: the text before it was not the answer.
            Some("tool_use") => parsed.summary = None,
            Some("error") if event["severity"] == "error" => {
                parsed.add_error(event["message"].as_str().unwrap_or("error"))
            }
            Some("result") => {
                // The totals of the whole invocation, over every model it used. `input_tokens`
                // counts the prompt with its cached part (`cached`), as the Gemini API does.
                let stats = &event["stats"];
                let count = |key: &str| stats[key].as_u64().unwrap_or(0);
                parsed.input_tokens = parsed.input_tokens.max(count("input_tokens"));
                parsed.cached_input_tokens = parsed.cached_input_tokens.max(count("cached"));
                parsed.output_tokens = parsed.output_tokens.max(count("output_tokens"));
                // Gemini CLI prints no price: the worker's price table names the model that
                // did most of the work (`auto` routes some calls to a smaller one).
                let models = stats["models"].as_object().into_iter().flatten();
                if let Some((name, _)) = models
                    .filter_map(|(name, m)| Some((name, m["total_tokens"].as_u64()?)))
                    .filter(|(_, tokens)| *tokens > 0)
                    .max_by_key(|(_, tokens)| *tokens)
                {
                    parsed.model = Some(name.clone());
                }
                if event["status"] == "error" {
                    let message = event["error"]["message"].as_str().unwrap_or("run failed");
                    put_first(parsed, message);
                }
                if parsed.summary.as_deref() == Some("") {
                    parsed.summary = None;
                }
            }
            _ => {}
        }
    }

    fn input_includes_cached(&self) -> bool {
        true
    }

    fn parse_stderr(&self, line: &str, parsed: &mut Parsed) {
        let notice = NOTICES.iter().any(|n| line.starts_with(n));
        // A stack trace's frames add nothing to its first line.
        let frame = line.trim_start().starts_with("at ") && line.starts_with(' ');
        if !notice && !frame {
            parsed.add_error(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::session_cli::refused_resume;

    /// Captured from gemini-cli 0.61.0 run against a local stub of the Gemini API
    /// (`GOOGLE_GEMINI_BASE_URL`, which reported its model as gemini-2.5-pro).
    const STREAM: &str = r#"{"type":"init","timestamp":"2026-11-27T14:11:10.529Z","session_id":"1692a213-18c9-470c-b2bd-2ca4aa5846f5","model":"auto"}
{"type":"message","timestamp":"2026-11-27T14:11:10.531Z","role":"user","content":"Say done.\n"}
{"type":"message","timestamp":"2026-11-27T14:11:10.597Z","role":"assistant","content":"Done: commented on ACM-7.","delta":true}
{"type":"result","timestamp":"2026-11-27T14:11:10.643Z","status":"success","stats":{"total_tokens":1305,"input_tokens":1244,"output_tokens":61,"cached":200,"input":1044,"duration_ms":114,"tool_calls":0,"models":{"gemini-3.5-flash-lite":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"cached":0,"input":10},"gemini-2.5-pro":{"total_tokens":1290,"input_tokens":1234,"output_tokens":56,"cached":200,"input":1034}}}}"#;

    /// Captured the same way with the stub answering 400 (the stack trace on stderr trimmed).
    const FAILED: &str = r#"{"type":"init","timestamp":"2026-11-27T14:11:35.899Z","session_id":"00d47bde-b730-4b98-af49-039b373ed483","model":"auto"}
{"type":"result","timestamp":"2026-11-27T14:11:36.025Z","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"INVALID_ARGUMENT\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0}}"#;

    const FAILED_STDERR: &str = "YOLO mode is enabled. All tool calls will be automatically approved.
Ripgrep is not available. Falling back to GrepTool.
Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json _ApiError: {\"error\":{\"code\":400}}
    at throwErrorIfNotOK (file:///gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24)";

    #[test]
    fn the_stream_yields_session_usage_and_result_without_a_cost() {
        let mut parsed = Parsed::default();
        for line in STREAM.lines() {
            Gemini.parse_line(line, &mut parsed);
        }
        assert_eq!(
            parsed.session_id.as_deref(),
            Some("1692a213-18c9-470c-b2bd-2ca4aa5846f5")
        );
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (1244, 200, 61)
        );
        // Gemini CLI reports no price; the price table gets the model and the convention.
        assert_eq!(parsed.cost_usd, None);
        assert_eq!(parsed.model.as_deref(), Some("gemini-2.5-pro"));
        assert!(Gemini.input_includes_cached());
        assert_eq!(parsed.summary.as_deref(), Some("Done: commented on ACM-7."));
        assert!(parsed.errors.is_empty());
    }

    #[test]
    fn deltas_join_and_a_tool_call_starts_the_answer_over() {
        // Captured (the stub asked for a shell command, which `yolo` ran unattended), but the
        // first line: the stub writes no text before a tool call.
        let mut parsed = Parsed::default();
        for line in [
            r#"{"type":"message","timestamp":"2026-11-27T14:23:07.900Z","role":"assistant","content":"Let me look.","delta":true}"#,
            r#"{"type":"tool_use","timestamp":"2026-11-27T14:23:07.978Z","tool_name":"run_shell_command","tool_id":"run_shell_command__run_shell_command_1795789387905_0","parameters":{"command":"echo hi > touched-gemini.txt","description":"touch"}}"#,
            r#"{"type":"tool_result","timestamp":"2026-11-27T14:23:08.181Z","tool_id":"run_shell_command__run_shell_command_1795789387905_0","status":"success","output":""}"#,
            r#"{"type":"message","timestamp":"2026-11-27T14:23:08.220Z","role":"assistant","content":"Done: commented on ACM-7.","delta":true}"#,
            r#"{"type":"result","timestamp":"2026-11-27T14:23:08.227Z","status":"success","stats":{"total_tokens":2595,"input_tokens":2478,"output_tokens":117,"cached":400,"input":2078,"duration_ms":385,"tool_calls":1}}"#,
        ] {
            Gemini.parse_line(line, &mut parsed);
        }
        assert_eq!(parsed.summary.as_deref(), Some("Done: commented on ACM-7."));
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (2478, 400, 117)
        );
        let mut split = Parsed::default();
        for part in ["Closed ", "ACM-7."] {
            let line = format!(
                r#"{{"type":"message","role":"assistant","content":"{part}","delta":true}}"#
            );
            Gemini.parse_line(&line, &mut split);
        }
        assert_eq!(split.summary.as_deref(), Some("Closed ACM-7."));
    }

    #[test]
    fn a_failed_run_names_the_api_error_first_and_drops_the_notices() {
        let mut parsed = Parsed::default();
        for line in FAILED_STDERR.lines() {
            Gemini.parse_stderr(line, &mut parsed);
        }
        for line in FAILED.lines() {
            Gemini.parse_line(line, &mut parsed);
        }
        let first = parsed.errors.lines().next().unwrap_or_default();
        assert!(first.contains("API key not valid"), "{}", parsed.errors);
        assert!(!parsed.errors.contains("YOLO"), "{}", parsed.errors);
        assert!(
            !parsed.errors.contains("throwErrorIfNotOK"),
            "{}",
            parsed.errors
        );
        assert_eq!(parsed.errors.lines().count(), 2, "{}", parsed.errors);
        assert_eq!((parsed.summary, parsed.model), (None, None));
    }

    #[test]
    fn a_resume_adds_the_flag_before_the_empty_prompt() {
        let config = CommonConfig {
            model: Some("gemini-2.5-pro".into()),
            ..Default::default()
        };
        let args = Gemini.args(&config, Some("1692a213"));
        assert_eq!(
            args,
            [
                "--output-format",
                "stream-json",
                "--approval-mode",
                "yolo",
                "--skip-trust",
                "--resume",
                "1692a213",
                "--model",
                "gemini-2.5-pro",
                "--prompt",
                ""
            ]
        );
        assert_eq!(Gemini.prompt_args("the prompt"), None);
    }

    #[test]
    fn its_refusals_are_recognised() {
        // Both captured from gemini-cli 0.61.0 (exit code 42): an id it does not know in a
        // directory with sessions, and any id in a directory without one.
        let unknown = "Error resuming session: Invalid session identifier \"00000000-dead-beef-0000-000000000000\".\n  Searched for sessions in /tmp/ghome/.gemini/tmp/gwork/chats.";
        let none = "Error resuming session: No previous sessions found for this project.";
        for text in [unknown, none] {
            let mut parsed = Parsed::default();
            for line in text.lines() {
                Gemini.parse_stderr(line, &mut parsed);
            }
            assert!(refused_resume(&parsed.errors), "{text}");
        }
    }
}
