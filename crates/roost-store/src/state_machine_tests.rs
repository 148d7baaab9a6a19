//! The state machine's promises to readers and to openraft: SQL reads see every applied write,
//! snapshots hold what was applied, a reopen resumes from the file.

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use roost_core::{Actor, Command, Envelope, Timestamp};
use sqlx::{Connection, Row, SqliteConnection};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::StateMachineStore;
use crate::types::TypeConfig;

pub(super) fn company_entry(index: u64, id: &str, prefix: &str) -> Entry<TypeConfig> {
    system_entry(
        index,
        Command::CreateCompany {
            id: id.into(),
            name: id.into(),
            issue_prefix: prefix.into(),
        },
    )
}

/// Log entry `index` (term 1): `command` by the system, at `1_000 + index` ms.
pub(super) fn system_entry(index: u64, command: Command) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(
            Envelope {
                request_id: None,
                at: Timestamp(1_000 + index as i64),
                actor: Actor::system(),
                command,
                idempotency_key: None,
            }
            .into(),
        ),
    }
}

async fn companies_in_file(dir: &std::path::Path) -> (i64, Option<String>) {
    let url = format!("sqlite://{}?mode=ro", dir.join("state.db").display());
    let mut conn = SqliteConnection::connect(&url)
        .await
        .expect("open state.db");
    let count = sqlx::query("SELECT count(*) FROM companies")
        .fetch_one(&mut conn)
        .await
        .expect("count")
        .get::<i64, _>(0);
    let applied = sqlx::query("SELECT value FROM sm_meta WHERE key = 'last_applied'")
        .fetch_optional(&mut conn)
        .await
        .expect("last_applied")
        .map(|r| r.get::<String, _>(0));
    (count, applied)
}

/// Applies are committed in batches, but a reader of what lives only in SQLite (activity,
/// comments) sees every write applied before it asked.
#[tokio::test]
async fn sql_reads_see_every_write_applied_before_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
    for round in 0..20u64 {
        let entries: Vec<_> = (1..=3)
            .map(|k| {
                let index = round * 3 + k;
                company_entry(index, &format!("c{index}"), &format!("P{index}"))
            })
            .collect();
        sm.apply(entries).await.expect("apply");
        let index = round * 3 + 3;
        assert!(
            reader.wait_applied(index, Duration::from_secs(10)).await,
            "applied index never reached {index}"
        );
        let activity = reader.activity(None, None, 1000).await.expect("activity");
        assert_eq!(
            activity.len() as u64,
            index,
            "activity of index {index} not read"
        );
        let (count, applied) = companies_in_file(dir.path()).await;
        assert_eq!(count, index as i64, "rows of index {index} not in state.db");
        let applied = applied.expect("last_applied written");
        assert!(applied.contains(&format!("\"index\":{index}")), "{applied}");
    }
}

/// With no reader asking, applied rows still reach the file within the commit interval.
#[tokio::test]
async fn applied_rows_are_committed_without_a_reader_asking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
    sm.apply([company_entry(1, "c1", "A"), company_entry(2, "c2", "B")])
        .await
        .expect("apply");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while companies_in_file(dir.path()).await.0 < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "not committed within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_snapshot_holds_everything_applied_before_it_was_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let entries: Vec<_> = (1..=50)
        .map(|i| company_entry(i, &format!("c{i}"), &format!("P{i}")))
        .collect();
    for entry in entries {
        sm.apply([entry]).await.expect("apply");
    }
    let mut builder = sm.get_snapshot_builder().await;
    let snapshot = openraft::RaftSnapshotBuilder::build_snapshot(&mut builder)
        .await
        .expect("snapshot");
    assert_eq!(snapshot.meta.last_log_id.map(|l| l.index), Some(50));
}

/// A store that applied companies c1 and c2 (entries 1 and 2), committed and closed.
async fn two_companies_on_disk() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
    sm.apply([company_entry(1, "c1", "A"), company_entry(2, "c2", "B")])
        .await
        .expect("apply");
    assert!(reader.wait_applied(2, Duration::from_secs(10)).await);
    dir
}

#[tokio::test]
async fn reopening_resumes_from_what_the_file_holds() {
    let dir = two_companies_on_disk().await;
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|l| l.index), Some(2));
    assert_eq!(reader.applied_index(), 2);
    assert_eq!(reader.read(|s| s.companies.len()), 2);
}

