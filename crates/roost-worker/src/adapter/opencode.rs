//! The `opencode` adapter: OpenCode's `run` command with raw JSON events
//! (`opencode run --format json --auto [--session <id>]`, the prompt on stdin).

use serde_json::Value;

use super::session_cli::{Parsed, SessionCli};
use super::CommonConfig;

pub(crate) struct OpenCode;

/// The title of a session this adapter starts (`--title`).
const NEW_SESSION_TITLE: &str = "Roost heartbeat run";

/// OpenCode colours its stderr even into a pipe (`\x1b[91m\x1b[1mError: \x1b[0m...`); the
/// error text the cluster shows is plain.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, then one final letter.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl SessionCli for OpenCode {
    fn default_command(&self) -> &'static str {
        "opencode"
    }

    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String> {
        // Without `--auto` a headless run rejects every permission request, so a tool call
        // that needs one (a file outside the directory, say) fails; with it, approved once.
        let mut args: Vec<String> = ["run", "--format", "json", "--auto"]
            .map(String::from)
            .to_vec();
        if let Some(id) = resume {
            args.extend(["--session".into(), id.into()]);
        } else if !config
            .args
            .iter()
            .any(|a| a == "--title" || a.starts_with("--title="))
        {
            // An untitled new session has the model write its title in a call of its own,
            // which `--format json` reports nowhere (no `step_finish`): unmetered tokens.
            args.extend(["--title".into(), NEW_SESSION_TITLE.into()]);
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
        if let Some(id) = event["sessionID"].as_str().filter(|s| !s.is_empty()) {
            parsed.session_id = Some(id.to_string());
        }
        let part = &event["part"];
        match event["type"].as_str() {
            Some("text") => {
                // One per finished text part; the last one is the answer.
                if let Some(text) = part["text"].as_str().filter(|t| !t.trim().is_empty()) {
                    parsed.summary = Some(text.trim().chars().take(2000).collect());
                }
            }
            Some("step_finish") => {
                // Per model call. OpenCode's `input` leaves out the cached part (`cache.read`)
                // and its `output` the reasoning, which is billed as output too.
                let tokens = &part["tokens"];
                let count = |v: &Value| v.as_u64().unwrap_or(0);
                parsed.input_tokens += count(&tokens["input"]);
                parsed.cached_input_tokens += count(&tokens["cache"]["read"]);
                parsed.output_tokens += count(&tokens["output"]) + count(&tokens["reasoning"]);
                // OpenCode prices from its model list; 0 for a model it has no price for (a
                // local one), which the worker's price table may then price.
                if let Some(cost) = part["cost"].as_f64().filter(|c| *c > 0.0) {
                    parsed.cost_usd = Some(parsed.cost_usd.unwrap_or(0.0) + cost);
                }
            }
            Some("error") => {
                let error = &event["error"];
                let text = error["data"]["message"]
                    .as_str()
                    .or(error["message"].as_str())
                    .or(error["name"].as_str())
                    .unwrap_or("error");
                parsed.add_error(text);
            }
            _ => {}
        }
    }

    fn parse_stderr(&self, line: &str, parsed: &mut Parsed) {
        parsed.add_error(&strip_ansi(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::session_cli::refused_resume;

    /// Captured from opencode-ai 1.18.33 against a local stub of the Chat Completions API (an
    /// `@ai-sdk/openai-compatible` provider with `baseURL`, a model with a `cost` table): the
    /// stub asked for a shell command, which `--auto` let run, then answered.
    const EVENTS: &str = r#"{"type":"step_start","timestamp":1795789396170,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"id":"prt_21d639814001uGH4YAACcikIxP","messageID":"msg_21d6396070019GT1zppSxpPIxW","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","type":"step-start"}}
{"type":"tool_use","timestamp":1795789396336,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"type":"tool","tool":"bash","callID":"call_1","state":{"status":"completed","input":{"command":"echo hi > touched-chat.txt","description":"touch","timeout":30},"output":"(no output)","metadata":{"output":"(no output)","exit":0,"truncated":false},"title":"echo hi > touched-chat.txt","time":{"start":1795789396006,"end":1795789396274}},"id":"prt_21d639818001PupBDlPZiOOqZp","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","messageID":"msg_21d6396070019GT1zppSxpPIxW"}}
{"type":"step_finish","timestamp":1795789396336,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"id":"prt_21d6399390010rT6XadpO40iRi","reason":"tool-calls","messageID":"msg_21d6396070019GT1zppSxpPIxW","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","type":"step-finish","tokens":{"total":1290,"input":1034,"output":56,"reasoning":0,"cache":{"write":0,"read":200}},"cost":0.004002}}
{"type":"step_start","timestamp":1795789396456,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"id":"prt_21d6399c8001oe1hYpeMucV0W1","messageID":"msg_21d63994a001OcC2rXAmGwFId3","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","type":"step-start"}}
{"type":"text","timestamp":1795789396456,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"id":"prt_21d6399cc001lPsRW1mCHcAV0o","messageID":"msg_21d63994a001OcC2rXAmGwFId3","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","type":"text","text":"Done: commented on ACM-7.","time":{"start":1795789396428,"end":1795789396432}}}
{"type":"step_finish","timestamp":1795789396456,"sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","part":{"id":"prt_21d6399d4001H1XkcEJivwGS3A","reason":"stop","messageID":"msg_21d63994a001OcC2rXAmGwFId3","sessionID":"ses_de29c6f01ffejYh1otq55mWb4N","type":"step-finish","tokens":{"total":1290,"input":1034,"output":56,"reasoning":0,"cache":{"write":0,"read":200}},"cost":0.004002}}"#;

    /// Captured the same way with the stub answering 400 (headers trimmed).
    const FAILED: &str = r#"{"type":"error","timestamp":1795788743657,"sessionID":"ses_de2a66902ffeumv92XEWVafXu5","error":{"name":"APIError","data":{"message":"API key not valid. Please pass a valid API key.","statusCode":400,"isRetryable":false,"metadata":{"url":"http://127.0.0.1:18080/fail/v1/chat/completions"}}}}"#;

    #[test]
    fn the_events_yield_session_summed_usage_cost_and_last_text() {
        let mut parsed = Parsed::default();
        for line in EVENTS.lines() {
            OpenCode.parse_line(line, &mut parsed);
        }
        assert_eq!(
            parsed.session_id.as_deref(),
            Some("ses_de29c6f01ffejYh1otq55mWb4N")
        );
        assert_eq!(
            (
                parsed.input_tokens,
                parsed.cached_input_tokens,
                parsed.output_tokens
            ),
            (2068, 400, 112)
        );
        let cost = parsed.cost_usd.expect("a cost");
        assert!((cost - 0.008004).abs() < 1e-9, "{cost}");
        assert_eq!(parsed.summary.as_deref(), Some("Done: commented on ACM-7."));
        assert!(parsed.errors.is_empty());
    }

    #[test]
    fn a_model_without_a_price_has_no_cost_and_an_error_event_is_an_error() {
        // The first capture (ids trimmed), before the stub model had a `cost` table.
        let mut parsed = Parsed::default();
        OpenCode.parse_line(
            r#"{"type":"step_finish","timestamp":1795788724333,"sessionID":"ses_de2a6b4bcffevE8Q96Ntx2ol96","part":{"type":"step-finish","tokens":{"total":1290,"input":1034,"output":56,"reasoning":0,"cache":{"write":0,"read":200}},"cost":0}}"#,
            &mut parsed,
        );
        assert_eq!(parsed.cost_usd, None);
        assert_eq!((parsed.input_tokens, parsed.output_tokens), (1034, 56));
        // Written: a reasoning model's step, whose reasoning OpenCode counts apart.
        OpenCode.parse_line(
            r#"{"type":"step_finish","sessionID":"ses_de2a6b4bcffevE8Q96Ntx2ol96","part":{"type":"step-finish","tokens":{"input":10,"output":5,"reasoning":7,"cache":{"read":0}},"cost":0}}"#,
            &mut parsed,
        );
        assert_eq!(parsed.output_tokens, 68);
        OpenCode.parse_line(FAILED, &mut parsed);
        assert_eq!(
            parsed.errors.trim(),
            "API key not valid. Please pass a valid API key."
        );
        assert_eq!(
            parsed.session_id.as_deref(),
            Some("ses_de2a66902ffeumv92XEWVafXu5")
        );
    }

    #[test]
    fn a_resume_adds_the_session_flag() {
        let config = CommonConfig {
            model: Some("stub/stub-model".into()),
            args: vec!["--variant".into(), "high".into()],
            ..Default::default()
        };
        let args = OpenCode.args(&config, Some("ses_1"));
        assert_eq!(
            args,
            [
                "run",
                "--format",
                "json",
                "--auto",
                "--session",
                "ses_1",
                "--model",
                "stub/stub-model",
                "--variant",
                "high"
            ]
        );
    }

    #[test]
    fn a_new_session_is_titled_so_opencode_makes_no_unmetered_title_call() {
        // opencode-ai 1.18.33 asks the model for an untitled new session's title in a call
        // its JSON events never report; a `--title` skips that call.
        let args = OpenCode.args(&CommonConfig::default(), None);
        assert_eq!(
            args,
            [
                "run",
                "--format",
                "json",
                "--auto",
                "--title",
                NEW_SESSION_TITLE
            ]
        );
        // The agent's own title wins; a resumed session has its title already.
        let own = CommonConfig {
            args: vec!["--title=Mine".into()],
            ..Default::default()
        };
        assert_eq!(
            OpenCode.args(&own, None),
            ["run", "--format", "json", "--auto", "--title=Mine"]
        );
        let resumed = OpenCode.args(&CommonConfig::default(), Some("ses_1"));
        assert!(!resumed.iter().any(|a| a == "--title"), "{resumed:?}");
    }

    #[test]
    fn its_refusal_is_recognised_without_its_colours() {
        // Captured from opencode-ai 1.18.33 `--session` with an unknown id (exit code 1).
        let mut parsed = Parsed::default();
        OpenCode.parse_stderr(
            "\x1b[91m\x1b[1mError: \x1b[0mSession not found",
            &mut parsed,
        );
        assert_eq!(parsed.errors, "Error: Session not found\n");
        assert!(refused_resume(&parsed.errors));
    }
}
