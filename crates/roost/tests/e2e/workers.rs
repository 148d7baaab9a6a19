//! Wakes, runs and worker leases on a 3-node cluster with in-process workers that speak the
//! real protocol.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use roost_core::RunStatus;
use roost_proto::v1 as pb;
use roost_server::workers::WorkerConfig;
use roost_testkit::{test_timing, wait_for, Http, TestCluster, TestWorker};

use crate::support::str_field;

pub(crate) const WAIT: Duration = Duration::from_secs(30);

fn fast_leases() -> WorkerConfig {
    WorkerConfig {
        renew_interval_ms: 200,
        lease_ttl_ms: 1500,
        ..WorkerConfig::default()
    }
}

pub(crate) async fn cluster() -> anyhow::Result<TestCluster> {
    TestCluster::start_with_workers(3, test_timing(), fast_leases()).await
}

pub(crate) async fn join_token(c: &TestCluster) -> anyhow::Result<String> {
    let leader = c.leader().await?;
    let t = c
        .admin(leader)
        .post("/api/workers/join-tokens", json!({ "name": "test" }))
        .await?
        .ok()?;
    Ok(str_field(&t, "token"))
}

/// An agent with a key; returns (id, key).
pub(crate) async fn agent(
    c: &TestCluster,
    name: &str,
    policy: Value,
) -> anyhow::Result<(String, String)> {
    let leader = c.leader().await?;
    let body = json!({ "name": name, "heartbeat": policy });
    let a = c
        .admin(leader)
        .post(&format!("/api/companies/{}/agents", c.company_id), body)
        .await?
        .ok()?;
    let id = str_field(&a, "id");
    let key = c
        .admin(leader)
        .post(&format!("/api/agents/{id}/keys"), json!({}))
        .await?
        .ok()?;
    Ok((id, str_field(&key, "token")))
}

pub(crate) fn one_at_a_time() -> Value {
    json!({ "enabled": false, "intervalSec": 300, "wakeOnDemand": true, "maxConcurrentRuns": 1, "skipWhenIdle": true })
}

pub(crate) async fn assigned_issue(
    http: &Http,
    c: &TestCluster,
    title: &str,
    agent: &str,
) -> anyhow::Result<String> {
    let body = json!({ "title": title, "status": "todo", "assigneeAgentId": agent });
    Ok(str_field(
        &http
            .post(&format!("/api/companies/{}/issues", c.company_id), body)
            .await?
            .ok()?,
        "id",
    ))
}

pub(crate) async fn run_status(http: &Http, run: &str) -> anyhow::Result<String> {
    Ok(str_field(
        &http
            .get(&format!("/api/heartbeat-runs/{run}"))
            .await?
            .ok()?,
        "status",
    ))
}

