//! Goals, projects, approvals and routines over gRPC: the same rules as REST
//! (`tests/e2e/projects.rs`, `approvals.rs`, `routines.rs`), through the generated tonic client.

use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{
    self as pb, AddApprovalCommentRequest, CreateApprovalRequest, CreateGoalRequest,
    CreateProjectRequest, DecideApprovalRequest, DeleteGoalRequest, GetApprovalRequest,
    GetGoalRequest, GetProjectRequest, HireAgentRequest, ListApprovalCommentsRequest,
    ListApprovalsRequest, ListGoalsRequest, ListProjectsRequest, PauseProjectRequest,
    ResumeProjectRequest, UpdateGoalRequest,
};
use serde_json::{json, Value};
use tonic::transport::Channel;
use tonic::Code;

use roost_testkit::TestNode;

use crate::support::*;

/// A refusal's code, and its JSON body's `error` sentence (`crate::error`'s one mapping).
fn refusal<T: std::fmt::Debug>(reply: Result<tonic::Response<T>, tonic::Status>) -> (Code, String) {
    match reply {
        Ok(answer) => panic!("expected a refusal, got {answer:?}"),
        Err(status) => {
            let body: Value = serde_json::from_str(status.message()).unwrap_or(Value::Null);
            let sentence = body["error"].as_str().unwrap_or_default().to_string();
            (status.code(), sentence)
        }
    }
}

/// `true` when `sentence` reads like one (has a space) and names `word`.
fn says(sentence: &str, word: &str) -> bool {
    sentence.contains(' ') && sentence.contains(word)
}

/// An agent of a second company and its key.
pub(crate) async fn stranger(node: &TestNode) -> anyhow::Result<String> {
    let company = node
        .admin
        .post(
            "/api/companies",
            json!({ "name": "Stranger", "issuePrefix": "STR" }),
        )
        .await?
        .ok()?;
    let (_, key) = agent_with_key(&node.admin, &str_field(&company, "id"), "outsider").await?;
    Ok(key)
}

