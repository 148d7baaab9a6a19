//! A cluster of real `roost server` processes, driven through the CLI with several addresses.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use roost_testkit::{wait_for, ProcessCluster, ProcessClusterBuilder};

use crate::support::roost_binary;

/// `roost server --config config`, its output discarded.
fn server_command(config: &Path) -> Command {
    roost_testkit::server_command(&roost_binary(), config)
}

pub(crate) fn cli(servers: &str, token: &str, args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(roost_binary())
        .args(args)
        .env("ROOST_SERVER", servers)
        .env("ROOST_TOKEN", token)
        .output()?)
}

pub(crate) fn stdout_json(out: &Output) -> anyhow::Result<Value> {
    anyhow::ensure!(
        out.status.success(),
        "roost failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Elections slower than the defaults for the e2e clusters (900-1200 ms of silence): these
/// tests share 2 cores with the rest of the suite and test what a process does, not how fast a
/// cluster fails over.
const TEST_RAFT: &str =
    "[raft]\nheartbeat_interval_ms = 50\nelection_timeout_min_ms = 300\nelection_timeout_max_ms = 600\n\n";

/// The e2e tests' three `roost server` processes in `dir` (`node-{id}.toml`, data in
/// `node-{id}/`, log in `node-{id}.log`) with `TEST_RAFT` timing, each node's config also given
/// the text `node_config(id)` returns (top-level keys, then tables); not started.
pub(crate) fn three_servers(
    dir: &Path,
    node_config: impl Fn(u64) -> String + Send + Sync + 'static,
) -> ProcessClusterBuilder {
    ProcessCluster::builder(roost_binary())
        .dir(dir)
        .node_config(move |id| format!("{}{TEST_RAFT}", node_config(id)))
        .env("ROOST_LOG", "info,openraft=warn")
}

/// Starts three `roost server` processes in `dir` that form one cluster from their configs
/// ([`three_servers`]) and returns them with the admin token node 1 writes.
pub(crate) async fn start_three_servers(dir: &Path) -> anyhow::Result<(ProcessCluster, String)> {
    start_three_servers_with(dir, |_| String::new()).await
}

/// [`start_three_servers`], each node's config given the text `node_config(id)` returns.
pub(crate) async fn start_three_servers_with(
    dir: &Path,
    node_config: impl Fn(u64) -> String + Send + Sync + 'static,
) -> anyhow::Result<(ProcessCluster, String)> {
    let cluster = three_servers(dir, node_config).start().await?;
    let token = cluster.admin_token.clone();
    Ok((cluster, token))
}

/// Three `roost server` processes form a cluster from their configs; the CLI, given every
/// address, keeps working after the leader is killed with SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_server_processes_survive_kill_9_of_the_leader() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let (mut cluster, token) = start_three_servers(dir.path()).await?;
    let servers = cluster
        .nodes
        .iter()
        .map(|n| n.http.clone())
        .collect::<Vec<_>>()
        .join(",");

    let status = wait_for("every member healthy", Duration::from_secs(30), || {
        let (servers, token) = (servers.clone(), token.clone());
        async move {
            let s =
                stdout_json(&cli(&servers, &token, &["cluster", "status", "--json"]).ok()?).ok()?;
            let healthy = s["members"]
                .as_array()?
                .iter()
                .all(|m| ["leader", "healthy"].contains(&m["health"].as_str().unwrap_or("")));
            healthy.then_some(s)
        }
    })
    .await?;
    let leader = status["leaderId"].as_u64().unwrap_or(0);
    assert!((1..=3).contains(&leader), "{status}");

    let out = cli(
        &servers,
        &token,
        &[
            "company", "create", "--name", "Before", "--prefix", "BEF", "-q",
        ],
    )?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    cluster.kill(leader)?;
    // The CLI is still given the dead node's address first or second: it must fail over.
    let out = cli(
        &servers,
        &token,
        &[
            "company", "create", "--name", "After", "--prefix", "AFT", "-q",
        ],
    )?;
    assert!(
        out.status.success(),
        "write after the leader died: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let companies = stdout_json(&cli(&servers, &token, &["company", "list", "--json"])?)?;
    let prefixes: Vec<&str> = companies
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["issuePrefix"].as_str())
        .collect();
    assert_eq!(prefixes, vec!["BEF", "AFT"]);
    let status = stdout_json(&cli(&servers, &token, &["cluster", "status", "--json"])?)?;
    assert_ne!(status["leaderId"].as_u64(), Some(leader), "{status}");
    Ok(())
}

/// The soft and hard "Max open files" of process `pid`.
fn open_file_limits(pid: u32) -> Option<(String, String)> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut words = line.split_whitespace().skip(3);
    Some((words.next()?.to_string(), words.next()?.to_string()))
}

