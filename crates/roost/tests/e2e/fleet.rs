//! A fleet of real processes: three `roost server`s, two `roost run-worker`s, and agents that are
//! POSIX shell scripts (`tests/agents/`) doing Paperclip's agent loop with curl, knowing only
//! their run environment. Node and worker logs, and each agent's trace, are kept in a tempdir
//! whose path is printed (with the logs' last lines) when a test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use roost_testkit::{wait_for, Http, ProcessCluster};

use crate::support::{is_live, roost_binary, str_field};

/// Worker lease renewals and leases of the test servers (`[workers]` in their config).
const RENEW_MS: u64 = 200;
const LEASE_MS: u64 = 1500;
const WAIT: Duration = Duration::from_secs(30);
const WORKERS: [&str; 2] = ["worker-a", "worker-b"];

fn agent_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents")
        .join(name)
}

pub(crate) fn spawn_logged(
    args: &[&str],
    config: &Path,
    log: &Path,
    filter: &str,
) -> anyhow::Result<Child> {
    let log = std::fs::File::create(log)?;
    Ok(Command::new(roost_binary())
        .args(args)
        .arg(config)
        .env("ROOST_LOG", filter)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?)
}

fn kill_child(child: &mut Option<Child>) {
    if let Some(c) = child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    *child = None;
}

/// Whether `pid` is one of our agent scripts still running (so that a recycled pid is never
/// signalled).
fn agent_alive(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("tests/agents/"))
}

