//! Regression tests for the connection's delivery of results, found by the fault suite's
//! `worker_cut_off` scenario: a chatty agent's live log filled the outbox, the run's results
//! waited for the next connection, renewals without the run kept going out, and the leader sent
//! the ended run again on every renewal, which the worker ran again, dozens of times.

use std::time::Duration;

use roost_core::{AdapterType, RunStatus};
use roost_proto::v1::{worker_message, Assignment, RunFinished, WorkerMessage};
use roost_proto::ProtoEnum;
use tokio::sync::mpsc;

use super::{acknowledge, hold_result, lock, message, new_state, on_registered, renew_once, start};
use crate::config::WorkerConfig;
use crate::dial::{redial_pause, spread, REDIAL_MAX};

fn finished(run_id: &str) -> WorkerMessage {
    message(worker_message::Body::RunFinished(RunFinished {
        run_id: run_id.into(),
        status: RunStatus::Succeeded.to_proto(),
        ..Default::default()
    }))
}

fn kind(m: &WorkerMessage) -> String {
    match &m.body {
        Some(worker_message::Body::RunStarted(s)) => format!("started {}", s.run_id),
        Some(worker_message::Body::RunFinished(f)) => format!("finished {}", f.run_id),
        Some(worker_message::Body::LeaseRenewal(h)) if h.unacknowledged_run_ids.is_empty() => {
            format!("renewal {:?}", h.running_run_ids)
        }
        Some(worker_message::Body::LeaseRenewal(h)) => format!(
            "renewal {:?} unacknowledged {:?}",
            h.running_run_ids, h.unacknowledged_run_ids
        ),
        Some(worker_message::Body::RunLog(l)) => format!("log {}", l.run_id),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_result_the_full_outbox_refused_goes_out_before_the_next_renewal() {
    let state = new_state();
    let (tx, mut rx) = mpsc::channel(1);
    assert!(tx.try_send(finished("filler")).is_ok());
    lock(&state).outbox = Some(tx.clone());
    hold_result(&mut lock(&state), "r1", finished("r1"));

    let beat_state = state.clone();
    let beat = tokio::spawn(async move { renew_once(&tx, &beat_state, 1).await.is_ok() });
    let mut seen = Vec::new();
    for _ in 0..3 {
        let m = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a message within 5 s")
            .expect("channel open");
        seen.push(kind(&m));
    }
    assert!(beat.await.expect("beat task"));
    assert_eq!(
        seen,
        [
            "finished filler",
            "finished r1",
            "renewal [] unacknowledged [\"r1\"]"
        ],
        "the renewal that leaves r1 out must follow r1's result"
    );
    assert!(lock(&state).unsent.is_empty());
}

/// Drains what is queued on `rx` right now.
fn queued(rx: &mut mpsc::Receiver<WorkerMessage>) -> Vec<String> {
    std::iter::from_fn(|| rx.try_recv().ok())
        .map(|m| kind(&m))
        .collect()
}

/// Regression (fault suite, `membership_change` seed 30545): a run's start and result went to a
/// node that was being removed from the cluster and never committed them. The worker had
/// handed them to the connection, so it thought them delivered; the run stayed `assigned` for
/// good, and every later wake of the agent for that issue waited behind it. Results are now
/// kept and sent again until the cluster acknowledges them.
#[tokio::test]
async fn a_result_sent_to_a_node_that_never_committed_it_is_sent_again_until_acknowledged() {
    let state = new_state();
    let (old_session, mut old_rx) = mpsc::channel(16);
    on_registered(&state, &old_session, Duration::from_secs(5));
    hold_result(&mut lock(&state), "r1", finished("r1"));
    assert_eq!(queued(&mut old_rx), ["finished r1"]);

    // The connection breaks before any acknowledgement; the next one gets the result first.
    drop(old_rx);
    lock(&state).outbox = None;
    let (tx, mut rx) = mpsc::channel(16);
    on_registered(&state, &tx, Duration::from_secs(5));
    assert_eq!(queued(&mut rx), ["finished r1"]);

    // Within half a lease, a renewal only names it; after, the result goes again first.
    assert!(renew_once(&tx, &state, 1).await.is_ok());
    assert_eq!(queued(&mut rx), ["renewal [] unacknowledged [\"r1\"]"]);
    lock(&state).lease_ttl = Duration::ZERO;
    assert!(renew_once(&tx, &state, 2).await.is_ok());
    assert_eq!(
        queued(&mut rx),
        ["finished r1", "renewal [] unacknowledged [\"r1\"]"]
    );

    // Acknowledged: never sent or named again.
    acknowledge(&state, "r1");
    assert!(renew_once(&tx, &state, 3).await.is_ok());
    assert_eq!(queued(&mut rx), ["renewal []"]);
    let (next, mut next_rx) = mpsc::channel(16);
    on_registered(&state, &next, Duration::from_secs(5));
    assert!(queued(&mut next_rx).is_empty());
}

#[tokio::test]
async fn an_assignment_sent_again_after_its_run_ended_is_not_run_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WorkerConfig {
        work_dir: dir.path().to_path_buf(),
        grace_sec: 1,
        // No REST API here to keep memory in.
        agent_memory: false,
        ..WorkerConfig::default()
    };
    let state = new_state();
    let (tx, mut rx) = mpsc::channel(64);
    lock(&state).outbox = Some(tx);
    let assignment = Assignment {
        run_id: "run-once".into(),
        agent_id: "a1".into(),
        agent_name: "once".into(),
        adapter_type: AdapterType::Process.to_proto(),
        adapter_config_json: r#"{"command":"true"}"#.into(),
        ..Default::default()
    };
    start(assignment.clone(), &config, &state);
    let mut seen = Vec::new();
    while !seen.iter().any(|k: &String| k.starts_with("finished")) {
        let m = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the run ends within 10 s")
            .expect("channel open");
        seen.push(kind(&m));
    }
    assert_eq!(seen.first().map(String::as_str), Some("started run-once"));

    // The leader, not yet aware of the end, sends the same run again.
    start(assignment, &config, &state);
    // A start reports itself synchronously: nothing queued means nothing started.
    assert!(rx.try_recv().is_err(), "the ended run was started again");
    assert!(lock(&state).running.is_empty());
}

/// A stopping worker starts nothing: an assignment that arrives while it drains ends at once as
/// `cancelled` through the result path (held until acknowledged), so the cluster does not wait
/// for the worker's lease to run out to learn the run never ran.
#[tokio::test]
async fn an_assignment_while_draining_is_reported_cancelled_without_starting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WorkerConfig {
        work_dir: dir.path().to_path_buf(),
        agent_memory: false,
        ..WorkerConfig::default()
    };
    let state = new_state();
    let (tx, mut rx) = mpsc::channel(64);
    {
        let mut s = lock(&state);
        s.outbox = Some(tx);
        s.draining = true;
    }
    let assignment = Assignment {
        run_id: "late".into(),
        adapter_type: AdapterType::Process.to_proto(),
        adapter_config_json: r#"{"command":"true"}"#.into(),
        ..Default::default()
    };
    start(assignment.clone(), &config, &state);
    let m = rx.try_recv().expect("the refusal is queued at once");
    match m.body {
        Some(worker_message::Body::RunFinished(f)) => {
            assert_eq!(
                (f.run_id.as_str(), f.status()),
                ("late", roost_proto::v1::RunStatus::Cancelled)
            );
            assert!(f.error.contains("shutting down"), "{}", f.error);
        }
        other => panic!("expected a result, got {other:?}"),
    }
    {
        let s = lock(&state);
        assert!(s.running.is_empty() && s.tasks == 0);
        assert_eq!(s.refused, 1);
        assert!(s.unacknowledged.contains_key("late"));
    }
    // Sent again by a leader that has not seen the result yet: still nothing runs or repeats.
    start(assignment, &config, &state);
    assert!(rx.try_recv().is_err());
}

