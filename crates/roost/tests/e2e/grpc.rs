//! The gRPC API: the same operations and the same errors as REST.

use roost_proto::v1::{
    self as pb, AddCommentRequest, CheckoutRequest, CreateIssueRequest, GetIssueRequest,
    ReleaseRequest,
};
use serde_json::Value;

use roost_testkit::TestNode;

use crate::support::*;

#[tokio::test]
async fn grpc_checkout_conflicts_and_fencing_match_rest() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let mut grpc = control(&node).await?;
    let issue = grpc
        .create_issue(authed(
            &node.admin_token,
            None,
            CreateIssueRequest {
                company_id: node.company_id.clone(),
                title: "over grpc".into(),
                status: Some(pb::IssueStatus::Todo as i32),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert!(issue.identifier.starts_with("TST-"));
    let (a, a_key) = node.agent("grpc-a").await?;
    let (b, b_key) = node.agent("grpc-b").await?;
    let run_a = node.start_run(&a).await?;
    let run_b = node.start_run(&b).await?;
    let checkout = |agent: &str| CheckoutRequest {
        issue_id: issue.id.clone(),
        agent_id: agent.into(),
        expected_statuses: vec![pb::IssueStatus::Todo as i32],
    };

    let won = grpc
        .checkout(authed(&a_key, Some(&run_a), checkout(&a))?)
        .await?
        .into_inner();
    let token = won.checkout.as_ref().map(|c| c.token).unwrap_or(0);
    assert!(token > 0);

    let lost = grpc
        .checkout(authed(&b_key, Some(&run_b), checkout(&b))?)
        .await
        .expect_err("second checkout must fail");
    assert_eq!(lost.code(), tonic::Code::Aborted);
    let body: Value = serde_json::from_str(lost.message())?;
    assert_eq!(body["code"], "checkout_conflict");
    assert_eq!(body["details"]["checkoutRunId"], run_a.as_str());

    node.admin
        .post(
            &format!("/api/heartbeat-runs/{run_a}/finish"),
            serde_json::json!({ "status": "succeeded" }),
        )
        .await?
        .ok()?;
    let stale = grpc
        .add_comment(authed(
            &a_key,
            Some(&run_a),
            AddCommentRequest {
                issue_id: issue.id.clone(),
                body: "late".into(),
            },
        )?)
        .await
        .expect_err("a stale run is fenced");
    assert_eq!(stale.code(), tonic::Code::Aborted);
    assert_eq!(
        serde_json::from_str::<Value>(stale.message())?["code"],
        "stale_run"
    );
    let release = grpc
        .release(authed(
            &a_key,
            Some(&run_a),
            ReleaseRequest {
                issue_id: issue.id.clone(),
            },
        )?)
        .await;
    assert!(release.is_err());

    let unauthenticated = grpc
        .get_issue(tonic::Request::new(GetIssueRequest {
            issue_id: issue.id.clone(),
        }))
        .await;
    assert_eq!(
        unauthenticated.map(|_| ()).map_err(|s| s.code()),
        Err(tonic::Code::Unauthenticated)
    );
    node.shutdown().await
}

/// Regression: clearing a field (`null` over REST) came back from the Raft log as "unchanged".
#[tokio::test]
async fn clearing_a_field_survives_the_raft_log() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent, _) = node.agent("assignee").await?;
    let issue = node
        .issue(serde_json::json!({ "title": "t", "assigneeAgentId": agent, "description": "d" }))
        .await?;
    let id = str_field(&issue, "id");
    let cleared = node
        .admin
        .patch(
            &format!("/api/issues/{id}"),
            serde_json::json!({ "assigneeAgentId": null, "description": null }),
        )
        .await?
        .ok()?;
    assert_eq!(cleared["assigneeAgentId"], Value::Null);
    assert_eq!(cleared["description"], Value::Null);
    let fetched = node.admin.get(&format!("/api/issues/{id}")).await?.ok()?;
    assert_eq!(fetched["assigneeAgentId"], Value::Null);
    node.shutdown().await
}

