//! Workers with an identity, with real processes: three `roost server`s and
//! `roost run-worker`s. A worker's join token is exchanged once for the credential the worker
//! keeps in its work dir; restarted, it registers with that credential alone; another machine
//! claiming its id with another join token is refused; revoking the worker through one node
//! ends its session, and its running run becomes `lost` and is retried once.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use roost_testkit::{wait_for, Http};

use roost_testkit::ServerNode;

use crate::processes::start_three_servers;
use crate::support::{roost_binary, str_field};

const WAIT: Duration = Duration::from_secs(60);
const WORKER_ID: &str = "wk-ident";

/// A `roost run-worker` process, killed when dropped; its log is `log`.
struct WorkerProcess {
    child: Child,
    log: PathBuf,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl WorkerProcess {
    fn stop(self) {
        drop(self);
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the worker's log holds `needle`.
    async fn wait_log(&self, what: &str, needle: &str) -> anyhow::Result<()> {
        wait_for(what, WAIT, || async {
            self.log_text().contains(needle).then_some(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}; worker log:\n{}", self.log_text()))
    }
}

/// Starts `roost run-worker` as `WORKER_ID`, working in `work`, with `join_token` (empty: none)
/// in its config; `name` names its config and log files in `dir`.
fn spawn_worker(
    dir: &Path,
    name: &str,
    nodes: &[ServerNode],
    join_token: &str,
    work: &Path,
) -> anyhow::Result<WorkerProcess> {
    std::fs::create_dir_all(work)?;
    let servers = nodes
        .iter()
        .map(|n| format!("\"{}\"", n.grpc))
        .collect::<Vec<_>>()
        .join(", ");
    let config = format!(
        "worker_id = \"{WORKER_ID}\"\nservers = [{servers}]\napi_url = \"{}\"\n\
         join_token = \"{join_token}\"\nslots = 1\nwork_dir = \"{}\"\ngrace_sec = 1\n",
        nodes[0].http,
        work.display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config)?;
    let log = dir.join(format!("{name}.log"));
    let child = Command::new(roost_binary())
        .args(["run-worker", "--config"])
        .arg(&path)
        .env("ROOST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("ROOST_JOIN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    Ok(WorkerProcess { child, log })
}

/// A list read through one node. While the node knows no leader (an election on this busy
/// machine) it answers 503 with a retry hint, and the read is tried again, as a client does:
/// a 503 failed this test once in a full run.
async fn list(admin: &Http, path: &str) -> anyhow::Result<Vec<Value>> {
    let reply = wait_for(&format!("GET {path} answered"), WAIT, || async {
        let reply = admin.get(path).await.ok()?;
        (reply.status != 503).then_some(reply)
    })
    .await?;
    let body = reply.ok()?;
    Ok(body.as_array().cloned().unwrap_or_default())
}

async fn worker_status(admin: &Http) -> Option<String> {
    let workers = list(admin, "/api/workers").await.ok()?;
    let w = workers.iter().find(|w| w["id"] == WORKER_ID)?;
    w["status"].as_str().map(String::from)
}

/// The one join token with this id, as listed.
async fn join_token_row(admin: &Http, id: &str) -> anyhow::Result<Value> {
    list(admin, "/api/workers/join-tokens")
        .await?
        .into_iter()
        .find(|t| t["id"] == id)
        .ok_or_else(|| anyhow::anyhow!("join token {id} not listed"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_exchanges_its_join_token_once_and_a_revoked_worker_is_lost() -> anyhow::Result<()>
{
    use std::os::unix::fs::PermissionsExt;
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let (cluster, admin_token) = start_three_servers(dir.path()).await?;
    let admin = |n: usize| Http::new(cluster.nodes[n].http.clone()).with_token(&admin_token);
    let company = wait_for("a leader to create the company", WAIT, || async {
        let body = json!({ "name": "Ident", "issuePrefix": "IDN" });
        admin(0)
            .post_with_key("/api/companies", body, "ident-company")
            .await
            .ok()?
            .ok()
            .ok()
    })
    .await?;
    let company = str_field(&company, "id");

    // First start: the join token (two uses) is exchanged for the worker's own credential.
    let join = admin(0)
        .post(
            "/api/workers/join-tokens",
            json!({ "name": "rack", "maxUses": 2 }),
        )
        .await?
        .ok()?;
    let (join_id, join_token) = (str_field(&join, "id"), str_field(&join, "token"));
    let work = dir.path().join("work-a");
    let first = spawn_worker(dir.path(), "worker-a", &cluster.nodes, &join_token, &work)?;
    wait_for("the worker online", WAIT, || async {
        (worker_status(&admin(1)).await? == "online").then_some(())
    })
    .await?;
    let file = work.join(roost_worker::CREDENTIAL_FILE);
    let credential = std::fs::read_to_string(&file)?.trim().to_string();
    assert!(credential.starts_with(roost_worker::WORKER_CREDENTIAL_PREFIX));
    assert_eq!(
        std::fs::metadata(&file)?.permissions().mode() & 0o777,
        0o600
    );
    let creds = list(&admin(2), "/api/workers/credentials").await?;
    assert_eq!(creds.len(), 1, "{creds:?}");
    let cred_id = str_field(&creds[0], "id");
    assert_eq!(creds[0]["workerId"], WORKER_ID, "{creds:?}");
    assert_eq!(creds[0]["joinTokenId"], join_id.as_str(), "{creds:?}");
    assert_eq!(creds[0]["revoked"], false, "{creds:?}");
    let row = join_token_row(&admin(2), &join_id).await?;
    assert_eq!(row["workerIds"], json!([WORKER_ID]), "one use spent: {row}");

    // Restarted without its join token: it registers with its credential, spending no use.
    first.stop();
    let restarted = spawn_worker(dir.path(), "worker-a-again", &cluster.nodes, "", &work)?;
    restarted
        .wait_log("the restarted worker to register", "registered")
        .await?;
    let creds = list(&admin(1), "/api/workers/credentials").await?;
    assert_eq!(creds.len(), 1, "no second exchange: {creds:?}");
    let row = join_token_row(&admin(1), &join_id).await?;
    assert_eq!(row["workerIds"], json!([WORKER_ID]), "{row}");

    // Another machine claiming the id with another join token is refused, clearly.
    let other = admin(2)
        .post("/api/workers/join-tokens", json!({ "name": "intruder" }))
        .await?
        .ok()?;
    let intruder = spawn_worker(
        dir.path(),
        "intruder",
        &cluster.nodes,
        &str_field(&other, "token"),
        &dir.path().join("work-b"),
    )?;
    intruder
        .wait_log(
            "the second worker with the same id to be refused",
            "already has a worker credential",
        )
        .await?;
    intruder.stop();
    let creds = list(&admin(0), "/api/workers/credentials").await?;
    assert_eq!(creds.len(), 1, "the intruder got no credential: {creds:?}");

    // A run on the worker.
    let agent = admin(0)
        .post(
            &format!("/api/companies/{company}/agents"),
            json!({
                "name": "sleeper",
                "adapterType": "process",
                "adapterConfig": { "command": "sh", "args": ["-c", "sleep 300"] },
            }),
        )
        .await?
        .ok()?;
    let agent = str_field(&agent, "id");
    admin(0)
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    let runs_path = format!("/api/companies/{company}/heartbeat-runs?agentId={agent}");
    let run = wait_for("the run running on the worker", WAIT, || async {
        let runs = list(&admin(0), &runs_path).await.ok()?;
        runs.into_iter()
            .find(|r| r["status"] == "running" && r["workerId"] == WORKER_ID)
    })
    .await?;
    let run_id = str_field(&run, "id");

    // Revoked through node 2 with the CLI.
    let out = Command::new(roost_binary())
        .args(["worker", "revoke", WORKER_ID])
        .args(["--server", &cluster.nodes[1].http, "--token", &admin_token])
        .env_remove("ROOST_SERVER")
        .env_remove("ROOST_TOKEN")
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "roost worker revoke: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("revoked worker credential") && stdout.contains(&cred_id));

    // Its session ends and it is refused when it registers again.
    restarted
        .wait_log("the revoked worker to be refused", "was revoked")
        .await?;
    // Its run is lost like a lost worker's, and retried once.
    wait_for("the run to be lost", WAIT, || async {
        let runs = list(&admin(2), &runs_path).await.ok()?;
        runs.iter()
            .any(|r| r["id"] == run_id.as_str() && r["status"] == "lost")
            .then_some(())
    })
    .await?;
    wait_for("the worker to be lost", WAIT, || async {
        (worker_status(&admin(2)).await? == "lost").then_some(())
    })
    .await?;
    let wakes_path = format!("/api/companies/{company}/wakes?agentId={agent}&limit=1000");
    let retries: Vec<Value> = list(&admin(2), &wakes_path)
        .await?
        .into_iter()
        .filter(|w| w["reason"] == "process_lost_retry")
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0]["retryOfRunId"], run_id.as_str(), "{retries:?}");
    let creds = list(&admin(0), "/api/workers/credentials").await?;
    assert_eq!(creds[0]["revoked"], true, "{creds:?}");

    // No secret in any log, any node's or the workers'.
    let mut logs: Vec<PathBuf> = cluster.nodes.iter().map(|n| n.log.clone()).collect();
    logs.extend([restarted.log.clone(), dir.path().join("worker-a.log")]);
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            !text.contains(&credential) && !text.contains(&join_token),
            "a secret in {}",
            log.display()
        );
    }
    Ok(())
}