/// A row that no longer parses stops the open, and the error names its table and rowid: serde's
/// line and column inside some row's text left an operator nothing to look up.
#[tokio::test]
async fn a_row_that_does_not_parse_is_named_by_its_table_and_rowid() {
    let dir = two_companies_on_disk().await;
    let url = format!("sqlite://{}", dir.path().join("state.db").display());
    let mut conn = SqliteConnection::connect(&url)
        .await
        .expect("open state.db");
    let rowid: i64 =
        sqlx::query("UPDATE companies SET data = '{\"id\": ' WHERE id = 'c2' RETURNING rowid")
            .fetch_one(&mut conn)
            .await
            .expect("damage a row")
            .get(0);
    conn.close().await.expect("close state.db");
    let err = StateMachineStore::open(dir.path())
        .await
        .err()
        .expect("a row that does not parse stops the open")
        .to_string();
    assert!(
        err.contains(&format!("table companies, rowid {rowid}")),
        "the error should name the row: {err}"
    );
}

/// Applies companies 1 to `upto`, commits them, and copies `state.db` as it is then to `copy`.
async fn apply_companies_and_copy_state_db(
    sm: &mut StateMachineStore,
    upto: u64,
    copy: &std::path::Path,
) {
    let entries: Vec<_> = (1..=upto)
        .map(|i| company_entry(i, &format!("c{i}"), &format!("P{i}")))
        .collect();
    sm.apply(entries).await.expect("apply");
    sm.writer.flush().expect("commit");
    sqlx::query("VACUUM INTO ?")
        .bind(copy.display().to_string())
        .execute(&sm.readers)
        .await
        .expect("copy of state.db");
}

/// Replaces `dir/state.db` with `older`, as a power loss after its last commit could leave it.
fn put_back_as_state_db(dir: &std::path::Path, older: &std::path::Path) {
    for stale in ["state.db-wal", "state.db-shm"] {
        let _ = std::fs::remove_file(dir.join(stale));
    }
    std::fs::rename(older, dir.join("state.db")).expect("put the older file back");
}

/// A `state.db` older than the last snapshot copy (a disk that lost acknowledged commits, a file
/// put back from a backup) must not be resumed from: the log may no longer hold the entries
/// between the two, as it is purged up to the snapshot.
#[tokio::test]
async fn a_state_db_behind_the_current_snapshot_is_restored_from_it_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let older = dir.path().join("older.db");
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        apply_companies_and_copy_state_db(&mut sm, 5, &older).await;
        let later: Vec<_> = (6..=20)
            .map(|i| company_entry(i, &format!("c{i}"), &format!("P{i}")))
            .collect();
        sm.apply(later).await.expect("apply");
        let mut builder = sm.get_snapshot_builder().await;
        openraft::RaftSnapshotBuilder::build_snapshot(&mut builder)
            .await
            .expect("snapshot at 20");
        // Sent to a follower: the copy is made.
        sm.get_current_snapshot()
            .await
            .expect("read")
            .expect("a snapshot at 20");
        sm.readers.close().await;
    }
    // The file as a power loss after entry 5's commit could leave it.
    put_back_as_state_db(dir.path(), &older);
    let in_older: i64 = rusqlite::Connection::open(dir.path().join("state.db"))
        .and_then(|c| c.query_row("SELECT count(*) FROM companies", [], |r| r.get(0)))
        .expect("count in the older file");
    assert_eq!(in_older, 5);

    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|l| l.index), Some(20));
    assert_eq!(reader.applied_index(), 20);
    assert_eq!(reader.read(|s| s.companies.len()), 20);
    assert_eq!(companies_in_file(dir.path()).await.0, 20);
}

/// Applies the company entry at `index`, then builds a snapshot.
async fn apply_and_snapshot(
    sm: &mut StateMachineStore,
    builder: &mut super::SnapshotBuilder,
    index: u64,
) {
    sm.apply([company_entry(
        index,
        &format!("c{index}"),
        &format!("P{index}"),
    )])
    .await
    .expect("apply");
    openraft::RaftSnapshotBuilder::build_snapshot(builder)
        .await
        .expect("snapshot");
}

/// The applied id recorded inside a snapshot's bytes (its `sm_meta` table).
fn applied_in_snapshot_bytes(data: &[u8]) -> Option<LogId<u64>> {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), data).expect("write snapshot bytes");
    let text: String = rusqlite::Connection::open(file.path())
        .and_then(|c| {
            c.query_row(
                "SELECT value FROM sm_meta WHERE key = 'last_applied'",
                [],
                |r| r.get(0),
            )
        })
        .expect("last_applied in the snapshot");
    serde_json::from_str(&text).expect("a log id")
}

