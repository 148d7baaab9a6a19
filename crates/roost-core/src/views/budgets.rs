//! Budgets and spend as the API shows them.

use serde::{Deserialize, Serialize};

use crate::entity::{BudgetIncident, BudgetPolicy};

/// A policy with where it stands now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    #[serde(flatten)]
    pub policy: BudgetPolicy,
    pub spent: u64,
    pub reserved: u64,
    pub remaining: u64,
}

/// `GET /api/companies/{cid}/budgets/overview`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetOverview {
    pub policies: Vec<PolicyStatus>,
    pub incidents: Vec<BudgetIncident>,
    pub paused_agent_ids: Vec<String>,
}

/// `GET /api/companies/{cid}/costs/summary`: this month's and all-time spend, per agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostSummary {
    pub month_cents: u64,
    pub lifetime_cents: u64,
    pub reserved_cents: u64,
    pub by_agent: Vec<AgentSpend>,
    /// Spend on the issues of each project (as they were when the cost was recorded).
    pub by_project: Vec<ProjectSpend>,
    /// Paperclip's names: this month's spend, the company's monthly budget (0: none) and the
    /// share of it spent, in percent with two decimals.
    pub spend_cents: u64,
    pub budget_cents: u64,
    pub utilization_percent: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSpend {
    pub agent_id: String,
    pub name: String,
    pub month_cents: u64,
    pub lifetime_cents: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpend {
    pub project_id: String,
    pub name: String,
    pub month_cents: u64,
    pub lifetime_cents: u64,
}
