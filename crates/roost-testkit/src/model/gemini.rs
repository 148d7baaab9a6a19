//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent?alt=sse`, `:countTokens`), as Gemini CLI calls it through
//! `GOOGLE_GEMINI_BASE_URL`: a tool call is a `functionCall` part, its result a
//! `functionResponse` part of the next `user` content.

use serde_json::{json, Value};

use super::script::{results_since_last_user, shell_tool, Reply, Turn, Usage};
use super::Answer;

fn parts(content: &Value) -> &[Value] {
    content["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn function_responses(content: &Value) -> usize {
    parts(content)
        .iter()
        .filter(|p| p["functionResponse"].is_object())
        .count()
}

/// Where the request's conversation is: `functionResponse` parts after the last user content
/// that carries none.
pub(crate) fn turn(body: &Value) -> Turn {
    let contents = body["contents"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let declarations = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten());
    Turn {
        tool_results: results_since_last_user(
            contents,
            |c| c["role"] == "user" && function_responses(c) == 0,
            |c| {
                if c["role"] == "user" {
                    function_responses(c)
                } else {
                    0
                }
            },
        ),
        shell: shell_tool(declarations.filter_map(|d| {
            // Gemini CLI sends `parametersJsonSchema`; the API also takes `parameters`.
            let schema = if d["parametersJsonSchema"].is_object() {
                &d["parametersJsonSchema"]
            } else {
                &d["parameters"]
            };
            Some((d["name"].as_str()?, schema))
        })),
        exports: Vec::new(),
    }
}

/// The Gemini API's usage: the prompt count includes its cached part.
fn usage_json(usage: Usage) -> Value {
    let prompt = usage.input + usage.cached_input;
    json!({
        "promptTokenCount": prompt,
        "cachedContentTokenCount": usage.cached_input,
        "candidatesTokenCount": usage.output,
        "totalTokenCount": prompt + usage.output,
    })
}

/// The answer: one `GenerateContentResponse`, or (streamed) the same as the one SSE event.
pub(crate) fn answer(reply: &Reply, usage: Usage, model: &str, id: u64, stream: bool) -> Answer {
    let part = match reply {
        Reply::ToolCall { name, arguments } => json!({
            "functionCall": { "id": format!("call_{id:08}"), "name": name, "args": arguments },
        }),
        Reply::Text(text) => json!({ "text": text }),
    };
    let response = json!({
        "candidates": [{
            "content": { "role": "model", "parts": [part] },
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": usage_json(usage),
        "modelVersion": model,
        "responseId": format!("resp_{id:08}"),
    });
    if stream {
        Answer::sse([(None, &response)])
    } else {
        Answer::json(response)
    }
}

/// `countTokens`: the scripted input.
pub(crate) fn count_tokens(usage: Usage) -> Answer {
    Answer::json(json!({ "totalTokens": usage.input + usage.cached_input }))
}

/// Splits `gemini-2.5-pro:streamGenerateContent` into the model and the method.
pub(crate) fn model_and_method(segment: &str) -> Option<(&str, &str)> {
    segment.rsplit_once(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_cli_conversation_counts_function_responses_after_the_last_prompt() {
        let body = json!({
            "tools": [{ "functionDeclarations": [
                { "name": "read_file", "parametersJsonSchema": { "properties": { "path": {} } } },
                { "name": "run_shell_command", "parametersJsonSchema": { "properties": { "command": { "type": "string" }, "description": {} } } }
            ] }],
            "contents": [
                { "role": "user", "parts": [{ "text": "<session_context>" }] },
                { "role": "user", "parts": [{ "text": "Do it" }] },
                { "role": "model", "parts": [{ "functionCall": { "name": "run_shell_command", "args": {} } }] },
                { "role": "user", "parts": [{ "functionResponse": { "name": "run_shell_command", "response": { "output": "ok" } } }] },
                { "role": "model", "parts": [{ "functionCall": { "name": "run_shell_command", "args": {} } }] },
                { "role": "user", "parts": [{ "functionResponse": { "name": "run_shell_command", "response": { "output": "ok" } } }] }
            ]
        });
        let t = turn(&body);
        assert_eq!(t.tool_results, 2);
        let shell = t.shell.expect("shell tool");
        assert_eq!(shell.name, "run_shell_command");
        assert_eq!(shell.arguments("ls"), json!({ "command": "ls" }));
        let mut resumed = body.clone();
        resumed["contents"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "role": "user", "parts": [{ "text": "One more thing" }] }));
        assert_eq!(turn(&resumed).tool_results, 0);
    }

    #[test]
    fn a_streamed_function_call_carries_its_args_and_the_scripted_usage() {
        let reply = Reply::ToolCall {
            name: "run_shell_command".into(),
            arguments: json!({ "command": "ls" }),
        };
        let usage = Usage {
            input: 10,
            cached_input: 2,
            output: 3,
        };
        let answer = answer(&reply, usage, "gemini-2.5-pro", 7, true);
        assert_eq!(answer.content_type, "text/event-stream");
        let events: Vec<Value> = answer
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(events.len(), 1);
        let call = &events[0]["candidates"][0]["content"]["parts"][0]["functionCall"];
        assert_eq!(call["name"], "run_shell_command");
        assert_eq!(call["args"]["command"], "ls");
        let meta = &events[0]["usageMetadata"];
        assert_eq!(
            (
                &meta["promptTokenCount"],
                &meta["cachedContentTokenCount"],
                &meta["candidatesTokenCount"]
            ),
            (&json!(12), &json!(2), &json!(3))
        );
        let text = answer_json(&Reply::Text("Done.".into()), usage);
        assert_eq!(
            text["candidates"][0]["content"]["parts"][0]["text"],
            "Done."
        );
        assert_eq!(
            model_and_method("gemini-2.5-pro:streamGenerateContent"),
            Some(("gemini-2.5-pro", "streamGenerateContent"))
        );
    }

    fn answer_json(reply: &Reply, usage: Usage) -> Value {
        serde_json::from_str(&answer(reply, usage, "m", 1, false).body).unwrap()
    }
}