/// Regression: the current snapshot was read as its meta file, then its data file, while a
/// build replaced both; a new file went out with the old meta and the follower installing it
/// stopped ("holds state up to 5999 but claims 5499", fault scenario membership_change). Builds
/// no longer write the file, but reads still copy it while entries are applied and built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_read_while_entries_are_applied_and_built_pairs_the_meta_with_its_own_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let mut builder = sm.get_snapshot_builder().await;
    apply_and_snapshot(&mut sm, &mut builder, 1).await;
    let snapshots = sm.snapshots.clone();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reading = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut checked = 0u32;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let snapshot = snapshots.current().expect("read").expect("a snapshot");
                let data = snapshot.snapshot.into_inner();
                assert_eq!(
                    applied_in_snapshot_bytes(&data),
                    snapshot.meta.last_log_id,
                    "a snapshot's meta paired with another snapshot's file"
                );
                checked += 1;
            }
            checked
        })
    };
    for index in 2..=80u64 {
        apply_and_snapshot(&mut sm, &mut builder, index).await;
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let checked = reading.join().expect("no mismatched snapshot");
    assert!(checked > 0, "the reader never read a snapshot");
}

/// The read openraft makes once when it starts on a store (`Raft::new`): the recorded meta,
/// without bytes and without a copy.
async fn openraft_start_read(sm: &mut StateMachineStore) -> Option<u64> {
    let copies = sm.snapshots.copies.load(Ordering::SeqCst);
    let snapshot = sm.get_current_snapshot().await.expect("read")?;
    assert!(snapshot.snapshot.into_inner().is_empty());
    assert_eq!(
        sm.snapshots.copies.load(Ordering::SeqCst),
        copies,
        "the start read copied state.db"
    );
    snapshot.meta.last_log_id.map(|l| l.index)
}

async fn current_snapshot_index(sm: &mut StateMachineStore) -> Option<u64> {
    let snapshot = sm.get_current_snapshot().await.expect("read")?;
    let index = snapshot.meta.last_log_id.map(|l| l.index);
    assert_eq!(
        applied_in_snapshot_bytes(&snapshot.snapshot.into_inner()).map(|l| l.index),
        index,
        "a snapshot's meta and its bytes disagree"
    );
    index
}

/// A build records the applied id and copies nothing (a copy of the whole file on every node
/// every 10,000 entries was a 2 s dip in a loaded cluster); the file is copied when a snapshot
/// is read, once per build.
#[tokio::test]
async fn a_build_copies_nothing_and_a_read_copies_state_db_once_per_build() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("snapshots").join("current.db");
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let copies = |sm: &StateMachineStore| sm.snapshots.copies.load(Ordering::SeqCst);
    assert_eq!(current_snapshot_index(&mut sm).await, None);
    let mut builder = sm.get_snapshot_builder().await;
    apply_and_snapshot(&mut sm, &mut builder, 1).await;
    assert!(!copy.exists(), "a build copied state.db");
    assert_eq!(copies(&sm), 0, "a build copied state.db");
    assert_eq!(current_snapshot_index(&mut sm).await, Some(1));
    assert!(copy.exists());
    assert_eq!(copies(&sm), 1);

    // Applied and committed but not built: the copy at 1 still holds what the last build
    // recorded, and is sent again without copying.
    sm.apply([company_entry(2, "c2", "B")])
        .await
        .expect("apply");
    sm.writer.flush().expect("commit entry 2");
    assert_eq!(current_snapshot_index(&mut sm).await, Some(1));
    assert_eq!(copies(&sm), 1, "state.db copied again with no build since");

    apply_and_snapshot(&mut sm, &mut builder, 3).await;
    assert_eq!(current_snapshot_index(&mut sm).await, Some(3));
    assert_eq!(copies(&sm), 2);
}

/// The build's record survives a restart (openraft reads it on start), and a copy left half
/// written by a crash is removed.
#[tokio::test]
async fn a_recorded_snapshot_survives_a_restart_and_unfinished_copies_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unfinished = dir.path().join("snapshots").join("copy-7.db");
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        let mut builder = sm.get_snapshot_builder().await;
        apply_and_snapshot(&mut sm, &mut builder, 1).await;
        apply_and_snapshot(&mut sm, &mut builder, 2).await;
        std::fs::write(&unfinished, b"half a copy").expect("write");
    }
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert!(!unfinished.exists(), "an unfinished copy was left");
    assert_eq!(openraft_start_read(&mut sm).await, Some(2));
    assert_eq!(current_snapshot_index(&mut sm).await, Some(2));
}

