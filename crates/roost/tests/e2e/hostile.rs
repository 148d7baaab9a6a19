//! Issue 20's attacks, replayed through the REST API against three real `roost server`
//! processes of this build: each one gets a clear 4xx, nothing of another tenant or of a secret
//! leaks, and afterwards every node still serves and all agree on one state hash.
//!
//! One cluster serves every attack (starting three processes is the slow part). Each attack is
//! its own section; a failing section is recorded and the others still run, so one run of the
//! test names every attack that still gets through.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Context};
use reqwest::StatusCode;
use serde_json::{json, Value};

use roost_testkit::{wait_for, Http, Reply, TestWorker};

use crate::processes::{start_three_servers, ServerProcess};

const WAIT: Duration = Duration::from_secs(20);
/// Debug output of domain objects; no error message may carry it (issue 20: a colliding comment
/// key answered 500 with another company's agent, Debug-printed). Structs are caught by shape
/// (`debug_struct_in`), these by name.
const DEBUG_MARKERS: [&str; 3] = ["Outcome::", "Some(", "DomainError"];
const SECRET: &str = "s3cr3t-value";
/// The shortest heartbeat interval an enabled agent may have.
const TICK_SEC: u64 = 10;

/// Every response body the test saw, to check at the end that none leaked anything.
type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTP client bound to one node and one token that records every reply.
#[derive(Clone)]
struct Client {
    http: Http,
    node: u64,
    seen: Seen,
}

impl Client {
    fn record(&self, what: String, reply: &Reply) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!(
                "{what} on node {} -> {} {}",
                self.node, reply.status, reply.body
            ));
    }

    async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        let reply = self.http.get(path).await?;
        self.record(format!("GET {path}"), &reply);
        Ok(reply)
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        let reply = self.http.post(path, body).await?;
        self.record(format!("POST {path}"), &reply);
        Ok(reply)
    }

    async fn post_with_key(&self, path: &str, body: Value, key: &str) -> anyhow::Result<Reply> {
        let reply = self.http.post_with_key(path, body, key).await?;
        self.record(format!("POST {path} (Idempotency-Key {key:.20})"), &reply);
        Ok(reply)
    }

    async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        let reply = self.http.patch(path, body).await?;
        self.record(format!("PATCH {path}"), &reply);
        Ok(reply)
    }
}

/// The cluster, its tenants and a worker, shared by every section.
struct World {
    procs: Vec<ServerProcess>,
    seen: Seen,
    /// The administrator, through each node in turn (index = node id - 1).
    admins: Vec<Client>,
    company_a: String,
    company_b: String,
    /// An agent made at setup whose heartbeat section 2 enables (see there).
    ticker: String,
    worker: TestWorker,
}

impl World {
    fn client(&self, node: u64, token: &str) -> Client {
        let base = self.procs[(node - 1) as usize].http.clone();
        Client {
            http: Http::new(base).with_token(token),
            node,
            seen: self.seen.clone(),
        }
    }

    fn admin(&self, node: u64) -> &Client {
        &self.admins[(node - 1) as usize]
    }

    /// A new agent of `company` and its API key, as a client of `node`.
    async fn agent(
        &self,
        company: &str,
        name: &str,
        node: u64,
    ) -> anyhow::Result<(String, Client)> {
        let admin = self.admin(1);
        let agent = admin
            .post(
                &format!("/api/companies/{company}/agents"),
                json!({ "name": name }),
            )
            .await?
            .ok()?;
        let id = text(&agent, "id");
        let key = admin
            .post(&format!("/api/agents/{id}/keys"), json!({}))
            .await?
            .ok()?;
        Ok((id, self.client(node, &text(&key, "token"))))
    }

    async fn issue_count(&self, company: &str) -> anyhow::Result<usize> {
        let issues = self
            .admin(1)
            .get(&format!("/api/companies/{company}/issues?limit=5000"))
            .await?
            .ok()?;
        Ok(issues.as_array().map_or(0, Vec::len))
    }

