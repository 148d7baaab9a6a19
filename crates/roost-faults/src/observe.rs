//! After the heal: wait for the replicas to converge, read each one's state into a
//! [`ReplicaSnapshot`] over its REST API (issues and comments, the waker's wakes and runs, the
//! budget, every cost event, the routine's runs), and run the checkers over the history and
//! the snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use roost_check::{
    check_acknowledged_wakes, check_acknowledged_writes, check_checkout_linearizable,
    check_liveness, check_no_double_checkout, check_reservations, check_routine_firings,
    check_state_hashes, Action, BudgetObservation, CheckoutSnapshot, HashObservation,
    IssueSnapshot, MemorySnapshot, Op, PolicySnapshot, ReplicaSnapshot, RoutineSchedule,
    RunSnapshot, SearchLimits, Verdict, WakeSnapshot, LIVENESS_WINDOW_NS,
};
use roost_testkit::{wait_for, Http, NetCluster};
use serde_json::Value;

use crate::text;
use crate::workload::Target;

/// Waits until every node reports the same applied index and state hash; returns them.
pub async fn converged(cluster: &NetCluster) -> anyhow::Result<(u64, String)> {
    wait_for(
        "the replicas to converge",
        Duration::from_secs(60),
        || async {
            let mut seen = Vec::new();
            for id in cluster.ids() {
                let r = cluster.http(id).get("/api/cluster/node").await.ok()?;
                seen.push((
                    r.body["stateIndex"].as_u64()?,
                    r.body["stateHash"].as_str()?.to_string(),
                ));
            }
            let first = seen.first()?.clone();
            seen.iter().all(|s| *s == first).then_some(first)
        },
    )
    .await
}

async fn comments(http: &Http, issue: &str) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/api/issues/{issue}/comments?order=asc&limit=500");
        if let Some(a) = &after {
            path.push_str(&format!("&after={a}"));
        }
        let page = http.get(&path).await?.ok()?;
        let page = array(page)?;
        let n = page.len();
        for c in page {
            ids.push(text(&c, "id")?);
        }
        if n < 500 {
            return Ok(ids);
        }
        after = ids.last().cloned();
    }
}

/// Every cost event id, from the company's activity (one entry per event), page by page.
async fn cost_event_ids(http: &Http, company_id: &str) -> anyhow::Result<BTreeSet<String>> {
    let mut ids = BTreeSet::new();
    let mut before: Option<u64> = None;
    loop {
        let mut path = format!("/api/companies/{company_id}/activity?limit=1000");
        if let Some(b) = before {
            path.push_str(&format!("&before={b}"));
        }
        let page = http.get(&path).await?.ok()?;
        let page = array(page)?;
        for entry in &page {
            if entry["entityType"] == "cost_event" {
                ids.insert(text(entry, "entityId")?);
            }
        }
        match page.last().and_then(|e| e["seq"].as_u64()) {
            Some(seq) if page.len() == 1000 => before = Some(seq),
            _ => return Ok(ids),
        }
    }
}

/// A reply that must be a JSON array.
fn array(v: Value) -> anyhow::Result<Vec<Value>> {
    match v {
        Value::Array(items) => Ok(items),
        other => anyhow::bail!("not a list: {other}"),
    }
}

/// Field `field` of a reply, a number; an error naming the reply when it is missing.
fn number(v: &Value, field: &str) -> anyhow::Result<u64> {
    v[field]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("no number `{field}` in {v}"))
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value, what: &str) -> anyhow::Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| anyhow::anyhow!("{what} {v}: {e}"))
}

fn wake_snapshot(w: &Value) -> anyhow::Result<(String, WakeSnapshot)> {
    let id = text(w, "id")?;
    let snapshot = WakeSnapshot {
        status: parse(&w["status"], "wake status")?,
        run_id: w["runId"].as_str().map(String::from),
        coalesced_into: w["coalescedInto"].as_str().map(String::from),
    };
    Ok((id, snapshot))
}

