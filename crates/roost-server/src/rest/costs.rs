//! Paperclip's cost breakdowns (`GET /api/companies/{cid}/costs/by-agent`, `by-project`,
//! `by-agent-model`, `by-provider`, `by-biller`, `window-spend`): a company's cost events grouped
//! as its CLI and web UI read them, within `from`/`to` when given (all but `window-spend`), and
//! a recorded cost event as Paperclip answers it.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, State};
use axum::Json;
use roost_core::{BillingType, BudgetWindow, CostEvent, State as Roost, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::extract::QueryParams;
use crate::api::{now, Api};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Paperclip's `from` and `to`, both ends included: an RFC 3339 time, or a date (its midnight,
/// UTC, so a date `to` ends at that day's start), as JavaScript's `Date` reads them. Other
/// query parameters are ignored, as there.
#[derive(Deserialize)]
pub struct Range {
    from: Option<String>,
    to: Option<String>,
}

impl Range {
    fn bounds(&self) -> Result<(Timestamp, Timestamp)> {
        Ok((
            bound("from", &self.from, i64::MIN)?,
            bound("to", &self.to, i64::MAX)?,
        ))
    }

    /// The bounds, if the caller named either end.
    pub fn given(&self) -> Result<Option<(Timestamp, Timestamp)>> {
        let named = |end: &Option<String>| end.as_deref().is_some_and(|t| !t.is_empty());
        if named(&self.from) || named(&self.to) {
            self.bounds().map(Some)
        } else {
            Ok(None)
        }
    }
}

fn bound(name: &str, value: &Option<String>, open: i64) -> Result<Timestamp> {
    // An empty value is no bound, as in Paperclip.
    let Some(text) = value.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(Timestamp(open));
    };
    let is_date = text.len() == 10 && text.as_bytes()[4] == b'-' && text.as_bytes()[7] == b'-';
    let parsed = if is_date {
        Timestamp::parse_rfc3339(&format!("{text}T00:00:00Z"))
    } else {
        Timestamp::parse_rfc3339(text)
    };
    parsed.ok_or_else(|| {
        ApiError::bad_request(format!(
            "{name} must be a date such as 2026-11-01 or an RFC 3339 time such as \
             2026-11-01T00:00:00Z, not {text:?}"
        ))
    })
}

/// A cost event as Paperclip answers it: `biller` (the provider's when none was reported) and
/// `billingType` (`unknown`) are always there. Filled in only where the row has none, so no
/// key is written twice.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostEventRow {
    #[serde(flatten)]
    event: CostEvent,
    #[serde(skip_serializing_if = "Option::is_none")]
    biller: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    billing_type: Option<BillingType>,
}

impl From<CostEvent> for CostEventRow {
    fn from(event: CostEvent) -> Self {
        CostEventRow {
            biller: event.biller.is_none().then(|| event.provider.clone()),
            billing_type: event.billing_type.is_none().then_some(BillingType::Unknown),
            event,
        }
    }
}

/// What a group of events adds up to, in Paperclip's fields.
#[derive(Default)]
struct Sums {
    cost_cents: u64,
    /// This UTC month's cents (Roost's; the dashboard's column).
    month_cents: u64,
    input_tokens: u64,
    cached_input_tokens: u64,
    output_tokens: u64,
    api_runs: BTreeSet<String>,
    subscription_runs: BTreeSet<String>,
    subscription_input_tokens: u64,
    subscription_cached_input_tokens: u64,
    subscription_output_tokens: u64,
    providers: BTreeSet<String>,
    models: BTreeSet<String>,
    billers: BTreeSet<String>,
}

