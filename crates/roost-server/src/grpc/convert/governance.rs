//! Conversions of goals, projects and approvals between `roost.v1`
//! messages and the domain, with the same defaults as REST's bodies (`rest/projects.rs`,
//! `rest/approvals.rs`). Kept apart from `convert.rs` so each file keeps one job.

use roost_core::approval::{Approval, ApprovalComment, ApprovalDecision, ApprovalStatus};
use roost_core::project::{Goal, GoalPatch, Project, ProjectPatch};
use roost_core::AdapterType;
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;
use serde_json::{Map, Value};

use super::{
    agent_to_proto, clearable, enum_value, new_agent, non_empty, optional_enum, parse_json,
};
use crate::api::{NewAgent, NewApproval};
use crate::error::ApiError;

// ---------------------------------------------------------------------------------------------
// Domain → proto
// ---------------------------------------------------------------------------------------------

pub(in crate::grpc) fn goal_to_proto(g: Goal) -> pb::Goal {
    pb::Goal {
        id: g.id,
        company_id: g.company_id,
        title: g.title,
        description: g.description,
        level: g.level.to_proto(),
        status: g.status.to_proto(),
        parent_id: g.parent_id,
        owner_agent_id: g.owner_agent_id,
        created_at_ms: g.created_at.millis(),
        updated_at_ms: g.updated_at.millis(),
    }
}

pub(in crate::grpc) fn project_to_proto(p: Project) -> pb::Project {
    pb::Project {
        id: p.id,
        company_id: p.company_id,
        name: p.name,
        description: p.description,
        status: p.status.to_proto(),
        lead_agent_id: p.lead_agent_id,
        goal_ids: p.goal_ids,
        goal_id: p.goal_id,
        target_date: p.target_date,
        color: p.color,
        paused: p.paused_at.is_some(),
        paused_at_ms: p.paused_at.map(|t| t.millis()),
        pause_reason: p.pause_reason,
        created_at_ms: p.created_at.millis(),
        updated_at_ms: p.updated_at.millis(),
    }
}

pub(in crate::grpc) fn label_to_proto(l: roost_core::label::Label) -> pb::Label {
    pb::Label {
        id: l.id,
        company_id: l.company_id,
        name: l.name,
        color: l.color,
        created_at_ms: l.created_at.millis(),
        updated_at_ms: l.updated_at.millis(),
    }
}

pub(in crate::grpc) fn approval_comment_to_proto(c: ApprovalComment) -> pb::ApprovalComment {
    pb::ApprovalComment {
        id: c.id,
        body: c.body,
        author_agent_id: c.author_agent_id,
        author_user_id: c.author_user_id,
        created_at_ms: c.created_at.millis(),
    }
}

pub(in crate::grpc) fn approval_to_proto(a: Approval) -> pb::Approval {
    pb::Approval {
        id: a.id,
        company_id: a.company_id,
        r#type: a.approval_type.to_proto(),
        status: a.status.to_proto(),
        payload_json: a.payload.to_string(),
        requested_by_agent_id: a.requested_by_agent_id,
        requested_by_user_id: a.requested_by_user_id,
        decision_note: a.decision_note,
        decided_by_user_id: a.decided_by_user_id,
        decided_at_ms: a.decided_at.map(|t| t.millis()),
        issue_ids: a.issue_ids,
        agent_id: a.agent_id,
        comments: a
            .comments
            .into_iter()
            .map(approval_comment_to_proto)
            .collect(),
        created_at_ms: a.created_at.millis(),
        updated_at_ms: a.updated_at.millis(),
    }
}

pub(in crate::grpc) fn hired_to_proto(
    agent: roost_core::Agent,
    approval: Option<Approval>,
) -> pb::HireAgentResponse {
    pb::HireAgentResponse {
        agent: Some(agent_to_proto(agent)),
        approval: approval.map(approval_to_proto),
    }
}

// ---------------------------------------------------------------------------------------------
// Proto → domain
// ---------------------------------------------------------------------------------------------

/// The company and the fields of a new goal. Empty optional strings read as "not set"; the
/// title is checked by the state machine (`roost-core/src/rules/project.rs`), as for REST.
pub(in crate::grpc) fn new_goal(r: pb::CreateGoalRequest) -> Result<(String, GoalPatch), ApiError> {
    let fields = GoalPatch {
        title: Some(r.title),
        description: non_empty(r.description).map(Some),
        level: optional_enum("level", r.level)?,
        status: optional_enum("status", r.status)?,
        parent_id: non_empty(r.parent_id).map(Some),
        owner_agent_id: non_empty(r.owner_agent_id).map(Some),
    };
    Ok((r.company_id, fields))
}

