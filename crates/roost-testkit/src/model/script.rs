//! The script's logic, without IO: which step a request is at, which shell tool it offers, and
//! what the answer is. Each wire format (`anthropic.rs`, `openai.rs`) reads its request into a
//! [`Turn`] and writes the [`Reply`] back in its own shape; a new API (Gemini's
//! `generateContent`) adds one such module and its routes, nothing here.

use serde_json::{json, Value};

/// One step of a script: what the model answers at that point of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call of the shell tool the request offers, running this command line.
    Shell(String),
    /// A final answer: the CLI's turn ends with this text.
    Text(String),
}

impl Step {
    pub fn shell(command: impl Into<String>) -> Step {
        Step::Shell(command.into())
    }

    pub fn text(text: impl Into<String>) -> Step {
        Step::Text(text.into())
    }
}

/// Tokens every response reports, whatever it says: tests compute exact costs from them.
/// `input` excludes `cached_input` (Anthropic's `input_tokens`); OpenAI's wire formats report
/// `input + cached_input` as their input with `cached_input` as its cached part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

/// A shell tool as a request offers it: its name and how its arguments carry a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellTool {
    pub name: String,
    pub shape: ArgShape,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgShape {
    /// `{"command": "..."}`: Claude Code's `Bash`, Gemini CLI's `run_shell_command`, OpenCode's
    /// `bash`, Hermes' `terminal`.
    Command,
    /// `{"cmd": "...", "yield_time_ms": 30000}`: Codex's `exec_command` (unified exec), told
    /// to wait for the command as long as it can (30 s) before it answers that the command is
    /// still running.
    Cmd,
    /// `{"command": ["bash", "-lc", "..."]}`: Codex's older `shell` tool.
    Argv,
    /// `{"command": "...", "yieldMs": 120000}`: OpenClaw's `exec`, told to wait for the command
    /// (by default it moves a command still running after 10 s to the background and answers).
    Exec,
}

impl ShellTool {
    /// The tool call's arguments for `command`.
    pub fn arguments(&self, command: &str) -> Value {
        match self.shape {
            ArgShape::Command => json!({ "command": command }),
            ArgShape::Cmd => json!({ "cmd": command, "yield_time_ms": 30000 }),
            ArgShape::Argv => json!({ "command": ["bash", "-lc", command] }),
            ArgShape::Exec => json!({ "command": command, "yieldMs": 120000 }),
        }
    }
}

/// Picks the shell tool among `(name, JSON schema of its arguments)`: the known names first,
/// then any tool whose schema has a `cmd` or `command` property.
pub fn shell_tool<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Option<ShellTool> {
    let tools: Vec<(&str, &Value)> = tools.into_iter().collect();
    let shape_of = |schema: &Value| {
        let props = &schema["properties"];
        if props["cmd"].is_object() {
            Some(ArgShape::Cmd)
        } else if props["yieldMs"].is_object() {
            Some(ArgShape::Exec)
        } else if props["command"]["type"] == "array" {
            Some(ArgShape::Argv)
        } else if props["command"].is_object() {
            Some(ArgShape::Command)
        } else {
            None
        }
    };
    let known = [
        "Bash",
        "exec_command",
        "shell",
        "run_shell_command",
        "bash",
        "terminal",
        "exec",
    ];
    let found = known
        .iter()
        .find_map(|k| tools.iter().find(|(name, _)| name == k))
        .or_else(|| tools.iter().find(|(_, schema)| shape_of(schema).is_some()))?;
    Some(ShellTool {
        name: found.0.to_string(),
        shape: shape_of(found.1).unwrap_or(ArgShape::Command),
    })
}

/// What a request says about where its conversation is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Turn {
    /// Tool results after the last real user message: the step to answer.
    pub tool_results: usize,
    pub shell: Option<ShellTool>,
    /// Variables the conversation hands the model as `PAPERCLIP_NAME=value` lines (a runtime
    /// whose commands do not get the run's environment, OpenClaw's gateway, puts them in the
    /// message): exported before each command, as a model reading them would.
    pub exports: Vec<(String, String)>,
}

/// What to answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    ToolCall { name: String, arguments: Value },
    Text(String),
}

/// The text answered past the script's end, or for a shell step when no shell tool is offered.
pub const NOTHING_MORE: &str = "Nothing more to do.";

/// The answer to `turn`: step number `turn.tool_results` of `script`.
pub fn reply(script: &[Step], turn: &Turn) -> Reply {
    match (script.get(turn.tool_results), &turn.shell) {
        (Some(Step::Shell(command)), Some(tool)) => {
            let exports: String = turn
                .exports
                .iter()
                .map(|(name, value)| format!("export {name}='{value}'; "))
                .collect();
            Reply::ToolCall {
                name: tool.name.clone(),
                arguments: tool.arguments(&format!("{exports}{command}")),
            }
        }
        (Some(Step::Text(text)), _) => Reply::Text(text.clone()),
        _ => Reply::Text(NOTHING_MORE.into()),
    }
}

