//! The worker cut-off scenario: a `roost run-worker` in its own namespace runs an agent that
//! keeps writing; the worker is cut off from every node for three lease lengths, again and
//! again. Each time its agent must have stopped before the cluster declared the run lost, and
//! nothing the lost run wrote may land after that.

use std::path::Path;
use std::time::{Duration, Instant};

use roost_testkit::{wait_for, Http, NetCluster};
use serde_json::{json, Value};

use crate::schedule::Done;
use crate::text;
use crate::workload::Recorder;

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

/// A reply's RFC 3339 timestamp `field` in Unix milliseconds; an error when it is missing or
/// does not parse (a fencing check against a made-up time would pass vacuously).
fn millis(v: &Value, field: &str) -> anyhow::Result<i64> {
    let t = v[field]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no `{field}` in {v}"))?;
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|t| t.timestamp_millis())
        .map_err(|e| anyhow::anyhow!("`{field}` {t:?} is not an RFC 3339 time ({e}) in {v}"))
}

/// A successful GET's body, or `None` (unreachable, an error status): for polling.
async fn poll(admin: &Http, path: &str) -> Option<Value> {
    admin.get(path).await.ok()?.ok().ok()
}

/// Run `run` if its status is `status`.
async fn run_in(admin: &Http, run: &str, status: &str) -> Option<Value> {
    let r = poll(admin, &format!("/api/heartbeat-runs/{run}")).await?;
    (r["status"] == status).then_some(r)
}

/// Runs cut-off cycles until `deadline`; returns how many and when the worker was last let
/// back in, or the first violation.
pub async fn cycles(
    cluster: &NetCluster,
    work_dir: &Path,
    rec: &Recorder,
    deadline: Instant,
) -> anyhow::Result<Done> {
    let admin = cluster.http(1);
    let cid = cluster.company_id.clone();
    let script = agent_script(cluster.dir())?;
    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "cut-agent", "adapterType": "process",
                    "adapterConfig": { "command": "sh", "args": [script], "cwd": "." } }),
        )
        .await?
        .ok()?;
    let agent = text(&agent, "id")?;
    let issue = admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "written by a worker" }),
        )
        .await?
        .ok()?;
    let issue = text(&issue, "id")?;
    let mut done = 0;
    let mut healed_ns = None;
    while Instant::now() + 4 * LEASE + Duration::from_secs(4) < deadline {
        // The previous cycle's retry (a wake, then a run that exits at once) must be over: a
        // wake now would be coalesced into it, and no run would start to write.
        wait_for(
            "the agent to have no pending wake or live run",
            WAIT,
            || async {
                let runs = poll(
                    &admin,
                    &format!("/api/companies/{cid}/heartbeat-runs?agentId={agent}&limit=20"),
                )
                .await?;
                let wakes = poll(
                    &admin,
                    &format!("/api/companies/{cid}/wakes?agentId={agent}&status=queued,deferred"),
                )
                .await?;
                let live = ["queued", "assigned", "running"];
                let busy = runs
                    .as_array()?
                    .iter()
                    .any(|r| live.iter().any(|s| r["status"] == *s));
                (!busy && wakes.as_array()?.is_empty()).then_some(())
            },
        )
        .await?;
        // Retried while a node answers 503 (a leader change on this busy machine: one ended
        // the scenario, seed 641022); the key makes a retry return the first wake.
        let wake = json!({ "issueId": issue, "idempotencyKey": format!("cut-off-{done}") });
        wait_for("the wakeup to be accepted", WAIT, || async {
            let reply = admin
                .post(&format!("/api/agents/{agent}/wakeup"), wake.clone())
                .await
                .ok()?;
            reply.ok().ok()
        })
        .await?;
        let run = wait_for("the agent to be writing", WAIT, || async {
            let path = format!("/api/issues/{issue}/comments?order=desc&limit=1");
            let comments = poll(&admin, &path).await?;
            let run = comments.as_array()?.first()?["createdByRunId"]
                .as_str()?
                .to_string();
            run_in(&admin, &run, "running").await.map(|_| run)
        })
        .await?;
        let cut_at = Instant::now();
        cluster.cut_worker()?;
        let lost = wait_for("the run to be declared lost", WAIT, || {
            run_in(&admin, &run, "lost")
        })
        .await?;
        tokio::time::sleep_until((cut_at + 3 * LEASE).into()).await;
        cluster.heal();
        healed_ns = Some(rec.now_ns());
        let lost_at = millis(&lost, "finishedAt")?;
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
            let workers = poll(&admin, "/api/workers").await?;
            workers
                .as_array()?
                .iter()
                .any(|w| w["status"] == "online")
                .then_some(())
        })
        .await?;
        let path = format!("/api/issues/{issue}/comments?limit=1000&order=desc");
        let comments = wait_for("the issue's comments", WAIT, || poll(&admin, &path)).await?;
        let mut late = Vec::new();
        for c in comments.as_array().into_iter().flatten() {
            if c["createdByRunId"] == json!(run) && millis(c, "createdAt")? >= lost_at {
                late.push(c);
            }
        }
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
    Ok(Done {
        faults: done,
        healed_ns,
    })
}