    /// The newest activity sequence number of `company`: any accepted write moves it.
    async fn activity_head(&self, company: &str) -> anyhow::Result<u64> {
        let page = self
            .admin(1)
            .get(&format!("/api/companies/{company}/activity?limit=1"))
            .await?
            .ok()?;
        Ok(page[0]["seq"].as_u64().unwrap_or(0))
    }

    /// Waits for the worker to be given a run of `agent_id`; returns the run id.
    async fn assigned_run_of(&self, agent_id: &str) -> anyhow::Result<String> {
        wait_for(
            &format!("a run of agent {agent_id} on the worker"),
            WAIT,
            || async {
                self.worker
                    .assignments()
                    .into_iter()
                    .find(|a| a.agent_id == agent_id)
                    .map(|a| a.run_id)
            },
        )
        .await
    }
}

fn text(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_string()
}

/// A reply for a message: status and body, the body cut short (some carry a megabyte).
fn show(reply: &Reply) -> String {
    format!("{} {}", reply.status, cut(&reply.body.to_string()))
}

fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(400).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// `reply` has one of `statuses`, in the documented error shape: a machine `code` and an
/// `error` sentence.
fn refused(what: &str, reply: &Reply, statuses: &[u16]) -> anyhow::Result<()> {
    ensure!(
        statuses.contains(&reply.status.as_u16()),
        "{what}: expected HTTP {statuses:?}, got {}",
        show(reply)
    );
    let sentence = reply.body["error"].as_str().unwrap_or_default();
    ensure!(
        !reply.code().is_empty() && sentence.contains(' '),
        "{what}: the error is not {{error: <a sentence>, code: <code>}}: {}",
        show(reply)
    );
    Ok(())
}

fn created(what: &str, reply: &Reply) -> anyhow::Result<()> {
    ensure!(
        reply.status == StatusCode::CREATED,
        "{what}: expected 201, got {}",
        show(reply)
    );
    Ok(())
}

/// What one section found wrong. A section records a failed expectation and goes on with the
/// attack, so one run shows everything the attack still does (a write that should have been
/// refused is followed by the one that broke apply); an error a section returns is one it
/// cannot go past, such as a node that stopped answering.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, result: anyhow::Result<()>) {
        if let Err(e) = result {
            self.0.push(format!("{e:#}"));
        }
    }

    fn expect(&mut self, ok: bool, why: impl FnOnce() -> String) {
        if !ok {
            self.0.push(why());
        }
    }
}

/// Each node's `/api/cluster/node` report.
async fn reports(w: &World) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for node in 1..=3 {
        out.push(w.admin(node).http.get("/api/cluster/node").await?.ok()?);
    }
    Ok(out)
}

/// Waits until all three nodes report the same state hash at the same index, at or past every
/// write acknowledged so far; returns that index and hash.
async fn converged(w: &World) -> anyhow::Result<(u64, String)> {
    let floor = reports(w)
        .await?
        .iter()
        .filter_map(|r| r["appliedIndex"].as_u64())
        .max()
        .unwrap_or(0);
    let last = Mutex::new(Vec::new());
    wait_for("all three nodes at one state hash", WAIT, || async {
        let views = reports(w).await.ok()?;
        let seen: Vec<(u64, String)> = views
            .iter()
            .map(|r| (r["stateIndex"].as_u64().unwrap_or(0), text(r, "stateHash")))
            .collect();
        *last.lock().unwrap_or_else(|p| p.into_inner()) = seen.clone();
        let first = seen.first()?.clone();
        (first.0 >= floor && !first.1.is_empty() && seen.iter().all(|s| *s == first))
            .then_some(first)
    })
    .await
    .with_context(|| {
        format!(
            "(index, hash) per node last seen: {:?}",
            last.lock().unwrap_or_else(|p| p.into_inner())
        )
    })
}

