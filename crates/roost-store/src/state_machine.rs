//! The Raft state machine on `state.db`; a snapshot records its durable applied id, and the
//! file is copied only when a snapshot is sent.

use crate::stats::StoreStats;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StoredMembership,
};
use roost_core::State;
use rusqlite::OptionalExtension;
use sqlx::sqlite::SqlitePool;
use sqlx::{Row, SqliteConnection};
use tokio::sync::watch;

use crate::abort_on_panic;
use crate::db;
use crate::error::{read_sm_err, sm_err, snapshot_err, Error};
use crate::reader::StateReader;
use crate::row_batch::RowBatch;
use crate::rows;
use crate::state_writer::StateWriter;
use crate::types::{ApplyResult, NodeInfo, TypeConfig};

type NodeId = u64;
type Membership = StoredMembership<NodeId, NodeInfo>;
type Meta = SnapshotMeta<NodeId, NodeInfo>;

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
        let (state, last_applied, membership) = load(&readers).await?;
        let writer = StateWriter::spawn(writer)?;
        let state = Arc::new(RwLock::new(state));
        let (applied_tx, applied_rx) = watch::channel(last_applied.map(|l| l.index).unwrap_or(0));
        let stats = StoreStats::default();
        let reader = StateReader::new(
            state.clone(),
            readers.clone(),
            writer.clone(),
            applied_rx,
            stats.clone(),
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
                stats,
            },
            reader,
        ))
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
                        state.apply_entry(index, &envelope)
                    };
                    for change in applied.iter().flat_map(|a| &a.changes) {
                        rows.add(change)?;
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
        if let Some(last) = self.last_applied {
            self.applied_tx.send_replace(last.index);
        }
        Ok(responses)
    }

    async fn install(&mut self, meta: &Meta, data: Vec<u8>) -> Result<(), Error> {
        self.starting = false;
        let incoming = self.snapshots.write_incoming(&data)?;
        self.writer
            .with_connection(|conn| copy_from_snapshot_file(conn, &incoming))?;
        let (state, last_applied, membership) = load(&self.readers).await?;
        if last_applied != meta.last_log_id {
            return Err(Error::Corrupt {
                what: "snapshot",
                message: format!(
                    "holds state up to {last_applied:?} but claims {:?}",
                    meta.last_log_id
                ),
            });
        }
        // state.db holds the snapshot now: record it before anything else can fail, so a
        // restart never sees an applied id past the recorded snapshot with a purged log.
        self.snapshots.record(meta)?;
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = state;
        self.last_applied = last_applied;
        self.membership = membership;
        self.snapshots.promote_incoming()?;
        if let Some(last) = last_applied {
            self.applied_tx.send_replace(last.index);
        }
        Ok(())
    }
}

