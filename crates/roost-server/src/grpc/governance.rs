//! The goal, project and approval calls of `roost.v1.Control`. Each
//! calls the [`Api`] function its REST twin calls (`rest/projects.rs`, `rest/approvals.rs`), so
//! authorization, validation and errors are the same. A handler takes the service's `Api` and
//! the caller by value so `ControlService::serve` (`service.rs`) can hand it any of them.

use roost_proto::v1 as pb;

use super::convert::governance as convert;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

// ---------------------------------------------------------------------------------------------
// Goals
// ---------------------------------------------------------------------------------------------

pub(super) async fn create_goal(
    api: Api,
    caller: Caller,
    r: pb::CreateGoalRequest,
) -> Answer<pb::Goal> {
    let (company_id, fields) = convert::new_goal(r)?;
    let goal = api.create_goal(&caller, &company_id, fields).await?;
    Ok(convert::goal_to_proto(goal))
}

pub(super) async fn get_goal(api: Api, caller: Caller, r: pb::GetGoalRequest) -> Answer<pb::Goal> {
    Ok(convert::goal_to_proto(
        api.get_goal(&caller, &r.goal_id).await?,
    ))
}

pub(super) async fn list_goals(
    api: Api,
    caller: Caller,
    r: pb::ListGoalsRequest,
) -> Answer<pb::ListGoalsResponse> {
    let goals = api.list_goals(&caller, &r.company_id).await?;
    Ok(pb::ListGoalsResponse {
        goals: goals.into_iter().map(convert::goal_to_proto).collect(),
    })
}

pub(super) async fn update_goal(
    api: Api,
    caller: Caller,
    r: pb::UpdateGoalRequest,
) -> Answer<pb::Goal> {
    let (id, patch) = convert::goal_patch(r)?;
    Ok(convert::goal_to_proto(
        api.update_goal(&caller, &id, patch).await?,
    ))
}