async fn wakes(http: &Http, c: &TestCluster, agent: &str) -> anyhow::Result<Vec<Value>> {
    let list = http
        .get(&format!(
            "/api/companies/{}/wakes?agentId={agent}&limit=1000",
            c.company_id
        ))
        .await?
        .ok()?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// 50 comments while the agent runs make exactly one follow-up run, which receives all 50
/// comment ids in order; the agent's own comment wakes nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_comments_during_a_run_make_one_follow_up_with_every_comment_in_order(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let worker = TestWorker::connect(c.grpc_addrs(), &join_token(&c).await?, "w1", 4).await?;
    let (a, key) = agent(&c, "writer", one_at_a_time()).await?;
    let issue = assigned_issue(&c.admin(1), &c, "long task", &a).await?;
    let first = worker.wait_assignments(1, WAIT).await?.remove(0);
    assert_eq!(first.wake_reason(), pb::WakeReason::IssueAssigned);

    // The agent's own comment, made by its run, is suppressed.
    let own = c.http(2).with_token(&key).with_run(&first.run_id);
    own.post(
        &format!("/api/issues/{issue}/comments"),
        json!({ "body": "starting" }),
    )
    .await?
    .ok()?;
    let mut ids = Vec::new();
    for n in 0..50 {
        let node = c.ids()[n % 3];
        let reply = c
            .admin(node)
            .post(
                &format!("/api/issues/{issue}/comments"),
                json!({ "body": format!("note {n}") }),
            )
            .await?
            .ok()?;
        ids.push(str_field(&reply, "id"));
    }
    worker.finish(&first.run_id, RunStatus::Succeeded).await?;
    let all = worker.wait_assignments(2, WAIT).await?;
    let follow_up = &all[1];
    assert_eq!(follow_up.comment_ids, ids, "every comment, in order");
    worker
        .finish(&follow_up.run_id, RunStatus::Succeeded)
        .await?;
    // Nothing else is owed: no third run.
    let leader = c.leader().await?;
    let w = wakes(&c.admin(leader), &c, &a).await?;
    let suppressed: Vec<&Value> = w.iter().filter(|x| x["status"] == "suppressed").collect();
    assert_eq!(suppressed.len(), 1);
    assert_eq!(suppressed[0]["statusReason"], "self_authored");
    assert!(
        w.iter()
            .all(|x| !["queued", "deferred"].contains(&x["status"].as_str().unwrap_or(""))),
        "{w:?}"
    );
    assert_eq!(worker.assignments().len(), 2);
    c.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repeated_wake_key_through_another_node_creates_nothing_new() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let (a, _) = agent(&c, "woken", one_at_a_time()).await?;
    let body = json!({ "reason": "on_demand", "idempotencyKey": "wake-once" });
    let first = c
        .admin(1)
        .post(&format!("/api/agents/{a}/wakeup"), body.clone())
        .await?;
    assert_eq!(first.status.as_u16(), 202, "{}", first.body);
    let again = c
        .admin(3)
        .post(&format!("/api/agents/{a}/wakeup"), body)
        .await?
        .ok()?;
    assert_eq!(first.body["wake"]["id"], again["wake"]["id"]);
    assert_eq!(wakes(&c.admin(2), &c, &a).await?.len(), 1);
    c.shutdown().await;
    Ok(())
}

/// With `maxConcurrentRuns = 1` and wakes arriving through all three nodes at once, the agent
/// never has two runs at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_concurrent_runs_holds_with_wakes_through_every_node() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let worker = TestWorker::connect(c.grpc_addrs(), &join_token(&c).await?, "w1", 8).await?;
    let (a, _) = agent(&c, "single", one_at_a_time()).await?;
    let mut creators = Vec::new();
    for n in 0..6 {
        let (http, company) = (c.admin(c.ids()[n % 3]), c.company_id.clone());
        let a = a.clone();
        creators.push(tokio::spawn(async move {
            let body =
                json!({ "title": format!("task {n}"), "status": "todo", "assigneeAgentId": a });
            http.post(&format!("/api/companies/{company}/issues"), body)
                .await?
                .ok()
        }));
    }
    for t in creators {
        t.await??;
    }
    let mut finished = BTreeSet::new();
    while finished.len() < 6 {
        let running = wait_for("an assignment", WAIT, || async {
            let r = worker.running();
            (!r.is_empty()).then_some(r)
        })
        .await?;
        assert_eq!(
            running.len(),
            1,
            "two runs of a max-1 agent at once: {running:?}"
        );
        // Give a wrong second assignment a moment to show up before finishing this run.
        let leader = c.leader().await?;
        let live = c
            .admin(leader)
            .get(&format!(
                "/api/companies/{}/heartbeat-runs?agentId={a}",
                c.company_id
            ))
            .await?
            .ok()?;
        let live = live
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| ["assigned", "running"].contains(&r["status"].as_str().unwrap_or("")))
            .count();
        assert!(live <= 1, "{live} live runs");
        worker.finish(&running[0], RunStatus::Succeeded).await?;
        finished.insert(running[0].clone());
        wait_for("the run to end", WAIT, || async {
            (!worker.running().contains(&running[0])).then_some(())
        })
        .await?;
    }
    assert_eq!(worker.assignments().len(), 6);
    c.shutdown().await;
    Ok(())
}

