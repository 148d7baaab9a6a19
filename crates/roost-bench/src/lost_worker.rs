//! Lost-worker release time (BENCHMARKS.md, "Lost-worker release time"): a worker holding a run whose agent has checked
//! out an issue dies; how long until the issue is free again, and until the run's retry reaches
//! another worker. On a 3-node in-process cluster with the default worker leases, workers
//! speaking the real protocol (`roost_testkit::TestWorker`).
//!
//! Each trial: a fresh worker takes the agent's run (it is the only one connected), the agent
//! checks the issue out through that run, a second worker joins, then the first one either
//! dies (`kill`: its task aborted and its connection closed, as a SIGKILL does) or falls
//! silent (`silent`: the connection stays open and no renewal is sent, as a frozen process or a
//! cut network looks). The leader declares a worker lost when its lease expires, not when its
//! connection closes (it may be reconnecting to a new leader), so both modes measure the lease
//! left since the worker's last renewal: between the lease less one renewal interval and the
//! lease, plus the leader's check (every 100 ms) and the commit.

use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use roost_proto::v1 as pb;
use roost_testkit::{Http, TestCluster, TestWorker};
use serde_json::{json, Value};

use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct LostWorkerArgs {
    /// Workers lost, one after another
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// How the worker is lost
    #[arg(long, value_enum, default_value_t = Loss::Kill)]
    loss: Loss,
    /// One JSON object instead of lines
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Loss {
    /// The worker's connection closes (its process killed)
    Kill,
    /// The worker stops renewing, its connection open (frozen, or cut off)
    Silent,
}

/// How often the issue and the second worker are looked at: the measurement's resolution
/// (plus the time of one issue read).
const POLL: Duration = Duration::from_millis(5);
/// Longest wait for one step of a trial.
const STEP: Duration = Duration::from_secs(60);

/// One trial's times from the loss, in µs.
struct Trial {
    released: u64,
    retried: u64,
    /// The lease terms the doomed worker was given: (renewal interval, lease) in ms.
    terms: (u64, u64),
}

pub async fn run(args: LostWorkerArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.trials > 0, "--trials: at least 1");
    eprintln!("starting a 3-node in-process cluster with the default worker leases...");
    let cluster = TestCluster::start_with(3, roost_raft::RaftTiming::default()).await?;
    let leader = cluster.leader().await?;
    let admin = cluster.admin(leader);
    let token = field(
        &admin
            .post("/api/workers/join-tokens", json!({ "name": "bench" }))
            .await?
            .ok()?,
        "token",
    )?;
    let mut trials = Vec::with_capacity(args.trials);
    // The terms the leader names to its workers: (renewal interval, lease) in ms.
    let mut terms = (0, 0);
    for n in 0..args.trials {
        let trial = one_trial(&cluster, &admin, &token, n, args.loss).await?;
        terms = trial.terms;
        eprintln!(
            "trial {}/{}: issue free after {:.1} ms, retry at another worker after {:.1} ms",
            n + 1,
            args.trials,
            ms(trial.released),
            ms(trial.retried)
        );
        trials.push(trial);
    }
    let mut released: Vec<u64> = trials.iter().map(|t| t.released).collect();
    let mut retried: Vec<u64> = trials.iter().map(|t| t.retried).collect();
    released.sort_unstable();
    retried.sort_unstable();
    let summary = |v: &[u64]| {
        json!({
            "p50Ms": ms(percentile(v, 50.0)),
            "maxMs": ms(v.last().copied().unwrap_or(0)),
        })
    };
    if args.json {
        println!(
            "{}",
            json!({
                "trials": args.trials,
                "loss": format!("{:?}", args.loss).to_lowercase(),
                "leaseTtlMs": terms.1,
                "renewIntervalMs": terms.0,
                "released": summary(&released),
                "retried": summary(&retried),
            })
        );
    } else {
        println!(
            "worker lost ({:?}), lease {} ms, {} trials: issue free again p50 {:.1} ms, max {:.1} ms; \
             retry at another worker p50 {:.1} ms, max {:.1} ms",
            args.loss,
            terms.1,
            args.trials,
            ms(percentile(&released, 50.0)),
            ms(released.last().copied().unwrap_or(0)),
            ms(percentile(&retried, 50.0)),
            ms(retried.last().copied().unwrap_or(0)),
        );
    }
    cluster.shutdown().await;
    Ok(())
}

