//! Conversions between the `roost.v1` protobuf messages and the domain and service-layer types.
//!
//! Domain → proto never fails. Proto → domain validates what protobuf cannot express (enum
//! strings, JSON text) and reports bad input as [`ApiError::bad_request`], so callers turn it
//! into `INVALID_ARGUMENT` through the one error mapping in `crate::error`.

use roost_core::activity::ActivityEntry;
use roost_core::command::{AgentPatch, IssuePatch};
use roost_core::{
    AdapterType, Agent, Checkout, Comment, Company, Credential, HeartbeatPolicy, Issue,
    IssueStatus, PauseReason, Run, RunStatus,
};
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;
use roost_store::CommentQuery;

use crate::api::{AuditReport, IssueFilter, NewAgent};
use crate::error::ApiError;

/// Defaults shared with the REST API, so both front ends create the same records.
const DEFAULT_AGENT_ROLE: &str = "general";
const DEFAULT_KEY_NAME: &str = "default";
const DEFAULT_COMMENT_PAGE: u32 = 200;
const DEFAULT_RUN_PAGE: usize = 100;
const DEFAULT_ACTIVITY_PAGE: u32 = 100;

// ---------------------------------------------------------------------------------------------
// Domain → proto
// ---------------------------------------------------------------------------------------------

pub(super) fn company_to_proto(company: Company) -> pb::Company {
    pb::Company {
        id: company.id,
        name: company.name,
        issue_prefix: company.issue_prefix,
        issue_counter: company.issue_counter,
        created_at_ms: company.created_at.millis(),
        updated_at_ms: company.updated_at.millis(),
        description: company.description,
        status: company.status.to_proto(),
        require_board_approval_for_new_agents: company.require_board_approval_for_new_agents,
        escalate_blocked_after_secs: company.escalate_blocked_after_secs,
        recover_stranded_after_secs: company.recover_stranded_after_secs,
    }
}

pub(super) fn heartbeat_to_proto(policy: HeartbeatPolicy) -> pb::HeartbeatPolicy {
    pb::HeartbeatPolicy {
        enabled: policy.enabled,
        interval_sec: policy.interval_sec,
        wake_on_demand: policy.wake_on_demand,
        max_concurrent_runs: policy.max_concurrent_runs,
        skip_when_idle: policy.skip_when_idle,
        run_reserve_cents: policy.run_reserve_cents,
        max_daily_runs: policy.max_daily_runs,
        max_daily_cost_cents: policy.max_daily_cost_cents,
    }
}

pub(super) fn agent_to_proto(agent: Agent) -> pb::Agent {
    pb::Agent {
        id: agent.id,
        company_id: agent.company_id,
        name: agent.name,
        role: agent.role,
        title: agent.title,
        status: agent.status.to_proto(),
        pause_reason: agent.pause_reason.map(|reason| reason.to_proto()),
        adapter_type: agent.adapter_type.to_proto(),
        adapter_config_json: agent.adapter_config.to_string(),
        heartbeat: Some(heartbeat_to_proto(agent.heartbeat)),
        placement_labels: agent.placement_labels.into_iter().collect(),
        created_at_ms: agent.created_at.millis(),
        updated_at_ms: agent.updated_at.millis(),
    }
}

fn checkout_to_proto(checkout: Checkout) -> pb::Checkout {
    pb::Checkout {
        agent_id: checkout.agent_id,
        run_id: checkout.run_id,
        token: checkout.token,
        at_ms: checkout.at.millis(),
    }
}

pub(super) fn issue_to_proto(issue: Issue) -> pb::Issue {
    pb::Issue {
        id: issue.id,
        company_id: issue.company_id,
        identifier: issue.identifier,
        issue_number: issue.issue_number,
        title: issue.title,
        description: issue.description,
        status: issue.status.to_proto(),
        priority: issue.priority.to_proto(),
        assignee_agent_id: issue.assignee_agent_id,
        assignee_user_id: issue.assignee_user_id,
        parent_id: issue.parent_id,
        blocked_by_issue_ids: issue.blocked_by_issue_ids,
        billing_code: issue.billing_code,
        checkout: issue.checkout.map(checkout_to_proto),
        checkout_run_id: issue.checkout_run_id,
        execution_run_id: issue.execution_run_id,
        created_by_agent_id: issue.created_by_agent_id,
        created_by_user_id: issue.created_by_user_id,
        started_at_ms: issue.started_at.map(|at| at.millis()),
        completed_at_ms: issue.completed_at.map(|at| at.millis()),
        cancelled_at_ms: issue.cancelled_at.map(|at| at.millis()),
        created_at_ms: issue.created_at.millis(),
        updated_at_ms: issue.updated_at.millis(),
        monitor: issue
            .monitor
            .state()
            .cloned()
            .map(super::monitors::monitor_to_proto),
    }
}