/// A fleet that would renew more often than `max_renewals_per_sec` gets a longer interval and
/// a longer lease, in proportion, and its workers follow: the leader's renewal load stays
/// bounded as workers are added (Nomad scales heartbeat TTLs the same way). A worker that falls
/// silent is then lost after the stretched lease, not the configured one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_past_the_renewal_budget_renews_less_often_on_longer_leases() -> anyhow::Result<()>
{
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    // 4 workers renewing every 200 ms would be 20 renewals a second.
    let config = WorkerConfig {
        max_renewals_per_sec: 10,
        ..fast_leases()
    };
    let c = TestCluster::start_with_workers(3, test_timing(), config.clone()).await?;
    let token = join_token(&c).await?;
    let mut workers = Vec::new();
    for n in 0..4 {
        workers.push(TestWorker::connect(c.grpc_addrs(), &token, &format!("w{n}"), 1).await?);
    }
    let terms = config.lease_terms(4);
    assert_eq!((terms.renew_interval_ms, terms.lease_ttl_ms), (400, 3000));
    for w in &workers {
        wait_for(
            &format!("{} on the stretched terms", w.id),
            WAIT,
            || async { (w.lease_terms() == (400, 3000)).then_some(()) },
        )
        .await?;
    }

    // The server counts the lease from the last renewal it received, sent at most one interval
    // before the pause: lost no sooner than 3000 - 400 ms after it. Under the configured lease
    // (1500 ms) it would be lost within about 1.5 s.
    workers[0].pause_renewals();
    let paused = Instant::now();
    let leader = c.leader().await?;
    let admin = c.admin(leader);
    let lost_after = wait_for("w0 declared lost", WAIT, || async {
        let list = admin.get("/api/workers").await.ok()?.ok().ok()?;
        let lost = list
            .as_array()?
            .iter()
            .any(|w| w["id"] == "w0" && w["status"] == "lost");
        lost.then(|| paused.elapsed())
    })
    .await?;
    assert!(
        lost_after >= Duration::from_millis(2600),
        "w0 was lost {lost_after:?} after it fell silent: sooner than its stretched lease allows"
    );
    Ok(())
}

/// A worker that stops renewing its lease loses its runs within lease + 1 s; the issue can be
/// checked out again; the retry runs on another worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_silent_worker_loses_its_runs_within_the_lease_and_the_retry_runs_elsewhere(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let silent = TestWorker::connect(c.grpc_addrs(), &token, "silent", 4).await?;
    let (a, key) = agent(&c, "victim", one_at_a_time()).await?;
    let issue = assigned_issue(&c.admin(1), &c, "doomed", &a).await?;
    let run = silent.wait_assignments(1, WAIT).await?.remove(0);
    let agent_http = c.http(2).with_token(&key).with_run(&run.run_id);
    agent_http
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": a, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    // The second worker joins only now, so the first run could only go to the silent one.
    let healthy = TestWorker::connect(c.grpc_addrs(), &token, "healthy", 4).await?;
    silent.pause_renewals();
    let stopped = Instant::now();
    let leader = c.leader().await?;
    let lost = wait_for("the run to be lost", WAIT, || async {
        (run_status(&c.admin(leader), &run.run_id).await.ok()? == "lost").then(|| stopped.elapsed())
    })
    .await?;
    let bound = Duration::from_millis(fast_leases().lease_ttl_ms + 1000);
    assert!(
        lost <= bound,
        "lost after {lost:?}, more than lease + 1 s ({bound:?})"
    );
    let retry = healthy.wait_assignments(1, WAIT).await?.remove(0);
    assert_eq!(retry.wake_reason(), pb::WakeReason::ProcessLostRetry);
    let retry_http = c.http(3).with_token(&key).with_run(&retry.run_id);
    retry_http
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": a, "expectedStatuses": ["in_progress"] }),
        )
        .await?
        .ok()?;
    // The dead run's late write is fenced.
    let late = agent_http
        .post(
            &format!("/api/issues/{issue}/comments"),
            json!({ "body": "I'm back" }),
        )
        .await?;
    assert_eq!((late.status.as_u16(), late.code()), (409, "stale_run"));
    // When the lost worker speaks again it is told to register anew, and is online again.
    let connections = silent.connections();
    silent.resume_renewals();
    wait_for("the lost worker to register again", WAIT, || async {
        (silent.connections() > connections).then_some(())
    })
    .await?;
    let workers = c.admin(leader).get("/api/workers").await?.ok()?;
    let status = workers
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["id"] == "silent")
        .map(|w| w["status"].clone());
    assert_eq!(status, Some(json!("online")));
    c.shutdown().await;
    Ok(())
}

