//! REST and gRPC offer the same operations. This test reads both surfaces from their sources
//! (every `.route(...)` of `rest/mod.rs`, every `rpc` of the `Control` and `Cluster` services in
//! `proto/roost/v1/`) and fails on a REST operation missing from [`SURFACE`], an entry naming a
//! route or method that does not exist, or a gRPC method no entry names. A REST operation
//! without a gRPC twin must say why, in the table: a Paperclip-compatible shape over an
//! operation that has one, something only HTTP does, or a gap still to close.

use std::collections::BTreeSet;

/// What a REST operation has on the gRPC side.
#[derive(Clone, Copy, Debug)]
enum Twin {
    /// The gRPC method doing the same operation.
    Grpc(&'static str),
    /// Paperclip's shape over data another method serves (named in the reason).
    Paperclip(&'static str),
    /// Only meaningful over HTTP.
    Http(&'static str),
    /// Not on gRPC yet: Paperclip's cost breakdowns.
    Gap(&'static str),
}

use Twin::*;

/// Every REST operation (`METHOD path` under `/api`, as `rest/mod.rs` routes it) and its twin.
const SURFACE: &[(&str, Twin)] = &[
    // Companies.
    ("GET /companies", Grpc("ListCompanies")),
    ("POST /companies", Grpc("CreateCompany")),
    ("GET /companies/{cid}", Grpc("GetCompany")),
    ("PATCH /companies/{cid}", Grpc("UpdateCompany")),
    (
        "PATCH /companies/{cid}/branding",
        Paperclip("branding fields of the company update"),
    ),
    (
        "POST /companies/{cid}/archive",
        Paperclip("UpdateCompany with status archived"),
    ),
    (
        "GET /companies/stats",
        Paperclip("counts per company, from ListAgents and ListIssues"),
    ),
    (
        "GET /companies/{cid}/dashboard",
        Paperclip("the web UI's summary of agents, issues, spend"),
    ),
    (
        "GET /companies/{cid}/org",
        Paperclip("the org tree from ListAgents' reportsTo"),
    ),
    // Agents.
    ("GET /companies/{cid}/agents", Grpc("ListAgents")),
    ("POST /companies/{cid}/agents", Grpc("CreateAgent")),
    ("GET /agents/{id}", Grpc("GetAgent")),
    ("PATCH /agents/{id}", Grpc("UpdateAgent")),
    ("POST /agents/{id}/pause", Grpc("PauseAgent")),
    ("DELETE /agents/{id}", Grpc("DeleteAgent")),
    (
        "PATCH /agents/{id}/budgets",
        Paperclip("the agent's monthly policy, by SetBudgetPolicy"),
    ),
    ("POST /agents/{id}/resume", Grpc("ResumeAgent")),
    ("POST /agents/{id}/terminate", Grpc("TerminateAgent")),
    (
        "POST /agents/{id}/approve",
        Paperclip("DecideApproval on the agent's open hire_agent approval"),
    ),
    (
        "PATCH /agents/{id}/permissions",
        Paperclip("UpdateAgent with permissions"),
    ),
    ("GET /agents/me", Grpc("GetMe")),
    (
        "GET /cli-auth/me",
        Paperclip("the CLI's who-am-I for an administrator token"),
    ),
    (
        "GET /agents/{id}/configuration",
        Paperclip("GetAgent's adapter configuration"),
    ),
    (
        "GET /agents/{id}/config-revisions",
        Grpc("ListAgentConfigRevisions"),
    ),
    (
        "GET /agents/{id}/config-revisions/{revision_id}",
        Grpc("GetAgentConfigRevision"),
    ),
    (
        "POST /agents/{id}/config-revisions/{revision_id}/rollback",
        Grpc("RollbackAgentConfig"),
    ),
    (
        "GET /agents/{id}/runtime-state",
        Paperclip("GetAgent's status and saved sessions"),
    ),
    (
        "POST /agents/{id}/runtime-state/reset-session",
        Grpc("ResetAgentSession"),
    ),
    (
        "GET /agents/{id}/task-sessions",
        Paperclip("GetAgent's saved sessions"),
    ),
    ("POST /companies/{cid}/agent-hires", Grpc("HireAgent")),
    // Credentials.
    ("GET /agents/{id}/keys", Grpc("ListCredentials")),
    ("POST /agents/{id}/keys", Grpc("CreateAgentKey")),
    (
        "DELETE /agents/{id}/keys/{key_id}",
        Grpc("RevokeCredential"),
    ),
    ("GET /admin/tokens", Grpc("ListCredentials")),
    ("POST /admin/tokens", Grpc("CreateAdminToken")),
    ("DELETE /admin/tokens/{id}", Grpc("RevokeCredential")),
    ("GET /workers/join-tokens", Grpc("ListCredentials")),
    ("POST /workers/join-tokens", Grpc("CreateWorkerJoinToken")),
    ("DELETE /workers/join-tokens/{id}", Grpc("RevokeCredential")),
    ("GET /workers/credentials", Grpc("ListCredentials")),
    ("DELETE /workers/{id}", Grpc("RevokeWorker")),
    // Issues and comments.
    ("GET /companies/{cid}/issues", Grpc("ListIssues")),
    ("POST /companies/{cid}/issues", Grpc("CreateIssue")),
    (
        "POST /issues/{id}/children",
        Paperclip("CreateIssue with a parentId"),
    ),
    ("GET /issues/{id}", Grpc("GetIssue")),
    ("PATCH /issues/{id}", Grpc("UpdateIssue")),
    ("DELETE /issues/{id}", Grpc("DeleteIssue")),
    ("POST /issues/{id}/checkout", Grpc("Checkout")),
    ("POST /issues/{id}/release", Grpc("Release")),
    (
        "POST /issues/{id}/monitor/check-now",
        Grpc("CheckIssueMonitor"),
    ),
    (
        "POST /issues/{id}/admin/force-release",
        Paperclip("an administrator's Release"),
    ),
    ("GET /issues/{id}/comments", Grpc("ListComments")),
    ("POST /issues/{id}/comments", Grpc("AddComment")),
    ("GET /issues/{id}/comments/{comment_id}", Grpc("GetComment")),
    (
        "DELETE /issues/{id}/comments/{comment_id}",
        Grpc("DeleteComment"),
    ),
    // Attachments and work products (rest/attachments.rs).
    (
        "POST /companies/{cid}/issues/{id}/attachments",
        Grpc("UploadIssueAttachment"),
    ),
    ("GET /issues/{id}/attachments", Grpc("ListIssueAttachments")),
    (
        "GET /attachments/{id}/content",
        Grpc("GetIssueAttachmentContent"),
    ),
    ("DELETE /attachments/{id}", Grpc("DeleteIssueAttachment")),
    ("GET /issues/{id}/work-products", Grpc("ListWorkProducts")),
    ("POST /issues/{id}/work-products", Grpc("CreateWorkProduct")),
    ("PATCH /work-products/{id}", Grpc("UpdateWorkProduct")),
    ("DELETE /work-products/{id}", Grpc("DeleteWorkProduct")),
    ("GET /issues/{id}/documents", Grpc("ListIssueDocuments")),
    ("GET /issues/{id}/documents/{key}", Grpc("GetIssueDocument")),
    ("PUT /issues/{id}/documents/{key}", Grpc("PutIssueDocument")),
    (
        "DELETE /issues/{id}/documents/{key}",
        Grpc("DeleteIssueDocument"),
    ),
    (
        "GET /issues/{id}/documents/{key}/revisions",
        Grpc("ListDocumentRevisions"),
    ),
    (
        "POST /issues/{id}/documents/{key}/revisions/{revision_id}/restore",
        Grpc("RestoreIssueDocument"),
    ),
    (
        "POST /issues/{id}/documents/{key}/lock",
        Grpc("LockIssueDocument"),
    ),
    (
        "POST /issues/{id}/documents/{key}/unlock",
        Grpc("UnlockIssueDocument"),
    ),
    (
        "GET /issues/{id}/interactions",
        Grpc("ListIssueInteractions"),
    ),
    (
        "POST /issues/{id}/interactions",
        Grpc("CreateIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/accept",
        Grpc("AcceptIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/reject",
        Grpc("RejectIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/respond",
        Grpc("RespondIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/verdicts",
        Grpc("SubmitIssueInteractionVerdicts"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/withdraw",
        Grpc("WithdrawIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/skip",
        Grpc("SkipIssueInteraction"),
    ),
    (
        "POST /issues/{id}/interactions/{interaction_id}/cancel",
        Grpc("CancelIssueInteraction"),
    ),
    (
        "GET /issues/{id}/heartbeat-context",
        Grpc("GetHeartbeatContext"),
    ),
    ("GET /agents/me/inbox-lite", Grpc("GetInbox")),
    (
        "GET /issues/{id}/activity",
        Paperclip("ListActivity entries naming the issue"),
    ),
    // Runs.
    ("GET /companies/{cid}/heartbeat-runs", Grpc("ListRuns")),
    (
        "GET /companies/{cid}/live-runs",
        Paperclip("ListRuns of live runs"),
    ),
    ("GET /issues/{id}/runs", Paperclip("ListRuns of an issue")),
    (
        "GET /issues/{id}/live-runs",
        Paperclip("ListRuns of an issue's live runs"),
    ),
    (
        "GET /issues/{id}/active-run",
        Paperclip("ListRuns of an issue's live run"),
    ),
    (
        "GET /heartbeat-runs/{id}/issues",
        Paperclip("GetRun's issue"),
    ),
    ("POST /agents/{id}/runs", Grpc("StartRun")),
    ("GET /heartbeat-runs/{id}", Grpc("GetRun")),
    ("GET /heartbeat-runs/{id}/log", Grpc("StreamRunLog")),
    (
        "GET /heartbeat-runs/{id}/events",
        Paperclip("the run log as Paperclip's events, from StreamRunLog"),
    ),
    ("POST /heartbeat-runs/{id}/finish", Grpc("FinishRun")),
    ("POST /heartbeat-runs/{id}/cancel", Grpc("CancelRun")),
    // Wakes and workers.
    ("POST /agents/{id}/wakeup", Grpc("Wakeup")),
    (
        "POST /agents/{id}/heartbeat/invoke",
        Paperclip("Paperclip's older wakeup"),
    ),
    ("GET /companies/{cid}/wakes", Grpc("ListWakes")),
    ("GET /wakes/{id}", Grpc("GetWake")),
    ("GET /workers", Grpc("ListWorkers")),
    // Activity, events, audit.
    ("GET /companies/{cid}/activity", Grpc("ListActivity")),
    ("GET /companies/{cid}/events", Grpc("Watch")),
    ("GET /audit/verify", Grpc("VerifyAudit")),
    // Budgets and costs.
    ("POST /companies/{cid}/cost-events", Grpc("RecordCostEvent")),
    ("GET /companies/{cid}/costs/summary", Grpc("GetCostSummary")),
    (
        "GET /companies/{cid}/costs/by-agent",
        Paperclip("the cost summary per agent"),
    ),
    (
        "GET /companies/{cid}/costs/by-project",
        Paperclip("the cost summary per project"),
    ),
    (
        "GET /companies/{cid}/costs/by-provider",
        Gap("events by provider and model; gRPC has GetCostSummary's totals"),
    ),
    (
        "GET /companies/{cid}/costs/by-biller",
        Gap("events by biller; gRPC has GetCostSummary's totals"),
    ),
    (
        "GET /companies/{cid}/costs/by-agent-model",
        Gap("events by agent and model; gRPC has GetCostSummary's totals"),
    ),
    (
        "GET /companies/{cid}/costs/window-spend",
        Gap("spend of the last 5 h, 24 h, 7 d; gRPC has GetCostSummary's totals"),
    ),
    (
        "GET /issues/{id}/cost-summary",
        Paperclip("the cost events naming an issue"),
    ),
    (
        "GET /companies/{cid}/budgets/overview",
        Grpc("GetBudgetOverview"),
    ),
    (
        "POST /companies/{cid}/budgets/policies",
        Grpc("SetBudgetPolicy"),
    ),
    (
        "PATCH /companies/{cid}/budgets",
        Paperclip("a monthly SetBudgetPolicy"),
    ),
    (
        "POST /companies/{cid}/budget-incidents/{id}/resolve",
        Grpc("ResolveBudgetIncident"),
    ),
    // Memory and homes.
    ("GET /agents/me/memory", Grpc("GetMemorySummary")),
    ("GET /agents/{id}/memory", Grpc("GetMemorySummary")),
    ("GET /agents/me/memory/entries", Grpc("ListMemoryEntries")),
    ("GET /agents/{id}/memory/entries", Grpc("ListMemoryEntries")),
    ("POST /agents/me/memory/entries", Grpc("AppendMemoryEntry")),
    ("PUT /agents/me/memory/live", Grpc("SetMemoryLive")),
    ("GET /agents/me/memory/search", Grpc("SearchMemory")),
    ("GET /agents/{id}/memory/search", Grpc("SearchMemory")),
    (
        "GET /agents/{id}/memory/documents/{name}",
        Grpc("GetMemoryDocument"),
    ),
    (
        "PUT /agents/{id}/memory/documents/{name}",
        Grpc("PutMemoryDocument"),
    ),
    (
        "GET /agents/{id}/memory/documents/{name}/history",
        Grpc("ListMemoryDocumentVersions"),
    ),
    (
        "GET /companies/{cid}/memory/entries",
        Grpc("ListMemoryEntries"),
    ),
    (
        "POST /companies/{cid}/memory/entries",
        Grpc("AppendMemoryEntry"),
    ),
    (
        "GET /companies/{cid}/memory/live",
        Grpc("GetCompanyMemoryLive"),
    ),
    ("PUT /companies/{cid}/memory/live", Grpc("SetMemoryLive")),
    (
        "GET /companies/{cid}/memory/documents/{name}",
        Grpc("GetMemoryDocument"),
    ),
    (
        "PUT /companies/{cid}/memory/documents/{name}",
        Grpc("PutMemoryDocument"),
    ),
    (
        "GET /companies/{cid}/memory/documents/{name}/history",
        Grpc("ListMemoryDocumentVersions"),
    ),
    (
        "GET /agents/me/home",
        Http("the worker's home sync: chunked files over HTTP"),
    ),
    (
        "PUT /agents/me/home",
        Http("the worker's home sync: chunked files over HTTP"),
    ),
    (
        "POST /agents/me/home/chunks",
        Http("the worker's home sync: chunked files over HTTP"),
    ),
    (
        "GET /agents/{id}/home",
        Http("the worker's home sync: chunked files over HTTP"),
    ),
    (
        "GET /agents/{id}/home/chunks/{hash}",
        Http("the worker's home sync: chunked files over HTTP"),
    ),
    // Goals and projects.
    ("GET /companies/{cid}/goals", Grpc("ListGoals")),
    ("POST /companies/{cid}/goals", Grpc("CreateGoal")),
    ("GET /goals/{id}", Grpc("GetGoal")),
    ("PATCH /goals/{id}", Grpc("UpdateGoal")),
    ("DELETE /goals/{id}", Grpc("DeleteGoal")),
    ("GET /companies/{cid}/projects", Grpc("ListProjects")),
    ("POST /companies/{cid}/projects", Grpc("CreateProject")),
    ("GET /projects/{id}", Grpc("GetProject")),
    ("PATCH /projects/{id}", Grpc("UpdateProject")),
    ("DELETE /projects/{id}", Grpc("DeleteProject")),
    ("POST /projects/{id}/pause", Grpc("PauseProject")),
    ("POST /projects/{id}/resume", Grpc("ResumeProject")),
    ("GET /companies/{cid}/labels", Grpc("ListLabels")),
    ("POST /companies/{cid}/labels", Grpc("CreateLabel")),
    ("DELETE /labels/{id}", Grpc("DeleteLabel")),
    // Skills.
    ("GET /companies/{cid}/skills", Grpc("ListSkills")),
    ("POST /companies/{cid}/skills", Grpc("CreateSkill")),
    ("GET /companies/{cid}/skills/{id}", Grpc("GetSkill")),
    ("PATCH /companies/{cid}/skills/{id}", Grpc("UpdateSkill")),
    ("DELETE /companies/{cid}/skills/{id}", Grpc("DeleteSkill")),
    ("GET /companies/{cid}/skills/{id}/files", Grpc("GetSkill")),
    (
        "PATCH /companies/{cid}/skills/{id}/files",
        Grpc("UpdateSkill"),
    ),
    (
        "PUT /companies/{cid}/skills/{id}/files",
        Grpc("UpdateSkill"),
    ),
    (
        "DELETE /companies/{cid}/skills/{id}/files",
        Grpc("UpdateSkill"),
    ),
    ("GET /agents/{id}/skills", Grpc("GetAgentSkills")),
    ("POST /agents/{id}/skills/sync", Grpc("SetAgentSkills")),
    // Approvals.
    ("GET /companies/{cid}/approvals", Grpc("ListApprovals")),
    ("POST /companies/{cid}/approvals", Grpc("CreateApproval")),
    ("GET /approvals/{id}", Grpc("GetApproval")),
    (
        "GET /approvals/{id}/issues",
        Paperclip("GetApproval's linked issues"),
    ),
    (
        "GET /issues/{id}/approvals",
        Paperclip("ListApprovals naming an issue"),
    ),
    ("POST /issues/{id}/approvals", Grpc("LinkIssueApproval")),
    (
        "DELETE /issues/{id}/approvals/{approval_id}",
        Grpc("UnlinkIssueApproval"),
    ),
    ("POST /approvals/{id}/approve", Grpc("DecideApproval")),
    ("POST /approvals/{id}/reject", Grpc("DecideApproval")),
    (
        "POST /approvals/{id}/request-revision",
        Grpc("DecideApproval"),
    ),
    ("POST /approvals/{id}/resubmit", Grpc("ResubmitApproval")),
    ("GET /approvals/{id}/comments", Grpc("ListApprovalComments")),
    ("POST /approvals/{id}/comments", Grpc("AddApprovalComment")),
    // Routines.
    ("GET /companies/{cid}/routines", Grpc("ListRoutines")),
    ("POST /companies/{cid}/routines", Grpc("CreateRoutine")),
    ("GET /routines/{id}", Grpc("GetRoutine")),
    ("PATCH /routines/{id}", Grpc("UpdateRoutine")),
    ("GET /routines/{id}/runs", Grpc("ListRoutineRuns")),
    ("POST /routines/{id}/run", Grpc("RunRoutine")),
    ("GET /routines/{id}/triggers", Grpc("ListRoutineTriggers")),
    ("POST /routines/{id}/triggers", Grpc("CreateRoutineTrigger")),
    ("PATCH /routine-triggers/{id}", Grpc("UpdateRoutineTrigger")),
    (
        "DELETE /routine-triggers/{id}",
        Grpc("DeleteRoutineTrigger"),
    ),
    (
        "POST /routine-triggers/{id}/rotate-secret",
        Grpc("RotateRoutineTriggerSecret"),
    ),
    (
        "POST /routine-triggers/public/{id}/fire",
        Http("a webhook, signed by its secret"),
    ),
    // The cluster.
    ("GET /cluster/status", Grpc("Status")),
    ("GET /cluster/node", Grpc("NodeStatus")),
    ("POST /cluster/init", Grpc("Init")),
    ("POST /cluster/nodes", Grpc("AddNode")),
    ("DELETE /cluster/nodes/{id}", Grpc("RemoveNode")),
    // Probes.
    ("GET /health", Http("Paperclip's liveness probe")),
    (
        "GET /healthz",
        Http("a process supervisor's liveness probe"),
    ),
    ("GET /readyz", Http("a load balancer's readiness probe")),
    ("GET /metrics", Http("Prometheus scrapes HTTP")),
];

/// gRPC methods with no REST operation of their own.
const GRPC_ONLY: &[(&str, &str)] = &[
    (
        "ScheduleIssueMonitor",
        "REST schedules a monitor with the executionPolicy of PATCH /issues/{id}",
    ),
    (
        "ClearIssueMonitor",
        "REST clears a monitor with an executionPolicy without one in PATCH /issues/{id}",
    ),
];

/// `METHOD path` of every operation `.route(...)` registers in `source`.
fn rest_operations(source: &str) -> Vec<String> {
    let mut operations = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        // The call's arguments, up to its closing parenthesis.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            })
            .expect("a closed .route( call");
        let args = &rest[..end];
        let path = args.split('"').nth(1).expect("a route's path literal");
        for method in ["get", "post", "put", "patch", "delete"] {
            let call = format!("{method}(");
            let named = args.match_indices(&call).any(|(i, _)| {
                i == 0 || !args[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
            });
            if named {
                operations.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        rest = &rest[end..];
    }
    operations
}

/// The `rpc` names of `service` in a `.proto` file.
fn rpcs(proto: &str, service: &str) -> Vec<String> {
    let body = proto
        .split(&format!("service {service} {{"))
        .nth(1)
        .and_then(|s| s.split("\n}").next())
        .unwrap_or_else(|| panic!("service {service}"));
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("rpc "))
        .map(|l| l.split('(').next().unwrap_or_default().trim().to_string())
        .collect()
}

#[test]
fn every_rest_operation_has_a_grpc_twin_or_a_written_reason() {
    let rest: BTreeSet<String> = rest_operations(include_str!("rest/mod.rs"))
        .into_iter()
        .collect();
    assert!(rest.len() > 100, "the route parser found {}", rest.len());
    let listed: BTreeSet<String> = SURFACE.iter().map(|(op, _)| op.to_string()).collect();
    assert_eq!(listed.len(), SURFACE.len(), "an operation is listed twice");

    let unlisted: Vec<_> = rest.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "REST operations with no entry in SURFACE (give each its gRPC twin, or say why it has \
         none): {unlisted:?}"
    );
    let stale: Vec<_> = listed.difference(&rest).collect();
    assert!(
        stale.is_empty(),
        "SURFACE lists operations REST no longer has: {stale:?}"
    );

    let grpc: BTreeSet<String> = rpcs(
        include_str!("../../../proto/roost/v1/control.proto"),
        "Control",
    )
    .into_iter()
    .chain(rpcs(
        include_str!("../../../proto/roost/v1/cluster.proto"),
        "Cluster",
    ))
    .collect();
    let named: BTreeSet<String> = SURFACE
        .iter()
        .filter_map(|(_, twin)| match twin {
            Grpc(m) => Some(m.to_string()),
            _ => None,
        })
        .chain(GRPC_ONLY.iter().map(|(m, _)| m.to_string()))
        .collect();
    let unknown: Vec<_> = named.difference(&grpc).collect();
    assert!(
        unknown.is_empty(),
        "SURFACE names methods the protos do not have: {unknown:?}"
    );
    let unnamed: Vec<_> = grpc.difference(&named).collect();
    assert!(
        unnamed.is_empty(),
        "gRPC methods no REST operation names (add the twin, or list it in GRPC_ONLY): {unnamed:?}"
    );
    for (op, twin) in SURFACE {
        if let Paperclip(why) | Http(why) | Gap(why) = twin {
            assert!(!why.trim().is_empty(), "{op} has no reason");
        }
    }
}

#[test]
fn the_route_parser_reads_chained_methods_and_ignores_other_calls() {
    let source = r#"
        .route("/a", get(x::list).post(x::create))
        .route(
            "/b/{id}",
            delete(y::remove),
        )
        .route("/c", get(forget(z)))
    "#;
    assert_eq!(
        rest_operations(source),
        ["GET /a", "POST /a", "DELETE /b/{id}", "GET /c"]
    );
}