pub(super) fn comment_to_proto(comment: Comment) -> pb::Comment {
    pb::Comment {
        id: comment.id,
        company_id: comment.company_id,
        issue_id: comment.issue_id,
        body: comment.body,
        author_agent_id: comment.author_agent_id,
        author_user_id: comment.author_user_id,
        created_by_run_id: comment.created_by_run_id,
        created_at_ms: comment.created_at.millis(),
        deleted_at_ms: comment.deleted_at.map(|t| t.millis()),
        deleted_by_type: comment.deleted_by_type.map(|k| k.as_str().to_string()),
        deleted_by_agent_id: comment.deleted_by_agent_id,
        deleted_by_user_id: comment.deleted_by_user_id,
        deleted_by_run_id: comment.deleted_by_run_id,
    }
}

pub(super) fn run_to_proto(run: Run) -> pb::Run {
    pb::Run {
        id: run.id,
        company_id: run.company_id,
        agent_id: run.agent_id,
        issue_id: run.issue_id,
        status: run.status.to_proto(),
        invocation_source: run.invocation_source,
        error: run.error,
        created_at_ms: run.created_at.millis(),
        started_at_ms: run.started_at.map(|at| at.millis()),
        finished_at_ms: run.finished_at.map(|at| at.millis()),
    }
}

pub(super) fn activity_to_proto(entry: ActivityEntry) -> pb::ActivityEntry {
    pb::ActivityEntry {
        seq: entry.seq,
        log_index: entry.log_index,
        company_id: entry.company_id,
        at_ms: entry.at.millis(),
        actor_type: entry.actor_type,
        actor_id: entry.actor_id,
        credential_id: entry.credential_id,
        run_id: entry.run_id,
        action: entry.action,
        entity_type: entry.entity_type,
        entity_id: entry.entity_id,
        details_json: entry.details.to_string(),
        prev_hash: entry.prev_hash,
        hash: entry.hash,
    }
}

/// The key without its hash, plus the secret, which the caller sees only this once.
pub(super) fn created_key_to_proto(
    credential: Credential,
    token: String,
) -> pb::CreateAgentKeyResponse {
    let key = pb::AgentKey {
        id: credential.id,
        // Agent keys always name their agent; the domain type is optional only because admin
        // tokens share it.
        agent_id: credential.agent_id.unwrap_or_default(),
        name: credential.name,
        created_at_ms: credential.created_at.millis(),
    };
    pb::CreateAgentKeyResponse {
        key: Some(key),
        token,
    }
}

pub(super) fn audit_report_to_proto(report: AuditReport) -> pb::VerifyAuditResponse {
    pb::VerifyAuditResponse {
        ok: report.ok,
        entries: report.entries,
        // A broken chain has no trustworthy head; proto3 strings have no null, so it is empty.
        head_hash: report.head_hash.unwrap_or_default(),
        broken_at_seq: report.broken_at_seq,
        message: report.message,
    }
}

// ---------------------------------------------------------------------------------------------
// Proto → domain
// ---------------------------------------------------------------------------------------------

/// A required enum field: UNSPECIFIED or a number this build does not know is a bad request
/// naming the field.
pub(super) fn enum_value<T: ProtoEnum>(field: &str, value: i32) -> Result<T, ApiError> {
    T::from_proto(value).map_err(|reason| ApiError::bad_request(format!("{field}: {reason}")))
}

/// An optional enum field: absent or UNSPECIFIED is "not given".
pub(super) fn optional_enum<T: ProtoEnum>(
    field: &str,
    value: Option<i32>,
) -> Result<Option<T>, ApiError> {
    value
        .filter(|&v| v != 0)
        .map(|v| enum_value(field, v))
        .transpose()
}

/// An enum field with a default, which UNSPECIFIED stands for.
pub(super) fn enum_or<T: ProtoEnum>(field: &str, value: i32, default: T) -> Result<T, ApiError> {
    Ok(optional_enum(field, Some(value))?.unwrap_or(default))
}