/// Killing the leader while ten runs are running loses none of them: the workers move to the
/// new leader, which gives their leases a full TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_kill_during_ten_running_runs_loses_none() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster().await?;
    let token = join_token(&c).await?;
    let w1 = TestWorker::connect(c.grpc_addrs(), &token, "w1", 5).await?;
    let w2 = TestWorker::connect(c.grpc_addrs(), &token, "w2", 5).await?;
    let policy = json!({ "enabled": false, "intervalSec": 300, "wakeOnDemand": true, "maxConcurrentRuns": 10, "skipWhenIdle": true });
    let (a, _) = agent(&c, "busy", policy).await?;
    for n in 0..10 {
        assigned_issue(&c.admin(1), &c, &format!("job {n}"), &a).await?;
    }
    wait_for("ten running runs", WAIT, || async {
        (w1.running().len() + w2.running().len() == 10).then_some(())
    })
    .await?;
    let runs: Vec<String> = w1.running().into_iter().chain(w2.running()).collect();
    let (s1, s2) = (w1.connections(), w2.connections());
    let old = c.leader().await?;
    c.kill(old).await;
    let new = c.leader().await?;
    wait_for("both workers on the new leader", WAIT, || async {
        (w1.connections() > s1 && w2.connections() > s2).then_some(())
    })
    .await?;
    // Longer than a lease: a lease the new leader had not renewed would have expired by now.
    tokio::time::sleep(Duration::from_millis(fast_leases().lease_ttl_ms * 2)).await;
    for run in &runs {
        assert_eq!(
            run_status(&c.admin(new), run).await?,
            "running",
            "run {run}"
        );
    }
    assert_eq!(w1.running().len() + w2.running().len(), 10);
    c.shutdown().await;
    Ok(())
}

/// Timer wakes across a leader failover are neither lost nor doubled: one tick per interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timer_wakes_across_a_failover_are_neither_lost_nor_doubled() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster().await?;
    let policy = json!({ "enabled": true, "intervalSec": 10, "wakeOnDemand": true, "maxConcurrentRuns": 1, "skipWhenIdle": false });
    let (a, _) = agent(&c, "ticker", policy).await?;
    let started = Instant::now();
    let ticks = |http: Http, company: String, a: String| async move {
        let list = http
            .get(&format!(
                "/api/companies/{company}/wakes?agentId={a}&limit=1000"
            ))
            .await
            .ok()?
            .ok()
            .ok()?;
        let mut at: Vec<i64> = list
            .as_array()?
            .iter()
            .filter(|w| w["reason"] == "heartbeat_timer")
            .filter_map(|w| {
                w["createdAt"]
                    .as_str()
                    .and_then(roost_core::Timestamp::parse_rfc3339)
                    .map(|t| t.0)
            })
            .collect();
        at.sort_unstable();
        Some(at)
    };
    let leader = c.leader().await?;
    wait_for("the first tick", Duration::from_secs(15), || {
        ticks(c.admin(leader), c.company_id.clone(), a.clone()).then_some_nonempty()
    })
    .await?;
    c.kill(leader).await;
    let survivor = c.leader().await?;
    wait_for("two more ticks", Duration::from_secs(30), || async {
        let t = ticks(c.admin(survivor), c.company_id.clone(), a.clone()).await?;
        (t.len() >= 3).then_some(())
    })
    .await?;
    let at = ticks(c.admin(survivor), c.company_id.clone(), a.clone())
        .await
        .unwrap_or_default();
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap >= 10_000, "two ticks {gap} ms apart: doubled");
        assert!(
            gap <= 10_000 + 5_000,
            "a gap of {gap} ms: a tick was lost across the failover"
        );
    }
    let elapsed = started.elapsed().as_secs() as usize;
    assert!(
        at.len() <= elapsed / 10 + 1,
        "{} ticks in {elapsed} s",
        at.len()
    );
    c.shutdown().await;
    Ok(())
}

trait NonEmpty {
    async fn then_some_nonempty(self) -> Option<()>;
}

impl<F: std::future::Future<Output = Option<Vec<i64>>>> NonEmpty for F {
    async fn then_some_nonempty(self) -> Option<()> {
        self.await.filter(|v| !v.is_empty()).map(|_| ())
    }
}

/// Opens a raw worker connection on `addr`; returns the outbound sender and the inbound stream.
pub(crate) async fn raw_connection(
    addr: &str,
    token: &str,
    running: Vec<String>,
    unacknowledged: Vec<String>,
) -> anyhow::Result<RawConnection> {
    raw_connection_as("raw", addr, token, running, unacknowledged).await
}

