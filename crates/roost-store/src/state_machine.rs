//! The Raft state machine on `state.db`; a snapshot records its durable applied id, and the
//! file is copied only when a snapshot is sent.

use crate::stats::StoreStats;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StoredMembership,
};
use roost_core::State;
use rusqlite::OptionalExtension;
use sqlx::sqlite::SqlitePool;
use sqlx::{Connection, Row, SqliteConnection};
use tokio::sync::watch;

use crate::abort_on_panic;
use crate::db;
use crate::error::{read_sm_err, sm_err, snapshot_err, Error};
use crate::reader::StateReader;
use crate::row_batch::RowBatch;
use crate::rows;
use crate::snapshot_dir::SnapshotDir;
use crate::state_writer::{IssueRowReader, StateWriter};
use crate::types::{ApplyResult, NodeInfo, TypeConfig};

pub(crate) type NodeId = u64;
pub(crate) type Membership = StoredMembership<NodeId, NodeInfo>;
pub(crate) type Meta = SnapshotMeta<NodeId, NodeInfo>;

pub struct StateMachineStore {
    /// The file's one write connection, its applies committed in batches (`state_writer.rs`).
    writer: StateWriter,
    readers: SqlitePool,
    state: Arc<RwLock<State>>,
    applied_tx: watch::Sender<u64>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    snapshots: Arc<SnapshotDir>,
    /// Until openraft's first use: its start reads the current snapshot for the meta alone.
    starting: bool,
    /// Where the state reads closed issues back from (`state_writer.rs`).
    issue_rows: Arc<IssueRowReader>,
    stats: StoreStats,
}

impl StateMachineStore {
    /// Opens `dir/state.db` and loads its state into memory. A `state.db` behind the last copy
    /// in `snapshots/` (commits lost to a disk that acknowledged an fsync it had not done, a file
    /// restored from a backup or deleted) is first restored from that copy, as the log entries
    /// between the two may be purged already; openraft replays the log from there.
    pub async fn open(dir: &Path) -> Result<(Self, StateReader), Error> {
        let path = dir.join("state.db");
        let mut writer = db::blocking(|| -> Result<_, Error> {
            let writer = db::open_write_connection(&path)?;
            writer
                .execute_batch(rows::SCHEMA)
                .map_err(Error::write("create state schema"))?;
            check_schema(&writer, &path)?;
            Ok(writer)
        })?;
        let readers = db::open_readers(&path, 4).await?;
        let snapshots = Arc::new(SnapshotDir::new(dir.join("snapshots"), path.clone())?);
        let in_file = {
            let mut conn = readers.acquire().await.map_err(Error::sql("acquire"))?;
            read_applied(&mut conn).await?.0
        };
        let copy = snapshots.current_file_log_id();
        if copy > in_file {
            tracing::warn!(
                state_db = ?in_file,
                snapshot = ?copy,
                "state.db is behind the current snapshot; restoring it from the snapshot"
            );
            let file = snapshots.current_file();
            db::blocking(|| copy_from_snapshot_file(&mut writer, &file))?;
        }
        if let Some(recorded) = snapshots.recorded()? {
            if recorded.last_log_id > in_file.max(copy) {
                tracing::warn!(
                    state_db = ?in_file.max(copy),
                    snapshot = ?recorded.last_log_id,
                    "state.db is behind the last snapshot and no copy holds it; the log is \
                     replayed from state.db, which fails if those entries were purged"
                );
            }
        }
        // A data dir from before the memory search index (or with an older one) gets it here.
        db::blocking(|| crate::search::ensure(&writer))?;
        // The writer first: the load reads closed issues back through it (`state_writer.rs`).
        let writer = StateWriter::spawn(writer)?;
        let issue_rows = writer.issue_rows();
        let (state, last_applied, membership) = load(&readers, &issue_rows).await?;
        // state.db is durable, so it is a snapshot as a build would record it. Recorded here
        // when the record is behind: an install killed between its commit to state.db and its
        // record left it so, and openraft's start purges a log shorter than state.db up to
        // state.db's id, which it refuses past the snapshot it is told of.
        if snapshots.recorded()?.and_then(|m| m.last_log_id) < last_applied {
            snapshots.record(&meta_at(last_applied, membership.clone()))?;
        }
        snapshots.note_durable(last_applied);
        let state = Arc::new(RwLock::new(state));
        let (applied_tx, applied_rx) = watch::channel(last_applied.map(|l| l.index).unwrap_or(0));
        let stats = StoreStats::default();
        let reader = StateReader::new(
            state.clone(),
            readers.clone(),
            writer.clone(),
            applied_rx,
            stats.clone(),
            issue_rows.clone(),
        );
        Ok((
            StateMachineStore {
                writer,
                readers,
                state,
                applied_tx,
                last_applied,
                membership,
                snapshots,
                starting: true,
                issue_rows,
                stats,
            },
            reader,
        ))
    }