pub(in crate::grpc) fn goal_patch(
    r: pb::UpdateGoalRequest,
) -> Result<(String, GoalPatch), ApiError> {
    let patch = GoalPatch {
        title: r.title,
        description: clearable(r.description),
        level: optional_enum("level", r.level)?,
        status: optional_enum("status", r.status)?,
        parent_id: clearable(r.parent_id),
        owner_agent_id: clearable(r.owner_agent_id),
    };
    Ok((r.goal_id, patch))
}

pub(in crate::grpc) fn new_project(
    r: pb::CreateProjectRequest,
) -> Result<(String, ProjectPatch), ApiError> {
    let fields = ProjectPatch {
        name: Some(r.name),
        description: non_empty(r.description).map(Some),
        status: optional_enum("status", r.status)?,
        lead_agent_id: non_empty(r.lead_agent_id).map(Some),
        goal_ids: (!r.goal_ids.is_empty()).then_some(r.goal_ids),
        target_date: non_empty(r.target_date).map(Some),
        color: non_empty(r.color).map(Some),
        paused: None,
        pause_reason: None,
    };
    Ok((r.company_id, fields))
}

pub(in crate::grpc) fn project_patch(
    r: pb::UpdateProjectRequest,
) -> Result<(String, ProjectPatch), ApiError> {
    let patch = ProjectPatch {
        name: r.name,
        description: clearable(r.description),
        status: optional_enum("status", r.status)?,
        lead_agent_id: clearable(r.lead_agent_id),
        // A repeated field cannot be absent in proto3, so an explicit flag says whether the
        // list replaces the goals.
        goal_ids: r.set_goal_ids.then_some(r.goal_ids),
        target_date: clearable(r.target_date),
        color: clearable(r.color),
        paused: None,
        pause_reason: None,
    };
    Ok((r.project_id, patch))
}

/// `POST /api/projects/{id}/pause` (`rest/projects.rs`): paused, with the reason or none.
pub(in crate::grpc) fn pause(reason: Option<String>) -> ProjectPatch {
    ProjectPatch {
        paused: Some(true),
        pause_reason: Some(non_empty(reason)),
        ..Default::default()
    }
}

/// `POST /api/projects/{id}/resume`.
pub(in crate::grpc) fn resume() -> ProjectPatch {
    ProjectPatch {
        paused: Some(false),
        ..Default::default()
    }
}

/// A JSON payload: empty is `{}`; whether it is an object is the state machine's check
/// (`roost-core/src/rules/approval.rs`), so both front ends refuse the same.
fn payload(field: &str, text: &str) -> Result<Value, ApiError> {
    if text.trim().is_empty() {
        Ok(Value::Object(Map::new()))
    } else {
        parse_json(field, text)
    }
}

