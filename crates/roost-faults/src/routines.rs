//! The routine workload: one routine with an `every 2s` schedule, made at the start and left
//! to fire through the faults; after the drain it is paused (so the replicas stop changing
//! before they are compared) and each replica's list of its runs goes to the routine checker.
//! The firings are the cluster's own (the leader's routine timer), not client operations, so
//! nothing of it is in the history.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::SeedableRng;
use roost_check::{ReplicaSnapshot, RoutineRunSnapshot, RoutineSchedule, RoutineSnapshot};
use roost_testkit::{wait_for, Http};
use serde_json::{json, Value};

use crate::text;
use crate::workload::{Target, OP_TIMEOUT};

/// The schedule: `every 2s`, as the e2e failover test of routines (crates/roost/tests/e2e/routines.rs).
const EVERY: &str = "every 2s";
const PERIOD_MS: i64 = 2_000;
/// The servers' `[workers] routine_stagger_window_ms`: the default (roost-core/src/routine.rs,
/// `DEFAULT_STAGGER_WINDOW_MS`); the fault cluster's configs leave it unset.
const STAGGER_WINDOW_MS: i64 = 5_000;
/// Beyond the stagger and one period: the timer's 200 ms round, a proposal's commit on a
/// loaded two-core machine.
const MARGIN_MS: i64 = 5_000;
/// The API's largest page of a routine's runs (roost-server/src/api/routines.rs,
/// `MAX_RUN_PAGE`): a full page may leave older runs out.
const RUN_PAGE: usize = 200;
/// How long pausing the routine may take on the healed cluster.
const PAUSE_WITHIN: Duration = Duration::from_secs(30);

/// The routine and what its schedule promised when it was made.
#[derive(Clone, Debug)]
pub struct Ticker {
    pub routine_id: String,
    /// The trigger's first nominal instant, Unix ms.
    pub first_due_ms: i64,
}

/// Now on the wall clock, Unix ms: the nodes share the machine's clock.
fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An RFC 3339 `field` of a reply in Unix ms; `None` when absent or null.
fn millis(v: &Value, field: &str) -> anyhow::Result<Option<i64>> {
    match &v[field] {
        Value::Null => Ok(None),
        Value::String(t) => chrono::DateTime::parse_from_rfc3339(t)
            .map(|t| Some(t.timestamp_millis()))
            .map_err(|e| anyhow::anyhow!("`{field}` {t:?} is not an RFC 3339 time ({e}) in {v}")),
        other => anyhow::bail!("`{field}` is not a time: {other} in {v}"),
    }
}

/// Makes the routine: a `wake` routine for an agent of its own (a `process` agent the worker
/// runs in a moment, so the waker's wakes and budget are untouched), every due instant
/// enqueued (`always_enqueue`) and missed ones made up (`enqueue_missed_with_cap`): each
/// instant must then give exactly one run.
pub async fn create_ticker(admin: &Http, company_id: &str) -> anyhow::Result<Ticker> {
    let heartbeat = json!({ "enabled": false, "wakeOnDemand": true, "maxConcurrentRuns": 1 });
    let agent = admin
        .post(
            &format!("/api/companies/{company_id}/agents"),
            json!({ "name": "ticker", "adapterType": "process", "heartbeat": heartbeat,
                    "adapterConfig": { "command": "true" } }),
        )
        .await?
        .ok()?;
    let routine = admin
        .post(
            &format!("/api/companies/{company_id}/routines"),
            json!({ "title": "tick", "assigneeAgentId": text(&agent, "id")?, "action": "wake",
                    "concurrencyPolicy": "always_enqueue",
                    "catchUpPolicy": "enqueue_missed_with_cap" }),
        )
        .await?
        .ok()?;
    let routine_id = text(&routine, "id")?;
    let created = admin
        .post(
            &format!("/api/routines/{routine_id}/triggers"),
            json!({ "kind": "schedule", "cronExpression": EVERY }),
        )
        .await?
        .ok()?;
    let first_due_ms = millis(&created["trigger"], "nextRunAt")?
        .ok_or_else(|| anyhow::anyhow!("the new schedule has no `nextRunAt`: {created}"))?;
    Ok(Ticker {
        routine_id,
        first_due_ms,
    })
}

/// Pauses the routine through any node until one acknowledges it; returns what the routine
/// checker expects of it. It was active until at least the first request, whose time is
/// `stopped_at_ms`.
pub async fn stop(target: &Target, ticker: &Ticker) -> anyhow::Result<RoutineSchedule> {
    let stopped_at_ms = wall_ms();
    let mut rng = StdRng::seed_from_u64(0x71C4E4);
    let path = format!("/api/routines/{}", ticker.routine_id);
    wait_for("the routine to be paused", PAUSE_WITHIN, || {
        let admin = target.admin(&mut rng);
        let path = path.clone();
        async move {
            let reply = tokio::time::timeout(
                OP_TIMEOUT,
                admin.patch(&path, json!({ "status": "paused" })),
            )
            .await
            .ok()?
            .ok()?;
            (reply.status.is_success() && reply.body["status"] == "paused").then_some(())
        }
    })
    .await?;
    Ok(RoutineSchedule {
        routine_id: ticker.routine_id.clone(),
        period_ms: PERIOD_MS,
        first_due_ms: ticker.first_due_ms,
        stopped_at_ms,
        allowed_lateness_ms: STAGGER_WINDOW_MS + PERIOD_MS + MARGIN_MS,
    })
}

/// The routine's runs on one node, newest first.
pub async fn snapshot(http: &Http, routine_id: &str) -> anyhow::Result<RoutineSnapshot> {
    let page = http
        .get(&format!("/api/routines/{routine_id}/runs?limit={RUN_PAGE}"))
        .await?
        .ok()?;
    let Value::Array(runs) = page else {
        anyhow::bail!("the routine's runs are not a list: {page}");
    };
    let mut snapshot = RoutineSnapshot {
        complete: runs.len() < RUN_PAGE,
        runs: Vec::with_capacity(runs.len()),
    };
    for r in &runs {
        let linked = ["linkedIssueId", "linkedWakeId", "coalescedIntoRunId"]
            .iter()
            .any(|f| !r[*f].is_null());
        snapshot.runs.push(RoutineRunSnapshot {
            id: text(r, "id")?,
            source: text(r, "source")?,
            status: text(r, "status")?,
            scheduled_for_ms: millis(r, "scheduledFor")?,
            triggered_at_ms: millis(r, "triggeredAt")?,
            linked,
        });
    }
    Ok(snapshot)
}

/// One line for the report: how many schedule firings a replica lists and how the last one
/// stands to the pause.
pub fn summary(replica: &ReplicaSnapshot, schedule: &RoutineSchedule) -> String {
    let Some(routine) = replica.routines.get(&schedule.routine_id) else {
        return format!("routine: none on {}", replica.node);
    };
    let instants: Vec<i64> = routine
        .runs
        .iter()
        .filter(|r| r.source == "schedule")
        .filter_map(|r| r.scheduled_for_ms)
        .collect();
    let drops = routine.runs.iter().filter(|r| r.is_drop_record()).count();
    let last = match instants.iter().max() {
        Some(t) => format!(
            "the last due {} ms before the pause",
            schedule.stopped_at_ms - t
        ),
        None => "none".into(),
    };
    let listed = if routine.complete { "all" } else { "a page" };
    format!(
        "routine: {} schedule firings on {} ({listed} listed, {drops} drop records), {last}",
        instants.len(),
        replica.node
    )
}
