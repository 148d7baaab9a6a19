//! Request bodies of the REST API, in Paperclip's camelCase. Unknown fields are refused.

use std::collections::BTreeMap;

use roost_core::command::{AgentPatch, IssuePatch};
use roost_core::{
    AdapterType, AgentPermissions, Credential, HeartbeatPolicy, Issue, IssueStatus, PauseReason,
    Priority, RunStatus,
};
use serde::{Deserialize, Deserializer, Serialize};

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCompany {
    pub name: String,
    pub issue_prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgent {
    pub name: String,
    pub role: Option<String>,
    pub title: Option<String>,
    pub adapter_type: Option<AdapterType>,
    pub adapter_config: Option<serde_json::Value>,
    pub heartbeat: Option<HeartbeatPolicy>,
    pub placement_labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchAgent {
    pub name: Option<String>,
    pub role: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub title: Option<Option<String>>,
    pub adapter_type: Option<AdapterType>,
    pub adapter_config: Option<serde_json::Value>,
    pub heartbeat: Option<HeartbeatPolicy>,
    pub placement_labels: Option<BTreeMap<String, String>>,
    /// Only administrators change agents, so only they grant permissions.
    pub permissions: Option<AgentPermissions>,
}

impl From<PatchAgent> for AgentPatch {
    fn from(p: PatchAgent) -> Self {
        AgentPatch {
            name: p.name,
            role: p.role,
            title: p.title,
            adapter_type: p.adapter_type,
            adapter_config: p.adapter_config,
            heartbeat: p.heartbeat,
            placement_labels: p.placement_labels,
            permissions: p.permissions,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseAgent {
    pub reason: Option<PauseReason>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Empty {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateKey {
    pub name: Option<String>,
}

/// An agent key as shown once, at creation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    pub id: String,
    pub name: String,
    pub agent_id: Option<String>,
    pub created_at: roost_core::Timestamp,
    pub token: String,
}

impl CreatedKey {
    pub fn new(c: Credential, token: String) -> Self {
        CreatedKey {
            id: c.id,
            name: c.name,
            agent_id: c.agent_id,
            created_at: c.created_at,
            token,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateIssue {
    pub title: String,
    pub description: Option<String>,
    pub status: Option<IssueStatus>,
    pub priority: Option<Priority>,
    pub assignee_agent_id: Option<String>,
    pub assignee_user_id: Option<String>,
    pub parent_id: Option<String>,
    pub blocked_by_issue_ids: Option<Vec<String>>,
    pub billing_code: Option<String>,
}

impl From<CreateIssue> for IssuePatch {
    fn from(c: CreateIssue) -> Self {
        IssuePatch {
            title: Some(c.title),
            description: c.description.map(Some),
            status: c.status,
            priority: c.priority,
            assignee_agent_id: c.assignee_agent_id.map(Some),
            assignee_user_id: c.assignee_user_id.map(Some),
            parent_id: c.parent_id.map(Some),
            blocked_by_issue_ids: c.blocked_by_issue_ids,
            billing_code: c.billing_code.map(Some),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchIssue {
    pub title: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<IssueStatus>,
    pub priority: Option<Priority>,
    #[serde(default, deserialize_with = "nullable")]
    pub assignee_agent_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub assignee_user_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub parent_id: Option<Option<String>>,
    pub blocked_by_issue_ids: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub billing_code: Option<Option<String>>,
    pub comment: Option<String>,
}

impl PatchIssue {
    pub fn split(self) -> (IssuePatch, Option<String>) {
        let patch = IssuePatch {
            title: self.title,
            description: self.description,
            status: self.status,
            priority: self.priority,
            assignee_agent_id: self.assignee_agent_id,
            assignee_user_id: self.assignee_user_id,
            parent_id: self.parent_id,
            blocked_by_issue_ids: self.blocked_by_issue_ids,
            billing_code: self.billing_code,
        };
        (patch, self.comment)
    }
}

/// An issue with the comment a PATCH added, if any.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueWithComment {
    #[serde(flatten)]
    pub issue: Issue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<roost_core::Comment>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkout {
    pub agent_id: String,
    pub expected_statuses: Vec<IssueStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewComment {
    pub body: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    pub issue_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishRun {
    pub status: RunStatus,
    pub error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueListQuery {
    /// Comma-separated statuses.
    pub status: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub parent_id: Option<String>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentListQuery {
    pub after: Option<String>,
    pub order: Option<String>,
    pub limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatContextQuery {
    pub wake_comment_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunLogQuery {
    pub offset: Option<u64>,
    pub limit_bytes: Option<usize>,
    pub follow: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunListQuery {
    pub agent_id: Option<String>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActivityQuery {
    pub before: Option<u64>,
    pub limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wakeup {
    /// An issue id or `PREFIX-N` identifier.
    pub issue_id: Option<String>,
    pub reason: Option<roost_core::WakeReason>,
    pub payload: Option<serde_json::Value>,
    pub idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WakeListQuery {
    pub agent_id: Option<String>,
    /// Comma-separated wake statuses.
    pub status: Option<String>,
    pub issue_id: Option<String>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateJoinToken {
    pub name: Option<String>,
    /// Seconds until it admits no more workers.
    pub ttl_secs: Option<u64>,
    /// How many distinct worker ids it admits, each bound to it (default: any number).
    pub max_uses: Option<u32>,
}

/// A worker join token as shown once, at creation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedJoinToken {
    pub id: String,
    pub name: String,
    pub created_at: roost_core::Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<roost_core::Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    pub token: String,
}

impl CreatedJoinToken {
    pub fn new(c: Credential, token: String) -> Self {
        CreatedJoinToken {
            id: c.id,
            name: c.name,
            created_at: c.created_at,
            expires_at: c.expires_at,
            max_uses: c.max_uses,
            token,
        }
    }
}
