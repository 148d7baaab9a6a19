//! The worker's CLI adapters with the real CLIs (pinned npm releases installed by `npm.rs`,
//! Hermes from PyPI by `pip.rs`), the only fake being the model: `roost_testkit::model` answers the
//! CLI's API calls from a script that makes it do Paperclip's loop with curl against the
//! cluster, using only the run's environment (the calls of `tests/agents/paperclip-loop.sh`:
//! check out, comment, mark done). Each runtime checks: the issue done with the comment; the
//! session saved; a reopening comment resuming that session in the CLI's own session store
//! (the model sees the earlier run's history); a resume the CLI refuses (its store deleted)
//! becoming a fresh session in the same run; tokens and cost with the run; a timeout stopping
//! the whole process tree.

mod claude;
mod codex;
mod gemini;
mod hermes;
mod openclaw;
mod opencode;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use roost_server::workers::WorkerConfig as LeaseConfig;
use roost_testkit::model::{Recorded, ScriptedModel, Step, Usage};
use roost_testkit::{test_timing, wait_for, TestCluster};
use roost_worker::{Price, WorkerConfig};

use crate::support::str_field;
use crate::worker_process::{create_agent, runs};

/// A CLI's first start (a native binary or Node loading) and a few model calls.
const WAIT: Duration = Duration::from_secs(90);

/// What every scripted answer reports.
const USAGE: Usage = Usage {
    input: 1000,
    cached_input: 200,
    output: 50,
};

/// One runtime under test.
struct Runtime {
    adapter: &'static str,
    /// The agent's `adapterConfig` for a CLI at `bin` calling `model`, keeping its state
    /// (HOME, CODEX_HOME) under `state`.
    config: fn(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value>,
    /// Where the CLI keeps its sessions under `state` (a directory, or an SQLite file):
    /// deleting it makes the CLI refuse a resume.
    session_store: fn(state: &Path) -> PathBuf,
    /// Whether the runtime's input token count includes the cached ones (OpenAI's and
    /// Google's convention; Anthropic's and OpenCode's and Hermes' count them apart).
    input_includes_cached: bool,
    /// Where a run's cost comes from; the expected cost is the scripted usage at that price.
    pricing: Pricing,
    /// A process the runtime runs beside the worker (OpenClaw's gateway), started from what
    /// `config` wrote under the state dir and stopped with the test.
    service: Option<fn(bin: &Path, state: &Path) -> anyhow::Result<std::process::Child>>,
}

/// A runtime's service process: killed when dropped, restarted around a deleted session store.
struct Service {
    child: std::process::Child,
    start: fn(&Path, &Path) -> anyhow::Result<std::process::Child>,
    bin: PathBuf,
    state: PathBuf,
    /// Where it listens once started (`host:port`, from the agent's `url`).
    addr: String,
}

impl Service {
    async fn start(
        start: fn(&Path, &Path) -> anyhow::Result<std::process::Child>,
        bin: &Path,
        state: &Path,
        url: &str,
    ) -> anyhow::Result<Service> {
        let addr = url
            .split("://")
            .nth(1)
            .unwrap_or(url)
            .trim_end_matches('/')
            .to_string();
        let service = Service {
            child: start(bin, state)?,
            start,
            bin: bin.to_path_buf(),
            state: state.to_path_buf(),
            addr,
        };
        service.listening().await?;
        Ok(service)
    }

