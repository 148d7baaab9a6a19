//! What Paperclip's request schemas carry that Roost reads differently: `runtimeConfig`'s
//! heartbeat and `budgetMonthlyCents`.

use roost_core::loop_breaker::LoopPolicy;
use roost_core::{
    Agent, AgentPermissions, BudgetScopeType, BudgetWindow, Company, HeartbeatPolicy, State,
};
use serde::Serialize;
use serde_json::Value;

use crate::api::{monthly_budget_cents, now, Api, NewBudgetPolicy};
use crate::error::ApiError;

/// `base` with the fields `runtimeConfig.heartbeat` sets. Paperclip's heartbeat object has
/// fields Roost has no use for (`cooldownSec`, ...), accepted and ignored; a known field of the
/// wrong type is a 400 naming it. `None` when `runtimeConfig` has no heartbeat.
pub fn runtime_heartbeat(
    base: &HeartbeatPolicy,
    runtime_config: &Value,
) -> Result<Option<HeartbeatPolicy>, ApiError> {
    let config = match runtime_config {
        Value::Null => return Ok(None),
        Value::Object(config) => config,
        _ => return Err(ApiError::bad_request("runtimeConfig must be a JSON object")),
    };
    let heartbeat = match config.get("heartbeat") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(h)) => h,
        Some(_) => {
            return Err(ApiError::bad_request(
                "runtimeConfig.heartbeat must be a JSON object",
            ))
        }
    };
    let mut policy = base.clone();
    for (name, value) in heartbeat {
        let wrong = |kind: &str| {
            ApiError::bad_request(format!("runtimeConfig.heartbeat.{name} must be {kind}"))
        };
        let flag = || value.as_bool().ok_or_else(|| wrong("true or false"));
        let count = || value.as_u64().ok_or_else(|| wrong("a whole number >= 0"));
        match name.as_str() {
            "enabled" => policy.enabled = flag()?,
            "wakeOnDemand" => policy.wake_on_demand = flag()?,
            "skipWhenIdle" => policy.skip_when_idle = flag()?,
            "intervalSec" => policy.interval_sec = count()?,
            "runReserveCents" => policy.run_reserve_cents = count()?,
            "maxConcurrentRuns" => {
                policy.max_concurrent_runs = u32::try_from(count()?)
                    .map_err(|_| wrong("a whole number between 1 and 50"))?;
            }
            // `null` lifts the cap; 0 is a hard stop.
            "maxDailyRuns" if value.is_null() => policy.max_daily_runs = None,
            "maxDailyRuns" => {
                policy.max_daily_runs = Some(
                    u32::try_from(count()?)
                        .map_err(|_| wrong("a whole number of runs, at most 4294967295"))?,
                );
            }
            "maxDailyCostCents" if value.is_null() => policy.max_daily_cost_cents = None,
            "maxDailyCostCents" => policy.max_daily_cost_cents = Some(count()?),
            _ => {}
        }
    }
    Ok(Some(policy))
}

/// The heartbeat policy of a request that may carry both Roost's `heartbeat` and Paperclip's
/// `runtimeConfig.heartbeat`: Roost's wins when both are given.
pub fn heartbeat_of(
    base: &HeartbeatPolicy,
    heartbeat: Option<HeartbeatPolicy>,
    runtime_config: Option<&Value>,
) -> Result<Option<HeartbeatPolicy>, ApiError> {
    if heartbeat.is_some() {
        return Ok(heartbeat);
    }
    match runtime_config {
        Some(config) => runtime_heartbeat(base, config),
        None => Ok(None),
    }
}

/// Paperclip's `budgetMonthlyCents` as a Roost budget policy: a hard monthly limit of the
/// scope. `0` (Paperclip's default) means no budget and sets nothing.
pub fn monthly_budget(
    scope_type: BudgetScopeType,
    scope_id: &str,
    cents: Option<u64>,
) -> Option<NewBudgetPolicy> {
    let amount = cents.filter(|c| *c > 0)?;
    Some(NewBudgetPolicy {
        scope_type,
        scope_id: Some(scope_id.to_string()),
        window_kind: Some(BudgetWindow::CalendarMonthUtc),
        amount,
        warn_percent: 80,
        hard_stop_enabled: true,
        metric: None,
        notify_enabled: None,
        is_active: None,
    })
}

/// An agent as Paperclip's clients read it: Roost's row plus `budgetMonthlyCents` (its
/// monthly budget policy, 0 when none), `spentMonthlyCents` (this UTC month's cost events),
/// `reportsTo` (its manager or `null`) and `chainOfCommand` (its managers from the direct one
/// up, each `{id, name, role, title}`: `roost-core/src/rules/org.rs`).
/// Paperclip's skill reads the last three from `GET /api/agents/me`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRow {
    #[serde(flatten)]
    agent: Agent,
    budget_monthly_cents: u64,
    spent_monthly_cents: u64,
    reports_to: Option<String>,
    chain_of_command: Vec<Value>,
    /// The loop breaker's thresholds in force: the agent's over the company's over the defaults.
    loop_breaker_effective: LoopPolicy,
    /// Paperclip always shows an agent's `permissions`; the row leaves them out while they
    /// grant nothing, so this fills in the default then (and only then: no key twice).
    #[serde(skip_serializing_if = "Option::is_none")]
    permissions: Option<AgentPermissions>,
}