/// Every node is ready, answers a write and reads it back, and all converge on one hash.
async fn every_node_serves_and_converges(w: &World, round: &str) -> anyhow::Result<()> {
    for node in 1..=3u64 {
        let ready = w.admin(node).get("/readyz").await?;
        ensure!(
            ready.status == StatusCode::OK,
            "{round}: node {node} is not ready: {}",
            show(&ready)
        );
        let title = format!("{round}: written through node {node}");
        let write = w
            .admin(node)
            .post(
                &format!("/api/companies/{}/issues", w.company_a),
                json!({ "title": title }),
            )
            .await?;
        created(&format!("{round}: a write through node {node}"), &write)?;
        let back = w
            .admin(node)
            .get(&format!("/api/issues/{}", text(&write.body, "id")))
            .await?;
        ensure!(
            back.body["title"] == title.as_str(),
            "{round}: node {node} read back {}",
            show(&back)
        );
    }
    converged(w).await.context(round.to_string())?;
    Ok(())
}

/// Issue 20: a `costCents` of u64::MAX, then 1, overflowed the spend sum inside apply and
/// stopped every replica for good; in a release build it wrapped and reset the agent's spend.
async fn a_cost_of_u64_max_is_refused_and_spend_stays_exact(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (spender, agent) = w.agent(&w.company_a, "spender", 2).await?;
    let path = format!("/api/companies/{}/cost-events", w.company_a);
    let cost = |cents: u64| json!({ "provider": "anthropic", "model": "m", "costCents": cents });
    let huge = agent.post(&path, cost(u64::MAX)).await?;
    f.check(refused("costCents = u64::MAX", &huge, &[400]));
    f.expect(
        huge.code() == "bad_request"
            && huge.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("costCents")),
        || {
            format!(
                "the refusal is not bad_request naming costCents: {}",
                show(&huge)
            )
        },
    );
    let one = agent.post(&path, cost(1)).await?;
    f.check(created("costCents = 1 after the refused one", &one));
    every_node_serves_and_converges(w, "after the u64::MAX cost").await?;
    for node in 1..=3 {
        let summary = w
            .admin(node)
            .get(&format!("/api/companies/{}/costs/summary", w.company_a))
            .await?
            .ok()?;
        let mine = summary["byAgent"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["agentId"] == spender.as_str()))
            .cloned()
            .unwrap_or(Value::Null);
        f.expect(
            mine["monthCents"] == 1 && mine["lifetimeCents"] == 1,
            || format!("node {node}: the agent's spend is not exactly 1 cent: {mine}"),
        );
    }
    Ok(())
}

