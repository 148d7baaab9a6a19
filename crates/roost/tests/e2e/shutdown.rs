//! Clean shutdown with real processes: SIGTERM (and SIGINT) stop `roost dev`, `roost server`
//! and `roost run-worker` within their `shutdown_grace_secs` (plus the watchdog's margin,
//! `crates/roost/src/stopping.rs`), agents finish or are stopped and reported, and a stopping
//! leader hands its leadership over without losing an acknowledged write.

use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use roost_testkit::{wait_for, Http, RoostProcess, TestNode};

use crate::processes::start_three_servers_with;
use crate::support::{dev_worker_online, roost_binary, str_field};

const START: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(30);
/// The watchdog's margin past the grace (`stopping.rs`, `HARD_MARGIN`).
const MARGIN: Duration = Duration::from_secs(2);

/// SIGTERM or SIGINT to `pid`.
fn signal(pid: u32, signal: i32) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(pid)?;
    // SAFETY: kill(2) with a child's pid and a signal number has no memory effects.
    anyhow::ensure!(unsafe { libc::kill(pid, signal) } == 0, "kill failed");
    Ok(())
}

/// Whether the agent whose pid is in `pid_file` still runs (a zombie has exited).
fn agent_alive(pid_file: &Path) -> bool {
    let Ok(pid) = std::fs::read_to_string(pid_file) else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .is_ok_and(|stat| !stat.contains(") Z "))
}

/// Waits until `process` exits; returns its status and how long after `since` it exited.
async fn dev_exit(
    process: RoostProcess,
    since: Instant,
    deadline: Duration,
) -> anyhow::Result<(std::process::ExitStatus, Duration)> {
    let process = Arc::new(Mutex::new(process));
    let status = wait_for("roost dev to exit", deadline, || {
        let process = process.clone();
        async move { process.lock().ok()?.exit_status().ok().flatten() }
    })
    .await?;
    Ok((status, since.elapsed()))
}

/// Waits until `child` exits; returns its status and how long after `since` it exited.
async fn child_exit(
    child: &mut Child,
    since: Instant,
    deadline: Duration,
) -> anyhow::Result<(std::process::ExitStatus, Duration)> {
    let child = Mutex::new(child);
    let status = wait_for("the process to exit", deadline, || async {
        child.lock().ok()?.try_wait().ok().flatten()
    })
    .await?;
    Ok((status, since.elapsed()))
}

/// Runs of the company, by id.
async fn run_status(admin: &Http, run_id: &str) -> Option<Value> {
    admin
        .get(&format!("/api/heartbeat-runs/{run_id}"))
        .await
        .ok()?
        .ok()
        .ok()
}

/// An agent running `script` with the `process` adapter; returns its id.
async fn process_agent(
    admin: &Http,
    company: &str,
    name: &str,
    script: &str,
) -> anyhow::Result<String> {
    let body = json!({
        "name": name,
        "adapterConfig": { "command": "sh", "args": ["-c", script], "cwd": "." },
    });
    let agent = admin
        .post(&format!("/api/companies/{company}/agents"), body)
        .await?
        .ok()?;
    Ok(str_field(&agent, "id"))
}

/// Wakes `agent` and waits until its run is `running`; returns the run id.
async fn wake_running(admin: &Http, company: &str, agent: &str) -> anyhow::Result<String> {
    admin
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    wait_for("the agent's run to be running", WAIT, || {
        crate::support::run_in_status(admin, company, agent, "running")
    })
    .await
}

/// An agent that ignores SIGTERM and never ends on its own, its pid in `pid_file` (relative
/// to the work dir it runs in).
fn stubborn_script(pid_file: &str) -> String {
    format!("echo $$ > {pid_file}; trap '' TERM; while true; do sleep 0.2; done")
}

