//! Goals and projects: why work exists. Goals form a hierarchy (`company`,
//! `team`, `agent`, `task`); a project has a lead agent, goals, and can be paused, which holds
//! new runs on its issues. Issues carry `projectId` and `goalId`. Paperclip's names and
//! statuses; the rules are in `rules/project.rs`.

use serde::{Deserialize, Serialize};

use crate::entity::string_enum;
use crate::time::Timestamp;

string_enum!(GoalLevel {
    Company => "company",
    Team => "team",
    Agent => "agent",
    Task => "task",
});

string_enum!(GoalStatus {
    Planned => "planned",
    Active => "active",
    Achieved => "achieved",
    Cancelled => "cancelled",
});

string_enum!(ProjectStatus {
    Backlog => "backlog",
    Planned => "planned",
    InProgress => "in_progress",
    Completed => "completed",
    Cancelled => "cancelled",
});

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Goal {
    pub id: String,
    pub company_id: String,
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
    pub level: GoalLevel,
    pub status: GoalStatus,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub owner_agent_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub company_id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub status: ProjectStatus,
    #[serde(default)]
    pub lead_agent_id: Option<String>,
    #[serde(default)]
    pub goal_ids: Vec<String>,
    /// Paperclip's first goal (`goalId`, deprecated there in favour of `goalIds`).
    #[serde(default)]
    pub goal_id: Option<String>,
    #[serde(default)]
    pub target_date: Option<String>,
    #[serde(default)]
    pub color: Option<String>,
    /// Set while paused: its issues start no new runs.
    #[serde(default)]
    pub paused_at: Option<Timestamp>,
    #[serde(default)]
    pub pause_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A goal's fields as sent: all of them at creation (`title` required), the changed ones in an
/// update. `Some(None)` clears an optional field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalPatch {
    pub title: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub description: Option<Option<String>>,
    pub level: Option<GoalLevel>,
    pub status: Option<GoalStatus>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub parent_id: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub owner_agent_id: Option<Option<String>>,
}

/// A project's fields as sent, like [`GoalPatch`]. `paused` pauses or resumes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectPatch {
    pub name: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub description: Option<Option<String>>,
    pub status: Option<ProjectStatus>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub lead_agent_id: Option<Option<String>>,
    pub goal_ids: Option<Vec<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub target_date: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub color: Option<Option<String>>,
    pub paused: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub pause_reason: Option<Option<String>>,
}