    /// Follows what `state.db` holds on disk, for the log store's purges (`purge_gate.rs`).
    pub(crate) fn on_disk(&self) -> watch::Receiver<crate::purge_gate::OnDisk> {
        self.snapshots.on_disk()
    }

    /// Applies `entries` and writes their rows. A panic in it (the rules, the rows, the write)
    /// aborts the process with the index it reached (`abort_on_panic.rs`): half an apply is never
    /// served, and a restart replays the log from what `state.db` committed.
    fn apply_batch(&mut self, entries: Vec<Entry<TypeConfig>>) -> Result<Vec<ApplyResult>, Error> {
        let started = std::time::Instant::now();
        let applied = abort_on_panic::or_abort("apply", |at| self.apply_entries(entries, at));
        self.stats.observe_apply(started.elapsed());
        applied
    }

    /// Applies `entries` in order, keeping in `at` the index of the entry being applied.
    fn apply_entries(
        &mut self,
        entries: Vec<Entry<TypeConfig>>,
        at: &mut u64,
    ) -> Result<Vec<ApplyResult>, Error> {
        self.starting = false;
        let mut responses = Vec::with_capacity(entries.len());
        let mut rows = RowBatch::default();
        // Issues closed by these entries: memory lets them go once their rows are written.
        let mut closed = Vec::new();
        let mut membership_changed = false;
        for entry in entries {
            let index = entry.log_id.index;
            *at = index;
            let mut batch = Vec::new();
            let result = match entry.payload {
                EntryPayload::Blank => {
                    self.state
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .applied_index = index;
                    None
                }
                EntryPayload::Membership(m) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), m);
                    membership_changed = true;
                    self.state
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .applied_index = index;
                    None
                }
                EntryPayload::Normal(envelope) => {
                    let applied = {
                        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
                        // A reader's failed read was the reader's; this entry's are its own.
                        let _ = self.issue_rows.take_failure();
                        let applied = state.apply_entry(index, &envelope);
                        if let Some(failure) = self.issue_rows.take_failure() {
                            // A decision made without a row it read: stop, as on any damage
                            // (`abort_on_panic.rs`), rather than write it.
                            panic!("entry {index} read a row state.db should hold: {failure}");
                        }
                        applied
                    };
                    for change in applied.iter().flat_map(|a| &a.changes) {
                        rows.add(change)?;
                        if let roost_core::Change::Issue(i) = change {
                            if i.status.is_terminal() {
                                closed.push(i.id.clone());
                            }
                        }
                    }
                    trace_applied(index, &envelope, &applied);
                    let mut outcomes: Vec<_> = applied.into_iter().map(|a| a.outcome).collect();
                    if matches!(envelope.command, roost_core::Command::Batch { .. }) {
                        batch = outcomes;
                        None
                    } else {
                        outcomes.pop()
                    }
                }
            };
            self.last_applied = Some(entry.log_id);
            responses.push(ApplyResult {
                index,
                result,
                batch,
            });
        }
        let membership = membership_changed.then_some(&self.membership);
        let last_applied = self.last_applied;
        self.writer.write(|conn| {
            rows.write(conn)?;
            write_applied(conn, last_applied, membership)
        })?;
        if !closed.is_empty() {
            // Their rows are in the open transaction, which the write connection reads back
            // (`state_writer.rs`, `issue_rows`). One still closed now is as its row has it.
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            for id in &closed {
                state.forget_closed_issue(id);
            }
        }
        if let Some(last) = self.last_applied {
            self.applied_tx.send_replace(last.index);
        }
        Ok(responses)
    }

    async fn install(&mut self, meta: &Meta, data: Vec<u8>) -> Result<(), Error> {
        self.starting = false;
        let incoming = self.snapshots.write_incoming(&data)?;
        // From the copy until the loaded state replaces this one, this one's closed issues
        // read as missing: their rows are the snapshot's (`state_writer.rs`, `IssueRowReader`).
        // A failed install ends it too (the guard's drop): openraft stops on the error, and a
        // hash must not wait for ever.
        let issue_rows = self.issue_rows.clone();
        let installing = issue_rows.begin_install();
        self.install_from(meta, &incoming, &installing).await
    }

    /// Replaces `state.db`'s rows with the snapshot file `incoming`'s and loads the state.
    async fn install_from(
        &mut self,
        meta: &Meta,
        incoming: &Path,
        installing: &crate::state_writer::Installing<'_>,
    ) -> Result<(), Error> {
        self.writer
            .with_connection(|conn| copy_from_snapshot_file(conn, incoming))?;
        let (state, last_applied, membership) = load(&self.readers, &self.issue_rows).await?;
        if last_applied != meta.last_log_id {
            return Err(Error::Corrupt {
                what: "snapshot",
                message: format!(
                    "holds state up to {last_applied:?} but claims {:?}",
                    meta.last_log_id
                ),
            });
        }
        // The copy first: were state.db's commit lost with the machine's power, opening restores
        // state.db from it. Then the record, which lets the log store write the purge openraft
        // asked for with this install (`purge_gate.rs`).
        self.snapshots.promote_incoming()?;
        self.snapshots.record(meta)?;
        // A record skipped as not newer still lets the install's purge through.
        self.snapshots.note_durable(meta.last_log_id);
        {
            let mut held = self.state.write().unwrap_or_else(|p| p.into_inner());
            *held = state;
            installing.end();
        }
        self.last_applied = last_applied;
        self.membership = membership;
        if let Some(last) = last_applied {
            self.applied_tx.send_replace(last.index);
        }
        Ok(())
    }
}