/// Regression: after the README walkthrough (a run started by hand, the dev worker's connection
/// open), `roost dev` printed "stopping..." on SIGTERM and went on running; SIGINT did nothing
/// more. The worker's renewal task outlived its aborted connection and kept the connection's stream
/// open, so the node's stop waited its whole grace for it, and tokio, holding the signal
/// handlers, swallowed every later signal while anything after the grace (Raft's stop, the
/// runtime's teardown) could still hang. Now nothing holds the stop: it takes milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_dev_ignored_sigterm_after_a_hand_started_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let process = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START)?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    dev_worker_online(&admin).await?;
    let agent = admin
        .post(
            &format!("/api/companies/{}/agents", process.company_id),
            json!({ "name": "coder" }),
        )
        .await?
        .ok()?;
    let run = admin
        .post(
            &format!("/api/agents/{}/runs", str_field(&agent, "id")),
            json!({}),
        )
        .await?
        .ok()?;
    assert_eq!(run["status"], "running", "{run}");

    let sent = Instant::now();
    process.signal(libc::SIGTERM)?;
    let (status, took) = dev_exit(process, sent, Duration::from_secs(10) + MARGIN).await?;
    eprintln!("roost dev stopped {took:?} after SIGTERM");
    assert!(status.success(), "roost dev exited with {status}");
    // Before the fix every stop took the whole 5 s grace: nothing is left to wait for.
    assert!(
        took < Duration::from_secs(4),
        "roost dev took {took:?} to stop"
    );
    Ok(())
}

/// (a) `roost dev` with an agent that ignores SIGTERM: the agent is stopped at the grace
/// (SIGKILL after SIGTERM), `roost dev` exits within its bound, non-zero (work was cut off),
/// and the run is `cancelled` in the state the next start reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roost_dev_stops_a_running_agent_at_its_grace_and_reports_the_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let grace = Duration::from_secs(4);
    let process = RoostProcess::spawn_dev_with(
        &roost_binary(),
        dir.path(),
        START,
        &["--shutdown-grace-secs", "4"],
    )?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    dev_worker_online(&admin).await?;
    let company = process.company_id.clone();
    let agent = process_agent(&admin, &company, "stubborn", &stubborn_script("agent.pid")).await?;
    let run_id = wake_running(&admin, &company, &agent).await?;
    let pid_file = dir.path().join("work").join("agent.pid");
    wait_for("the agent's pid", WAIT, || async {
        agent_alive(&pid_file).then_some(())
    })
    .await?;

    let sent = Instant::now();
    process.signal(libc::SIGTERM)?;
    let (status, took) = dev_exit(process, sent, grace + MARGIN + WAIT).await?;
    eprintln!("roost dev with a running agent stopped {took:?} after SIGTERM ({status})");
    assert!(took <= grace + MARGIN, "roost dev took {took:?}");
    assert!(
        !status.success(),
        "work was cut off: exit non-zero, not {status}"
    );
    assert!(!agent_alive(&pid_file), "the agent outlived roost dev");

    let again = RoostProcess::spawn_dev(&roost_binary(), dir.path(), START)?;
    let admin = Http::new(again.base_url.clone()).with_token(&again.admin_token);
    let run = run_status(&admin, &run_id)
        .await
        .ok_or_else(|| anyhow::anyhow!("run {run_id} not found after the restart"))?;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert!(
        run["error"]
            .as_str()
            .unwrap_or("")
            .contains("shutting down"),
        "{run}"
    );
    Ok(())
}

/// A second signal does not wait for the grace: SIGTERM then SIGINT stop `roost dev` and its
/// stubborn agent at once, non-zero, although the grace is 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_roost_dev_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let process = RoostProcess::spawn_dev_with(
        &roost_binary(),
        dir.path(),
        START,
        &["--shutdown-grace-secs", "60"],
    )?;
    let admin = Http::new(process.base_url.clone()).with_token(&process.admin_token);
    dev_worker_online(&admin).await?;
    let company = process.company_id.clone();
    let agent = process_agent(&admin, &company, "stubborn", &stubborn_script("agent.pid")).await?;
    wake_running(&admin, &company, &agent).await?;
    let pid_file = dir.path().join("work").join("agent.pid");
    wait_for("the agent's pid", WAIT, || async {
        agent_alive(&pid_file).then_some(())
    })
    .await?;

    let sent = Instant::now();
    process.signal(libc::SIGTERM)?;
    process.signal(libc::SIGINT)?;
    let (status, took) = dev_exit(process, sent, WAIT).await?;
    eprintln!("roost dev stopped {took:?} after SIGTERM and SIGINT ({status})");
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} of a 60 s grace"
    );
    assert!(
        !status.success(),
        "a forced stop exits non-zero, not {status}"
    );
    assert!(!agent_alive(&pid_file), "the agent outlived roost dev");
    Ok(())
}