/// Issue 20: a budget `amount` of u64::MAX overflowed `amount * warn_percent` once spend was
/// recorded, and a heartbeat `intervalSec` of i64::MAX panicked the leader's timer task, after
/// which nothing was dispatched while the node looked healthy.
async fn admin_overflows_are_refused_and_the_leader_still_dispatches(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let admin = w.admin(3);
    let (woken, woken_key) = w.agent(&w.company_a, "woken", 1).await?;
    let policies = format!("/api/companies/{}/budgets/policies", w.company_a);
    for body in [
        json!({ "scopeType": "company", "amount": u64::MAX }),
        json!({ "scopeType": "agent", "scopeId": woken, "amount": u64::MAX, "warnPercent": 80 }),
    ] {
        let reply = admin.post(&policies, body.clone()).await?;
        f.check(refused(&format!("budget {body}"), &reply, &[400]));
    }
    // Spend in the budgets' scope is what evaluates their thresholds.
    let spend = woken_key
        .post(
            &format!("/api/companies/{}/cost-events", w.company_a),
            json!({ "provider": "anthropic", "costCents": 1 }),
        )
        .await?;
    f.check(created("a cost in the budgets' scope", &spend));

    let agent_path = format!("/api/agents/{woken}");
    let patch = admin
        .patch(
            &agent_path,
            json!({ "heartbeat": { "enabled": true, "intervalSec": i64::MAX } }),
        )
        .await?;
    f.check(refused("heartbeat.intervalSec = i64::MAX", &patch, &[400]));
    let agent = admin.get(&agent_path).await?;
    f.expect(
        agent.body["heartbeat"]["intervalSec"] != json!(i64::MAX),
        || format!("the refused interval was stored: {}", show(&agent)),
    );

    // The leader still reports ready, and a wakeup becomes a run on the worker.
    let leader = reports(w).await?[0]["leaderId"].as_u64().unwrap_or(0);
    ensure!((1..=3).contains(&leader), "no leader known");
    let ready = w.admin(leader).get("/readyz").await?;
    f.expect(ready.status == StatusCode::OK, || {
        format!("leader {leader} is not ready: {}", show(&ready))
    });
    let wake = admin
        .post(&format!("/api/agents/{woken}/wakeup"), json!({}))
        .await?;
    let status = text(&wake.body["wake"], "status");
    f.expect(
        wake.status.as_u16() == 202 && ["queued", "claimed"].contains(&status.as_str()),
        || format!("the wakeup did not queue a wake: {}", show(&wake)),
    );
    match w.assigned_run_of(&woken).await {
        Ok(run) => f.check(
            wait_for("the dispatched run to start", WAIT, || async {
                let r = admin
                    .get(&format!("/api/heartbeat-runs/{run}"))
                    .await
                    .ok()?;
                (r.body["status"] == "running").then_some(())
            })
            .await,
        ),
        Err(e) => f.check(Err(
            e.context("nothing was dispatched after the hostile interval")
        )),
    }

    // The timer itself still ticks: a heartbeat enabled now wakes the ticker on its own. Its
    // interval counts from the agent's creation (`roost-core/src/rules/wake.rs`, `next_tick`),
    // so the ticker was made at setup and the wait overlaps the other sections.
    let ticker_path = format!("/api/agents/{}", w.ticker);
    let enable = admin
        .patch(
            &ticker_path,
            json!({ "heartbeat": {
                "enabled": true, "intervalSec": TICK_SEC, "skipWhenIdle": false
            } }),
        )
        .await?;
    f.expect(enable.status == StatusCode::OK, || {
        format!("enabling a {TICK_SEC} s heartbeat: {}", show(&enable))
    });
    let ticked = wait_for(
        "a heartbeat_timer wake of the ticker",
        WAIT + Duration::from_secs(TICK_SEC),
        || async {
            let wakes = admin
                .get(&format!(
                    "/api/companies/{}/wakes?agentId={}",
                    w.company_a, w.ticker
                ))
                .await
                .ok()?
                .ok()
                .ok()?;
            wakes
                .as_array()?
                .iter()
                .any(|wake| wake["reason"] == "heartbeat_timer")
                .then_some(())
        },
    )
    .await;
    f.check(ticked.context("the leader's timer no longer ticks"));
    // Stop the ticks, so that the cluster settles for the hash comparison.
    admin
        .patch(&ticker_path, json!({ "heartbeat": { "enabled": false } }))
        .await?
        .ok()?;
    every_node_serves_and_converges(w, "after the admin overflows").await
}