/// The state in `state.db` as it is now, with its applied log id and membership.
async fn load(
    readers: &SqlitePool,
    issue_rows: &Arc<IssueRowReader>,
) -> Result<(State, Option<LogId<NodeId>>, Membership), Error> {
    let mut conn = readers.acquire().await.map_err(Error::sql("acquire"))?;
    // The applied id and membership in the same read as the tables they describe.
    let mut tx = conn.begin().await.map_err(Error::sql("begin the load"))?;
    let mut state = rows::load_state(&mut tx, Some(issue_rows.clone())).await?;
    let (last_applied, membership) = read_applied(&mut tx).await?;
    tx.commit().await.map_err(Error::sql("end the load"))?;
    state.applied_index = last_applied.map(|l| l.index).unwrap_or(0);
    Ok((state, last_applied, membership))
}

/// Replaces every table's rows with those of the snapshot file `file`, in one transaction.
pub(crate) fn copy_from_snapshot_file(
    writer: &mut rusqlite::Connection,
    file: &Path,
) -> Result<(), Error> {
    writer
        .execute("ATTACH DATABASE ?1 AS snap", [file.display().to_string()])
        .map_err(Error::write("attach snapshot"))?;
    let copied = (|| {
        let tx = writer
            .transaction()
            .map_err(Error::write("begin install"))?;
        for table in rows::TABLES {
            if rows::NEWER_TABLES.contains(table) && !snapshot_has_table(&tx, table)? {
                tx.execute_batch(&format!("DELETE FROM main.{table};"))
                    .map_err(Error::write("copy snapshot table"))?;
                continue;
            }
            tx.execute_batch(&format!(
                "DELETE FROM main.{table}; INSERT INTO main.{table} SELECT * FROM snap.{table};"
            ))
            .map_err(Error::write("copy snapshot table"))?;
        }
        // The search index is derived, never copied: rebuilt from the rows just copied.
        crate::search::rebuild(&tx)?;
        tx.commit().map_err(Error::write("commit install"))
    })();
    writer
        .execute("DETACH DATABASE snap", [])
        .map_err(Error::write("detach snapshot"))?;
    copied
}

