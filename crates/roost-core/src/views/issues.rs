//! Issues as a run starts on them, and as an update answers.

use serde::{Deserialize, Serialize};

use super::RunView;
use crate::entity::{Comment, Issue};
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
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentCursor {
    pub total_comments: usize,
    pub latest_comment_id: Option<String>,
}

/// An issue with the comment its update added, if any (`PATCH /api/issues/{id}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueWithComment {
    #[serde(flatten)]
    pub issue: Issue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<Comment>,
}
