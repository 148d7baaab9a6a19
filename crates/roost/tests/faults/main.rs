//! The fault-injection suite (DESIGN.md section 11, tier 4): three real `roost server`
//! processes, each in its own network namespace, under a seeded schedule of faults while
//! clients check out, comment and end runs through random nodes; then the heal, and the
//! checkers of `roost-check` over the recorded history and every replica's final state.
//!
//! Run one scenario: `ROOST_FAULT_SEED=7 cargo test -p roost --test faults leader_partition --
//! --nocapture`. `ROOST_FAULT_SECS` sets the length (default 60 s), `ROOST_SOAK=1` makes it
//! 10 minutes. Needs root (network namespaces). The history, the snapshots and every node's
//! config and log are kept under `target/tmp/faults/<scenario>-<seed>/`.
//!
//! What is not covered yet (issue 7): membership changes under load, cost reports and wakes
//! in the workload (and the reservation and wake checkers over them).

mod observe;
mod worker_cut;
mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roost_testkit::{NetCluster, Signal};
use serde_json::json;

use workload::{Recorder, Target};

const CLIENTS: u64 = 6;
const ISSUES: usize = 5;

/// The faults a scenario injects, one every few seconds.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The leader alone on one side: it must step down; the majority elects and serves.
    LeaderPartition,
    /// One follower cut off from the others.
    FollowerIsolation,
    /// SIGKILL of the leader, restarted a few seconds later.
    LeaderKillLoop,
    /// SIGSTOP of the leader for longer than the election timeout, then SIGCONT.
    LeaderPause,
    /// A worker cut off from every node mid-run for three lease lengths.
    WorkerCutOff,
    /// Overlapping faults: delay and loss on one node's link while another is killed, paused
    /// or partitioned; a bridge (two majorities sharing one node); a flapping link.
    Mixed,
}

fn seconds() -> u64 {
    if std::env::var("ROOST_SOAK").is_ok_and(|v| v == "1") {
        return 600;
    }
    std::env::var("ROOST_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn seed() -> u64 {
    std::env::var("ROOST_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 % 1_000_000)
                .unwrap_or(1)
        })
}

/// Scenarios run one at a time: they share two cores.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

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
    let agent_id = agent["id"].as_str().unwrap_or_default().to_string();
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
        issues.push(issue["id"].as_str().unwrap_or_default().to_string());
    }
    Ok(Target {
        urls: cluster
            .ids()
            .into_iter()
            .map(|id| cluster.base_url(id))
            .collect(),
        admin_token: cluster.admin_token.clone(),
        agent_id,
        agent_key: key["token"].as_str().unwrap_or_default().to_string(),
        issues,
    })
}

/// Injects `fault` on a seeded schedule until `deadline`; the cluster is healed on return.
async fn inject(
    cluster: &mut NetCluster,
    fault: Fault,
    rng: &mut StdRng,
    deadline: Instant,
) -> anyhow::Result<usize> {
    let mut injected = 0;
    while Instant::now() + Duration::from_secs(8) < deadline {
        let calm = Duration::from_millis(rng.gen_range(1500..3500));
        tokio::time::sleep(calm).await;
        let hold = Duration::from_millis(rng.gen_range(2500..5000));
        let leader = cluster.leader().await?;
        let mut victim = leader;
        match fault {
            Fault::LeaderPartition => {
                cluster.isolate(leader)?;
                tokio::time::sleep(hold).await;
                cluster.heal();
            }
            Fault::FollowerIsolation => {
                let followers: Vec<u64> = cluster
                    .ids()
                    .into_iter()
                    .filter(|id| *id != leader)
                    .collect();
                victim = followers[rng.gen_range(0..followers.len())];
                cluster.isolate(victim)?;
                tokio::time::sleep(hold).await;
                cluster.heal();
            }
            Fault::LeaderKillLoop => {
                cluster.signal(leader, Signal::Kill);
                tokio::time::sleep(hold).await;
                cluster.restart(leader)?;
            }
            Fault::LeaderPause => {
                cluster.signal(leader, Signal::Stop);
                tokio::time::sleep(hold).await;
                cluster.signal(leader, Signal::Cont);
            }
            Fault::WorkerCutOff => anyhow::bail!("the worker scenario has its own schedule"),
            Fault::Mixed => {
                victim = mixed_step(cluster, rng, leader, hold).await?;
            }
        }
        injected += 1;
        println!("fault {injected}: {fault:?} on node {victim} for {hold:?}");
    }
    Ok(injected)
}

/// One step of the mixed schedule; returns the node it hit. Every node is up and every link
/// healed when it returns.
async fn mixed_step(
    cluster: &mut NetCluster,
    rng: &mut StdRng,
    leader: u64,
    hold: Duration,
) -> anyhow::Result<u64> {
    let ids = cluster.ids();
    let other = ids[rng.gen_range(0..ids.len())];
    let slow = ids[rng.gen_range(0..ids.len())];
    // Under everything else: 30-80 ms of delay and up to 10% loss on one node's link, where
    // the kernel has netem (sch_netem); a kernel without it gets the other faults only.
    if let Err(e) = cluster.netem(slow, rng.gen_range(30..80), rng.gen_range(0..10)) {
        println!("no delay/loss this step: {e}");
    }
    let victim = match rng.gen_range(0..4) {
        0 => {
            cluster.signal(other, Signal::Kill);
            tokio::time::sleep(hold).await;
            cluster.restart(other)?;
            other
        }
        1 => {
            cluster.signal(leader, Signal::Stop);
            tokio::time::sleep(hold).await;
            cluster.signal(leader, Signal::Cont);
            leader
        }
        2 => {
            // A bridge: the leader's side and another side share one node.
            let rest: Vec<u64> = ids.iter().copied().filter(|id| *id != leader).collect();
            cluster.partition(&[&[leader], &[rest[1]]])?;
            tokio::time::sleep(hold).await;
            rest[0]
        }
        _ => {
            // A flapping link: the leader isolated and healed every 300-700 ms.
            let until = Instant::now() + hold;
            while Instant::now() < until {
                cluster.isolate(leader)?;
                tokio::time::sleep(Duration::from_millis(rng.gen_range(300..700))).await;
                cluster.heal();
                tokio::time::sleep(Duration::from_millis(rng.gen_range(300..700))).await;
            }
            leader
        }
    };
    cluster.heal();
    Ok(victim)
}

