//! Anthropic's Messages API (`POST /v1/messages`, `POST /v1/messages/count_tokens`), as Claude
//! Code calls it through `ANTHROPIC_BASE_URL`: streamed (SSE) or not.

use serde_json::{json, Value};

use super::script::{results_since_last_user, shell_tool, Reply, Turn, Usage};
use super::Answer;

fn blocks(message: &Value) -> &[Value] {
    message["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn tool_results(message: &Value) -> usize {
    blocks(message)
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .count()
}

/// Where the request's conversation is.
pub(crate) fn turn(body: &Value) -> Turn {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    Turn {
        tool_results: results_since_last_user(
            messages,
            |m| m["role"] == "user" && tool_results(m) == 0,
            |m| {
                if m["role"] == "user" {
                    tool_results(m)
                } else {
                    0
                }
            },
        ),
        shell: shell_tool(
            tools
                .iter()
                .filter_map(|t| Some((t["name"].as_str()?, &t["input_schema"]))),
        ),
        exports: Vec::new(),
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.input,
        "cache_read_input_tokens": usage.cached_input,
        "cache_creation_input_tokens": 0,
        "output_tokens": usage.output,
    })
}

/// The answer, as one message or as its stream of events.
pub(crate) fn answer(reply: &Reply, usage: Usage, model: &str, id: u64, stream: bool) -> Answer {
    let (block, stop_reason) = match reply {
        Reply::ToolCall { name, arguments } => (
            json!({
                "type": "tool_use",
                "id": format!("toolu_{id:08}"),
                "name": name,
                "input": arguments,
            }),
            "tool_use",
        ),
        Reply::Text(text) => (json!({ "type": "text", "text": text }), "end_turn"),
    };
    let message = json!({
        "id": format!("msg_{id:08}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage_json(usage),
    });
    if !stream {
        return Answer::json(message);
    }
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(0);
    let (empty_block, delta) = match reply {
        Reply::ToolCall { arguments, .. } => {
            let mut b = block.clone();
            b["input"] = json!({});
            (
                b,
                json!({ "type": "input_json_delta", "partial_json": arguments.to_string() }),
            )
        }
        Reply::Text(text) => (
            json!({ "type": "text", "text": "" }),
            json!({ "type": "text_delta", "text": text }),
        ),
    };
    let events = [
        (
            "message_start",
            json!({ "type": "message_start", "message": start }),
        ),
        (
            "content_block_start",
            json!({ "type": "content_block_start", "index": 0, "content_block": empty_block }),
        ),
        (
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": delta }),
        ),
        (
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": 0 }),
        ),
        (
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": { "stop_reason": stop_reason, "stop_sequence": null },
                "usage": usage_json(usage),
            }),
        ),
        ("message_stop", json!({ "type": "message_stop" })),
    ];
    Answer::sse(events.iter().map(|(name, data)| (Some(*name), data)))
}

/// `count_tokens`: the scripted input.
pub(crate) fn count_tokens(usage: Usage) -> Answer {
    Answer::json(json!({ "input_tokens": usage.input + usage.cached_input }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claude_code_conversation_counts_tool_results_after_the_last_prompt() {
        let body = json!({
            "tools": [
                { "name": "Read", "input_schema": { "properties": { "file_path": {} } } },
                { "name": "Bash", "input_schema": { "properties": { "command": { "type": "string" } } } }
            ],
            "messages": [
                { "role": "user", "content": [{ "type": "text", "text": "<system-reminder>..." }, { "type": "text", "text": "Do it" }] },
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "t1", "name": "Bash", "input": {} }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t1", "content": "ok" }, { "type": "text", "text": "<system-reminder>" }] },
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "t2", "name": "Bash", "input": {} }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t2", "content": "ok" }] }
            ]
        });
        let t = turn(&body);
        assert_eq!(t.tool_results, 2);
        assert_eq!(t.shell.map(|s| s.name).as_deref(), Some("Bash"));
        let mut resumed = body.clone();
        resumed["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "role": "user", "content": "One more thing" }));
        assert_eq!(turn(&resumed).tool_results, 0);
    }

    #[test]
    fn a_streamed_tool_call_carries_its_input_and_the_scripted_usage() {
        let reply = Reply::ToolCall {
            name: "Bash".into(),
            arguments: json!({ "command": "ls" }),
        };
        let usage = Usage {
            input: 10,
            cached_input: 2,
            output: 3,
        };
        let answer = answer(&reply, usage, "claude-sonnet-4-5", 7, true);
        let events: Vec<Value> = answer
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            types,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(events[1]["content_block"]["name"], "Bash");
        assert_eq!(events[2]["delta"]["partial_json"], r#"{"command":"ls"}"#);
        assert_eq!(events[4]["delta"]["stop_reason"], "tool_use");
        assert_eq!(events[4]["usage"]["cache_read_input_tokens"], 2);
        let whole = answer_json(&reply, usage);
        assert_eq!(whole["content"][0]["input"]["command"], "ls");
        assert_eq!(whole["usage"]["output_tokens"], 3);
    }

    fn answer_json(reply: &Reply, usage: Usage) -> Value {
        serde_json::from_str(&answer(reply, usage, "m", 1, false).body).unwrap()
    }
}
