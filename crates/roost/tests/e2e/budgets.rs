//! Budgets across machines (docs/budgets.md) on a 3-node cluster with simulated workers
//! that report usage: reservations before a run, metering during it, settlement after, a
//! leader failover in the middle, incidents and the operator's decisions, bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use roost_core::RunStatus;

use roost_testkit::{wait_for, Http, TestCluster, TestWorker};

use crate::support::str_field;
use crate::workers::{agent, assigned_issue, cluster, join_token, run_status};

const WAIT: Duration = Duration::from_secs(30);

/// An agent that may run 10 at a time with a 25¢ reserve, under a $1.00 hard company budget.
async fn budgeted_agent(c: &TestCluster, http: &Http) -> anyhow::Result<String> {
    let policy = json!({ "maxConcurrentRuns": 10, "runReserveCents": 25 });
    let (agent_id, _key) = agent(c, "spender", policy).await?;
    http.post(
        &format!("/api/companies/{}/budgets/policies", c.company_id),
        json!({ "scopeType": "company", "amount": 100, "windowKind": "calendar_month_utc" }),
    )
    .await?
    .ok()?;
    Ok(agent_id)
}

fn all_assignments(workers: &[&TestWorker]) -> Vec<String> {
    workers
        .iter()
        .flat_map(|w| w.assignments())
        .map(|a| a.run_id)
        .collect()
}

async fn overview(http: &Http, c: &TestCluster) -> anyhow::Result<Value> {
    http.get(&format!("/api/companies/{}/budgets/overview", c.company_id))
        .await?
        .ok()
}

/// Replays the company's activity in log order: at no point do more than `max_live` runs hold
/// a reservation, and settled spend plus live reservations never pass `limit`.
async fn check_reservations_in_log_order(
    http: &Http,
    c: &TestCluster,
    reserve: u64,
    limit: u64,
    max_live: usize,
) -> anyhow::Result<()> {
    let runs = http
        .get(&format!(
            "/api/companies/{}/heartbeat-runs?limit=1000",
            c.company_id
        ))
        .await?
        .ok()?;
    let cost: BTreeMap<String, u64> = runs
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let micro = r["usage"]["costMicroUsd"].as_u64().unwrap_or(0);
            (str_field(r, "id"), micro.div_ceil(10_000))
        })
        .collect();
    let mut entries = http
        .get(&format!(
            "/api/companies/{}/activity?limit=1000",
            c.company_id
        ))
        .await?
        .ok()?
        .as_array()
        .cloned()
        .unwrap_or_default();
    entries.sort_by_key(|e| e["seq"].as_u64());
    let (mut live, mut spent) = (BTreeSet::new(), 0u64);
    for e in &entries {
        let run = str_field(e, "entityId");
        match e["action"].as_str() {
            Some("run.assigned") => {
                live.insert(run);
            }
            Some("run.finished") | Some("run.usage_reported") if cost.contains_key(&run) => {
                let ended = e["action"] == "run.finished" || e["details"]["cancelled"].is_string();
                if ended && live.remove(&run) {
                    spent += cost[&run];
                }
            }
            _ => {}
        }
        assert!(
            live.len() <= max_live,
            "{} live at seq {}",
            live.len(),
            e["seq"]
        );
        assert!(
            spent + reserve * live.len() as u64 <= limit,
            "spent {spent} + {} live reservations pass {limit} at seq {}",
            live.len(),
            e["seq"]
        );
    }
    Ok(())
}

