//! The adapters against fake CLIs (scripts in `tests/fake-cli`) and a local HTTP endpoint:
//! sessions, resume fallback, usage, logs, timeouts and stops. No cluster, no model.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use roost_core::{AdapterType, RunStatus, WakeReason};
use roost_proto::v1::{Assignment, RunUsage};
use roost_proto::ProtoEnum;
use serde_json::json;
use tokio::sync::oneshot;

use super::{run, Ended, Run, UsageCell};
use crate::config::WorkerConfig;
use crate::runlog::RunLog;

mod openclaw_gateway;
mod runtimes;

fn fake(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake-cli")
        .join(name)
        .display()
        .to_string()
}

fn assignment(adapter: &str, config: serde_json::Value, session: &str) -> Assignment {
    Assignment {
        run_id: "run-1".into(),
        agent_id: "a1".into(),
        agent_name: "coder".into(),
        issue_id: Some("i1".into()),
        wake_reason: WakeReason::IssueCommented.to_proto(),
        adapter_type: adapter
            .parse::<AdapterType>()
            .expect("an adapter type")
            .to_proto(),
        adapter_config_json: config.to_string(),
        session_id: session.into(),
        ..Default::default()
    }
}

struct Outcome {
    ended: Ended,
    usage: RunUsage,
    tail: String,
    log_bytes: u64,
}

async fn run_in(dir: &Path, a: &Assignment, stop: oneshot::Receiver<&'static str>) -> Outcome {
    // The fake CLIs write what they saw into their working directory: run them in `dir` (an
    // agent's `cwd`) instead of a per-task workspace under it (`workspace.rs`).
    let mut with_cwd = a.clone();
    let mut adapter_config: serde_json::Value =
        serde_json::from_str(&a.adapter_config_json).unwrap_or_else(|_| json!({}));
    if adapter_config.is_object() && adapter_config.get("cwd").is_none() {
        adapter_config["cwd"] = json!(dir);
        with_cwd.adapter_config_json = adapter_config.to_string();
    }
    let a = &with_cwd;
    let config = WorkerConfig {
        work_dir: dir.to_path_buf(),
        grace_sec: 1,
        // No REST API here to keep memory in.
        agent_memory: false,
        ..WorkerConfig::default()
    };
    let usage = UsageCell::default();
    let mut r = Run {
        assignment: a,
        config: &config,
        stop,
        log: RunLog::open(&config.log_dir(), &a.run_id, Box::new(|_, _| {})),
        usage: usage.clone(),
        memory: None,
        workspace: config.work_dir.clone(),
    };
    let ended = run(&mut r).await;
    let usage = usage.lock().map(|u| u.clone()).unwrap_or_default();
    Outcome {
        ended,
        usage,
        tail: r.log.tail(),
        log_bytes: r.log.bytes(),
    }
}

async fn run_to_end(dir: &Path, a: &Assignment) -> Outcome {
    let (_keep, stop) = oneshot::channel();
    run_in(dir, a, stop).await
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_default()
}

#[tokio::test]
async fn claude_reports_its_session_usage_cost_and_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment("claude", json!({ "command": fake("claude") }), "");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("fresh-run-1"));
    assert!(!out.ended.session_reset);
    assert_eq!(out.ended.summary.as_deref(), Some("Did the work for i1."));
    assert_eq!(
        (
            out.usage.input_tokens,
            out.usage.cached_input_tokens,
            out.usage.output_tokens
        ),
        (1000, 200, 50)
    );
    assert_eq!(out.usage.cost_micro_usd, 12_300);
    let calls = read(dir.path(), "fake-claude.calls");
    assert_eq!(
        calls.trim(),
        "--print --output-format stream-json --verbose --dangerously-skip-permissions"
    );
    assert!(read(dir.path(), "fake-claude.prompts").contains("You are coder (agent a1)"));
    let file = std::fs::read(dir.path().join(".roost-logs/run-1.log")).expect("log file");
    assert_eq!(file.len() as u64, out.log_bytes);
    assert!(out.tail.contains("\"type\":\"result\""));
}

#[tokio::test]
async fn claude_resumes_a_saved_session_with_only_the_wake() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment("claude", json!({ "command": fake("claude") }), "s-saved");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("s-saved"));
    assert!(read(dir.path(), "fake-claude.calls").contains("--resume s-saved"));
    let prompt = read(dir.path(), "fake-claude.prompts");
    assert!(prompt.contains("You were woken: issue_commented."));
    assert!(!prompt.contains("You are coder"), "{prompt}");
}

