//! Scaling with the number of issues: a 3-node cluster of real `roost server`
//! processes whose population of issues grows step by step (10^3 to 10^6 by default). The
//! first `--open` issues are open (`todo`); the rest are created done, as a company's history
//! grows: most of its issues are finished work, and a company may have at most 100,000 open.
//! At each step: the creation rate, checkout+release throughput and checkout latency on random
//! open issues, the latency of closing an issue, leader and follower memory (per closed issue
//! too), the leader's database sizes, the latency of a list read, a metrics scrape and a node
//! report, and the time a killed follower takes to restart and catch up.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roost_testkit::{wait_for, Http};
use serde_json::{json, Value};
use tonic::transport::Channel;

use crate::procs::{self, ProcessCluster};
use crate::scale_load::{self, Cycles};
use crate::stats::{ms, percentile, us};
use roost_proto::v1::IssueStatus;

#[derive(Args)]
pub struct ScaleArgs {
    /// Populations of issues to measure at, comma-separated, grown in increasing order
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,10000,100000,1000000"
    )]
    pub(crate) issues: Vec<u64>,
    /// Issues created open (`todo`), the first of the population; every later one is created
    /// done. The checkout load works on these.
    #[arg(long, default_value_t = 1000)]
    pub(crate) open: u64,
    /// Closes timed per step, one at a time (each of a fresh open issue)
    #[arg(long, default_value_t = 50)]
    pub(crate) close_samples: usize,
    /// Concurrent checkout/release clients (one agent with a key and a run each)
    #[arg(long, default_value_t = 64)]
    pub(crate) clients: usize,
    /// Seconds of checkout/release measurement per step
    #[arg(long, default_value_t = 10)]
    pub(crate) seconds: u64,
    /// Seconds of checkout/release before the measurement (not counted)
    #[arg(long, default_value_t = 1)]
    pub(crate) warmup: u64,
    /// Concurrent callers creating issues
    #[arg(long, default_value_t = 64)]
    pub(crate) create_clients: usize,
    /// gRPC connections to the leader, shared by the clients
    #[arg(long, default_value_t = 4)]
    pub(crate) connections: usize,
    /// Bytes of description per created issue
    #[arg(long, default_value_t = 256)]
    pub(crate) description_bytes: usize,
    /// `limit` of the list-issues read
    #[arg(long, default_value_t = 50)]
    pub(crate) list_limit: u32,
    /// List-issues reads per step (one at a time)
    #[arg(long, default_value_t = 20)]
    pub(crate) list_samples: usize,
    /// Checkout/release cycles written while the killed follower is down (0: none)
    #[arg(long, default_value_t = 500)]
    pub(crate) catchup_cycles: u64,
    /// Skip the follower kill-and-restart at each step
    #[arg(long)]
    pub(crate) no_restart: bool,
    /// Seconds between progress lines while creating
    #[arg(long, default_value_t = 5)]
    pub(crate) progress_sec: u64,
    /// The roost binary [default: `roost` next to this executable]
    #[arg(long)]
    pub(crate) roost_bin: Option<PathBuf>,
    /// Instead of the steps: one cluster at the smallest and one at the largest of `--issues`,
    /// their checkout loads alternating `--seconds` windows this many times each. This VM's
    /// speed drifts over minutes (the same server read 2,426 to 3,629 checkouts/s at 10^3 in
    /// three runs), so steps measured minutes apart are not comparable; windows side by side are
    #[arg(long, default_value_t = 0)]
    pub(crate) interleave: usize,
    /// One JSON object per step instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) const PREFIX: &str = "SCL";

pub(crate) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A file's size plus its `-wal` companion's, in bytes (0 if absent).
fn db_bytes(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path) + size(Path::new(&wal))
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

pub(crate) fn rss_kib(cluster: &ProcessCluster, id: u64) -> u64 {
    cluster
        .node(id)
        .and_then(|n| procs::sample(&n.pid().to_string()).ok())
        .map(|s| s.rss_kib)
        .unwrap_or(0)
}

