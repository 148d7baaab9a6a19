//! Authorization as a table (ARCHITECTURE.md, "Authorization"): every REST route and every gRPC
//! method has a rule in `authz/rules.rs`, and the test walks the router's source and the
//! generated service descriptors so that a route or method added without a rule fails here. Each rule is then
//! checked against a real node with real credentials: no credential is `401` everywhere but the
//! public probes; an agent of another company is refused on every company's route; an agent of
//! the same company is refused on administrators' routes and served on its own; an administrator
//! is served everywhere; the Raft service is not on the client port. Every refusal met on the
//! way has a sentence in `error`.

use roost_proto::v1::RaftPayload;
use roost_testkit::{Http, Reply, TestNode};
use serde_json::{json, Value};
use tonic::Code;

mod rules;

use rules::{GrpcRule, Rule, GRPC, REST};
use Rule::*;

/// The (method, path) pairs the REST router declares, read from its source: every
/// `.route("PATH", get(..).post(..))` of `rest/mod.rs` (rustfmt keeps that shape).
fn declared_routes() -> Vec<(String, String)> {
    let source = include_str!("../../../roost-server/src/rest/mod.rs");
    let mut routes = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        let Some(len) = rest[open + 1..].find('"') else {
            break;
        };
        let path = rest[open + 1..open + 1 + len].to_string();
        // The handlers: up to the `.route(` or `.fallback(` that follows.
        let end = [".route(", ".fallback("]
            .iter()
            .filter_map(|next| rest.find(next))
            .min()
            .unwrap_or(rest.len());
        let handlers = &rest[open + 1 + len..end];
        for (call, method) in [
            ("get(", "GET"),
            ("post(", "POST"),
            ("patch(", "PATCH"),
            ("put(", "PUT"),
            ("delete(", "DELETE"),
        ] {
            let called = handlers.match_indices(call).any(|(i, _)| {
                // `get(` but not `forget(`: preceded by `.`, `:`, `(`, or whitespace.
                handlers[..i]
                    .chars()
                    .last()
                    .is_none_or(|c| matches!(c, '.' | ':' | '(' | ' ' | '\n'))
            });
            if called {
                routes.push((method.to_string(), path.clone()));
            }
        }
    }
    routes
}

/// Every method path of package `roost.v1`, read from the generated code.
fn declared_methods() -> Vec<String> {
    let source = include_str!("../../../roost-proto/src/gen/roost.v1.rs");
    let mut methods: Vec<String> = source
        .match_indices("\"/roost.v1.")
        .filter_map(|(i, _)| {
            let tail = &source[i + 1..];
            tail.find('"').map(|end| tail[..end].to_string())
        })
        .collect();
    methods.sort();
    methods.dedup();
    methods
}

#[test]
fn every_route_and_method_has_a_rule() {
    let routes = declared_routes();
    assert!(
        routes.len() > 40,
        "the router's source was not read: {routes:?}"
    );
    let missing: Vec<_> = routes
        .iter()
        .filter(|(m, p)| !REST.iter().any(|(rm, rp, _, _)| rm == m && rp == p))
        .collect();
    assert!(
        missing.is_empty(),
        "routes without a rule in tests/e2e/authz/rules.rs (and ARCHITECTURE.md): {missing:?}"
    );
    let stale: Vec<_> = REST
        .iter()
        .filter(|(m, p, _, _)| !routes.iter().any(|(rm, rp)| rm == m && rp == p))
        .collect();
    assert!(
        stale.is_empty(),
        "rules for routes that do not exist: {stale:?}"
    );

    let methods = declared_methods();
    assert!(
        methods.len() > 30,
        "the generated code was not read: {methods:?}"
    );
    let missing: Vec<_> = methods
        .iter()
        .filter(|m| !GRPC.iter().any(|(g, _)| g == m))
        .collect();
    assert!(
        missing.is_empty(),
        "gRPC methods without a rule: {missing:?}"
    );
    let stale: Vec<_> = GRPC
        .iter()
        .filter(|(g, _)| !methods.iter().any(|m| m == g))
        .collect();
    assert!(
        stale.is_empty(),
        "rules for methods that do not exist: {stale:?}"
    );
}