/// The state in `state.db` as it is now, with its applied log id and membership.
async fn load(readers: &SqlitePool) -> Result<(State, Option<LogId<NodeId>>, Membership), Error> {
    let mut conn = readers.acquire().await.map_err(Error::sql("acquire"))?;
    let mut state = rows::load_state(&mut conn).await?;
    let (last_applied, membership) = read_applied(&mut conn).await?;
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
fn parse_applied(
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

/// `snapshots/`: the snapshot openraft was last told of (`current.meta.json`) and the last copy
/// of `state.db` (`current.db`), made only when a snapshot is to be sent.
///
/// A build records the applied id `state.db` holds on disk and copies nothing: `state.db` is
/// durable, so the log may be purged up to that id. Copying the file at each build (every
/// 10,000 entries, on every node at once) cost each node a full `VACUUM INTO` of a file that
/// grows with the activity log: a 2 s dip in a loaded cluster's throughput (BENCHMARKS.md).
/// `current.db` is refreshed when a snapshot is read (a follower behind the purged log needs
/// one) and it is older than the last build. Its meta is read from its own `sm_meta`, so a sent
/// snapshot always carries the meta of its own bytes.
struct SnapshotDir {
    dir: PathBuf,
    state_db: PathBuf,
    copies: AtomicU64,
    /// Held while `current.db` is replaced or read, so a reader never sees half a replacement.
    current_file: Mutex<()>,
    /// Held while `current.meta.json` is replaced: a build (openraft runs it in its own task)
    /// and an install may record at the same time.
    recording: Mutex<()>,
}

impl SnapshotDir {
    fn new(dir: PathBuf, state_db: PathBuf) -> Result<Self, Error> {
        crate::files::private_dir(&dir)?;
        let snapshots = SnapshotDir {
            dir,
            state_db,
            copies: AtomicU64::new(0),
            current_file: Mutex::new(()),
            recording: Mutex::new(()),
        };
        snapshots.remove_unfinished_copies();
        Ok(snapshots)
    }

    /// A copy or an incoming snapshot cut short by a crash is never resumed.
    fn remove_unfinished_copies(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("copy-") || name == "incoming.db" {
                if let Err(error) = std::fs::remove_file(entry.path()) {
                    tracing::warn!(file = %name, %error, "could not remove an unfinished snapshot file");
                }
            }
        }
    }

    fn io<T>(&self, path: &Path, r: std::io::Result<T>) -> Result<T, Error> {
        r.map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Records `meta` as the current snapshot: its log id is durable in `state.db`. The record
    /// never goes back: a build that read the applied id before an install recorded a later one
    /// records nothing (openraft ignores a built snapshot older than its current one too).
    fn record(&self, meta: &Meta) -> Result<(), Error> {
        let _recording = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(recorded) = self.recorded()? {
            if recorded.last_log_id >= meta.last_log_id {
                tracing::debug!(
                    recorded = ?recorded.last_log_id,
                    offered = ?meta.last_log_id,
                    "snapshot not recorded: one as recent is"
                );
                return Ok(());
            }
        }
        self.write_meta(meta)?;
        self.sync(&self.dir)
    }

    fn write_incoming(&self, data: &[u8]) -> Result<PathBuf, Error> {
        let path = self.dir.join("incoming.db");
        self.io(&path, crate::files::write_private(&path, data))?;
        Ok(path)
    }

    /// fsync of a file or a directory (after a rename in it): openraft purges the log up to a
    /// snapshot once it is current, so the snapshot must survive a power loss by then.
    fn sync(&self, path: &Path) -> Result<(), Error> {
        self.io(path, std::fs::File::open(path).and_then(|f| f.sync_all()))
    }

    fn promote_incoming(&self) -> Result<(), Error> {
        let _file = self.current_file.lock().unwrap_or_else(|p| p.into_inner());
        self.promote(&self.dir.join("incoming.db"))
    }

    /// Makes `file` the current copy; the caller holds `current_file`.
    fn promote(&self, file: &Path) -> Result<(), Error> {
        let current = self.current_file();
        self.sync(file)?;
        self.io(&current, std::fs::rename(file, &current))?;
        self.sync(&self.dir)
    }

    /// Replaces `current.meta.json` atomically (a synced temporary file, renamed); the caller
    /// holds `recording`.
    fn write_meta(&self, meta: &Meta) -> Result<(), Error> {
        let meta_path = self.dir.join("current.meta.json");
        let text = serde_json::to_vec(meta).map_err(|e| Error::corrupt("snapshot meta", e))?;
        let tmp_meta = self.dir.join("current.meta.json.tmp");
        self.io(&tmp_meta, crate::files::write_private(&tmp_meta, &text))?;
        self.sync(&tmp_meta)?;
        self.io(&meta_path, std::fs::rename(&tmp_meta, &meta_path))
    }

    fn current_file(&self) -> PathBuf {
        self.dir.join("current.db")
    }

    /// The snapshot openraft was last told of, if any. A record that cannot be parsed (it is
    /// replaced by rename, so only a disk fault garbles it) counts as none: openraft then builds
    /// a snapshot anew on start if its log was purged.
    fn recorded(&self) -> Result<Option<Meta>, Error> {
        let meta_path = self.dir.join("current.meta.json");
        if !meta_path.exists() {
            return Ok(None);
        }
        let text = self.io(&meta_path, std::fs::read(&meta_path))?;
        match serde_json::from_slice(&text) {
            Ok(meta) => Ok(Some(meta)),
            Err(error) => {
                tracing::warn!(%error, "the snapshot record cannot be parsed; ignoring it");
                Ok(None)
            }
        }
    }

    /// The recorded snapshot's meta without its bytes: all openraft's start reads of it.
    fn recorded_only(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
        Ok(self.recorded()?.map(without_bytes))
    }

    /// The meta of the copy `file`, from its own `sm_meta`.
    fn meta_of(&self, file: &Path) -> Result<Meta, Error> {
        let conn =
            rusqlite::Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .map_err(Error::write("open snapshot copy"))?;
        let rows: Vec<(String, String)> = conn
            .prepare("SELECT key, value FROM sm_meta WHERE key IN ('last_applied', 'membership')")
            .and_then(|mut statement| {
                statement
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(Error::write("read snapshot copy's applied state"))?;
        let (last_log_id, last_membership) = parse_applied(rows.into_iter())?;
        Ok(meta_at(last_log_id, last_membership))
    }

    /// The meta of `current.db`, if there is one that can be read; the caller holds
    /// `current_file`. An unreadable copy is only a lost cache of `state.db`: it is copied anew.
    fn current_file_meta(&self) -> Option<Meta> {
        let file = self.current_file();
        if !file.exists() {
            return None;
        }
        match self.meta_of(&file) {
            Ok(meta) => Some(meta),
            Err(error) => {
                tracing::warn!(%error, "the current snapshot copy cannot be read; ignoring it");
                None
            }
        }
    }

    /// The applied id of `current.db`, if there is one.
    fn current_file_log_id(&self) -> Option<LogId<NodeId>> {
        let _file = self.current_file.lock().unwrap_or_else(|p| p.into_inner());
        self.current_file_meta().and_then(|m| m.last_log_id)
    }

    /// Copies committed `state.db` to `copy` (SQLite's `VACUUM INTO` reads one consistent
    /// snapshot of it).
    fn copy_state_db(&self, copy: &Path) -> Result<(), Error> {
        let conn = rusqlite::Connection::open_with_flags(
            &self.state_db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(Error::write("open state.db to copy it"))?;
        conn.execute("VACUUM INTO ?1", [copy.display().to_string()])
            .map_err(Error::write("copy state.db into a snapshot"))?;
        Ok(())
    }

    /// A fresh copy of `state.db` made `current.db`, if it holds at least `recorded`; the caller
    /// holds `current_file`. A copy that does not become current is removed.
    fn refresh_current_file(&self, recorded: &Meta) -> Result<Meta, Error> {
        let started = std::time::Instant::now();
        let n = self.copies.fetch_add(1, Ordering::Relaxed);
        let copy = self.dir.join(format!("copy-{n}.db"));
        let _ = std::fs::remove_file(&copy);
        // VACUUM INTO creates the copy with SQLite's default mode.
        let copied = self
            .copy_state_db(&copy)
            .and_then(|()| crate::files::private_file(&copy));
        let promoted = copied.and_then(|()| {
            let copied = self.meta_of(&copy)?;
            if copied.last_log_id < recorded.last_log_id {
                return Err(Error::Corrupt {
                    what: "state.db",
                    message: format!(
                        "holds state up to {:?}, behind the snapshot recorded at {:?}",
                        copied.last_log_id, recorded.last_log_id
                    ),
                });
            }
            self.promote(&copy)?;
            Ok(copied)
        });
        match promoted {
            Ok(copied) => {
                tracing::info!(
                    last_log_id = ?copied.last_log_id,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "copied state.db into the current snapshot"
                );
                Ok(copied)
            }
            Err(error) => {
                let _ = std::fs::remove_file(&copy);
                Err(error)
            }
        }
    }

    /// The current snapshot: `current.db` if it holds at least what the last build recorded,
    /// else a fresh copy of `state.db`, which holds that (the build recorded a durable id, and
    /// the caller committed what was replayed into `state.db` since a restart). A failed copy
    /// is an error, as etcd's failed snapshot save is: an older copy would only send the
    /// follower back for log entries that are purged.
    fn current(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
        let _file = self.current_file.lock().unwrap_or_else(|p| p.into_inner());
        let Some(recorded) = self.recorded()? else {
            return Ok(None);
        };
        let file = self.current_file();
        let meta = match self.current_file_meta() {
            Some(meta) if meta.last_log_id >= recorded.last_log_id => meta,
            _ => self.refresh_current_file(&recorded)?,
        };
        let data = self.io(&file, std::fs::read(&file))?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// A snapshot of which openraft uses the meta alone (a build's result, its start's read).
fn without_bytes(meta: Meta) -> Snapshot<TypeConfig> {
    Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(Vec::new())),
    }
}

/// A snapshot's meta, its id named after its log id: a build and the copy made of it later hold
/// the same state, so they carry the same meta.
fn meta_at(last_log_id: Option<LogId<NodeId>>, last_membership: Membership) -> Meta {
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
        self.apply_batch(entries.into_iter().collect())
            .map_err(sm_err)
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
