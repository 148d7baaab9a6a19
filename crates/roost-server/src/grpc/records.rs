//! Company, agent, issue, run and activity calls of `roost.v1.Control`, most added for parity
//! with REST: `CreateCompany`, `ListCompanies`, `CreateAgent`, `ListAgents`, `GetAgent`, `DeleteAgent`,
//! `GetCompany`, `UpdateCompany` (`rest/admin.rs`), `DeleteIssue`, `GetInbox`,
//! `GetHeartbeatContext` (`rest/issues.rs`), `CancelRun`, `ListRuns` (`rest/runs.rs`) and
//! `ListActivity`. Each calls the [`Api`] function its REST twin calls, so authorization,
//! validation and errors are the same.

use roost_core::command::CompanyPatch;
use roost_core::views::HeartbeatContext;
use roost_core::{CompanyStatus, RunStatus};
use roost_proto::v1 as pb;

use super::convert::governance::{goal_to_proto, project_to_proto};
use super::convert::{
    activity_page_size, activity_to_proto, clearable, comment_to_proto, company_to_proto,
    issue_to_proto, non_empty, optional_enum, optional_id, run_page_size, run_to_proto,
};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

/// The error a cancelled run ends with, as over REST.
const CANCELLED: &str = "cancelled";

pub(super) async fn create_company(
    api: Api,
    caller: Caller,
    r: pb::CreateCompanyRequest,
) -> Answer<pb::Company> {
    let prefix = super::convert::company_prefix(&r);
    let company = api.create_company(&caller, &r.name, &prefix).await?;
    Ok(company_to_proto(company))
}

pub(super) async fn list_companies(
    api: Api,
    caller: Caller,
    _: pb::ListCompaniesRequest,
) -> Answer<pb::ListCompaniesResponse> {
    let companies = api.list_companies(&caller).await?;
    Ok(pb::ListCompaniesResponse {
        companies: companies.into_iter().map(company_to_proto).collect(),
    })
}

pub(super) async fn create_agent(
    api: Api,
    caller: Caller,
    r: pb::CreateAgentRequest,
) -> Answer<pb::Agent> {
    let (company_id, new) = super::convert::new_agent(r)?;
    let agent = api.create_agent(&caller, &company_id, new).await?;
    Ok(super::convert::agent_to_proto(agent))
}

pub(super) async fn list_agents(
    api: Api,
    caller: Caller,
    r: pb::ListAgentsRequest,
) -> Answer<pb::ListAgentsResponse> {
    let agents = api.list_agents(&caller, &r.company_id).await?;
    Ok(pb::ListAgentsResponse {
        agents: agents
            .into_iter()
            .map(super::convert::agent_to_proto)
            .collect(),
    })
}

pub(super) async fn get_agent(
    api: Api,
    caller: Caller,
    r: pb::GetAgentRequest,
) -> Answer<pb::Agent> {
    Ok(super::convert::agent_to_proto(
        api.get_agent(&caller, &r.agent_id).await?,
    ))
}

pub(super) async fn delete_agent(
    api: Api,
    caller: Caller,
    r: pb::DeleteAgentRequest,
) -> Answer<pb::Agent> {
    Ok(super::convert::agent_to_proto(
        api.delete_agent(&caller, &r.agent_id).await?,
    ))
}

pub(super) async fn get_company(
    api: Api,
    caller: Caller,
    r: pb::GetCompanyRequest,
) -> Answer<pb::Company> {
    Ok(company_to_proto(
        api.get_company(&caller, &r.company_id).await?,
    ))
}

pub(super) async fn update_company(
    api: Api,
    caller: Caller,
    r: pb::UpdateCompanyRequest,
) -> Answer<pb::Company> {
    caller.require_admin()?;
    let status = optional_enum::<CompanyStatus>("status", r.status)?;
    let company = api.get_company(&caller, &r.company_id).await?;
    let patch = CompanyPatch {
        name: r.name,
        description: clearable(r.description),
        status,
        require_board_approval_for_new_agents: r.require_board_approval_for_new_agents,
        loop_breaker: None,
        escalate_blocked_after_secs: r.escalate_blocked_after_secs,
        recover_stranded_after_secs: r.recover_stranded_after_secs,
    };
    if patch == CompanyPatch::default() {
        return Ok(company_to_proto(company));
    }
    Ok(company_to_proto(
        api.update_company(&caller, &company.id, patch).await?,
    ))
}

pub(super) async fn delete_issue(
    api: Api,
    caller: Caller,
    r: pb::DeleteIssueRequest,
) -> Answer<pb::Issue> {
    Ok(issue_to_proto(
        api.delete_issue(&caller, &r.issue_id).await?,
    ))
}

pub(super) async fn get_inbox(
    api: Api,
    caller: Caller,
    _: pb::GetInboxRequest,
) -> Answer<pb::GetInboxResponse> {
    let issues = api.inbox(&caller).await?;
    Ok(pb::GetInboxResponse {
        issues: issues.into_iter().map(issue_to_proto).collect(),
    })
}

fn context_to_proto(c: HeartbeatContext) -> pb::HeartbeatContext {
    let issues = |list: Vec<_>| list.into_iter().map(issue_to_proto).collect();
    pb::HeartbeatContext {
        issue: Some(issue_to_proto(c.issue)),
        ancestors: issues(c.ancestors),
        blocked_by: issues(c.blocked_by),
        children: issues(c.children),
        total_comments: c.comment_cursor.total_comments as u64,
        latest_comment_id: c.comment_cursor.latest_comment_id,
        wake_comment: c.wake_comment.map(comment_to_proto),
        active_run: c.active_run.map(|r| run_to_proto(r.into_run())),
        project: c.project.map(project_to_proto),
        goal: c.goal.map(goal_to_proto),
        attachments: super::attachments::refs_to_proto(c.attachments),
    }
}

pub(super) async fn get_heartbeat_context(
    api: Api,
    caller: Caller,
    r: pb::GetHeartbeatContextRequest,
) -> Answer<pb::HeartbeatContext> {
    let wake_comment = non_empty(r.wake_comment_id);
    let context = api
        .heartbeat_context(&caller, &r.issue_id, wake_comment.as_deref())
        .await?;
    Ok(context_to_proto(context))
}

pub(super) async fn cancel_run(
    api: Api,
    caller: Caller,
    r: pb::CancelRunRequest,
) -> Answer<pb::Run> {
    let run = api
        .finish_run(
            &caller,
            &r.run_id,
            RunStatus::Cancelled,
            Some(CANCELLED.into()),
        )
        .await?;
    Ok(run_to_proto(run.into_run()))
}

pub(super) async fn list_runs(
    api: Api,
    caller: Caller,
    r: pb::ListRunsRequest,
) -> Answer<pb::ListRunsResponse> {
    let agent_id = optional_id(r.agent_id);
    let limit = run_page_size(r.limit);
    let runs = api
        .list_runs(&caller, &r.company_id, agent_id.as_deref(), limit)
        .await?;
    Ok(pb::ListRunsResponse {
        runs: runs
            .into_iter()
            .map(|r| run_to_proto(r.into_run()))
            .collect(),
    })
}

pub(super) async fn list_activity(
    api: Api,
    caller: Caller,
    r: pb::ListActivityRequest,
) -> Answer<pb::ListActivityResponse> {
    let limit = activity_page_size(r.limit);
    let entries = api
        .list_activity(&caller, &r.company_id, r.before_seq, limit)
        .await?;
    Ok(pb::ListActivityResponse {
        entries: entries.into_iter().map(activity_to_proto).collect(),
    })
}