pub(crate) type RawConnection = (
    tokio::sync::mpsc::Sender<roost_proto::v1::WorkerMessage>,
    tonic::Streaming<roost_proto::v1::ServerMessage>,
);

/// [`raw_connection`] as worker `worker_id`.
pub(crate) async fn raw_connection_as(
    worker_id: &str,
    addr: &str,
    token: &str,
    running: Vec<String>,
    unacknowledged: Vec<String>,
) -> anyhow::Result<RawConnection> {
    use roost_proto::v1::{worker_message, Register, WorkerMessage};
    let mut client =
        roost_proto::v1::worker_client::WorkerClient::connect(format!("http://{addr}")).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let register = Register {
        worker_id: worker_id.into(),
        name: worker_id.into(),
        join_token: token.into(),
        adapters: vec![pb::AdapterType::Process as i32],
        labels: Default::default(),
        slots: 2,
        version: "test".into(),
        running_run_ids: running,
        unacknowledged_run_ids: unacknowledged,
        worker_credential: roost_testkit::worker_credential(token, worker_id),
    };
    tx.send(WorkerMessage {
        body: Some(worker_message::Body::Register(register)),
    })
    .await?;
    let inbound = client
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok((tx, inbound))
}

/// Waits on a raw connection for its next assignment; returns the run id.
pub(crate) async fn next_assignment(
    inbound: &mut tonic::Streaming<roost_proto::v1::ServerMessage>,
) -> anyhow::Result<String> {
    use roost_proto::v1::server_message::Body;
    loop {
        match inbound.message().await?.and_then(|m| m.body) {
            Some(Body::Assignment(a)) => return Ok(a.run_id),
            Some(_) => continue,
            None => anyhow::bail!("the connection ended before an assignment"),
        }
    }
}

/// Regression: a worker's `RunStarted` sent to a leader that died before committing it left the
/// run `assigned` forever, though the worker ran it and said so when it reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_start_died_with_the_leader_is_confirmed_on_reconnect() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let leader = c.leader().await?;
    let (a, _) = agent(&c, "raw-agent", one_at_a_time()).await?;
    let (tx, mut inbound) =
        raw_connection(&c.grpc_addr(leader), &token, Vec::new(), Vec::new()).await?;
    assigned_issue(&c.admin(leader), &c, "started unseen", &a).await?;
    let run_id = next_assignment(&mut inbound).await?;
    // The worker starts the agent but its RunStarted is lost: the connection just ends.
    drop(tx);
    drop(inbound);
    assert_eq!(run_status(&c.admin(leader), &run_id).await?, "assigned");
    let (_tx, _inbound) = raw_connection(
        &c.grpc_addr(leader),
        &token,
        vec![run_id.clone()],
        Vec::new(),
    )
    .await?;
    wait_for("the run to be running", WAIT, || async {
        (run_status(&c.admin(leader), &run_id).await.ok()? == "running").then_some(())
    })
    .await?;
    c.shutdown().await;
    Ok(())
}

/// A worker that comes back without a run the cluster has as running (it restarted) gets that
/// run ended as failed, not left running forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_a_restarted_worker_no_longer_runs_is_ended_as_failed() -> anyhow::Result<()> {
    use roost_proto::v1::{worker_message, RunStarted, WorkerMessage};
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let leader = c.leader().await?;
    let (a, _) = agent(&c, "forgotten", one_at_a_time()).await?;
    let (tx, mut inbound) =
        raw_connection(&c.grpc_addr(leader), &token, Vec::new(), Vec::new()).await?;
    assigned_issue(&c.admin(leader), &c, "lost in a restart", &a).await?;
    let run_id = next_assignment(&mut inbound).await?;
    let started = RunStarted {
        run_id: run_id.clone(),
    };
    tx.send(WorkerMessage {
        body: Some(worker_message::Body::RunStarted(started)),
    })
    .await?;
    wait_for("the run to be running", WAIT, || async {
        (run_status(&c.admin(leader), &run_id).await.ok()? == "running").then_some(())
    })
    .await?;
    drop(tx);
    drop(inbound);
    let (_tx, _inbound) =
        raw_connection(&c.grpc_addr(leader), &token, Vec::new(), Vec::new()).await?;
    wait_for("the run to be failed", WAIT, || async {
        (run_status(&c.admin(leader), &run_id).await.ok()? == "failed").then_some(())
    })
    .await?;
    c.shutdown().await;
    Ok(())
}

