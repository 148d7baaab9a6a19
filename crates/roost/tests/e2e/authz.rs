//! Authorization as a table (ARCHITECTURE.md, "Authorization"): every REST route and every gRPC
//! method has a rule below, and the test walks the router's source and the generated service
//! descriptors so that a route or method added without a rule fails here. Each rule is then
//! checked against a real node with real credentials: no credential is `401` everywhere but the
//! public probes; an agent of another company is refused on every company's route; an agent of
//! the same company is refused on administrators' routes and served on its own; an administrator
//! is served everywhere; the Raft service is not on the client port. Every refusal met on the
//! way has a sentence in `error`.

use roost_proto::v1::RaftPayload;
use roost_testkit::{Http, Reply, TestNode};
use serde_json::{json, Value};
use tonic::Code;

/// Who may call a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Anyone, without a credential (health probes).
    Public,
    /// No credential: the routine webhook, whose trigger's signature the node checks; an
    /// unknown public id is `404` to everyone.
    Webhook,
    /// Administrators only.
    Admin,
    /// Administrators, and agents of the company the object belongs to.
    Company,
    /// An agent about itself (`/agents/me`); administrators are not agents.
    OwnAgent,
    /// An agent about itself during a live run of its own (`/agents/me/memory/...` writes):
    /// `400` without a run, `409 stale_run` for a run that ended; administrators are not agents.
    OwnRun,
    /// Administrators, and the agent itself (its memory): another agent of its company `403`,
    /// another company's agent `404`.
    Own,
    /// Any authenticated caller.
    Authenticated,
    /// Administrators, and agents of the company during a run (checkout): an agent's call
    /// without a run id is `401` "Agent run id required", as in Paperclip; another company's
    /// agent still `404`.
    CompanyRun,
}

use Rule::*;