/// SIGKILL to the agent's process group (the worker starts each agent as a group leader).
fn kill_agent_group(pid: u32) {
    if agent_alive(pid) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stderr(Stdio::null())
            .status();
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The processes of one test, all killed on drop; their tempdir is kept if the test failed.
struct Fleet {
    dir: Option<tempfile::TempDir>,
    /// Nodes 1..=3, in the fleet's directory; `None` before `boot_servers`.
    servers: Option<ProcessCluster>,
    http_addrs: Vec<String>,
    grpc_addrs: Vec<String>,
    workers: Vec<(String, Option<Child>)>,
    admin_token: String,
    company_id: String,
    failed: bool,
}

impl Fleet {
    fn new() -> anyhow::Result<Fleet> {
        Ok(Fleet {
            dir: Some(tempfile::tempdir()?),
            servers: None,
            http_addrs: Vec::new(),
            grpc_addrs: Vec::new(),
            workers: Vec::new(),
            admin_token: String::new(),
            company_id: String::new(),
            failed: false,
        })
    }

    fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map(|d| d.path())
            .unwrap_or(Path::new("."))
    }

    fn work_dir(&self, worker: &str) -> PathBuf {
        self.path().join(worker).join("work")
    }

    /// An administrator's client on node `n` (1-based).
    fn admin(&self, n: usize) -> Http {
        Http::new(format!("http://{}", self.http_addrs[n - 1])).with_token(&self.admin_token)
    }

    fn company(&self, rest: &str) -> String {
        format!("/api/companies/{}/{rest}", self.company_id)
    }

    /// Three `roost server` processes with fast worker leases form a cluster; node 1 writes the
    /// admin token, and a company is created once a leader answers.
    async fn boot_servers(&mut self) -> anyhow::Result<()> {
        let cluster = crate::processes::three_servers(self.path(), |_| {
            format!("[workers]\nrenew_interval_ms = {RENEW_MS}\nlease_ttl_ms = {LEASE_MS}\n\n")
        })
        .env("NO_COLOR", "1")
        .token_deadline(WAIT)
        .start()
        .await?;
        self.http_addrs = cluster.nodes.iter().map(|n| n.http_addr.clone()).collect();
        self.grpc_addrs = cluster.grpc_addrs();
        self.admin_token = cluster.admin_token.clone();
        self.servers = Some(cluster);
        let admin = self.admin(1);
        let company = wait_for("a leader to create the company", WAIT, || {
            let admin = admin.clone();
            async move {
                let body = json!({ "name": "Fleet", "issuePrefix": "FLT" });
                admin
                    .post_with_key("/api/companies", body, "fleet-company")
                    .await
                    .ok()?
                    .ok()
                    .ok()
            }
        })
        .await?;
        self.company_id = str_field(&company, "id");
        Ok(())
    }

    /// Two `roost run-worker` processes, labelled `pool = fleet`, each with its own work dir and
    /// its agents calling a different node; waits until both are online.
    async fn start_workers(&mut self, slots: u32) -> anyhow::Result<()> {
        let token = self
            .admin(1)
            .post("/api/workers/join-tokens", json!({ "name": "fleet" }))
            .await?
            .ok()?;
        let token = str_field(&token, "token");
        let servers = self
            .grpc_addrs
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ");
        for (n, id) in WORKERS.iter().enumerate() {
            let work = self.work_dir(id);
            std::fs::create_dir_all(&work)?;
            let config = format!(
                "worker_id = \"{id}\"\nservers = [{servers}]\napi_url = \"http://{}\"\n\
                 join_token = \"{token}\"\nslots = {slots}\nwork_dir = \"{}\"\ngrace_sec = 1\n\n\
                 [labels]\npool = \"fleet\"\n",
                self.http_addrs[n % 3],
                work.display()
            );
            let path = self.path().join(format!("{id}.toml"));
            std::fs::write(&path, config)?;
            let log = self.path().join(format!("{id}.log"));
            let child = spawn_logged(&["run-worker", "--config"], &path, &log, "info")?;
            self.workers.push((id.to_string(), Some(child)));
        }
        let admin = self.admin(2);
        wait_for("both workers online", WAIT, || {
            let admin = admin.clone();
            async move {
                let list = admin.get("/api/workers").await.ok()?.ok().ok()?;
                let online = list
                    .as_array()?
                    .iter()
                    .filter(|w| w["status"] == "online")
                    .count();
                (online == WORKERS.len()).then_some(())
            }
        })
        .await
    }

    /// SIGKILL to a worker process; returns the moment just before the signal.
    fn kill_worker(&mut self, id: &str) -> anyhow::Result<Instant> {
        let (_, child) = self
            .workers
            .iter_mut()
            .find(|(w, _)| w == id)
            .ok_or_else(|| anyhow::anyhow!("no worker {id}"))?;
        let mut c = child
            .take()
            .ok_or_else(|| anyhow::anyhow!("{id} is not running"))?;
        let at = Instant::now();
        c.kill()?;
        c.wait()?;
        Ok(at)
    }

    async fn create_agent(
        &self,
        name: &str,
        script: &str,
        heartbeat: Value,
        placement: Value,
    ) -> anyhow::Result<String> {
        let script = agent_script(script);
        let body = json!({
            "name": name,
            "adapterType": "process",
            "adapterConfig": { "command": "sh", "args": [script], "cwd": "." },
            "heartbeat": heartbeat,
            "placementLabels": placement,
        });
        let agent = self
            .admin(1)
            .post(&self.company("agents"), body)
            .await?
            .ok()?;
        Ok(str_field(&agent, "id"))
    }

    /// A `todo` issue assigned to `agent` (which wakes it), created through node `n`.
    async fn assigned_issue(&self, n: usize, title: &str, agent: &str) -> anyhow::Result<String> {
        let body = json!({ "title": title, "status": "todo", "assigneeAgentId": agent });
        let issue = self
            .admin(n)
            .post(&self.company("issues"), body)
            .await?
            .ok()?;
        Ok(str_field(&issue, "id"))
    }

    async fn runs(&self, n: usize, agent: &str) -> anyhow::Result<Vec<Value>> {
        let path = self.company(&format!("heartbeat-runs?agentId={agent}&limit=1000"));
        let list = self.admin(n).get(&path).await?.ok()?;
        Ok(list.as_array().cloned().unwrap_or_default())
    }

    async fn comments(&self, n: usize, issue: &str) -> anyhow::Result<Vec<Value>> {
        let list = self
            .admin(n)
            .get(&format!("/api/issues/{issue}/comments"))
            .await?
            .ok()?;
        Ok(list.as_array().cloned().unwrap_or_default())
    }

    /// The sequence numbers of the activity entries written for `run`.
    async fn activity_of_run(&self, n: usize, run: &str) -> anyhow::Result<Vec<u64>> {
        let list = self
            .admin(n)
            .get(&self.company("activity?limit=1000"))
            .await?
            .ok()?;
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["runId"] == run)
            .filter_map(|e| e["seq"].as_u64())
            .collect())
    }

    /// Passes the test's outcome through; a failure keeps the tempdir (see `Drop`).
    fn finish(mut self, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
        if let Err(e) = &outcome {
            self.failed = true;
            return Err(anyhow::anyhow!("{e:#}\n(logs: {})", self.path().display()));
        }
        outcome
    }

    fn report(&self) {
        eprintln!("fleet logs kept in {}", self.path().display());
        let mut logs: Vec<PathBuf> = self
            .servers
            .iter()
            .flat_map(|c| c.nodes.iter().map(|n| n.log.clone()))
            .collect();
        logs.extend(
            self.workers
                .iter()
                .map(|(w, _)| self.path().join(format!("{w}.log"))),
        );
        for log in logs {
            let name = log.file_name().unwrap_or_default().to_string_lossy();
            eprintln!("--- last lines of {name} ---\n{}", tail(&log, 25));
        }
    }

    /// The agent processes still running: every agent script writes its pid to `pid-<run>`.
    fn agent_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for (w, _) in &self.workers {
            let Ok(entries) = std::fs::read_dir(self.work_dir(w)) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with("pid-") {
                    if let Ok(pid) = std::fs::read_to_string(e.path()) {
                        pids.extend(pid.trim().parse::<u32>().ok());
                    }
                }
            }
        }
        pids
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Workers first, so that they start nothing more; then what their agents left running
        // (an agent can outlive a killed worker); then the servers.
        for (_, child) in &mut self.workers {
            kill_child(child);
        }
        for pid in self.agent_pids() {
            kill_agent_group(pid);
        }
        drop(self.servers.take());
        if self.failed || std::thread::panicking() {
            self.report();
            if let Some(dir) = self.dir.take() {
                let _ = dir.keep();
            }
        }
    }
}