/// Regression: `roost server` kept the usual soft limit of 1024 open files; a leader with about
/// a thousand workers ran out of sockets, spun in tonic's accept loop and lost its leadership.
/// It now raises the soft limit to the hard limit at start.
#[tokio::test]
async fn a_server_raises_its_open_file_limit_to_the_hard_limit() -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir()?;
    let config = one_node_config(dir.path(), "")?;
    let mut command = server_command(&config);
    // SAFETY: setrlimit in the child before exec touches only the child's limits.
    unsafe {
        command.pre_exec(|| {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = 256.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    let limits = wait_for(
        "the server's raised limit",
        Duration::from_secs(20),
        || async { open_file_limits(pid).filter(|(soft, hard)| soft == hard && soft != "256") },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}: limits now {:?}", open_file_limits(pid)));
    let _ = child.kill();
    let _ = child.wait();
    let (soft, hard) = limits?;
    assert_eq!(soft, hard);
    Ok(())
}

/// A single-node config in `dir` with free ports, `extra` appended.
fn one_node_config(dir: &Path, extra: &str) -> anyhow::Result<PathBuf> {
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 1\ndata_dir = \"{}\"\nhttp_listen = \"{}\"\ngrpc_listen = \"{}\"\npeer_listen = \"{}\"\n{extra}",
            dir.join("data").display(),
            roost_testkit::ports::free_addr()?,
            roost_testkit::ports::free_addr()?,
            roost_testkit::ports::free_addr()?
        ),
    )?;
    Ok(config)
}

/// Threads of process `pid` that belong to its async runtime (named `roost-runtime`).
fn runtime_threads_of(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "roost-runtime")
        .count()
}

/// `runtime_threads` sizes the server's runtime, the flag over `ROOST_RUNTIME_THREADS` over the
/// file: an operator sharing a machine between nodes relies on each getting its share.
#[tokio::test]
async fn a_server_runs_the_runtime_threads_it_is_configured_with() -> anyhow::Result<()> {
    // The file says 2 in both cases (this CI machine's CPU count, the default): the
    // environment's 3 wins over it, and the flag's 1 over both.
    for (env, flag, expected) in [(Some("3"), None, 3usize), (Some("3"), Some("1"), 1)] {
        let dir = tempfile::tempdir()?;
        let config = one_node_config(dir.path(), "runtime_threads = 2\n")?;
        let mut command = server_command(&config);
        command.env_remove("ROOST_RUNTIME_THREADS");
        if let Some(v) = env {
            command.env("ROOST_RUNTIME_THREADS", v);
        }
        if let Some(v) = flag {
            command.args(["--runtime-threads", v]);
        }
        let mut child = command.spawn()?;
        let pid = child.id();
        // Blocking-pool threads share the name and leave after 10 s idle: wait for the count.
        let seen = wait_for(
            "the server's runtime threads",
            Duration::from_secs(30),
            || async { (runtime_threads_of(pid) == expected).then_some(()) },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}: {} runtime threads now", runtime_threads_of(pid)));
        let _ = child.kill();
        let _ = child.wait();
        seen?;
    }
    Ok(())
}
