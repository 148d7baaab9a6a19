//! Big writes on a 3-node in-process cluster at production timing: writers each save issue
//! documents of nearly the largest size a write may be (`roost_core`'s 512 KiB document
//! bound), at once. Prints the writes that failed (by their answer), the new terms (elections)
//! they caused, throughput and latency. openraft 0.9 gives each AppendEntries one heartbeat interval (30 ms) to be
//! answered and puts up to two entries in it at that interval (`roost-raft/src/config.rs`), so
//! this is where a node too slow for big entries loses its followers (BENCHMARKS.md, "Big
//! writes").

use std::collections::BTreeMap;
use std::time::Instant;

use clap::Args;
use roost_testkit::TestCluster;
use serde_json::json;

use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct BigWritesArgs {
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Documents each writer saves, one after another.
    #[arg(long, default_value_t = 10)]
    writes: usize,
    /// Bytes of each document's body.
    #[arg(long, default_value_t = 500_000)]
    bytes: usize,
    #[arg(long)]
    json: bool,
}

pub async fn run(args: BigWritesArgs) -> anyhow::Result<()> {
    eprintln!("starting a 3-node in-process cluster...");
    let cluster = TestCluster::start_with(3, roost_raft::RaftTiming::default()).await?;
    let leader = cluster.leader().await?;
    let term_before = cluster.report(leader).term;
    let admin = cluster.admin(leader);
    // An issue per writer: an issue holds at most 100 documents (roost_core::document).
    let mut issues = Vec::new();
    for writer in 0..args.writers {
        let issue = admin
            .post(
                &format!("/api/companies/{}/issues", cluster.company_id),
                json!({ "title": format!("big documents {writer}"), "status": "todo" }),
            )
            .await?
            .ok()?;
        let id = issue["id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("an issue without an id: {issue}"))?;
        issues.push(id.to_string());
    }
    let body = "b".repeat(args.bytes);
    eprintln!(
        "{} writers x {} documents of {} bytes...",
        args.writers, args.writes, args.bytes
    );
    let started = Instant::now();
    let writers = issues.into_iter().map(|issue| {
        let (admin, body) = (admin.clone(), body.clone());
        let writes = args.writes;
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failed = BTreeMap::<String, usize>::new();
            for n in 0..writes {
                let path = format!("/api/issues/{issue}/documents/doc-{n}");
                let doc = json!({ "title": "doc", "format": "markdown", "body": body });
                let start = Instant::now();
                let why = match admin.put(&path, doc).await {
                    Ok(reply) if reply.status.is_success() => {
                        latencies.push(us(start.elapsed()));
                        continue;
                    }
                    Ok(reply) => format!("{} {}", reply.status.as_u16(), reply.body["error"]),
                    Err(e) => format!("no answer: {e}"),
                };
                *failed.entry(why).or_default() += 1;
            }
            (latencies, failed)
        })
    });
    let (mut latencies, mut failed) = (Vec::new(), BTreeMap::<String, usize>::new());
    for writer in writers.collect::<Vec<_>>() {
        let (l, f) = writer.await?;
        latencies.extend(l);
        for (why, n) in f {
            *failed.entry(why).or_default() += n;
        }
    }
    let elapsed = started.elapsed();
    let leader_after = cluster.leader().await?;
    let terms = cluster
        .report(leader_after)
        .term
        .saturating_sub(term_before);
    latencies.sort_unstable();
    let (p50, p99) = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));
    let mb_per_s = (latencies.len() * args.bytes) as f64 / elapsed.as_secs_f64() / 1e6;
    if args.json {
        println!(
            "{}",
            json!({ "writers": args.writers, "bytes": args.bytes, "ok": latencies.len(),
                    "failed": failed.values().sum::<usize>(), "failures": failed, "newTerms": terms, "seconds": elapsed.as_secs_f64(),
                    "mbPerSecond": mb_per_s, "p50Ms": ms(p50), "p99Ms": ms(p99) })
        );
    } else {
        println!(
            "writers {} x {} B: {} ok, {} failed, {} new terms, {:.2} s, {:.1} MB/s, p50 {:.1} ms, p99 {:.1} ms",
            args.writers,
            args.bytes,
            latencies.len(),
            failed.values().sum::<usize>(),
            terms,
            elapsed.as_secs_f64(),
            mb_per_s,
            ms(p50),
            ms(p99)
        );
        for (why, n) in &failed {
            println!("  {n} failed: {why}");
        }
    }
    cluster.shutdown().await;
    Ok(())
}
