//! Budgets: policies per scope and window, cost events, and the incidents a policy opens.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

string_enum!(BudgetScopeType { Company => "company", Agent => "agent", Project => "project" });
string_enum!(BudgetWindow { CalendarMonthUtc => "calendar_month_utc", Lifetime => "lifetime" });
string_enum!(IncidentKind { Soft => "soft", Hard => "hard", WakeLoop => "wake_loop" });
string_enum!(IncidentStatus { Open => "open", Resolved => "resolved", Dismissed => "dismissed" });
string_enum!(
    /// How a cost was billed (Paperclip's `billingType`).
    BillingType {
        MeteredApi => "metered_api",
        SubscriptionIncluded => "subscription_included",
        SubscriptionOverage => "subscription_overage",
        Credits => "credits",
        Fixed => "fixed",
        Unknown => "unknown",
    }
);
string_enum!(IncidentAction {
    RaiseAndResume => "raise_and_resume",
    KeepPaused => "keep_paused",
    Dismiss => "dismiss",
    Resume => "resume",
});

impl BudgetWindow {
    /// The window `at` falls in: its UTC month (`year * 12 + month0`), or one lifetime window.
    pub fn key(self, at: crate::time::Timestamp) -> i64 {
        use chrono::Datelike;
        match self {
            BudgetWindow::Lifetime => LIFETIME_WINDOW,
            BudgetWindow::CalendarMonthUtc => chrono::DateTime::from_timestamp_millis(at.0)
                .map(|t| t.year() as i64 * 12 + t.month0() as i64)
                .unwrap_or(0),
        }
    }
}

/// The window key of lifetime policies.
pub const LIFETIME_WINDOW: i64 = -1;

/// A spending limit on a company, an agent or a project (docs/budgets.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetPolicy {
    pub id: String,
    pub company_id: String,
    pub scope_type: BudgetScopeType,
    pub scope_id: String,
    pub window_kind: BudgetWindow,
    /// Cents.
    pub amount: u64,
    pub warn_percent: u8,
    pub hard_stop_enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl BudgetPolicy {
    /// The spend index key of the policy's scope.
    pub fn scope_key(&self) -> String {
        scope_key(self.scope_type, &self.scope_id)
    }

    /// Whether spend of `agent_id` in `company_id`, on an issue of `project_id` (if any),
    /// counts against this policy.
    pub fn applies_to(&self, company_id: &str, agent_id: &str, project_id: Option<&str>) -> bool {
        self.company_id == company_id
            && match self.scope_type {
                BudgetScopeType::Company => self.scope_id == company_id,
                BudgetScopeType::Agent => self.scope_id == agent_id,
                BudgetScopeType::Project => project_id == Some(self.scope_id.as_str()),
            }
    }
}

pub fn scope_key(scope_type: BudgetScopeType, scope_id: &str) -> String {
    format!("{scope_type}:{scope_id}")
}

/// Money spent: reported by an agent through the API, or a run's settled usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostEvent {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    pub heartbeat_run_id: Option<String>,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: u64,
    pub occurred_at: Timestamp,
    pub created_at: Timestamp,
    /// `agent` (posted through the API) or `run` (a run's usage, settled at its end).
    pub source: String,
    /// The project of `issue_id` when the cost was recorded: project budgets and cost
    /// summaries count it there, whatever the issue's project becomes later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Who billed it, when the reporter said (Paperclip's `biller`; the provider otherwise).
    /// Absent from rows written before it, as `billing_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub biller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_type: Option<BillingType>,
}

impl CostEvent {
    /// Paperclip's `biller`: the one reported, else the provider.
    pub fn biller(&self) -> &str {
        self.biller.as_deref().unwrap_or(&self.provider)
    }

    /// Paperclip's `billingType`: the one reported, else `unknown`.
    pub fn billing_type(&self) -> BillingType {
        self.billing_type.unwrap_or(BillingType::Unknown)
    }
}

/// A budget threshold crossed: `soft` at the warning, `hard` at the limit (the scope pauses).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetIncident {
    pub id: String,
    pub company_id: String,
    pub policy_id: String,
    pub kind: IncidentKind,
    pub status: IncidentStatus,
    pub window_key: i64,
    /// The policy's amount and the observed spend when it opened.
    pub amount: u64,
    pub observed: u64,
    pub message: String,
    pub created_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
    pub resolution: Option<IncidentAction>,
    /// Kind `wake_loop` only (the loop breaker's, `rules/loop_breaker.rs`): the loop, its
    /// agents, issues and wakes. Absent from budget incidents, whose JSON is Paperclip's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_loop: Option<crate::loop_breaker::WakeLoop>,
}
