//! The membership-change schedule: three voters and a spare node slot. Each cycle starts the
//! spare with empty data, adds it as a learner, promotes it to voter, then removes a voter
//! (half the time the leader) and stops it; the removed node is the next cycle's spare. The
//! clients follow the change (they are given the new member and stop using the removed one
//! before it is stopped). Each change is one recorded operation.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::Rng;
use roost_check::{Action, OkResult, Outcome};
use roost_testkit::{wait_for, Http, NetCluster};
use serde_json::{json, Value};

use crate::schedule::Done;
use crate::workload::{classify, Recorder, Target};

/// Node slots of the scenario: three voters at any time, and one spare.
pub const SLOTS: u64 = 4;
/// The process id of the membership changes in the history.
const PROCESS: u64 = 20;
/// A change that catches up a learner (maybe from a snapshot) under load.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one step (add, promote, remove) may take, retries included.
const STEP_DEADLINE: Duration = Duration::from_secs(60);

/// Where `id` stands in the membership as member `asked` sees it: `None` if not a member,
/// `Some(voter)` otherwise; `Err` if `asked` did not answer.
async fn standing(cluster: &NetCluster, asked: u64, id: u64) -> Result<Option<bool>, ()> {
    let report = cluster
        .http(asked)
        .get("/api/cluster/node")
        .await
        .map_err(|_| ())?;
    let members = report.body["members"].as_array().ok_or(())?;
    Ok(members
        .iter()
        .find(|m| m["id"].as_u64() == Some(id))
        .map(|m| m["voter"].as_bool().unwrap_or(false)))
}

/// The current leader, if it is one of `ids`, as the first of `ids` that answers and knows
/// one reports it (an unreachable node is skipped).
async fn leader_among(cluster: &NetCluster, ids: &[u64]) -> Option<u64> {
    for id in ids {
        let Ok(r) = cluster.http(*id).get("/api/cluster/node").await else {
            continue;
        };
        if let Some(l) = r.body["leaderId"].as_u64() {
            if ids.contains(&l) {
                return Some(l);
            }
        }
    }
    None
}

/// One membership change, as sent over REST.
enum Change {
    /// `POST /api/cluster/nodes` with `learnerOnly`.
    AddLearner(u64, Value),
    /// `POST /api/cluster/nodes`: the learner becomes a voter.
    Promote(u64, Value),
    /// `DELETE /api/cluster/nodes/{id}`.
    Remove(u64),
}

impl Change {
    fn name(&self) -> &'static str {
        match self {
            Change::AddLearner(..) => "add_learner",
            Change::Promote(..) => "promote",
            Change::Remove(_) => "remove",
        }
    }

    fn node(&self) -> u64 {
        match self {
            Change::AddLearner(id, _) | Change::Promote(id, _) | Change::Remove(id) => *id,
        }
    }

    /// Where the node stands once the change took effect (see [`standing`]).
    fn wanted(&self) -> Option<bool> {
        match self {
            Change::AddLearner(..) => Some(false),
            Change::Promote(..) => Some(true),
            Change::Remove(_) => None,
        }
    }

    async fn send(&self, http: &Http) -> anyhow::Result<roost_testkit::Reply> {
        match self {
            Change::AddLearner(_, body) => {
                let mut body = body.clone();
                body["learnerOnly"] = json!(true);
                http.post("/api/cluster/nodes", body).await
            }
            Change::Promote(_, body) => http.post("/api/cluster/nodes", body.clone()).await,
            Change::Remove(id) => http.delete(&format!("/api/cluster/nodes/{id}")).await,
        }
    }
}