/// Budgets over gRPC: the same rules as REST (an agent reports only its own cost; a bad scope
/// is INVALID_ARGUMENT), and the overview shows what was spent.
#[tokio::test]
async fn grpc_budgets_meter_costs_like_rest() -> anyhow::Result<()> {
    use roost_proto::v1::{
        GetBudgetOverviewRequest, RecordCostEventRequest, SetBudgetPolicyRequest,
    };
    let node = TestNode::start().await?;
    let mut grpc = control(&node).await?;
    let (me, key) = node.agent("grpc-spender").await?;
    let (other, _) = node.agent("grpc-other").await?;
    let policy = grpc
        .set_budget_policy(authed(
            &node.admin_token,
            None,
            SetBudgetPolicyRequest {
                company_id: node.company_id.clone(),
                scope_type: pb::BudgetScopeType::Agent as i32,
                scope_id: Some(me.clone()),
                amount_cents: 500,
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!((policy.warn_percent, policy.hard_stop_enabled), (80, true));
    let cost = |agent: Option<String>| RecordCostEventRequest {
        company_id: node.company_id.clone(),
        agent_id: agent,
        provider: "anthropic".into(),
        model: "claude".into(),
        cost_cents: 120,
        ..Default::default()
    };
    grpc.record_cost_event(authed(&key, None, cost(None))?)
        .await?;
    let stranger = grpc
        .record_cost_event(authed(&key, None, cost(Some(other)))?)
        .await
        .expect_err("another agent's cost");
    assert_eq!(stranger.code(), tonic::Code::PermissionDenied);
    let bad = grpc
        .set_budget_policy(authed(
            &node.admin_token,
            None,
            SetBudgetPolicyRequest {
                company_id: node.company_id.clone(),
                scope_type: 99,
                amount_cents: 1,
                ..Default::default()
            },
        )?)
        .await
        .expect_err("unknown scope type");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    let overview = grpc
        .get_budget_overview(authed(
            &node.admin_token,
            None,
            GetBudgetOverviewRequest {
                company_id: node.company_id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(overview.policies.len(), 1);
    assert_eq!(overview.policies[0].spent_cents, 120);
    assert_eq!(overview.policies[0].remaining_cents, 380);
    Ok(())
}

/// Agent memory over gRPC keeps REST's rules: an agent writes its own in its run, reads and
/// searches its own, and another agent of the company is refused; a lost update is ABORTED.
#[tokio::test]
async fn grpc_memory_follows_rests_rules() -> anyhow::Result<()> {
    use roost_proto::v1::{
        AppendMemoryEntryRequest, GetMemoryDocumentRequest, GetMemorySummaryRequest,
        ListMemoryEntriesRequest, PutMemoryDocumentRequest, SearchMemoryRequest,
    };
    let node = TestNode::start().await?;
    let mut grpc = control(&node).await?;
    let (me, key) = node.agent("grpc-rememberer").await?;
    let (_, other_key) = node.agent("grpc-snoop").await?;
    let run = node.start_run(&me).await?;

    // Without a run an agent cannot write its log.
    let entry = AppendMemoryEntryRequest {
        what: "found the flaky parser test".into(),
        did: "reran it 20 times".into(),
        errors: vec!["assertion failed: left == right".into()],
        ..Default::default()
    };
    let no_run = grpc
        .append_memory_entry(authed(&key, None, entry.clone())?)
        .await
        .expect_err("no run");
    assert_eq!(no_run.code(), tonic::Code::InvalidArgument, "{no_run:?}");
    let written = grpc
        .append_memory_entry(authed(&key, Some(&run), entry)?)
        .await?
        .into_inner();
    assert_eq!(
        (written.run_id.as_str(), written.agent_id.as_str()),
        (run.as_str(), me.as_str())
    );
    let put = |content: &str, expected_version| PutMemoryDocumentRequest {
        agent_id: "me".into(),
        name: "MEMORY.md".into(),
        content: content.into(),
        expected_version,
        ..Default::default()
    };
    let doc = grpc
        .put_memory_document(authed(&key, Some(&run), put("- parser: flaky", 0))?)
        .await?
        .into_inner();
    assert_eq!(doc.version, 1);
    let lost = grpc
        .put_memory_document(authed(&key, Some(&run), put("- overwritten", 0))?)
        .await
        .expect_err("a lost update");
    assert_eq!(lost.code(), tonic::Code::Aborted, "{lost:?}");

    let entries = grpc
        .list_memory_entries(authed(
            &node.admin_token,
            None,
            ListMemoryEntriesRequest {
                agent_id: me.clone(),
                limit: Some(10),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner()
        .entries;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].errors, ["assertion failed: left == right"]);
    let read = grpc
        .get_memory_document(authed(
            &key,
            None,
            GetMemoryDocumentRequest {
                agent_id: "me".into(),
                name: "MEMORY.md".into(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(
        (read.version, read.content.as_str()),
        (1, "- parser: flaky")
    );
    let summary = grpc
        .get_memory_summary(authed(
            &key,
            None,
            GetMemorySummaryRequest {
                agent_id: "me".into(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(summary.entry_count, 1);
    assert_eq!(summary.door, "rebuild", "no live state saved yet");
    let hits = grpc
        .search_memory(authed(
            &key,
            None,
            SearchMemoryRequest {
                agent_id: "me".into(),
                q: "flaky parser".into(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner()
        .hits;
    let kinds: Vec<pb::MemoryHitKind> = hits.iter().map(|h| h.kind()).collect();
    assert!(
        kinds.contains(&pb::MemoryHitKind::Entry) && kinds.contains(&pb::MemoryHitKind::Document),
        "{hits:?}"
    );

    // Another agent of the company reads none of it.
    let snooped = grpc
        .list_memory_entries(authed(
            &other_key,
            None,
            ListMemoryEntriesRequest {
                agent_id: me.clone(),
                limit: None,
                ..Default::default()
            },
        )?)
        .await
        .expect_err("another agent's memory");
    assert_eq!(snooped.code(), tonic::Code::PermissionDenied, "{snooped:?}");
    node.shutdown().await
}