/// The objects the walk points its paths at: company A's (the node's default company) and an
/// agent of company B, a stranger to them.
struct World {
    node: TestNode,
    agent_a: String,
    key_a: String,
    key_id_a: String,
    issue_a: String,
    comment_a: String,
    run_a: String,
    wake_a: String,
    goal_a: String,
    project_a: String,
    label_a: String,
    approval_a: String,
    key_b: String,
}

impl World {
    async fn new() -> anyhow::Result<World> {
        let node = TestNode::start().await?;
        let admin = node.admin.clone();
        let cid = node.company_id.clone();
        let agent = admin
            .post(
                &format!("/api/companies/{cid}/agents"),
                json!({ "name": "a" }),
            )
            .await?
            .ok()?;
        let agent_a = text(&agent, "id")?;
        let key = admin
            .post(&format!("/api/agents/{agent_a}/keys"), json!({}))
            .await?
            .ok()?;
        let issue = node
            .issue(json!({ "title": "authz", "status": "todo" }))
            .await?;
        let issue_a = text(&issue, "id")?;
        let comment = admin
            .post(
                &format!("/api/issues/{issue_a}/comments"),
                json!({ "body": "first" }),
            )
            .await?
            .ok()?;
        let run_a = node.start_run(&agent_a).await?;
        // A second agent's wake: a wake record of company A (no worker runs it here).
        let woken = admin
            .post(
                &format!("/api/companies/{cid}/agents"),
                json!({ "name": "woken" }),
            )
            .await?
            .ok()?;
        let woken = text(&woken, "id")?;
        admin
            .post(&format!("/api/agents/{woken}/wakeup"), json!({}))
            .await?
            .ok()?;
        let wakes = admin
            .get(&format!("/api/companies/{cid}/wakes"))
            .await?
            .ok()?;
        let wake_a = wakes
            .as_array()
            .and_then(|w| w.first())
            .and_then(|w| w["id"].as_str())
            .unwrap_or("no-such-wake")
            .to_string();
        // A may hire (`permissions.canCreateAgents`), so `agent-hires` serves it.
        admin
            .patch(
                &format!("/api/agents/{agent_a}"),
                json!({ "permissions": { "canCreateAgents": true } }),
            )
            .await?
            .ok()?;
        let goal = admin
            .post(
                &format!("/api/companies/{cid}/goals"),
                json!({ "title": "authz goal" }),
            )
            .await?
            .ok()?;
        let project = admin
            .post(
                &format!("/api/companies/{cid}/projects"),
                json!({ "name": "authz project" }),
            )
            .await?
            .ok()?;
        let label = admin
            .post(
                &format!("/api/companies/{cid}/labels"),
                json!({ "name": "walk label", "color": "#00ff00" }),
            )
            .await?
            .ok()?;
        // Asked by A, which may then resubmit it (only its requester may).
        let approval = node
            .http()
            .with_token(&text(&key, "token")?)
            .post(
                &format!("/api/companies/{cid}/approvals"),
                json!({ "type": "request_board_approval", "payload": {}, "issueIds": [issue_a] }),
            )
            .await?
            .ok()?;
        let company_b = admin
            .post(
                "/api/companies",
                json!({ "name": "Stranger", "issuePrefix": "STR" }),
            )
            .await?
            .ok()?;
        let cid_b = text(&company_b, "id")?;
        let agent_b = admin
            .post(
                &format!("/api/companies/{cid_b}/agents"),
                json!({ "name": "b" }),
            )
            .await?
            .ok()?;
        let agent_b = text(&agent_b, "id")?;
        let key_b = admin
            .post(&format!("/api/agents/{agent_b}/keys"), json!({}))
            .await?
            .ok()?;
        Ok(World {
            agent_a,
            key_a: text(&key, "token")?,
            key_id_a: text(&key, "id")?,
            issue_a,
            comment_a: text(&comment, "id")?,
            run_a,
            wake_a,
            goal_a: text(&goal, "id")?,
            project_a: text(&project, "id")?,
            label_a: text(&label, "id")?,
            approval_a: text(&approval, "id")?,
            key_b: text(&key_b, "token")?,
            node,
        })
    }