fn status_of(run: &Value) -> &str {
    run["status"].as_str().unwrap_or("")
}

/// Twenty issues assigned to one agent go through three servers and two workers: each is done
/// by exactly one run, which left exactly one comment naming it, and no run failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_issues_through_three_servers_and_two_workers_are_each_done_once(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut fleet = Fleet::new()?;
    let outcome = twenty_issues(&mut fleet).await;
    fleet.finish(outcome)
}

async fn twenty_issues(f: &mut Fleet) -> anyhow::Result<()> {
    let started = Instant::now();
    f.boot_servers().await?;
    f.start_workers(2).await?;
    // The agent first asks for a label no worker has, so its wakes stay queued until all twenty
    // exist. Then the dispatcher sees them in one pass with both workers free, and (preferring
    // the worker with fewer runs given in that pass) gives each worker one: both get work, by
    // placement, not by timing.
    let policy = json!({ "maxConcurrentRuns": 4 });
    let agent = f
        .create_agent(
            "looper",
            "paperclip-loop.sh",
            policy,
            json!({ "pool": "not-yet" }),
        )
        .await?;
    let mut issues = Vec::new();
    for n in 0..20 {
        let node = n % 3 + 1;
        issues.push(f.assigned_issue(node, &format!("job {n}"), &agent).await?);
    }
    let path = f.company(&format!("wakes?agentId={agent}&status=queued"));
    let admin = f.admin(3);
    wait_for("twenty queued wakes", WAIT, || {
        let (admin, path) = (admin.clone(), path.clone());
        async move {
            let wakes = admin.get(&path).await.ok()?.ok().ok()?;
            (wakes.as_array()?.len() == 20).then_some(())
        }
    })
    .await?;
    assert!(
        f.runs(1, &agent).await?.is_empty(),
        "no worker fits yet, so nothing runs"
    );
    let released = Instant::now();
    f.admin(2)
        .patch(
            &format!("/api/agents/{agent}"),
            json!({ "placementLabels": { "pool": "fleet" } }),
        )
        .await?
        .ok()?;

    // Until every issue is done and every run has ended, or a run ended otherwise.
    let issues_path = f.company(&format!("issues?assigneeAgentId={agent}&limit=100"));
    let runs = wait_for("twenty issues done", Duration::from_secs(45), || async {
        // Issues first: once all are done, every run that did them exists.
        let list = f.admin(2).get(&issues_path).await.ok()?.ok().ok()?;
        let runs = f.runs(1, &agent).await.ok()?;
        let bad = runs
            .iter()
            .any(|r| !is_live(r) && status_of(r) != "succeeded");
        let done = list
            .as_array()?
            .iter()
            .filter(|i| i["status"] == "done")
            .count();
        (bad || (done == 20 && !runs.iter().any(is_live))).then_some(runs)
    })
    .await?;
    let took = released.elapsed();

    let failed: Vec<&Value> = runs
        .iter()
        .filter(|r| !is_live(r) && status_of(r) != "succeeded")
        .collect();
    assert!(failed.is_empty(), "runs that did not succeed: {failed:#?}");
    assert_eq!(runs.len(), 20, "one run per issue: {runs:#?}");
    let mut per_worker = std::collections::BTreeMap::<String, usize>::new();
    for r in &runs {
        *per_worker.entry(str_field(r, "workerId")).or_default() += 1;
    }
    for (n, issue) in issues.iter().enumerate() {
        let node = n % 3 + 1;
        let i = f
            .admin(node)
            .get(&format!("/api/issues/{issue}"))
            .await?
            .ok()?;
        assert_eq!(i["status"], "done", "{i}");
        assert!(i["checkout"].is_null(), "{i}");
        let mine: Vec<&Value> = runs
            .iter()
            .filter(|r| r["issueId"] == json!(issue))
            .collect();
        assert_eq!(mine.len(), 1, "runs of issue {issue}: {mine:#?}");
        let run = str_field(mine[0], "id");
        let comments = f.comments(node, issue).await?;
        assert_eq!(comments.len(), 1, "comments on {issue}: {comments:#?}");
        let c = &comments[0];
        assert_eq!(c["authorAgentId"], json!(agent), "{c}");
        assert_eq!(c["createdByRunId"], json!(run), "{c}");
        assert_eq!(c["body"], json!(format!("Done in run {run}.")), "{c}");
    }
    let audit = f.admin(3).get("/api/audit/verify").await?.ok()?;
    eprintln!(
        "20 issues done in {took:?} after release ({:?} in all); runs per worker: {per_worker:?}; audit: {audit}",
        started.elapsed()
    );
    for w in WORKERS {
        assert!(
            per_worker.get(w).is_some_and(|n| *n > 0),
            "{w} ran nothing: {per_worker:?}"
        );
    }
    Ok(())
}