/// A repeated enum field; every value must be known.
pub(super) fn enum_values<T: ProtoEnum>(field: &str, values: &[i32]) -> Result<Vec<T>, ApiError> {
    values.iter().map(|&v| enum_value(field, v)).collect()
}

pub(super) fn parse_json(field: &str, text: &str) -> Result<serde_json::Value, ApiError> {
    serde_json::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("{field} is not valid JSON: {e}")))
}

/// proto3 has no null, so in an update a present empty string stands for "clear".
pub(super) fn clearable(value: Option<String>) -> Option<Option<String>> {
    value.map(|text| if text.is_empty() { None } else { Some(text) })
}

/// An optional id or text where an empty string can only mean "none".
pub(super) fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|text| !text.is_empty())
}

/// A page size where 0 asks for the server's default.
fn page_size(limit: u32, default: u32) -> u32 {
    if limit == 0 {
        default
    } else {
        limit
    }
}

fn heartbeat_from_proto(policy: pb::HeartbeatPolicy) -> HeartbeatPolicy {
    HeartbeatPolicy {
        enabled: policy.enabled,
        interval_sec: policy.interval_sec,
        wake_on_demand: policy.wake_on_demand,
        max_concurrent_runs: policy.max_concurrent_runs,
        skip_when_idle: policy.skip_when_idle,
        run_reserve_cents: if policy.run_reserve_cents == 0 {
            HeartbeatPolicy::default().run_reserve_cents
        } else {
            policy.run_reserve_cents
        },
        max_daily_runs: policy.max_daily_runs,
        max_daily_cost_cents: policy.max_daily_cost_cents,
    }
}

/// The issue prefix to create a company with: the one asked for, or one derived from the name.
pub(super) fn company_prefix(request: &pb::CreateCompanyRequest) -> String {
    if request.issue_prefix.is_empty() {
        crate::api::default_prefix(&request.name)
    } else {
        request.issue_prefix.clone()
    }
}

/// The company to create the agent in and its fields, with the REST API's defaults for
/// empty fields.
pub(super) fn new_agent(request: pb::CreateAgentRequest) -> Result<(String, NewAgent), ApiError> {
    let role = if request.role.is_empty() {
        DEFAULT_AGENT_ROLE.to_string()
    } else {
        request.role
    };
    let adapter_type = enum_or("adapter_type", request.adapter_type, AdapterType::Process)?;
    let adapter_config = if request.adapter_config_json.is_empty() {
        serde_json::json!({})
    } else {
        parse_json("adapter_config_json", &request.adapter_config_json)?
    };
    let new = NewAgent {
        name: request.name,
        role,
        title: request.title,
        adapter_type,
        adapter_config,
        heartbeat: request
            .heartbeat
            .map(heartbeat_from_proto)
            .unwrap_or_default(),
        placement_labels: request.placement_labels.into_iter().collect(),
    };
    Ok((request.company_id, new))
}

/// The agent to change and the change; absent fields stay as they are.
pub(super) fn agent_patch(
    request: pb::UpdateAgentRequest,
) -> Result<(String, AgentPatch), ApiError> {
    let patch = AgentPatch {
        name: request.name,
        role: request.role,
        title: clearable(request.title),
        adapter_type: optional_enum("adapter_type", request.adapter_type)?,
        adapter_config: request
            .adapter_config_json
            .map(|text| parse_json("adapter_config_json", &text))
            .transpose()?,
        heartbeat: request.heartbeat.map(heartbeat_from_proto),
        // A map cannot be absent in proto3, so an explicit flag says whether to replace it.
        placement_labels: request
            .set_placement_labels
            .then(|| request.placement_labels.into_iter().collect()),
        // control.proto has no permissions, session rotation nor home cap yet; they are set
        // over REST.
        permissions: None,
        can_create_agents: None,
        session_rotation: None,
        home_max_bytes: None,
        loop_breaker: None,
        // Nor reporting lines (`reportsTo` over REST), nor rollbacks.
        reports_to: None,
        rolled_back_from: None,
    };
    Ok((request.agent_id, patch))
}

/// The pause reason, `manual` when absent.
pub(super) fn pause_reason(reason: Option<i32>) -> Result<PauseReason, ApiError> {
    Ok(optional_enum("reason", reason)?.unwrap_or(PauseReason::Manual))
}