/// Every REST route: method, path as the router names it (under `/api` unless it starts with
/// `/healthz`, `/readyz` or `/metrics`), rule, and a body a caller of that rule could send.
const REST: &[(&str, &str, Rule, &str)] = &[
    ("GET", "/healthz", Public, ""),
    ("GET", "/readyz", Public, ""),
    ("GET", "/metrics", Public, ""),
    ("GET", "/companies", Authenticated, ""),
    ("GET", "/health", Public, ""),
    ("GET", "/cli-auth/me", Admin, ""),
    ("GET", "/companies/stats", Authenticated, ""),
    ("GET", "/companies/{cid}/live-runs", Company, ""),
    ("GET", "/companies/{cid}/org", Company, ""),
    ("GET", "/companies/{cid}/dashboard", Company, ""),
    ("GET", "/companies/{cid}/costs/by-agent", Company, ""),
    ("GET", "/companies/{cid}/costs/by-project", Company, ""),
    ("GET", "/companies/{cid}/events", Company, ""),
    (
        "PATCH",
        "/companies/{cid}/budgets",
        Admin,
        r#"{"budgetMonthlyCents":100000}"#,
    ),
    ("GET", "/issues/{id}/activity", Company, ""),
    ("GET", "/issues/{id}/runs", Company, ""),
    ("GET", "/issues/{id}/live-runs", Company, ""),
    ("GET", "/issues/{id}/cost-summary", Company, ""),
    ("POST", "/issues/{id}/admin/force-release", Admin, "{}"),
    ("GET", "/heartbeat-runs/{id}/issues", Company, ""),
    ("GET", "/agents/{id}/configuration", Company, ""),
    ("GET", "/agents/{id}/runtime-state", Company, ""),
    (
        "POST",
        "/agents/{id}/runtime-state/reset-session",
        Admin,
        r#"{"taskKey":"authz"}"#,
    ),
    ("POST", "/agents/{id}/heartbeat/invoke", Company, "{}"),
    (
        "POST",
        "/companies",
        Admin,
        r#"{"name":"Authz","issuePrefix":"AZQ"}"#,
    ),
    ("GET", "/companies/{cid}", Company, ""),
    (
        "PATCH",
        "/companies/{cid}",
        Admin,
        r#"{"description":"authz"}"#,
    ),
    (
        "PATCH",
        "/companies/{cid}/branding",
        Admin,
        r#"{"name":"Authz Co"}"#,
    ),
    ("GET", "/companies/{cid}/agents", Company, ""),
    (
        "POST",
        "/companies/{cid}/agents",
        Admin,
        r#"{"name":"authz-new"}"#,
    ),
    ("GET", "/companies/{cid}/issues", Company, ""),
    (
        "POST",
        "/companies/{cid}/issues",
        Company,
        r#"{"title":"authz"}"#,
    ),
    ("GET", "/companies/{cid}/heartbeat-runs", Company, ""),
    ("GET", "/companies/{cid}/activity", Company, ""),
    ("GET", "/companies/{cid}/wakes", Company, ""),
    (
        "POST",
        "/companies/{cid}/cost-events",
        Company,
        r#"{"provider":"anthropic","model":"m","costCents":1}"#,
    ),
    ("GET", "/companies/{cid}/costs/summary", Company, ""),
    ("GET", "/companies/{cid}/budgets/overview", Company, ""),
    (
        "POST",
        "/companies/{cid}/budgets/policies",
        Admin,
        r#"{"scopeType":"company","amount":100000,"windowKind":"calendar_month_utc"}"#,
    ),
    (
        "POST",
        "/companies/{cid}/budget-incidents/{id}/resolve",
        Admin,
        r#"{"action":"dismiss"}"#,
    ),
    ("GET", "/agents/me", OwnAgent, ""),
    ("GET", "/agents/me/inbox-lite", OwnAgent, ""),
    ("GET", "/agents/{id}", Company, ""),
    ("PATCH", "/agents/{id}", Admin, r#"{"title":"authz"}"#),
    (
        "PATCH",
        "/agents/{id}/budgets",
        Admin,
        r#"{"budgetMonthlyCents":100000}"#,
    ),
    ("POST", "/agents/{id}/pause", Admin, "{}"),
    ("POST", "/agents/{id}/resume", Admin, "{}"),
    ("GET", "/agents/{id}/keys", Admin, ""),
    ("POST", "/agents/{id}/keys", Admin, "{}"),
    ("DELETE", "/agents/{id}/keys/{key_id}", Admin, ""),
    ("POST", "/agents/{id}/runs", Admin, "{}"),
    ("POST", "/agents/{id}/wakeup", Company, "{}"),
    ("GET", "/agents/{id}/task-sessions", Company, ""),
    ("GET", "/wakes/{id}", Company, ""),
    ("GET", "/workers", Admin, ""),
    ("GET", "/workers/join-tokens", Admin, ""),
    ("POST", "/workers/join-tokens", Admin, r#"{"name":"authz"}"#),
    ("DELETE", "/workers/join-tokens/{id}", Admin, ""),
    ("GET", "/workers/credentials", Admin, ""),
    ("DELETE", "/workers/{id}", Admin, ""),
    ("GET", "/admin/tokens", Admin, ""),
    ("POST", "/admin/tokens", Admin, r#"{"name":"authz"}"#),
    ("DELETE", "/admin/tokens/{id}", Admin, ""),
    ("GET", "/issues/{id}", Company, ""),
    ("PATCH", "/issues/{id}", Company, r#"{"priority":"high"}"#),
    (
        "POST",
        "/issues/{id}/checkout",
        CompanyRun,
        r#"{"agentId":"{agent}","expectedStatuses":["todo"]}"#,
    ),
    ("POST", "/issues/{id}/release", Company, "{}"),
    ("GET", "/issues/{id}/comments", Company, ""),
    (
        "POST",
        "/issues/{id}/comments",
        Company,
        r#"{"body":"authz"}"#,
    ),
    ("GET", "/issues/{id}/comments/{comment_id}", Company, ""),
    (
        "POST",
        "/issues/{id}/children",
        Company,
        r#"{"title":"authz child"}"#,
    ),
    ("GET", "/issues/{id}/heartbeat-context", Company, ""),
    ("GET", "/issues/{id}/active-run", Company, ""),
    ("GET", "/heartbeat-runs/{id}", Company, ""),
    ("GET", "/heartbeat-runs/{id}/log", Company, ""),
    ("GET", "/heartbeat-runs/{id}/events", Company, ""),
    (
        "POST",
        "/heartbeat-runs/{id}/finish",
        Company,
        r#"{"status":"succeeded"}"#,
    ),
    ("POST", "/heartbeat-runs/{id}/cancel", Company, "{}"),
    ("POST", "/agents/{id}/terminate", Admin, "{}"),
    ("GET", "/audit/verify", Admin, ""),
    ("GET", "/cluster/status", Admin, ""),
    ("GET", "/cluster/node", Authenticated, ""),
    ("POST", "/cluster/init", Admin, r#"{"members":[]}"#),
    (
        "POST",
        "/cluster/nodes",
        Admin,
        r#"{"id":99,"grpcAddr":"127.0.0.1:1","httpAddr":"127.0.0.1:2","peerAddr":"127.0.0.1:3","learnerOnly":true}"#,
    ),
    ("DELETE", "/cluster/nodes/{id}", Admin, ""),
    // After every other issue route: the administrator's pass deletes company A's issue.
    ("DELETE", "/issues/{id}", Admin, ""),
    ("GET", "/agents/me/memory", OwnAgent, ""),
    ("GET", "/agents/me/memory/entries", OwnAgent, ""),
    (
        "POST",
        "/agents/me/memory/entries",
        OwnRun,
        r#"{"what":"authz"}"#,
    ),
    (
        "PUT",
        "/agents/me/memory/live",
        OwnRun,
        r#"{"currentTask":{"doing":"authz"}}"#,
    ),
    ("GET", "/agents/{id}/memory", Own, ""),
    ("GET", "/agents/{id}/memory/entries", Own, ""),
    ("GET", "/agents/me/memory/search", OwnAgent, ""),
    ("GET", "/agents/{id}/memory/search", Own, ""),
    (
        "PUT",
        "/agents/{id}/memory/documents/{name}",
        Own,
        r#"{"content":"authz","expectedVersion":0}"#,
    ),
    ("GET", "/agents/{id}/memory/documents/{name}", Own, ""),
    (
        "GET",
        "/agents/{id}/memory/documents/{name}/history",
        Own,
        "",
    ),
    (
        "PUT",
        "/companies/{cid}/memory/documents/{name}",
        Admin,
        r#"{"content":"authz","expectedVersion":0}"#,
    ),
    (
        "GET",
        "/companies/{cid}/memory/documents/{name}",
        Company,
        "",
    ),
    (
        "GET",
        "/companies/{cid}/memory/documents/{name}/history",
        Company,
        "",
    ),
    ("GET", "/companies/{cid}/memory/entries", Company, ""),
    (
        "POST",
        "/companies/{cid}/memory/entries",
        OwnRun,
        r#"{"what":"authz"}"#,
    ),
    // Never saved: a 404 for those who may read it, which the checks allow.
    ("GET", "/companies/{cid}/memory/live", Company, ""),
    (
        "PUT",
        "/companies/{cid}/memory/live",
        Company,
        r#"{"currentTask":{"doing":"authz"}}"#,
    ),
    ("GET", "/companies/{cid}/routines", Company, ""),
    (
        "POST",
        "/companies/{cid}/routines",
        Admin,
        r#"{"title":"authz routine"}"#,
    ),
    ("GET", "/routines/{id}", Company, ""),
    ("PATCH", "/routines/{id}", Admin, r#"{"title":"renamed"}"#),
    ("GET", "/routines/{id}/runs", Company, ""),
    ("GET", "/routines/{id}/triggers", Company, ""),
    (
        "POST",
        "/routines/{id}/triggers",
        Admin,
        r#"{"kind":"api"}"#,
    ),
    ("POST", "/routines/{id}/run", Company, "{}"),
    (
        "PATCH",
        "/routine-triggers/{id}",
        Admin,
        r#"{"enabled":true}"#,
    ),
    ("DELETE", "/routine-triggers/{id}", Admin, ""),
    ("POST", "/routine-triggers/{id}/rotate-secret", Admin, "{}"),
    ("POST", "/routine-triggers/public/{id}/fire", Webhook, "{}"),
    ("GET", "/companies/{cid}/goals", Company, ""),
    (
        "POST",
        "/companies/{cid}/goals",
        Company,
        r#"{"title":"authz goal"}"#,
    ),
    ("GET", "/goals/{id}", Company, ""),
    ("PATCH", "/goals/{id}", Company, r#"{"title":"renamed"}"#),
    ("DELETE", "/goals/{id}", Admin, ""),
    ("GET", "/companies/{cid}/projects", Company, ""),
    (
        "POST",
        "/companies/{cid}/projects",
        Company,
        r#"{"name":"authz project"}"#,
    ),
    ("GET", "/projects/{id}", Company, ""),
    ("PATCH", "/projects/{id}", Company, r#"{"name":"renamed"}"#),
    ("DELETE", "/projects/{id}", Admin, ""),
    (
        "POST",
        "/projects/{id}/pause",
        Company,
        r#"{"reason":"authz"}"#,
    ),
    ("POST", "/projects/{id}/resume", Company, "{}"),
    ("GET", "/companies/{cid}/skills", Company, ""),
    (
        "POST",
        "/companies/{cid}/skills",
        Admin,
        r#"{"name":"authz skill"}"#,
    ),
    ("GET", "/companies/{cid}/skills/{id}", Company, ""),
    (
        "PATCH",
        "/companies/{cid}/skills/{id}",
        Admin,
        r#"{"name":"renamed"}"#,
    ),
    ("DELETE", "/companies/{cid}/skills/{id}", Admin, ""),
    ("GET", "/companies/{cid}/skills/{id}/files", Company, ""),
    (
        "PATCH",
        "/companies/{cid}/skills/{id}/files",
        Admin,
        r#"{"path":"notes.md","content":"x"}"#,
    ),
    (
        "PUT",
        "/companies/{cid}/skills/{id}/files",
        Admin,
        r#"{"path":"notes.md","content":"x"}"#,
    ),
    ("DELETE", "/companies/{cid}/skills/{id}/files", Admin, ""),
    ("GET", "/agents/{id}/skills", Company, ""),
    (
        "POST",
        "/agents/{id}/skills/sync",
        Admin,
        r#"{"desiredSkills":[]}"#,
    ),
    ("GET", "/companies/{cid}/approvals", Company, ""),
    (
        "POST",
        "/companies/{cid}/approvals",
        Company,
        r#"{"type":"request_board_approval","payload":{"why":"authz"}}"#,
    ),
    (
        "POST",
        "/companies/{cid}/agent-hires",
        Company,
        r#"{"name":"hired by authz"}"#,
    ),
    ("GET", "/approvals/{id}", Company, ""),
    ("GET", "/approvals/{id}/issues", Company, ""),
    (
        "POST",
        "/approvals/{id}/approve",
        Admin,
        r#"{"decisionNote":"ok"}"#,
    ),
    (
        "POST",
        "/approvals/{id}/reject",
        Admin,
        r#"{"decisionNote":"no"}"#,
    ),
    (
        "POST",
        "/approvals/{id}/request-revision",
        Admin,
        r#"{"decisionNote":"again"}"#,
    ),
    ("POST", "/approvals/{id}/resubmit", Company, "{}"),
    ("GET", "/approvals/{id}/comments", Company, ""),
    (
        "POST",
        "/approvals/{id}/comments",
        Company,
        r#"{"body":"a comment"}"#,
    ),
    ("GET", "/issues/{id}/approvals", Company, ""),
    ("GET", "/agents/me/home", OwnAgent, ""),
    (
        "PUT",
        "/agents/me/home",
        OwnRun,
        r#"{"baseVersion":0,"files":{}}"#,
    ),
    ("POST", "/agents/me/home/chunks", OwnRun, r#"{"chunks":[]}"#),
    ("GET", "/agents/{id}/home", Own, ""),
    ("GET", "/agents/{id}/home/chunks/{hash}", Own, ""),
];

/// Who may call a gRPC method. `Peer` methods are served on the peer listener only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GrpcRule {
    /// An administrator or agent token, checked per method as its REST twin.
    Caller,
    /// A worker's join token or credential, in its session's first message.
    Worker,
    /// Another node of the cluster (the peer listener; tested in `peers.rs`).
    Peer,
}

const GRPC: &[(&str, GrpcRule)] = &[
    ("/roost.v1.Cluster/AddNode", GrpcRule::Caller),
    ("/roost.v1.Cluster/Init", GrpcRule::Caller),
    ("/roost.v1.Cluster/NodeStatus", GrpcRule::Caller),
    ("/roost.v1.Cluster/RemoveNode", GrpcRule::Caller),
    ("/roost.v1.Cluster/Status", GrpcRule::Caller),
    ("/roost.v1.Control/AddApprovalComment", GrpcRule::Caller),
    ("/roost.v1.Control/AddComment", GrpcRule::Caller),
    ("/roost.v1.Control/AppendMemoryEntry", GrpcRule::Caller),
    ("/roost.v1.Control/CancelRun", GrpcRule::Caller),
    ("/roost.v1.Control/Checkout", GrpcRule::Caller),
    ("/roost.v1.Control/CreateAdminToken", GrpcRule::Caller),
    ("/roost.v1.Control/CreateAgent", GrpcRule::Caller),
    ("/roost.v1.Control/CreateAgentKey", GrpcRule::Caller),
    ("/roost.v1.Control/CreateApproval", GrpcRule::Caller),
    ("/roost.v1.Control/CreateCompany", GrpcRule::Caller),
    ("/roost.v1.Control/CreateGoal", GrpcRule::Caller),
    ("/roost.v1.Control/CreateIssue", GrpcRule::Caller),
    ("/roost.v1.Control/CreateProject", GrpcRule::Caller),
    ("/roost.v1.Control/CreateRoutine", GrpcRule::Caller),
    ("/roost.v1.Control/CreateRoutineTrigger", GrpcRule::Caller),
    ("/roost.v1.Control/CreateSkill", GrpcRule::Caller),
    ("/roost.v1.Control/CreateWorkerJoinToken", GrpcRule::Caller),
    ("/roost.v1.Control/DecideApproval", GrpcRule::Caller),
    ("/roost.v1.Control/DeleteGoal", GrpcRule::Caller),
    ("/roost.v1.Control/DeleteIssue", GrpcRule::Caller),
    ("/roost.v1.Control/DeleteProject", GrpcRule::Caller),
    ("/roost.v1.Control/DeleteRoutineTrigger", GrpcRule::Caller),
    ("/roost.v1.Control/DeleteSkill", GrpcRule::Caller),
    ("/roost.v1.Control/FinishRun", GrpcRule::Caller),
    ("/roost.v1.Control/GetAgent", GrpcRule::Caller),
    ("/roost.v1.Control/GetAgentSkills", GrpcRule::Caller),
    ("/roost.v1.Control/GetApproval", GrpcRule::Caller),
    ("/roost.v1.Control/GetBudgetOverview", GrpcRule::Caller),
    ("/roost.v1.Control/GetComment", GrpcRule::Caller),
    ("/roost.v1.Control/GetCompany", GrpcRule::Caller),
    ("/roost.v1.Control/GetCompanyMemoryLive", GrpcRule::Caller),
    ("/roost.v1.Control/GetCostSummary", GrpcRule::Caller),
    ("/roost.v1.Control/GetGoal", GrpcRule::Caller),
    ("/roost.v1.Control/GetHeartbeatContext", GrpcRule::Caller),
    ("/roost.v1.Control/GetInbox", GrpcRule::Caller),
    ("/roost.v1.Control/GetIssue", GrpcRule::Caller),
    ("/roost.v1.Control/GetMe", GrpcRule::Caller),
    ("/roost.v1.Control/GetMemoryDocument", GrpcRule::Caller),
    ("/roost.v1.Control/GetMemorySummary", GrpcRule::Caller),
    ("/roost.v1.Control/GetProject", GrpcRule::Caller),
    ("/roost.v1.Control/GetRoutine", GrpcRule::Caller),
    ("/roost.v1.Control/GetRun", GrpcRule::Caller),
    ("/roost.v1.Control/GetSkill", GrpcRule::Caller),
    ("/roost.v1.Control/GetWake", GrpcRule::Caller),
    ("/roost.v1.Control/HireAgent", GrpcRule::Caller),
    ("/roost.v1.Control/ListActivity", GrpcRule::Caller),
    ("/roost.v1.Control/ListAgents", GrpcRule::Caller),
    ("/roost.v1.Control/ListApprovalComments", GrpcRule::Caller),
    ("/roost.v1.Control/ListApprovals", GrpcRule::Caller),
    ("/roost.v1.Control/ListComments", GrpcRule::Caller),
    ("/roost.v1.Control/ListCompanies", GrpcRule::Caller),
    ("/roost.v1.Control/ListCredentials", GrpcRule::Caller),
    ("/roost.v1.Control/ListGoals", GrpcRule::Caller),
    ("/roost.v1.Control/ListIssues", GrpcRule::Caller),
    (
        "/roost.v1.Control/ListMemoryDocumentVersions",
        GrpcRule::Caller,
    ),
    ("/roost.v1.Control/ListMemoryEntries", GrpcRule::Caller),
    ("/roost.v1.Control/ListProjects", GrpcRule::Caller),
    ("/roost.v1.Control/ListRoutineRuns", GrpcRule::Caller),
    ("/roost.v1.Control/ListRoutineTriggers", GrpcRule::Caller),
    ("/roost.v1.Control/ListRoutines", GrpcRule::Caller),
    ("/roost.v1.Control/ListRuns", GrpcRule::Caller),
    ("/roost.v1.Control/ListSkills", GrpcRule::Caller),
    ("/roost.v1.Control/ListWakes", GrpcRule::Caller),
    ("/roost.v1.Control/ListWorkers", GrpcRule::Caller),
    ("/roost.v1.Control/PauseAgent", GrpcRule::Caller),
    ("/roost.v1.Control/PauseProject", GrpcRule::Caller),
    ("/roost.v1.Control/PutMemoryDocument", GrpcRule::Caller),
    ("/roost.v1.Control/RecordCostEvent", GrpcRule::Caller),
    ("/roost.v1.Control/Release", GrpcRule::Caller),
    ("/roost.v1.Control/ResetAgentSession", GrpcRule::Caller),
    ("/roost.v1.Control/ResolveBudgetIncident", GrpcRule::Caller),
    ("/roost.v1.Control/ResubmitApproval", GrpcRule::Caller),
    ("/roost.v1.Control/ResumeAgent", GrpcRule::Caller),
    ("/roost.v1.Control/ResumeProject", GrpcRule::Caller),
    ("/roost.v1.Control/RevokeCredential", GrpcRule::Caller),
    ("/roost.v1.Control/RevokeWorker", GrpcRule::Caller),
    (
        "/roost.v1.Control/RotateRoutineTriggerSecret",
        GrpcRule::Caller,
    ),
    ("/roost.v1.Control/RunRoutine", GrpcRule::Caller),
    ("/roost.v1.Control/SearchMemory", GrpcRule::Caller),
    ("/roost.v1.Control/SetAgentSkills", GrpcRule::Caller),
    ("/roost.v1.Control/SetBudgetPolicy", GrpcRule::Caller),
    ("/roost.v1.Control/SetMemoryLive", GrpcRule::Caller),
    ("/roost.v1.Control/StartRun", GrpcRule::Caller),
    ("/roost.v1.Control/StreamRunLog", GrpcRule::Caller),
    ("/roost.v1.Control/TerminateAgent", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateAgent", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateCompany", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateGoal", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateIssue", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateProject", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateRoutine", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateRoutineTrigger", GrpcRule::Caller),
    ("/roost.v1.Control/UpdateSkill", GrpcRule::Caller),
    ("/roost.v1.Control/VerifyAudit", GrpcRule::Caller),
    ("/roost.v1.Control/Wakeup", GrpcRule::Caller),
    ("/roost.v1.Control/Watch", GrpcRule::Caller),
    ("/roost.v1.Raft/AppendEntries", GrpcRule::Peer),
    ("/roost.v1.Raft/AppendEntriesStream", GrpcRule::Peer),
    ("/roost.v1.Raft/Forward", GrpcRule::Peer),
    ("/roost.v1.Raft/InstallSnapshot", GrpcRule::Peer),
    ("/roost.v1.Raft/ReadIndex", GrpcRule::Peer),
    ("/roost.v1.Raft/Vote", GrpcRule::Peer),
    ("/roost.v1.Worker/Attach", GrpcRule::Worker),
];

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
        "routes without a rule in tests/e2e/authz.rs (and ARCHITECTURE.md): {missing:?}"
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
            Admin | Company | Own | CompanyRun => {
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
            Admin => check(a.status == 403, what),
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
