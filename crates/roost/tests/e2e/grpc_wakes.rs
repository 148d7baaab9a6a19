//! Wakes, workers, companies, issues, runs and costs over gRPC: each call answers what its REST
//! twin answers, with the same rules and refusals (the rest of the parity calls:
//! `grpc_records.rs`).

use std::time::Duration;

use roost_core::{CompanyStatus, WakeReason, WakeStatus, WorkerStatus};
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{
    self as pb, CancelRunRequest, CreateWorkerJoinTokenRequest, DeleteIssueRequest,
    GetCompanyRequest, GetCostSummaryRequest, GetHeartbeatContextRequest, GetInboxRequest,
    GetIssueRequest, GetWakeRequest, ListWakesRequest, ListWorkersRequest, RevokeWorkerRequest,
    UpdateCompanyRequest, WakeupRequest,
};
use roost_proto::ProtoEnum;
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::Code;

use roost_testkit::{wait_for, TestCluster, TestNode, TestWorker};

use crate::support::*;

/// What a refused call says: its code and the `error` sentence of its JSON body.
pub(crate) fn refused(status: tonic::Status) -> (Code, String) {
    let body: Value = serde_json::from_str(status.message()).unwrap_or(Value::Null);
    let text = body["error"].as_str().unwrap_or(status.message());
    (status.code(), text.to_string())
}

/// `message` from `token`, outside any run.
pub(crate) fn call<T>(token: &str, message: T) -> tonic::Request<T> {
    authed(token, None, message).expect("a bearer token fits in metadata")
}