/// The `PAPERCLIP_NAME=value` lines of `texts`, the last mention of each name kept (a resumed
/// session's new message names the new run).
pub fn run_context<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for line in texts.into_iter().flat_map(str::lines) {
        let Some((name, value)) = line.trim().split_once('=') else {
            continue;
        };
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_.:/@".contains(c);
        if name.starts_with("PAPERCLIP_")
            && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            && !value.is_empty()
            && value.chars().all(plain)
        {
            found.retain(|(n, _)| n != name);
            found.push((name.to_string(), value.to_string()));
        }
    }
    found
}

/// Counts the items after the last one that `is_user` calls a real user message for which
/// `is_result` holds; `items` in conversation order.
pub fn results_since_last_user<T>(
    items: &[T],
    is_user: impl Fn(&T) -> bool,
    results: impl Fn(&T) -> usize,
) -> usize {
    let start = items.iter().rposition(&is_user).map(|i| i + 1).unwrap_or(0);
    items[start..].iter().map(results).sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_context_in_the_prompt_is_exported_before_each_command() {
        let exports = run_context([
            "Run context.\nPAPERCLIP_RUN_ID=r-1\nPAPERCLIP_API_URL=http://127.0.0.1:8/x\n",
            "PAPERCLIP_RUN_ID=later\nPAPERCLIP_NOTE=two words\nNOT_OURS=x",
        ]);
        assert_eq!(
            exports,
            [
                (
                    "PAPERCLIP_API_URL".to_string(),
                    "http://127.0.0.1:8/x".to_string()
                ),
                ("PAPERCLIP_RUN_ID".to_string(), "later".to_string()),
            ]
        );
        let exec = shell_tool([(
            "exec",
            &json!({"properties": {"command": {"type": "string"}, "yieldMs": {"type": "number"}}}),
        )]);
        let turn = Turn {
            tool_results: 0,
            shell: exec,
            exports,
        };
        let Reply::ToolCall { name, arguments } = reply(&[Step::shell("echo hi")], &turn) else {
            panic!("no tool call")
        };
        assert_eq!(name, "exec");
        assert_eq!(
            arguments,
            json!({
                "command": "export PAPERCLIP_API_URL='http://127.0.0.1:8/x'; export PAPERCLIP_RUN_ID='later'; echo hi",
                "yieldMs": 120000,
            })
        );
    }

    use super::*;

    fn script() -> Vec<Step> {
        vec![
            Step::shell("echo one"),
            Step::shell("echo two"),
            Step::text("Done."),
        ]
    }

    #[test]
    fn each_tool_result_moves_the_script_one_step() {
        let bash = shell_tool([(
            "Bash",
            &json!({"properties": {"command": {"type": "string"}}}),
        )]);
        let at = |n| {
            reply(
                &script(),
                &Turn {
                    tool_results: n,
                    shell: bash.clone(),
                    exports: Vec::new(),
                },
            )
        };
        assert_eq!(
            at(0),
            Reply::ToolCall {
                name: "Bash".into(),
                arguments: json!({"command": "echo one"})
            }
        );
        assert_eq!(
            at(1),
            Reply::ToolCall {
                name: "Bash".into(),
                arguments: json!({"command": "echo two"})
            }
        );
        assert_eq!(at(2), Reply::Text("Done.".into()));
        assert_eq!(at(7), Reply::Text(NOTHING_MORE.into()));
    }

    #[test]
    fn a_shell_step_without_a_shell_tool_is_answered_with_text() {
        let turn = Turn::default();
        assert_eq!(reply(&script(), &turn), Reply::Text(NOTHING_MORE.into()));
    }

    #[test]
    fn the_shell_tool_is_found_by_name_then_by_schema_with_its_argument_shape() {
        let string = json!({"properties": {"command": {"type": "string"}}});
        let cmd = json!({"properties": {"cmd": {"type": "string"}, "workdir": {}}});
        let argv = json!({"properties": {"command": {"type": "array"}}});
        let none = json!({"properties": {"path": {"type": "string"}}});
        let codex = shell_tool([("write_stdin", &none), ("exec_command", &cmd)]).unwrap();
        assert_eq!(
            codex.arguments("ls"),
            json!({"cmd": "ls", "yield_time_ms": 30000})
        );
        let old = shell_tool([("shell", &argv)]).unwrap();
        assert_eq!(
            old.arguments("ls"),
            json!({"command": ["bash", "-lc", "ls"]})
        );
        let other = shell_tool([("Read", &none), ("terminal", &string)]).unwrap();
        assert_eq!(other.name, "terminal");
        assert_eq!(other.arguments("ls"), json!({"command": "ls"}));
        assert_eq!(shell_tool([("Read", &none)]), None);
    }

    #[test]
    fn results_are_counted_after_the_last_real_user_message_only() {
        // (is a real user message, tool results it carries)
        let fresh = [(true, 0), (false, 0), (false, 1), (false, 0), (false, 1)];
        let count = |items: &[(bool, usize)]| {
            results_since_last_user(items, |(user, _)| *user, |(_, n)| *n)
        };
        assert_eq!(count(&fresh), 2);
        // A resumed session: the old history, then a new user message.
        let mut resumed = fresh.to_vec();
        resumed.push((true, 0));
        assert_eq!(count(&resumed), 0);
        resumed.push((false, 1));
        assert_eq!(count(&resumed), 1);
        assert_eq!(count(&[]), 0);
    }
}