    /// `path` with its parameters pointed at company A's objects.
    fn path(&self, path: &str) -> String {
        if ["/healthz", "/readyz", "/metrics"].contains(&path) {
            return path.to_string();
        }
        let id = if path.starts_with("/agents/") {
            self.agent_a.as_str()
        } else if path.starts_with("/issues/") {
            &self.issue_a
        } else if path.starts_with("/heartbeat-runs/") {
            &self.run_a
        } else if path.starts_with("/wakes/") {
            &self.wake_a
        } else if path.starts_with("/goals/") {
            &self.goal_a
        } else if path.starts_with("/projects/") {
            &self.project_a
        } else if path.starts_with("/labels/") {
            &self.label_a
        } else if path.starts_with("/approvals/") {
            &self.approval_a
        } else if path.starts_with("/cluster/nodes/") {
            "99"
        } else {
            "no-such-object"
        };
        let filled = path
            .replace("{cid}", &self.node.company_id)
            .replace("{key_id}", &self.key_id_a)
            .replace("{comment_id}", &self.comment_a)
            .replace("{key}", "plan")
            .replace("{revision_id}", "no-such-revision")
            .replace("{interaction_id}", "no-such-interaction")
            .replace("{approval_id}", &self.approval_a)
            .replace("{name}", "MEMORY.md")
            .replace("{id}", id);
        // The event stream would stay open: the walk reads what it holds so far.
        let query = if path == "/companies/{cid}/events" {
            "?follow=false"
        } else {
            ""
        };
        format!("/api{filled}{query}")
    }