fn run_snapshot(r: &Value) -> anyhow::Result<(String, RunSnapshot)> {
    let id = text(r, "id")?;
    let snapshot = RunSnapshot {
        agent_id: text(r, "agentId")?,
        company_id: text(r, "companyId")?,
        status: parse(&r["status"], "run status")?,
        reserved_cents: number(r, "reservedCents")?,
    };
    Ok((id, snapshot))
}

/// The waker's wakes and runs on one node: the newest 1000 of each from the lists, then every
/// acknowledged wake (and the wakes and runs it leads to) the lists left out, one by one.
async fn wakes_and_runs(
    http: &Http,
    target: &Target,
    acknowledged: &BTreeSet<String>,
    snap: &mut ReplicaSnapshot,
) -> anyhow::Result<()> {
    let (cid, agent) = (&target.company_id, &target.waker.agent_id);
    let wakes = http
        .get(&format!(
            "/api/companies/{cid}/wakes?agentId={agent}&limit=1000"
        ))
        .await?
        .ok()?;
    for w in wakes.as_array().into_iter().flatten() {
        let (id, wake) = wake_snapshot(w)?;
        snap.wakes.insert(id, wake);
    }
    let runs = http
        .get(&format!(
            "/api/companies/{cid}/heartbeat-runs?agentId={agent}&limit=1000"
        ))
        .await?
        .ok()?;
    for r in runs.as_array().into_iter().flatten() {
        let (id, run) = run_snapshot(r)?;
        snap.runs.insert(id, run);
    }
    let mut todo: Vec<String> = acknowledged.iter().cloned().collect();
    while let Some(wake_id) = todo.pop() {
        if !snap.wakes.contains_key(&wake_id) {
            let reply = http.get(&format!("/api/wakes/{wake_id}")).await?;
            if !reply.status.is_success() {
                continue; // missing: the wake checker reports it
            }
            let (id, wake) = wake_snapshot(&reply.body)?;
            anyhow::ensure!(
                id == wake_id,
                "asked for wake {wake_id}, got wake {id}: {}",
                reply.body
            );
            snap.wakes.insert(id, wake);
        }
        let Some(wake) = snap.wakes.get(&wake_id) else {
            anyhow::bail!("wake {wake_id} vanished from the snapshot");
        };
        if let Some(into) = wake.coalesced_into.clone() {
            todo.push(into);
        }
        if let Some(run) = wake.run_id.clone() {
            if !snap.runs.contains_key(&run) {
                let reply = http.get(&format!("/api/heartbeat-runs/{run}")).await?;
                if reply.status.is_success() {
                    let (id, run) = run_snapshot(&reply.body)?;
                    snap.runs.insert(id, run);
                }
            }
        }
    }
    Ok(())
}

/// The company's budget policies and what each scope spent in its window.
async fn budgets(http: &Http, target: &Target, snap: &mut ReplicaSnapshot) -> anyhow::Result<()> {
    let overview = http
        .get(&format!(
            "/api/companies/{}/budgets/overview",
            target.company_id
        ))
        .await?
        .ok()?;
    for p in array(overview["policies"].clone())? {
        let scope = format!("{}:{}", text(&p, "scopeType")?, text(&p, "scopeId")?);
        snap.spent_cents.insert(scope.clone(), number(&p, "spent")?);
        let hard_stop = p["hardStopEnabled"]
            .as_bool()
            .ok_or_else(|| anyhow::anyhow!("no `hardStopEnabled` in {p}"))?;
        snap.budget_policies.insert(
            text(&p, "id")?,
            PolicySnapshot {
                scope,
                amount_cents: number(&p, "amount")?,
                hard_stop,
            },
        );
    }
    Ok(())
}

/// The ids of the acknowledged wakes in a history.
pub fn acknowledged_wakes(ops: &[Op]) -> BTreeSet<String> {
    ops.iter()
        .filter(|op| matches!(op.action, Action::Wake { .. }))
        .filter_map(|op| op.ok_result()?.wake_id.clone())
        .collect()
}