/// A company as Paperclip's clients read it: Roost's row plus `budgetMonthlyCents` and
/// `spentMonthlyCents` (this UTC month's cost events).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompanyRow {
    #[serde(flatten)]
    company: Company,
    budget_monthly_cents: u64,
    spent_monthly_cents: u64,
    /// The loop breaker's thresholds its agents inherit: the company's over the defaults.
    loop_breaker_effective: LoopPolicy,
    /// How long an issue may stay blocked before its assignee's manager is woken (0: off),
    /// in seconds and in whole minutes (`roost-core/src/rules/org.rs`).
    escalate_blocked_after_secs: u32,
    escalate_blocked_after_minutes: u32,
    /// How long a stranded issue stays quiet before its agent is woken again (0: off), in
    /// seconds (`roost-core/src/rules/recovery.rs`).
    recover_stranded_after_secs: u32,
}

/// Cents a scope spent this UTC month.
fn spent_this_month(state: &State, scope_type: BudgetScopeType, scope_id: &str) -> u64 {
    state.spent_in(scope_type, scope_id, BudgetWindow::CalendarMonthUtc, now())
}

fn agent_row_in(s: &State, mut agent: Agent) -> AgentRow {
    AgentRow {
        budget_monthly_cents: monthly_budget_cents(s, BudgetScopeType::Agent, &agent.id),
        spent_monthly_cents: spent_this_month(s, BudgetScopeType::Agent, &agent.id),
        reports_to: agent.reports_to.take(),
        chain_of_command: roost_core::org::chain_of_command(s, &agent.id)
            .into_iter()
            .map(|m| serde_json::json!({ "id": m.id, "name": m.name, "role": m.role, "title": m.title }))
            .collect(),
        loop_breaker_effective: LoopPolicy::effective(
            s.companies.get(&agent.company_id).map(|c| &c.loop_breaker),
            &agent.loop_breaker,
        ),
        permissions: agent.permissions.grants_nothing().then_some(agent.permissions),
        agent,
    }
}

pub fn agent_rows(api: &Api, agents: Vec<Agent>) -> Vec<AgentRow> {
    api.reader()
        .read(|s| agents.into_iter().map(|a| agent_row_in(s, a)).collect())
}

pub fn agent_row(api: &Api, agent: Agent) -> AgentRow {
    api.reader().read(|s| agent_row_in(s, agent))
}

fn company_row_in(s: &State, mut company: Company) -> CompanyRow {
    // Shown by the row's own fields; the company's is left out of the flattened row.
    let escalate_secs = std::mem::replace(
        &mut company.escalate_blocked_after_secs,
        roost_core::org::DEFAULT_ESCALATE_SECS,
    );
    let recover_secs = std::mem::take(&mut company.recover_stranded_after_secs);
    CompanyRow {
        escalate_blocked_after_secs: escalate_secs,
        recover_stranded_after_secs: recover_secs,
        escalate_blocked_after_minutes: escalate_secs / 60,
        budget_monthly_cents: monthly_budget_cents(s, BudgetScopeType::Company, &company.id),
        spent_monthly_cents: spent_this_month(s, BudgetScopeType::Company, &company.id),
        loop_breaker_effective: LoopPolicy::effective(
            Some(&company.loop_breaker),
            &Default::default(),
        ),
        company,
    }
}

pub fn company_rows(api: &Api, companies: Vec<Company>) -> Vec<CompanyRow> {
    api.reader().read(|s| {
        companies
            .into_iter()
            .map(|c| company_row_in(s, c))
            .collect()
    })
}

pub fn company_row(api: &Api, company: Company) -> CompanyRow {
    api.reader().read(|s| company_row_in(s, company))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runtime_config_heartbeat_sets_the_policy_and_ignores_paperclip_extras() {
        let base = HeartbeatPolicy::default();
        let config = json!({"heartbeat": {"enabled": true, "intervalSec": 60,
            "maxConcurrentRuns": 3, "cooldownSec": 10}, "debug": {}});
        let policy = runtime_heartbeat(&base, &config)
            .expect("valid")
            .expect("set");
        assert!(policy.enabled);
        assert_eq!(policy.interval_sec, 60);
        assert_eq!(policy.max_concurrent_runs, 3);
        assert_eq!(policy.wake_on_demand, base.wake_on_demand);
        assert!(runtime_heartbeat(&base, &json!({}))
            .expect("valid")
            .is_none());
        let err = runtime_heartbeat(&base, &json!({"heartbeat": {"enabled": "yes"}}));
        assert!(err.is_err());
        assert!(runtime_heartbeat(&base, &json!([1])).is_err());
        let capped = json!({"heartbeat": {"maxDailyRuns": 0, "maxDailyCostCents": 250}});
        let policy = runtime_heartbeat(&base, &capped)
            .expect("valid")
            .expect("set");
        assert_eq!(
            (policy.max_daily_runs, policy.max_daily_cost_cents),
            (Some(0), Some(250))
        );
        let lifted = runtime_heartbeat(&policy, &json!({"heartbeat": {"maxDailyRuns": null}}))
            .expect("valid")
            .expect("set");
        assert_eq!(
            (lifted.max_daily_runs, lifted.max_daily_cost_cents),
            (None, Some(250))
        );
        let err = runtime_heartbeat(&base, &json!({"heartbeat": {"maxDailyRuns": 1e10}}));
        assert!(err.is_err());
    }

    #[test]
    fn zero_monthly_budget_sets_nothing() {
        assert!(monthly_budget(BudgetScopeType::Agent, "a", Some(0)).is_none());
        assert!(monthly_budget(BudgetScopeType::Agent, "a", None).is_none());
        let policy = monthly_budget(BudgetScopeType::Agent, "a", Some(500)).expect("policy");
        assert_eq!(policy.amount, 500);
        assert!(policy.hard_stop_enabled);
    }
}
