//! OpenAI's Responses API (`POST /v1/responses`, which Codex calls through a model provider's
//! `base_url`) and Chat Completions (`POST /v1/chat/completions`): streamed (SSE) or not.

use serde_json::{json, Value};

use super::script::{results_since_last_user, run_context, shell_tool, Reply, Turn, Usage};
use super::Answer;

fn items<'a>(body: &'a Value, key: &str) -> &'a [Value] {
    body[key].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Where a Responses request's conversation is: function call outputs after the last user
/// message (Codex sends its whole history as `input`, `store` being false).
pub(crate) fn responses_turn(body: &Value) -> Turn {
    Turn {
        tool_results: results_since_last_user(
            items(body, "input"),
            |i| i["role"] == "user" && i["type"].as_str().unwrap_or("message") == "message",
            |i| {
                usize::from(
                    i["type"]
                        .as_str()
                        .is_some_and(|t| t.ends_with("call_output")),
                )
            },
        ),
        shell: shell_tool(
            items(body, "tools")
                .iter()
                .filter_map(|t| Some((t["name"].as_str()?, &t["parameters"]))),
        ),
        exports: Vec::new(),
    }
}

/// What OpenClaw's gateway appends to every request as a user message of its own.
const OPENCLAW_CONTEXT: &str = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

/// A chat message's text: a string, or its text parts.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Where a Chat Completions request's conversation is: `tool` messages after the last user
/// message (not counting the context OpenClaw's gateway adds as one).
pub(crate) fn chat_turn(body: &Value) -> Turn {
    let messages = items(body, "messages");
    let user_texts: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .collect();
    Turn {
        tool_results: results_since_last_user(
            messages,
            |m| m["role"] == "user" && !text_of(m).starts_with(OPENCLAW_CONTEXT),
            |m| usize::from(m["role"] == "tool"),
        ),
        exports: run_context(user_texts.iter().map(String::as_str)),
        shell: shell_tool(items(body, "tools").iter().filter_map(|t| {
            let f = &t["function"];
            Some((f["name"].as_str()?, &f["parameters"]))
        })),
    }
}

fn responses_usage(usage: Usage) -> Value {
    let input = usage.input + usage.cached_input;
    json!({
        "input_tokens": input,
        "input_tokens_details": { "cached_tokens": usage.cached_input },
        "output_tokens": usage.output,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": input + usage.output,
    })
}

/// A Responses answer: one response object, or its events.
pub(crate) fn responses_answer(
    reply: &Reply,
    usage: Usage,
    model: &str,
    id: u64,
    stream: bool,
) -> Answer {
    let item = match reply {
        Reply::ToolCall { name, arguments } => json!({
            "type": "function_call",
            "id": format!("fc_{id:08}"),
            "call_id": format!("call_{id:08}"),
            "name": name,
            "arguments": arguments.to_string(),
            "status": "completed",
        }),
        Reply::Text(text) => json!({
            "type": "message",
            "id": format!("msg_{id:08}"),
            "role": "assistant",
            "status": "completed",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }],
        }),
    };
    let response = |status: &str, output: Value, usage: Value| {
        json!({
            "id": format!("resp_{id:08}"),
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": model,
            "output": output,
            "usage": usage,
        })
    };
    let done = response("completed", json!([item]), responses_usage(usage));
    if !stream {
        return Answer::json(done);
    }
    let mut events = vec![json!({
        "type": "response.created",
        "response": response("in_progress", json!([]), Value::Null),
    })];
    if let Reply::Text(text) = reply {
        let mut added = item.clone();
        added["content"] = json!([]);
        added["status"] = json!("in_progress");
        events.push(
            json!({ "type": "response.output_item.added", "output_index": 0, "item": added }),
        );
        events.push(json!({
            "type": "response.output_text.delta",
            "item_id": item["id"],
            "output_index": 0,
            "content_index": 0,
            "delta": text,
        }));
    } else {
        events
            .push(json!({ "type": "response.output_item.added", "output_index": 0, "item": item }));
    }
    events.push(json!({ "type": "response.output_item.done", "output_index": 0, "item": item }));
    events.push(json!({ "type": "response.completed", "response": done }));
    for (n, e) in events.iter_mut().enumerate() {
        e["sequence_number"] = json!(n);
    }
    Answer::sse(events.iter().map(|e| (e["type"].as_str(), e)))
}