#[tokio::test]
async fn a_retired_session_starts_fresh_with_a_hand_off_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = assignment("claude", json!({ "command": fake("claude") }), "");
    a.session_rotated =
        "session s-old was retired: it served 20 runs (sessionRotation.maxRuns 20)".into();
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(!read(dir.path(), "fake-claude.calls").contains("--resume"));
    let prompt = read(dir.path(), "fake-claude.prompts");
    assert!(prompt.contains("You are coder"), "{prompt}");
    assert!(
        prompt.contains("your previous session on this task was retired (session s-old was retired: it served 20 runs"),
        "{prompt}"
    );
}

#[tokio::test]
async fn a_refused_resume_starts_a_fresh_session_in_the_same_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({ "command": fake("claude"), "env": { "FAKE_CLAUDE_REFUSE_RESUME": "1" } });
    let a = assignment("claude", config, "s-expired");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(out.ended.session_reset);
    assert_eq!(out.ended.session_id.as_deref(), Some("fresh-run-1"));
    let calls: Vec<String> = read(dir.path(), "fake-claude.calls")
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].contains("--resume s-expired"));
    assert!(!calls[1].contains("--resume"));
    let prompts = read(dir.path(), "fake-claude.prompts");
    let second = prompts.rsplit("=== call").next().unwrap_or_default();
    assert!(second.contains("You are coder"), "{second}");
    assert!(
        second.contains("session s-expired on this task could not be resumed"),
        "{second}"
    );
    assert!(out.tail.contains("could not be resumed"), "{}", out.tail);
}

#[tokio::test]
async fn a_failure_that_is_not_a_refused_resume_fails_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("broken-claude");
    std::fs::write(&script, "#!/bin/sh\necho 'rate limited' >&2\nexit 3\n").expect("script");
    std::process::Command::new("chmod")
        .args(["+x", &script.display().to_string()])
        .status()
        .expect("chmod");
    let a = assignment(
        "claude",
        json!({ "command": script.display().to_string() }),
        "s-1",
    );
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Failed);
    assert_eq!(out.ended.exit_code, Some(3));
    assert!(
        out.ended.error.contains("rate limited"),
        "{}",
        out.ended.error
    );
    assert!(!out.ended.session_reset);
}

#[tokio::test]
async fn codex_resumes_and_falls_back_the_same_way() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = assignment("codex", json!({ "command": fake("codex") }), "t-saved");
    let out = run_to_end(dir.path(), &ok).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.session_id.as_deref(), Some("t-saved"));
    assert_eq!(out.ended.summary.as_deref(), Some("Closed i1."));
    assert_eq!(
        (
            out.usage.input_tokens,
            out.usage.cached_input_tokens,
            out.usage.output_tokens
        ),
        (2000, 1500, 80)
    );
    let refused = assignment(
        "codex",
        json!({ "command": fake("codex"), "env": { "FAKE_CODEX_REFUSE_RESUME": "1" } }),
        "t-gone",
    );
    let out = run_to_end(dir.path(), &refused).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert!(out.ended.session_reset);
    assert_eq!(out.ended.session_id.as_deref(), Some("thread-run-1"));
}

#[tokio::test]
async fn a_timeout_stops_the_whole_process_group_even_if_it_ignores_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "trap '' TERM; (sleep 60 & echo $! > grandchild.pid; wait) ; sleep 60";
    let a = assignment(
        "process",
        json!({ "command": "sh", "args": ["-c", script], "timeoutSec": 1, "graceSec": 1 }),
        "",
    );
    let started = Instant::now();
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::TimedOut, "{:?}", out.ended);
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid = read(dir.path(), "grandchild.pid");
    assert!(
        !pid.trim().is_empty(),
        "the script never started its grandchild"
    );
    // SIGKILL is delivered asynchronously: wait, with a deadline, for it to be gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(pid.trim()) {
        assert!(Instant::now() < deadline, "grandchild {pid} survived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Regression: Claude Code runs its Bash tool in a session of its own (`setsid`), out of reach
/// of the signal to the agent's process group, and a run that timed out left the tool's
/// command running after the CLI was gone.
#[tokio::test]
async fn a_timeout_stopped_the_agent_but_left_a_tool_it_ran_in_its_own_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "setsid sh -c 'echo $$ > grandchild.pid; exec sleep 60' & sleep 60";
    let a = assignment(
        "process",
        json!({ "command": "sh", "args": ["-c", script], "timeoutSec": 1, "graceSec": 1 }),
        "",
    );
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::TimedOut, "{:?}", out.ended);
    let pid = read(dir.path(), "grandchild.pid");
    assert!(!pid.trim().is_empty(), "the tool never started");
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(pid.trim()) {
        assert!(Instant::now() < deadline, "the tool {pid} survived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is dead).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn a_stop_cancels_the_run_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment(
        "claude",
        json!({ "command": fake("claude"), "env": { "FAKE_CLAUDE_SLEEP": "60" } }),
        "",
    );
    let (stop, stopped) = oneshot::channel();
    let running = tokio::spawn({
        let dir = dir.path().to_path_buf();
        async move { run_in(&dir, &a, stopped).await }
    });
    roost_wait_for_file(&dir.path().join("fake-claude.calls")).await;
    let _ = stop.send("self_fenced");
    let out = running.await.expect("run task");
    assert_eq!(
        (out.ended.status, out.ended.error.as_str()),
        (RunStatus::Cancelled, "self_fenced")
    );
    assert_eq!(
        out.usage.input_tokens, 1000,
        "usage seen before the stop counts"
    );
}