/// Issue 20: idempotency keys were global: an agent of company A sending a key company B had
/// used got B's issue back and its own write was dropped; a colliding comment key answered 500
/// with Debug output of another company's agent.
async fn idempotency_keys_are_scoped_to_their_tenant(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (_, agent_b) = w.agent(&w.company_b, "agent-b", 2).await?;
    let (agent_a_id, agent_a) = w.agent(&w.company_a, "agent-a", 3).await?;
    let key = "k1";
    let b_issue = agent_b
        .post_with_key(
            &format!("/api/companies/{}/issues", w.company_b),
            json!({ "title": "B's secret plan" }),
            key,
        )
        .await?;
    created("agent B's keyed issue", &b_issue)?;

    let a_path = format!("/api/companies/{}/issues", w.company_a);
    let a_body = json!({ "title": "A's own work" });
    let a_issue = agent_a.post_with_key(&a_path, a_body.clone(), key).await?;
    f.check(created("agent A's issue with B's key", &a_issue));
    f.expect(
        a_issue.body["id"] != b_issue.body["id"]
            && a_issue.body["companyId"] == w.company_a.as_str()
            && a_issue.body["title"] == "A's own work",
        || format!("agent A, sending B's key, got {}", show(&a_issue)),
    );
    let b_still = w
        .admin(1)
        .get(&format!("/api/issues/{}", text(&b_issue.body, "id")))
        .await?;
    f.expect(b_still.body["title"] == "B's secret plan", || {
        format!("B's issue changed: {}", show(&b_still))
    });

    let reused = agent_a
        .post_with_key(&a_path, json!({ "title": "something else" }), key)
        .await?;
    f.check(refused("the same key with another body", &reused, &[422]));
    f.expect(reused.code() == "idempotency_key_reused", || {
        format!("the same key with another body: {}", show(&reused))
    });

    let repeat = agent_a.post_with_key(&a_path, a_body, key).await?;
    f.expect(
        repeat.status.is_success() && repeat.body["id"] == a_issue.body["id"],
        || {
            format!(
                "a repeat did not answer the first outcome: {}",
                show(&repeat)
            )
        },
    );

    let comment = agent_a
        .post_with_key(
            &format!("/api/issues/{}/comments", text(&a_issue.body, "id")),
            json!({ "body": "keyed comment" }),
            key,
        )
        .await?;
    f.check(created("agent A's comment with the same key", &comment));
    f.expect(
        comment.body["body"] == "keyed comment"
            && comment.body["issueId"] == a_issue.body["id"]
            && comment.body["authorAgentId"] == agent_a_id.as_str(),
        || format!("the keyed comment came back as {}", show(&comment)),
    );
    Ok(())
}

/// Issue 20: the activity log showed every agent the full `adapterConfig` patch of another
/// agent, secrets included; run rows carried `tokenHashes`.
async fn secrets_and_token_hashes_never_leave_the_api(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (x, x_key) = w.agent(&w.company_a, "holder", 2).await?;
    let (_, y_key) = w.agent(&w.company_a, "reader", 3).await?;
    let admin = w.admin(1);
    let patched = admin
        .patch(
            &format!("/api/agents/{x}"),
            json!({ "adapterConfig": {
                "env": { "API_TOKEN": { "type": "secret", "value": SECRET } },
                "command": "echo"
            } }),
        )
        .await?;
    let config = &patched.body["adapterConfig"];
    f.expect(
        patched.status == StatusCode::OK
            && config["env"]["API_TOKEN"] == json!({ "type": "secret", "redacted": true })
            && config["command"] == "echo",
        || {
            format!(
                "the patched agent does not show a redacted secret: {}",
                show(&patched)
            )
        },
    );

    let activity = y_key
        .get(&format!(
            "/api/companies/{}/activity?limit=500",
            w.company_a
        ))
        .await?
        .ok()?;
    f.expect(
        activity.as_array().is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e["action"] == "agent.updated" && e["entityId"] == x.as_str())
        }),
        || "agent Y's activity page has no agent.updated entry for X".into(),
    );
    let reads = [
        ("the activity read by agent Y", activity),
        (
            "GET /api/agents/{X} as admin",
            w.admin(3).get(&format!("/api/agents/{x}")).await?.ok()?,
        ),
        (
            "GET /api/agents/{X} with X's key",
            x_key.get(&format!("/api/agents/{x}")).await?.ok()?,
        ),
        (
            "GET /api/agents/me with X's key",
            x_key.get("/api/agents/me").await?.ok()?,
        ),
    ];
    for (what, body) in &reads {
        let body = body.to_string();
        f.expect(!body.contains(SECRET), || {
            format!("{what} shows the secret: {}", cut(&body))
        });
    }

    // A dispatched run (its row holds the run key's hash): the agent still gets its secret,
    // and no run view shows the hashes.
    admin
        .post(&format!("/api/agents/{x}/wakeup"), json!({}))
        .await?
        .ok()?;
    let run = w.assigned_run_of(&x).await?;
    let assignment = w
        .worker
        .assignments()
        .into_iter()
        .find(|a| a.run_id == run)
        .context("the assignment vanished")?;
    f.expect(assignment.adapter_config_json.contains(SECRET), || {
        format!(
            "the worker did not get the secret it needs to start the agent: {}",
            assignment.adapter_config_json
        )
    });
    let runs_path = format!("/api/companies/{}/heartbeat-runs", w.company_a);
    let run_path = format!("/api/heartbeat-runs/{run}");
    let run_reads = [
        ("the run list as admin", admin.get(&runs_path).await?.ok()?),
        (
            "the run list with Y's key",
            y_key.get(&runs_path).await?.ok()?,
        ),
        ("the run as admin", w.admin(2).get(&run_path).await?.ok()?),
        ("the run with X's key", x_key.get(&run_path).await?.ok()?),
    ];
    ensure!(
        run_reads[0].1.to_string().contains(run.as_str()),
        "the run list does not show run {run}"
    );
    for (what, body) in &run_reads {
        let body = body.to_string();
        f.expect(
            !body.contains("tokenHashes") && !body.contains(SECRET),
            || format!("{what} carries tokenHashes or the secret: {}", cut(&body)),
        );
    }
    Ok(())
}