/// Whether the attached snapshot has `table` (one from an older node may not).
fn snapshot_has_table(conn: &rusqlite::Connection, table: &str) -> Result<bool, Error> {
    conn.query_row(
        "SELECT COUNT(*) FROM snap.sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(Error::write("read snapshot tables"))
}

fn check_schema(conn: &rusqlite::Connection, path: &Path) -> Result<(), Error> {
    let found: Option<String> = conn
        .query_row("SELECT value FROM sm_meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .optional()
        .map_err(Error::write("read schema version"))?;
    match found {
        None => {
            conn.execute(
                "INSERT INTO sm_meta (key, value) VALUES ('schema', ?1)",
                [rows::SCHEMA_VERSION],
            )
            .map_err(Error::write("write schema version"))?;
            Ok(())
        }
        Some(v) if v == rows::SCHEMA_VERSION => Ok(()),
        Some(v) => Err(Error::Schema {
            path: path.display().to_string(),
            found: v,
            expected: rows::SCHEMA_VERSION.into(),
        }),
    }
}

async fn read_applied(
    conn: &mut SqliteConnection,
) -> Result<(Option<LogId<NodeId>>, Membership), Error> {
    let rows =
        sqlx::query("SELECT key, value FROM sm_meta WHERE key IN ('last_applied', 'membership')")
            .fetch_all(&mut *conn)
            .await
            .map_err(Error::sql("read applied state"))?;
    parse_applied(
        rows.iter()
            .map(|row| (row.get::<String, _>(0), row.get::<String, _>(1))),
    )
}

/// The applied id and membership from `sm_meta`'s (key, value) rows; absent keys mean none yet.
pub(crate) fn parse_applied(
    rows: impl Iterator<Item = (String, String)>,
) -> Result<(Option<LogId<NodeId>>, Membership), Error> {
    let mut last_applied = None;
    let mut membership = Membership::default();
    for (key, value) in rows {
        match key.as_str() {
            "last_applied" => {
                last_applied =
                    serde_json::from_str(&value).map_err(|e| Error::corrupt("last_applied", e))?
            }
            _ => {
                membership =
                    serde_json::from_str(&value).map_err(|e| Error::corrupt("membership", e))?
            }
        }
    }
    Ok((last_applied, membership))
}

/// The applied log id, and the membership when it changed, in the apply's transaction.
fn write_applied(
    conn: &rusqlite::Connection,
    last_applied: Option<LogId<NodeId>>,
    membership: Option<&Membership>,
) -> Result<(), Error> {
    const UPSERT: &str = "INSERT INTO sm_meta (key, value) VALUES (?1, ?2) \
                          ON CONFLICT(key) DO UPDATE SET value = excluded.value";
    let mut statement = conn
        .prepare_cached(UPSERT)
        .map_err(Error::write("write applied state"))?;
    let applied =
        serde_json::to_string(&last_applied).map_err(|e| Error::corrupt("applied state", e))?;
    statement
        .execute(["last_applied", applied.as_str()])
        .map_err(Error::write("write applied state"))?;
    if let Some(membership) = membership {
        let value =
            serde_json::to_string(membership).map_err(|e| Error::corrupt("membership", e))?;
        statement
            .execute(["membership", value.as_str()])
            .map_err(Error::write("write membership"))?;
    }
    Ok(())
}

/// A snapshot of which openraft uses the meta alone (a build's result, its start's read).
pub(crate) fn without_bytes(meta: Meta) -> Snapshot<TypeConfig> {
    Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(Vec::new())),
    }
}

/// A snapshot's meta, its id named after its log id: a build and the copy made of it later hold
/// the same state, so they carry the same meta.
pub(crate) fn meta_at(last_log_id: Option<LogId<NodeId>>, last_membership: Membership) -> Meta {
    let snapshot_id = match last_log_id {
        Some(id) => format!(
            "{}-{}-{}",
            id.index, id.leader_id.term, id.leader_id.node_id
        ),
        None => "0".into(),
    };
    Meta {
        last_log_id,
        last_membership,
        snapshot_id,
    }
}

/// Commands in one call of `apply` past which the runtime's other tasks are handed to another
/// thread first (`db::blocking`). openraft hands a follower that fell behind everything
/// committed at once: at 10^6 issues, batches of thousands of creations took 0.25-1 s, and on a
/// node with one runtime thread its Raft messages and timers waited behind them until a
/// follower started an election (BENCHMARKS.md, "10^6 against 10^3 side by side"). Two full
/// group-commit entries (`roost-raft/src/proposer.rs`, 256 writes each), a leader's usual apply
/// under load, stay inline: they take a few ms, and the handoff would cost more than it frees.
/// One command that raises thousands of wakes is not caught by this count.
const APPLY_INLINE_MAX_COMMANDS: usize = 512;