async fn roost_wait_for_file(path: &Path) {
    wait_until(&format!("{} to appear", path.display()), || path.exists()).await;
}

/// Waits (up to 10 s) until `done` holds.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Serves one HTTP request with `reply` and hands back what it received.
async fn one_shot_server(reply: &'static str) -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/wake", listener.local_addr().expect("addr"));
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.expect("read");
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
            reply.len()
        );
        socket.write_all(response.as_bytes()).await.expect("write");
        String::from_utf8_lossy(&request).to_string()
    });
    (url, served)
}

#[tokio::test]
async fn http_posts_the_wake_and_takes_the_reply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reply = r#"{"summary":"handled by the webhook","sessionId":"w-1","usage":{"inputTokens":10,"outputTokens":5,"costUsd":0.5}}"#;
    let (url, served) = one_shot_server(reply).await;
    let a = assignment("http", json!({ "url": url }), "");
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(out.ended.summary.as_deref(), Some("handled by the webhook"));
    assert_eq!(out.ended.session_id.as_deref(), Some("w-1"));
    assert_eq!(out.usage.cost_micro_usd, 500_000);
    let request = served.await.expect("served");
    assert!(request.starts_with("POST /wake"), "{request}");
    assert!(request.contains(r#""runId":"run-1""#), "{request}");
    assert!(request.contains("ROOST_API_KEY"), "{request}");
}

#[tokio::test]
async fn an_unknown_adapter_or_bad_config_fails_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An adapter a newer cluster knows and this worker's build does not.
    let newer = Assignment {
        adapter_type: 99,
        ..assignment("process", json!({}), "")
    };
    let out = run_to_end(dir.path(), &newer).await;
    assert_eq!(out.ended.status, RunStatus::Failed);
    assert!(
        out.ended
            .error
            .contains("no such adapter: 99 is not a value of AdapterType"),
        "{}",
        out.ended.error
    );
    let out = run_to_end(
        dir.path(),
        &assignment("http", json!({ "url": "ftp://x" }), ""),
    )
    .await;
    assert_eq!(out.ended.status, RunStatus::Failed);
    let out = run_to_end(
        dir.path(),
        &assignment("claude", json!({ "timeoutSec": "soon" }), ""),
    )
    .await;
    assert_eq!(out.ended.status, RunStatus::Failed);
    assert!(
        out.ended.error.contains("adapterConfig"),
        "{}",
        out.ended.error
    );
}

#[test]
fn the_environment_carries_both_names() {
    let a = Assignment {
        run_id: "r1".into(),
        comment_ids: vec!["c1".into(), "c2".into()],
        ..Default::default()
    };
    let env: std::collections::BTreeMap<String, String> = super::environment(&a, "http://x", None)
        .into_iter()
        .collect();
    assert_eq!(env["ROOST_RUN_ID"], "r1");
    assert_eq!(env["PAPERCLIP_RUN_ID"], "r1");
    assert_eq!(env["ROOST_WAKE_COMMENT_ID"], "c2");
    assert_eq!(env["PAPERCLIP_API_URL"], "http://x");
    assert!(
        !env.contains_key("PAPERCLIP_APPROVAL_ID"),
        "no approval wake"
    );
}