/// One replica's state as the checkers read it; `routine_id` is the routine workload's.
pub async fn snapshot(
    cluster: &NetCluster,
    node: u64,
    target: &Target,
    acknowledged: &BTreeSet<String>,
    routine_id: &str,
) -> anyhow::Result<ReplicaSnapshot> {
    let http = cluster.http(node);
    let report = http.get("/api/cluster/node").await?.ok()?;
    let mut snap = ReplicaSnapshot {
        node: format!("n{node}"),
        applied_index: number(&report, "stateIndex")?,
        state_hash: text(&report, "stateHash")?,
        ..ReplicaSnapshot::default()
    };
    let mut by_issue = BTreeMap::new();
    for issue in &target.issues {
        let body: Value = http.get(&format!("/api/issues/{issue}")).await?.ok()?;
        let checkout = match &body["checkout"] {
            Value::Null => None,
            c => Some(CheckoutSnapshot {
                agent_id: text(c, "agentId")?,
                run_id: text(c, "runId")?,
                token: number(c, "token")?,
            }),
        };
        by_issue.insert(
            issue.clone(),
            IssueSnapshot {
                checkout,
                comment_ids: comments(&http, issue).await?,
            },
        );
    }
    snap.issues = by_issue;
    wakes_and_runs(&http, target, acknowledged, &mut snap).await?;
    budgets(&http, target, &mut snap).await?;
    snap.cost_event_ids = cost_event_ids(&http, &target.company_id).await?;
    snap.memory.insert(
        target.agent_id.clone(),
        memory(&http, &target.agent_id).await?,
    );
    snap.routines.insert(
        routine_id.to_string(),
        crate::routines::snapshot(&http, routine_id).await?,
    );
    Ok(snap)
}

/// An agent's memory log on this replica: every entry it keeps (the cap's worth in one page),
/// and, when it is at the cap, the lowest sequence number kept.
async fn memory(http: &Http, agent_id: &str) -> anyhow::Result<MemorySnapshot> {
    let summary = http
        .get(&format!("/api/agents/{agent_id}/memory"))
        .await?
        .ok()?;
    let cap = usize::try_from(number(&summary["limits"], "maxEntries")?)?;
    let page = http
        .get(&format!(
            "/api/agents/{agent_id}/memory/entries?limit={cap}"
        ))
        .await?
        .ok()?;
    let entries = array(page)?;
    let mut snapshot = MemorySnapshot::default();
    for e in &entries {
        snapshot.entry_ids.insert(text(e, "id")?);
    }
    if entries.len() >= cap {
        snapshot.kept_from_seq = entries
            .iter()
            .filter_map(|e| e["seq"].as_u64())
            .min()
            .unwrap_or(0);
    }
    Ok(snapshot)
}

/// Every checker's verdict on one scenario: the history, the final replicas, the budget
/// samples taken during the run (the final replicas add one sample each), and what the
/// routine's schedule should have fired.
pub fn check_all(
    ops: &[Op],
    replicas: &[ReplicaSnapshot],
    samples: &[BudgetObservation],
    heal_ns: i64,
    routine: &RoutineSchedule,
) -> Vec<Verdict> {
    let hashes: Vec<HashObservation> = replicas
        .iter()
        .map(HashObservation::from_snapshot)
        .collect();
    let mut budget: Vec<BudgetObservation> = samples.to_vec();
    budget.extend(replicas.iter().flat_map(BudgetObservation::from_snapshot));
    vec![
        check_no_double_checkout(ops),
        check_checkout_linearizable(ops, &SearchLimits::default()),
        check_acknowledged_writes(ops, replicas),
        check_acknowledged_wakes(ops, replicas),
        check_reservations(&budget),
        check_state_hashes(&hashes),
        check_liveness(ops, heal_ns, LIVENESS_WINDOW_NS),
        check_routine_firings(replicas, routine),
    ]
}
