//! Issue 20's attacks, one section each (`hostile.rs` runs them against one cluster).

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use anyhow::{ensure, Context};
use reqwest::StatusCode;
use serde_json::{json, Value};

use roost_testkit::wait_for;

use super::world::*;

pub(super) async fn a_cost_of_u64_max_is_refused_and_spend_stays_exact(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (spender, agent) = w.agent(&w.company_a, "spender", 2).await?;
    let path = format!("/api/companies/{}/cost-events", w.company_a);
    let cost = |cents: u64| json!({ "provider": "anthropic", "model": "m", "costCents": cents });
    let huge = agent.post(&path, cost(u64::MAX)).await?;
    f.check(refused("costCents = u64::MAX", &huge, &[400]));
    f.expect(
        huge.code() == "bad_request"
            && huge.body["error"]
                .as_str()
                .is_some_and(|e| e.contains("costCents")),
        || {
            format!(
                "the refusal is not bad_request naming costCents: {}",
                show(&huge)
            )
        },
    );
    let one = agent.post(&path, cost(1)).await?;
    f.check(created("costCents = 1 after the refused one", &one));
    every_node_serves_and_converges(w, "after the u64::MAX cost").await?;
    for node in 1..=3 {
        let summary = w
            .admin(node)
            .get(&format!("/api/companies/{}/costs/summary", w.company_a))
            .await?
            .ok()?;
        let mine = summary["byAgent"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["agentId"] == spender.as_str()))
            .cloned()
            .unwrap_or(Value::Null);
        f.expect(
            mine["monthCents"] == 1 && mine["lifetimeCents"] == 1,
            || format!("node {node}: the agent's spend is not exactly 1 cent: {mine}"),
        );
    }
    Ok(())
}

/// Issue 20: a budget `amount` of u64::MAX overflowed `amount * warn_percent` once spend was
/// recorded, and a heartbeat `intervalSec` of i64::MAX panicked the leader's timer task, after
/// which nothing was dispatched while the node looked healthy.
pub(super) async fn admin_overflows_are_refused_and_the_leader_still_dispatches(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let admin = w.admin(3);
    let (woken, woken_key) = w.agent(&w.company_a, "woken", 1).await?;
    let policies = format!("/api/companies/{}/budgets/policies", w.company_a);
    for body in [
        json!({ "scopeType": "company", "amount": u64::MAX }),
        json!({ "scopeType": "agent", "scopeId": woken, "amount": u64::MAX, "warnPercent": 80 }),
    ] {
        let reply = admin.post(&policies, body.clone()).await?;
        f.check(refused(&format!("budget {body}"), &reply, &[400]));
    }
    // Spend in the budgets' scope is what evaluates their thresholds.
    let spend = woken_key
        .post(
            &format!("/api/companies/{}/cost-events", w.company_a),
            json!({ "provider": "anthropic", "costCents": 1 }),
        )
        .await?;
    f.check(created("a cost in the budgets' scope", &spend));

    let agent_path = format!("/api/agents/{woken}");
    let patch = admin
        .patch(
            &agent_path,
            json!({ "heartbeat": { "enabled": true, "intervalSec": i64::MAX } }),
        )
        .await?;
    f.check(refused("heartbeat.intervalSec = i64::MAX", &patch, &[400]));
    let agent = admin.get(&agent_path).await?;
    f.expect(
        agent.body["heartbeat"]["intervalSec"] != json!(i64::MAX),
        || format!("the refused interval was stored: {}", show(&agent)),
    );

    // The leader still reports ready, and a wakeup becomes a run on the worker.
    let leader = reports(w).await?[0]["leaderId"].as_u64().unwrap_or(0);
    ensure!((1..=3).contains(&leader), "no leader known");
    let ready = w.admin(leader).get("/readyz").await?;
    f.expect(ready.status == StatusCode::OK, || {
        format!("leader {leader} is not ready: {}", show(&ready))
    });
    let wake = admin
        .post(&format!("/api/agents/{woken}/wakeup"), json!({}))
        .await?;
    let status = text(&wake.body["wake"], "status");
    f.expect(
        wake.status.as_u16() == 202 && ["queued", "claimed"].contains(&status.as_str()),
        || format!("the wakeup did not queue a wake: {}", show(&wake)),
    );
    match w.assigned_run_of(&woken).await {
        Ok(run) => f.check(
            wait_for("the dispatched run to start", WAIT, || async {
                let r = admin
                    .get(&format!("/api/heartbeat-runs/{run}"))
                    .await
                    .ok()?;
                (r.body["status"] == "running").then_some(())
            })
            .await,
        ),
        Err(e) => f.check(Err(
            e.context("nothing was dispatched after the hostile interval")
        )),
    }

    // The timer itself still ticks: a heartbeat enabled now wakes the ticker on its own. Its
    // interval counts from the agent's creation (`roost-core/src/rules/wake.rs`, `next_tick`),
    // so the ticker was made at setup and the wait overlaps the other sections.
    let ticker_path = format!("/api/agents/{}", w.ticker);
    let enable = admin
        .patch(
            &ticker_path,
            json!({ "heartbeat": {
                "enabled": true, "intervalSec": TICK_SEC, "skipWhenIdle": false
            } }),
        )
        .await?;
    f.expect(enable.status == StatusCode::OK, || {
        format!("enabling a {TICK_SEC} s heartbeat: {}", show(&enable))
    });
    let ticked = wait_for(
        "a heartbeat_timer wake of the ticker",
        WAIT + Duration::from_secs(TICK_SEC),
        || async {
            let wakes = admin
                .get(&format!(
                    "/api/companies/{}/wakes?agentId={}",
                    w.company_a, w.ticker
                ))
                .await
                .ok()?
                .ok()
                .ok()?;
            wakes
                .as_array()?
                .iter()
                .any(|wake| wake["reason"] == "heartbeat_timer")
                .then_some(())
        },
    )
    .await;
    f.check(ticked.context("the leader's timer no longer ticks"));
    // Stop the ticks, so that the cluster settles for the hash comparison.
    admin
        .patch(&ticker_path, json!({ "heartbeat": { "enabled": false } }))
        .await?
        .ok()?;
    every_node_serves_and_converges(w, "after the admin overflows").await
}