/// The process's peak resident memory so far (`VmHWM`), in KiB.
fn peak_rss_kib(cluster: &ProcessCluster, id: u64) -> u64 {
    cluster
        .node(id)
        .and_then(|n| std::fs::read_to_string(format!("/proc/{}/status", n.pid())).ok())
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// `/api/cluster/node` of one node, and how long it took.
async fn node_report(http: &Http) -> anyhow::Result<(Value, Duration)> {
    let start = Instant::now();
    let report = http.get("/api/cluster/node").await?.ok()?;
    Ok((report, start.elapsed()))
}

pub async fn run(args: ScaleArgs) -> anyhow::Result<()> {
    let mut targets = args.issues.clone();
    targets.sort_unstable();
    targets.dedup();
    anyhow::ensure!(
        targets.first().is_some_and(|t| *t > 0) && args.clients > 0 && args.connections > 0,
        "--issues, --clients and --connections must be positive"
    );
    let binary = procs::roost_binary(args.roost_bin.as_deref())?;
    procs::raise_nofile();
    let threads = procs::share_of_cpus(3);
    eprintln!("starting 3 roost server processes ({threads} runtime thread(s) each)...");
    if args.interleave > 0 {
        return crate::scale_pair::run(&args, &binary, threads, &targets).await;
    }
    let mut cluster = ProcessCluster::start(&binary, threads).await?;
    let logs = cluster.dir().display().to_string();
    eprintln!("data and logs in {logs} (removed at the end unless the run fails)");
    let result = tokio::select! {
        r = on_cluster(&args, &mut cluster, &targets) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    if result.is_err() {
        cluster.keep_dir();
    }
    let rows = result.with_context(|| format!("server logs kept in {logs}"))?;
    if !args.json && rows.len() > 1 {
        print_markdown(&rows);
    }
    Ok(())
}

/// What stays the same across steps.
pub(crate) struct Setup {
    pub(crate) leader: u64,
    pub(crate) followers: Vec<u64>,
    pub(crate) admin: Http,
    pub(crate) company_id: String,
    pub(crate) channels: Vec<Channel>,
    pub(crate) baseline_rss_kib: u64,
}

/// The company the load works in, on `cluster`'s leader, and the leader's memory before it.
pub(crate) async fn set_up(args: &ScaleArgs, cluster: &ProcessCluster) -> anyhow::Result<Setup> {
    let status = cluster.healthy_status(Duration::from_secs(60)).await?;
    let leader = status["leaderId"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no leader in the cluster status: {status}"))?;
    let followers: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.id)
        .filter(|i| *i != leader)
        .collect();
    let admin = cluster.admin(leader);
    let company = admin
        .post(
            "/api/companies",
            json!({ "name": "Scale", "issuePrefix": PREFIX }),
        )
        .await?
        .ok()?;
    let company_id = company["id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("company without an id: {company}"))?
        .to_string();
    let grpc = cluster
        .node(leader)
        .map(|n| n.grpc.clone())
        .ok_or_else(|| anyhow::anyhow!("no leader node"))?;
    let mut channels = Vec::new();
    for _ in 0..args.connections {
        channels.push(scale_load::connect(&grpc).await?);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let setup = Setup {
        baseline_rss_kib: rss_kib(cluster, leader),
        leader,
        followers,
        admin,
        company_id,
        channels,
    };
    eprintln!(
        "leader is node {leader}; leader RSS {:.1} MiB with an empty company",
        mib(setup.baseline_rss_kib)
    );
    Ok(setup)
}

/// Creates issues from `population` up to `target`: open ones first, up to `--open`, so they
/// hold the numbers 1..=open the checkout load picks from; the rest done.
pub(crate) async fn grow_to(
    args: &ScaleArgs,
    cluster: &ProcessCluster,
    setup: &Setup,
    population: u64,
    target: u64,
) -> anyhow::Result<scale_load::Growth> {
    let label = format!("{target} issues");
    let description: String = "x".repeat(args.description_bytes);
    let open = args.open.min(target).saturating_sub(population);
    let parts = [
        (IssueStatus::Todo, open),
        (IssueStatus::Done, target.saturating_sub(population + open)),
    ];
    let mut growth = scale_load::Growth::default();
    for (status, count) in parts.into_iter().filter(|(_, n)| *n > 0) {
        let part = scale_load::grow(
            &setup.channels,
            &cluster.admin_token,
            &setup.company_id,
            count,
            status,
            args.create_clients,
            &description,
            Duration::from_secs(args.progress_sec.max(1)),
            &label,
            population + growth.created,
        )
        .await
        .with_context(|| format!("growing to {target} issues"))?;
        growth.add(&part);
    }
    eprintln!(
        "[{label}] created {} in {:.1} s ({:.0}/s); population {}",
        growth.created,
        growth.elapsed.as_secs_f64(),
        growth.created as f64 / growth.elapsed.as_secs_f64().max(1e-9),
        population + growth.created
    );
    settle(cluster, setup, &label).await?;
    Ok(growth)
}

/// A gauge's value in a node's `/metrics`.
pub(crate) async fn gauge(http: &Http, name: &str) -> anyhow::Result<u64> {
    let body = http.get("/metrics").await?.ok()?;
    let text = body.as_str().unwrap_or_default();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(' ')?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(|v| v as u64)
        .ok_or_else(|| anyhow::anyhow!("no {name} in /metrics"))
}

/// Waits until every node has applied what the leader's log holds now. After a burst of
/// creations the followers may still be applying it for many seconds, on the cores the next
/// load runs on: a load measured before they finish measures how far behind they were (at
/// 10^6 issues, runs of one server read 51% to 112% of their 10^3 rate).
async fn settle(cluster: &ProcessCluster, setup: &Setup, label: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let target = gauge(&cluster.admin(setup.leader), "roost_raft_last_log_index").await?;
    eprintln!("[{label}] waiting for every node to apply up to log index {target}...");
    for node in &cluster.nodes {
        let http = cluster.admin(node.id);
        wait_for(
            &format!("node {} to apply up to index {target}", node.id),
            Duration::from_secs(1800),
            || async {
                (gauge(&http, "roost_raft_applied_index").await.ok()? >= target).then_some(())
            },
        )
        .await?;
    }
    eprintln!(
        "[{label}] every node applied up to {target} after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn on_cluster(
    args: &ScaleArgs,
    cluster: &mut ProcessCluster,
    targets: &[u64],
) -> anyhow::Result<Vec<Value>> {
    let setup = set_up(args, cluster).await?;
    if !args.json {
        print_header();
    }
    let mut population = 0u64;
    let mut rows: Vec<Value> = Vec::new();
    for (step, &target) in targets.iter().enumerate() {
        let growth = grow_to(args, cluster, &setup, population, target).await?;
        population += growth.created;
        let mut row = measure_step(args, cluster, &setup, step, population, &growth)
            .await
            .with_context(|| format!("measuring at {target} issues"))?;
        row["leaderKiBPerClosedIssue"] = rows.last().map_or(Value::Null, |prev| {
            per_closed_issue_kib(prev, &row).map_or(Value::Null, |k| json!(k))
        });
        if args.json {
            println!("{row}");
        } else {
            print_row(&row);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Latencies of `GET /api/companies/{id}/issues?limit=…` plus `query`, which must list
/// `expected` issues if given; and how many the last one listed.
async fn list_latencies(
    args: &ScaleArgs,
    setup: &Setup,
    query: &str,
    expected: Option<usize>,
) -> anyhow::Result<(Vec<u64>, usize)> {
    let path = format!(
        "/api/companies/{}/issues?limit={}{query}",
        setup.company_id, args.list_limit
    );
    let (mut samples, mut listed_n) = (Vec::new(), 0);
    for _ in 0..args.list_samples.max(1) {
        let start = Instant::now();
        let listed = setup.admin.get(&path).await?.ok()?;
        samples.push(us(start.elapsed()));
        listed_n = listed.as_array().map(|a| a.len()).unwrap_or(0);
        if let Some(expected) = expected {
            anyhow::ensure!(
                listed_n == expected,
                "the list returned {listed_n} issues, not {expected}"
            );
        }
    }
    samples.sort_unstable();
    Ok((samples, listed_n))
}

/// Latencies of a metrics scrape of the leader (`GET /metrics`), one at a time: what it
/// counts is read under the state's read lock, which apply waits behind.
async fn scrape_latencies(setup: &Setup, samples: usize) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let reply = setup.admin.get("/metrics").await?;
        out.push(us(start.elapsed()));
        anyhow::ensure!(reply.status.is_success(), "GET /metrics: {}", reply.status);
    }
    out.sort_unstable();
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn measure_step(
    args: &ScaleArgs,
    cluster: &mut ProcessCluster,
    setup: &Setup,
    step: usize,
    population: u64,
    growth: &scale_load::Growth,
) -> anyhow::Result<Value> {
    let label = format!("{population} issues");
    let open = population.min(args.open);
    let leader = setup.leader;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Memory before the reads and the load, whose transient allocations glibc may keep.
    let leader_rss = rss_kib(cluster, leader);
    let follower_rss: Vec<f64> = setup
        .followers
        .iter()
        .map(|f| mib(rss_kib(cluster, *f)))
        .collect();

    eprintln!(
        "[{label}] {} list reads (limit {})...",
        args.list_samples, args.list_limit
    );
    let expected = population.min(args.list_limit.max(1) as u64) as usize;
    let (list, _) = list_latencies(args, setup, "", Some(expected)).await?;
    // Open work few issues are in while the cluster is quiet (none, unless a release of the
    // last load failed), so nearly every candidate is walked.
    let (open_list, in_progress) =
        list_latencies(args, setup, "&status=in_progress,in_review", None).await?;
    let scrapes = scrape_latencies(setup, args.list_samples.max(1)).await?;

    eprintln!(
        "[{label}] making {} agents with a key and a run each...",
        args.clients
    );
    let agents = scale_load::make_agents(
        &setup.admin,
        &setup.company_id,
        args.clients,
        &step.to_string(),
    )
    .await?;
    eprintln!(
        "[{label}] checkout+release on random open issues ({open}), {} clients, {} s (+{} s warm-up)...",
        args.clients, args.seconds, args.warmup
    );
    let load = scale_load::cycles(
        &setup.channels,
        &agents,
        PREFIX,
        open,
        Duration::from_secs(args.warmup),
        Duration::from_secs(args.seconds.max(1)),
        None,
    )
    .await?;
    if load.errors > 0 {
        eprintln!(
            "[{label}] {} failed calls during the load; first: {}",
            load.errors,
            load.first_error.as_deref().unwrap_or("")
        );
    }
    let mut seconds_sorted = load.per_second.clone();
    seconds_sorted.sort_unstable();
    eprintln!(
        "[{label}] checkouts in each second: {:?} (min {}, median {}, max {})",
        load.per_second,
        seconds_sorted.first().copied().unwrap_or(0),
        seconds_sorted
            .get(seconds_sorted.len() / 2)
            .copied()
            .unwrap_or(0),
        seconds_sorted.last().copied().unwrap_or(0),
    );
    eprintln!("[{label}] {} closes, one at a time...", args.close_samples);
    let closes = scale_load::close_latencies(
        &setup.channels[0],
        &cluster.admin_token,
        PREFIX,
        open,
        args.close_samples.max(1),
    )
    .await?;
    let rss_after_load = rss_kib(cluster, leader);
    let data = cluster.data_dir(leader);
    let (state_db, log_db, snapshots) = (
        db_bytes(&data.join("state.db")),
        db_bytes(&data.join("raft-log.db")),
        dir_bytes(&data.join("snapshots")),
    );
    // The first node report after writes hashes the whole state (cached per applied index).
    let (report, report_took) = node_report(&setup.admin).await?;
    let leader_peak = peak_rss_kib(cluster, leader);
    anyhow::ensure!(
        report["role"] == "leader",
        "node {leader} is no longer the leader ({}); the steps would mix two leaders",
        report["role"]
    );

    let restart = if args.no_restart {
        Value::Null
    } else {
        follower_restart(args, cluster, setup, &agents, open, &label).await?
    };

    let secs = load.elapsed.as_secs_f64().max(1e-9);
    let l = &load.latencies_us;
    Ok(json!({
        "issues": population,
        "openIssues": open,
        "closedIssues": population - open,
        "created": growth.created,
        "createSec": growth.elapsed.as_secs_f64(),
        "createPerSec": growth.created as f64 / growth.elapsed.as_secs_f64().max(1e-9),
        "createRetries": growth.retries,
        "clients": args.clients,
        "checkoutsPerSec": load.checkouts as f64 / secs,
        "checkoutsEachSecond": load.per_second,
        "conflictsPerSec": load.conflicts as f64 / secs,
        "checkouts": load.checkouts,
        "conflicts": load.conflicts,
        "errors": load.errors,
        "p50Ms": ms(percentile(l, 50.0)),
        "p90Ms": ms(percentile(l, 90.0)),
        "p99Ms": ms(percentile(l, 99.0)),
        "maxMs": ms(l.last().copied().unwrap_or(0)),
        "closeP50Ms": ms(percentile(&closes, 50.0)),
        "closeP99Ms": ms(percentile(&closes, 99.0)),
        "leaderRssMiB": mib(leader_rss),
        "leaderRssAfterLoadMiB": mib(rss_after_load),
        "leaderPeakRssMiB": mib(leader_peak),
        "leaderKiBPerIssue": leader_rss.saturating_sub(setup.baseline_rss_kib) as f64 / population.max(1) as f64,
        "followerRssMiB": follower_rss,
        "stateDbMiB": state_db as f64 / 1048576.0,
        "raftLogDbMiB": log_db as f64 / 1048576.0,
        "snapshotsMiB": snapshots as f64 / 1048576.0,
        "listLimit": args.list_limit,
        "listP50Ms": ms(percentile(&list, 50.0)),
        "listMaxMs": ms(list.last().copied().unwrap_or(0)),
        "openListP50Ms": ms(percentile(&open_list, 50.0)),
        "openListed": in_progress,
        "scrapeP50Ms": ms(percentile(&scrapes, 50.0)),
        "scrapeMaxMs": ms(scrapes.last().copied().unwrap_or(0)),
        "nodeReportMs": report_took.as_secs_f64() * 1000.0,
        "lastLogIndex": report["lastLogIndex"],
        "snapshotIndex": report["snapshotIndex"],
        "restart": restart,
    }))
}

/// Kills a follower with SIGKILL, writes `--catchup-cycles` checkout/release cycles while it
/// is down, restarts it and times its way back: until it answers `/healthz` (its state loaded)
/// and until it has applied everything the leader has.
async fn follower_restart(
    args: &ScaleArgs,
    cluster: &mut ProcessCluster,
    setup: &Setup,
    agents: &[scale_load::Agent],
    open: u64,
    label: &str,
) -> anyhow::Result<Value> {
    let Some(&follower) = setup.followers.first() else {
        return Ok(Value::Null);
    };
    let leader_http = setup.admin.clone();
    let (before, _) = node_report(&leader_http).await?;
    let matched_before = before["matched"][follower.to_string()]
        .as_u64()
        .unwrap_or(0);
    eprintln!(
        "[{label}] kill -9 of follower {follower}; {} cycles while it is down...",
        args.catchup_cycles
    );
    cluster.kill(follower)?;
    let mut written = Cycles::default();
    if args.catchup_cycles > 0 {
        let few = &agents[..agents.len().min(16)];
        written = scale_load::cycles(
            &setup.channels,
            few,
            PREFIX,
            open,
            Duration::ZERO,
            Duration::ZERO,
            Some(args.catchup_cycles),
        )
        .await?;
    }
    // The state hash is incremental: this report rehashes only the rows those cycles changed.
    let (after, after_took) = node_report(&leader_http).await?;
    let target = after["lastLogIndex"].as_u64().unwrap_or(0);
    let purged = after["purgedIndex"].as_u64().unwrap_or(0);
    eprintln!("[{label}] restarting follower {follower}; it must reach log index {target}...");
    cluster.restart(follower)?;
    let started = Instant::now();
    let node = cluster
        .node(follower)
        .ok_or_else(|| anyhow::anyhow!("no node {follower}"))?;
    let follower_http = Http::new(node.http.clone()).with_token(&cluster.admin_token);
    let deadline = Duration::from_secs(3600);
    wait_for(
        "the restarted follower to answer /healthz",
        deadline,
        || async {
            let r = follower_http.get("/healthz").await.ok()?;
            r.status.is_success().then_some(())
        },
    )
    .await?;
    let up = started.elapsed();
    // Poll the leader's view first (its report is cached while nothing is written), then the
    // follower's own applied index (each new index costs the follower a state hash).
    wait_for(
        "the leader to see the follower's log caught up",
        deadline,
        || async {
            let (r, _) = node_report(&leader_http).await.ok()?;
            (r["matched"][follower.to_string()].as_u64()? >= target).then_some(())
        },
    )
    .await?;
    let matched = started.elapsed();
    wait_for(
        "the follower to apply up to the leader's index",
        deadline,
        || async {
            let (r, _) = node_report(&follower_http).await.ok()?;
            (r["appliedIndex"].as_u64()? >= target).then_some(())
        },
    )
    .await?;
    let caught_up = started.elapsed();
    eprintln!(
        "[{label}] follower {follower}: up after {:.2} s, caught up after {:.2} s",
        up.as_secs_f64(),
        caught_up.as_secs_f64()
    );
    Ok(json!({
        "follower": follower,
        "cyclesWhileDown": written.checkouts,
        "conflictsWhileDown": written.conflicts,
        "entriesBehind": target.saturating_sub(matched_before),
        "leaderPurgedIndex": purged,
        "snapshotNeeded": purged > matched_before,
        "upSec": up.as_secs_f64(),
        "logMatchedSec": matched.as_secs_f64(),
        "caughtUpSec": caught_up.as_secs_f64(),
        "nodeReportAfterCyclesMs": after_took.as_secs_f64() * 1000.0,
    }))
}

/// The leader's memory per issue closed since the previous step: RSS before each step's reads
/// and load, so the difference is the issues created between them (and one step's agents).
fn per_closed_issue_kib(prev: &Value, row: &Value) -> Option<f64> {
    let closed = row["closedIssues"].as_u64()? as f64 - prev["closedIssues"].as_u64()? as f64;
    let grown = (f(row, "leaderRssMiB") - f(prev, "leaderRssMiB")) * 1024.0;
    (closed > 0.0).then(|| grown / closed)
}

fn print_header() {
    println!(
        "{:>8} {:>8} {:>9} {:>6} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>7} {:>7} {:>13} {:>8} {:>8} {:>8} {:>9} {:>8} {:>7} {:>7}",
        "issues", "create/s", "checkout/s", "409/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
        "close ms", "ldr MiB", "KiB/iss", "KiB/cls", "fol MiB", "state MB", "log MB", "list ms", "scrape ms", "node ms", "up s", "sync s"
    );
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(0.0)
}

/// KiB per closed issue, or `-` where no step before measured it.
fn per_closed(r: &Value) -> String {
    r["leaderKiBPerClosedIssue"]
        .as_f64()
        .map_or("-".into(), |k| format!("{k:.2}"))
}

fn followers_mib(r: &Value) -> String {
    r["followerRssMiB"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| format!("{:.0}", v.as_f64().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default()
}

fn print_row(r: &Value) {
    let restart = &r["restart"];
    println!(
        "{:>8} {:>8.0} {:>9.0} {:>6.1} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>8.2} {:>8.1} {:>7.2} {:>7} {:>13} {:>8.1} {:>8.1} {:>8.2} {:>9.2} {:>8.1} {:>7.2} {:>7.2}",
        r["issues"].as_u64().unwrap_or(0),
        f(r, "createPerSec"),
        f(r, "checkoutsPerSec"),
        f(r, "conflictsPerSec"),
        f(r, "p50Ms"),
        f(r, "p90Ms"),
        f(r, "p99Ms"),
        f(r, "maxMs"),
        f(r, "closeP50Ms"),
        f(r, "leaderRssMiB"),
        f(r, "leaderKiBPerIssue"),
        per_closed(r),
        followers_mib(r),
        f(r, "stateDbMiB"),
        f(r, "raftLogDbMiB"),
        f(r, "listP50Ms"),
        f(r, "scrapeP50Ms"),
        f(r, "nodeReportMs"),
        f(restart, "upSec"),
        f(restart, "caughtUpSec"),
    );
}

fn print_markdown(rows: &[Value]) {
    println!("\n| issues (open) | create/s | checkouts/s | 409/s | p50 / p90 / p99 / max ms | close p50 / p99 ms | leader RSS (peak) MiB | KiB/issue | KiB/closed issue | follower RSS MiB | state.db MiB | raft-log.db MiB | list p50 ms: all / in progress | metrics scrape p50 / max ms | node report ms: first / after the cycles | restart: up / caught up s |");
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for r in rows {
        let restart = &r["restart"];
        println!(
            "| {} ({}) | {:.0} | {:.0} | {:.1} | {:.1} / {:.1} / {:.1} / {:.1} | {:.2} / {:.2} | {:.1} ({:.1}) | {:.2} | {} | {} | {:.1} | {:.1} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1} / {:.1} | {:.2} / {:.2} |",
            r["issues"].as_u64().unwrap_or(0),
            r["openIssues"].as_u64().unwrap_or(0),
            f(r, "createPerSec"),
            f(r, "checkoutsPerSec"),
            f(r, "conflictsPerSec"),
            f(r, "p50Ms"),
            f(r, "p90Ms"),
            f(r, "p99Ms"),
            f(r, "maxMs"),
            f(r, "closeP50Ms"),
            f(r, "closeP99Ms"),
            f(r, "leaderRssMiB"),
            f(r, "leaderPeakRssMiB"),
            f(r, "leaderKiBPerIssue"),
            per_closed(r),
            followers_mib(r),
            f(r, "stateDbMiB"),
            f(r, "raftLogDbMiB"),
            f(r, "listP50Ms"),
            f(r, "openListP50Ms"),
            f(r, "scrapeP50Ms"),
            f(r, "scrapeMaxMs"),
            f(r, "nodeReportMs"),
            f(restart, "nodeReportAfterCyclesMs"),
            f(restart, "upSec"),
            f(restart, "caughtUpSec"),
        );
    }
}