/// The server's half of the regression above (fault suite, `membership_change` seed 30545): a
/// worker that reconnects holding an unacknowledged result gets that run neither failed nor
/// sent again; the result it then sends is committed and acknowledged, and a second copy of it
/// (the first ack was lost) is acknowledged too, so the worker can forget it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_lost_with_its_connection_is_taken_and_acknowledged_when_sent_again(
) -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    use roost_proto::v1::{worker_message, RunFinished, WorkerMessage};
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let leader = c.leader().await?;
    let (a, _) = agent(&c, "unacknowledged", one_at_a_time()).await?;
    let (tx, mut inbound) =
        raw_connection(&c.grpc_addr(leader), &token, Vec::new(), Vec::new()).await?;
    assigned_issue(&c.admin(leader), &c, "result lost", &a).await?;
    let run_id = next_assignment(&mut inbound).await?;
    // The run starts and ends on the worker, but its messages die with the connection.
    drop(tx);
    drop(inbound);
    let (tx, mut inbound) = raw_connection(
        &c.grpc_addr(leader),
        &token,
        Vec::new(),
        vec![run_id.clone()],
    )
    .await?;
    let finished = || WorkerMessage {
        body: Some(worker_message::Body::RunFinished(RunFinished {
            run_id: run_id.clone(),
            status: pb::RunStatus::Succeeded as i32,
            ..Default::default()
        })),
    };
    // Two copies: the second finds the run ended and must be acknowledged all the same.
    tx.send(finished()).await?;
    tx.send(finished()).await?;
    let mut acks = 0;
    while acks < 2 {
        let body = tokio::time::timeout(WAIT, inbound.message())
            .await
            .map_err(|_| anyhow::anyhow!("no acknowledgement within {WAIT:?}"))??
            .and_then(|m| m.body);
        match body {
            Some(Body::RunFinishedAck(ack)) => {
                assert_eq!(ack.run_id, run_id);
                acks += 1;
            }
            Some(Body::Assignment(a)) => {
                anyhow::bail!(
                    "run {} was sent again though its result was on the way",
                    a.run_id
                )
            }
            Some(_) => continue,
            None => anyhow::bail!("the connection ended before the acknowledgements"),
        }
    }
    assert_eq!(run_status(&c.admin(leader), &run_id).await?, "succeeded");
    c.shutdown().await;
    Ok(())
}

/// Regression (a_worker_kept_by_a_node_that_no_longer_leads, found by the fault suite's
/// mixed_faults): a node that did not lead took a worker's connection while no leader was known
/// (its registration then reached the new leader by forwarding), and kept it: no lease of the
/// leader's covered the worker, so its agent's wakes stayed queued. A node that does not lead
/// now sends every worker on, to the leader or, with none known, to try again; and a connection
/// that outlives its node's leadership is sent on at its next lease renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_does_not_lead_keeps_no_worker_connection_even_with_no_leader_known(
) -> anyhow::Result<()> {
    use roost_proto::v1::server_message::Body;
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster().await?;
    let token = join_token(&c).await?;
    let leader = c.leader().await?;
    let follower = c
        .ids()
        .into_iter()
        .find(|id| *id != leader)
        .unwrap_or(leader);
    // The worker's first connection, on the leader, makes its credential.
    let (tx, mut inbound) =
        raw_connection(&c.grpc_addr(leader), &token, Vec::new(), Vec::new()).await?;
    match inbound.message().await?.and_then(|m| m.body) {
        Some(Body::Registered(_)) => {}
        other => anyhow::bail!("expected the leader to register the worker, got {other:?}"),
    }
    drop((tx, inbound));
    // Cut off from its peers, the follower campaigns and knows no leader.
    c.isolate(follower);
    wait_for("the isolated node to know no leader", WAIT, || async {
        c.report(follower).leader_id.is_none().then_some(())
    })
    .await?;
    let (_tx, mut inbound) =
        raw_connection(&c.grpc_addr(follower), &token, Vec::new(), Vec::new()).await?;
    let first = inbound.message().await?.and_then(|m| m.body);
    match first {
        Some(Body::Redirect(r)) => assert!(r.leader_grpc_addr.is_empty(), "{r:?}"),
        other => anyhow::bail!("expected a redirect from a node that does not lead, got {other:?}"),
    }
    c.heal();
    c.shutdown().await;
    Ok(())
}