/// Issue 20: idempotency keys were global: an agent of company A sending a key company B had
/// used got B's issue back and its own write was dropped; a colliding comment key answered 500
/// with Debug output of another company's agent.
pub(super) async fn idempotency_keys_are_scoped_to_their_tenant(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (_, agent_b) = w.agent(&w.company_b, "agent-b", 2).await?;
    let (agent_a_id, agent_a) = w.agent(&w.company_a, "agent-a", 3).await?;
    let key = "k1";
    let b_issue = agent_b
        .post_with_key(
            &format!("/api/companies/{}/issues", w.company_b),
            json!({ "title": "B's secret plan" }),
            key,
        )
        .await?;
    created("agent B's keyed issue", &b_issue)?;

    let a_path = format!("/api/companies/{}/issues", w.company_a);
    let a_body = json!({ "title": "A's own work" });
    let a_issue = agent_a.post_with_key(&a_path, a_body.clone(), key).await?;
    f.check(created("agent A's issue with B's key", &a_issue));
    f.expect(
        a_issue.body["id"] != b_issue.body["id"]
            && a_issue.body["companyId"] == w.company_a.as_str()
            && a_issue.body["title"] == "A's own work",
        || format!("agent A, sending B's key, got {}", show(&a_issue)),
    );
    let b_still = w
        .admin(1)
        .get(&format!("/api/issues/{}", text(&b_issue.body, "id")))
        .await?;
    f.expect(b_still.body["title"] == "B's secret plan", || {
        format!("B's issue changed: {}", show(&b_still))
    });

    let reused = agent_a
        .post_with_key(&a_path, json!({ "title": "something else" }), key)
        .await?;
    f.check(refused("the same key with another body", &reused, &[422]));
    f.expect(reused.code() == "idempotency_key_reused", || {
        format!("the same key with another body: {}", show(&reused))
    });

    let repeat = agent_a.post_with_key(&a_path, a_body, key).await?;
    f.expect(
        repeat.status.is_success() && repeat.body["id"] == a_issue.body["id"],
        || {
            format!(
                "a repeat did not answer the first outcome: {}",
                show(&repeat)
            )
        },
    );

    let comment = agent_a
        .post_with_key(
            &format!("/api/issues/{}/comments", text(&a_issue.body, "id")),
            json!({ "body": "keyed comment" }),
            key,
        )
        .await?;
    f.check(created("agent A's comment with the same key", &comment));
    f.expect(
        comment.body["body"] == "keyed comment"
            && comment.body["issueId"] == a_issue.body["id"]
            && comment.body["authorAgentId"] == agent_a_id.as_str(),
        || format!("the keyed comment came back as {}", show(&comment)),
    );
    Ok(())
}