pub(super) async fn delete_goal(
    api: Api,
    caller: Caller,
    r: pb::DeleteGoalRequest,
) -> Answer<pb::Goal> {
    Ok(convert::goal_to_proto(
        api.delete_goal(&caller, &r.goal_id).await?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Projects
// ---------------------------------------------------------------------------------------------

pub(super) async fn create_project(
    api: Api,
    caller: Caller,
    r: pb::CreateProjectRequest,
) -> Answer<pb::Project> {
    let (company_id, fields) = convert::new_project(r)?;
    let project = api.create_project(&caller, &company_id, fields).await?;
    Ok(convert::project_to_proto(project))
}

pub(super) async fn get_project(
    api: Api,
    caller: Caller,
    r: pb::GetProjectRequest,
) -> Answer<pb::Project> {
    Ok(convert::project_to_proto(
        api.get_project(&caller, &r.project_id).await?,
    ))
}

pub(super) async fn list_projects(
    api: Api,
    caller: Caller,
    r: pb::ListProjectsRequest,
) -> Answer<pb::ListProjectsResponse> {
    let projects = api.list_projects(&caller, &r.company_id).await?;
    Ok(pb::ListProjectsResponse {
        projects: projects
            .into_iter()
            .map(convert::project_to_proto)
            .collect(),
    })
}

pub(super) async fn update_project(
    api: Api,
    caller: Caller,
    r: pb::UpdateProjectRequest,
) -> Answer<pb::Project> {
    let (id, patch) = convert::project_patch(r)?;
    Ok(convert::project_to_proto(
        api.update_project(&caller, &id, patch).await?,
    ))
}

pub(super) async fn delete_project(
    api: Api,
    caller: Caller,
    r: pb::DeleteProjectRequest,
) -> Answer<pb::Project> {
    Ok(convert::project_to_proto(
        api.delete_project(&caller, &r.project_id).await?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------------------------

pub(super) async fn list_labels(
    api: Api,
    caller: Caller,
    r: pb::ListLabelsRequest,
) -> Answer<pb::ListLabelsResponse> {
    let labels = api.list_labels(&caller, &r.company_id).await?;
    Ok(pb::ListLabelsResponse {
        labels: labels.into_iter().map(convert::label_to_proto).collect(),
    })
}

pub(super) async fn create_label(
    api: Api,
    caller: Caller,
    r: pb::CreateLabelRequest,
) -> Answer<pb::Label> {
    Ok(convert::label_to_proto(
        api.create_label(&caller, &r.company_id, r.name, r.color)
            .await?,
    ))
}

pub(super) async fn delete_label(
    api: Api,
    caller: Caller,
    r: pb::DeleteLabelRequest,
) -> Answer<pb::Label> {
    Ok(convert::label_to_proto(
        api.delete_label(&caller, &r.label_id).await?,
    ))
}

pub(super) async fn pause_project(
    api: Api,
    caller: Caller,
    r: pb::PauseProjectRequest,
) -> Answer<pb::Project> {
    let patch = convert::pause(r.reason);
    Ok(convert::project_to_proto(
        api.update_project(&caller, &r.project_id, patch).await?,
    ))
}

pub(super) async fn resume_project(
    api: Api,
    caller: Caller,
    r: pb::ResumeProjectRequest,
) -> Answer<pb::Project> {
    let patch = convert::resume();
    Ok(convert::project_to_proto(
        api.update_project(&caller, &r.project_id, patch).await?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------------------------

pub(super) async fn create_approval(
    api: Api,
    caller: Caller,
    r: pb::CreateApprovalRequest,
) -> Answer<pb::Approval> {
    let (company_id, new) = convert::new_approval(r)?;
    let approval = api.create_approval(&caller, &company_id, new).await?;
    Ok(convert::approval_to_proto(approval))
}

pub(super) async fn get_approval(
    api: Api,
    caller: Caller,
    r: pb::GetApprovalRequest,
) -> Answer<pb::Approval> {
    Ok(convert::approval_to_proto(
        api.get_approval(&caller, &r.approval_id).await?,
    ))
}

pub(super) async fn list_approvals(
    api: Api,
    caller: Caller,
    r: pb::ListApprovalsRequest,
) -> Answer<pb::ListApprovalsResponse> {
    let status = convert::approval_status(r.status)?;
    let approvals = api.list_approvals(&caller, &r.company_id, status).await?;
    Ok(pb::ListApprovalsResponse {
        approvals: approvals
            .into_iter()
            .map(convert::approval_to_proto)
            .collect(),
    })
}

pub(super) async fn decide_approval(
    api: Api,
    caller: Caller,
    r: pb::DecideApprovalRequest,
) -> Answer<pb::Approval> {
    let decision = convert::decision(r.decision)?;
    let approval = api
        .decide_approval(&caller, &r.approval_id, decision, r.decision_note)
        .await?;
    Ok(convert::approval_to_proto(approval))
}

pub(super) async fn resubmit_approval(
    api: Api,
    caller: Caller,
    r: pb::ResubmitApprovalRequest,
) -> Answer<pb::Approval> {
    let payload = convert::resubmitted_payload(r.payload_json)?;
    let approval = api
        .resubmit_approval(&caller, &r.approval_id, payload)
        .await?;
    Ok(convert::approval_to_proto(approval))
}

pub(super) async fn add_approval_comment(
    api: Api,
    caller: Caller,
    r: pb::AddApprovalCommentRequest,
) -> Answer<pb::ApprovalComment> {
    let comment = api
        .comment_approval(&caller, &r.approval_id, r.body)
        .await?;
    Ok(convert::approval_comment_to_proto(comment))
}

/// `GET /api/approvals/{id}/comments` answers the approval's own list; so does this.
pub(super) async fn link_issue_approval(
    api: Api,
    caller: Caller,
    r: pb::LinkIssueApprovalRequest,
) -> Answer<pb::Approval> {
    let approval = api
        .link_issue_approval(&caller, &r.issue_id, &r.approval_id, true)
        .await?;
    Ok(convert::approval_to_proto(approval))
}

pub(super) async fn unlink_issue_approval(
    api: Api,
    caller: Caller,
    r: pb::LinkIssueApprovalRequest,
) -> Answer<pb::Approval> {
    let approval = api
        .link_issue_approval(&caller, &r.issue_id, &r.approval_id, false)
        .await?;
    Ok(convert::approval_to_proto(approval))
}

pub(super) async fn list_approval_comments(
    api: Api,
    caller: Caller,
    r: pb::ListApprovalCommentsRequest,
) -> Answer<pb::ListApprovalCommentsResponse> {
    let approval = api.get_approval(&caller, &r.approval_id).await?;
    Ok(pb::ListApprovalCommentsResponse {
        comments: approval
            .comments
            .into_iter()
            .map(convert::approval_comment_to_proto)
            .collect(),
    })
}

pub(super) async fn hire_agent(
    api: Api,
    caller: Caller,
    r: pb::HireAgentRequest,
) -> Answer<pb::HireAgentResponse> {
    let (company_id, new, payload) = convert::hire(r)?;
    let (agent, approval) = api.hire_agent(&caller, &company_id, new, payload).await?;
    Ok(convert::hired_to_proto(agent, approval))
}
