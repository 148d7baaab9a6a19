//! A worker cut off from the cluster (a TCP proxy between them is cut) stops its agent before
//! the cluster declares its lease lost, and nothing from it lands after the heal.

use std::time::Duration;

use serde_json::{json, Value};

use roost_server::workers::WorkerConfig as LeaseConfig;
use roost_testkit::{test_timing, wait_for, CutProxy, Http, TestCluster};

use crate::support::str_field;
use crate::worker_process::{create_agent, runs, start_worker};

const WAIT: Duration = Duration::from_secs(30);
const LEASE: Duration = Duration::from_millis(2000);

/// The agent: comments every 100 ms until stopped, and records when it got SIGTERM.
fn agent_script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agents/keep-writing.sh").to_string()
}

/// Milliseconds since the epoch of an API timestamp (RFC 3339).
fn millis(v: &Value) -> i64 {
    v.as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis())
        .unwrap_or(i64::MAX)
}

/// An agent of the keep-writing script, its issue, and the run that is writing comments on it.
struct Writing {
    agent: String,
    issue: String,
    run: String,
}

/// Creates the keep-writing agent and an issue assigned to it; returns once its run writes.
async fn agent_writing(c: &TestCluster, admin: &Http) -> anyhow::Result<Writing> {
    let agent = create_agent(
        c,
        "process",
        json!({ "command": "sh", "args": [agent_script()], "cwd": "." }),
    )
    .await?;
    let issue = admin
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            json!({ "title": "keep writing", "status": "todo", "assigneeAgentId": agent }),
        )
        .await?
        .ok()?;
    let issue = str_field(&issue, "id");
    let run = wait_for("the agent to be writing", WAIT, || async {
        let comments = admin
            .get(&format!("/api/issues/{issue}/comments"))
            .await
            .ok()?
            .ok()
            .ok()?;
        comments.as_array()?.first()?["createdByRunId"]
            .as_str()
            .map(String::from)
    })
    .await?;
    Ok(Writing { agent, issue, run })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_worker_stops_its_agent_before_the_cluster_declares_it_lost() -> anyhow::Result<()>
{
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start_with_workers(
        3,
        test_timing(),
        LeaseConfig {
            renew_interval_ms: 200,
            lease_ttl_ms: LEASE.as_millis() as u64,
            ..LeaseConfig::default()
        },
    )
    .await?;
    let leader = c.leader().await?;
    // Everything between the worker's machine and the cluster goes through these two proxies:
    // the worker's connection and its agents' API calls.
    let grpc = CutProxy::start(&c.grpc_addr(leader)).await?;
    let api = CutProxy::start(c.admin(leader).base().trim_start_matches("http://")).await?;
    let dir = tempfile::tempdir()?;
    let _worker = start_worker(
        &c,
        dir.path(),
        vec![grpc.addr()],
        Some(format!("http://{}", api.addr())),
    )
    .await?;
    let admin = c.admin(leader);
    let Writing { agent, issue, run } = agent_writing(&c, &admin).await?;

    let cut_at = tokio::time::Instant::now();
    grpc.cut();
    api.cut();
    let lost = wait_for("the run to be declared lost", WAIT, || async {
        let r = admin
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        (r["status"] == "lost").then_some(r)
    })
    .await?;
    let lost_at = millis(&lost["finishedAt"]);
    let stopped_at: i64 = std::fs::read_to_string(dir.path().join(format!("stopped-{run}")))?
        .trim()
        .parse()?;
    assert!(
        stopped_at < lost_at,
        "the agent stopped at {stopped_at}, after the cluster declared the run lost at {lost_at}"
    );
    println!(
        "agent stopped {} ms before the cluster declared its run lost",
        lost_at - stopped_at
    );

    // Three lease lengths cut off (the scenario's length, not a wait for state), then heal.
    tokio::time::sleep_until(cut_at + 3 * LEASE).await;
    grpc.heal();
    api.heal();
    // The worker registers again and takes work: the lost run's retry runs and succeeds.
    let retry = wait_for("the retry to succeed after the heal", WAIT, || async {
        runs(&c, &agent)
            .await
            .ok()?
            .into_iter()
            .find(|r| r["retryOfRunId"] == json!(run) && r["status"] == "succeeded")
    })
    .await?;
    assert_eq!(retry["workerId"], json!("proc-worker"));
    let dead = admin
        .get(&format!("/api/heartbeat-runs/{run}"))
        .await?
        .ok()?;
    assert_eq!(
        dead["status"], "lost",
        "the worker's late report changed nothing: {dead}"
    );
    let comments = admin
        .get(&format!("/api/issues/{issue}/comments?limit=1000"))
        .await?
        .ok()?;
    let late: Vec<&Value> = comments
        .as_array()
        .into_iter()
        .flatten()
        .filter(|cm| cm["createdByRunId"] == json!(run) && millis(&cm["createdAt"]) >= stopped_at)
        .collect();
    assert!(late.is_empty(), "writes of the dead run landed: {late:?}");
    c.shutdown().await;
    Ok(())
}