/// Paperclip's skill reads an approval wake from `PAPERCLIP_APPROVAL_ID`; Roost put the
/// approval only in the payload, so that step of the skill found nothing.
#[test]
fn an_approval_wake_lacked_paperclips_approval_variables() {
    let payload = json!({
        "reason": "approval_approved", "approvalId": "ap-1", "approvalStatus": "approved",
        "issueId": "i-1", "issueIds": ["i-1", "i-2"],
    });
    let a = Assignment {
        payload_json: payload.to_string(),
        wake_reason: WakeReason::ApprovalResolved.to_proto(),
        ..Default::default()
    };
    let env: std::collections::BTreeMap<String, String> = super::environment(&a, "http://x", None)
        .into_iter()
        .collect();
    assert_eq!(env["PAPERCLIP_APPROVAL_ID"], "ap-1");
    assert_eq!(env["ROOST_APPROVAL_ID"], "ap-1");
    assert_eq!(env["PAPERCLIP_APPROVAL_STATUS"], "approved");
    assert_eq!(env["PAPERCLIP_LINKED_ISSUE_IDS"], "i-1,i-2");
    // Another wake's payload that happens to name an approval exports none.
    let other = Assignment {
        payload_json: payload.to_string(),
        wake_reason: WakeReason::OnDemand.to_proto(),
        ..Default::default()
    };
    let env: std::collections::BTreeMap<String, String> =
        super::environment(&other, "http://x", None)
            .into_iter()
            .collect();
    assert!(!env.contains_key("PAPERCLIP_APPROVAL_ID"));
}

/// A `process` agent that records what it was given of the wake payload: the file's bytes,
/// its mode, both path variables, and whether the JSON variable was set.
fn payload_reader(payload: &serde_json::Value) -> Assignment {
    let script = r#"
        cat "$ROOST_WAKE_PAYLOAD_PATH" > got-file.json
        stat -c %a "$ROOST_WAKE_PAYLOAD_PATH" > got-mode
        test "$PAPERCLIP_WAKE_PAYLOAD_PATH" = "$ROOST_WAKE_PAYLOAD_PATH"
        echo "$ROOST_WAKE_PAYLOAD_PATH" > got-path
        echo "${ROOST_WAKE_PAYLOAD_JSON+set}${PAPERCLIP_WAKE_PAYLOAD_JSON+set}" > got-env-set
        printf %s "${ROOST_WAKE_PAYLOAD_JSON-}" > got-env.json
    "#;
    Assignment {
        payload_json: payload.to_string(),
        ..assignment(
            "process",
            json!({ "command": "sh", "args": ["-c", script] }),
            "",
        )
    }
}

/// Regression: a 1 MB wake payload failed the run with "Argument list too long"
/// (it travelled in an environment variable). It now reaches the agent in a 0600 file named
/// by `ROOST_WAKE_PAYLOAD_PATH`, the JSON variables are left unset, and the file is gone
/// once the run ends.
#[tokio::test]
async fn a_1_mb_wake_payload_failed_the_run_with_argument_list_too_long() {
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = json!({ "blob": "x".repeat(1 << 20) });
    let out = run_to_end(dir.path(), &payload_reader(&payload)).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(read(dir.path(), "got-file.json"), payload.to_string());
    assert_eq!(read(dir.path(), "got-mode").trim(), "600");
    assert_eq!(
        read(dir.path(), "got-env-set").trim(),
        "",
        "a payload over 16 KiB must not be in the environment"
    );
    let path = read(dir.path(), "got-path");
    assert!(
        !Path::new(path.trim()).exists(),
        "the payload file outlived its run: {path}"
    );
}

/// A small payload keeps Paperclip's variable and is in the file too, so an agent can rely on
/// the file whatever the size.
#[tokio::test]
async fn a_small_wake_payload_is_in_the_environment_and_in_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let payload = json!({ "reason": "deploy", "n": 3 });
    let out = run_to_end(dir.path(), &payload_reader(&payload)).await;
    assert_eq!(out.ended.status, RunStatus::Succeeded, "{:?}", out.ended);
    assert_eq!(read(dir.path(), "got-file.json"), payload.to_string());
    assert_eq!(read(dir.path(), "got-env.json"), payload.to_string());
    assert_eq!(read(dir.path(), "got-env-set").trim(), "setset");
}

/// Exactly 16 KiB still goes in the environment; one byte more does not.
#[test]
fn the_environment_carries_payloads_up_to_16_kib() {
    let env_of = |len: usize| -> std::collections::BTreeMap<String, String> {
        let a = Assignment {
            run_id: "r1".into(),
            payload_json: "x".repeat(len),
            ..Default::default()
        };
        super::environment(&a, "http://x", Some(Path::new("/w/r1.json")))
            .into_iter()
            .collect()
    };
    let at_limit = env_of(16 * 1024);
    assert_eq!(at_limit["ROOST_WAKE_PAYLOAD_JSON"].len(), 16 * 1024);
    assert_eq!(at_limit["PAPERCLIP_WAKE_PAYLOAD_PATH"], "/w/r1.json");
    let over = env_of(16 * 1024 + 1);
    assert!(!over.contains_key("ROOST_WAKE_PAYLOAD_JSON"));
    assert!(!over.contains_key("PAPERCLIP_WAKE_PAYLOAD_JSON"));
    assert_eq!(over["ROOST_WAKE_PAYLOAD_PATH"], "/w/r1.json");
}