/// What another node sends: a snapshot of the company entries 1..=5.
async fn snapshot_of_five_companies(dir: &std::path::Path) -> openraft::Snapshot<TypeConfig> {
    let (mut leader, _) = StateMachineStore::open(dir).await.expect("open");
    let mut builder = leader.get_snapshot_builder().await;
    for index in 1..=5 {
        apply_and_snapshot(&mut leader, &mut builder, index).await;
    }
    leader
        .get_current_snapshot()
        .await
        .expect("read")
        .expect("a snapshot")
}

/// Regression (review of the purge gate, 2026-11-28): an install killed after its copy was
/// committed to `state.db` and before its record restarted with `state.db` past the recorded
/// snapshot; openraft's start then purged the log up to `state.db`'s id, past the snapshot it
/// was told of, and refused to start. The record catches up with `state.db` on open.
#[tokio::test]
async fn a_node_killed_between_an_installs_copy_and_its_record_starts_with_both_at_the_install() {
    let (leader_dir, dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let sent = snapshot_of_five_companies(leader_dir.path()).await;
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        let mut builder = sm.get_snapshot_builder().await;
        apply_and_snapshot(&mut sm, &mut builder, 1).await;
        // The install's copy, committed; killed before its record.
        let incoming = sm
            .snapshots
            .write_incoming(&sent.snapshot.into_inner())
            .expect("incoming");
        sm.writer
            .with_connection(|conn| super::copy_from_snapshot_file(conn, &incoming))
            .expect("copy");
    }
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|l| l.index), Some(5));
    assert_eq!(openraft_start_read(&mut sm).await, Some(5));
}

/// Regression: openraft reads the current snapshot when it starts, for its meta only, and that
/// read copied `state.db` whenever the last copy was older than the last build: a follower
/// restarted at 10^6 issues waited for a 1.6 GB copy (up after 18 s instead of 13). The start
/// read copies nothing; the first read to send one does.
#[tokio::test]
async fn a_restart_copies_nothing_until_a_snapshot_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        let mut builder = sm.get_snapshot_builder().await;
        apply_and_snapshot(&mut sm, &mut builder, 1).await;
        assert_eq!(current_snapshot_index(&mut sm).await, Some(1));
        apply_and_snapshot(&mut sm, &mut builder, 2).await;
    }
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(openraft_start_read(&mut sm).await, Some(2));
    assert_eq!(sm.snapshots.copies.load(Ordering::SeqCst), 0);
    assert_eq!(current_snapshot_index(&mut sm).await, Some(2));
    assert_eq!(sm.snapshots.copies.load(Ordering::SeqCst), 1);
}

/// A snapshot read from one node installs on another: same rows, same applied id, and the
/// receiver's own current snapshot is the one it installed.
#[tokio::test]
async fn a_snapshot_sent_to_another_node_installs_there() {
    let (leader_dir, follower_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let sent = snapshot_of_five_companies(leader_dir.path()).await;
    let (mut follower, reader) = StateMachineStore::open(follower_dir.path())
        .await
        .expect("open");
    follower
        .install_snapshot(&sent.meta, sent.snapshot)
        .await
        .expect("install");
    assert!(
        follower_dir
            .path()
            .join("snapshots")
            .join("current.db")
            .exists(),
        "the installed snapshot is not kept to be sent on"
    );
    let (applied, _) = follower.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|l| l.index), Some(5));
    assert_eq!(reader.read(|s| s.companies.len()), 5);
    assert_eq!(companies_in_file(follower_dir.path()).await.0, 5);
    assert_eq!(current_snapshot_index(&mut follower).await, Some(5));
}

/// `current.db` is a copy of `state.db` kept to be sent: one that cannot be read (a disk
/// fault) neither stops the node from opening nor goes out; a new copy is made.
#[tokio::test]
async fn an_unreadable_snapshot_copy_is_copied_anew() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("snapshots").join("current.db");
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        let mut builder = sm.get_snapshot_builder().await;
        apply_and_snapshot(&mut sm, &mut builder, 1).await;
        apply_and_snapshot(&mut sm, &mut builder, 2).await;
        assert_eq!(current_snapshot_index(&mut sm).await, Some(2));
    }
    std::fs::write(&copy, b"not a database").expect("damage the copy");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(reader.read(|s| s.companies.len()), 2);
    assert_eq!(openraft_start_read(&mut sm).await, Some(2));
    assert_eq!(current_snapshot_index(&mut sm).await, Some(2));
}