/// Issue 20: `state.db`, `raft-log.db` and their directory were created world-readable.
async fn data_files_are_private(w: &World, f: &mut Findings) -> anyhow::Result<()> {
    let mut loose = Vec::new();
    for p in &w.procs {
        let mut stack = vec![p.data.clone()];
        let mut files = 0;
        while let Some(dir) = stack.pop() {
            let mode = std::fs::metadata(&dir)?.permissions().mode() & 0o777;
            if mode != 0o700 {
                loose.push(format!("{}: mode {mode:o}, want 700", dir.display()));
            }
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let meta = std::fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    stack.push(path);
                } else {
                    files += 1;
                    let mode = meta.permissions().mode() & 0o777;
                    if mode != 0o600 {
                        loose.push(format!("{}: mode {mode:o}, want 600", path.display()));
                    }
                }
            }
        }
        for name in ["state.db", "raft-log.db"] {
            ensure!(
                p.data.join(name).exists(),
                "node {} has no {name} in {}",
                p.id,
                p.data.display()
            );
        }
        ensure!(files > 0, "node {} wrote no files", p.id);
    }
    for file in loose {
        f.expect(false, || format!("others may read {file}"));
    }
    Ok(())
}

/// Issue 20: no field had a length limit: forty issues with a 1 MB `billingCode` made one page
/// of issues 41 MB; a 1 MB wake payload was accepted and then failed the run. An oversized
/// `Idempotency-Key` must be refused before anything is written.
async fn oversized_fields_are_refused_and_nothing_is_written(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (me, agent) = w.agent(&w.company_a, "bloater", 2).await?;
    let issues_path = format!("/api/companies/{}/issues", w.company_a);
    let issues_before = w.issue_count(&w.company_a).await?;
    let head_before = w.activity_head(&w.company_a).await?;
    let megabyte = "x".repeat(1_000_000);

    let mut accepted = Vec::new();
    for i in 0..40 {
        let reply = agent
            .post(
                &issues_path,
                json!({ "title": format!("bloat {i}"), "billingCode": megabyte }),
            )
            .await?;
        let what = format!("issue {i} with a 1 MB billingCode");
        let ok = refused(&what, &reply, &[413, 400]).and_then(|()| {
            ensure!(
                reply.status.as_u16() == 400 || reply.code() == "too_large",
                "{what}: a 413 with code {:?}",
                reply.code()
            );
            Ok(())
        });
        if let Err(e) = ok {
            accepted.push(format!("{e:#}"));
        }
    }
    f.expect(accepted.is_empty(), || {
        format!(
            "{} of 40 issues with a 1 MB billingCode were not refused; the first: {}",
            accepted.len(),
            accepted[0]
        )
    });
    let wake = agent
        .post(
            &format!("/api/agents/{me}/wakeup"),
            json!({ "payload": { "blob": megabyte } }),
        )
        .await?;
    f.check(refused("a 1 MB wake payload", &wake, &[413, 400]));

    let long_key = "k".repeat(200);
    let keyed = agent
        .post_with_key(&issues_path, json!({ "title": "long key" }), &long_key)
        .await?;
    f.check(refused("a 200-character Idempotency-Key", &keyed, &[400]));

    let issues_after = w.issue_count(&w.company_a).await?;
    f.expect(issues_after == issues_before, || {
        format!("refused issues were created: {issues_before} issues before, {issues_after} after")
    });
    let head_after = w.activity_head(&w.company_a).await?;
    f.expect(head_after == head_before, || {
        format!("refused requests wrote activity: head {head_before} before, {head_after} after")
    });
    let wakes = w
        .admin(1)
        .get(&format!(
            "/api/companies/{}/wakes?agentId={me}",
            w.company_a
        ))
        .await?
        .ok()?;
    f.expect(wakes == json!([]), || {
        format!("the refused wake exists: {}", cut(&wakes.to_string()))
    });
    Ok(())
}

