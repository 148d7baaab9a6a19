//! Workers that dial a follower, relayed to the leader (`roost-server/src/workers/relay.rs`),
//! and a leader past its bound sending the workers that dial it to followers (`spread.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use roost_proto::v1 as pb;
use roost_server::workers::WorkerConfig;
use roost_testkit::{test_timing, wait_for, TestCluster};

use crate::workers::{
    agent, assigned_issue, cluster, join_token, next_assignment, one_at_a_time, raw_connection,
    raw_connection_as, run_status, RawConnection, WAIT,
};

/// The leader, and a node that follows it.
async fn leader_and_follower(c: &TestCluster) -> anyhow::Result<(u64, u64)> {
    let leader = c.leader().await?;
    let follower = c.ids().into_iter().find(|id| *id != leader);
    Ok((
        leader,
        follower.ok_or_else(|| anyhow::anyhow!("no follower"))?,
    ))
}

/// A gauge of node `id`'s `/metrics`.
async fn gauge(c: &TestCluster, id: u64, name: &str) -> anyhow::Result<u64> {
    let text = reqwest::get(format!("{}/metrics", c.http(id).base()))
        .await?
        .text()
        .await?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("node {id}'s /metrics has no {name}"))
}

/// A worker that dials a follower is served through it (`roost-server/src/workers/relay.rs`):
/// the leader registers it, acks its renewals, assigns it a run and takes the run's result, all
/// through the follower; and when the worker hangs up, the leader lets go of it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_dials_a_follower_is_served_through_it() -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    use roost_proto::v1::{worker_message, LeaseRenewal, RunFinished, RunStarted, WorkerMessage};
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let (leader, follower) = leader_and_follower(&c).await?;
    let (a, _) = agent(&c, "relayed", one_at_a_time()).await?;
    let (tx, mut inbound) =
        raw_connection(&c.grpc_addr(follower), &token, Vec::new(), Vec::new()).await?;
    match inbound.message().await?.and_then(|m| m.body) {
        Some(Body::Registered(r)) => assert_eq!(r.node_id, leader, "registered by the leader"),
        other => anyhow::bail!("expected the follower to relay the registration, got {other:?}"),
    }
    assert_eq!(gauge(&c, leader, "roost_workers_connected").await?, 1);
    assert_eq!(gauge(&c, follower, "roost_workers_relayed").await?, 1);
    assert_eq!(gauge(&c, follower, "roost_workers_connected").await?, 0);
    // The worker renews its lease through the follower while the test goes on.
    let renewer = tokio::spawn({
        let tx = tx.clone();
        async move {
            for seq in 1.. {
                let renewal = LeaseRenewal {
                    seq,
                    ..Default::default()
                };
                let message = WorkerMessage {
                    body: Some(worker_message::Body::LeaseRenewal(renewal)),
                };
                if tx.send(message).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    assigned_issue(&c.admin(leader), &c, "through a follower", &a).await?;
    let run_id = tokio::time::timeout(WAIT, next_assignment(&mut inbound)).await??;
    let started = RunStarted {
        run_id: run_id.clone(),
    };
    tx.send(WorkerMessage {
        body: Some(worker_message::Body::RunStarted(started)),
    })
    .await?;
    let finished = RunFinished {
        run_id: run_id.clone(),
        status: pb::RunStatus::Succeeded as i32,
        ..Default::default()
    };
    tx.send(WorkerMessage {
        body: Some(worker_message::Body::RunFinished(finished)),
    })
    .await?;
    let (mut acked, mut renewed) = (false, false);
    while !(acked && renewed) {
        let body = tokio::time::timeout(WAIT, inbound.message())
            .await
            .map_err(|_| anyhow::anyhow!("no ack within {WAIT:?}"))??
            .and_then(|m| m.body);
        match body {
            Some(Body::RunFinishedAck(ack)) => acked |= ack.run_id == run_id,
            Some(Body::LeaseRenewed(r)) => renewed |= r.seq > 0,
            Some(_) => {}
            None => anyhow::bail!("the relayed connection ended"),
        }
    }
    assert_eq!(run_status(&c.admin(leader), &run_id).await?, "succeeded");
    // A stream that reaches a follower's peer listener, where followers relay workers to the
    // leader, is relayed already: the follower does not relay it again, it sends it on.
    let mut twice =
        raw_connection_as("twice", &c.peer_addr(follower), &token, vec![], vec![]).await?;
    match first_message(&mut twice).await? {
        Some(Body::Redirect(r)) => assert_eq!(r.leader_grpc_addr, c.grpc_addr(leader)),
        other => anyhow::bail!("a relayed stream was relayed again: {other:?}"),
    }
    drop(twice);
    renewer.abort();
    drop((tx, inbound));
    wait_for(
        "the leader and the follower to let go of the worker",
        WAIT,
        || async {
            let connected = gauge(&c, leader, "roost_workers_connected").await.ok()?;
            let relayed = gauge(&c, follower, "roost_workers_relayed").await.ok()?;
            (connected == 0 && relayed == 0).then_some(())
        },
    )
    .await?;
    c.shutdown().await;
    Ok(())
}

/// The first message of a raw connection.
async fn first_message(
    connection: &mut RawConnection,
) -> anyhow::Result<Option<roost_proto::v1::server_message::Body>> {
    Ok(tokio::time::timeout(WAIT, connection.1.message())
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {WAIT:?}"))??
        .and_then(|m| m.body))
}

/// Past `[workers] max_leader_connections`, a worker that dials the leader is sent to a follower
/// in turn, which relays it (`roost-server/src/workers/spread.rs`); one sent away that dials the
/// leader again at once (it could not reach the follower) is served by the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn past_its_bound_the_leader_sends_workers_that_dial_it_to_followers_in_turn(
) -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    // Leases that outlast the test: these raw workers do not renew them.
    let config = WorkerConfig {
        max_leader_connections: 1,
        renew_interval_ms: 1000,
        lease_ttl_ms: 60_000,
        ..WorkerConfig::default()
    };
    let c = TestCluster::start_with_workers(3, test_timing(), config).await?;
    let token = join_token(&c).await?;
    let leader = c.leader().await?;
    let followers: BTreeSet<String> = c
        .ids()
        .into_iter()
        .filter(|id| *id != leader)
        .map(|id| c.grpc_addr(id))
        .collect();
    let leader_addr = c.grpc_addr(leader);
    let mut first = raw_connection_as("w1", &leader_addr, &token, vec![], vec![]).await?;
    match first_message(&mut first).await? {
        Some(Body::Registered(_)) => {}
        other => anyhow::bail!("the leader under its bound served no worker: {other:?}"),
    }
    let mut sent_to = BTreeSet::new();
    let mut kept = Vec::new();
    for id in ["w2", "w3"] {
        let mut dialed = raw_connection_as(id, &leader_addr, &token, vec![], vec![]).await?;
        let follower = match first_message(&mut dialed).await? {
            Some(Body::Redirect(r)) => r.leader_grpc_addr,
            other => anyhow::bail!("{id} was not sent to a follower: {other:?}"),
        };
        assert!(followers.contains(&follower), "{follower} is no follower");
        sent_to.insert(follower.clone());
        let mut relayed = raw_connection_as(id, &follower, &token, vec![], vec![]).await?;
        match first_message(&mut relayed).await? {
            Some(Body::Registered(r)) => assert_eq!(r.node_id, leader),
            other => anyhow::bail!("the follower did not relay {id}: {other:?}"),
        }
        kept.push(relayed);
    }
    assert_eq!(
        sent_to, followers,
        "the workers sent away go to each follower in turn"
    );
    assert_eq!(gauge(&c, leader, "roost_workers_connected").await?, 3);
    // w4 cannot reach the follower it is sent to and dials the leader again: served there.
    let mut sent_away = raw_connection_as("w4", &leader_addr, &token, vec![], vec![]).await?;
    assert!(
        matches!(
            first_message(&mut sent_away).await?,
            Some(Body::Redirect(_))
        ),
        "w4 was not sent away"
    );
    let mut again = raw_connection_as("w4", &leader_addr, &token, vec![], vec![]).await?;
    match first_message(&mut again).await? {
        Some(Body::Registered(_)) => {}
        other => anyhow::bail!("a worker back at once was sent away again: {other:?}"),
    }
    drop((first, kept, sent_away, again));
    c.shutdown().await;
    Ok(())
}

/// With `[workers] relay = false` a follower sends a worker that dials it to the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_relay_off_a_follower_sends_workers_to_the_leader() -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let config = WorkerConfig {
        relay: false,
        ..WorkerConfig::default()
    };
    let c = TestCluster::start_with_workers(3, test_timing(), config).await?;
    let token = join_token(&c).await?;
    let (leader, follower) = leader_and_follower(&c).await?;
    let mut dialed = raw_connection(&c.grpc_addr(follower), &token, vec![], vec![]).await?;
    match first_message(&mut dialed).await? {
        Some(Body::Redirect(r)) => assert_eq!(r.leader_grpc_addr, c.grpc_addr(leader)),
        other => anyhow::bail!("the follower did not send the worker to the leader: {other:?}"),
    }
    c.shutdown().await;
    Ok(())
}