/// The commands an entry carries (a batch's envelopes; none in a blank or membership entry).
fn commands_in(entry: &Entry<TypeConfig>) -> usize {
    match &entry.payload {
        EntryPayload::Normal(env) => match &env.command {
            roost_core::Command::Batch { envelopes } => envelopes.len(),
            _ => 1,
        },
        _ => 0,
    }
}

/// Builds snapshots off the apply path: records what `state.db` holds on disk.
pub struct SnapshotBuilder {
    snapshots: Arc<SnapshotDir>,
    writer: StateWriter,
    readers: SqlitePool,
    stats: StoreStats,
}

impl SnapshotBuilder {
    async fn build(&self) -> Result<Snapshot<TypeConfig>, Error> {
        // Commit what was applied, so the id recorded is on disk with its rows.
        self.writer.flush()?;
        let mut conn = self
            .readers
            .acquire()
            .await
            .map_err(Error::sql("acquire"))?;
        let (last_log_id, last_membership) = read_applied(&mut conn).await?;
        let meta = meta_at(last_log_id, last_membership);
        self.snapshots.record(&meta)?;
        // openraft keeps only the meta of a build; the bytes are copied when one is sent.
        Ok(without_bytes(meta))
    }
}

/// One debug line per applied command, with the request that proposed it (`request_id`, the
/// REST request's `X-Request-Id`), so a request can be followed to its apply on every replica.
fn trace_applied(index: u64, envelope: &roost_core::Envelope, applied: &[roost_core::Applied]) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let inner: Vec<&roost_core::Envelope> = match &envelope.command {
        roost_core::Command::Batch { envelopes } => envelopes.iter().collect(),
        _ => vec![envelope],
    };
    for (env, a) in inner.iter().zip(applied) {
        tracing::debug!(
            index,
            request_id = env.request_id.as_deref(),
            command = env.command.name(),
            agent_id = env.actor.agent_id(),
            run_id = env.actor.run_id.as_deref(),
            company_id = env.actor.company_id.as_deref(),
            outcome = a.outcome.as_ref().map_or_else(|e| e.code(), |o| o.kind()),
            "applied"
        );
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let started = std::time::Instant::now();
        let built = self.build().await.map_err(snapshot_err);
        if built.is_ok() {
            self.stats.observe_snapshot_build(started.elapsed());
        }
        built
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResult>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        let commands: usize = entries.iter().map(commands_in).sum();
        if commands > APPLY_INLINE_MAX_COMMANDS {
            db::blocking(|| self.apply_batch(entries)).map_err(sm_err)
        } else {
            self.apply_batch(entries).map_err(sm_err)
        }
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            snapshots: self.snapshots.clone(),
            writer: self.writer.clone(),
            readers: self.readers.clone(),
            stats: self.stats.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        // openraft 0.9 purges the log up to this snapshot before its install ends: from here
        // such a purge waits for the install (`purge_gate.rs`). Roost's peers send snapshots in
        // chunks (`Raft::install_snapshot`), which always begin here.
        self.snapshots.note_receiving();
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.install(meta, snapshot.into_inner())
            .await
            .map_err(sm_err)
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        if std::mem::take(&mut self.starting) {
            // openraft 0.9.25 reads the current snapshot once in `Raft::new` (before it spawns
            // the worker that serves replication: `StorageHelper::get_initial_state`) and keeps
            // only its meta. Copying `state.db` there made a follower restarted at 10^6 issues
            // wait for a copy of 1.6 GB before it came up.
            return self.snapshots.recorded_only().map_err(read_sm_err);
        }
        // After a restart, openraft replays the log into the open transaction before it asks;
        // the copy reads only what is committed.
        self.writer.flush().map_err(read_sm_err)?;
        let snapshots = self.snapshots.clone();
        db::blocking(move || snapshots.current()).map_err(read_sm_err)
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "cold_issue_tests.rs"]
mod cold_issue_tests;

#[cfg(test)]
#[path = "upload_reload_tests.rs"]
mod upload_reload_tests;

#[cfg(test)]
#[path = "deleted_comment_tests.rs"]
mod deleted_comment_tests;