/// The key's name, `default` when empty (as over REST).
pub(super) fn key_name(name: String) -> String {
    if name.is_empty() {
        DEFAULT_KEY_NAME.to_string()
    } else {
        name
    }
}

/// The company and the fields of a new issue. Empty optional strings read as "not set";
/// absent status and priority are left to the domain's defaults (backlog, medium).
pub(super) fn new_issue(request: pb::CreateIssueRequest) -> Result<(String, IssuePatch), ApiError> {
    let fields = IssuePatch {
        title: Some(request.title),
        description: non_empty(request.description).map(Some),
        status: optional_enum("status", request.status)?,
        priority: optional_enum("priority", request.priority)?,
        assignee_agent_id: non_empty(request.assignee_agent_id).map(Some),
        assignee_user_id: non_empty(request.assignee_user_id).map(Some),
        parent_id: non_empty(request.parent_id).map(Some),
        blocked_by_issue_ids: (!request.blocked_by_issue_ids.is_empty())
            .then_some(request.blocked_by_issue_ids),
        billing_code: non_empty(request.billing_code).map(Some),
        // control.proto has no project or goal yet; they are set over REST.
        project_id: None,
        goal_id: None,
        monitor: None,
        paperclip: None,
    };
    Ok((request.company_id, fields))
}

pub(super) fn issue_filter(request: &pb::ListIssuesRequest) -> Result<IssueFilter, ApiError> {
    Ok(IssueFilter {
        statuses: enum_values("status", &request.status)?,
        assignee_agent_id: non_empty(request.assignee_agent_id.clone()),
        parent_id: non_empty(request.parent_id.clone()),
        // 0 leaves the choice to the service layer's own default.
        limit: (request.limit != 0).then(|| usize::try_from(request.limit).unwrap_or(usize::MAX)),
        ..IssueFilter::default()
    })
}

/// The issue to change (id or identifier), the change, and a comment to add with it.
/// For the clearable fields a present empty string clears the value.
pub(super) fn issue_patch(
    request: pb::UpdateIssueRequest,
) -> Result<(String, IssuePatch, Option<String>), ApiError> {
    let patch = IssuePatch {
        title: request.title,
        description: clearable(request.description),
        status: optional_enum("status", request.status)?,
        priority: optional_enum("priority", request.priority)?,
        assignee_agent_id: clearable(request.assignee_agent_id),
        assignee_user_id: clearable(request.assignee_user_id),
        parent_id: clearable(request.parent_id),
        // A repeated field cannot be absent in proto3, so an explicit flag says whether the
        // list replaces the blockers.
        blocked_by_issue_ids: request
            .set_blocked_by
            .then_some(request.blocked_by_issue_ids),
        billing_code: clearable(request.billing_code),
        project_id: None,
        goal_id: None,
        monitor: None,
        paperclip: None,
    };
    Ok((request.issue_id, patch, request.comment))
}

/// Oldest first, as the proto promises; the REST API's `order=desc` has no proto field.
pub(super) fn comment_query(request: &pb::ListCommentsRequest) -> CommentQuery {
    CommentQuery {
        after: non_empty(request.after_comment_id.clone()),
        descending: false,
        limit: page_size(request.limit, DEFAULT_COMMENT_PAGE),
    }
}

pub(super) fn expected_statuses(values: &[i32]) -> Result<Vec<IssueStatus>, ApiError> {
    enum_values("expected_statuses", values)
}

pub(super) fn run_status(value: i32) -> Result<RunStatus, ApiError> {
    enum_value("status", value)
}

/// An optional id where an empty string means none (proto3 clients often send "").
pub(super) fn optional_id(id: Option<String>) -> Option<String> {
    non_empty(id)
}

pub(super) fn run_page_size(limit: u32) -> usize {
    if limit == 0 {
        DEFAULT_RUN_PAGE
    } else {
        usize::try_from(limit).unwrap_or(usize::MAX)
    }
}

pub(super) fn activity_page_size(limit: u32) -> u32 {
    page_size(limit, DEFAULT_ACTIVITY_PAGE)
}

// Goals, projects and approvals, in their own file to keep this one short.
pub(super) mod governance;

// The tests live in their own file to keep this one short.
#[cfg(test)]
mod tests;
