//! The real worker (`roost-worker`, the `process` adapter) against a 3-node cluster.

use std::time::Duration;

use serde_json::{json, Value};

use roost_server::workers::WorkerConfig as LeaseConfig;
use roost_testkit::{test_timing, wait_for, TestCluster};
use roost_worker::WorkerConfig;

use crate::support::str_field;

const WAIT: Duration = Duration::from_secs(30);

async fn setup(
    c: &TestCluster,
    dir: &std::path::Path,
    script: &str,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let stop = start_worker(c, dir, c.grpc_addrs(), None).await?;
    // In the worker's own directory, where the tests look for what the scripts write.
    let adapter = json!({ "command": "sh", "args": ["-c", script], "cwd": "." });
    let agent = create_agent(c, "process", adapter).await?;
    Ok((agent, stop))
}

/// Runs the real worker in this process against `servers`, agents working in `dir` and calling
/// `api_url` (default: the leader's), until the returned sender is dropped or fires.
pub(crate) async fn start_worker(
    c: &TestCluster,
    dir: &std::path::Path,
    servers: Vec<String>,
    api_url: Option<String>,
) -> anyhow::Result<tokio::sync::oneshot::Sender<()>> {
    start_named_worker(c, "proc-worker", dir, servers, api_url).await
}

/// [`start_worker`] with the worker's id.
pub(crate) async fn start_named_worker(
    c: &TestCluster,
    worker_id: &str,
    dir: &std::path::Path,
    servers: Vec<String>,
    api_url: Option<String>,
) -> anyhow::Result<tokio::sync::oneshot::Sender<()>> {
    let leader = c.leader().await?;
    let admin = c.admin(leader);
    let token = str_field(
        &admin
            .post("/api/workers/join-tokens", json!({}))
            .await?
            .ok()?,
        "token",
    );
    let config = WorkerConfig {
        worker_id: worker_id.into(),
        servers,
        api_url: api_url.unwrap_or_else(|| admin.base().to_string()),
        join_token: token,
        work_dir: dir.to_path_buf(),
        grace_sec: 1,
        ..WorkerConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(roost_worker::run(config, async move {
        let _ = stopped.await;
    }));
    Ok(stop)
}

/// An agent of the test company with this adapter; returns its id.
pub(crate) async fn create_agent(
    c: &TestCluster,
    adapter_type: &str,
    adapter_config: Value,
) -> anyhow::Result<String> {
    let leader = c.leader().await?;
    let body = json!({ "name": format!("{adapter_type}-agent"), "adapterType": adapter_type, "adapterConfig": adapter_config });
    let agent = c
        .admin(leader)
        .post(&format!("/api/companies/{}/agents", c.company_id), body)
        .await?
        .ok()?;
    Ok(str_field(&agent, "id"))
}

pub(crate) async fn runs(c: &TestCluster, agent: &str) -> anyhow::Result<Vec<Value>> {
    let leader = c.leader().await?;
    let list = c
        .admin(leader)
        .get(&format!(
            "/api/companies/{}/heartbeat-runs?agentId={agent}",
            c.company_id
        ))
        .await?
        .ok()?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// A cluster of `nodes` whose workers renew their leases every 200 ms and hold leases for `lease_ttl_ms`.
pub(crate) async fn cluster_with_worker_leases(
    nodes: usize,
    lease_ttl_ms: u64,
) -> anyhow::Result<TestCluster> {
    TestCluster::start_with_workers(
        nodes,
        test_timing(),
        LeaseConfig {
            renew_interval_ms: 200,
            lease_ttl_ms,
            ..LeaseConfig::default()
        },
    )
    .await
}

/// Waits until node `via` no longer sees worker `worker_id` online (its lease lost).
pub(crate) async fn worker_gone(c: &TestCluster, via: u64, worker_id: &str) -> anyhow::Result<()> {
    wait_for("the worker to be lost", WAIT, || async {
        let workers = c.admin(via).get("/api/workers").await.ok()?.ok().ok()?;
        let w = workers
            .as_array()?
            .iter()
            .find(|w| w["id"] == worker_id)?
            .clone();
        (w["status"] != "online").then_some(())
    })
    .await
}

/// Waits for a run of `agent` that is no longer queued, assigned or running; returns it.
pub(crate) async fn finished_run(c: &TestCluster, agent: &str) -> anyhow::Result<Value> {
    finished_run_besides(c, agent, &[]).await
}

/// [`finished_run`], for a run not in `before`.
pub(crate) async fn finished_run_besides(
    c: &TestCluster,
    agent: &str,
    before: &[String],
) -> anyhow::Result<Value> {
    wait_for("a finished run", WAIT, || async {
        runs(c, agent).await.ok()?.into_iter().find(|r| {
            !before.contains(&str_field(r, "id"))
                && !["queued", "assigned", "running"].contains(&r["status"].as_str().unwrap_or(""))
        })
    })
    .await
}

/// Wakes `agent` on demand through node `via` and waits for a run not in `before` to finish.
pub(crate) async fn wake_and_wait_finished(
    c: &TestCluster,
    via: u64,
    agent: &str,
    before: &[String],
) -> anyhow::Result<Value> {
    c.admin(via)
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    finished_run_besides(c, agent, before).await
}

/// Wakes `agent` (through node 1) and waits for its run to be running; returns the run id.
pub(crate) async fn wake_and_wait_running(c: &TestCluster, agent: &str) -> anyhow::Result<String> {
    c.admin(1)
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    wait_for("a running run", WAIT, || async {
        runs(c, agent)
            .await
            .ok()?
            .into_iter()
            .find(|r| r["status"] == "running")
            .map(|r| str_field(&r, "id"))
    })
    .await
}

fn pid_alive(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid.trim()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The worker runs the agent's command with the run environment under both names and reports
/// its success.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_process_adapter_runs_the_agent_with_its_environment() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(3, 1500).await?;
    let dir = tempfile::tempdir()?;
    let script = r#"test -n "$ROOST_RUN_ID" && test "$PAPERCLIP_RUN_ID" = "$ROOST_RUN_ID" && cat > prompt.txt"#;
    let (agent, _stop) = setup(&c, dir.path(), script).await?;
    c.admin(1)
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    let done = finished_run(&c, &agent).await?;
    assert_eq!(done["status"], "succeeded", "{done}");
    let prompt = std::fs::read_to_string(dir.path().join("prompt.txt"))?;
    assert!(prompt.contains("on_demand"), "{prompt}");
    c.shutdown().await;
    Ok(())
}

/// Cancelling a run stops the agent's whole process group; a worker cut off from the cluster
/// stops its agents itself, before its lease could be declared lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_and_self_fencing_stop_the_agent_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster_with_worker_leases(3, 2000).await?;
    let dir = tempfile::tempdir()?;
    let script = r#"echo $$ > "pid-$ROOST_RUN_ID"; exec sleep 60"#;
    let (agent, _stop) = setup(&c, dir.path(), script).await?;
    // Only a whole line: the shell creates the file before `echo` writes to it.
    let pid_of = |run: &str| {
        std::fs::read_to_string(dir.path().join(format!("pid-{run}")))
            .ok()
            .filter(|p| p.ends_with('\n'))
    };

    let run = wake_and_wait_running(&c, &agent).await?;
    let pid = wait_for("the agent's pid", WAIT, || async { pid_of(&run) }).await?;
    assert!(pid_alive(&pid));
    c.admin(2)
        .post(&format!("/api/heartbeat-runs/{run}/cancel"), json!({}))
        .await?
        .ok()?;
    wait_for("the cancelled agent to be gone", WAIT, || async {
        (!pid_alive(&pid)).then_some(())
    })
    .await?;

    let second = wake_and_wait_running(&c, &agent).await?;
    let pid = wait_for("the second agent's pid", WAIT, || async { pid_of(&second) }).await?;
    // Cut the worker off: every node stops.
    let cut_at = std::time::Instant::now();
    for id in c.ids() {
        c.kill(id).await;
    }
    let gone = wait_for("the agent to stop itself", WAIT, || async {
        (!pid_alive(&pid)).then(|| cut_at.elapsed())
    })
    .await?;
    assert!(
        gone < Duration::from_millis(2000),
        "the agent ran {gone:?} after the cut, past the 2 s lease"
    );
    Ok(())
}

/// The agent's `ROOST_API_KEY` is a run-scoped key: it acts as the agent for its run (writes are
/// fenced on that run), and stops working when the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_run_scoped_key_works_during_the_run_and_dies_with_it() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(3, 1500).await?;
    let dir = tempfile::tempdir()?;
    let script = r#"echo "$ROOST_API_KEY" > "key-$ROOST_RUN_ID"; exec sleep 60"#;
    let (agent, _stop) = setup(&c, dir.path(), script).await?;
    let leader = c.leader().await?;
    let issue = c
        .admin(leader)
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            json!({ "title": "t" }),
        )
        .await?
        .ok()?;
    let issue = str_field(&issue, "id");
    let run = wake_and_wait_running(&c, &agent).await?;
    // The shell creates the file before `echo` writes to it: wait for the whole line, or an
    // empty read wins the race (seen once under load).
    let key = wait_for("the agent's key", WAIT, || async {
        std::fs::read_to_string(dir.path().join(format!("key-{run}")))
            .ok()
            .filter(|k| k.ends_with('\n'))
    })
    .await?;
    let key = key.trim().to_string();
    assert!(key.starts_with("rst_run_"), "{key}");
    let as_agent = c.http(2).with_token(&key);
    let me = as_agent.get("/api/agents/me").await?.ok()?;
    assert_eq!(me["id"], json!(agent));
    let comment = as_agent
        .post(
            &format!("/api/issues/{issue}/comments"),
            json!({ "body": "from the run" }),
        )
        .await?
        .ok()?;
    assert_eq!(comment["createdByRunId"], json!(run));
    c.admin(3)
        .post(&format!("/api/heartbeat-runs/{run}/cancel"), json!({}))
        .await?
        .ok()?;
    // Node 2 refuses the key once it has applied the cancel that node 3 acknowledged (a token
    // a node finds valid is accepted without a read barrier: ARCHITECTURE.md, Authorization).
    let dead = wait_for("node 2 to refuse the dead run's key", WAIT, || async {
        let reply = as_agent.get("/api/agents/me").await.ok()?;
        (!reply.status.is_success()).then_some(reply)
    })
    .await?;
    assert_eq!(
        (dead.status.as_u16(), dead.code()),
        (401, "unauthorized"),
        "{}",
        dead.body
    );
    c.shutdown().await;
    Ok(())
}

