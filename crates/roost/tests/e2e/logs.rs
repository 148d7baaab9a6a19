//! What `roost` writes to a log file: plain text (a file or a journal is not a terminal, and
//! colour codes made such logs unreadable), or one JSON object per line with
//! `ROOST_LOG_FORMAT=json`.

use std::process::{Command, Stdio};
use std::time::Duration;

use roost_testkit::wait_for;

use crate::support::roost_binary;

/// Starts `roost dev` with stderr to a file and `env`, waits until it serves, and returns the
/// file's text.
async fn dev_log(env: &[(&str, &str)]) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("roost.log");
    let mut command = Command::new(roost_binary());
    command
        .args(["dev", "--dir"])
        .arg(dir.path().join(".roost"))
        .args([
            "--http-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
        ])
        .env("ROOST_LOG", "info")
        .env_remove("NO_COLOR")
        .env_remove("ROOST_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn()?;
    let text = wait_for(
        "roost dev to log that it serves",
        Duration::from_secs(60),
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .ok()
                    .filter(|t| t.contains("node serving"))
            }
        },
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    text
}

#[tokio::test]
async fn a_log_file_holds_no_colour_codes() -> anyhow::Result<()> {
    let text = dev_log(&[]).await?;
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file:\n{text}"
    );
    assert!(text.contains(" INFO "), "{text}");
    Ok(())
}

#[tokio::test]
async fn roost_log_format_json_writes_one_object_per_line() -> anyhow::Result<()> {
    let text = dev_log(&[("ROOST_LOG_FORMAT", "json")]).await?;
    let mut serving = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("not a JSON line ({e}): {line}"))?;
        assert!(
            entry["level"].is_string() && entry["timestamp"].is_string(),
            "{line}"
        );
        serving |= entry["fields"]["message"] == "node serving";
    }
    assert!(serving, "no `node serving` entry:\n{text}");
    Ok(())
}
