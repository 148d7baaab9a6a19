//! One scenario from start to verdict: the cluster and the worker, the routine and the
//! workload's clients, the fault schedule, the liveness probe from the schedule's last heal
//! (while the clients drain), the settling of the wakes, the routine's pause, then the
//! snapshots and the checkers. Everything is written to
//! the scenario's directory as it goes; a green run then removes the nodes' and the worker's
//! data and keeps the logs, the history, the snapshots and the verdict.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roost_check::{Action, BudgetObservation, Op, RoutineSchedule};
use roost_testkit::NetCluster;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::schedule::{inject, Fault};
use crate::wakes_costs::{self, Waker};
use crate::workload::{self, Recorder, Target};
use crate::{membership, observe, routines, text, worker_cut, RunOptions, Scenario};

/// Checkout clients (processes 0..6 in the history); the wake client, the cost client and the
/// operator are processes 10, 11 and 12; the membership changes 20.
const CLIENTS: u64 = 6;
/// How long queued wakes may take to run after the heal.
const SETTLE: Duration = Duration::from_secs(60);
/// The process of the liveness probe's operations in the history.
const PROBE: u64 = u64::MAX;
/// How long the liveness probe tries (the checker's window is shorter: a later success is
/// reported as too late rather than as none).
const PROBE_FOR: Duration = Duration::from_secs(10);

/// A green scenario: where its files are and what it did.
#[derive(Debug)]
pub struct Report {
    pub dir: std::path::PathBuf,
    pub faults: usize,
    pub elapsed: Duration,
}

/// Scenarios run one at a time: they share the machine's cores.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

fn fault_of(scenario: Scenario) -> Fault {
    match scenario {
        Scenario::LeaderPartition => Fault::LeaderPartition,
        Scenario::FollowerIsolation => Fault::FollowerIsolation,
        Scenario::LeaderKillLoop => Fault::LeaderKillLoop,
        Scenario::LeaderPause => Fault::LeaderPause,
        Scenario::WorkerCutOff => Fault::WorkerCutOff,
        Scenario::MixedFaults => Fault::Mixed,
        Scenario::MembershipChange => Fault::MembershipChange,
        Scenario::MinorityKill => Fault::MinorityKill,
    }
}

/// The agents, issues, budget and keys the clients work with.
async fn setup(cluster: &NetCluster, secs: u64) -> anyhow::Result<Target> {
    let leader = cluster.leader().await?;
    let admin = cluster.http(leader);
    let cid = cluster.company_id.clone();
    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({ "name": "faulty" }),
        )
        .await?
        .ok()?;
    let agent_id = text(&agent, "id")?;
    let key = admin
        .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
        .await?
        .ok()?;
    let mut issues = Vec::new();
    for i in 0..workload::windows_for(secs) * workload::ISSUES_PER_WINDOW {
        let issue = admin
            .post(
                &format!("/api/companies/{cid}/issues"),
                json!({ "title": format!("contended {i}"), "status": "todo" }),
            )
            .await?
            .ok()?;
        issues.push(text(&issue, "id")?);
    }
    let waker: Waker = wakes_costs::create_waker(&admin, &cid).await?;
    let urls = cluster
        .ids()
        .into_iter()
        .map(|id| cluster.base_url(id))
        .collect();
    Ok(Target::new(
        cluster.client_of(""),
        urls,
        cid,
        cluster.admin_token.clone(),
        (agent_id, text(&key, "token")?),
        issues,
        waker,
    ))
}

/// From the schedule's last heal: one write must succeed within the liveness window
/// (recorded). Tries every node in turn, 100-200 ms between rounds; the run it starts is
/// ended (recorded too).
async fn liveness_probe(target: Target, rec: Arc<Recorder>, seed: u64) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x11FE_9B0B);
    let give_up = Instant::now() + PROBE_FOR;
    while Instant::now() < give_up {
        for url in target.urls() {
            let admin = target.http(url).with_token(&target.admin_token);
            let call = rec.now_ns();
            let reply = tokio::time::timeout(
                Duration::from_secs(2),
                admin.post(&format!("/api/agents/{}/runs", target.agent_id), json!({})),
            )
            .await;
            let action = roost_check::Action::Other {
                name: "liveness_write".into(),
                write: true,
            };
            if let Ok(Ok(r)) = reply {
                if r.status.is_success() {
                    let ok = roost_check::Outcome::Ok(Default::default());
                    rec.record(PROBE, call, action, ok);
                    let run = text(&r.body, "id").context("the liveness probe's run")?;
                    workload::end_run(PROBE, &target, &run, &mut rng, &rec).await;
                    return Ok(());
                }
            }
            let unknown = roost_check::Outcome::Unknown { reason: None };
            rec.record(PROBE, call, action, unknown);
        }
        // Pacing: a node that refuses connections answers at once.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(100..200))).await;
    }
    println!("liveness probe: no write succeeded within {PROBE_FOR:?} of the last heal");
    Ok(())
}