/// Issue 20: the activity log showed every agent the full `adapterConfig` patch of another
/// agent, secrets included; run rows carried `tokenHashes`.
pub(super) async fn secrets_and_token_hashes_never_leave_the_api(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (x, x_key) = w.agent(&w.company_a, "holder", 2).await?;
    let (_, y_key) = w.agent(&w.company_a, "reader", 3).await?;
    let admin = w.admin(1);
    let patched = admin
        .patch(
            &format!("/api/agents/{x}"),
            json!({ "adapterConfig": {
                "env": { "API_TOKEN": { "type": "secret", "value": SECRET } },
                "command": "echo"
            } }),
        )
        .await?;
    let config = &patched.body["adapterConfig"];
    f.expect(
        patched.status == StatusCode::OK
            && config["env"]["API_TOKEN"] == json!({ "type": "secret", "redacted": true })
            && config["command"] == "echo",
        || {
            format!(
                "the patched agent does not show a redacted secret: {}",
                show(&patched)
            )
        },
    );

    let activity = y_key
        .get(&format!(
            "/api/companies/{}/activity?limit=500",
            w.company_a
        ))
        .await?
        .ok()?;
    f.expect(
        activity.as_array().is_some_and(|entries| {
            entries
                .iter()
                .any(|e| e["action"] == "agent.updated" && e["entityId"] == x.as_str())
        }),
        || "agent Y's activity page has no agent.updated entry for X".into(),
    );
    let reads = [
        ("the activity read by agent Y", activity),
        (
            "GET /api/agents/{X} as admin",
            w.admin(3).get(&format!("/api/agents/{x}")).await?.ok()?,
        ),
        (
            "GET /api/agents/{X} with X's key",
            x_key.get(&format!("/api/agents/{x}")).await?.ok()?,
        ),
        (
            "GET /api/agents/me with X's key",
            x_key.get("/api/agents/me").await?.ok()?,
        ),
    ];
    for (what, body) in &reads {
        let body = body.to_string();
        f.expect(!body.contains(SECRET), || {
            format!("{what} shows the secret: {}", cut(&body))
        });
    }

    // A dispatched run (its row holds the run key's hash): the agent still gets its secret,
    // and no run view shows the hashes.
    admin
        .post(&format!("/api/agents/{x}/wakeup"), json!({}))
        .await?
        .ok()?;
    let run = w.assigned_run_of(&x).await?;
    let assignment = w
        .worker
        .assignments()
        .into_iter()
        .find(|a| a.run_id == run)
        .context("the assignment vanished")?;
    f.expect(assignment.adapter_config_json.contains(SECRET), || {
        format!(
            "the worker did not get the secret it needs to start the agent: {}",
            assignment.adapter_config_json
        )
    });
    let runs_path = format!("/api/companies/{}/heartbeat-runs", w.company_a);
    let run_path = format!("/api/heartbeat-runs/{run}");
    let run_reads = [
        ("the run list as admin", admin.get(&runs_path).await?.ok()?),
        (
            "the run list with Y's key",
            y_key.get(&runs_path).await?.ok()?,
        ),
        ("the run as admin", w.admin(2).get(&run_path).await?.ok()?),
        ("the run with X's key", x_key.get(&run_path).await?.ok()?),
    ];
    ensure!(
        run_reads[0].1.to_string().contains(run.as_str()),
        "the run list does not show run {run}"
    );
    for (what, body) in &run_reads {
        let body = body.to_string();
        f.expect(
            !body.contains("tokenHashes") && !body.contains(SECRET),
            || format!("{what} carries tokenHashes or the secret: {}", cut(&body)),
        );
    }
    Ok(())
}

