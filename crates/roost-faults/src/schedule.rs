//! The seeded fault schedules: which fault, on which node, for how long. Every schedule
//! leaves every node up and every link healed when it returns, and reports when (on the
//! recorder's clock) it last healed, continued or restarted a node: the liveness checker's
//! heal.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;
use roost_testkit::{NetCluster, Signal};

use crate::workload::Recorder;

/// What a fault schedule did.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// How many faults (or membership changes) it made.
    pub faults: usize,
    /// When its last fault ended (link healed, node continued, restarted or removed), on the
    /// recorder's clock; `None` if it made none.
    pub healed_ns: Option<i64>,
}

/// The faults a scenario injects, one every few seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The leader alone on one side: it must step down; the majority elects and serves.
    LeaderPartition,
    /// One follower cut off from the others.
    FollowerIsolation,
    /// SIGKILL of the leader, restarted a few seconds later.
    LeaderKillLoop,
    /// SIGSTOP of the leader for longer than the election timeout, then SIGCONT.
    LeaderPause,
    /// A worker cut off from every node mid-run for three lease lengths.
    WorkerCutOff,
    /// Overlapping faults: delay and loss on one node's link while another is killed, paused
    /// or partitioned; a bridge (two majorities sharing one node); a flapping link.
    Mixed,
    /// A node added (learner, then voter) and a voter removed, sometimes the leader, again
    /// and again while the clients run.
    MembershipChange,
    /// SIGKILL of two of five nodes at once (half the time one is the leader), restarted
    /// together.
    MinorityKill,
}

/// Restarts, as a supervisor would, every node that exited on its own since the last look
/// (`roost server` exits when its Raft core stops), and says so.
pub fn supervise(cluster: &mut NetCluster) -> anyhow::Result<()> {
    for (id, status) in cluster.restart_exited()? {
        println!("node {id} had exited on its own ({status}); restarted, as a supervisor would");
    }
    Ok(())
}

/// Injects `fault` on a seeded schedule until `deadline`; the cluster is healed on return.
pub async fn inject(
    cluster: &mut NetCluster,
    fault: Fault,
    rec: &Recorder,
    rng: &mut StdRng,
    deadline: Instant,
) -> anyhow::Result<Done> {
    let mut injected = 0;
    let mut healed_ns = None;
    while Instant::now() + Duration::from_secs(8) < deadline {
        let calm = Duration::from_millis(rng.gen_range(1500..3500));
        tokio::time::sleep(calm).await;
        supervise(cluster)?;
        let hold = Duration::from_millis(rng.gen_range(2500..5000));
        let leader = cluster.leader().await?;
        let mut victim = leader;
        match fault {
            Fault::LeaderPartition => {
                cluster.isolate(leader)?;
                tokio::time::sleep(hold).await;
                cluster.heal();
            }
            Fault::FollowerIsolation => {
                let followers: Vec<u64> = cluster
                    .ids()
                    .into_iter()
                    .filter(|id| *id != leader)
                    .collect();
                victim = followers[rng.gen_range(0..followers.len())];
                cluster.isolate(victim)?;
                tokio::time::sleep(hold).await;
                cluster.heal();
            }
            Fault::LeaderKillLoop => {
                cluster.signal(leader, Signal::Kill);
                tokio::time::sleep(hold).await;
                cluster.restart(leader)?;
            }
            Fault::LeaderPause => {
                cluster.signal(leader, Signal::Stop);
                tokio::time::sleep(hold).await;
                cluster.signal(leader, Signal::Cont);
            }
            Fault::MinorityKill => {
                victim = minority_kill(cluster, rng, leader, hold).await?;
            }
            Fault::WorkerCutOff | Fault::MembershipChange => {
                anyhow::bail!("{fault:?} has its own schedule")
            }
            Fault::Mixed => {
                victim = mixed_step(cluster, rng, leader, hold).await?;
            }
        }
        // Every arm above ends with the heal, the SIGCONT or the restart.
        healed_ns = Some(rec.now_ns());
        injected += 1;
        println!("fault {injected}: {fault:?} on node {victim} for {hold:?}");
    }
    Ok(Done {
        faults: injected,
        healed_ns,
    })
}

/// One step of the mixed schedule; returns the node it hit. Every node is up and every link
/// healed when it returns.
async fn mixed_step(
    cluster: &mut NetCluster,
    rng: &mut StdRng,
    leader: u64,
    hold: Duration,
) -> anyhow::Result<u64> {
    let ids = cluster.ids();
    let other = ids[rng.gen_range(0..ids.len())];
    let slow = ids[rng.gen_range(0..ids.len())];
    // Under everything else: 5-20 ms of delay and up to 10% loss on one node's link, where
    // the kernel has netem (sch_netem); a kernel without it gets the loss alone (nftables).
    // Below the 30 ms a Raft message may take at the default timing (openraft's timeout for it
    // is the heartbeat interval, docs/cluster.md): a slower link is a partition to Raft, which
    // the other faults cover.
    if let Err(e) = cluster.netem(slow, rng.gen_range(5..20), rng.gen_range(0..10)) {
        println!("no delay/loss this step: {e}");
    }
    let victim = match rng.gen_range(0..4) {
        0 => {
            cluster.signal(other, Signal::Kill);
            tokio::time::sleep(hold).await;
            cluster.restart(other)?;
            other
        }
        1 => {
            cluster.signal(leader, Signal::Stop);
            tokio::time::sleep(hold).await;
            cluster.signal(leader, Signal::Cont);
            leader
        }
        2 => {
            // A bridge: the leader's side and another side share one node.
            let rest: Vec<u64> = ids.iter().copied().filter(|id| *id != leader).collect();
            cluster.partition(&[&[leader], &[rest[1]]])?;
            tokio::time::sleep(hold).await;
            rest[0]
        }
        _ => {
            // A flapping link: the leader isolated and healed every 300-700 ms.
            let until = Instant::now() + hold;
            while Instant::now() < until {
                cluster.isolate(leader)?;
                tokio::time::sleep(Duration::from_millis(rng.gen_range(300..700))).await;
                cluster.heal();
                tokio::time::sleep(Duration::from_millis(rng.gen_range(300..700))).await;
            }
            leader
        }
    };
    cluster.heal();
    Ok(victim)
}

/// Kills two nodes at once (the leader and another, or two followers), holds, restarts both.
async fn minority_kill(
    cluster: &mut NetCluster,
    rng: &mut StdRng,
    leader: u64,
    hold: Duration,
) -> anyhow::Result<u64> {
    let mut followers: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|id| *id != leader)
        .collect();
    anyhow::ensure!(followers.len() >= 3, "a minority kill needs 5 nodes");
    let first = followers.remove(rng.gen_range(0..followers.len()));
    let second = if rng.gen_bool(0.5) {
        leader
    } else {
        followers.remove(rng.gen_range(0..followers.len()))
    };
    cluster.signal(first, Signal::Kill);
    cluster.signal(second, Signal::Kill);
    println!("  killed nodes {first} and {second} (leader {leader})");
    tokio::time::sleep(hold).await;
    cluster.restart(first)?;
    cluster.restart(second)?;
    Ok(second)
}
