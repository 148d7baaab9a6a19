//! Issues as a run starts on them, and as an update answers.

use serde::{Deserialize, Serialize};

use super::RunView;
use crate::entity::{Comment, Issue, IssueStatus, Priority};
use crate::project::{Goal, Project};

/// What a run needs to start work on an issue, in one call
/// (`GET /api/issues/{id}/heartbeat-context`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatContext {
    pub issue: Issue,
    pub ancestors: Vec<Issue>,
    pub blocked_by: Vec<Issue>,
    pub children: Vec<Issue>,
    pub comment_cursor: CommentCursor,
    pub wake_comment: Option<Comment>,
    pub active_run: Option<RunView>,
    /// The project and goal the issue serves (its own goal, else its project's first).
    #[serde(default)]
    pub project: Option<Project>,
    #[serde(default)]
    pub goal: Option<Goal>,
    /// The issue's attachments, newest first (Paperclip's `attachments`).
    #[serde(default)]
    pub attachments: Vec<crate::attachment::AttachmentRef>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentCursor {
    pub total_comments: usize,
    pub latest_comment_id: Option<String>,
}

/// An issue as `GET /api/issues/{id}` answers, as Paperclip's does: the issue, its ancestors
/// (parent first), the issues blocking it and those it blocks, each as a summary. Paperclip's
/// skill reads the blockers from here before it checks an issue out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueDetail {
    #[serde(flatten)]
    pub issue: Issue,
    // Default: an older server answers the bare issue.
    #[serde(default)]
    pub ancestors: Vec<IssueSummary>,
    #[serde(default)]
    pub blocked_by: Vec<IssueSummary>,
    #[serde(default)]
    pub blocks: Vec<IssueSummary>,
    /// The issue's documents without bodies, and its `plan` with its body (Paperclip's
    /// `documentSummaries` and `planDocument`).
    #[serde(default)]
    pub document_summaries: Vec<crate::document::DocumentView>,
    #[serde(default)]
    pub plan_document: Option<crate::document::DocumentView>,
    /// Without a plan document, a plan in the description's `<plan>` tags.
    #[serde(default)]
    pub legacy_plan_document: Option<crate::document::LegacyPlanDocument>,
    /// What work on the issue produced, primary ones first (Paperclip's `workProducts`).
    #[serde(default)]
    pub work_products: Vec<crate::work_product::WorkProduct>,
    /// The labels its `labelIds` name, by name (Paperclip's `labels`).
    #[serde(default)]
    pub labels: Vec<crate::label::Label>,
}

/// An issue as the REST routes answer it: with the labels its `labelIds` name, by name
/// (Paperclip's `labels`), and `labelIds` in that order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabeledIssue {
    #[serde(flatten)]
    pub issue: Issue,
    #[serde(default)]
    pub labels: Vec<crate::label::Label>,
}

impl LabeledIssue {
    /// `issue` with `labels`, the ones it carries by name (`labelIds` set from them).
    pub fn new(mut issue: Issue, labels: Vec<crate::label::Label>) -> Self {
        crate::label::show_label_ids(&mut issue.paperclip, &labels);
        LabeledIssue { issue, labels }
    }
}

/// A related issue in [`IssueDetail`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueSummary {
    pub id: String,
    pub identifier: String,
    pub title: String,
    pub status: IssueStatus,
    pub priority: Priority,
    pub assignee_agent_id: Option<String>,
    pub assignee_user_id: Option<String>,
}

impl From<&Issue> for IssueSummary {
    fn from(i: &Issue) -> Self {
        IssueSummary {
            id: i.id.clone(),
            identifier: i.identifier.clone(),
            title: i.title.clone(),
            status: i.status,
            priority: i.priority,
            assignee_agent_id: i.assignee_agent_id.clone(),
            assignee_user_id: i.assignee_user_id.clone(),
        }
    }
}

/// An issue with the comment its update added, if any (`PATCH /api/issues/{id}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueWithComment {
    #[serde(flatten)]
    pub issue: LabeledIssue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<Comment>,
}
