//! Paperclip's cost breakdowns (`GET /api/companies/{cid}/costs/by-agent-model`, `by-provider`,
//! `by-biller`, `window-spend`): a company's cost events grouped as its CLI and web UI read
//! them, the first three within `from`/`to` when given.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, State};
use axum::Json;
use roost_core::{BillingType, CostEvent, Timestamp};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::extract::QueryParams;
use crate::api::{now, Api};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// Paperclip's `from` and `to` (RFC 3339, both ends included).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    from: Option<String>,
    to: Option<String>,
}

impl Range {
    fn bounds(&self) -> Result<(Timestamp, Timestamp)> {
        let parse = |name: &str, value: &Option<String>, open: i64| match value {
            None => Ok(Timestamp(open)),
            Some(text) => Timestamp::parse_rfc3339(text).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "{name} must be an RFC 3339 time such as 2026-11-01T00:00:00Z, not {text:?}"
                ))
            }),
        };
        Ok((
            parse("from", &self.from, i64::MIN)?,
            parse("to", &self.to, i64::MAX)?,
        ))
    }
}

/// What a group of events adds up to, in Paperclip's fields.
#[derive(Default)]
struct Sums {
    cost_cents: u64,
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
    fn add(&mut self, e: &CostEvent) {
        // Saturating: an agent may report any amount, and a sum must not wrap.
        self.cost_cents = self.cost_cents.saturating_add(e.cost_cents);
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

/// The company's events within `[from, to]` grouped by `key`, read under one state lock.
async fn grouped<K: Ord>(
    api: &Api,
    caller: &Caller,
    cid: &str,
    (from, to): (Timestamp, Timestamp),
    key: impl Fn(&CostEvent) -> K,
) -> Result<BTreeMap<K, Sums>> {
    let company = api.get_company(caller, cid).await?;
    Ok(api.reader().read(|s| {
        let mut groups: BTreeMap<K, Sums> = BTreeMap::new();
        for e in s
            .cost_events
            .values()
            .filter(|e| e.company_id == company.id && (from..=to).contains(&e.occurred_at))
        {
            groups.entry(key(e)).or_default().add(e);
        }
        groups
    }))
}

/// Rows with the most spent first, as Paperclip orders them.
fn by_cost(mut rows: Vec<(u64, Value)>) -> Vec<Value> {
    rows.sort_by_key(|(cents, _)| std::cmp::Reverse(*cents));
    rows.into_iter().map(|(_, row)| row).collect()
}

/// `GET /api/companies/{cid}/costs/by-provider`: per provider, biller, billing type and model.
pub async fn by_provider(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let groups = grouped(&api, &caller, &cid, range.bounds()?, |e| {
        (
            e.provider.clone(),
            e.biller().to_string(),
            e.billing_type(),
            e.model.clone(),
        )
    })
    .await?;
    let rows = groups
        .into_iter()
        .map(|((provider, biller, billing, model), sums)| {
            let mut row = sums.with_runs();
            row.insert("provider".into(), provider.into());
            row.insert("biller".into(), biller.into());
            row.insert("billingType".into(), json!(billing));
            row.insert("model".into(), model.into());
            (sums.cost_cents, Value::Object(row))
        });
    Ok(Json(by_cost(rows.collect())))
}

/// `GET /api/companies/{cid}/costs/by-biller`: per biller, with how many providers and models.
pub async fn by_biller(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let groups = grouped(&api, &caller, &cid, range.bounds()?, |e| {
        e.biller().to_string()
    })
    .await?;
    let rows = groups.into_iter().map(|(biller, sums)| {
        let mut row = sums.with_runs();
        row.insert("biller".into(), biller.into());
        row.insert("providerCount".into(), sums.providers.len().into());
        row.insert("modelCount".into(), sums.models.len().into());
        (sums.cost_cents, Value::Object(row))
    });
    Ok(Json(by_cost(rows.collect())))
}

/// `GET /api/companies/{cid}/costs/by-agent-model`: per agent, provider, biller, billing type
/// and model, ordered by provider, biller, billing type and model.
pub async fn by_agent_model(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(range): QueryParams<Range>,
) -> Result<Json<Vec<Value>>> {
    let groups = grouped(&api, &caller, &cid, range.bounds()?, |e| {
        let billing = e.billing_type().to_string();
        let model = e.model.clone();
        (
            e.provider.clone(),
            e.biller().to_string(),
            billing,
            model,
            e.agent_id.clone(),
        )
    })
    .await?;
    let names = api.reader().read(|s| {
        groups
            .keys()
            .map(|k| (k.4.clone(), s.agents.get(&k.4).map(|a| a.name.clone())))
            .collect::<BTreeMap<_, _>>()
    });
    let rows = groups
        .into_iter()
        .map(|((provider, biller, billing, model, agent), sums)| {
            let mut row = sums.tokens();
            row.insert(
                "agentName".into(),
                json!(names.get(&agent).cloned().flatten()),
            );
            row.insert("agentId".into(), agent.into());
            row.insert("provider".into(), provider.into());
            row.insert("biller".into(), biller.into());
            row.insert("billingType".into(), billing.into());
            row.insert("model".into(), model.into());
            Value::Object(row)
        });
    Ok(Json(rows.collect()))
}

/// `GET /api/companies/{cid}/costs/window-spend`: per provider, what the last 5 hours, 24 hours
/// and 7 days spent (`biller` is `mixed` when more than one billed it).
pub async fn window_spend(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
) -> Result<Json<Vec<Value>>> {
    let end = now();
    let mut rows = Vec::new();
    for (label, hours) in [("5h", 5i64), ("24h", 24), ("7d", 168)] {
        let since = Timestamp(end.0.saturating_sub(hours * 3_600_000));
        let groups = grouped(&api, &caller, &cid, (since, Timestamp(i64::MAX)), |e| {
            e.provider.clone()
        })
        .await?;
        let window: Vec<(u64, Value)> = groups
            .into_iter()
            .map(|(provider, sums)| {
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
            })
            .collect();
        rows.extend(by_cost(window));
    }
    Ok(Json(rows))
}
