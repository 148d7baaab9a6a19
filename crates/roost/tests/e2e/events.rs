//! The event stream: `roost watch --json` follows a company's events over
//! SSE from the leader of three `roost server` processes; the leader is killed with SIGKILL
//! mid-stream, the watch resumes on another node from the last `seq` it printed, and what it
//! printed is exactly the company's activity: nothing missed, nothing repeated, in order.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use roost_testkit::wait_for;

use crate::processes::{cli, start_three_servers, stdout_json};
use crate::support::roost_binary;

/// Creates an issue titled `title` in company `cid` through any of `servers`.
fn create_issue(servers: &str, token: &str, cid: &str, title: &str) -> anyhow::Result<()> {
    let out = cli(
        servers,
        token,
        &["issue", "create", "--company", cid, "--title", title, "-q"],
    )?;
    anyhow::ensure!(
        out.status.success(),
        "issue create {title}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_on_another_node_across_a_leader_kill_with_nothing_missed_or_repeated(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let (mut cluster, token) = start_three_servers(dir.path()).await?;
    let all = cluster
        .nodes
        .iter()
        .map(|n| n.http.clone())
        .collect::<Vec<_>>();
    let status = wait_for("a leader", Duration::from_secs(30), || {
        let (servers, token) = (all.join(","), token.clone());
        async move {
            let s =
                stdout_json(&cli(&servers, &token, &["cluster", "status", "--json"]).ok()?).ok()?;
            s["leaderId"].as_u64().filter(|l| *l > 0).map(|_| s)
        }
    })
    .await?;
    let leader = status["leaderId"].as_u64().unwrap_or(0);
    // The watch starts on the leader, so that killing it breaks the stream.
    let leader_http = cluster
        .nodes
        .iter()
        .find(|n| n.id == leader)
        .map(|n| n.http.clone())
        .unwrap_or_default();
    let mut ordered = vec![leader_http.clone()];
    ordered.extend(all.iter().filter(|h| **h != leader_http).cloned());
    let servers = ordered.join(",");

    let out = cli(
        &servers,
        &token,
        &[
            "company", "create", "--name", "Watched", "--prefix", "WAT", "-q",
        ],
    )?;
    anyhow::ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cid = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let mut watch = Command::new(roost_binary())
        .args(["watch", "--company", &cid, "--json"])
        .env("ROOST_SERVER", &servers)
        .env("ROOST_TOKEN", &token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let stdout = watch
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    seen.lock().unwrap_or_else(|p| p.into_inner()).push(v);
                }
            }
        })
    };
    let created = |seen: &Arc<Mutex<Vec<Value>>>| {
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|e| e["action"] == "issue.created")
            .count()
    };

    for n in 0..5 {
        create_issue(&servers, &token, &cid, &format!("before {n}"))?;
    }
    wait_for(
        "the watch to print 5 issues",
        Duration::from_secs(20),
        || {
            let seen = seen.clone();
            async move { (created(&seen) >= 5).then_some(()) }
        },
    )
    .await?;

    cluster.kill(leader)?;
    for n in 0..5 {
        create_issue(&servers, &token, &cid, &format!("after {n}"))?;
    }
    let resumed = wait_for(
        "the watch to resume elsewhere and print 10 issues",
        Duration::from_secs(30),
        || {
            let seen = seen.clone();
            async move { (created(&seen) >= 10).then_some(()) }
        },
    )
    .await;
    let _ = watch.kill();
    if let Err(e) = resumed {
        let mut stderr = String::new();
        if let Some(mut err) = watch.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
        }
        anyhow::bail!("{e}; roost watch said: {stderr}");
    }
    let _ = watch.wait();
    let _ = reader.join();

    let printed: Vec<u64> = seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    let activity = stdout_json(&cli(
        &servers,
        &token,
        &["activity", "--company", &cid, "--limit", "1000", "--json"],
    )?)?;
    let mut expected: Vec<u64> = activity
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    expected.sort_unstable();
    assert_eq!(
        printed, expected,
        "the watch printed each of the company's events once, in order"
    );
    Ok(())
}

/// A node that stops ends its open event streams at once instead of waiting out its shutdown
/// grace for them (here a minute), and the stream's reader sees it end.
#[tokio::test]
async fn a_stopping_node_ends_its_event_streams_without_waiting_out_its_grace() -> anyhow::Result<()>
{
    let node = roost_testkit::TestNode::start_with(|c| c.shutdown_grace_secs = 60).await?;
    let url = format!(
        "{}/api/companies/{}/events",
        node.http().base(),
        node.company_id
    );
    let mut stream = reqwest::Client::new()
        .get(url)
        .bearer_auth(&node.admin_token)
        .send()
        .await?;
    anyhow::ensure!(stream.status().is_success(), "{}", stream.status());
    let first = stream.chunk().await?.unwrap_or_default();
    let first = String::from_utf8_lossy(&first);
    assert!(first.starts_with("id: "), "the backlog first: {first}");

    let stopped = tokio::time::timeout(Duration::from_secs(20), async {
        let reader = tokio::spawn(async move {
            // Whatever else arrives, the stream ends.
            while let Ok(Some(_)) = stream.chunk().await {}
        });
        node.shutdown().await?;
        reader.await?;
        anyhow::Ok(())
    })
    .await;
    assert!(
        stopped.is_ok(),
        "the node stopped and the stream ended well within the one-minute grace"
    );
    stopped?
}