/// After the heal: one write must succeed within the liveness window (recorded).
async fn liveness_probe(target: &Target, rec: &Recorder) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        for url in &target.urls {
            let admin = roost_testkit::Http::new(url.clone()).with_token(&target.admin_token);
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
                    rec.record(
                        u64::MAX,
                        call,
                        action,
                        roost_check::Outcome::Ok(Default::default()),
                    );
                    return;
                }
            }
            rec.record(
                u64::MAX,
                call,
                action,
                roost_check::Outcome::Unknown { reason: None },
            );
        }
    }
}

async fn scenario(name: &str, fault: Fault, tag: u8) -> anyhow::Result<()> {
    let _one = one_at_a_time().await;
    if !NetCluster::available() && std::env::var("ROOST_SKIP_FAULTS").is_ok_and(|v| v == "1") {
        println!("scenario {name} NOT RUN: no network namespaces here and ROOST_SKIP_FAULTS=1");
        return Ok(());
    }
    anyhow::ensure!(
        NetCluster::available(),
        "the fault suite needs root and network namespaces (ip netns, iproute2); CI runs it as \
         root. On a machine without them, ROOST_SKIP_FAULTS=1 leaves it out (never in CI)"
    );
    let (seed, secs) = (seed(), seconds());
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("faults/{name}-{seed}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    println!(
        "scenario {name}: seed {seed}, {secs} s, kept in {}",
        dir.display()
    );
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_roost"));
    let mut cluster = NetCluster::start(&binary, 3, tag, &dir).await?;
    let target = setup(&cluster).await?;
    let rec = Recorder::new();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|p| {
            tokio::spawn(workload::client(
                p,
                target.clone(),
                seed,
                deadline,
                rec.clone(),
            ))
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let injected = match fault {
        Fault::WorkerCutOff => {
            let token = cluster
                .http(1)
                .post("/api/workers/join-tokens", json!({ "name": "faults" }))
                .await?
                .ok()?;
            let work_dir = cluster.start_worker(token["token"].as_str().unwrap_or_default())?;
            worker_cut::cycles(&cluster, &work_dir, deadline).await
        }
        _ => inject(&mut cluster, fault, &mut rng, deadline).await,
    };
    let injected = match injected {
        Ok(n) => n,
        Err(e) => {
            println!("{}", cluster.log_tails(20));
            println!(
                "scenario {name} FAILED (seed {seed}): {e}\nlogs: {}",
                dir.display()
            );
            return Err(e);
        }
    };
    for c in clients {
        let _ = c.await;
    }
    cluster.heal();
    let heal_ns = rec.now_ns();
    liveness_probe(&target, &rec).await;
    let result = verify(&cluster, &target, &rec, heal_ns, &dir).await;
    if let Err(e) = &result {
        println!("{}", cluster.log_tails(20));
        println!(
            "scenario {name} FAILED (seed {seed}): {e}\nhistory and logs: {}",
            dir.display()
        );
    } else {
        println!("scenario {name}: {injected} faults, all checkers green (seed {seed})");
        let _ = std::fs::remove_dir_all(dir.join("node-1/data"));
    }
    result
}

async fn verify(
    cluster: &NetCluster,
    target: &Target,
    rec: &Arc<Recorder>,
    heal_ns: i64,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let ops = rec.ops();
    let mut history = String::new();
    for op in &ops {
        history.push_str(&op.to_json_line());
        history.push('\n');
    }
    std::fs::write(dir.join("history.jsonl"), history)?;
    let (index, hash) = observe::converged(cluster).await?;
    let mut replicas = Vec::new();
    for id in cluster.ids() {
        replicas.push(observe::snapshot(cluster, id, &target.issues).await?);
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
    let mut failures = Vec::new();
    for verdict in observe::check_all(&ops, &replicas, heal_ns) {
        println!(
            "  {}: {}",
            verdict.checker,
            if verdict.is_ok() { "ok" } else { "FAILED" }
        );
        if !verdict.is_ok() {
            failures.push(format!("{verdict:?}"));
        }
    }
    anyhow::ensure!(
        failures.is_empty(),
        "checkers failed: {}",
        failures.join("\n")
    );
    anyhow::ensure!(
        ok_ops > 50,
        "the workload barely ran: {ok_ops} ok operations"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_partition() -> anyhow::Result<()> {
    scenario("leader_partition", Fault::LeaderPartition, 41).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follower_isolation() -> anyhow::Result<()> {
    scenario("follower_isolation", Fault::FollowerIsolation, 42).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_kill_loop() -> anyhow::Result<()> {
    scenario("leader_kill_loop", Fault::LeaderKillLoop, 43).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_pause() -> anyhow::Result<()> {
    scenario("leader_pause", Fault::LeaderPause, 44).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_cut_off() -> anyhow::Result<()> {
    scenario("worker_cut_off", Fault::WorkerCutOff, 45).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_faults() -> anyhow::Result<()> {
    scenario("mixed_faults", Fault::Mixed, 46).await
}