/// The first `Name { field:` in `s`: how Rust's Debug prints a struct. Compact JSON, as every
/// body is recorded, never has a space after `{`.
fn debug_struct_in(s: &str) -> Option<&str> {
    s.match_indices(" { ").find_map(|(at, _)| {
        let name_start = s[..at]
            .rfind(|c: char| !c.is_ascii_alphanumeric())
            .map_or(0, |i| i + 1);
        let name = &s[name_start..at];
        let rest = &s[at + 3..];
        let field_len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(0);
        let is_struct = name.starts_with(|c: char| c.is_ascii_uppercase())
            && field_len > 0
            && rest[field_len..].starts_with(':');
        is_struct.then(|| &s[name_start..(at + 3 + field_len + 1).min(s.len())])
    })
}

/// The detector finds what a 503 at HEAD (`roost-raft/src/node.rs`, `QuorumNotEnough`) and the
/// comment-key 500 of issue 20 printed, and nothing in plain JSON.
#[test]
fn debug_struct_in_finds_debug_printed_structs_only() {
    let quorum = r#"{"message":"got: {1:NodeInfo { grpc_addr: \"127.0.0.1:1\" }}"}"#;
    assert_eq!(debug_struct_in(quorum), Some("NodeInfo { grpc_addr:"));
    assert_eq!(
        debug_struct_in("conflict with Agent { id: \"a\", name: \"b\" }"),
        Some("Agent { id:")
    );
    assert_eq!(debug_struct_in(r#"{"title":"a { b: c","x":{"y":1}}"#), None);
}

/// No reply of the whole run carried Debug output, a secret or token hashes.
async fn no_reply_leaked(w: &World, f: &mut Findings) -> anyhow::Result<()> {
    let seen = w.seen.lock().unwrap_or_else(|p| p.into_inner());
    for reply in seen.iter() {
        f.expect(
            !(reply.contains(SECRET)
                || reply.contains("tokenHashes")
                || DEBUG_MARKERS.iter().any(|m| reply.contains(m))
                || debug_struct_in(reply).is_some()),
            || format!("leaked: {}", cut(reply)),
        );
    }
    Ok(())
}

fn log_tails(procs: &[ServerProcess]) -> String {
    procs
        .iter()
        .map(|p| {
            let log = std::fs::read_to_string(&p.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            format!("--- node {} log (last lines) ---\n{tail}", p.id)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn setup(dir: &Path) -> anyhow::Result<World> {
    let (procs, token) = start_three_servers(dir).await?;
    let seen: Seen = Arc::default();
    let admins = procs
        .iter()
        .map(|p| Client {
            http: Http::new(p.http.clone()).with_token(&token),
            node: p.id,
            seen: seen.clone(),
        })
        .collect::<Vec<_>>();
    // Ready: every node ready and agreeing on one leader.
    wait_for("three ready nodes agreeing on a leader", WAIT, || async {
        let mut leaders = Vec::new();
        for a in &admins {
            if a.http.get("/readyz").await.ok()?.status != StatusCode::OK {
                return None;
            }
            let r = a.http.get("/api/cluster/node").await.ok()?.ok().ok()?;
            leaders.push(r["leaderId"].as_u64()?);
        }
        leaders.windows(2).all(|p| p[0] == p[1]).then_some(())
    })
    .await?;
    let company = |name: &'static str, prefix: &'static str| {
        let admin = admins[0].clone();
        async move {
            let c = admin
                .post(
                    "/api/companies",
                    json!({ "name": name, "issuePrefix": prefix }),
                )
                .await?
                .ok()?;
            anyhow::Ok(text(&c, "id"))
        }
    };
    let company_a = company("Acme", "ACM").await?;
    let company_b = company("Bolt", "BLT").await?;
    let ticker = admins[0]
        .post(
            &format!("/api/companies/{company_a}/agents"),
            json!({ "name": "ticker" }),
        )
        .await?
        .ok()?;
    let join = admins[0]
        .post("/api/workers/join-tokens", json!({}))
        .await?
        .ok()?;
    let grpc = procs.iter().map(|p| p.grpc.clone()).collect();
    let worker = TestWorker::connect(grpc, &text(&join, "token"), "hostile-w", 8).await?;
    Ok(World {
        procs,
        seen,
        admins,
        company_a,
        company_b,
        ticker: text(&ticker, "id"),
        worker,
    })
}

/// Issue 20's acceptance: every attack, through REST against three real server processes, gets
/// a clear 4xx; no tenant sees another's outcome; no secret, token hash or Debug output leaves
/// the API; and afterwards all three nodes serve and agree on the state hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_4xx_and_a_three_process_cluster_keeps_serving_and_agreeing(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let w = setup(dir.path()).await?;

    let mut failed: Vec<String> = Vec::new();
    macro_rules! section {
        ($name:ident) => {{
            let mut f = Findings::default();
            let result = $name(&w, &mut f).await;
            f.check(result);
            failed.extend(
                f.0.into_iter()
                    .map(|e| format!("{}: {e}", stringify!($name))),
            );
        }};
    }
    // The attacks that broke apply or the timer come last: where they still do, the cluster
    // is gone, and the others should have had their own verdict first.
    section!(idempotency_keys_are_scoped_to_their_tenant);
    section!(oversized_fields_are_refused_and_nothing_is_written);
    section!(secrets_and_token_hashes_never_leave_the_api);
    section!(data_files_are_private);
    section!(a_cost_of_u64_max_is_refused_and_spend_stays_exact);
    section!(admin_overflows_are_refused_and_the_leader_still_dispatches);
    let last = every_node_serves_and_converges(&w, "after all attacks").await;
    failed.extend(last.err().map(|e| format!("{e:#}")));
    section!(no_reply_leaked);

    ensure!(
        failed.is_empty(),
        "{} findings:\n\n{}\n\n{}",
        failed.len(),
        failed.join("\n\n"),
        log_tails(&w.procs)
    );
    Ok(())
}
