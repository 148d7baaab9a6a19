//! The hostile test's harness: three real server processes, clients that record every reply,
//! findings collected per section, and the convergence check.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Context};
use reqwest::StatusCode;
use serde_json::{json, Value};

use roost_testkit::{wait_for, Http, ProcessCluster, Reply, ServerNode, TestWorker};

use crate::processes::start_three_servers;

pub(super) const WAIT: Duration = Duration::from_secs(20);
/// Debug output of domain objects; no error message may carry it (a colliding comment
/// key answered 500 with another company's agent, Debug-printed). Structs are caught by shape
/// (`debug_struct_in`), these by name.
pub(super) const DEBUG_MARKERS: [&str; 3] = ["Outcome::", "Some(", "DomainError"];
pub(super) const SECRET: &str = "s3cr3t-value";
/// The shortest heartbeat interval an enabled agent may have.
pub(super) const TICK_SEC: u64 = 10;

/// Every response body the test saw, to check at the end that none leaked anything.
pub(super) type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTP client bound to one node and one token that records every reply.
#[derive(Clone)]
pub(super) struct Client {
    pub(super) http: Http,
    pub(super) node: u64,
    pub(super) seen: Seen,
}

impl Client {
    pub(super) fn record(&self, what: String, reply: &Reply) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!(
                "{what} on node {} -> {} {}",
                self.node, reply.status, reply.body
            ));
    }

    pub(super) async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        let reply = self.http.get(path).await?;
        self.record(format!("GET {path}"), &reply);
        Ok(reply)
    }

    pub(super) async fn post(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        let reply = self.http.post(path, body).await?;
        self.record(format!("POST {path}"), &reply);
        Ok(reply)
    }

    pub(super) async fn post_with_key(
        &self,
        path: &str,
        body: Value,
        key: &str,
    ) -> anyhow::Result<Reply> {
        let reply = self.http.post_with_key(path, body, key).await?;
        self.record(format!("POST {path} (Idempotency-Key {key:.20})"), &reply);
        Ok(reply)
    }

    pub(super) async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        let reply = self.http.patch(path, body).await?;
        self.record(format!("PATCH {path}"), &reply);
        Ok(reply)
    }
}

/// The cluster, its tenants and a worker, shared by every section.
pub(super) struct World {
    pub(super) procs: ProcessCluster,
    pub(super) seen: Seen,
    /// The administrator, through each node in turn (index = node id - 1).
    pub(super) admins: Vec<Client>,
    pub(super) company_a: String,
    pub(super) company_b: String,
    /// An agent made at setup whose heartbeat section 2 enables (see there).
    pub(super) ticker: String,
    pub(super) worker: TestWorker,
}

impl World {
    pub(super) fn client(&self, node: u64, token: &str) -> Client {
        let base = self.procs.nodes[(node - 1) as usize].http.clone();
        Client {
            http: Http::new(base).with_token(token),
            node,
            seen: self.seen.clone(),
        }
    }

    pub(super) fn admin(&self, node: u64) -> &Client {
        &self.admins[(node - 1) as usize]
    }

    /// A new agent of `company` and its API key, as a client of `node`.
    pub(super) async fn agent(
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

    pub(super) async fn issue_count(&self, company: &str) -> anyhow::Result<usize> {
        let issues = self
            .admin(1)
            .get(&format!("/api/companies/{company}/issues?limit=5000"))
            .await?
            .ok()?;
        Ok(issues.as_array().map_or(0, Vec::len))
    }

    /// The newest activity sequence number of `company`: any accepted write moves it.
    pub(super) async fn activity_head(&self, company: &str) -> anyhow::Result<u64> {
        let page = self
            .admin(1)
            .get(&format!("/api/companies/{company}/activity?limit=1"))
            .await?
            .ok()?;
        Ok(page[0]["seq"].as_u64().unwrap_or(0))
    }

    /// Waits for the worker to be given a run of `agent_id`; returns the run id.
    pub(super) async fn assigned_run_of(&self, agent_id: &str) -> anyhow::Result<String> {
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

pub(super) fn text(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_default().to_string()
}

/// A reply for a message: status and body, the body cut short (some carry a megabyte).
pub(super) fn show(reply: &Reply) -> String {
    format!("{} {}", reply.status, cut(&reply.body.to_string()))
}

pub(super) fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(400).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// `reply` has one of `statuses`, in the documented error shape: a machine `code` and an
/// `error` sentence.
pub(super) fn refused(what: &str, reply: &Reply, statuses: &[u16]) -> anyhow::Result<()> {
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

pub(super) fn created(what: &str, reply: &Reply) -> anyhow::Result<()> {
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
pub(super) struct Findings(pub(super) Vec<String>);

impl Findings {
    pub(super) fn check(&mut self, result: anyhow::Result<()>) {
        if let Err(e) = result {
            self.0.push(format!("{e:#}"));
        }
    }

    pub(super) fn expect(&mut self, ok: bool, why: impl FnOnce() -> String) {
        if !ok {
            self.0.push(why());
        }
    }
}

/// Each node's `/api/cluster/node` report.
pub(super) async fn reports(w: &World) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for node in 1..=3 {
        out.push(w.admin(node).http.get("/api/cluster/node").await?.ok()?);
    }
    Ok(out)
}

/// Waits until all three nodes report the same state hash at the same index, at or past every
/// write acknowledged so far; returns that index and hash.
pub(super) async fn converged(w: &World) -> anyhow::Result<(u64, String)> {
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
pub(super) async fn every_node_serves_and_converges(w: &World, round: &str) -> anyhow::Result<()> {
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
/// The first `Name { field:` in `s`: how Rust's Debug prints a struct. Compact JSON, as every
/// body is recorded, never has a space after `{`.
pub(super) fn debug_struct_in(s: &str) -> Option<&str> {
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
/// comment-key 500 printed, and nothing in plain JSON.
#[test]
pub(super) fn debug_struct_in_finds_debug_printed_structs_only() {
    let quorum = r#"{"message":"got: {1:NodeInfo { grpc_addr: \"127.0.0.1:1\" }}"}"#;
    assert_eq!(debug_struct_in(quorum), Some("NodeInfo { grpc_addr:"));
    assert_eq!(
        debug_struct_in("conflict with Agent { id: \"a\", name: \"b\" }"),
        Some("Agent { id:")
    );
    assert_eq!(debug_struct_in(r#"{"title":"a { b: c","x":{"y":1}}"#), None);
}

/// No reply of the whole run carried Debug output, a secret or token hashes.
pub(super) async fn no_reply_leaked(w: &World, f: &mut Findings) -> anyhow::Result<()> {
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

pub(super) fn log_tails(procs: &[ServerNode]) -> String {
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

pub(super) async fn setup(dir: &Path) -> anyhow::Result<World> {
    let (procs, token) = start_three_servers(dir).await?;
    let seen: Seen = Arc::default();
    let admins = procs
        .nodes
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
    let grpc = procs.nodes.iter().map(|p| p.grpc.clone()).collect();
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
