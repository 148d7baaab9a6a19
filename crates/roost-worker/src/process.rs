//! The `process` adapter: runs the agent's command in its own process group, the prompt on
//! stdin and the run environment set; stops it with SIGTERM, then SIGKILL after the grace.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use roost_proto::v1::Assignment;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

use crate::config::WorkerConfig;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct ProcessConfig {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    timeout_sec: Option<u64>,
}

/// How a run ended, as reported to the cluster.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub status: &'static str,
    pub exit_code: Option<i32>,
    pub error: String,
}

fn failed(error: String) -> Ended {
    Ended {
        status: "failed",
        exit_code: None,
        error,
    }
}

/// The run environment, under Roost's names and Paperclip's, so agents written for Paperclip
/// work unchanged.
pub(crate) fn environment(a: &Assignment, api_url: &str) -> Vec<(String, String)> {
    let pairs = [
        ("API_URL", api_url.to_string()),
        ("RUN_ID", a.run_id.clone()),
        ("AGENT_ID", a.agent_id.clone()),
        ("COMPANY_ID", a.company_id.clone()),
        ("TASK_ID", a.issue_id.clone().unwrap_or_default()),
        ("WAKE_REASON", a.wake_reason.clone()),
        (
            "WAKE_COMMENT_ID",
            a.comment_ids.last().cloned().unwrap_or_default(),
        ),
        ("WAKE_PAYLOAD_JSON", a.payload_json.clone()),
        ("API_KEY", a.run_token.clone()),
    ];
    pairs
        .iter()
        .flat_map(|(k, v)| {
            [
                (format!("ROOST_{k}"), v.clone()),
                (format!("PAPERCLIP_{k}"), v.clone()),
            ]
        })
        .collect()
}

/// What the agent reads on stdin: why it was woken and what to look at.
pub(crate) fn prompt(a: &Assignment) -> String {
    let mut text = format!(
        "You are agent {} ({}). You were woken: {}.\n",
        a.agent_name, a.agent_id, a.wake_reason
    );
    if let Some(issue) = &a.issue_id {
        text.push_str(&format!(
            "Issue: {issue}. Read it with GET /api/issues/{issue}/heartbeat-context.\n"
        ));
    }
    if !a.comment_ids.is_empty() {
        text.push_str(&format!(
            "New comments, oldest first: {}.\n",
            a.comment_ids.join(", ")
        ));
    }
    text
}

fn signal_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created for the
    // agent; it touches no memory of ours.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

/// Runs the assignment to its end, or until `stop` says why it must end early.
pub(crate) async fn run(
    a: &Assignment,
    config: &WorkerConfig,
    stop: oneshot::Receiver<&'static str>,
) -> Ended {
    if a.adapter_type != "process" {
        return failed(format!("this worker has no {} adapter yet", a.adapter_type));
    }
    let adapter: ProcessConfig = match serde_json::from_str(&a.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return failed(format!("adapterConfig: {e}")),
    };
    if adapter.command.is_empty() {
        return failed("adapterConfig.command is empty".into());
    }
    let mut command = tokio::process::Command::new(&adapter.command);
    command
        .args(&adapter.args)
        .current_dir(&config.work_dir)
        .envs(environment(a, &config.api_url))
        .envs(&adapter.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start {}: {e}", adapter.command)),
    };
    let pid = child.id().unwrap_or(0);
    if let Some(mut stdin) = child.stdin.take() {
        let text = prompt(a);
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let timeout = adapter
        .timeout_sec
        .map(Duration::from_secs)
        .unwrap_or(Duration::MAX / 4);
    let why = tokio::select! {
        status = child.wait() => {
            return match status {
                Ok(s) if s.success() => Ended { status: "succeeded", exit_code: s.code(), error: String::new() },
                Ok(s) => Ended { status: "failed", exit_code: s.code(), error: format!("exited with {s}") },
                Err(e) => failed(format!("wait failed: {e}")),
            };
        }
        why = stop => why.unwrap_or("cancelled"),
        () = tokio::time::sleep(timeout) => "timed_out",
    };
    signal_group(pid, libc::SIGTERM);
    let grace = Duration::from_secs(config.grace_sec);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    let status = if why == "timed_out" {
        "timed_out"
    } else {
        "cancelled"
    };
    Ended {
        status,
        exit_code: None,
        error: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_carries_both_names() {
        let a = Assignment {
            run_id: "r1".into(),
            comment_ids: vec!["c1".into(), "c2".into()],
            ..Default::default()
        };
        let env: BTreeMap<String, String> = environment(&a, "http://x").into_iter().collect();
        assert_eq!(env["ROOST_RUN_ID"], "r1");
        assert_eq!(env["PAPERCLIP_RUN_ID"], "r1");
        assert_eq!(env["ROOST_WAKE_COMMENT_ID"], "c2");
        assert_eq!(env["PAPERCLIP_API_URL"], "http://x");
    }
}
