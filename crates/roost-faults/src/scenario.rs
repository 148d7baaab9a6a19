//! One scenario from start to verdict: the cluster and the worker, the workload's clients, the
//! fault schedule, the heal, the liveness probe, the settling of the wakes, then the snapshots
//! and the checkers. Everything is written to the scenario's directory as it goes.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use roost_check::{BudgetObservation, Op};
use roost_testkit::{Http, NetCluster};
use serde_json::json;

use crate::schedule::{inject, Fault};
use crate::wakes_costs::{self, Waker};
use crate::workload::{self, Recorder, Target};
use crate::{membership, observe, worker_cut, RunOptions, Scenario};

/// Checkout clients (processes 0..6 in the history); the wake client, the cost client and the
/// operator are processes 10, 11 and 12; the membership changes 20.
const CLIENTS: u64 = 6;
const ISSUES: usize = 5;
/// How long queued wakes may take to run after the heal.
const SETTLE: Duration = Duration::from_secs(60);

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

fn text(v: &serde_json::Value, field: &str) -> anyhow::Result<String> {
    v[field]
        .as_str()
        .map(String::from)
        .ok_or_else(|| anyhow::anyhow!("no `{field}` in {v}"))
}

/// The agents, issues, budget and keys the clients work with.
async fn setup(cluster: &NetCluster) -> anyhow::Result<Target> {
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
    for i in 0..ISSUES {
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
        urls,
        cid,
        cluster.admin_token.clone(),
        (agent_id, text(&key, "token")?),
        issues,
        waker,
    ))
}

/// After the heal: one write must succeed within the liveness window (recorded).
async fn liveness_probe(target: &Target, rec: &Recorder) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        for url in target.urls() {
            let admin = Http::new(url).with_token(&target.admin_token);
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
                    rec.record(u64::MAX, call, action, ok);
                    return;
                }
            }
            let unknown = roost_check::Outcome::Unknown { reason: None };
            rec.record(u64::MAX, call, action, unknown);
        }
    }
}

/// Runs one scenario to its verdict: `Ok` when every checker is green and had data to check.
pub async fn run(options: &RunOptions) -> anyhow::Result<Report> {
    let _one = one_at_a_time().await;
    anyhow::ensure!(
        NetCluster::available(),
        "the fault suite needs root and network namespaces (ip netns, iproute2)"
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
            let _ = std::fs::remove_dir_all(dir.join("node-1/data"));
            Ok(Report {
                dir,
                faults,
                elapsed: started.elapsed(),
            })
        }
        Err(e) => {
            println!("{}", cluster.log_tails(20));
            println!(
                "scenario {name} FAILED (seed {seed}): {e:#}\nhistory, snapshots and logs: {}\n\
                 reproduce: roost-faults run {name} --seed {seed} --secs {secs}",
                dir.display()
            );
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
    let target = setup(cluster).await?;
    let token = cluster
        .http(cluster.leader().await?)
        .post("/api/workers/join-tokens", json!({ "name": "faults" }))
        .await?
        .ok()?;
    let work_dir = cluster.start_worker(&text(&token, "token")?)?;
    let rec = Recorder::new();
    let deadline = Instant::now() + Duration::from_secs(options.secs);
    let mut clients: Vec<_> = (0..CLIENTS)
        .map(|p| {
            let client = workload::client(p, target.clone(), seed, deadline, rec.clone());
            tokio::spawn(client)
        })
        .collect();
    let wake = wakes_costs::wake_client(10, target.clone(), seed, deadline, rec.clone());
    clients.push(tokio::spawn(wake));
    let cost = wakes_costs::cost_client(11, target.clone(), seed, deadline, rec.clone());
    clients.push(tokio::spawn(cost));
    let operator = wakes_costs::operator(12, target.clone(), seed, deadline, rec.clone());
    clients.push(tokio::spawn(operator));
    let sampler = tokio::spawn(wakes_costs::sample_budget(target.clone(), seed, deadline));
    let mut rng = StdRng::seed_from_u64(seed);
    let faults = match fault_of(scenario) {
        Fault::WorkerCutOff => worker_cut::cycles(cluster, &work_dir, deadline).await,
        Fault::MembershipChange => {
            membership::cycles(cluster, &target, &rec, &mut rng, deadline).await
        }
        fault => inject(cluster, fault, &mut rng, deadline).await,
    }?;
    for c in clients {
        let _ = c.await;
    }
    let samples = sampler.await.unwrap_or_default();
    cluster.heal();
    let heal_ns = rec.now_ns();
    liveness_probe(&target, &rec).await;
    wakes_costs::settle(&target, &rec, SETTLE).await;
    verify(cluster, &target, &rec.ops(), &samples, heal_ns, dir).await?;
    Ok(faults)
}

async fn verify(
    cluster: &NetCluster,
    target: &Target,
    ops: &[Op],
    samples: &[BudgetObservation],
    heal_ns: i64,
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
        replicas.push(observe::snapshot(cluster, id, target, &acknowledged).await?);
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
    let summary = wakes_costs::summary(ops, &replicas[0], samples);
    println!("{summary}");
    let (mut failures, mut verdicts) = (Vec::new(), Vec::new());
    for verdict in observe::check_all(ops, &replicas, samples, heal_ns) {
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
