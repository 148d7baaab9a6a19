//! The worker cut-off scenario: a `roost run-worker` in its own namespace runs an agent that
//! keeps writing; the worker is cut off from every node for three lease lengths, again and
//! again. Each time its agent must have stopped before the cluster declared the run lost, and
//! nothing the lost run wrote may land after that.

use std::path::Path;
use std::time::{Duration, Instant};

use roost_testkit::{wait_for, NetCluster};
use serde_json::{json, Value};

/// The servers' `[workers] lease_ttl_ms` in the fault cluster.
const LEASE: Duration = Duration::from_millis(2000);
const WAIT: Duration = Duration::from_secs(30);

/// The agent: comments every 100 ms until stopped, and records when it got SIGTERM. The same
/// script as the e2e worker-fencing test's, built into this binary.
const KEEP_WRITING: &str = include_str!("../../roost/tests/agents/keep-writing.sh");

/// Writes the agent script into the scenario's directory; returns its path.
fn agent_script(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("keep-writing.sh");
    std::fs::write(&path, KEEP_WRITING)?;
    Ok(path.display().to_string())
}

fn millis(v: &Value) -> i64 {
    v.as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis())
        .unwrap_or(i64::MAX)
}

/// Runs cut-off cycles until `deadline`; returns how many, or the first violation.
pub async fn cycles(
    cluster: &NetCluster,
    work_dir: &Path,
    deadline: Instant,
) -> anyhow::Result<usize> {
    let admin = cluster.http(1);
    let cid = cluster.company_id.clone();
    let script = agent_script(cluster.dir())?;
    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "cut-agent", "adapterType": "process",
                    "adapterConfig": { "command": "sh", "args": [script] } }),
        )
        .await?
        .ok()?;
    let agent = agent["id"].as_str().unwrap_or_default().to_string();
    let issue = admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "written by a worker" }),
        )
        .await?
        .ok()?;
    let issue = issue["id"].as_str().unwrap_or_default().to_string();
    let mut done = 0;
    while Instant::now() + 4 * LEASE + Duration::from_secs(4) < deadline {
        // The previous cycle's retry (a wake, then a run that exits at once) must be over: a
        // wake now would be coalesced into it, and no run would start to write.
        wait_for(
            "the agent to have no pending wake or live run",
            WAIT,
            || async {
                let runs = admin
                    .get(&format!(
                        "/api/companies/{cid}/heartbeat-runs?agentId={agent}&limit=20"
                    ))
                    .await
                    .ok()?
                    .ok()
                    .ok()?;
                let wakes = admin
                    .get(&format!(
                        "/api/companies/{cid}/wakes?agentId={agent}&status=queued,deferred"
                    ))
                    .await
                    .ok()?
                    .ok()
                    .ok()?;
                let live = ["queued", "assigned", "running"];
                let busy = runs
                    .as_array()?
                    .iter()
                    .any(|r| live.iter().any(|s| r["status"] == *s));
                (!busy && wakes.as_array()?.is_empty()).then_some(())
            },
        )
        .await?;
        admin
            .post(
                &format!("/api/agents/{agent}/wakeup"),
                json!({ "issueId": issue }),
            )
            .await?
            .ok()?;
        let run = wait_for("the agent to be writing", WAIT, || async {
            let comments = admin
                .get(&format!("/api/issues/{issue}/comments?order=desc&limit=1"))
                .await
                .ok()?
                .ok()
                .ok()?;
            let run = comments.as_array()?.first()?["createdByRunId"]
                .as_str()?
                .to_string();
            let r = admin
                .get(&format!("/api/heartbeat-runs/{run}"))
                .await
                .ok()?
                .ok()
                .ok()?;
            (r["status"] == "running").then_some(run)
        })
        .await?;
        let cut_at = Instant::now();
        cluster.cut_worker()?;
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
        tokio::time::sleep_until((cut_at + 3 * LEASE).into()).await;
        cluster.heal();
        let lost_at = millis(&lost["finishedAt"]);
        let stopped: i64 = std::fs::read_to_string(work_dir.join(format!("stopped-{run}")))
            .map_err(|e| anyhow::anyhow!("the agent of run {run} never got SIGTERM: {e}"))?
            .trim()
            .parse()?;
        anyhow::ensure!(
            stopped < lost_at,
            "run {run}: the agent stopped at {stopped}, after the run was declared lost at {lost_at}"
        );
        // The worker comes back and is given work again (the retry exits at once).
        wait_for("the worker to be back online", WAIT, || async {
            let workers = admin.get("/api/workers").await.ok()?.ok().ok()?;
            workers
                .as_array()?
                .iter()
                .any(|w| w["status"] == "online")
                .then_some(())
        })
        .await?;
        let comments = admin
            .get(&format!(
                "/api/issues/{issue}/comments?limit=1000&order=desc"
            ))
            .await?
            .ok()?;
        let late: Vec<&Value> = comments
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["createdByRunId"] == json!(run) && millis(&c["createdAt"]) >= lost_at)
            .collect();
        anyhow::ensure!(
            late.is_empty(),
            "run {run} wrote after it was lost: {late:?}"
        );
        done += 1;
        println!(
            "cut-off {done}: run {run} stopped {} ms before it was declared lost",
            lost_at - stopped
        );
    }
    Ok(done)
}