pub(in crate::grpc) fn new_approval(
    r: pb::CreateApprovalRequest,
) -> Result<(String, NewApproval), ApiError> {
    let new = NewApproval {
        approval_type: enum_value("type", r.r#type)?,
        payload: payload("payload_json", &r.payload_json)?,
        requested_by_agent_id: non_empty(r.requested_by_agent_id),
        issue_ids: r.issue_ids,
    };
    Ok((r.company_id, new))
}

pub(in crate::grpc) fn approval_status(
    value: Option<i32>,
) -> Result<Option<ApprovalStatus>, ApiError> {
    optional_enum("status", value)
}

pub(in crate::grpc) fn decision(value: i32) -> Result<ApprovalDecision, ApiError> {
    enum_value("decision", value)
}

/// The replacement payload of a resubmission; absent or empty keeps the one stored.
pub(in crate::grpc) fn resubmitted_payload(
    text: Option<String>,
) -> Result<Option<Value>, ApiError> {
    non_empty(text)
        .map(|t| payload("payload_json", &t))
        .transpose()
}

/// The company, the agent and the hire's payload, as `rest/approvals.rs` `hire` builds it: the
/// agent's name, role, title and adapter type as sent, and the issues it came from.
pub(in crate::grpc) fn hire(
    r: pb::HireAgentRequest,
) -> Result<(String, NewAgent, Value), ApiError> {
    let agent = r
        .agent
        .ok_or_else(|| ApiError::bad_request("agent: the agent to hire is required"))?;
    let mut payload = Map::new();
    payload.insert("name".into(), Value::String(agent.name.clone()));
    if !agent.role.is_empty() {
        payload.insert("role".into(), Value::String(agent.role.clone()));
    }
    if let Some(title) = &agent.title {
        payload.insert("title".into(), Value::String(title.clone()));
    }
    if let Some(adapter) = optional_enum::<AdapterType>("adapter_type", Some(agent.adapter_type))? {
        payload.insert("adapterType".into(), Value::String(adapter.as_str().into()));
    }
    if !r.source_issue_ids.is_empty() {
        payload.insert(
            "sourceIssueIds".into(),
            Value::Array(r.source_issue_ids.into_iter().map(Value::String).collect()),
        );
    }
    let (company_id, new) = new_agent(agent)?;
    Ok((company_id, new, Value::Object(payload)))
}

#[cfg(test)]
mod tests {
    use roost_core::approval::ApprovalType;
    use roost_core::project::{GoalLevel, GoalStatus};

    use super::*;

    fn code(error: ApiError) -> tonic::Code {
        tonic::Status::from(error).code()
    }

    #[test]
    fn a_new_goal_leaves_absent_fields_to_the_domains_defaults() {
        let (company, fields) = new_goal(pb::CreateGoalRequest {
            company_id: "c".into(),
            title: "Ship".into(),
            description: Some(String::new()),
            status: Some(GoalStatus::Active.to_proto()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(company, "c");
        assert_eq!(fields.title.as_deref(), Some("Ship"));
        assert_eq!(fields.description, None, "empty reads as not set");
        assert_eq!(fields.level, None);
        assert_eq!(fields.status, Some(GoalStatus::Active));
    }

    #[test]
    fn an_update_clears_with_an_empty_string_and_keeps_what_is_absent() {
        let (id, patch) = goal_patch(pb::UpdateGoalRequest {
            goal_id: "g".into(),
            parent_id: Some(String::new()),
            level: Some(GoalLevel::Team.to_proto()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(id, "g");
        assert_eq!(patch.parent_id, Some(None));
        assert_eq!(patch.owner_agent_id, None);
        assert_eq!(patch.level, Some(GoalLevel::Team));

        let (_, patch) = project_patch(pb::UpdateProjectRequest {
            project_id: "p".into(),
            goal_ids: vec!["ignored".into()],
            color: Some(String::new()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            patch.goal_ids, None,
            "without set_goal_ids the list is ignored"
        );
        assert_eq!(patch.color, Some(None));
    }

    #[test]
    fn an_unknown_enum_name_is_invalid_argument_naming_the_field() {
        let error = new_goal(pb::CreateGoalRequest {
            level: Some(99),
            ..Default::default()
        })
        .unwrap_err();
        assert!(error.to_string().contains("level"), "{error}");
        assert_eq!(code(error), tonic::Code::InvalidArgument);
        let error = decision(0).unwrap_err();
        assert!(error.to_string().contains("REQUEST_REVISION"), "{error}");
        assert_eq!(code(error), tonic::Code::InvalidArgument);
        assert_eq!(
            decision(ApprovalDecision::RequestRevision.to_proto()).unwrap(),
            ApprovalDecision::RequestRevision
        );
        assert_eq!(approval_status(Some(0)).unwrap(), None, "unspecified: all");
        let error = approval_status(Some(42)).unwrap_err();
        assert_eq!(code(error), tonic::Code::InvalidArgument);
    }

    #[test]
    fn a_payload_is_json_and_empty_means_an_empty_object() {
        let (_, new) = new_approval(pb::CreateApprovalRequest {
            r#type: ApprovalType::RequestBoardApproval.to_proto(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(new.payload, serde_json::json!({}));
        let error = new_approval(pb::CreateApprovalRequest {
            r#type: ApprovalType::RequestBoardApproval.to_proto(),
            payload_json: "{".into(),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert_eq!(code(error), tonic::Code::InvalidArgument);
        assert_eq!(resubmitted_payload(Some(String::new())).unwrap(), None);
    }

    #[test]
    fn a_pause_without_a_reason_clears_the_old_one() {
        let patch = pause(Some(String::new()));
        assert_eq!((patch.paused, patch.pause_reason), (Some(true), Some(None)));
        assert_eq!(resume().paused, Some(false));
    }

    #[test]
    fn a_hire_records_what_was_asked_in_its_payload() {
        let (company, agent, payload) = hire(pb::HireAgentRequest {
            agent: Some(pb::CreateAgentRequest {
                company_id: "c".into(),
                name: "tester".into(),
                role: "qa".into(),
                ..Default::default()
            }),
            source_issue_ids: vec!["i1".into()],
        })
        .unwrap();
        assert_eq!((company.as_str(), agent.role.as_str()), ("c", "qa"));
        assert_eq!(
            payload,
            serde_json::json!({ "name": "tester", "role": "qa", "sourceIssueIds": ["i1"] })
        );
        let missing = hire(pb::HireAgentRequest::default()).err().unwrap();
        assert_eq!(code(missing), tonic::Code::InvalidArgument);
    }
}