/// 10 concurrent wakes on 2 workers against a $1.00 budget with a 25¢ reserve: never more than
/// 4 reservations live; the 5th run starts only once finished runs settled below their
/// reserve; every replica ends with the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_wakes_on_two_workers_never_reserve_past_the_budget() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let w1 = TestWorker::connect(c.grpc_addrs(), &token, "budget-w1", 10).await?;
    let w2 = TestWorker::connect(c.grpc_addrs(), &token, "budget-w2", 10).await?;
    let http = c.admin(c.leader().await?);
    let agent_id = budgeted_agent(&c, &http).await?;
    for i in 0..10 {
        assigned_issue(&http, &c, &format!("task {i}"), &agent_id).await?;
    }
    let workers = [&w1, &w2];
    wait_for("4 runs to start", WAIT, || async {
        (all_assignments(&workers).len() >= 4).then_some(())
    })
    .await?;
    let blocked = wait_for("the other 6 wakes to wait on the budget", WAIT, || async {
        let wakes = http
            .get(&format!(
                "/api/companies/{}/wakes?agentId={agent_id}",
                c.company_id
            ))
            .await
            .ok()?
            .ok()
            .ok()?;
        let waiting: Vec<Value> = wakes
            .as_array()?
            .iter()
            .filter(|w| {
                w["blockedBy"]
                    .as_str()
                    .is_some_and(|b| b.starts_with("budget_blocked"))
            })
            .cloned()
            .collect();
        (waiting.len() == 6).then_some(waiting)
    })
    .await?;
    assert_eq!(blocked.len(), 6);
    assert_eq!(all_assignments(&workers).len(), 4, "a 5th run started");

    // Finish runs one at a time at 2¢ each (below the 25¢ reserve) until all ten have run.
    let mut finished = BTreeSet::new();
    while finished.len() < 10 {
        let next = wait_for("a run to finish", WAIT, || async {
            workers.iter().find_map(|w| {
                w.running()
                    .into_iter()
                    .find(|r| !finished.contains(r))
                    .map(|r| (*w, r))
            })
        })
        .await?;
        next.0
            .finish_costing(&next.1, RunStatus::Succeeded, 2)
            .await?;
        let run = next.1.clone();
        wait_for("the run to settle", WAIT, || async {
            (run_status(&http, &run).await.ok()? == "succeeded").then_some(())
        })
        .await?;
        finished.insert(next.1);
    }
    check_reservations_in_log_order(&http, &c, 25, 100, 4).await?;
    let o = overview(&http, &c).await?;
    assert_eq!(o["policies"][0]["spent"], json!(20));
    assert_eq!(o["policies"][0]["reserved"], json!(0));
    let (_, hash) = c.converged(WAIT).await?;
    for node in c.ids() {
        assert_eq!(
            overview(&c.admin(node), &c).await?["policies"],
            o["policies"],
            "node {node}: {hash}"
        );
    }
    c.shutdown().await;
    Ok(())
}

