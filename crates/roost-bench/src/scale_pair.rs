//! `roost-bench scale --interleave N`: checkout throughput at the smallest and the largest
//! population of `--issues`, measured side by side. One 3-node cluster holds each population,
//! and their checkout loads take turns, `--seconds` each, N turns each, in the order ABBA ABBA
//! so that a drift of the machine's speed weighs on both alike. Steps measured minutes apart on
//! one cluster (the plain `scale`) compare the machine's speed at two moments as much as the
//! two populations.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::procs::ProcessCluster;
use crate::scale::{self, ScaleArgs, Setup, PREFIX};
use crate::scale_load::{self, Agent};
use crate::stats::{median, ms, percentile};

/// One population's cluster, company and agents.
struct Side {
    setup: Setup,
    agents: Vec<Agent>,
    population: u64,
    /// Checkouts/s and checkout p99 (ms) of each of its windows.
    windows: Vec<(f64, f64)>,
}

pub async fn run(
    args: &ScaleArgs,
    binary: &Path,
    threads: usize,
    targets: &[u64],
) -> anyhow::Result<()> {
    let (small, large) = match (targets.first(), targets.last()) {
        (Some(s), Some(l)) if s < l => (*s, *l),
        _ => anyhow::bail!("--interleave needs two populations in --issues, such as 1000,1000000"),
    };
    eprintln!(
        "starting two clusters of 3 roost server processes ({threads} runtime thread(s) each)..."
    );
    let mut clusters = [
        ProcessCluster::start(binary, threads).await?,
        ProcessCluster::start(binary, threads).await?,
    ];
    for c in &clusters {
        eprintln!(
            "data and logs in {} (removed at the end unless the run fails)",
            c.dir().display()
        );
    }
    let result = tokio::select! {
        r = side_by_side(args, &clusters, [small, large]) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    if result.is_err() {
        clusters.iter_mut().for_each(|c| c.keep_dir());
    }
    result
}

async fn side_by_side(
    args: &ScaleArgs,
    clusters: &[ProcessCluster; 2],
    populations: [u64; 2],
) -> anyhow::Result<()> {
    let mut sides = Vec::new();
    for (cluster, population) in clusters.iter().zip(populations) {
        let setup = scale::set_up(args, cluster).await?;
        scale::grow_to(args, cluster, &setup, 0, population).await?;
        let agents =
            scale_load::make_agents(&setup.admin, &setup.company_id, args.clients, "pair").await?;
        eprintln!(
            "[{population} issues] leader RSS {:.1} MiB",
            scale::mib(scale::rss_kib(cluster, setup.leader))
        );
        sides.push(Side {
            setup,
            agents,
            population,
            windows: Vec::new(),
        });
    }
    let turns = args.interleave;
    for turn in 0..turns {
        // ABBA: the side that goes second in one turn goes first in the next.
        let order: [usize; 2] = if turn % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let side = &mut sides[i];
            let load = scale_load::cycles(
                &side.setup.channels,
                &side.agents,
                PREFIX,
                side.population.min(args.open),
                Duration::from_secs(args.warmup),
                Duration::from_secs(args.seconds.max(1)),
                None,
            )
            .await?;
            let rate = load.checkouts as f64 / load.elapsed.as_secs_f64().max(1e-9);
            let p99 = ms(percentile(&load.latencies_us, 99.0));
            eprintln!(
                "turn {}/{turns}, {} issues: {rate:.0} checkouts/s, p99 {p99:.1} ms, {} failed calls{}",
                turn + 1,
                side.population,
                load.errors,
                load.first_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default()
            );
            // A window through a deposed leader measures forwarding, not the population.
            let leads = scale::gauge(
                &clusters[i].admin(side.setup.leader),
                "roost_raft_is_leader",
            )
            .await?;
            anyhow::ensure!(
                leads == 1,
                "node {} of the {}-issue cluster is no longer the leader (an election during the \
                 load): the windows would mix two leaders",
                side.setup.leader,
                side.population
            );
            side.windows.push((rate, p99));
        }
    }
    report(args, &sides);
    Ok(())
}

fn report(args: &ScaleArgs, sides: &[Side]) {
    let rates = |s: &Side| s.windows.iter().map(|w| w.0).collect::<Vec<_>>();
    let p99s = |s: &Side| s.windows.iter().map(|w| w.1).collect::<Vec<_>>();
    let (small, large) = (&sides[0], &sides[1]);
    // Each turn's large window against the small one next to it.
    let per_turn: Vec<f64> = small
        .windows
        .iter()
        .zip(&large.windows)
        .map(|(s, l)| l.0 / s.0.max(1e-9))
        .collect();
    let ratio = median(rates(large)) / median(rates(small)).max(1e-9);
    let row = json!({
        "clients": args.clients,
        "secondsPerWindow": args.seconds,
        "turns": args.interleave,
        "small": { "issues": small.population, "checkoutsPerSec": rates(small), "p99Ms": p99s(small) },
        "large": { "issues": large.population, "checkoutsPerSec": rates(large), "p99Ms": p99s(large) },
        "largeOverSmall": ratio,
        "largeOverSmallEachTurn": per_turn,
    });
    if args.json {
        println!("{row}");
        return;
    }
    let show = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("| issues (open) | checkouts/s in each window | median | p99 ms, median |");
    println!("|--:|--|--:|--:|");
    for s in sides {
        println!(
            "| {} ({}) | {} | {:.0} | {:.1} |",
            s.population,
            s.population.min(args.open),
            show(&rates(s)),
            median(rates(s)),
            median(p99s(s))
        );
    }
    println!(
        "\n{} issues against {}: {:.0}% of the checkouts/s (medians); each turn: {}",
        large.population,
        small.population,
        ratio * 100.0,
        per_turn
            .iter()
            .map(|r| format!("{:.0}%", r * 100.0))
            .collect::<Vec<_>>()
            .join(" ")
    );
}