    /// Waits until it accepts connections.
    async fn listening(&self) -> anyhow::Result<()> {
        let addr = self.addr.clone();
        wait_for(
            &format!("the runtime's service to listen on {addr}"),
            Duration::from_secs(180),
            || {
                let addr = addr.clone();
                async move { tokio::net::TcpStream::connect(&addr).await.ok().map(|_| ()) }
            },
        )
        .await
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        self.child = (self.start)(&self.bin, &self.state)?;
        self.listening().await
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Who prices a runtime's tokens.
enum Pricing {
    /// The runtime itself, at its vendor's published price (dollars per million tokens).
    Reported(Price),
    /// The worker's `[prices]` entry for this model.
    Configured(&'static str, Price),
}

impl Runtime {
    /// The worker's `[prices]`.
    fn prices(&self) -> Vec<(&'static str, Price)> {
        match &self.pricing {
            Pricing::Reported(_) => Vec::new(),
            Pricing::Configured(model, price) => vec![(*model, price.clone())],
        }
    }

    /// A run's expected (input, cached input, output) tokens after `calls` model calls, as
    /// the runtime reports them.
    fn tokens(&self, calls: u64) -> (u64, u64, u64) {
        let input = if self.input_includes_cached {
            USAGE.input + USAGE.cached_input
        } else {
            USAGE.input
        };
        (
            calls * input,
            calls * USAGE.cached_input,
            calls * USAGE.output,
        )
    }

    /// A run's expected cost in millionths of a dollar: the scripted usage at the price (per
    /// million tokens, so per token in millionths).
    fn cost_micro_usd(&self, calls: u64) -> u64 {
        let (Pricing::Reported(p) | Pricing::Configured(_, p)) = &self.pricing;
        let per_call = USAGE.input as f64 * p.input
            + USAGE.cached_input as f64 * p.cached_input
            + USAGE.output as f64 * p.output;
        (calls as f64 * per_call).round() as u64
    }

    /// The run log's line about where the cost came from.
    fn cost_note(&self) -> String {
        match &self.pricing {
            Pricing::Reported(_) => "cost reported by the runtime".into(),
            Pricing::Configured(model, _) => format!("at the configured price for model {model}"),
        }
    }
}

/// A shell command calling the API as Paperclip's loop does (`tests/agents/lib.sh`): the run's
/// key and id from the environment, the reply printed (the model sees it as the tool result).
fn curl(method: &str, path: &str, body: Option<&str>) -> String {
    let mut cmd = format!(
        r#"curl -sS -X {method} "$PAPERCLIP_API_URL/api{path}" -H "Authorization: Bearer $PAPERCLIP_API_KEY" -H "X-Paperclip-Run-Id: $PAPERCLIP_RUN_ID""#
    );
    if let Some(body) = body {
        cmd.push_str(&format!(
            r#" -H 'Content-Type: application/json' --data "{}""#,
            body.replace('"', "\\\"")
        ));
    }
    cmd
}

/// Paperclip's loop for the issue this run was woken for: check out, comment naming the run,
/// mark done, then say so.
fn paperclip_loop() -> Vec<Step> {
    vec![
        Step::shell(curl(
            "POST",
            "/issues/$PAPERCLIP_TASK_ID/checkout",
            Some(r#"{"agentId":"$PAPERCLIP_AGENT_ID","expectedStatuses":["todo"]}"#),
        )),
        Step::shell(curl(
            "POST",
            "/issues/$PAPERCLIP_TASK_ID/comments",
            Some(r#"{"body":"Done in run $PAPERCLIP_RUN_ID."}"#),
        )),
        Step::shell(curl(
            "PATCH",
            "/issues/$PAPERCLIP_TASK_ID",
            Some(r#"{"status":"done"}"#),
        )),
        Step::text("Checked out, commented and closed the issue."),
    ]
}

/// A one-node cluster (the runtimes, not replication, are under test) and the real worker in
/// this process, agents working in `dir`, with `prices`.
async fn cluster_and_worker(
    dir: &Path,
    prices: Vec<(&'static str, Price)>,
) -> anyhow::Result<(TestCluster, tokio::sync::oneshot::Sender<()>)> {
    let c = TestCluster::start_with_workers(
        1,
        test_timing(),
        LeaseConfig {
            renew_interval_ms: 200,
            lease_ttl_ms: 3000,
            ..LeaseConfig::default()
        },
    )
    .await?;
    let admin = c.admin(c.leader().await?);
    let token = str_field(
        &admin
            .post("/api/workers/join-tokens", json!({}))
            .await?
            .ok()?,
        "token",
    );
    let config = WorkerConfig {
        worker_id: "runtime-worker".into(),
        servers: c.grpc_addrs(),
        api_url: admin.base().to_string(),
        join_token: token,
        work_dir: dir.to_path_buf(),
        grace_sec: 1,
        prices: prices
            .into_iter()
            .map(|(m, p)| (m.to_string(), p))
            .collect(),
        ..WorkerConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(roost_worker::run(config, async move {
        let _ = stopped.await;
    }));
    Ok((c, stop))
}

/// The installed CLI, the model, the cluster, the worker and an agent; dropped in reverse.
struct Setup {
    c: TestCluster,
    _stop_worker: tokio::sync::oneshot::Sender<()>,
    model: ScriptedModel,
    agent: String,
    /// The agents' working directory (the worker's work dir).
    work: tempfile::TempDir,
    /// The CLI's own state (HOME, CODEX_HOME).
    state: tempfile::TempDir,
    service: Option<Service>,
}

async fn setup(
    rt: &Runtime,
    bin: PathBuf,
    script: Vec<Step>,
    extra: Value,
) -> anyhow::Result<Setup> {
    let model = ScriptedModel::start(script, USAGE).await?;
    let work = tempfile::tempdir()?;
    let state = tempfile::tempdir()?;
    let (c, stop) = cluster_and_worker(work.path(), rt.prices()).await?;
    let mut config = (rt.config)(&bin, &model, state.path())?;
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    let service = match rt.service {
        Some(start) => {
            let url = config["url"].as_str().unwrap_or_default().to_string();
            Some(Service::start(start, &bin, state.path(), &url).await?)
        }
        None => None,
    };
    let agent = create_agent(&c, rt.adapter, config).await?;
    Ok(Setup {
        c,
        _stop_worker: stop,
        model,
        agent,
        work,
        state,
        service,
    })
}

impl Setup {
    async fn assigned_issue(&self) -> anyhow::Result<String> {
        let leader = self.c.leader().await?;
        let issue = self
            .c
            .admin(leader)
            .post(
                &format!("/api/companies/{}/issues", self.c.company_id),
                json!({ "title": "Fix the parser", "status": "todo", "assigneeAgentId": self.agent }),
            )
            .await?
            .ok()?;
        Ok(str_field(&issue, "id"))
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let leader = self.c.leader().await?;
        self.c.admin(leader).get(path).await?.ok()
    }

    /// Waits for the agent's `n`th run (from 1, oldest first) to end; returns it.
    async fn ended_run(&self, n: usize) -> anyhow::Result<Value> {
        let ended = wait_for(&format!("run {n} to end"), WAIT, || async {
            let mut all = runs(&self.c, &self.agent).await.ok()?;
            all.reverse();
            let run = all.into_iter().nth(n - 1)?;
            (!["queued", "assigned", "running"].contains(&run["status"].as_str()?)).then_some(run)
        })
        .await;
        match ended {
            Ok(run) => Ok(run),
            Err(e) => anyhow::bail!(
                "{e}; runs: {:?}; model requests: {}; unknown paths: {:?}",
                runs(&self.c, &self.agent).await,
                self.model.requests().len(),
                self.model.unknown_paths()
            ),
        }
    }

    async fn log_of(&self, run: &str) -> anyhow::Result<String> {
        let log = self.get(&format!("/api/heartbeat-runs/{run}/log")).await?;
        Ok(log["content"].as_str().unwrap_or_default().to_string())
    }

    /// A comment that reopens the issue and so wakes its assignee again.
    async fn reopen_with_comment(&self, issue: &str, body: &str) -> anyhow::Result<()> {
        let leader = self.c.leader().await?;
        self.c
            .admin(leader)
            .post(
                &format!("/api/issues/{issue}/comments"),
                json!({ "body": body, "reopen": true }),
            )
            .await?
            .ok()?;
        Ok(())
    }
}

fn usage_of(run: &Value) -> (u64, u64, u64, u64) {
    let u = &run["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    (
        n("inputTokens"),
        n("cachedInputTokens"),
        n("outputTokens"),
        n("costMicroUsd"),
    )
}

/// Asserts the run succeeded with the tokens and cost of `calls` model calls.
fn assert_metered(rt: &Runtime, run: &Value, calls: usize) {
    let calls = calls as u64;
    let (input, cached, output) = rt.tokens(calls);
    assert_eq!(
        usage_of(run),
        (input, cached, output, rt.cost_micro_usd(calls)),
        "{calls} model calls: {run}"
    );
}

/// The whole loop, then a resumed session, then a refused resume.
async fn loop_resume_and_refused_resume(rt: &Runtime, bin: PathBuf) -> anyhow::Result<()> {
    let s = setup(rt, bin, paperclip_loop(), json!({})).await?;
    let issue = s.assigned_issue().await?;

    // 1. The assignment: a fresh session does the whole loop.
    let first = s.ended_run(1).await?;
    let first_id = str_field(&first, "id");
    assert_eq!(
        first["status"],
        "succeeded",
        "{first}\n{}",
        s.log_of(&first_id).await?
    );
    let calls_1 = s.model.requests().len();
    assert_eq!(calls_1, paperclip_loop().len(), "one model call per step");
    let issue_now = s.get(&format!("/api/issues/{issue}")).await?;
    assert_eq!(issue_now["status"], "done", "{issue_now}");
    let comments = s.get(&format!("/api/issues/{issue}/comments")).await?;
    assert!(
        comments
            .to_string()
            .contains(&format!("Done in run {first_id}.")),
        "{comments}"
    );
    let session = str_field(&first, "sessionIdAfter");
    assert!(!session.is_empty(), "no session saved: {first}");
    assert_metered(rt, &first, calls_1);
    let log = s.log_of(&first_id).await?;
    assert!(log.contains(&rt.cost_note()), "{log}");
    let sessions = s
        .get(&format!("/api/agents/{}/task-sessions", s.agent))
        .await?;
    assert_eq!(sessions[0]["sessionId"], json!(session), "{sessions}");

    // 2. A reopening comment resumes the session: the CLI's own store gives the model the
    // first run's history (its tool results carried the first comment).
    s.reopen_with_comment(&issue, "One more thing: add a test.")
        .await?;
    let second = s.ended_run(2).await?;
    let second_id = str_field(&second, "id");
    assert_eq!(
        second["status"],
        "succeeded",
        "{second}\n{}",
        s.log_of(&second_id).await?
    );
    assert_eq!(second["sessionIdBefore"], json!(session), "{second}");
    assert_eq!(second["sessionIdAfter"], json!(session), "{second}");
    assert_eq!(second["sessionReset"], json!(false), "{second}");
    let requests: Vec<Recorded> = s.model.requests().split_off(calls_1);
    assert_eq!(requests.len(), paperclip_loop().len(), "the script again");
    assert!(
        requests[0].mentions(&format!("Done in run {first_id}.")),
        "the resumed request does not carry the first run's history"
    );
    assert!(requests[0].mentions("One more thing: add a test."));
    assert_metered(rt, &second, requests.len());
    let comments = s.get(&format!("/api/issues/{issue}/comments")).await?;
    assert!(
        comments
            .to_string()
            .contains(&format!("Done in run {second_id}.")),
        "{comments}"
    );

    // 3. The CLI's session store is gone: it refuses the resume, and the same run starts a
    // fresh session that does the loop. (A service keeps its store open: it is deleted while
    // the service is down.)
    let mut s = s;
    let store = (rt.session_store)(s.state.path());
    if let Some(service) = &mut s.service {
        service.stop();
    }
    remove_store(&store).map_err(|e| anyhow::anyhow!("cannot delete {}: {e}", store.display()))?;
    if let Some(service) = &mut s.service {
        service.restart().await?;
    }
    let before = s.model.requests().len();
    s.reopen_with_comment(&issue, "And the docs.").await?;
    let third = s.ended_run(3).await?;
    let third_id = str_field(&third, "id");
    let log = s.log_of(&third_id).await?;
    assert_eq!(third["status"], "succeeded", "{third}\n{log}");
    assert_eq!(third["sessionIdBefore"], json!(session), "{third}");
    assert_eq!(third["sessionReset"], json!(true), "{third}");
    let fresh = str_field(&third, "sessionIdAfter");
    assert!(!fresh.is_empty() && fresh != session, "{third}");
    assert!(
        log.contains(&format!("session {session} could not be resumed")),
        "{log}"
    );
    let requests = s.model.requests().split_off(before);
    assert_eq!(requests.len(), paperclip_loop().len(), "{log}");
    assert!(!requests[0].mentions(&format!("Done in run {first_id}.")));
    assert_metered(rt, &third, requests.len());
    let issue_now = s.get(&format!("/api/issues/{issue}")).await?;
    assert_eq!(issue_now["status"], "done", "{issue_now}");
    // The CLI called nothing the scripted model does not serve.
    assert_eq!(s.model.unknown_paths(), Vec::<String>::new());
    let Setup { c, work, .. } = s;
    c.shutdown().await;
    drop(work);
    Ok(())
}

/// Deletes a session store: a directory, or an SQLite database with its journal files.
fn remove_store(store: &Path) -> std::io::Result<()> {
    if store.is_dir() {
        return std::fs::remove_dir_all(store);
    }
    std::fs::remove_file(store)?;
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut journal = store.as_os_str().to_owned();
        journal.push(suffix);
        match std::fs::remove_file(&journal) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline
                .contains(marker)
                .then(|| format!("{}: {cmdline}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// A run past its `timeoutSec` ends `timed_out`, and nothing the CLI started is left running.
async fn a_timeout_stops_the_process_tree(rt: &Runtime, bin: PathBuf) -> anyhow::Result<()> {
    // A command that blocks, with a unique marker on its own command line whatever shell
    // runs it. (Claude Code refuses a command starting with `sleep N`.)
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .subsec_nanos();
    let marker = format!("--sleep-interval=600.{nanos:09}");
    let script = vec![
        Step::shell(format!("tail -f {marker} /dev/null; echo waited")),
        Step::text("Waited."),
    ];
    let s = setup(rt, bin, script, json!({ "timeoutSec": 15, "graceSec": 1 })).await?;
    s.assigned_issue().await?;
    wait_for("the agent's command to start", WAIT, || async {
        (!processes_with(&format!("tail -f {marker}")).is_empty()).then_some(())
    })
    .await?;
    let run = s.ended_run(1).await?;
    let log = s.log_of(&str_field(&run, "id")).await?;
    assert_eq!(run["status"], "timed_out", "{run}\n{log}");
    let left = wait_for(
        "no process of the run left",
        Duration::from_secs(10),
        || async { processes_with(&marker).is_empty().then_some(()) },
    )
    .await;
    assert!(left.is_ok(), "left running: {:?}", processes_with(&marker));
    s.c.shutdown().await;
    Ok(())
}
