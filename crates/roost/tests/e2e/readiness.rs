//! `/readyz`: a JSON answer naming each check, and not ready once the node cannot serve.

use std::time::Duration;

use roost_server::TaskFailure;
use roost_testkit::{TestCluster, TestNode};

/// A serving node is ready, and says which checks it passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_json_naming_every_check() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let reply = node.http().get("/readyz").await?;
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.body);
    assert_eq!(reply.body["ready"], true, "{}", reply.body);
    assert_eq!(
        reply.body["failed"],
        serde_json::json!([]),
        "{}",
        reply.body
    );
    let names: Vec<&str> = reply.body["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["raft_core", "leader", "caught_up", "tasks"],
        "{}",
        reply.body
    );
    node.shutdown().await
}

/// Regression: after the Raft core stopped, writes answered 500 while `/readyz`
/// still said ready (the node remembered its last leader). Now it answers 503 naming the
/// stopped core, and the server reports the failure its host exits on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_said_ready_while_the_raft_core_had_stopped() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let failed = node.server().failed();
    node.server().api().node().shutdown().await;
    let reply = node.http().get("/readyz").await?;
    assert_eq!(reply.status.as_u16(), 503, "{}", reply.body);
    assert_eq!(reply.body["ready"], false, "{}", reply.body);
    let failed_checks = reply.body["failed"].as_array().cloned().unwrap_or_default();
    assert!(
        failed_checks.contains(&serde_json::json!("raft_core")),
        "{}",
        reply.body
    );
    let error = tokio::time::timeout(Duration::from_secs(10), failed)
        .await
        .map_err(|_| anyhow::anyhow!("the server did not report its stopped core"))?;
    assert!(
        matches!(error, roost_server::Error::RaftStopped { .. }),
        "{error}"
    );
    node.shutdown().await
}

/// Regression: the leader's agent timer panicked and nothing was dispatched
/// again while the node looked healthy. When its supervisor gives up on a duty, the leader
/// stops Raft so another node leads, reports not ready naming the task, and reports the
/// failure its host exits on; the rest of the cluster goes on taking writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_duty_was_given_up_on_steps_down_and_is_not_ready() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let old = c.leader().await?;
    let failed = c.server(old).failed();
    c.server(old).supervisor().trip(TaskFailure {
        task: "agent timer".into(),
        reason: "failed 5 times within 60s, last: panicked: overflow".into(),
    });
    let others: Vec<u64> = c.ids().into_iter().filter(|id| *id != old).collect();
    let new = c.leader_among(&others).await?;

    let reply = c.http(old).get("/readyz").await?;
    assert_eq!(reply.status.as_u16(), 503, "{}", reply.body);
    let failed_checks = reply.body["failed"].as_array().cloned().unwrap_or_default();
    assert!(
        failed_checks.contains(&serde_json::json!("tasks")),
        "{}",
        reply.body
    );
    assert!(
        reply.body.to_string().contains("agent timer"),
        "{}",
        reply.body
    );
    let error = tokio::time::timeout(Duration::from_secs(10), failed)
        .await
        .map_err(|_| anyhow::anyhow!("the server did not report the failed task"))?;
    assert!(
        matches!(error, roost_server::Error::TaskFailed(_)),
        "{error}"
    );

    c.admin(new)
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            serde_json::json!({ "title": "written after the old leader stepped down" }),
        )
        .await?
        .ok()?;
    c.shutdown().await;
    Ok(())
}

/// Regression: `/readyz` said ready on a node that could not serve a linearizable
/// read: a leader whose followers were gone still knew a leader (itself) and a running core. Now
/// it answers 503 naming `caught_up`, and 200 again once a quorum is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_said_ready_on_a_leader_cut_off_from_its_quorum() -> anyhow::Result<()> {
    let mut cluster = TestCluster::start(3).await?;
    let leader = cluster.leader().await?;
    let ready = cluster.http(leader).get("/readyz").await?;
    assert_eq!(ready.status.as_u16(), 200, "{}", ready.body);
    let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for id in &followers {
        cluster.kill(*id).await;
    }
    let http = cluster.http(leader);
    let not_ready = roost_testkit::wait_for(
        "the lone leader to report not ready",
        Duration::from_secs(20),
        || {
            let http = http.clone();
            async move {
                let reply = http.get("/readyz").await.ok()?;
                (reply.status.as_u16() == 503).then_some(reply)
            }
        },
    )
    .await?;
    let failed = not_ready.body["failed"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        failed.contains(&serde_json::json!("caught_up")),
        "{}",
        not_ready.body
    );
    cluster.restart(followers[0]).await?;
    roost_testkit::wait_for("a node ready again", Duration::from_secs(30), || {
        let http = http.clone();
        async move {
            let reply = http.get("/readyz").await.ok()?;
            (reply.status.as_u16() == 200).then_some(())
        }
    })
    .await?;
    Ok(())
}