/// A worker whose leader went away dials the next server within 50 ms, then backs off from
/// about 50 ms to about 2 s while dials fail (it used to wait 500 ms after every ended
/// connection), each pause scattered over half to one and a half times its middle.
#[test]
fn a_worker_redials_at_once_after_a_working_connection_and_backs_off_to_2_s() {
    let ms = Duration::from_millis;
    assert_eq!(redial_pause(0, 0.0), Duration::ZERO);
    assert!(redial_pause(0, 0.999) < ms(50));
    assert_eq!(redial_pause(1, 0.5), ms(50));
    assert_eq!(redial_pause(2, 0.5), ms(100));
    assert_eq!(redial_pause(3, 0.5), ms(200));
    assert_eq!(redial_pause(6, 0.5), ms(1600));
    assert_eq!(redial_pause(7, 0.5), REDIAL_MAX);
    assert_eq!(redial_pause(u32::MAX, 0.5), REDIAL_MAX);
    assert_eq!(redial_pause(3, 0.0), ms(100));
    assert!(redial_pause(3, 0.999) < ms(300));
    assert!(redial_pause(u32::MAX, 0.999) < REDIAL_MAX * 3 / 2);
}

/// The spread is random and in [0, 1): pauses of a fleet differ.
#[test]
fn the_redial_spread_is_in_the_unit_interval_and_varies() {
    let draws: Vec<f64> = (0..64).map(|_| spread()).collect();
    assert!(draws.iter().all(|d| (0.0..1.0).contains(d)), "{draws:?}");
    assert!(draws.windows(2).any(|w| w[0] != w[1]), "{draws:?}");
}