/// Removes what a green run need not keep: every node's data directories (`node-*/data*`) and
/// the worker's work directory. Logs, configs, the history, the snapshots and the verdict stay.
fn remove_data(dir: &Path) -> anyhow::Result<()> {
    let mut doomed = vec![dir.join("worker/work")];
    for node in std::fs::read_dir(dir)? {
        let node = node?;
        if !(node.file_name().to_string_lossy().starts_with("node-") && node.file_type()?.is_dir())
        {
            continue;
        }
        for entry in std::fs::read_dir(node.path())? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with("data")
                && entry.file_type()?.is_dir()
            {
                doomed.push(entry.path());
            }
        }
    }
    for d in doomed {
        if d.exists() {
            std::fs::remove_dir_all(&d)
                .with_context(|| format!("cannot remove {}", d.display()))?;
        }
    }
    Ok(())
}

/// Waits for every task, then fails with every task that failed or panicked.
async fn join_all(tasks: Vec<(String, JoinHandle<anyhow::Result<()>>)>) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for (name, task) in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(format!("{name}: {e:#}")),
            Err(e) => failed.push(format!("{name}: the task failed: {e}")),
        }
    }
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}

/// Runs one scenario to its verdict: `Ok` when every checker is green and had data to check.
pub async fn run(options: &RunOptions) -> anyhow::Result<Report> {
    let _one = one_at_a_time().await;
    anyhow::ensure!(
        NetCluster::available(),
        "the fault suite needs root, network namespaces (ip netns, iproute2) and nftables (nft)"
    );
    anyhow::ensure!(
        options.roost_bin.is_file(),
        "no roost binary at {} (build it with `cargo build -p roost`)",
        options.roost_bin.display()
    );
    let (name, seed, secs) = (options.scenario.name(), options.seed, options.secs);
    let dir = options.dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    println!(
        "scenario {name}: seed {seed}, {secs} s, kept in {}",
        dir.display()
    );
    let started = Instant::now();
    let scenario = options.scenario;
    let mut cluster =
        NetCluster::start(&options.roost_bin, scenario.nodes(), scenario.tag(), &dir).await?;
    let result = drive(&mut cluster, options, &dir).await;
    match result {
        Ok(faults) => {
            println!(
                "scenario {name}: {faults} faults, all checkers green (seed {seed}, {:.0?})",
                started.elapsed()
            );
            // The processes go first: then nothing writes into the data being removed.
            drop(cluster);
            if let Err(e) = remove_data(&dir) {
                println!("could not remove the data of {}: {e:#}", dir.display());
            }
            Ok(Report {
                dir,
                faults,
                elapsed: started.elapsed(),
            })
        }
        Err(e) => {
            // The verdict first: a CI log that keeps only part of the output keeps its start.
            println!(
                "scenario {name} FAILED (seed {seed}): {e:#}\nhistory, snapshots and logs: {}\n\
                 reproduce: roost-faults run {name} --seed {seed} --secs {secs}",
                dir.display()
            );
            println!("the nodes' views now:\n{}", cluster.raft_views().await);
            println!("{}", cluster.log_tails(20));
            Err(e.context(format!(
                "scenario {name} failed (seed {seed}); see {}",
                dir.display()
            )))
        }
    }
}