    async fn call(
        &self,
        as_: &Http,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<Reply> {
        let body = (!body.is_empty()).then(|| body.replace("{agent}", &self.agent_a).into_bytes());
        self.call_raw(as_, method, path, body).await
    }

    async fn call_raw(
        &self,
        as_: &Http,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Reply> {
        let method: reqwest::Method = method.parse()?;
        let reply = as_.raw(method.clone(), &self.path(path), body).await?;
        // Every refusal on every route, whoever asks, is one a person can read: a sentence in
        // `error` (where Paperclip's clients show it), the machine code apart in `code`.
        if !reply.status.is_success() {
            let error = reply.body["error"].as_str().unwrap_or("");
            anyhow::ensure!(
                error.contains(' ') && Some(error) != reply.body["code"].as_str(),
                "{method} {path}: {} without a sentence in `error`: {}",
                reply.status,
                reply.body
            );
        }
        Ok(reply)
    }
}

fn text(v: &Value, field: &str) -> anyhow::Result<String> {
    v[field]
        .as_str()
        .map(String::from)
        .ok_or_else(|| anyhow::anyhow!("no {field} in {v}"))
}

/// The router's own 404: the path is not a route at all.
fn unrouted(reply: &Reply) -> bool {
    reply.status == 404 && reply.body.to_string().contains("API route not found")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rule_holds_against_a_real_node() -> anyhow::Result<()> {
    let w = World::new().await?;
    let http = w.node.http();
    let as_a = http.with_token(&w.key_a);
    let as_b = http.with_token(&w.key_b);
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };

    // Strangers first: nothing they send may change what the later passes find.
    for (method, path, rule, body) in REST {
        let anon = w.call(&http, method, path, body).await?;
        let what = format!(
            "{method} {path} without a credential: {} {}",
            anon.status, anon.body
        );
        match rule {
            Public => check(anon.status.is_success(), what),
            Webhook => check(anon.status == 404, what),
            _ => check(anon.status == 401, what),
        }
        let b = w.call(&as_b, method, path, body).await?;
        let what = format!(
            "{method} {path} as company B's agent: {} {}",
            b.status, b.body
        );
        match rule {
            Admin | Company | Own | CompanyRun | Assignee | Author => {
                check(matches!(b.status.as_u16(), 403 | 404), what)
            }
            Public | OwnAgent | Authenticated => check(b.status.is_success(), what),
            Webhook => check(b.status == 404, what),
            // B's key names no run: refused as bad input, not as a stranger.
            OwnRun => check(b.status == 400, what),
        }
    }
    // Company A's agent: refused on administrators' routes, served on its company's.
    for (method, path, rule, body) in REST {
        let a = w.call(&as_a, method, path, body).await?;
        let what = format!(
            "{method} {path} as company A's agent: {} {}",
            a.status, a.body
        );
        match rule {
            // The walk's issue is assigned to no one, and its comment is an administrator's.
            Admin | Assignee | Author => check(a.status == 403, what),
            // A's key names no run.
            CompanyRun => check(a.status == 401, what),
            _ => check(
                !matches!(a.status.as_u16(), 401 | 403) && !unrouted(&a),
                what,
            ),
        }
    }
    // An administrator is refused nowhere (objects may be gone or in another state by now).
    for (method, path, rule, body) in REST {
        if matches!(rule, OwnAgent | OwnRun) {
            continue;
        }
        let admin = w.call(&w.node.admin, method, path, body).await?;
        let what = format!(
            "{method} {path} as an administrator: {} {}",
            admin.status, admin.body
        );
        check(
            !matches!(admin.status.as_u16(), 401 | 403) && !unrouted(&admin),
            what,
        );
    }
    assert!(
        failures.is_empty(),
        "{} authorization failures:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // gRPC on the client port: every method refuses a call without a credential, and the Raft
    // service is not there at all.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", w.node.server().grpc_addr()))?
            .connect()
            .await?;
    for (method, rule) in GRPC {
        let status = empty_call(channel.clone(), method).await.err();
        let code = status.as_ref().map(|s| s.code());
        let expected: &[Code] = match rule {
            GrpcRule::Caller => &[Code::Unauthenticated],
            GrpcRule::Worker => &[Code::Unauthenticated, Code::InvalidArgument],
            GrpcRule::Peer => &[Code::Unimplemented],
        };
        assert!(
            code.is_some_and(|c| expected.contains(&c)),
            "{method} without a credential on the client port: {status:?}, expected {expected:?}"
        );
    }
    Ok(())
}

/// Bad input on every route, from an administrator (whom no rule refuses): a body that is not
/// JSON, and ids that name nothing. Each refusal is a 4xx with a sentence in `error` (`call`
/// checks the sentence); nothing answers 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_bad_input_with_a_sentence() -> anyhow::Result<()> {
    let w = World::new().await?;
    let mut failures = Vec::new();
    let (mut bodies, mut ids) = (0, 0);
    for (method, path, rule, body) in REST {
        if matches!(rule, Public | OwnAgent | OwnRun) {
            continue;
        }
        // Only routes that read a body (their rule's example has fields) must refuse bad JSON.
        if body.len() > 2 {
            bodies += 1;
            let reply = w
                .call_raw(&w.node.admin, method, path, Some(b"{\"title\": ".to_vec()))
                .await?;
            if reply.status != 400 {
                failures.push(format!(
                    "{method} {path} with a truncated body: {} {}",
                    reply.status, reply.body
                ));
            }
        }
        if path.contains('{') && !path.contains("{cid}/memory") {
            ids += 1;
            let missing = format!("/api{}", fill_with_nothing(path));
            let method_: reqwest::Method = method.parse()?;
            let reply = w
                .node
                .admin
                .raw(
                    method_,
                    &missing,
                    (!body.is_empty()).then(|| body.as_bytes().to_vec()),
                )
                .await?;
            let sentence = reply.body["error"]
                .as_str()
                .is_some_and(|e| e.contains(' '));
            if !(reply.status.is_client_error() && sentence) {
                failures.push(format!(
                    "{method} {missing} (ids that name nothing): {} {}",
                    reply.status, reply.body
                ));
            }
        }
    }
    assert!(
        bodies > 20 && ids > 40,
        "walked {bodies} bodies and {ids} paths"
    );
    assert!(
        failures.is_empty(),
        "{} routes mishandle bad input:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Ok(())
}

/// `path` with every parameter naming an object that does not exist.
fn fill_with_nothing(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map_or(rest.len(), |e| start + e + 1);
        let param = &rest[start..end];
        out.push_str(match param {
            "{name}" => "NO-SUCH.md",
            "{id}" if path.starts_with("/cluster/") => "4242",
            _ => "00000000-0000-4000-8000-000000000000",
        });
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Calls `method` with an empty message (every field at its default) and no credential.
async fn empty_call(
    channel: tonic::transport::Channel,
    method: &str,
) -> Result<tonic::Response<RaftPayload>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path: tonic::codegen::http::uri::PathAndQuery = method
        .parse()
        .map_err(|_| tonic::Status::internal("bad method path"))?;
    // Any message type decodes the empty body; `RaftPayload` is one at hand.
    let codec = tonic_prost::ProstCodec::<RaftPayload, RaftPayload>::default();
    grpc.unary(tonic::Request::new(RaftPayload::default()), path, codec)
        .await
}
