//! The log writer's group commit: appends queued together share one transaction, stay
//! readable until durable, and keep openraft's order of effects across truncations.

use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader};
use tokio::sync::{mpsc, oneshot};

use crate::log_store::LogStore;
use crate::log_writer::WriteOp;
use crate::types::TypeConfig;

fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Blank,
    }
}

/// Queues an append without yielding; the receiver yields its outcome once durable.
fn queue_append(
    store: &LogStore,
    entries: Vec<Entry<TypeConfig>>,
    flushed: &mpsc::UnboundedSender<Result<(), String>>,
) {
    store.tail.insert(&entries);
    let flushed = flushed.clone();
    let op = WriteOp::Append {
        entries,
        flushed: Box::new(move |r| {
            let _ = flushed.send(r);
        }),
    };
    assert!(store.writer.send(op).is_ok(), "writer alive");
}

async fn read_all(store: &LogStore) -> Vec<LogId<u64>> {
    let mut reader = store.clone();
    reader
        .try_get_log_entries(0..)
        .await
        .expect("read log")
        .iter()
        .map(|e| e.log_id)
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn appends_queued_together_are_written_in_one_transaction_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("raft-log.db");
    let store = LogStore::open(&path).await.expect("open");
    let (flushed_tx, mut flushed) = mpsc::unbounded_channel();
    // 200 client writes arriving while nothing yields: the writer sees them all at once.
    for index in 1..=200 {
        queue_append(&store, vec![entry(1, index)], &flushed_tx);
    }
    // Readable at once, before any of them is durable.
    assert_eq!(read_all(&store).await.len(), 200);
    for _ in 0..200 {
        let outcome = flushed.recv().await.expect("flush outcome");
        assert_eq!(outcome, Ok(()));
    }
    let (transactions, entries) = store.write_stats();
    assert_eq!(entries, 200);
    assert!(
        transactions < 200 / 10,
        "200 queued appends took {transactions} transactions: no group commit"
    );
    assert_eq!(store.tail.not_durable(), 0, "every entry marked durable");
    drop(store);

    let reopened = LogStore::open(&path).await.expect("reopen");
    let ids = read_all(&reopened).await;
    assert_eq!(ids.len(), 200);
    assert_eq!(ids.last().map(|l| l.index), Some(200));
}

#[tokio::test(flavor = "current_thread")]
async fn a_truncation_between_two_queued_appends_keeps_the_newer_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("raft-log.db");
    let store = LogStore::open(&path).await.expect("open");
    let (flushed_tx, mut flushed) = mpsc::unbounded_channel();
    queue_append(&store, (1..=5).map(|i| entry(1, i)).collect(), &flushed_tx);
    // A new leader's entry replaces index 3 onwards, all in the writer's queue at once.
    store.tail.remove_from(3);
    let (done, truncated) = oneshot::channel();
    assert!(store
        .writer
        .send(WriteOp::Truncate { since: 3, done })
        .is_ok());
    queue_append(&store, vec![entry(2, 3)], &flushed_tx);

    assert_eq!(truncated.await.expect("truncate outcome"), Ok(()));
    for _ in 0..2 {
        assert_eq!(flushed.recv().await.expect("flush outcome"), Ok(()));
    }
    let expected = vec![
        LogId::new(CommittedLeaderId::new(1, 1), 1),
        LogId::new(CommittedLeaderId::new(1, 1), 2),
        LogId::new(CommittedLeaderId::new(2, 1), 3),
    ];
    assert_eq!(read_all(&store).await, expected);
    drop(store);
    let reopened = LogStore::open(&path).await.expect("reopen");
    assert_eq!(read_all(&reopened).await, expected);
}