/// SIGKILL of the worker running an agent: the run is lost within the lease (+ 1 s), its
/// checkout is released, the retry finishes the issue on the other worker, and the dead run's
/// key and id are refused, also to the agent process that outlived its worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_loses_the_run_and_the_retry_finishes_elsewhere(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut fleet = Fleet::new()?;
    let outcome = killed_worker(&mut fleet).await;
    fleet.finish(outcome)
}

fn env_value<'a>(env: &'a str, name: &str) -> &'a str {
    env.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or("")
}

async fn killed_worker(f: &mut Fleet) -> anyhow::Result<()> {
    let started = Instant::now();
    f.boot_servers().await?;
    f.start_workers(2).await?;
    let agent = f
        .create_agent("phoenix", "lost-then-retried.sh", json!({}), json!({}))
        .await?;
    let issue = f.assigned_issue(1, "survive a crash", &agent).await?;
    let first = wait_for("the first run to start", WAIT, || async {
        f.runs(2, &agent)
            .await
            .ok()?
            .into_iter()
            .find(|r| status_of(r) == "running")
    })
    .await?;
    let dead_run = str_field(&first, "id");
    let victim = str_field(&first, "workerId");
    let survivor = WORKERS
        .iter()
        .find(|w| **w != victim)
        .map(|w| w.to_string())
        .unwrap_or_default();
    let victim_dir = f.work_dir(&victim);
    let env_file = victim_dir.join(format!("run-{dead_run}.env"));
    let env = wait_for(
        "the agent to check out and record its key",
        WAIT,
        || async { std::fs::read_to_string(&env_file).ok() },
    )
    .await?;
    let dead_key = env_value(&env, "key").to_string();
    let pid: u32 = env_value(&env, "pid").parse()?;
    assert!(dead_key.starts_with("rst_run_"), "{env}");
    assert_eq!(env_value(&env, "run"), dead_run);
    let held = f
        .admin(3)
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_eq!(held["checkout"]["runId"], json!(dead_run), "{held}");
    let before_kill = f.activity_of_run(1, &dead_run).await?;
    assert!(!before_kill.is_empty(), "the checkout was recorded");

    let killed_at = f.kill_worker(&victim)?;
    let admin = f.admin(1);
    let lost_after = wait_for("the run to be lost", WAIT, || async {
        let run = admin
            .get(&format!("/api/heartbeat-runs/{dead_run}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        (status_of(&run) == "lost").then(|| killed_at.elapsed())
    })
    .await?;
    let bound = Duration::from_millis(LEASE_MS + 1000);
    eprintln!("run lost {lost_after:?} after SIGKILL of {victim} (lease {LEASE_MS} ms)");
    assert!(
        lost_after <= bound,
        "lost {lost_after:?} after the kill, more than lease + 1 s ({bound:?})"
    );
    // Its checkout went with it: the issue is free, or already held by the retry.
    let now = f
        .admin(2)
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_ne!(now["checkout"]["runId"], json!(dead_run), "{now}");

    // Replays of the dead run's writes. Its own key is dead...
    let client = reqwest::Client::new();
    let comments_url = format!("http://{}/api/issues/{issue}/comments", f.http_addrs[1]);
    let replay = client
        .post(&comments_url)
        .bearer_auth(&dead_key)
        .json(&json!({ "body": "replayed with the dead run's key" }))
        .send()
        .await?;
    assert_eq!(replay.status().as_u16(), 401, "{}", replay.text().await?);
    // ...and the agent's own key, naming the dead run, is fenced.
    let key = f
        .admin(3)
        .post(&format!("/api/agents/{agent}/keys"), json!({}))
        .await?
        .ok()?;
    // (Used on the node that created it: a node authenticates from its own applied state,
    // without a read barrier, so another node may not know a key created a moment ago.)
    let own_node_url = format!("http://{}/api/issues/{issue}/comments", f.http_addrs[2]);
    let replay = client
        .post(&own_node_url)
        .bearer_auth(str_field(&key, "token"))
        .header("X-Paperclip-Run-Id", &dead_run)
        .json(&json!({ "body": "replayed in the dead run" }))
        .send()
        .await?;
    let status = replay.status().as_u16();
    let body: Value = replay.json().await?;
    assert_eq!(
        (status, body["code"].clone()),
        (409, json!("stale_run")),
        "{body}"
    );

    // The agent process outlived its worker (it shrugs off the SIGTERM a dying worker may send).
    // Let it try to finish the issue now.
    assert!(agent_alive(pid), "the agent process {pid} is gone");
    std::fs::write(victim_dir.join(format!("go-{dead_run}")), "")?;
    let codes_file = victim_dir.join(format!("late-{dead_run}.codes"));
    let codes = wait_for("the orphaned agent's late writes", WAIT, || async {
        std::fs::read_to_string(&codes_file).ok()
    })
    .await?;
    eprintln!(
        "late writes of the lost run's agent: {}",
        codes.replace('\n', " ")
    );
    assert_eq!(
        (env_value(&codes, "comment"), env_value(&codes, "patch")),
        ("401", "401"),
        "late writes of the lost run: {codes}"
    );

    let retry = wait_for("the retry to end", WAIT, || async {
        f.runs(3, &agent)
            .await
            .ok()?
            .into_iter()
            .find(|r| r["retryOfRunId"] == json!(dead_run) && !is_live(r))
    })
    .await?;
    let retry_id = str_field(&retry, "id");
    assert_eq!(status_of(&retry), "succeeded", "{retry}");
    assert_eq!(retry["workerId"], json!(survivor), "{retry}");
    assert_eq!(retry["wakeReason"], "process_lost_retry", "{retry}");
    let runs = f.runs(1, &agent).await?;
    assert_eq!(runs.len(), 2, "the run and its one retry: {runs:#?}");

    let done = f
        .admin(1)
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    assert_eq!(done["status"], "done", "{done}");
    let comments = f.comments(2, &issue).await?;
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert_eq!(comments[0]["createdByRunId"], json!(retry_id));
    // Nothing was written for the dead run after it was killed.
    let after = f.activity_of_run(3, &dead_run).await?;
    assert_eq!(after, before_kill, "activity of the dead run");
    eprintln!(
        "retry {retry_id} finished on {survivor}; {:?} in all",
        started.elapsed()
    );
    Ok(())
}
