//! The `gemini`, `opencode` and `hermes` adapters against their fake CLIs (`tests/fake-cli`):
//! command line, prompt, session, usage, resume and its fallback, through `adapter::run`.

use roost_core::RunStatus;
use serde_json::json;

use super::{assignment, fake, read, run_to_end};

#[tokio::test]
async fn gemini_reads_its_stream_and_falls_back_from_a_refused_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment("gemini", json!({ "command": fake("gemini") }), "");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("fresh-run-1"));
    assert_eq!(out.ended.summary.as_deref(), Some("Did the work for i1."));
    assert_eq!(
        (
            out.usage.input_tokens,
            out.usage.cached_input_tokens,
            out.usage.output_tokens
        ),
        (1244, 200, 61)
    );
    assert_eq!(
        read(dir.path(), "fake-gemini.calls").trim_end(),
        "--output-format stream-json --approval-mode yolo --skip-trust --prompt"
    );
    assert!(read(dir.path(), "fake-gemini.prompts").contains("You are coder (agent a1)"));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({ "command": fake("gemini"), "env": { "FAKE_GEMINI_REFUSE_RESUME": "1" } });
    let out = run_to_end(dir.path(), &assignment("gemini", config, "s-gone")).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(out.ended.session_reset);
    assert_eq!(out.ended.session_id.as_deref(), Some("fresh-run-1"));
    let calls = read(dir.path(), "fake-gemini.calls");
    assert_eq!(calls.lines().count(), 2, "{calls}");
    assert!(calls
        .lines()
        .next()
        .unwrap_or_default()
        .contains("--resume s-gone"));
    assert!(
        out.tail.contains("Invalid session identifier"),
        "{}",
        out.tail
    );
}

#[tokio::test]
async fn opencode_sums_its_steps_and_resumes_its_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment(
        "opencode",
        json!({ "command": fake("opencode") }),
        "ses_saved",
    );
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("ses_saved"));
    assert_eq!(out.ended.summary.as_deref(), Some("Did the work for i1."));
    assert_eq!(
        (
            out.usage.input_tokens,
            out.usage.cached_input_tokens,
            out.usage.output_tokens,
            out.usage.cost_micro_usd
        ),
        (2068, 400, 112, 8_004)
    );
    assert_eq!(
        read(dir.path(), "fake-opencode.calls").trim(),
        "run --format json --auto --session ses_saved"
    );
    assert!(read(dir.path(), "fake-opencode.prompts").contains("You were woken: issue_commented."));

    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        json!({ "command": fake("opencode"), "env": { "FAKE_OPENCODE_REFUSE_RESUME": "1" } });
    let out = run_to_end(dir.path(), &assignment("opencode", config, "ses_gone")).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(out.ended.session_reset);
    assert_eq!(out.ended.session_id.as_deref(), Some("ses_fresh_run-1"));
}

#[tokio::test]
async fn hermes_gets_its_prompt_as_an_argument_and_meters_only_this_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The saved session has two runs behind it.
    std::fs::write(dir.path().join("fake-hermes-h-saved.runs"), "2").expect("seed");
    let a = assignment("hermes", json!({ "command": fake("hermes") }), "h-saved");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("h-saved"));
    assert_eq!(out.ended.summary.as_deref(), Some("Did the work for i1."));
    assert_eq!(
        (
            out.usage.input_tokens,
            out.usage.cached_input_tokens,
            out.usage.output_tokens
        ),
        (1034, 200, 56)
    );
    let calls = read(dir.path(), "fake-hermes.calls");
    assert!(
        calls.starts_with("chat -Q --source tool --yolo --accept-hooks --resume h-saved --query=You were woken: issue_commented."),
        "{calls}"
    );
    assert_eq!(read(dir.path(), "fake-hermes.exports").lines().count(), 2);

    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({ "command": fake("hermes"), "env": { "FAKE_HERMES_REFUSE_RESUME": "1" } });
    let out = run_to_end(dir.path(), &assignment("hermes", config, "h-gone")).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(out.ended.session_reset);
    assert_eq!(out.ended.session_id.as_deref(), Some("fresh-run-1"));
    assert_eq!(out.usage.input_tokens, 1034);
    assert!(read(dir.path(), "fake-hermes.calls").contains("--query=You are coder"));
}

#[tokio::test]
async fn a_failed_hermes_run_says_what_the_model_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({ "command": fake("hermes"), "env": { "FAKE_HERMES_FAIL": "1" } });
    let out = run_to_end(dir.path(), &assignment("hermes", config, "")).await;
    assert_eq!(out.ended.status, RunStatus::Failed);
    assert_eq!(
        out.ended.error,
        "exited with code 1: HTTP 400: API key not valid. Please pass a valid API key."
    );
    // The failed call's tokens are still metered.
    assert_eq!(out.usage.input_tokens, 1034);
}
