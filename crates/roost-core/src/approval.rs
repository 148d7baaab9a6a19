//! Approvals: an agent or an operator asks, a person decides, the requester
//! is woken with the decision. Paperclip's types, statuses and JSON; the rules are in
//! `rules/approval.rs`, the bounds in `limits.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::entity::string_enum;
use crate::time::Timestamp;

string_enum!(ApprovalType {
    HireAgent => "hire_agent",
    ApproveCeoStrategy => "approve_ceo_strategy",
    BudgetOverrideRequired => "budget_override_required",
    RequestBoardApproval => "request_board_approval",
});

string_enum!(
    /// `pending` and `revision_requested` are open; the rest are decided.
    ApprovalStatus {
        Pending => "pending",
        RevisionRequested => "revision_requested",
        Approved => "approved",
        Rejected => "rejected",
        Cancelled => "cancelled",
    }
);

impl ApprovalStatus {
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ApprovalStatus::Pending | ApprovalStatus::RevisionRequested
        )
    }
}

string_enum!(
    /// What a person decided.
    ApprovalDecision {
        Approve => "approve",
        Reject => "reject",
        RequestRevision => "request_revision",
    }
);

impl ApprovalDecision {
    /// The status it leads to.
    pub fn status(self) -> ApprovalStatus {
        match self {
            ApprovalDecision::Approve => ApprovalStatus::Approved,
            ApprovalDecision::Reject => ApprovalStatus::Rejected,
            ApprovalDecision::RequestRevision => ApprovalStatus::RevisionRequested,
        }
    }

    /// Paperclip's name for the requester's wake (`reason` in the wake's payload).
    pub fn wake_reason_name(self) -> &'static str {
        match self {
            ApprovalDecision::Approve => "approval_approved",
            ApprovalDecision::Reject => "approval_rejected",
            ApprovalDecision::RequestRevision => "approval_revision_requested",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalComment {
    pub id: String,
    pub body: String,
    #[serde(default)]
    pub author_agent_id: Option<String>,
    #[serde(default)]
    pub author_user_id: Option<String>,
    pub created_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub id: String,
    pub company_id: String,
    #[serde(rename = "type")]
    pub approval_type: ApprovalType,
    pub status: ApprovalStatus,
    pub payload: serde_json::Value,
    #[serde(default)]
    pub requested_by_agent_id: Option<String>,
    #[serde(default)]
    pub requested_by_user_id: Option<String>,
    #[serde(default)]
    pub decision_note: Option<String>,
    #[serde(default)]
    pub decided_by_user_id: Option<String>,
    #[serde(default)]
    pub decided_at: Option<Timestamp>,
    /// The issues that wait on it (Paperclip's `issue_approvals`).
    #[serde(default)]
    pub issue_ids: Vec<String>,
    /// For `hire_agent`: the agent it would let run.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub comments: Vec<ApprovalComment>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Every approval, with the open ones by issue (derived).
#[derive(Clone, Debug, Default)]
pub struct ApprovalState {
    pub approvals: BTreeMap<String, Approval>,
    open_by_issue: BTreeMap<String, BTreeSet<String>>,
}

impl ApprovalState {
    pub(crate) fn put(&mut self, a: Approval) {
        if let Some(old) = self.approvals.get(&a.id) {
            for issue in &old.issue_ids {
                if let Some(set) = self.open_by_issue.get_mut(issue) {
                    set.remove(&a.id);
                    if set.is_empty() {
                        self.open_by_issue.remove(issue);
                    }
                }
            }
        }
        if a.status.is_open() {
            for issue in &a.issue_ids {
                self.open_by_issue
                    .entry(issue.clone())
                    .or_default()
                    .insert(a.id.clone());
            }
        }
        self.approvals.insert(a.id.clone(), a);
    }

    /// The open approvals `issue_id` waits on.
    pub fn open_for_issue<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = &'a Approval> {
        self.open_by_issue
            .get(issue_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.approvals.get(id))
    }
}
