//! Wake-to-assignment latency: from the `POST /api/agents/{id}/wakeup` request to the
//! assignment arriving at a worker, on a 3-node cluster with an in-process worker speaking the
//! real protocol.

use std::time::{Duration, Instant};

use clap::Args;
use roost_core::RunStatus;
use roost_testkit::{TestCluster, TestWorker};
use serde_json::json;

use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct WakeArgs {
    #[arg(long, default_value_t = 200)]
    samples: usize,
    #[arg(long)]
    json: bool,
}

pub async fn run(args: WakeArgs) -> anyhow::Result<()> {
    eprintln!("starting a 3-node in-process cluster and one worker...");
    let cluster = TestCluster::start_with(3, roost_raft::RaftTiming::default()).await?;
    let leader = cluster.leader().await?;
    let admin = cluster.admin(leader);
    let token = admin
        .post("/api/workers/join-tokens", json!({ "name": "bench" }))
        .await?
        .ok()?;
    let token = token["token"].as_str().unwrap_or_default().to_string();
    let worker = TestWorker::connect(cluster.grpc_addrs(), &token, "bench-worker", 8).await?;
    let agent = admin
        .post(
            &format!("/api/companies/{}/agents", cluster.company_id),
            json!({ "name": "bench-agent" }),
        )
        .await?
        .ok()?;
    let agent = agent["id"].as_str().unwrap_or_default().to_string();
    let follower = cluster
        .ids()
        .into_iter()
        .find(|i| *i != leader)
        .unwrap_or(1);
    let mut samples = Vec::with_capacity(args.samples);
    for n in 0..args.samples {
        // Alternate between the leader and a follower: a wake arrives at any node.
        let http = if n % 2 == 0 {
            cluster.admin(leader)
        } else {
            cluster.admin(follower)
        };
        let start = Instant::now();
        http.post(&format!("/api/agents/{agent}/wakeup"), json!({}))
            .await?
            .ok()?;
        let assignments = worker
            .wait_assignments(n + 1, Duration::from_secs(10))
            .await?;
        samples.push(us(start.elapsed()));
        worker
            .finish(&assignments[n].run_id, RunStatus::Succeeded)
            .await?;
        roost_testkit::wait_for("the run to end", Duration::from_secs(10), || async {
            (!worker.running().contains(&assignments[n].run_id)).then_some(())
        })
        .await?;
        // The next wake must not coalesce into a run still being finished.
        let run = http
            .get(&format!("/api/heartbeat-runs/{}", assignments[n].run_id))
            .await?
            .ok()?;
        if run["status"] != "succeeded" {
            roost_testkit::wait_for(
                "the run to be recorded",
                Duration::from_secs(10),
                || async {
                    let r = http
                        .get(&format!("/api/heartbeat-runs/{}", assignments[n].run_id))
                        .await
                        .ok()?
                        .ok()
                        .ok()?;
                    (r["status"] == "succeeded").then_some(())
                },
            )
            .await?;
        }
    }
    samples.sort_unstable();
    let (p50, p99, max) = (
        percentile(&samples, 50.0),
        percentile(&samples, 99.0),
        samples.last().copied().unwrap_or(0),
    );
    if args.json {
        println!(
            "{}",
            json!({ "samples": args.samples, "p50Ms": ms(p50), "p99Ms": ms(p99), "maxMs": ms(max) })
        );
    } else {
        println!("wake request -> assignment at the worker, {} samples: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms", args.samples, ms(p50), ms(p99), ms(max));
    }
    cluster.shutdown().await;
    Ok(())
}