pub(crate) fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|a| a.iter().map(|v| str_field(v, "id")).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_wakes_and_workers_match_rest() -> anyhow::Result<()> {
    let _one_cluster = one_cluster_at_a_time().await;
    let c = TestCluster::start(1).await?;
    let admin = c.admin(1);
    let token = c.admin_token.clone();
    let mut grpc: ControlClient<Channel> =
        ControlClient::connect(format!("http://{}", c.grpc_addr(1))).await?;
    let (agent, key) = agent_with_key(&admin, &c.company_id, "waker").await?;

    // Workers and join tokens are for administrators alone.
    let denied = grpc
        .list_workers(call(&key, ListWorkersRequest {}))
        .await
        .expect_err("an agent listed the workers");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let denied = grpc
        .create_worker_join_token(call(&key, Default::default()))
        .await
        .expect_err("an agent minted a join token");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");

    // A join token minted over gRPC lets a worker register; REST lists it as minted.
    let minted = grpc
        .create_worker_join_token(call(
            &token,
            CreateWorkerJoinTokenRequest {
                name: "rack".into(),
                max_uses: Some(1),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let credential = minted.credential.expect("the token's credential");
    assert_eq!(
        (credential.kind(), credential.name.as_str()),
        (pb::CredentialKind::WorkerJoin, "rack")
    );
    assert_eq!(credential.max_uses, Some(1));
    assert!(minted.token.starts_with("rst_join_"), "{}", minted.token);
    let listed = admin.get("/api/workers/join-tokens").await?.ok()?;
    assert!(ids(&listed).contains(&credential.id), "{listed}");
    let worker = TestWorker::connect(c.grpc_addrs(), &minted.token, "wk-grpc", 2).await?;

    // ListWorkers shows the registered worker as REST does.
    let workers = grpc
        .list_workers(call(&token, ListWorkersRequest {}))
        .await?
        .into_inner()
        .workers;
    let listed = workers
        .iter()
        .find(|w| w.id == "wk-grpc")
        .expect("the registered worker is listed");
    let rest_workers = admin.get("/api/workers").await?.ok()?;
    let rest = rest_workers
        .as_array()
        .and_then(|a| a.iter().find(|w| w["id"] == "wk-grpc"))
        .expect("REST lists it too");
    assert_eq!(listed.status(), pb::WorkerStatus::Online);
    assert_eq!(
        WorkerStatus::from_proto(listed.status).unwrap().as_str(),
        rest["status"].as_str().unwrap_or_default()
    );
    assert_eq!(u64::from(listed.slots), rest["slots"].as_u64().unwrap_or(0));
    assert_eq!(listed.name, str_field(rest, "name"));
    assert!(
        listed.adapters().any(|a| a == pb::AdapterType::Process),
        "{listed:?}"
    );

    // A wakeup over gRPC, by the agent for itself, records a wake REST shows the same.
    let wakeup = WakeupRequest {
        agent_id: agent.clone(),
        payload_json: r#"{"note":"from grpc"}"#.into(),
        idempotency_key: Some("grpc-wake-1".into()),
        ..Default::default()
    };
    let answer = grpc.wakeup(call(&key, wakeup.clone())).await?.into_inner();
    let wake = answer.wake.expect("the wake");
    assert_eq!(
        (wake.agent_id.as_str(), wake.reason()),
        (agent.as_str(), pb::WakeReason::OnDemand)
    );
    let assignment = worker
        .wait_assignments(1, Duration::from_secs(20))
        .await?
        .remove(0);
    let again = grpc.wakeup(call(&key, wakeup)).await?.into_inner();
    let again = again.wake.expect("the first wake");
    assert_eq!(
        again.id, wake.id,
        "the same idempotency key answers the first wake"
    );
    assert_eq!(again.run_id.as_deref(), Some(assignment.run_id.as_str()));

    let rest = admin.get(&format!("/api/wakes/{}", wake.id)).await?.ok()?;
    let read = grpc
        .get_wake(call(
            &token,
            GetWakeRequest {
                wake_id: wake.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(read.status(), pb::WakeStatus::Claimed);
    assert_eq!(
        WakeStatus::from_proto(read.status).unwrap().as_str(),
        str_field(&rest, "status")
    );
    assert_eq!(
        WakeReason::from_proto(read.reason).unwrap().as_str(),
        str_field(&rest, "reason")
    );
    assert_eq!(read.agent_id, str_field(&rest, "agentId"));
    assert_eq!(read.run_id.as_deref(), rest["runId"].as_str());
    assert_eq!(read.idempotency_key.as_deref(), Some("grpc-wake-1"));
    assert_eq!(
        serde_json::from_str::<Value>(&read.payload_json)?,
        rest["payload"]
    );
    assert_eq!(read.blocked_by, None, "only a queued wake is blocked");

    // Lists filter as REST's do.
    let list = |status: Vec<i32>| ListWakesRequest {
        company_id: c.company_id.clone(),
        agent_id: Some(agent.clone()),
        status,
        ..Default::default()
    };
    let claimed = grpc
        .list_wakes(call(&token, list(vec![pb::WakeStatus::Claimed as i32])))
        .await?
        .into_inner()
        .wakes;
    assert_eq!(
        claimed.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        [wake.id.as_str()]
    );
    let queued = grpc
        .list_wakes(call(&token, list(vec![pb::WakeStatus::Queued as i32])))
        .await?
        .into_inner()
        .wakes;
    assert!(queued.is_empty(), "{queued:?}");
    let (code, text) = refused(
        grpc.list_wakes(call(&token, list(vec![99])))
            .await
            .expect_err("an unknown status was accepted"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    assert!(text.contains("status"), "{text}");

    // Bad input: a reason only Roost's rules make, an unknown wake.
    let (code, text) = refused(
        grpc.wakeup(call(
            &key,
            WakeupRequest {
                agent_id: agent.clone(),
                reason: Some(pb::WakeReason::IssueAssigned as i32),
                ..Default::default()
            },
        ))
        .await
        .expect_err("a rule's reason was accepted"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    assert!(text.contains("ON_DEMAND"), "{text}");
    let (code, text) = refused(
        grpc.get_wake(call(
            &token,
            GetWakeRequest {
                wake_id: "no-such-wake".into(),
            },
        ))
        .await
        .expect_err("an unknown wake was found"),
    );
    assert_eq!(code, Code::NotFound, "{text}");
    assert!(text.contains("no-such-wake"), "{text}");

    // CancelRun ends the run cancelled, as REST's cancel does.
    let cancelled = grpc
        .cancel_run(call(
            &token,
            CancelRunRequest {
                run_id: assignment.run_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(cancelled.status(), pb::RunStatus::Cancelled);
    let rest = admin
        .get(&format!("/api/heartbeat-runs/{}", assignment.run_id))
        .await?
        .ok()?;
    assert_eq!(rest["status"], "cancelled", "{rest}");

    // Revoking the worker's identity: administrators alone; then nothing is left to revoke.
    let revoke = || RevokeWorkerRequest {
        worker_id: "wk-grpc".into(),
    };
    let denied = grpc
        .revoke_worker(call(&key, revoke()))
        .await
        .expect_err("an agent revoked a worker");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let revoked = grpc
        .revoke_worker(call(&token, revoke()))
        .await?
        .into_inner();
    assert!(revoked.revoked, "{revoked:?}");
    let (code, text) = refused(
        grpc.revoke_worker(call(&token, revoke()))
            .await
            .expect_err("a revoked worker was revoked again"),
    );
    assert_eq!(code, Code::Aborted, "{text}");
    let (code, text) = refused(
        grpc.revoke_worker(call(
            &token,
            RevokeWorkerRequest {
                worker_id: "wk-nobody".into(),
            },
        ))
        .await
        .expect_err("an unknown worker was revoked"),
    );
    assert_eq!(code, Code::NotFound, "{text}");
    wait_for(
        "the revoked worker to be lost",
        Duration::from_secs(30),
        || {
            let mut grpc = grpc.clone();
            let token = token.clone();
            async move {
                let workers = grpc
                    .list_workers(call(&token, ListWorkersRequest {}))
                    .await
                    .ok()?
                    .into_inner()
                    .workers;
                workers
                    .iter()
                    .any(|w| w.id == "wk-grpc" && w.status() == pb::WorkerStatus::Lost)
                    .then_some(())
            }
        },
    )
    .await?;
    drop(worker);
    c.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn grpc_company_issue_context_and_cost_calls_match_rest() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let admin = node.admin_token.clone();
    let mut grpc = control(&node).await?;
    let (agent, key) = node.agent("grpc-worker").await?;

    // GetCompany answers what REST answers.
    let company = grpc
        .get_company(call(
            &key,
            GetCompanyRequest {
                company_id: cid.clone(),
            },
        ))
        .await?
        .into_inner();
    let rest = node
        .admin
        .get(&format!("/api/companies/{cid}"))
        .await?
        .ok()?;
    assert_eq!(company.name, str_field(&rest, "name"));
    assert_eq!(company.issue_prefix, str_field(&rest, "issuePrefix"));
    assert_eq!(
        CompanyStatus::from_proto(company.status).unwrap().as_str(),
        str_field(&rest, "status")
    );

    // UpdateCompany: administrators alone, checked enums, and REST sees the change.
    let update = UpdateCompanyRequest {
        company_id: cid.clone(),
        description: Some("Makes things".into()),
        require_board_approval_for_new_agents: Some(true),
        ..Default::default()
    };
    let denied = grpc
        .update_company(call(&key, update.clone()))
        .await
        .expect_err("an agent changed its company");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let updated = grpc
        .update_company(call(&admin, update))
        .await?
        .into_inner();
    assert_eq!(updated.description.as_deref(), Some("Makes things"));
    assert!(updated.require_board_approval_for_new_agents);
    let rest = node
        .admin
        .get(&format!("/api/companies/{cid}"))
        .await?
        .ok()?;
    assert_eq!(rest["description"], "Makes things", "{rest}");
    assert_eq!(rest["requireBoardApprovalForNewAgents"], true, "{rest}");
    let cleared = grpc
        .update_company(call(
            &admin,
            UpdateCompanyRequest {
                company_id: cid.clone(),
                description: Some(String::new()),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    assert_eq!(cleared.description, None, "an empty string clears it");
    let (code, text) = refused(
        grpc.update_company(call(
            &admin,
            UpdateCompanyRequest {
                company_id: cid.clone(),
                status: Some(99),
                ..Default::default()
            },
        ))
        .await
        .expect_err("an unknown status was accepted"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    let (code, _) = refused(
        grpc.get_company(call(
            &admin,
            GetCompanyRequest {
                company_id: "no-such-company".into(),
            },
        ))
        .await
        .expect_err("an unknown company was found"),
    );
    assert_eq!(code, Code::NotFound);

    // The agent's inbox and an issue's heartbeat context, as REST shows them.
    let parent = node
        .issue(json!({ "title": "parent", "status": "todo" }))
        .await?;
    let issue = node
        .issue(json!({
            "title": "child", "status": "todo", "assigneeAgentId": agent,
            "parentId": str_field(&parent, "id"),
        }))
        .await?;
    let issue_id = str_field(&issue, "id");
    let comment = node
        .admin
        .post(
            &format!("/api/issues/{issue_id}/comments"),
            json!({ "body": "please look" }),
        )
        .await?
        .ok()?;
    let inbox = grpc
        .get_inbox(call(&key, GetInboxRequest {}))
        .await?
        .into_inner()
        .issues;
    let rest = node
        .http()
        .with_token(&key)
        .get("/api/agents/me/inbox-lite")
        .await?
        .ok()?;
    assert_eq!(
        inbox.iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
        ids(&rest)
    );
    assert!(inbox.iter().any(|i| i.id == issue_id), "{inbox:?}");
    let denied = grpc
        .get_inbox(call(&admin, GetInboxRequest {}))
        .await
        .expect_err("an administrator has no inbox");
    assert_eq!(denied.code(), Code::Unauthenticated, "{denied:?}");

    let context = grpc
        .get_heartbeat_context(call(
            &key,
            GetHeartbeatContextRequest {
                issue_id: str_field(&issue, "identifier"),
                wake_comment_id: Some(str_field(&comment, "id")),
            },
        ))
        .await?
        .into_inner();
    let rest = node
        .admin
        .get(&format!(
            "/api/issues/{issue_id}/heartbeat-context?wakeCommentId={}",
            str_field(&comment, "id")
        ))
        .await?
        .ok()?;
    assert_eq!(
        context.issue.as_ref().map(|i| i.id.as_str()),
        Some(issue_id.as_str())
    );
    assert_eq!(
        context
            .ancestors
            .iter()
            .map(|i| i.id.clone())
            .collect::<Vec<_>>(),
        ids(&rest["ancestors"])
    );
    assert_eq!(context.ancestors.len(), 1);
    assert_eq!(
        Some(context.total_comments),
        rest["commentCursor"]["totalComments"].as_u64()
    );
    assert_eq!(
        context.latest_comment_id.as_deref(),
        rest["commentCursor"]["latestCommentId"].as_str()
    );
    assert_eq!(
        context.wake_comment.map(|c| c.body),
        Some("please look".to_string())
    );
    assert!(
        context.active_run.is_none() && rest["activeRun"].is_null(),
        "{rest}"
    );

    // The cost summary, as REST sums it.
    node.admin
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({ "agentId": agent, "provider": "anthropic", "model": "claude", "costCents": 42 }),
        )
        .await?
        .ok()?;
    let summary = grpc
        .get_cost_summary(call(
            &admin,
            GetCostSummaryRequest {
                company_id: cid.clone(),
            },
        ))
        .await?
        .into_inner();
    let rest = node
        .admin
        .get(&format!("/api/companies/{cid}/costs/summary"))
        .await?
        .ok()?;
    assert_eq!(summary.month_cents, 42);
    assert_eq!(Some(summary.month_cents), rest["monthCents"].as_u64());
    assert_eq!(Some(summary.lifetime_cents), rest["lifetimeCents"].as_u64());
    let by_agent = summary
        .by_agent
        .iter()
        .find(|a| a.agent_id == agent)
        .expect("the agent's spend");
    assert_eq!(
        (by_agent.name.as_str(), by_agent.lifetime_cents),
        ("grpc-worker", 42)
    );

    // DeleteIssue answers the issue as it was; then neither surface finds it.
    let deleted = grpc
        .delete_issue(call(
            &admin,
            DeleteIssueRequest {
                issue_id: issue_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(deleted.id, issue_id);
    let gone = grpc
        .get_issue(call(
            &admin,
            GetIssueRequest {
                issue_id: issue_id.clone(),
            },
        ))
        .await
        .expect_err("a deleted issue was found");
    assert_eq!(gone.code(), Code::NotFound);
    let rest = node.admin.get(&format!("/api/issues/{issue_id}")).await?;
    assert_eq!(rest.status.as_u16(), 404, "{:?}", rest.body);
    let (code, text) = refused(
        grpc.delete_issue(call(&admin, DeleteIssueRequest { issue_id }))
            .await
            .expect_err("a deleted issue was deleted again"),
    );
    assert_eq!(code, Code::NotFound, "{text}");

    // CancelRun of a run the agent started.
    let run = node.start_run(&agent).await?;
    let cancelled = grpc
        .cancel_run(call(
            &admin,
            CancelRunRequest {
                run_id: run.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        (cancelled.status(), cancelled.error.as_deref()),
        (pb::RunStatus::Cancelled, Some("cancelled"))
    );
    let rest = node
        .admin
        .get(&format!("/api/heartbeat-runs/{run}"))
        .await?
        .ok()?;
    assert_eq!(rest["status"], "cancelled", "{rest}");
    node.shutdown().await
}