/// The scenario between the cluster's start and the verdict; returns how many faults.
async fn drive(
    cluster: &mut NetCluster,
    options: &RunOptions,
    dir: &Path,
) -> anyhow::Result<usize> {
    let (seed, scenario) = (options.seed, options.scenario);
    if scenario == Scenario::MembershipChange {
        cluster.add_spare(membership::SLOTS)?;
    }
    let target = setup(cluster, options.secs).await?;
    let token = cluster
        .http(cluster.leader().await?)
        .post("/api/workers/join-tokens", json!({ "name": "faults" }))
        .await?
        .ok()?;
    let work_dir = cluster.start_worker(&text(&token, "token")?)?;
    let ticker =
        routines::create_ticker(&cluster.http(cluster.leader().await?), &target.company_id).await?;
    let rec = Recorder::new();
    let deadline = Instant::now() + Duration::from_secs(options.secs);
    let mut clients: Vec<(String, JoinHandle<anyhow::Result<()>>)> = (0..CLIENTS)
        .map(|p| {
            let client = workload::client(p, target.clone(), seed, deadline, rec.clone());
            (format!("checkout client {p}"), tokio::spawn(client))
        })
        .collect();
    let wake = wakes_costs::wake_client(10, target.clone(), seed, deadline, rec.clone());
    clients.push(("wake client".into(), tokio::spawn(wake)));
    let cost = wakes_costs::cost_client(11, target.clone(), seed, deadline, rec.clone());
    clients.push(("cost client".into(), tokio::spawn(cost)));
    let operator = wakes_costs::operator(12, target.clone(), seed, deadline, rec.clone());
    clients.push(("operator".into(), tokio::spawn(operator)));
    let sampler = tokio::spawn(wakes_costs::sample_budget(target.clone(), seed, deadline));
    let mut rng = StdRng::seed_from_u64(seed);
    let done = match fault_of(scenario) {
        Fault::WorkerCutOff => worker_cut::cycles(cluster, &work_dir, &rec, deadline).await,
        Fault::MembershipChange => {
            membership::cycles(cluster, &target, &rec, &mut rng, deadline).await
        }
        fault => inject(cluster, fault, &rec, &mut rng, deadline).await,
    }?;
    anyhow::ensure!(
        done.faults > 0,
        "the schedule made no fault in {} s: nothing was tested (a longer run is needed)",
        options.secs
    );
    let healed_ns = done
        .healed_ns
        .context("the schedule made faults but reported no heal")?;
    // The schedules heal as they go; this only makes sure.
    cluster.heal();
    crate::schedule::supervise(cluster)?;
    // From the last heal on, while the clients drain.
    let probe = tokio::spawn(liveness_probe(target.clone(), rec.clone(), seed));
    clients.push(("liveness probe".into(), probe));
    let clients = join_all(clients).await;
    let samples = sampler
        .await
        .map_err(|e| anyhow::anyhow!("the budget sampler failed: {e}"));
    clients?;
    let samples = samples?;
    wakes_costs::settle(&target, &rec, SETTLE).await;
    // Paused before the replicas are read: a firing every 2 s would keep them from meeting at
    // one applied index (the state hash checker compares only equal indexes).
    let routine = routines::stop(&target, &ticker).await?;
    verify(
        cluster,
        &target,
        &rec.ops(),
        &samples,
        healed_ns,
        &routine,
        dir,
    )
    .await?;
    Ok(done.faults)
}

async fn verify(
    cluster: &NetCluster,
    target: &Target,
    ops: &[Op],
    samples: &[BudgetObservation],
    heal_ns: i64,
    routine: &RoutineSchedule,
    dir: &Path,
) -> anyhow::Result<()> {
    let mut history = String::new();
    for op in ops {
        history.push_str(&op.to_json_line());
        history.push('\n');
    }
    std::fs::write(dir.join("history.jsonl"), history)?;
    std::fs::write(
        dir.join("budget-samples.json"),
        serde_json::to_string_pretty(samples)?,
    )?;
    let (index, hash) = observe::converged(cluster).await?;
    let acknowledged = observe::acknowledged_wakes(ops);
    let mut replicas = Vec::new();
    for id in cluster.ids() {
        let rid = &routine.routine_id;
        replicas.push(observe::snapshot(cluster, id, target, &acknowledged, rid).await?);
    }
    std::fs::write(
        dir.join("snapshots.json"),
        serde_json::to_string_pretty(&replicas)?,
    )?;
    let ok_ops = ops.iter().filter(|o| o.is_ok()).count();
    let unknown = ops.iter().filter(|o| o.is_unknown()).count();
    println!(
        "history: {} ops ({ok_ops} ok, {unknown} unknown); replicas converged at {index} ({hash})",
        ops.len()
    );
    let memory_acked = ops
        .iter()
        .filter(|o| matches!(o.action, Action::MemoryEntry { .. }) && o.is_ok())
        .count();
    let memory_kept = replicas[0]
        .memory
        .values()
        .map(|m| m.entry_ids.len())
        .sum::<usize>();
    println!("memory: {memory_acked} entries acknowledged, {memory_kept} kept on a replica");
    let summary = wakes_costs::summary(ops, &replicas[0], samples);
    println!("{summary}");
    let (mut failures, mut verdicts) = (Vec::new(), Vec::new());
    println!("{}", routines::summary(&replicas[0], routine));
    for verdict in observe::check_all(ops, &replicas, samples, heal_ns, routine) {
        println!("  {verdict}");
        verdicts.push(verdict.to_string());
        if !verdict.is_ok() {
            failures.push(verdict.to_string());
        }
    }
    verdicts.push(summary.to_string());
    std::fs::write(dir.join("verdict.txt"), verdicts.join("\n") + "\n")?;
    anyhow::ensure!(
        failures.is_empty(),
        "checkers failed:\n{}",
        failures.join("\n")
    );
    anyhow::ensure!(
        ok_ops > 50,
        "the workload barely ran: {ok_ops} ok operations"
    );
    if let Some(why) = summary.nothing_to_check() {
        anyhow::bail!("the wake and budget checkers had too little to check: {why}");
    }
    Ok(())
}