/// Regression: a build (openraft runs it in its own task) and an install recorded at the same
/// time through one temporary file: one rename found it gone, an error that stops the node, or
/// the older record landed last and openraft started from a snapshot behind `state.db`.
#[test]
fn concurrent_records_never_fail_and_never_go_backwards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshots = std::sync::Arc::new(
        super::SnapshotDir::new(dir.path().join("snapshots"), dir.path().join("state.db"))
            .expect("snapshot dir"),
    );
    let recorders: Vec<_> = (0..4u64)
        .map(|thread| {
            let snapshots = snapshots.clone();
            std::thread::spawn(move || {
                for round in 0..50u64 {
                    // Threads interleave old and new ids: 4 * round + thread.
                    let id = LogId::new(CommittedLeaderId::new(1, 1), 4 * round + thread + 1);
                    snapshots
                        .record(&super::meta_at(Some(id), Default::default()))
                        .expect("record");
                    let recorded = snapshots.recorded().expect("read").expect("recorded");
                    assert!(
                        recorded.last_log_id >= Some(id),
                        "the record went back from {id} to {:?}",
                        recorded.last_log_id
                    );
                }
            })
        })
        .collect();
    for recorder in recorders {
        recorder.join().expect("no failed record");
    }
    let recorded = snapshots.recorded().expect("read").expect("recorded");
    assert_eq!(recorded.last_log_id.map(|l| l.index), Some(200));

    // An install's older offer after a later build is ignored as well.
    let older = LogId::new(CommittedLeaderId::new(1, 1), 7);
    snapshots
        .record(&super::meta_at(Some(older), Default::default()))
        .expect("record");
    let recorded = snapshots.recorded().expect("read").expect("recorded");
    assert_eq!(recorded.last_log_id.map(|l| l.index), Some(200));
}

/// Regression: after a restart with a `state.db` behind the recorded snapshot (and no copy
/// holding it), openraft replays the log into the open transaction and then reads the current
/// snapshot; the copy saw only committed rows, came out behind the record, and the node stopped.
#[tokio::test]
async fn a_snapshot_read_after_replay_into_a_lagging_state_db_holds_the_replayed_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let older = dir.path().join("older.db");
    {
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        apply_companies_and_copy_state_db(&mut sm, 5, &older).await;
        let mut builder = sm.get_snapshot_builder().await;
        for index in 6..=20 {
            apply_and_snapshot(&mut sm, &mut builder, index).await;
        }
        sm.readers.close().await;
    }
    // A disk that lost the commits after entry 5; the log still holds 6-20.
    put_back_as_state_db(dir.path(), &older);

    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    let (applied, _) = sm.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|l| l.index), Some(5));
    let replayed: Vec<_> = (6..=20)
        .map(|i| company_entry(i, &format!("c{i}"), &format!("P{i}")))
        .collect();
    sm.apply(replayed).await.expect("replay");
    assert_eq!(current_snapshot_index(&mut sm).await, Some(20));
}

/// Regression (snapshot_copies_were_world_readable): a snapshot copy holds every agent's
/// configuration and every token hash; `VACUUM INTO` and `fs::write` created them 0644.
#[cfg(unix)]
#[tokio::test]
async fn snapshot_files_are_created_0600() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let mut builder = sm.get_snapshot_builder().await;
    apply_and_snapshot(&mut sm, &mut builder, 1).await;
    assert_eq!(current_snapshot_index(&mut sm).await, Some(1));
    let snapshots = dir.path().join("snapshots");
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&snapshots), 0o700);
    let mut files = 0;
    for entry in std::fs::read_dir(&snapshots).expect("list") {
        let path = entry.expect("entry").path();
        assert_eq!(
            mode(&path),
            0o600,
            "{} is {:o}",
            path.display(),
            mode(&path)
        );
        files += 1;
    }
    assert!(files >= 2, "a copy and its meta were written");
}