/// Regression: a worker whose server fell silent (a partition that drops packets: nothing
/// closes, nothing answers) waited on that connection for good. It stopped its agent a little
/// into its lease and lost its run, though the leader was reachable another way. It now gives
/// up a silent server after two renewal intervals and dials the next one, so its agent keeps
/// working through a lease and more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_whose_server_falls_silent_dials_another_and_keeps_its_run() -> anyhow::Result<()>
{
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    // A lease long enough that a busy test machine's pauses do not make the worker fence itself
    // (at 0.6 of it) before it has dialed again, a silence of two renewals after the freeze: at
    // two base leases (self-fence 2.4 s after the last renewal), one of five full-suite runs
    // lost the run on this 2-core machine while the test passed alone in 8 s.
    let lease = 3 * LEASE;
    let c = TestCluster::start_with_workers(
        3,
        test_timing(),
        LeaseConfig {
            renew_interval_ms: 200,
            lease_ttl_ms: lease.as_millis() as u64,
            ..LeaseConfig::default()
        },
    )
    .await?;
    let leader = c.leader().await?;
    // The worker dials the leader through the proxy first; the other nodes directly (they relay
    // it to the leader's peer listener, which the proxy does not cut).
    let grpc = CutProxy::start(&c.grpc_addr(leader)).await?;
    let mut servers = vec![grpc.addr()];
    servers.extend(
        c.ids()
            .into_iter()
            .filter(|id| *id != leader)
            .map(|id| c.grpc_addr(id)),
    );
    let dir = tempfile::tempdir()?;
    let _worker = start_worker(&c, dir.path(), servers, None).await?;
    let admin = c.admin(leader);
    let Writing { issue, run, .. } = agent_writing(&c, &admin).await?;
    let comments = || async {
        admin
            .get(&format!("/api/issues/{issue}/comments?limit=1000"))
            .await
            .ok()?
            .ok()
            .ok()
    };

    let frozen_at = chrono::Utc::now().timestamp_millis();
    grpc.freeze();
    // Without a new connection the agent stops 0.6 of a lease in and the run is lost at the
    // lease's end; with one it is still writing two leases after the freeze.
    let later = frozen_at + 2 * lease.as_millis() as i64;
    wait_for("the agent still writing two leases on", WAIT, || async {
        let all = comments().await?;
        all.as_array()?
            .iter()
            .any(|cm| cm["createdByRunId"] == json!(run) && millis(&cm["createdAt"]) > later)
            .then_some(())
    })
    .await?;
    let status = admin
        .get(&format!("/api/heartbeat-runs/{run}"))
        .await?
        .ok()?;
    assert_eq!(status["status"], "running", "{status}");
    c.shutdown().await;
    Ok(())
}