/// (b) Three `roost server`s under a stream of acknowledged writes through every node: the
/// leader gets SIGTERM, hands its leadership over and exits 0 within its grace; the other two
/// go on, and every acknowledged write is read back through a survivor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_the_leader_hands_over_and_loses_no_acknowledged_write() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let grace = Duration::from_secs(5);
    let (mut cluster, token) =
        start_three_servers_with(dir.path(), |_| "shutdown_grace_secs = 5\n".into()).await?;
    let https: Vec<Http> = cluster
        .nodes
        .iter()
        .map(|n| Http::new(n.http.clone()).with_token(&token))
        .collect();
    let admin = |i: usize| https[i].clone();
    let company = wait_for("a leader to create the company", START, || async {
        admin(0)
            .post_with_key(
                "/api/companies",
                json!({ "name": "Stop", "issuePrefix": "STP" }),
                "stop-company",
            )
            .await
            .ok()?
            .ok()
            .ok()
    })
    .await?;
    let company = str_field(&company, "id");
    let leader_seen_by = |i: usize| {
        let http = admin(i);
        async move {
            let status = http.get("/api/cluster/status").await.ok()?.ok().ok()?;
            status["leaderId"].as_u64()
        }
    };
    let leader = wait_for("a leader", WAIT, || leader_seen_by(0)).await?;
    let leader_at = cluster
        .nodes
        .iter()
        .position(|n| n.id == leader)
        .ok_or_else(|| anyhow::anyhow!("leader {leader} is not a node"))?;

    // Writers: one issue per write, through each node in turn; only answered writes count.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3usize {
        let https: Vec<Http> = (0..3).map(admin).collect();
        let (acked, stop, company) = (acked.clone(), stop.clone(), company.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let title = format!("w{w}-{n}");
                let http = &https[(w + n) % https.len()];
                let body = json!({ "title": title.clone() });
                let reply = http
                    .post_with_key(&format!("/api/companies/{company}/issues"), body, &title)
                    .await;
                if reply.is_ok_and(|r| r.status.is_success()) {
                    if let Ok(mut acked) = acked.lock() {
                        acked.push(title);
                    }
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    let count = |acked: &Arc<Mutex<Vec<String>>>| acked.lock().map(|a| a.len()).unwrap_or(0);
    wait_for("writes acknowledged before the stop", WAIT, || async {
        (count(&acked) >= 30).then_some(())
    })
    .await?;

    let sent = Instant::now();
    signal(cluster.nodes[leader_at].pid(), libc::SIGTERM)?;
    let survivor = (leader_at + 1) % 3;
    let new_leader = wait_for("another leader", WAIT, || async {
        leader_seen_by(survivor).await.filter(|l| *l != leader)
    })
    .await
    .map_err(|e| {
        // Seen once under a full suite's load (no new leader in 30 s): keep what the nodes
        // said, to tell a stalled hand-over from a stalled election.
        let tails: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| {
                let log = dir.path().join(format!("node-{}.log", n.id));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                format!(
                    "--- node {} ---\n{}",
                    n.id,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect();
        e.context(tails.join("\n"))
    })?;
    let elected = sent.elapsed();
    let (status, took) = {
        let node = Mutex::new(&mut cluster.nodes[leader_at]);
        let status = wait_for("the old leader to exit", grace + MARGIN + WAIT, || async {
            node.lock().ok()?.try_wait().ok().flatten()
        })
        .await?;
        (status, sent.elapsed())
    };
    let at_exit = count(&acked);
    wait_for("writes acknowledged after the stop", WAIT, || async {
        (count(&acked) >= at_exit + 20).then_some(())
    })
    .await?;
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await?;
    }
    let log = std::fs::read_to_string(&cluster.nodes[leader_at].log).unwrap_or_default();
    eprintln!(
        "leader {leader} stopped {took:?} after SIGTERM ({status}); node {new_leader} led \
         {elected:?} after it; handed over: {}",
        log.contains("handed leadership over")
    );
    if !log.contains("handed leadership over") {
        // Not a failure (the others elect once it stops), but worth seeing why.
        let stop_lines: Vec<&str> = log
            .lines()
            .skip_while(|l| !l.contains("stopping"))
            .collect();
        eprintln!(
            "the old leader's log from its stop:\n{}",
            stop_lines.join("\n")
        );
    }
    assert!(status.success(), "the old leader exited with {status}");
    assert!(took <= grace + MARGIN, "the old leader took {took:?}");

    // Every acknowledged write, read through a survivor that does not lead.
    let reader = (0..3)
        .find(|i| *i != leader_at && cluster.nodes[*i].id != new_leader)
        .unwrap_or(survivor);
    let acked = acked.lock().map(|a| a.clone()).unwrap_or_default();
    let listed = admin(reader)
        .get(&format!("/api/companies/{company}/issues?limit=5000"))
        .await?
        .ok()?;
    let titles: std::collections::HashSet<&str> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["title"].as_str())
        .collect();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|t| !titles.contains(t.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged writes lost: {lost:?}",
        lost.len(),
        acked.len()
    );
    Ok(())
}

/// (c) `roost run-worker` on SIGTERM: an agent that ends within the grace finishes and is
/// reported `succeeded`; one that ignores SIGTERM is stopped at the grace and reported
/// `cancelled`; the worker exits within its bound, non-zero (a run was cut off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_worker_lets_agents_finish_within_its_grace_and_stops_the_rest() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let dir = tempfile::tempdir()?;
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work)?;
    let join = node
        .admin
        .post("/api/workers/join-tokens", json!({}))
        .await?
        .ok()?;
    let grace = Duration::from_secs(6);
    let config = dir.path().join("worker.toml");
    std::fs::write(
        &config,
        format!(
            "worker_id = \"stopping\"\nservers = [\"{}\"]\napi_url = \"{}\"\njoin_token = \"{}\"\n\
             slots = 2\nwork_dir = \"{}\"\ngrace_sec = 10\nshutdown_grace_secs = 6\n",
            node.server().grpc_addr(),
            node.admin.base(),
            str_field(&join, "token"),
            work.display()
        ),
    )?;
    let log = dir.path().join("worker.log");
    let mut worker =
        crate::fleet::spawn_logged(&["run-worker", "--config"], &config, &log, "info")?;
    wait_for("the worker online", START, || async {
        let workers = node.admin.get("/api/workers").await.ok()?.ok().ok()?;
        workers
            .as_array()?
            .iter()
            .any(|w| w["id"] == "stopping" && w["status"] == "online")
            .then_some(())
    })
    .await?;
    let company = node.company_id.clone();
    let finisher = process_agent(
        &node.admin,
        &company,
        "finisher",
        "echo $$ > finisher.pid; sleep 2; echo finished",
    )
    .await?;
    let stubborn = process_agent(
        &node.admin,
        &company,
        "stubborn",
        &stubborn_script("stubborn.pid"),
    )
    .await?;
    let finisher_run = wake_running(&node.admin, &company, &finisher).await?;
    let stubborn_run = wake_running(&node.admin, &company, &stubborn).await?;
    let stubborn_pid = work.join("stubborn.pid");
    wait_for("the stubborn agent's pid", WAIT, || async {
        agent_alive(&stubborn_pid).then_some(())
    })
    .await?;

    let sent = Instant::now();
    signal(worker.id(), libc::SIGTERM)?;
    let (status, took) = child_exit(&mut worker, sent, grace + MARGIN + WAIT).await?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    eprintln!("roost run-worker stopped {took:?} after SIGTERM ({status})");
    assert!(took <= grace + MARGIN, "the worker took {took:?}:\n{text}");
    assert!(
        !status.success(),
        "a run was cut off: exit non-zero:\n{text}"
    );
    assert!(
        !agent_alive(&stubborn_pid),
        "the stubborn agent outlived its worker"
    );

    let finished = run_status(&node.admin, &finisher_run)
        .await
        .unwrap_or_default();
    assert_eq!(finished["status"], "succeeded", "{finished}\n{text}");
    let cut = run_status(&node.admin, &stubborn_run)
        .await
        .unwrap_or_default();
    assert_eq!(cut["status"], "cancelled", "{cut}\n{text}");
    assert!(
        cut["error"]
            .as_str()
            .unwrap_or("")
            .contains("shutting down"),
        "{cut}"
    );
    Ok(())
}
