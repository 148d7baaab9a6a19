//! Request bodies and query filters in the server's camelCase, and the few response shapes that
//! have no `roost_core` type.
//!
//! Absent options are left out of request bodies, because the server refuses unknown fields
//! and reads a `null` differently from an absent field: in an update, `Some(None)` sends
//! `null` (clear the field) and `None` leaves it alone.

use std::collections::BTreeMap;

use roost_core::views::IssueFilter;
use roost_core::{AdapterType, HeartbeatPolicy, IssueStatus, PauseReason, Priority};
use serde::Serialize;

/// Body of `POST /api/companies`. Without a prefix the server derives one from the name.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewCompany {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_prefix: Option<String>,
}

/// Body of `POST /api/companies/{cid}/agents`; the server fills in what is left out.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewAgent {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_type: Option<AdapterType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_config: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_labels: Option<BTreeMap<String, String>>,
}

/// Body of `PATCH /api/agents/{id}`.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_type: Option<AdapterType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter_config: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_labels: Option<BTreeMap<String, String>>,
    /// The most the agent's home files may hold, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home_max_bytes: Option<u64>,
}

/// Body of `POST /api/companies/{cid}/issues` and `POST /api/issues/{id}/children` (which
/// refuses `parent_id`: the path names the parent).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewIssue {
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<IssueStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee_agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee_user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by_issue_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub billing_code: Option<String>,
}

/// Body of `PATCH /api/issues/{id}`; `comment` adds a comment in the same committed change.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<IssueStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee_agent_id: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignee_user_id: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by_issue_ids: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub billing_code: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Paperclip's execution policy, replaced whole; its `monitor` schedules the issue's
    /// monitor (`roost_core::monitor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_policy: Option<serde_json::Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckoutBody<'a> {
    pub agent_id: &'a str,
    pub expected_statuses: &'a [IssueStatus],
}

#[derive(Serialize)]
pub(crate) struct PauseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<PauseReason>,
}

/// Query pairs for a list endpoint, with unset filters left out.
pub(crate) type Query = Vec<(&'static str, String)>;

fn push<T: ToString>(query: &mut Query, name: &'static str, value: &Option<T>) {
    if let Some(v) = value {
        query.push((name, v.to_string()));
    }
}

/// A list route's filter as query pairs.
pub(crate) trait ToQuery {
    fn query(&self) -> Query;
}

impl ToQuery for IssueFilter {
    fn query(&self) -> Query {
        let mut q = Query::new();
        if !self.statuses.is_empty() {
            let csv: Vec<&str> = self.statuses.iter().map(|s| s.as_str()).collect();
            q.push(("status", csv.join(",")));
        }
        push(&mut q, "assigneeAgentId", &self.assignee_agent_id);
        push(&mut q, "parentId", &self.parent_id);
        push(&mut q, "projectId", &self.project_id);
        push(&mut q, "labelId", &self.label_id);
        push(&mut q, "q", &self.q);
        if self.offset > 0 {
            q.push(("offset", self.offset.to_string()));
        }
        push(&mut q, "limit", &self.limit);
        q
    }
}

/// A page of `GET /api/issues/{id}/comments`: oldest first unless `newest_first`.
#[derive(Clone, Debug, Default)]
pub struct CommentPage {
    pub after: Option<String>,
    pub newest_first: bool,
    pub limit: Option<u32>,
}

impl CommentPage {
    pub(crate) fn query(&self) -> Query {
        let mut q = Query::new();
        push(&mut q, "after", &self.after);
        if self.newest_first {
            q.push(("order", "desc".into()));
        }
        push(&mut q, "limit", &self.limit);
        q
    }
}

/// Filters of `GET /api/companies/{cid}/heartbeat-runs` (newest first).
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    pub agent_id: Option<String>,
    pub limit: Option<usize>,
}

impl RunFilter {
    pub(crate) fn query(&self) -> Query {
        let mut q = Query::new();
        push(&mut q, "agentId", &self.agent_id);
        push(&mut q, "limit", &self.limit);
        q
    }
}

/// A page of `GET /api/companies/{cid}/activity`: entries with `seq` below `before`.
#[derive(Clone, Debug, Default)]
pub struct ActivityPage {
    pub before: Option<u64>,
    pub limit: Option<u32>,
}

impl ActivityPage {
    pub(crate) fn query(&self) -> Query {
        let mut q = Query::new();
        push(&mut q, "before", &self.before);
        push(&mut q, "limit", &self.limit);
        q
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn updates_send_null_to_clear_and_omit_what_stays() {
        let update = IssueUpdate {
            status: Some(IssueStatus::InProgress),
            assignee_agent_id: Some(None),
            comment: Some("on it".into()),
            ..IssueUpdate::default()
        };
        let body = serde_json::to_value(&update).expect("serializable");
        assert_eq!(
            body,
            json!({ "status": "in_progress", "assigneeAgentId": null, "comment": "on it" })
        );
    }

    #[test]
    fn filters_become_query_pairs() {
        let filter = IssueFilter {
            statuses: vec![IssueStatus::Todo, IssueStatus::Blocked],
            assignee_agent_id: Some("a1".into()),
            ..IssueFilter::default()
        };
        let expected: Query = vec![
            ("status", "todo,blocked".into()),
            ("assigneeAgentId", "a1".into()),
        ];
        assert_eq!(filter.query(), expected);
        assert!(IssueFilter::default().query().is_empty());
        assert_eq!(
            CommentPage {
                newest_first: true,
                ..CommentPage::default()
            }
            .query(),
            vec![("order", "desc".to_string())]
        );
    }
}