/// Sends one membership request through a random member other than the node it changes, and
/// records it.
async fn request(
    cluster: &NetCluster,
    rng: &mut StdRng,
    rec: &Recorder,
    change: &Change,
) -> Result<Value, Outcome> {
    let through: Vec<u64> = cluster
        .ids()
        .into_iter()
        .filter(|i| *i != change.node())
        .collect();
    let http = cluster.http(through[rng.gen_range(0..through.len())]);
    let call = rec.now_ns();
    let reply = classify(tokio::time::timeout(CHANGE_TIMEOUT, change.send(&http)).await);
    let action = Action::Other {
        name: change.name().into(),
        write: true,
    };
    let outcome = match &reply {
        Ok(_) => Outcome::Ok(OkResult::default()),
        Err(o) => o.clone(),
    };
    rec.record(PROCESS, call, action, outcome);
    reply
}

/// Repeats the change until the leader (among the other members) sees it in effect, or the
/// step deadline passes.
async fn apply(
    cluster: &NetCluster,
    rng: &mut StdRng,
    rec: &Recorder,
    change: Change,
) -> anyhow::Result<()> {
    let (name, id, wanted) = (change.name(), change.node(), change.wanted());
    let give_up = Instant::now() + STEP_DEADLINE;
    loop {
        let reply = request(cluster, rng, rec, &change).await;
        if let Err(o) = &reply {
            println!("  {name} {id}: {o:?}");
        }
        let seen = wait_for(
            &format!("{name} {id} to show"),
            Duration::from_secs(5),
            || async {
                let witnesses: Vec<u64> = cluster.ids().into_iter().filter(|i| *i != id).collect();
                let leader = leader_among(cluster, &witnesses).await?;
                (standing(cluster, leader, id).await.ok()? == wanted).then_some(())
            },
        )
        .await;
        if seen.is_ok() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "{name} of node {id} did not take effect within {STEP_DEADLINE:?}"
        );
    }
}

/// Runs membership cycles until `deadline`; returns how many changes were made and when the
/// last removed node was stopped.
pub async fn cycles(
    cluster: &mut NetCluster,
    target: &Target,
    rec: &Recorder,
    rng: &mut StdRng,
    deadline: Instant,
) -> anyhow::Result<Done> {
    let mut changes = 0;
    let mut healed_ns = None;
    while Instant::now() + Duration::from_secs(12) < deadline {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(1000..2500))).await;
        let members = cluster.ids();
        let Some(spare) = (1..=SLOTS).find(|id| !members.contains(id)) else {
            anyhow::bail!("no spare slot among {members:?}");
        };
        cluster.join(spare)?;
        let body = json!({ "id": spare, "grpcAddr": cluster.grpc_addr(spare),
                           "httpAddr": cluster.http_addr(spare),
                           "peerAddr": cluster.peer_addr(spare) });
        apply(cluster, rng, rec, Change::AddLearner(spare, body.clone())).await?;
        apply(cluster, rng, rec, Change::Promote(spare, body)).await?;
        target.set_urls(cluster.ids().iter().map(|i| cluster.base_url(*i)).collect());
        let voters: Vec<u64> = cluster.ids().into_iter().filter(|i| *i != spare).collect();
        let leader = leader_among(cluster, &cluster.ids()).await;
        let victim = match leader {
            Some(l) if l != spare && rng.gen_bool(0.5) => l,
            _ => {
                let followers: Vec<u64> = voters
                    .iter()
                    .copied()
                    .filter(|v| Some(*v) != leader)
                    .collect();
                followers[rng.gen_range(0..followers.len())]
            }
        };
        apply(cluster, rng, rec, Change::Remove(victim)).await?;
        let rest: Vec<u64> = cluster.ids().into_iter().filter(|i| *i != victim).collect();
        target.set_urls(rest.iter().map(|i| cluster.base_url(*i)).collect());
        cluster.leave(victim);
        // The cycle's last fault: from here on the members are whole (an election may follow).
        healed_ns = Some(rec.now_ns());
        wait_for("a leader among the members", STEP_DEADLINE, || {
            leader_among(cluster, &rest)
        })
        .await?;
        changes += 3;
        println!(
            "membership: node {spare} added and promoted, node {victim} removed{}",
            if Some(victim) == leader {
                " (the leader)"
            } else {
                ""
            }
        );
    }
    Ok(Done {
        faults: changes,
        healed_ns,
    })
}