#[tokio::test]
async fn grpc_goals_and_projects_follow_rests_rules() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let mut grpc: ControlClient<Channel> = control(&node).await?;
    let (lead, key) = node.agent("grpc-lead").await?;
    let admin = node.admin_token.clone();

    // An agent of the company writes goals and projects.
    let goal = grpc
        .create_goal(authed(
            &key,
            None,
            CreateGoalRequest {
                company_id: cid.clone(),
                title: "Ship 1.0".into(),
                level: Some(pb::GoalLevel::Company as i32),
                status: Some(pb::GoalStatus::Active as i32),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(
        (goal.level(), goal.status()),
        (pb::GoalLevel::Company, pb::GoalStatus::Active)
    );
    let child = grpc
        .create_goal(authed(
            &key,
            None,
            CreateGoalRequest {
                company_id: cid.clone(),
                title: "Docs".into(),
                parent_id: Some(goal.id.clone()),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(
        (child.level(), child.status()),
        (pb::GoalLevel::Task, pb::GoalStatus::Planned),
        "REST's defaults"
    );
    let renamed = grpc
        .update_goal(authed(
            &key,
            None,
            UpdateGoalRequest {
                goal_id: child.id.clone(),
                title: Some("Write the docs".into()),
                parent_id: Some(String::new()),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(renamed.title, "Write the docs");
    assert_eq!(renamed.parent_id, None, "an empty string clears the parent");

    let project = grpc
        .create_project(authed(
            &key,
            None,
            CreateProjectRequest {
                company_id: cid.clone(),
                name: "CLI".into(),
                status: Some(pb::ProjectStatus::InProgress as i32),
                lead_agent_id: Some(lead.clone()),
                goal_ids: vec![goal.id.clone()],
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(project.goal_id.as_deref(), Some(goal.id.as_str()));
    assert!(!project.paused);

    // An issue of the project, made over REST (CreateIssue has no project yet).
    let issue = node
        .admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "Write the docs", "status": "todo", "projectId": project.id,
                    "goalId": goal.id }),
        )
        .await?
        .ok()?;
    assert_eq!(issue["projectId"], project.id.as_str(), "{issue}");

    // Paused with a reason, seen paused by every reader; resumed, not.
    let paused = grpc
        .pause_project(authed(
            &key,
            None,
            PauseProjectRequest {
                project_id: project.id.clone(),
                reason: Some("waiting for legal".into()),
            },
        )?)
        .await?
        .into_inner();
    assert!(paused.paused && paused.paused_at_ms.is_some(), "{paused:?}");
    let seen = grpc
        .get_project(authed(
            &admin,
            None,
            GetProjectRequest {
                project_id: project.id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(seen.pause_reason.as_deref(), Some("waiting for legal"));
    let over_rest = node
        .admin
        .get(&format!("/api/projects/{}", project.id))
        .await?
        .ok()?;
    assert!(over_rest["pausedAt"].is_number() || over_rest["pausedAt"].is_string());
    let resumed = grpc
        .resume_project(authed(
            &key,
            None,
            ResumeProjectRequest {
                project_id: project.id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert!(
        !resumed.paused && resumed.paused_at_ms.is_none(),
        "{resumed:?}"
    );
    let listed = grpc
        .list_projects(authed(
            &key,
            None,
            ListProjectsRequest {
                company_id: cid.clone(),
            },
        )?)
        .await?
        .into_inner()
        .projects;
    assert_eq!(listed.len(), 1);

    // Another company's agent sees none of it.
    let outsider = stranger(&node).await?;
    let (code, sentence) = refusal(
        grpc.get_goal(authed(
            &outsider,
            None,
            GetGoalRequest {
                goal_id: goal.id.clone(),
            },
        )?)
        .await,
    );
    assert!(
        matches!(code, Code::NotFound | Code::PermissionDenied),
        "{code:?} {sentence}"
    );
    let (code, _) = refusal(
        grpc.list_goals(authed(
            &outsider,
            None,
            ListGoalsRequest {
                company_id: cid.clone(),
            },
        )?)
        .await,
    );
    assert!(matches!(code, Code::NotFound | Code::PermissionDenied));

    // Bad input is INVALID_ARGUMENT with a sentence naming the field.
    let (code, sentence) = refusal(
        grpc.create_goal(authed(
            &key,
            None,
            CreateGoalRequest {
                company_id: cid.clone(),
                title: "  ".into(),
                ..Default::default()
            },
        )?)
        .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "title"), "{sentence}");
    let (code, sentence) = refusal(
        grpc.create_goal(authed(
            &key,
            None,
            CreateGoalRequest {
                company_id: cid.clone(),
                title: "Epic".into(),
                level: Some(99),
                ..Default::default()
            },
        )?)
        .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "level"), "{sentence}");

    // Deleting is for administrators; the deleted goal is answered as it was.
    let delete = |token: &str| {
        authed(
            token,
            None,
            DeleteGoalRequest {
                goal_id: child.id.clone(),
            },
        )
    };
    let (code, _) = refusal(grpc.delete_goal(delete(&key)?).await);
    assert_eq!(code, Code::PermissionDenied);
    let deleted = grpc.delete_goal(delete(&admin)?).await?.into_inner();
    assert_eq!(deleted.id, child.id);
    let goals = grpc
        .list_goals(authed(
            &key,
            None,
            ListGoalsRequest {
                company_id: cid.clone(),
            },
        )?)
        .await?
        .into_inner()
        .goals;
    assert_eq!(goals.len(), 1, "{goals:?}");
    node.shutdown().await
}

#[tokio::test]
async fn grpc_approvals_are_asked_by_agents_and_decided_by_administrators() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let mut grpc = control(&node).await?;
    let (asker, key) = node.agent("grpc-asker").await?;
    let admin = node.admin_token.clone();
    let issue = todo_issue(&node, "needs a yes").await?;

    let asked = grpc
        .create_approval(authed(
            &key,
            None,
            CreateApprovalRequest {
                company_id: cid.clone(),
                r#type: pb::ApprovalType::RequestBoardApproval as i32,
                payload_json: r#"{"why":"spend $40 on a domain"}"#.into(),
                issue_ids: vec![issue.clone()],
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(asked.status(), pb::ApprovalStatus::Pending);
    assert_eq!(asked.requested_by_agent_id.as_deref(), Some(asker.as_str()));
    let payload: Value = serde_json::from_str(&asked.payload_json)?;
    assert_eq!(payload["why"], "spend $40 on a domain");

    grpc.add_approval_comment(authed(
        &key,
        None,
        AddApprovalCommentRequest {
            approval_id: asked.id.clone(),
            body: "the old one expires Friday".into(),
        },
    )?)
    .await?;
    let comments = grpc
        .list_approval_comments(authed(
            &admin,
            None,
            ListApprovalCommentsRequest {
                approval_id: asked.id.clone(),
            },
        )?)
        .await?
        .into_inner()
        .comments;
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].author_agent_id.as_deref(), Some(asker.as_str()));

    let decide = |token: &str, decision: i32| {
        authed(
            token,
            None,
            DecideApprovalRequest {
                approval_id: asked.id.clone(),
                decision,
                decision_note: Some("go ahead".into()),
            },
        )
    };
    let (code, _) = refusal(
        grpc.decide_approval(decide(&key, pb::ApprovalDecision::Approve as i32)?)
            .await,
    );
    assert_eq!(code, Code::PermissionDenied, "agents do not decide");
    let (code, sentence) = refusal(grpc.decide_approval(decide(&admin, 99)?).await);
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "decision"), "{sentence}");
    let approved = grpc
        .decide_approval(decide(&admin, pb::ApprovalDecision::Approve as i32)?)
        .await?
        .into_inner();
    assert_eq!(approved.status(), pb::ApprovalStatus::Approved);
    assert_eq!(approved.decision_note.as_deref(), Some("go ahead"));
    let seen = grpc
        .get_approval(authed(
            &key,
            None,
            GetApprovalRequest {
                approval_id: asked.id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(seen.status(), pb::ApprovalStatus::Approved);
    assert!(seen.decided_at_ms.is_some());
    let list = |status: i32| {
        authed(
            &key,
            None,
            ListApprovalsRequest {
                company_id: cid.clone(),
                status: Some(status),
            },
        )
    };
    let pending = grpc
        .list_approvals(list(pb::ApprovalStatus::Pending as i32)?)
        .await?
        .into_inner();
    assert!(pending.approvals.is_empty(), "{pending:?}");
    let done = grpc
        .list_approvals(list(pb::ApprovalStatus::Approved as i32)?)
        .await?
        .into_inner();
    assert_eq!(done.approvals.len(), 1);
    let (code, _) = refusal(grpc.list_approvals(list(99)?).await);
    assert_eq!(code, Code::InvalidArgument);

    // Bad input: an unknown type, a payload that is not an object.
    let ask = |kind: i32, payload: &str| {
        authed(
            &key,
            None,
            CreateApprovalRequest {
                company_id: cid.clone(),
                r#type: kind,
                payload_json: payload.into(),
                ..Default::default()
            },
        )
    };
    let (code, sentence) = refusal(grpc.create_approval(ask(99, "{}")?).await);
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "type"), "{sentence}");
    let (code, sentence) = refusal(
        grpc.create_approval(ask(pb::ApprovalType::RequestBoardApproval as i32, "[1]")?)
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "payload"), "{sentence}");

    // Another company's agent does not see it.
    let outsider = stranger(&node).await?;
    let (code, _) = refusal(
        grpc.get_approval(authed(
            &outsider,
            None,
            GetApprovalRequest {
                approval_id: asked.id.clone(),
            },
        )?)
        .await,
    );
    assert!(matches!(code, Code::NotFound | Code::PermissionDenied));
    node.shutdown().await
}

/// A hire in a company that requires board approval makes a pending agent and its approval;
/// approving it over gRPC activates the agent.
#[tokio::test]
async fn grpc_hire_waits_for_its_approval() -> anyhow::Result<()> {
    use roost_proto::v1::{CreateAgentRequest, GetAgentRequest};
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let mut grpc = control(&node).await?;
    let admin = node.admin_token.clone();
    node.admin
        .patch(
            &format!("/api/companies/{cid}"),
            json!({ "requireBoardApprovalForNewAgents": true }),
        )
        .await?
        .ok()?;
    let hired = grpc
        .hire_agent(authed(
            &admin,
            None,
            HireAgentRequest {
                agent: Some(CreateAgentRequest {
                    company_id: cid.clone(),
                    name: "tester".into(),
                    role: "qa".into(),
                    ..Default::default()
                }),
                source_issue_ids: Vec::new(),
            },
        )?)
        .await?
        .into_inner();
    let agent = hired.agent.unwrap_or_default();
    let approval = hired.approval.unwrap_or_default();
    assert_eq!(agent.status(), pb::AgentStatus::PendingApproval);
    assert_eq!(
        (approval.r#type(), approval.status()),
        (pb::ApprovalType::HireAgent, pb::ApprovalStatus::Pending)
    );
    assert_eq!(approval.agent_id.as_deref(), Some(agent.id.as_str()));
    let (code, sentence) = refusal(
        grpc.hire_agent(authed(&admin, None, HireAgentRequest::default())?)
            .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{sentence}");

    grpc.decide_approval(authed(
        &admin,
        None,
        DecideApprovalRequest {
            approval_id: approval.id.clone(),
            decision: pb::ApprovalDecision::Approve as i32,
            decision_note: None,
        },
    )?)
    .await?;
    let active = grpc
        .get_agent(authed(
            &admin,
            None,
            GetAgentRequest {
                agent_id: agent.id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(active.status(), pb::AgentStatus::Active);
    node.shutdown().await
}

/// Routines over gRPC: an administrator creates, pauses and resumes one; an agent of the
/// company lists and runs it (the run opens its issue), and may not create one.
#[tokio::test]
async fn grpc_routines_are_run_by_the_company_and_changed_by_administrators() -> anyhow::Result<()>
{
    use roost_proto::v1::{
        CreateRoutineRequest, GetRoutineRequest, ListRoutineRunsRequest, ListRoutinesRequest,
        RunRoutineRequest, UpdateRoutineRequest,
    };
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let mut grpc = control(&node).await?;
    let admin = node.admin_token.clone();
    let (agent, key) = node.agent("grpc-reporter").await?;
    let create = |token: &str, title: &str| {
        authed(
            token,
            None,
            CreateRoutineRequest {
                company_id: cid.clone(),
                title: title.into(),
                assignee_agent_id: Some(agent.clone()),
                priority: Some(pb::Priority::High as i32),
                variables_json: r#"[{"name":"team","defaultValue":"core"}]"#.into(),
                ..Default::default()
            },
        )
    };
    let routine = grpc
        .create_routine(create(&admin, "Weekly report for {{team}}")?)
        .await?
        .into_inner();
    assert_eq!(
        (routine.status(), routine.priority()),
        (pb::RoutineStatus::Active, pb::Priority::High)
    );
    assert_eq!(
        routine.concurrency_policy(),
        pb::ConcurrencyPolicy::CoalesceIfActive,
        "REST's default"
    );
    let (code, _) = refusal(grpc.create_routine(create(&key, "mine")?).await);
    assert_eq!(code, Code::PermissionDenied);

    let update = |token: &str, status: i32| {
        authed(
            token,
            None,
            UpdateRoutineRequest {
                routine_id: routine.id.clone(),
                status: Some(status),
                ..Default::default()
            },
        )
    };
    let paused = grpc
        .update_routine(update(&admin, pb::RoutineStatus::Paused as i32)?)
        .await?
        .into_inner();
    assert_eq!(paused.status(), pb::RoutineStatus::Paused);
    let (code, sentence) = refusal(grpc.update_routine(update(&admin, 99)?).await);
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "status"), "{sentence}");
    let (code, _) = refusal(
        grpc.update_routine(update(&key, pb::RoutineStatus::Active as i32)?)
            .await,
    );
    assert_eq!(code, Code::PermissionDenied);
    grpc.update_routine(update(&admin, pb::RoutineStatus::Active as i32)?)
        .await?;

    let run = grpc
        .run_routine(authed(
            &key,
            None,
            RunRoutineRequest {
                routine_id: routine.id.clone(),
                variables_json: r#"{"team":"infra"}"#.into(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(
        (run.source(), run.status()),
        (pb::RunSource::Manual, pb::RoutineRunStatus::IssueCreated)
    );
    let issue_id = run.linked_issue_id.clone().unwrap_or_default();
    let issue = node
        .admin
        .get(&format!("/api/issues/{issue_id}"))
        .await?
        .ok()?;
    assert_eq!(issue["title"], "Weekly report for infra", "{issue}");
    assert_eq!(run.linked_issue_status, Some(pb::IssueStatus::Todo as i32));

    let runs = grpc
        .list_routine_runs(authed(
            &key,
            None,
            ListRoutineRunsRequest {
                routine_id: routine.id.clone(),
                limit: 0,
            },
        )?)
        .await?
        .into_inner()
        .runs;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, run.id);
    let listed = grpc
        .list_routines(authed(
            &key,
            None,
            ListRoutinesRequest {
                company_id: cid.clone(),
            },
        )?)
        .await?
        .into_inner()
        .routines;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].recent_runs.len(),
        1,
        "a list shows the newest run"
    );
    assert_eq!(
        listed[0].active_issue_id.as_deref(),
        Some(issue_id.as_str())
    );
    // Triggers are made over REST; gRPC shows them without their secret.
    for body in [
        json!({ "kind": "webhook", "signingMode": "hmac_sha256" }),
        json!({ "kind": "schedule", "cronExpression": "every 1h" }),
    ] {
        node.admin
            .post(&format!("/api/routines/{}/triggers", routine.id), body)
            .await?
            .ok()?;
    }
    let detail = grpc
        .get_routine(authed(
            &key,
            None,
            GetRoutineRequest {
                routine_id: routine.id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(detail.recent_runs.len(), 1);
    let webhook = detail
        .triggers
        .iter()
        .find(|t| t.kind() == pb::TriggerKind::Webhook);
    assert!(
        webhook.is_some_and(|t| t.has_secret && t.public_id.is_some()),
        "{:?}",
        detail.triggers
    );
    let schedule = detail
        .triggers
        .iter()
        .find(|t| t.kind() == pb::TriggerKind::Schedule);
    assert!(
        schedule.is_some_and(|t| t.next_run_at_ms.is_some()),
        "{:?}",
        detail.triggers
    );

    // Bad input and strangers, as over REST.
    let (code, sentence) = refusal(
        grpc.run_routine(authed(
            &key,
            None,
            RunRoutineRequest {
                routine_id: routine.id.clone(),
                payload_json: "[1]".into(),
                ..Default::default()
            },
        )?)
        .await,
    );
    assert_eq!(code, Code::InvalidArgument, "{sentence}");
    assert!(says(&sentence, "payload"), "{sentence}");
    let outsider = stranger(&node).await?;
    let (code, _) = refusal(
        grpc.get_routine(authed(
            &outsider,
            None,
            GetRoutineRequest {
                routine_id: routine.id.clone(),
            },
        )?)
        .await,
    );
    assert!(matches!(code, Code::NotFound | Code::PermissionDenied));
    node.shutdown().await
}
