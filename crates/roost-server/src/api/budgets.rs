//! Budgets and costs: policies, cost events, incidents and their resolution, the overview an
//! operator reads and the spend summary (docs/budgets.md).

use std::collections::BTreeMap;

use roost_core::command::NewCostEvent;
use roost_core::{
    BudgetIncident, BudgetPolicy, BudgetScopeType, BudgetWindow, Command, CostEvent,
    IncidentAction, IncidentStatus, Outcome, State, Timestamp,
};
use serde::Deserialize;

pub use roost_core::views::{AgentSpend, BudgetOverview, CostSummary, PolicyStatus, ProjectSpend};

use super::{expect_outcome, new_id, now, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// Body of `POST /api/companies/{cid}/budgets/policies` (Paperclip's fields).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBudgetPolicy {
    pub scope_type: BudgetScopeType,
    pub scope_id: Option<String>,
    /// Paperclip's defaults: `lifetime` for a project, `calendar_month_utc` otherwise.
    pub window_kind: Option<BudgetWindow>,
    /// Cents.
    pub amount: u64,
    #[serde(default = "default_warn")]
    pub warn_percent: u8,
    #[serde(default = "default_true")]
    pub hard_stop_enabled: bool,
    /// Accepted for Paperclip compatibility; Roost meters billed cents only.
    pub metric: Option<String>,
    pub notify_enabled: Option<bool>,
    pub is_active: Option<bool>,
}

fn default_warn() -> u8 {
    80
}
fn default_true() -> bool {
    true
}

/// Body of `POST /api/companies/{cid}/cost-events` (Paperclip's fields).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CostEventRequest {
    /// Defaults to the calling agent.
    pub agent_id: Option<String>,
    pub issue_id: Option<String>,
    pub heartbeat_run_id: Option<String>,
    pub provider: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    pub cost_cents: u64,
    pub occurred_at: Option<String>,
    // Accepted for Paperclip compatibility, not used.
    pub project_id: Option<String>,
    pub goal_id: Option<String>,
    pub billing_code: Option<String>,
    /// Paperclip's `reported`/`unpriced`: accepted, not used.
    pub cost_status: Option<String>,
    /// Kept on the event; the cost breakdowns group by them (`rest/costs.rs`).
    pub biller: Option<String>,
    pub billing_type: Option<roost_core::BillingType>,
}

/// The monthly budget of a scope: the strictest amount of its calendar-month policies, 0 when
/// it has none (Paperclip's `budgetMonthlyCents`).
pub fn monthly_budget_cents(state: &State, scope_type: BudgetScopeType, scope_id: &str) -> u64 {
    state
        .budget_policies
        .values()
        .filter(|p| {
            p.scope_type == scope_type
                && p.scope_id == scope_id
                && p.window_kind == BudgetWindow::CalendarMonthUtc
        })
        .map(|p| p.amount)
        .min()
        .unwrap_or(0)
}

/// `spent` as a percentage of `budget`, two decimals; 0 without a budget.
pub fn utilization_percent(spent: u64, budget: u64) -> f64 {
    if budget == 0 {
        return 0.0;
    }
    (spent as f64 * 10_000.0 / budget as f64).round() / 100.0
}

/// The resolutions an operator may choose; Paperclip's name for raising is an alias.
pub fn parse_action(action: &str) -> Result<IncidentAction, ApiError> {
    match action {
        "raise_budget_and_resume" => Ok(IncidentAction::RaiseAndResume),
        other => other.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "unknown action `{other}`: use raise_and_resume, keep_paused or dismiss (budget incidents), resume, keep_paused or dismiss (wake_loop incidents)"
            ))
        }),
    }
}