/// When the leader a worker is relayed to dies, the relayed stream ends (or tells the worker to
/// dial again, naming no address), and the worker that dials the same follower again is
/// registered by the new leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relayed_worker_reaches_the_new_leader_through_its_follower_after_a_leader_kill(
) -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster().await?;
    let token = join_token(&c).await?;
    let (leader, follower) = leader_and_follower(&c).await?;
    let mut relayed = raw_connection(&c.grpc_addr(follower), &token, vec![], vec![]).await?;
    match first_message(&mut relayed).await? {
        Some(Body::Registered(r)) => assert_eq!(r.node_id, leader),
        other => anyhow::bail!("the follower did not relay the registration: {other:?}"),
    }
    c.kill(leader).await;
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match relayed.1.message().await {
                Ok(Some(m)) => match m.body {
                    Some(Body::Redirect(r)) => return Some(r.leader_grpc_addr),
                    _ => continue,
                },
                Ok(None) | Err(_) => return None,
            }
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("the relayed stream outlived its leader by {WAIT:?}"))?;
    assert_eq!(
        ended.unwrap_or_default(),
        "",
        "a relayed redirect names no address"
    );
    drop(relayed);
    let new_leader = wait_for("a registration with the new leader", WAIT, || async {
        let mut again = raw_connection(&c.grpc_addr(follower), &token, vec![], vec![])
            .await
            .ok()?;
        match first_message(&mut again).await.ok()? {
            Some(Body::Registered(r)) => Some(r.node_id),
            _ => None,
        }
    })
    .await?;
    assert_ne!(new_leader, leader, "registered by the node that was killed");
    c.shutdown().await;
    Ok(())
}
