//! A purge openraft asks for with a snapshot install reaches the log file only once `state.db`
//! holds the snapshot, and the writes queued after it keep their order.

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::LogId;
use tokio::sync::mpsc;

use crate::log_writer_tests::{entry, queue_append, read_all};
use crate::{LogStore, StateMachineStore};

/// A node whose log and `state.db` both hold entries 1..=`last` (blank ones).
async fn node_at(dir: &std::path::Path, last: u64) -> (LogStore, StateMachineStore) {
    let (log, mut sm, _reader) = crate::open(dir, 1).await.expect("open");
    let entries: Vec<_> = (1..=last).map(|i| entry(1, i)).collect();
    let (flushed_tx, mut flushed) = mpsc::unbounded_channel();
    queue_append(&log, entries.clone(), &flushed_tx);
    assert_eq!(flushed.recv().await.expect("flush outcome"), Ok(()));
    sm.apply(entries).await.expect("apply");
    (log, sm)
}

/// What another node sends: a snapshot of entries 1..=`last`.
async fn leader_snapshot(
    dir: &std::path::Path,
    last: u64,
) -> openraft::Snapshot<crate::TypeConfig> {
    let (_log, mut sm) = node_at(dir, last).await;
    let mut builder = sm.get_snapshot_builder().await;
    openraft::RaftSnapshotBuilder::build_snapshot(&mut builder)
        .await
        .expect("build");
    sm.get_current_snapshot()
        .await
        .expect("read snapshot")
        .expect("a snapshot")
}

/// A node at entry 5 in the middle of installing a snapshot of entries 1..=20, in openraft's
/// order: the install goes to the state machine and the purge to the log at once. Entry 21
/// stands for any log write queued before the install is recorded. Returns the snapshot and
/// the outcome of that append.
async fn mid_install(
    dir: &std::path::Path,
) -> (
    LogStore,
    StateMachineStore,
    openraft::Snapshot<crate::TypeConfig>,
    mpsc::UnboundedReceiver<Result<(), String>>,
) {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let sent = leader_snapshot(leader_dir.path(), 20).await;
    let (mut log, mut sm) = node_at(dir, 5).await;
    sm.begin_receiving_snapshot().await.expect("receive");
    log.purge(sent.meta.last_log_id.expect("snapshot id"))
        .await
        .expect("purge");
    let (flushed_tx, flushed) = mpsc::unbounded_channel();
    queue_append(&log, vec![entry(1, 21)], &flushed_tx);
    (log, sm, sent, flushed)
}

/// Regression (`minority_kill`, seed 333760): openraft 0.9 asks the log to purge up to a
/// snapshot it has only handed to the state machine. The purge reached the disk, the node was
/// killed before the install ended, and every start after panicked in openraft's check that
/// the log is purged no further than the snapshot (5031 purged, `state.db` at 4834).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_installing_a_snapshot_keeps_the_log_its_state_needs() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut log, _sm, _sent, _flushed) = mid_install(dir.path()).await;
        log.save_committed(Some(entry(1, 21).log_id))
            .await
            .expect("committed");
        // Killed here, before the install: nothing of it, nor what came after, is on disk.
    }
    let (mut log, mut sm, _reader) = crate::open(dir.path(), 1).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(applied.map(|l| l.index), Some(5));
    assert!(
        state.last_purged_log_id <= applied,
        "log purged to {:?} past the state at {applied:?}",
        state.last_purged_log_id
    );
    assert_eq!(state.last_log_id.map(|l| l.index), Some(5));
    let committed = log.read_committed().await.expect("committed");
    assert!(
        committed <= applied,
        "committed {committed:?} is past what the log can replay"
    );
    assert_eq!(read_all(&log).await.len(), 5);
}

/// Once the install is recorded, the held purge is written, then what queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_purge_and_the_writes_behind_it_land_in_order_once_the_install_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot_at;
    {
        let (_log, mut sm, sent, mut flushed) = mid_install(dir.path()).await;
        snapshot_at = sent.meta.last_log_id.expect("snapshot id");
        assert!(
            flushed.try_recv().is_err(),
            "an entry after the held purge was written before it"
        );
        sm.install_snapshot(&sent.meta, sent.snapshot)
            .await
            .expect("install");
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(20), flushed.recv())
            .await
            .expect("the held append is written once the install is recorded");
        assert_eq!(outcome, Some(Ok(())));
    }
    let (mut log, mut sm, _reader) = crate::open(dir.path(), 1).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(applied, Some(snapshot_at));
    assert_eq!(state.last_purged_log_id, Some(snapshot_at));
    let ids: Vec<LogId<u64>> = read_all(&log).await;
    assert_eq!(ids, vec![entry(1, 21).log_id]);
}

/// A purge a recorded snapshot covers (openraft's purge after a build) is written at once,
/// even while a snapshot is received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_a_built_snapshot_covers_is_written_before_it_returns() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut log, mut sm) = node_at(dir.path(), 10).await;
        let mut builder = sm.get_snapshot_builder().await;
        openraft::RaftSnapshotBuilder::build_snapshot(&mut builder)
            .await
            .expect("build");
        sm.begin_receiving_snapshot().await.expect("receive");
        log.purge(entry(1, 8).log_id).await.expect("purge");
    }
    // Read with the state machine gone: what the purge wrote is on disk already.
    let mut log = crate::log_writer_tests::open_log(&dir.path().join("raft-log.db"))
        .await
        .expect("reopen");
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(state.last_purged_log_id, Some(entry(1, 8).log_id));
}