impl Api {
    pub async fn set_budget_policy(
        &self,
        caller: &Caller,
        company_id: &str,
        body: NewBudgetPolicy,
    ) -> Result<BudgetPolicy, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        let scope_id = match body.scope_type {
            BudgetScopeType::Company => body.scope_id.unwrap_or_else(|| company.id.clone()),
            _ => body
                .scope_id
                .ok_or_else(|| ApiError::bad_request("scopeId is required"))?,
        };
        let command = Command::SetBudgetPolicy {
            id: new_id(),
            company_id: company.id,
            scope_type: body.scope_type,
            scope_id,
            window_kind: body.window_kind.unwrap_or(match body.scope_type {
                BudgetScopeType::Project => BudgetWindow::Lifetime,
                _ => BudgetWindow::CalendarMonthUtc,
            }),
            amount: body.amount,
            warn_percent: body.warn_percent,
            hard_stop_enabled: body.hard_stop_enabled,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::BudgetPolicy(p) => p)
    }

    pub async fn record_cost_event(
        &self,
        caller: &Caller,
        company_id: &str,
        body: CostEventRequest,
    ) -> Result<CostEvent, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        let agent_id = match (body.agent_id, caller.agent_id()) {
            (Some(a), _) => a,
            (None, Some(me)) => me.to_string(),
            (None, None) => return Err(ApiError::bad_request("agentId is required")),
        };
        let occurred_at = match body.occurred_at.as_deref() {
            Some(t) => Some(
                Timestamp::parse_rfc3339(t)
                    .ok_or_else(|| ApiError::bad_request("occurredAt must be an RFC 3339 time"))?,
            ),
            None => None,
        };
        let heartbeat_run_id = body.heartbeat_run_id.or(caller.actor.run_id.clone());
        let event = NewCostEvent {
            id: new_id(),
            company_id: company.id,
            agent_id,
            issue_id: body.issue_id,
            heartbeat_run_id,
            provider: body.provider,
            model: if body.model.is_empty() {
                "unknown".into()
            } else {
                body.model
            },
            input_tokens: body.input_tokens,
            cached_input_tokens: body.cached_input_tokens,
            output_tokens: body.output_tokens,
            cost_cents: body.cost_cents,
            occurred_at,
            biller: body.biller,
            billing_type: body.billing_type,
        };
        let command = Command::RecordCostEvent { event };
        expect_outcome!(self.submit(caller, command).await?, Outcome::CostEvent(e) => e)
    }

    pub async fn resolve_budget_incident(
        &self,
        caller: &Caller,
        company_id: &str,
        incident_id: &str,
        action: IncidentAction,
        amount: Option<u64>,
    ) -> Result<BudgetIncident, ApiError> {
        // Administrators only: an agent learns nothing, not even whether the incident exists.
        caller.require_admin()?;
        self.get_company(caller, company_id).await?;
        let belongs = self.reader().read(|s| {
            s.budget_incidents
                .get(incident_id)
                .is_some_and(|i| i.company_id == company_id)
        });
        if !belongs {
            return Err(ApiError::not_found("budget incident", incident_id));
        }
        let command = Command::ResolveBudgetIncident {
            incident_id: incident_id.into(),
            action,
            amount,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::BudgetIncident(i) => i)
    }

    pub async fn budget_overview(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<BudgetOverview, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        let at = now();
        Ok(self.reader().read(|s| {
            let policies = s
                .budget_policies
                .values()
                .filter(|p| p.company_id == company.id)
                .map(|p| {
                    let (spent, reserved) = (s.spent(p, at), s.reserved(p, None));
                    PolicyStatus {
                        policy: p.clone(),
                        spent,
                        reserved,
                        remaining: p.amount.saturating_sub(spent + reserved),
                    }
                })
                .collect();
            let mut incidents: Vec<BudgetIncident> = s
                .budget_incidents
                .values()
                .filter(|i| i.company_id == company.id)
                .cloned()
                .collect();
            // Open ones first, then newest.
            incidents.sort_by_key(|i| {
                (
                    i.status != IncidentStatus::Open,
                    std::cmp::Reverse(i.created_at),
                )
            });
            incidents.truncate(100);
            let paused_agent_ids = s
                .agents
                .values()
                .filter(|a| {
                    a.company_id == company.id
                        && a.pause_reason == Some(roost_core::PauseReason::Budget)
                })
                .map(|a| a.id.clone())
                .collect();
            BudgetOverview {
                policies,
                incidents,
                paused_agent_ids,
            }
        }))
    }

    /// The company's spend. `spendCents` is this month's, or what was spent within `spent_within`
    /// (both ends included) when the caller names a range, as Paperclip's `from`/`to`.
    pub async fn cost_summary(
        &self,
        caller: &Caller,
        company_id: &str,
        spent_within: Option<(Timestamp, Timestamp)>,
    ) -> Result<CostSummary, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        let month = BudgetWindow::CalendarMonthUtc.key(now());
        Ok(self.reader().read(|s| {
            let mut by_agent: BTreeMap<String, AgentSpend> = BTreeMap::new();
            let mut by_project: BTreeMap<String, ProjectSpend> = BTreeMap::new();
            let mut summary = CostSummary {
                month_cents: 0,
                lifetime_cents: 0,
                reserved_cents: s
                    .live_runs()
                    .filter(|r| r.company_id == company.id)
                    .map(|r| r.reserved_cents)
                    .sum(),
                by_agent: Vec::new(),
                by_project: Vec::new(),
                spend_cents: 0,
                budget_cents: monthly_budget_cents(s, BudgetScopeType::Company, &company.id),
                utilization_percent: 0.0,
            };
            for e in s
                .cost_events
                .values()
                .filter(|e| e.company_id == company.id)
            {
                let this_month = BudgetWindow::CalendarMonthUtc.key(e.occurred_at) == month;
                let counted = match spent_within {
                    Some((from, to)) => (from..=to).contains(&e.occurred_at),
                    None => this_month,
                };
                if counted {
                    summary.spend_cents = summary.spend_cents.saturating_add(e.cost_cents);
                }
                let entry = by_agent
                    .entry(e.agent_id.clone())
                    .or_insert_with(|| AgentSpend {
                        agent_id: e.agent_id.clone(),
                        name: s
                            .agents
                            .get(&e.agent_id)
                            .map(|a| a.name.clone())
                            .unwrap_or_default(),
                        month_cents: 0,
                        lifetime_cents: 0,
                        input_tokens: 0,
                        output_tokens: 0,
                    });
                // Saturating: an agent may report any amount, and a sum must not wrap.
                entry.lifetime_cents = entry.lifetime_cents.saturating_add(e.cost_cents);
                entry.input_tokens = entry.input_tokens.saturating_add(e.input_tokens);
                entry.output_tokens = entry.output_tokens.saturating_add(e.output_tokens);
                summary.lifetime_cents = summary.lifetime_cents.saturating_add(e.cost_cents);
                if this_month {
                    entry.month_cents = entry.month_cents.saturating_add(e.cost_cents);
                    summary.month_cents = summary.month_cents.saturating_add(e.cost_cents);
                }
                if let Some(project) = &e.project_id {
                    let entry = by_project
                        .entry(project.clone())
                        .or_insert_with(|| ProjectSpend {
                            project_id: project.clone(),
                            name: s
                                .projects
                                .get(project)
                                .map(|p| p.name.clone())
                                .unwrap_or_default(),
                            month_cents: 0,
                            lifetime_cents: 0,
                        });
                    entry.lifetime_cents = entry.lifetime_cents.saturating_add(e.cost_cents);
                    if this_month {
                        entry.month_cents = entry.month_cents.saturating_add(e.cost_cents);
                    }
                }
            }
            summary.by_agent = by_agent.into_values().collect();
            summary.by_project = by_project.into_values().collect();
            summary
                .by_project
                .sort_by_key(|p| std::cmp::Reverse(p.lifetime_cents));
            summary
                .by_agent
                .sort_by_key(|a| std::cmp::Reverse(a.lifetime_cents));
            summary.utilization_percent =
                utilization_percent(summary.spend_cents, summary.budget_cents);
            summary
        }))
    }
}