/// Drives one run's usage past its reservation: extended while the budget allows, cancelled
/// when it does not, with the spend over the limit by at most the last report's growth. With
/// `failover`, the leader is killed after the first extension.
async fn meter_one_run(failover: bool) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster().await?;
    let token = join_token(&c).await?;
    let worker = TestWorker::connect(c.grpc_addrs(), &token, "meter-w", 4).await?;
    let leader = c.leader().await?;
    let http = c.admin(leader);
    let agent_id = budgeted_agent(&c, &http).await?;
    assigned_issue(&http, &c, "expensive", &agent_id).await?;
    let run = worker.wait_assignments(1, WAIT).await?[0].run_id.clone();
    let reserved = |http: Http, run: String| async move {
        let r = http
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        Some((r["reservedCents"].as_u64()?, str_field(&r, "status")))
    };
    worker.set_usage_cents(&run, 20);
    wait_for("usage within the reserve", WAIT, || async {
        let http = c.admin(c.leader().await.ok()?);
        let usage = http
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await
            .ok()?
            .ok()
            .ok()?;
        (usage["usage"]["costMicroUsd"] == json!(200_000)).then_some(())
    })
    .await?;
    assert_eq!(
        reserved(http.clone(), run.clone()).await,
        Some((25, "running".into()))
    );
    worker.set_usage_cents(&run, 40);
    wait_for("the reservation to grow", WAIT, || async {
        (reserved(http.clone(), run.clone()).await? == (65, "running".into())).then_some(())
    })
    .await?;

    let http = if failover {
        c.kill(leader).await;
        let new_leader = c.leader().await?;
        let http = c.admin(new_leader);
        // Nothing lost or doubled: the new leader holds the same single reservation.
        let o = overview(&http, &c).await?;
        assert_eq!(o["policies"][0]["reserved"], json!(65), "{o}");
        http
    } else {
        http
    };
    worker.set_usage_cents(&run, 90);
    wait_for("the reservation to reach the limit", WAIT, || async {
        (reserved(http.clone(), run.clone()).await? == (100, "running".into())).then_some(())
    })
    .await?;
    worker.set_usage_cents(&run, 130);
    let ended = wait_for("the run to be cancelled", WAIT, || async {
        let (_, status) = reserved(http.clone(), run.clone()).await?;
        (status == "cancelled").then_some(())
    })
    .await;
    ended?;
    let r = http
        .get(&format!("/api/heartbeat-runs/{run}"))
        .await?
        .ok()?;
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("budget_exceeded")),
        "{r}"
    );
    wait_for("the worker to be told to stop", WAIT, || async {
        worker.cancels().contains(&run).then_some(())
    })
    .await?;
    let o = overview(&http, &c).await?;
    let spent = o["policies"][0]["spent"].as_u64().unwrap_or(0);
    assert_eq!(spent, 130, "settled at the usage reported: {o}");
    assert!(
        spent - 100 <= 130 - 90,
        "over the limit by more than one report"
    );
    assert_eq!(o["policies"][0]["reserved"], json!(0));
    assert_eq!(o["pausedAgentIds"], json!([agent_id]));
    let hard: Vec<&Value> = o["incidents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["kind"] == "hard")
        .collect();
    assert_eq!(hard.len(), 1, "{o}");
    if failover {
        c.restart(leader).await?;
    }
    c.converged(WAIT).await?;
    c.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn usage_past_the_reservation_is_extended_then_cancelled() -> anyhow::Result<()> {
    meter_one_run(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metering_across_a_leader_kill_loses_and_doubles_no_reservation() -> anyhow::Result<()> {
    meter_one_run(true).await
}

/// The warning fires once at 80%; the hard stop pauses the agent and its new wake waits;
/// raising below the spend is refused with 422; raise_and_resume resumes it and the wake runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_warning_fires_once_and_raise_and_resume_runs_the_blocked_wake() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let worker = TestWorker::connect(c.grpc_addrs(), &token, "warn-w", 4).await?;
    let http = c.admin(c.leader().await?);
    let agent_id = budgeted_agent(&c, &http).await?;
    let key = str_field(
        &http
            .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
            .await?
            .ok()?,
        "token",
    );
    let as_agent = c.http(2).with_token(&key);
    let spend = |cents: u64| {
        let as_agent = as_agent.clone();
        let path = format!("/api/companies/{}/cost-events", c.company_id);
        async move {
            as_agent
                .post(
                    &path,
                    json!({ "provider": "anthropic", "model": "claude", "costCents": cents }),
                )
                .await?
                .ok()
        }
    };
    for cents in [50, 35, 5] {
        spend(cents).await?;
    }
    let o = overview(&http, &c).await?;
    let soft = o["incidents"]
        .as_array()
        .map(|v| v.iter().filter(|i| i["kind"] == "soft").count());
    assert_eq!(soft, Some(1), "{o}");
    // 90¢ spent leaves no room for a 25¢ run: the claim opens a hard incident, pauses the
    // agent, and the wake waits.
    assigned_issue(&http, &c, "blocked work", &agent_id).await?;
    let o = wait_for("the hard stop", WAIT, || async {
        let o = overview(&http, &c).await.ok()?;
        (o["pausedAgentIds"] == json!([agent_id])).then_some(o)
    })
    .await?;
    let incident = o["incidents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["kind"] == "hard" && i["status"] == "open")
        .map(|i| str_field(i, "id"))
        .ok_or_else(|| anyhow::anyhow!("no hard incident: {o}"))?;
    let resolve = format!(
        "/api/companies/{}/budget-incidents/{incident}/resolve",
        c.company_id
    );
    let low = http
        .post(
            &resolve,
            json!({ "action": "raise_budget_and_resume", "amount": 90 }),
        )
        .await?;
    assert_eq!(
        (low.status.as_u16(), low.code()),
        (422, "invariant_violation"),
        "{}",
        low.body
    );
    assert!(worker.assignments().is_empty(), "a paused agent ran");
    http.post(
        &resolve,
        json!({ "action": "raise_and_resume", "amount": 300 }),
    )
    .await?
    .ok()?;
    worker.wait_assignments(1, WAIT).await?;
    let o = overview(&http, &c).await?;
    assert_eq!(o["policies"][0]["amount"], json!(300));
    assert_eq!(o["pausedAgentIds"], json!([]));
    c.shutdown().await;
    Ok(())
}

/// Negative or fractional amounts, unknown scopes, an agent reporting another's cost: a clear
/// error each, and nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_budget_and_cost_input_is_refused_and_writes_nothing() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let http = c.admin(c.leader().await?);
    let (me, key) = agent(&c, "me", json!({})).await?;
    let (other, _) = agent(&c, "other", json!({})).await?;
    let cid = c.company_id.clone();
    let head = |http: Http, cid: String| async move {
        let page = http
            .get(&format!("/api/companies/{cid}/activity?limit=1"))
            .await?
            .ok()?;
        anyhow::Ok(page[0]["seq"].as_u64().unwrap_or(0))
    };
    let before = head(http.clone(), cid.clone()).await?;
    let costs = format!("/api/companies/{cid}/cost-events");
    let policies = format!("/api/companies/{cid}/budgets/policies");
    let as_me = c.http(1).with_token(&key);
    let cases: Vec<(Http, &str, Value, u16)> = vec![
        (
            as_me.clone(),
            &costs,
            json!({ "provider": "x", "costCents": -5 }),
            400,
        ),
        (
            as_me.clone(),
            &costs,
            json!({ "provider": "x", "costCents": 1.5 }),
            400,
        ),
        (
            as_me.clone(),
            &costs,
            json!({ "provider": "x", "costCents": 5, "agentId": other }),
            403,
        ),
        (
            http.clone(),
            &costs,
            json!({ "provider": "x", "costCents": 5, "agentId": "nobody" }),
            404,
        ),
        (
            http.clone(),
            &policies,
            json!({ "scopeType": "agent", "scopeId": "nobody", "amount": 100 }),
            404,
        ),
        (
            http.clone(),
            &policies,
            json!({ "scopeType": "company", "amount": -1 }),
            400,
        ),
        (
            http.clone(),
            &policies,
            json!({ "scopeType": "company", "amount": 100, "warnPercent": 0 }),
            400,
        ),
        (
            http.clone(),
            &policies,
            json!({ "scopeType": "team", "amount": 100 }),
            400,
        ),
        (
            as_me.clone(),
            &policies,
            json!({ "scopeType": "agent", "scopeId": me, "amount": 100 }),
            403,
        ),
    ];
    for (client, path, body, status) in cases {
        let reply = client.post(path, body.clone()).await?;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.body);
        assert!(reply.body["message"].is_string(), "{body}: {}", reply.body);
    }
    assert_eq!(
        head(http.clone(), cid.clone()).await?,
        before,
        "a refused request wrote"
    );
    let summary = http
        .get(&format!("/api/companies/{cid}/costs/summary"))
        .await?
        .ok()?;
    assert_eq!(summary["lifetimeCents"], json!(0));
    c.shutdown().await;
    Ok(())
}
