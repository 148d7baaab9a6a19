//! A wake payload too large for the environment reaches the agent through the real worker.

use serde_json::json;

use crate::worker_process::{cluster_with_worker_leases, create_agent, finished_run, start_worker};

/// Regression: a large wake payload failed the run ("Argument list too long": it
/// travelled in an environment variable). Over 16 KiB it is only in the file named by
/// `ROOST_WAKE_PAYLOAD_PATH`, and the run succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_large_wake_payload_reaches_the_agent_in_a_file() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(1, 1500).await?;
    let dir = tempfile::tempdir()?;
    let _stop = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let script =
        r#"test -z "${ROOST_WAKE_PAYLOAD_JSON+set}" && cat "$ROOST_WAKE_PAYLOAD_PATH" > got.json"#;
    let agent = create_agent(
        &c,
        "process",
        json!({ "command": "sh", "args": ["-c", script], "cwd": "." }),
    )
    .await?;
    let payload = json!({ "notes": "n".repeat(32 * 1024) });
    c.admin(c.leader().await?)
        .post(
            &format!("/api/agents/{agent}/wakeup"),
            json!({ "payload": payload }),
        )
        .await?
        .ok()?;
    let done = finished_run(&c, &agent).await?;
    assert_eq!(done["status"], "succeeded", "{done}");
    let got: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("got.json"))?)?;
    assert_eq!(got, payload);
    c.shutdown().await;
    Ok(())
}