async fn one_trial(
    cluster: &TestCluster,
    admin: &Http,
    token: &str,
    n: usize,
    loss: Loss,
) -> anyhow::Result<Trial> {
    let doomed =
        TestWorker::connect(cluster.grpc_addrs(), token, &format!("doomed-{n}"), 1).await?;
    let policy = json!({ "enabled": false, "intervalSec": 300, "wakeOnDemand": true, "maxConcurrentRuns": 1 });
    let agent = admin
        .post(
            &format!("/api/companies/{}/agents", cluster.company_id),
            json!({ "name": format!("agent-{n}"), "heartbeat": policy }),
        )
        .await?
        .ok()?;
    let agent = field(&agent, "id")?;
    let key = field(
        &admin
            .post(&format!("/api/agents/{agent}/keys"), json!({}))
            .await?
            .ok()?,
        "token",
    )?;
    let issue = admin
        .post(
            &format!("/api/companies/{}/issues", cluster.company_id),
            json!({ "title": format!("held by a doomed worker {n}"), "status": "todo", "assigneeAgentId": agent }),
        )
        .await?
        .ok()?;
    let issue = field(&issue, "id")?;
    let run = doomed.wait_assignments(1, STEP).await?.remove(0);
    admin
        .with_token(&key)
        .with_run(&run.run_id)
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": agent, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    // Joins only now, so that the first run could go nowhere else.
    let heir = TestWorker::connect(cluster.grpc_addrs(), token, &format!("heir-{n}"), 1).await?;

    let terms = doomed.lease_terms();
    // A worker dies at any point between two renewals, and its lease runs from the last one:
    // the trials spread the moment over the interval (golden-ratio steps), since the steps
    // above tend to end just after a renewal. Part of the scenario, not a wait for state.
    let phase = (n as f64 * 0.618_034).fract();
    tokio::time::sleep(Duration::from_millis(terms.0).mul_f64(phase)).await;
    let lost_at = Instant::now();
    match loss {
        Loss::Kill => doomed.kill(),
        Loss::Silent => doomed.pause_renewals(),
    }
    // Both looked at in one loop, each timed when first seen.
    let retry_of = |heir: &TestWorker| {
        heir.assignments()
            .into_iter()
            .find(|a| a.wake_reason() == pb::WakeReason::ProcessLostRetry && a.agent_id == agent)
    };
    let (mut released, mut retried) = (None, None);
    while released.is_none() || retried.is_none() {
        anyhow::ensure!(
            lost_at.elapsed() < STEP,
            "timed out after {STEP:?}: issue free {}, retry received {}",
            released.is_some(),
            retried.is_some()
        );
        if released.is_none() {
            let view = admin.get(&format!("/api/issues/{issue}")).await?.ok()?;
            if view["checkout"].is_null() {
                released = Some(us(lost_at.elapsed()));
            }
        }
        if retried.is_none() && retry_of(&heir).is_some() {
            retried = Some(us(lost_at.elapsed()));
        }
        tokio::time::sleep(POLL).await;
    }
    // The retry ends, so the next trial's agent has the cluster to itself.
    if let Some(retry) = retry_of(&heir) {
        heir.finish(&retry.run_id, roost_core::RunStatus::Succeeded)
            .await?;
    }
    let (released, retried) = (released.unwrap_or_default(), retried.unwrap_or_default());
    drop(heir);
    drop(doomed);
    Ok(Trial {
        released,
        retried,
        terms,
    })
}

fn field(v: &Value, name: &str) -> anyhow::Result<String> {
    v[name]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("no `{name}` in {v}"))
}