impl Sums {
    fn add(&mut self, e: &CostEvent, month: i64) {
        // Saturating: an agent may report any amount, and a sum must not wrap.
        self.cost_cents = self.cost_cents.saturating_add(e.cost_cents);
        if BudgetWindow::CalendarMonthUtc.key(e.occurred_at) == month {
            self.month_cents = self.month_cents.saturating_add(e.cost_cents);
        }
        self.input_tokens = self.input_tokens.saturating_add(e.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(e.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(e.output_tokens);
        let subscription = matches!(
            e.billing_type(),
            BillingType::SubscriptionIncluded | BillingType::SubscriptionOverage
        );
        if subscription {
            self.subscription_input_tokens = self
                .subscription_input_tokens
                .saturating_add(e.input_tokens);
            self.subscription_cached_input_tokens = self
                .subscription_cached_input_tokens
                .saturating_add(e.cached_input_tokens);
            self.subscription_output_tokens = self
                .subscription_output_tokens
                .saturating_add(e.output_tokens);
        }
        if let Some(run) = &e.heartbeat_run_id {
            if subscription {
                self.subscription_runs.insert(run.clone());
            } else if e.billing_type() == BillingType::MeteredApi {
                self.api_runs.insert(run.clone());
            }
        }
        self.providers.insert(e.provider.clone());
        self.models.insert(e.model.clone());
        self.billers.insert(e.biller().to_string());
    }

    fn tokens(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("costCents".into(), self.cost_cents.into());
        m.insert("inputTokens".into(), self.input_tokens.into());
        m.insert("cachedInputTokens".into(), self.cached_input_tokens.into());
        m.insert("outputTokens".into(), self.output_tokens.into());
        m
    }

    fn with_runs(&self) -> Map<String, Value> {
        let mut m = self.tokens();
        m.insert("apiRunCount".into(), self.api_runs.len().into());
        m.insert(
            "subscriptionRunCount".into(),
            self.subscription_runs.len().into(),
        );
        m.insert(
            "subscriptionCachedInputTokens".into(),
            self.subscription_cached_input_tokens.into(),
        );
        m.insert(
            "subscriptionInputTokens".into(),
            self.subscription_input_tokens.into(),
        );
        m.insert(
            "subscriptionOutputTokens".into(),
            self.subscription_output_tokens.into(),
        );
        m
    }
}

/// Calls `each` with the state and every cost event of company `cid` (after its read barrier),
/// all under one read of the state.
async fn each_event(
    api: &Api,
    caller: &Caller,
    cid: &str,
    mut each: impl FnMut(&Roost, &CostEvent),
) -> Result<()> {
    let company = api.get_company(caller, cid).await?;
    api.reader().read(|s| {
        for e in s
            .cost_events
            .values()
            .filter(|e| e.company_id == company.id)
        {
            each(s, e);
        }
    });
    Ok(())
}

/// The company's events within `[from, to]` grouped by `key` (given the state, for names).
async fn grouped<K: Ord>(
    api: &Api,
    caller: &Caller,
    cid: &str,
    (from, to): (Timestamp, Timestamp),
    key: impl Fn(&Roost, &CostEvent) -> K,
) -> Result<BTreeMap<K, Sums>> {
    let month = BudgetWindow::CalendarMonthUtc.key(now());
    let mut groups: BTreeMap<K, Sums> = BTreeMap::new();
    each_event(api, caller, cid, |s, e| {
        if (from..=to).contains(&e.occurred_at) {
            groups.entry(key(s, e)).or_default().add(e, month);
        }
    })
    .await?;
    Ok(groups)
}

/// Rows with the most spent first, as Paperclip orders them.
fn by_cost(mut rows: Vec<(u64, Value)>) -> Vec<Value> {
    rows.sort_by_key(|(cents, _)| std::cmp::Reverse(*cents));
    rows.into_iter().map(|(_, row)| row).collect()
}

/// How a breakdown's rows are ordered.
enum Order {
    MostSpentFirst,
    /// By the group's key (Paperclip's `by-agent-model`).
    ByKey,
}

/// The company's events within `range` grouped by `key`, each group a row by `row` (`None`
/// leaves it out).
async fn breakdown<K: Ord>(
    (api, caller, cid, range): (&Api, &Caller, &str, &Range),
    order: Order,
    key: impl Fn(&Roost, &CostEvent) -> K,
    row: impl Fn(K, &Sums) -> Option<Map<String, Value>>,
) -> Result<Json<Vec<Value>>> {
    let groups = grouped(api, caller, cid, range.bounds()?, key).await?;
    let rows = groups.into_iter().filter_map(|(k, sums)| {
        let cents = sums.cost_cents;
        row(k, &sums).map(|r| (cents, Value::Object(r)))
    });
    Ok(Json(match order {
        Order::MostSpentFirst => by_cost(rows.collect()),
        Order::ByKey => rows.map(|(_, r)| r).collect(),
    }))
}

/// `GET /api/companies/{cid}/costs/by-agent`: per agent, with Roost's `monthCents`.
pub async fn by_agent(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let key = |s: &Roost, e: &CostEvent| {
        let agent = s.agents.get(&e.agent_id);
        let (name, status) = (agent.map(|a| a.name.clone()), agent.map(|a| a.status));
        (e.agent_id.clone(), name, status)
    };
    breakdown(
        (&api, &caller, &cid, &range),
        Order::MostSpentFirst,
        key,
        |(id, name, status), sums| {
            let mut row = sums.with_runs();
            row.insert("agentId".into(), id.into());
            row.insert("agentName".into(), json!(name));
            row.insert("agentStatus".into(), json!(status));
            row.insert("monthCents".into(), sums.month_cents.into());
            Some(row)
        },
    )
    .await
}

/// `GET /api/companies/{cid}/costs/by-project`: per project the costs were recorded under (the
/// issue's project then), with Roost's `monthCents`.
pub async fn by_project(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let key = |s: &Roost, e: &CostEvent| {
        let project = e.project_id.as_ref();
        let name = project
            .and_then(|p| s.projects.get(p))
            .map(|p| p.name.clone());
        (project.cloned(), name)
    };
    breakdown(
        (&api, &caller, &cid, &range),
        Order::MostSpentFirst,
        key,
        |(project, name), sums| {
            let mut row = sums.tokens();
            // A project deleted since is left out, as Paperclip's join on projects does.
            row.insert("projectId".into(), project?.into());
            row.insert("projectName".into(), name?.into());
            row.insert("monthCents".into(), sums.month_cents.into());
            Some(row)
        },
    )
    .await
}

/// `GET /api/companies/{cid}/costs/by-provider`: per provider, biller, billing type and model.
pub async fn by_provider(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let key = |_: &Roost, e: &CostEvent| {
        let biller = e.biller().to_string();
        (
            e.provider.clone(),
            biller,
            e.billing_type(),
            e.model.clone(),
        )
    };
    breakdown(
        (&api, &caller, &cid, &range),
        Order::MostSpentFirst,
        key,
        |(provider, biller, billing, model), sums| {
            let mut row = sums.with_runs();
            row.insert("provider".into(), provider.into());
            row.insert("biller".into(), biller.into());
            row.insert("billingType".into(), json!(billing));
            row.insert("model".into(), model.into());
            Some(row)
        },
    )
    .await
}

/// `GET /api/companies/{cid}/costs/by-biller`: per biller, with how many providers and models.
pub async fn by_biller(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let key = |_: &Roost, e: &CostEvent| e.biller().to_string();
    breakdown(
        (&api, &caller, &cid, &range),
        Order::MostSpentFirst,
        key,
        |biller, sums| {
            let mut row = sums.with_runs();
            row.insert("biller".into(), biller.into());
            row.insert("providerCount".into(), sums.providers.len().into());
            row.insert("modelCount".into(), sums.models.len().into());
            Some(row)
        },
    )
    .await
}

/// `GET /api/companies/{cid}/costs/by-agent-model`: per agent, provider, biller, billing type
/// and model, ordered by provider, biller, billing type and model.
pub async fn by_agent_model(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let key = |s: &Roost, e: &CostEvent| {
        let billing = e.billing_type().to_string();
        let name = s.agents.get(&e.agent_id).map(|a| a.name.clone());
        let agent = (e.agent_id.clone(), name);
        (
            e.provider.clone(),
            e.biller().to_string(),
            billing,
            e.model.clone(),
            agent,
        )
    };
    breakdown(
        (&api, &caller, &cid, &range),
        Order::ByKey,
        key,
        |(provider, biller, billing, model, (agent, name)), sums| {
            let mut row = sums.tokens();
            row.insert("agentId".into(), agent.into());
            row.insert("agentName".into(), json!(name));
            row.insert("provider".into(), provider.into());
            row.insert("biller".into(), biller.into());
            row.insert("billingType".into(), billing.into());
            row.insert("model".into(), model.into());
            Some(row)
        },
    )
    .await
}

/// `GET /api/companies/{cid}/costs/window-spend`: per provider, what the last 5 hours, 24 hours
/// and 7 days spent (`biller` is `mixed` when more than one billed it), from one read.
pub async fn window_spend(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Value>>> {
    const WINDOWS: [(&str, i64); 3] = [("5h", 5), ("24h", 24), ("7d", 168)];
    let end = now();
    let month = BudgetWindow::CalendarMonthUtc.key(end);
    let mut windows: [BTreeMap<String, Sums>; 3] = Default::default();
    each_event(&api, &caller, &cid, |_, e| {
        for ((_, hours), groups) in WINDOWS.iter().zip(windows.iter_mut()) {
            if e.occurred_at.0 >= end.0.saturating_sub(hours * 3_600_000) {
                groups.entry(e.provider.clone()).or_default().add(e, month);
            }
        }
    })
    .await?;
    let mut rows = Vec::new();
    for ((label, hours), groups) in WINDOWS.into_iter().zip(windows) {
        let window = groups.into_iter().map(|(provider, sums)| {
            let mut row = sums.tokens();
            let biller = match sums.billers.len() {
                1 => sums.billers.iter().next().cloned().unwrap_or_default(),
                _ => "mixed".to_string(),
            };
            row.insert("provider".into(), provider.into());
            row.insert("biller".into(), biller.into());
            row.insert("window".into(), label.into());
            row.insert("windowHours".into(), hours.into());
            (sums.cost_cents, Value::Object(row))
        });
        rows.extend(by_cost(window.collect()));
    }
    Ok(Json(rows))
}