/// Issue 20: `state.db`, `raft-log.db` and their directory were created world-readable.
pub(super) async fn data_files_are_private(w: &World, f: &mut Findings) -> anyhow::Result<()> {
    let mut loose = Vec::new();
    for p in &w.procs.nodes {
        let mut stack = vec![p.data.clone()];
        let mut files = 0;
        while let Some(dir) = stack.pop() {
            let mode = std::fs::metadata(&dir)?.permissions().mode() & 0o777;
            if mode != 0o700 {
                loose.push(format!("{}: mode {mode:o}, want 700", dir.display()));
            }
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let meta = std::fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    stack.push(path);
                } else {
                    files += 1;
                    let mode = meta.permissions().mode() & 0o777;
                    if mode != 0o600 {
                        loose.push(format!("{}: mode {mode:o}, want 600", path.display()));
                    }
                }
            }
        }
        for name in ["state.db", "raft-log.db"] {
            ensure!(
                p.data.join(name).exists(),
                "node {} has no {name} in {}",
                p.id,
                p.data.display()
            );
        }
        ensure!(files > 0, "node {} wrote no files", p.id);
    }
    for file in loose {
        f.expect(false, || format!("others may read {file}"));
    }
    Ok(())
}

/// Issue 20: no field had a length limit: forty issues with a 1 MB `billingCode` made one page
/// of issues 41 MB; a 1 MB wake payload was accepted and then failed the run. An oversized
/// `Idempotency-Key` must be refused before anything is written.
pub(super) async fn oversized_fields_are_refused_and_nothing_is_written(
    w: &World,
    f: &mut Findings,
) -> anyhow::Result<()> {
    let (me, agent) = w.agent(&w.company_a, "bloater", 2).await?;
    let issues_path = format!("/api/companies/{}/issues", w.company_a);
    let issues_before = w.issue_count(&w.company_a).await?;
    let head_before = w.activity_head(&w.company_a).await?;
    let megabyte = "x".repeat(1_000_000);

    let mut accepted = Vec::new();
    for i in 0..40 {
        let reply = agent
            .post(
                &issues_path,
                json!({ "title": format!("bloat {i}"), "billingCode": megabyte }),
            )
            .await?;
        let what = format!("issue {i} with a 1 MB billingCode");
        let ok = refused(&what, &reply, &[413, 400]).and_then(|()| {
            ensure!(
                reply.status.as_u16() == 400 || reply.code() == "too_large",
                "{what}: a 413 with code {:?}",
                reply.code()
            );
            Ok(())
        });
        if let Err(e) = ok {
            accepted.push(format!("{e:#}"));
        }
    }
    f.expect(accepted.is_empty(), || {
        format!(
            "{} of 40 issues with a 1 MB billingCode were not refused; the first: {}",
            accepted.len(),
            accepted[0]
        )
    });
    let wake = agent
        .post(
            &format!("/api/agents/{me}/wakeup"),
            json!({ "payload": { "blob": megabyte } }),
        )
        .await?;
    f.check(refused("a 1 MB wake payload", &wake, &[413, 400]));

    let long_key = "k".repeat(200);
    let keyed = agent
        .post_with_key(&issues_path, json!({ "title": "long key" }), &long_key)
        .await?;
    f.check(refused("a 200-character Idempotency-Key", &keyed, &[400]));

    let issues_after = w.issue_count(&w.company_a).await?;
    f.expect(issues_after == issues_before, || {
        format!("refused issues were created: {issues_before} issues before, {issues_after} after")
    });
    let head_after = w.activity_head(&w.company_a).await?;
    f.expect(head_after == head_before, || {
        format!("refused requests wrote activity: head {head_before} before, {head_after} after")
    });
    let wakes = w
        .admin(1)
        .get(&format!(
            "/api/companies/{}/wakes?agentId={me}",
            w.company_a
        ))
        .await?
        .ok()?;
    f.expect(wakes == json!([]), || {
        format!("the refused wake exists: {}", cut(&wakes.to_string()))
    });
    Ok(())
}
