//! Failover time: with a writer running against a follower, the leader is stopped abruptly;
//! the clock runs from the kill to the first write acknowledged after it.

use std::time::{Duration, Instant};

use clap::Args;
use roost_testkit::TestCluster;
use serde_json::json;

use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct FailoverArgs {
    #[arg(long, default_value_t = 20)]
    trials: usize,
    /// One JSON object instead of a table
    #[arg(long)]
    json: bool,
}

pub async fn run(args: FailoverArgs) -> anyhow::Result<()> {
    eprintln!(
        "starting a 3-node in-process cluster with production timing (heartbeat 30 ms, election 100-150 ms)..."
    );
    let mut cluster = TestCluster::start_with(3, roost_raft::RaftTiming::default()).await?;
    let mut samples = Vec::new();
    for trial in 1..=args.trials {
        let leader = cluster.leader().await?;
        let writer_node = cluster
            .ids()
            .into_iter()
            .find(|i| *i != leader)
            .unwrap_or(1);
        let http = cluster.admin(writer_node);
        let path = format!("/api/companies/{}/issues", cluster.company_id);
        http.post(&path, json!({ "title": format!("trial {trial} warm-up") }))
            .await?
            .ok()?;
        let killed_at = Instant::now();
        cluster.kill(leader).await;
        let mut n = 0u64;
        let recovered = loop {
            n += 1;
            let key = format!("failover-{trial}-{n}");
            let r = http
                .post_with_key(
                    &path,
                    json!({ "title": format!("trial {trial} write {n}") }),
                    &key,
                )
                .await?;
            if r.status.is_success() {
                break killed_at.elapsed();
            }
            if killed_at.elapsed() > Duration::from_secs(30) {
                anyhow::bail!("trial {trial}: no write acknowledged within 30 s of the kill");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        eprintln!(
            "trial {trial:>2}: leader {leader} killed, first acknowledged write after {:.0} ms",
            recovered.as_secs_f64() * 1000.0
        );
        samples.push(us(recovered));
        cluster.restart(leader).await?;
        cluster.converged(Duration::from_secs(60)).await?;
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
            json!({ "trials": args.trials, "p50Ms": ms(p50), "p99Ms": ms(p99), "maxMs": ms(max) })
        );
    } else {
        println!(
            "failover over {} trials: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            args.trials,
            ms(p50),
            ms(p99),
            ms(max)
        );
    }
    cluster.shutdown().await;
    Ok(())
}
