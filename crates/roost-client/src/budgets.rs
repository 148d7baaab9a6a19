//! Budgets and costs (`/api/companies/{cid}/budgets/*`, `/cost-events`, `/costs/summary`).

use roost_core::{BudgetIncident, BudgetPolicy, CostEvent};
use serde::Serialize;

use crate::{BudgetOverview, CostSummary, Result, RoostClient, API};

/// Body of `POST /api/companies/{cid}/budgets/policies`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewBudgetPolicy {
    pub scope_type: String,
    pub scope_id: Option<String>,
    pub window_kind: String,
    /// Cents.
    pub amount: u64,
    pub warn_percent: u8,
    pub hard_stop_enabled: bool,
}

/// Body of `POST /api/companies/{cid}/cost-events`.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewCostEvent {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: u64,
}

impl RoostClient {
    pub async fn set_budget(
        &self,
        company_id: &str,
        policy: &NewBudgetPolicy,
    ) -> Result<BudgetPolicy> {
        self.post(
            &[API, "companies", company_id, "budgets", "policies"],
            policy,
        )
        .await
    }

    pub async fn budget_overview(&self, company_id: &str) -> Result<BudgetOverview> {
        self.get(&[API, "companies", company_id, "budgets", "overview"], &[])
            .await
    }

    pub async fn resolve_incident(
        &self,
        company_id: &str,
        incident_id: &str,
        action: &str,
        amount: Option<u64>,
    ) -> Result<BudgetIncident> {
        let body = serde_json::json!({ "action": action, "amount": amount });
        self.post(
            &[
                API,
                "companies",
                company_id,
                "budget-incidents",
                incident_id,
                "resolve",
            ],
            &body,
        )
        .await
    }

    pub async fn record_cost(&self, company_id: &str, event: &NewCostEvent) -> Result<CostEvent> {
        self.post(&[API, "companies", company_id, "cost-events"], event)
            .await
    }

    pub async fn cost_summary(&self, company_id: &str) -> Result<CostSummary> {
        self.get(&[API, "companies", company_id, "costs", "summary"], &[])
            .await
    }
}