/// A snapshot made by a node from before agent memory has no `memory_*` tables: installing it
/// copies every table it has and empties the newer ones, instead of failing the install.
#[test]
fn a_snapshot_without_the_memory_tables_installs_and_empties_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&old).expect("old snapshot");
        conn.execute_batch(crate::rows::SCHEMA).expect("schema");
        for table in crate::rows::NEWER_TABLES {
            conn.execute_batch(&format!("DROP TABLE {table}"))
                .expect("drop");
        }
        conn.execute("INSERT INTO companies (id, data) VALUES ('c9', '{}')", [])
            .expect("row");
    }
    let mut writer = rusqlite::Connection::open(dir.path().join("state.db")).expect("state.db");
    writer.execute_batch(crate::rows::SCHEMA).expect("schema");
    writer
        .execute(
            "INSERT INTO memory_live (agent_id, company_id, data) VALUES ('a', 'c', '{}')",
            [],
        )
        .expect("row");
    super::copy_from_snapshot_file(&mut writer, &old).expect("installs");
    let count = |table: &str| -> i64 {
        writer
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .expect("count")
    };
    assert_eq!(count("companies"), 1);
    assert_eq!(count("memory_live"), 0);
}

/// Bug: a follower handed thousands of committed writes at once applied them on its runtime's
/// one thread for up to a second, and its Raft messages and timers waited behind them until a
/// follower started an election. A long apply now leaves the runtime's other tasks running.
#[test]
fn a_long_apply_leaves_the_runtime_free_for_raft_messages() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut sm, _reader) = StateMachineStore::open(dir.path()).await.expect("open");
        // Far more commands than `APPLY_INLINE_MAX_COMMANDS`, as a catching-up follower gets.
        let entries: Vec<_> = (1..=3000u64)
            .map(|i| company_entry(i, &format!("c{i}"), &format!("P{i}")))
            .collect();
        let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ticker = {
            let ticks = ticks.clone();
            tokio::spawn(async move {
                loop {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                }
            })
        };
        // The ticker has run once: it is scheduled on the runtime's one worker.
        while ticks.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let before = ticks.load(Ordering::SeqCst);
        let applying = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let watcher = {
            let (ticks, applying) = (ticks.clone(), applying.clone());
            // Sampled from a plain thread, so it runs whatever the runtime does, and only while
            // the apply runs.
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while applying.load(Ordering::SeqCst) {
                    seen.push(ticks.load(Ordering::SeqCst));
                    std::thread::sleep(Duration::from_millis(1));
                }
                seen
            })
        };
        // On the runtime's one worker, as openraft's state machine task runs (`block_on` runs
        // its future on this thread, not on a worker).
        tokio::spawn(async move { sm.apply(entries).await.map(|_| ()) })
            .await
            .expect("apply task")
            .expect("apply");
        applying.store(false, Ordering::SeqCst);
        let during = watcher.join().expect("watcher");
        ticker.abort();
        // Samples of 1 ms in which the ticker ran: 1 of 120 before (only as the apply began),
        // 86 of 141 after, on the 2-core machine.
        let moved = during.windows(2).filter(|w| w[1] > w[0]).count();
        assert!(
            during.len() >= 8,
            "the apply was too short to sample ({} samples)",
            during.len()
        );
        assert!(
            moved * 5 >= during.len(),
            "the runtime ran nothing else while 3000 commands applied (ticks {before} then {during:?})"
        );
    });
}

/// A repeat's answer is the row of the use it repeated: once that use has expired and the key
/// was used again, the row holds the later use, which is not this repeat's answer.
#[tokio::test]
async fn a_remembered_outcome_is_read_for_the_use_it_answers_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let mut entry = company_entry(1, "c1", "ONE");
    let EntryPayload::Normal(shared) = &entry.payload else {
        unreachable!("company_entry is a normal entry")
    };
    let mut env = Envelope::clone(shared);
    env.idempotency_key = Some("k".into());
    let (at, key) = (
        env.at,
        roost_core::idempotency::scoped_key(&env.actor, &env.command, "k"),
    );
    entry.payload = EntryPayload::Normal(env.into());
    sm.apply([entry]).await.expect("apply");
    match reader.remembered_outcome(&key, at).await.expect("read") {
        Some(Ok(roost_core::Outcome::Company(c))) => assert_eq!(c.id, "c1"),
        other => panic!("the first use's outcome, got {other:?}"),
    }
    let later = Timestamp(at.0 + 1);
    assert!(reader
        .remembered_outcome(&key, later)
        .await
        .expect("read")
        .is_none());
    assert!(reader
        .remembered_outcome("no such key", at)
        .await
        .expect("read")
        .is_none());
}
