//! Crashes and the audit chain, with real `roost dev` processes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use roost_testkit::{Http, RoostProcess};

use crate::support::*;

const START_DEADLINE: Duration = Duration::from_secs(60);

fn roost_cli(
    dir: &std::path::Path,
    process: &RoostProcess,
    args: &[&str],
) -> anyhow::Result<std::process::Output> {
    Ok(std::process::Command::new(roost_binary())
        .args(args)
        .current_dir(dir)
        .env("ROOST_SERVER", &process.base_url)
        .env("ROOST_TOKEN", &process.admin_token)
        .output()?)
}

/// kill -9 during a stream of writes: after a restart every acknowledged write is there and
/// the activity chain still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_writes_loses_no_acknowledged_write() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    let issue = admin
        .post(
            &format!("/api/companies/{}/issues", process.company_id),
            json!({ "title": "crash target" }),
        )
        .await?
        .ok()?;
    let issue_id = str_field(&issue, "id");

    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let mut writers = Vec::new();
    for writer in 0..8 {
        let (admin, issue_id, acked) = (admin.clone(), issue_id.clone(), acknowledged.clone());
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                let body = json!({ "body": format!("writer {writer} comment {n}") });
                match admin
                    .post(&format!("/api/issues/{issue_id}/comments"), body)
                    .await
                {
                    Ok(r) if r.status.as_u16() == 201 => {
                        acked
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(str_field(&r.body, "id"));
                    }
                    _ => break,
                }
            }
        }));
    }
    roost_testkit::wait_for("200 acknowledged writes", Duration::from_secs(60), || {
        let n = acknowledged.lock().unwrap_or_else(|p| p.into_inner()).len();
        async move { (n >= 200).then_some(()) }
    })
    .await?;
    process.kill_9()?;
    for w in writers {
        w.await?;
    }
    let acked = acknowledged
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();

    let process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    let comments = admin
        .get(&format!("/api/issues/{issue_id}/comments?limit=1000"))
        .await?
        .ok()?;
    let stored: BTreeSet<String> = comments
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| str_field(c, "id"))
        .collect();
    let missing: Vec<_> = acked.difference(&stored).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged comments lost: {missing:?}",
        missing.len()
    );

    let verify = roost_cli(dir.path(), &process, &["audit", "verify"])?;
    assert!(
        verify.status.success(),
        "audit verify failed: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    Ok(())
}

/// Editing a row of the activity table in the SQLite file is caught by `roost audit verify`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_reports_a_tampered_activity_row() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    for n in 0..5 {
        admin
            .post(
                &format!("/api/companies/{}/issues", process.company_id),
                json!({ "title": format!("task {n}") }),
            )
            .await?
            .ok()?;
    }
    let clean = roost_cli(dir.path(), &process, &["audit", "verify"])?;
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stdout)
    );
    process.kill_9()?;

    let db = dir.path().join("data").join("state.db");
    let url = format!("sqlite://{}", db.display());
    {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&url).await?;
        let changed = sqlx::query("UPDATE activity SET actor_id = 'mallory' WHERE seq = 4")
            .execute(&mut conn)
            .await?
            .rows_affected();
        assert_eq!(changed, 1);
        conn.close().await?;
    }

    let process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    let tampered = roost_cli(dir.path(), &process, &["audit", "verify"])?;
    let out = String::from_utf8_lossy(&tampered.stdout).to_string()
        + &String::from_utf8_lossy(&tampered.stderr);
    assert!(
        !tampered.status.success(),
        "tampering went unnoticed: {out}"
    );
    assert!(
        out.contains("entry 4"),
        "the report should name entry 4: {out}"
    );
    Ok(())
}

/// Regression: `roost dev` panicked ("failed printing to stdout: Broken pipe") and died when
/// whoever started it stopped reading its output.
#[tokio::test]
async fn roost_dev_survives_a_closed_stdout() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let free_port = roost_testkit::ports::free_port;
    let (http_port, grpc_port) = (free_port()?, free_port()?);
    let mut child = std::process::Command::new(roost_binary())
        .args(["dev", "--dir"])
        .arg(dir.path())
        .args([
            "--http-listen",
            &format!("127.0.0.1:{http_port}"),
            "--grpc-listen",
            &format!("127.0.0.1:{grpc_port}"),
        ])
        .env("ROOST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    drop(child.stdout.take());
    let http = Http::new(format!("http://127.0.0.1:{http_port}"));
    let token_file = dir.path().join("admin-token");
    let served = roost_testkit::wait_for(
        "roost dev to serve with its stdout closed",
        START_DEADLINE,
        || {
            let (http, token_file) = (http.clone(), token_file.clone());
            async move {
                let token = std::fs::read_to_string(&token_file).ok()?;
                let reply = http
                    .with_token(token.trim())
                    .get("/api/companies")
                    .await
                    .ok()?;
                reply.status.is_success().then_some(())
            }
        },
    )
    .await;
    let still_running = child.try_wait()?.is_none();
    let _ = child.kill();
    let _ = child.wait();
    served?;
    assert!(
        still_running,
        "roost dev exited after its stdout was closed"
    );
    Ok(())
}

/// Regression (roost_dev_did_not_stop_on_sigterm): `roost dev` printed "stopping..." and ran on
/// (a stream that never ended held its shutdown, then the runtime waited on a blocking task).
/// systemd, Docker and Kubernetes kill a process uncleanly after their grace (30 s on
/// Kubernetes): it must exit well within that, successfully.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_dev_stops_on_sigterm_within_the_grace_of_a_supervisor() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    // With its worker's connection open, as after any use: that stream is what held the stop.
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    crate::support::dev_worker_online(&admin).await?;
    let pid = libc::pid_t::try_from(process.pid())?;
    // SAFETY: kill(2) with our own child's pid and a valid signal has no memory effects.
    anyhow::ensure!(
        unsafe { libc::kill(pid, libc::SIGTERM) } == 0,
        "kill failed"
    );
    let process = std::sync::Arc::new(std::sync::Mutex::new(process));
    let status = roost_testkit::wait_for(
        "roost dev to exit after SIGTERM",
        std::time::Duration::from_secs(25),
        || {
            let process = process.clone();
            async move { process.lock().ok()?.exit_status().ok().flatten() }
        },
    )
    .await?;
    assert!(status.success(), "roost dev exited with {status}");
    Ok(())
}

/// `roost dev` runs a worker in-process: an agent with the `process` adapter runs on a wake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_dev_runs_process_agents_with_its_own_worker() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START_DEADLINE)?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    let adapter = json!({ "command": "sh", "args": ["-c", "echo \"$ROOST_WAKE_REASON\" > \"ran-$ROOST_RUN_ID\""], "cwd": "." });
    let agent = admin
        .post(
            &format!("/api/companies/{}/agents", process.company_id),
            json!({ "name": "local", "adapterConfig": adapter }),
        )
        .await?
        .ok()?;
    let agent_id = str_field(&agent, "id");
    admin
        .post(&format!("/api/agents/{agent_id}/wakeup"), json!({}))
        .await?
        .ok()?;
    let run = roost_testkit::wait_for("a succeeded run", START_DEADLINE, || {
        crate::support::run_in_status(&admin, &process.company_id, &agent_id, "succeeded")
    })
    .await?;
    let written = std::fs::read_to_string(dir.path().join("work").join(format!("ran-{run}")))?;
    assert_eq!(written.trim(), "on_demand");
    Ok(())
}