/// A Chat Completions answer: one completion, or its chunks and `[DONE]`.
pub(crate) fn chat_answer(
    reply: &Reply,
    usage: Usage,
    model: &str,
    id: u64,
    stream: bool,
) -> Answer {
    let (message, finish) = match reply {
        Reply::ToolCall { name, arguments } => (
            json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": format!("call_{id:08}"),
                    "type": "function",
                    "function": { "name": name, "arguments": arguments.to_string() },
                }],
            }),
            "tool_calls",
        ),
        Reply::Text(text) => (json!({ "role": "assistant", "content": text }), "stop"),
    };
    let input = usage.input + usage.cached_input;
    let usage = json!({
        "prompt_tokens": input,
        "prompt_tokens_details": { "cached_tokens": usage.cached_input },
        "completion_tokens": usage.output,
        "total_tokens": input + usage.output,
    });
    let base = json!({ "id": format!("chatcmpl-{id:08}"), "created": 0, "model": model });
    let with = |object: &str, choice: Value, usage: Value| {
        let mut v = base.clone();
        v["object"] = json!(object);
        v["choices"] = json!([choice]);
        v["usage"] = usage;
        v
    };
    if !stream {
        return Answer::json(with(
            "chat.completion",
            json!({ "index": 0, "message": message, "finish_reason": finish }),
            usage,
        ));
    }
    let mut delta = message.clone();
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        calls[0]["index"] = json!(0);
    }
    let chunk = "chat.completion.chunk";
    let chunks = [
        with(
            chunk,
            json!({ "index": 0, "delta": delta, "finish_reason": null }),
            Value::Null,
        ),
        with(
            chunk,
            json!({ "index": 0, "delta": {}, "finish_reason": finish }),
            usage,
        ),
    ];
    let done = Value::String("[DONE]".into());
    Answer::sse(chunks.iter().chain([&done]).map(|c| (None, c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_codex_request_counts_function_call_outputs_after_the_last_user_message() {
        let body = json!({
            "tools": [
                { "type": "function", "name": "exec_command", "parameters": { "properties": { "cmd": { "type": "string" } } } },
                { "type": "function", "name": "write_stdin", "parameters": { "properties": { "chars": {} } } }
            ],
            "input": [
                { "type": "message", "role": "developer", "content": [] },
                { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "<environment_context>" }] },
                { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "Do it" }] },
                { "type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}" },
                { "type": "function_call_output", "call_id": "c1", "output": "ok" },
                { "type": "message", "role": "assistant", "content": [] }
            ]
        });
        let t = responses_turn(&body);
        assert_eq!(t.tool_results, 1);
        assert_eq!(t.shell.map(|s| s.name).as_deref(), Some("exec_command"));
    }

    #[test]
    fn a_chat_request_counts_tool_messages_after_the_last_user_message() {
        let body = json!({
            "tools": [{ "type": "function", "function": { "name": "bash", "parameters": { "properties": { "command": { "type": "string" } } } } }],
            "messages": [
                { "role": "system", "content": "..." },
                { "role": "user", "content": "Do it" },
                { "role": "assistant", "tool_calls": [] },
                { "role": "tool", "content": "ok" },
                { "role": "assistant", "tool_calls": [] },
                { "role": "tool", "content": "ok" }
            ]
        });
        assert_eq!(chat_turn(&body).tool_results, 2);
    }

    #[test]
    fn usage_reports_cached_input_inside_input_as_openai_does() {
        let usage = Usage {
            input: 100,
            cached_input: 20,
            output: 7,
        };
        let reply = Reply::Text("Done.".into());
        let answer = responses_answer(&reply, usage, "m", 1, false);
        let body: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(body["usage"]["input_tokens"], 120);
        assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 20);
        assert_eq!(body["output"][0]["content"][0]["text"], "Done.");
    }
}
