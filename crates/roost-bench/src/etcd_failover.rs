//! Failover of the etcd comparison: kill -9 of the leader to the first acknowledged checkout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use roost_proto::v1::control_client::ControlClient;
use tokio::task::JoinSet;

use crate::etcd::{
    call, checkout_txn, grant, roost_checkout, roost_clients, roost_leader, roost_release,
    RoostSide,
};
use crate::etcd_cluster::EtcdCluster;
use crate::etcd_pb as pb;
use crate::stats::{ms, percentile, us};

/// From `killed_at`, starts `attempt()` every 10 ms (each bounded to 5 s) until one returns
/// true; the time from `killed_at` to that acknowledgment.
pub(crate) async fn first_ack<F, Fut>(
    killed_at: Instant,
    mut attempt: F,
) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let mut inflight = JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                anyhow::ensure!(
                    killed_at.elapsed() < Duration::from_secs(30),
                    "no write acknowledged within 30 s of the kill"
                );
                let fut = attempt();
                inflight.spawn(async move {
                    matches!(tokio::time::timeout(Duration::from_secs(5), fut).await, Ok(true))
                });
            }
            Some(r) = inflight.join_next(), if !inflight.is_empty() => {
                if matches!(r, Ok(true)) {
                    return Ok(killed_at.elapsed());
                }
            }
        }
    }
}

pub(crate) async fn etcd_failover(c: &mut EtcdCluster, trials: usize) -> anyhow::Result<Vec<u64>> {
    let mut samples = Vec::new();
    for trial in 1..=trials {
        let leader = c.wait_healthy(Duration::from_secs(60)).await?;
        let writer = (0..3).find(|i| *i != leader).unwrap_or(0);
        let ch = c.connect(writer).await?;
        let lease = grant(&ch, 600).await?;
        let warm = format!("/roost-bench/failover/{trial}/warm-up").into_bytes();
        let r: pb::TxnResponse = call(&ch, pb::TXN, checkout_txn(&warm, b"warm-up", lease)).await?;
        anyhow::ensure!(r.succeeded, "warm-up checkout refused");
        let key = format!("/roost-bench/failover/{trial}/task").into_bytes();
        let killed_at = Instant::now();
        c.kill(leader);
        let recovered = first_ack(killed_at, || {
            let (ch, txn) = (ch.clone(), checkout_txn(&key, b"failover", lease));
            async move { call::<_, pb::TxnResponse>(&ch, pb::TXN, txn).await.is_ok() }
        })
        .await
        .with_context(|| format!("etcd trial {trial}"))?;
        eprintln!(
            "  etcd trial {trial:>2}: {} killed, first acknowledged checkout after {:.0} ms",
            c.members[leader].name,
            recovered.as_secs_f64() * 1000.0
        );
        samples.push(us(recovered));
        c.spawn(leader)?;
        c.wait_healthy(Duration::from_secs(60)).await?;
    }
    Ok(samples)
}

pub(crate) async fn roost_failover(r: &mut RoostSide, trials: usize) -> anyhow::Result<Vec<u64>> {
    let leader = roost_leader(&r.cluster).await?;
    let mut writer_client = roost_clients(
        &r.cluster.admin(leader),
        &r.company_id,
        1,
        trials + 1,
        "failover",
    )
    .await?;
    let client = Arc::new(writer_client.remove(0));
    let mut samples = Vec::new();
    for trial in 1..=trials {
        r.cluster.healthy_status(Duration::from_secs(60)).await?;
        let leader = roost_leader(&r.cluster).await?;
        let writer = r
            .cluster
            .nodes
            .iter()
            .map(|n| n.id)
            .find(|i| *i != leader)
            .unwrap_or(1);
        let ch = r.connect(writer).await?;
        let mut grpc = ControlClient::new(ch.clone());
        let warm = &client.issues[0];
        roost_checkout(&mut grpc, &client, warm)
            .await
            .context("warm-up checkout")?;
        roost_release(&mut grpc, &client, warm)
            .await
            .context("warm-up release")?;
        let issue = client.issues[trial].clone();
        let killed_at = Instant::now();
        r.kill(leader);
        let recovered = first_ack(killed_at, || {
            let (mut grpc, client, issue) = (
                ControlClient::new(ch.clone()),
                client.clone(),
                issue.clone(),
            );
            async move { roost_checkout(&mut grpc, &client, &issue).await.is_ok() }
        })
        .await
        .with_context(|| format!("Roost trial {trial}"))?;
        eprintln!(
            "  roost trial {trial:>2}: node {leader} killed, first acknowledged checkout after {:.0} ms",
            recovered.as_secs_f64() * 1000.0
        );
        samples.push(us(recovered));
        // Some attempts may still be in flight and check the issue out again: it is this
        // trial's alone, so nothing else depends on it.
        r.restart(leader)?;
    }
    r.cluster.healthy_status(Duration::from_secs(60)).await?;
    Ok(samples)
}

pub(crate) struct Failover {
    pub(crate) system: String,
    pub(crate) samples: Vec<u64>,
}

impl Failover {
    pub(crate) fn p(&self, q: f64) -> f64 {
        ms(percentile(&self.samples, q))
    }
    pub(crate) fn max(&self) -> f64 {
        ms(self.samples.last().copied().unwrap_or(0))
    }
    pub(crate) fn min(&self) -> f64 {
        ms(self.samples.first().copied().unwrap_or(0))
    }
}