/// A secret `env` value reaches the agent's process, also after an operator edited the
/// configuration read back from the API (which shows no secret), and the run's log stays
/// private on the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_secret_env_value_reaches_the_agent_but_no_api() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(1, 1500).await?;
    let dir = tempfile::tempdir()?;
    let _stop = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let secret = "sk-worker-only-4242";
    let config = json!({
        "command": "sh",
        "args": ["-c", "exit 3"],
        "env": {
            "OPENAI_API_KEY": { "type": "secret", "value": secret },
            "REGION": { "type": "plain", "value": "eu" },
        },
    });
    let agent = create_agent(&c, "process", config).await?;
    let admin = c.admin(c.leader().await?);
    let shown = admin.get(&format!("/api/agents/{agent}")).await?.ok()?;
    assert!(!shown.to_string().contains(secret), "{shown}");

    // The operator fixes the command in the configuration it read, secret marker and all.
    // The check names the secret in two halves, so the configuration does not hold it whole.
    let mut edited = shown["adapterConfig"].clone();
    edited["args"] = json!([
        "-c",
        r#"test "${OPENAI_API_KEY#sk-worker-only-}" = 4242 && test "$REGION" = eu"#
    ]);
    let patched = admin
        .patch(
            &format!("/api/agents/{agent}"),
            json!({ "adapterConfig": edited }),
        )
        .await?
        .ok()?;
    assert!(!patched.to_string().contains(secret), "{patched}");
    admin
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    let done = finished_run(&c, &agent).await?;
    assert_eq!(done["status"], "succeeded", "{done}");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let logs = dir.path().join(".roost-logs");
        let mode = |p: &std::path::Path| -> anyhow::Result<u32> {
            Ok(std::fs::metadata(p)?.permissions().mode() & 0o777)
        };
        assert_eq!(mode(&logs)?, 0o700);
        assert_eq!(
            mode(&logs.join(format!("{}.log", str_field(&done, "id"))))?,
            0o600
        );
    }
    c.shutdown().await;
    Ok(())
}
