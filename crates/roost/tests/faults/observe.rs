//! After the heal: wait for the replicas to converge, read each one's state into a
//! [`ReplicaSnapshot`], and run the checkers over the history and the snapshots.

use std::collections::BTreeMap;
use std::time::Duration;

use roost_check::{
    check_acknowledged_writes, check_checkout_linearizable, check_liveness,
    check_no_double_checkout, check_state_hashes, CheckoutSnapshot, HashObservation, IssueSnapshot,
    Op, ReplicaSnapshot, SearchLimits, Verdict, LIVENESS_WINDOW_NS,
};
use roost_testkit::{wait_for, NetCluster};
use serde_json::Value;

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

async fn comments(cluster: &NetCluster, node: u64, issue: &str) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut path = format!("/api/issues/{issue}/comments?order=asc&limit=500");
        if let Some(a) = &after {
            path.push_str(&format!("&after={a}"));
        }
        let page = cluster.http(node).get(&path).await?.ok()?;
        let page = page.as_array().cloned().unwrap_or_default();
        let n = page.len();
        for c in page {
            ids.push(c["id"].as_str().unwrap_or_default().to_string());
        }
        if n < 500 {
            return Ok(ids);
        }
        after = ids.last().cloned();
    }
}

/// One replica's state as the checkers read it.
pub async fn snapshot(
    cluster: &NetCluster,
    node: u64,
    issues: &[String],
) -> anyhow::Result<ReplicaSnapshot> {
    let report = cluster.http(node).get("/api/cluster/node").await?.ok()?;
    let mut snap = ReplicaSnapshot {
        node: format!("n{node}"),
        applied_index: report["stateIndex"].as_u64().unwrap_or(0),
        state_hash: report["stateHash"].as_str().unwrap_or_default().to_string(),
        ..ReplicaSnapshot::default()
    };
    let mut by_issue = BTreeMap::new();
    for issue in issues {
        let body: Value = cluster
            .http(node)
            .get(&format!("/api/issues/{issue}"))
            .await?
            .ok()?;
        let checkout = body["checkout"].as_object().map(|c| CheckoutSnapshot {
            agent_id: c["agentId"].as_str().unwrap_or_default().into(),
            run_id: c["runId"].as_str().unwrap_or_default().into(),
            token: c["token"].as_u64().unwrap_or(0),
        });
        by_issue.insert(
            issue.clone(),
            IssueSnapshot {
                checkout,
                comment_ids: comments(cluster, node, issue).await?,
            },
        );
    }
    snap.issues = by_issue;
    Ok(snap)
}

/// Every checker's verdict on one scenario.
pub fn check_all(ops: &[Op], replicas: &[ReplicaSnapshot], heal_ns: i64) -> Vec<Verdict> {
    let hashes: Vec<HashObservation> = replicas
        .iter()
        .map(HashObservation::from_snapshot)
        .collect();
    vec![
        check_no_double_checkout(ops),
        check_checkout_linearizable(ops, &SearchLimits::default()),
        check_acknowledged_writes(ops, replicas),
        check_state_hashes(&hashes),
        check_liveness(ops, heal_ns, LIVENESS_WINDOW_NS),
    ]
}
