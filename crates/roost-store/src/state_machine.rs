//! The Raft state machine on `state.db`, with snapshots as consistent copies of that file.

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
use sqlx::{Connection, Row, SqliteConnection};
use tokio::sync::watch;

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
}

impl StateMachineStore {
    /// Opens `dir/state.db` and loads its state into memory. A `state.db` behind the current
    /// snapshot (commits lost to a disk that acknowledged an fsync it had not done, a file
    /// restored from a backup or deleted) is first restored from that snapshot, as the log
    /// entries between the two may be purged already; openraft replays the log from there.
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
        let snapshots = Arc::new(SnapshotDir::new(dir.join("snapshots"), readers.clone())?);
        if let Some(snapshot) = snapshots.current_meta()? {
            let mut conn = readers.acquire().await.map_err(Error::sql("acquire"))?;
            let (in_file, _) = read_applied(&mut conn).await?;
            if snapshot.last_log_id > in_file {
                tracing::warn!(
                    state_db = ?in_file,
                    snapshot = ?snapshot.last_log_id,
                    "state.db is behind the current snapshot; restoring it from the snapshot"
                );
                let file = snapshots.current_file();
                db::blocking(|| copy_from_snapshot_file(&mut writer, &file))?;
            }
        }
        let (state, last_applied, membership) = load(&readers).await?;
        let writer = StateWriter::spawn(writer)?;
        let state = Arc::new(RwLock::new(state));
        let (applied_tx, applied_rx) = watch::channel(last_applied.map(|l| l.index).unwrap_or(0));
        let reader = StateReader::new(state.clone(), readers.clone(), writer.clone(), applied_rx);
        Ok((
            StateMachineStore {
                writer,
                readers,
                state,
                applied_tx,
                last_applied,
                membership,
                snapshots,
            },
            reader,
        ))
    }

    async fn apply_batch(
        &mut self,
        entries: Vec<Entry<TypeConfig>>,
    ) -> Result<Vec<ApplyResult>, Error> {
        let mut responses = Vec::with_capacity(entries.len());
        let mut rows = RowBatch::default();
        let mut membership_changed = false;
        for entry in entries {
            let index = entry.log_id.index;
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
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = state;
        self.last_applied = last_applied;
        self.membership = membership;
        self.snapshots.promote_incoming(meta)?;
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
fn copy_from_snapshot_file(writer: &mut rusqlite::Connection, file: &Path) -> Result<(), Error> {
    writer
        .execute("ATTACH DATABASE ?1 AS snap", [file.display().to_string()])
        .map_err(Error::write("attach snapshot"))?;
    let copied = (|| {
        let tx = writer
            .transaction()
            .map_err(Error::write("begin install"))?;
        for table in rows::TABLES {
            tx.execute_batch(&format!(
                "DELETE FROM main.{table}; INSERT INTO main.{table} SELECT * FROM snap.{table};"
            ))
            .map_err(Error::write("copy snapshot table"))?;
        }
        tx.commit().map_err(Error::write("commit install"))
    })();
    writer
        .execute("DETACH DATABASE snap", [])
        .map_err(Error::write("detach snapshot"))?;
    copied
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

/// `snapshots/`: the current snapshot (`current.db` + `current.meta.json`) and files in flight.
struct SnapshotDir {
    dir: PathBuf,
    readers: SqlitePool,
    builds: AtomicU64,
    /// Held while the current pair (file, meta) is replaced or read: the two are separate files,
    /// and a snapshot read between the two renames paired a new file with the old meta.
    current_pair: Mutex<()>,
}

impl SnapshotDir {
    fn new(dir: PathBuf, readers: SqlitePool) -> Result<Self, Error> {
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.display().to_string(),
            source,
        })?;
        let snapshots = SnapshotDir {
            dir,
            readers,
            builds: AtomicU64::new(0),
            current_pair: Mutex::new(()),
        };
        snapshots.repair_current_meta()?;
        Ok(snapshots)
    }

    /// A crash between the two renames of [`Self::promote`] leaves a new `current.db` beside the
    /// old meta; a follower sent that pair refuses it. The file's own `sm_meta` decides.
    fn repair_current_meta(&self) -> Result<(), Error> {
        let file = self.current_file();
        if !file.exists() {
            return Ok(());
        }
        let conn = rusqlite::Connection::open_with_flags(
            &file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(Error::write("open current snapshot"))?;
        let rows: Vec<(String, String)> = conn
            .prepare("SELECT key, value FROM sm_meta WHERE key IN ('last_applied', 'membership')")
            .and_then(|mut statement| {
                statement
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()
            })
            .map_err(Error::write("read current snapshot's applied state"))?;
        let (last_log_id, last_membership) = parse_applied(rows.into_iter())?;
        let recorded = self.current_meta()?;
        if recorded
            .as_ref()
            .map(|m| (&m.last_log_id, &m.last_membership))
            == Some((&last_log_id, &last_membership))
        {
            return Ok(());
        }
        tracing::warn!(
            recorded = ?recorded.map(|m| m.last_log_id),
            in_file = ?last_log_id,
            "the current snapshot's meta does not match its file; rewriting it from the file"
        );
        let meta = Meta {
            last_log_id,
            last_membership,
            snapshot_id: format!("{}-repaired", last_log_id.map(|l| l.index).unwrap_or(0)),
        };
        self.write_meta(&meta)?;
        self.sync(&self.dir)
    }

    fn io<T>(&self, path: &Path, r: std::io::Result<T>) -> Result<T, Error> {
        r.map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Copies the live database into a new file (SQLite's `VACUUM INTO` reads one consistent
    /// snapshot of it) and makes that the current snapshot.
    async fn build(&self) -> Result<Snapshot<TypeConfig>, Error> {
        let n = self.builds.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!("build-{n}.db"));
        let _ = std::fs::remove_file(&tmp);
        sqlx::query("VACUUM INTO ?")
            .bind(tmp.display().to_string())
            .execute(&self.readers)
            .await
            .map_err(Error::sql("vacuum into snapshot"))?;
        let (last_log_id, last_membership) = {
            let url = format!("sqlite://{}?mode=ro", tmp.display());
            let mut conn = SqliteConnection::connect(&url)
                .await
                .map_err(Error::sql("open snapshot"))?;
            let applied = read_applied(&mut conn).await?;
            conn.close().await.map_err(Error::sql("close snapshot"))?;
            applied
        };
        let meta = Meta {
            last_log_id,
            last_membership,
            snapshot_id: format!("{}-{n}", last_log_id.map(|l| l.index).unwrap_or(0)),
        };
        let data = self.io(&tmp, std::fs::read(&tmp))?;
        self.promote(&tmp, &meta)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }

    fn write_incoming(&self, data: &[u8]) -> Result<PathBuf, Error> {
        let path = self.dir.join("incoming.db");
        let _ = std::fs::remove_file(&path);
        self.io(&path, std::fs::write(&path, data))?;
        Ok(path)
    }

    /// fsync of a file or a directory (after a rename in it): openraft purges the log up to a
    /// snapshot once it is current, so the snapshot must survive a power loss by then.
    fn sync(&self, path: &Path) -> Result<(), Error> {
        self.io(path, std::fs::File::open(path).and_then(|f| f.sync_all()))
    }

    fn promote_incoming(&self, meta: &Meta) -> Result<(), Error> {
        self.promote(&self.dir.join("incoming.db"), meta)
    }

    fn promote(&self, file: &Path, meta: &Meta) -> Result<(), Error> {
        let _pair = self.current_pair.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current_file();
        self.sync(file)?;
        self.io(&current, std::fs::rename(file, &current))?;
        self.write_meta(meta)?;
        self.sync(&self.dir)
    }

    /// Replaces `current.meta.json` atomically (a synced temporary file, renamed).
    fn write_meta(&self, meta: &Meta) -> Result<(), Error> {
        let meta_path = self.dir.join("current.meta.json");
        let text = serde_json::to_vec(meta).map_err(|e| Error::corrupt("snapshot meta", e))?;
        let tmp_meta = self.dir.join("current.meta.json.tmp");
        self.io(&tmp_meta, std::fs::write(&tmp_meta, text))?;
        self.sync(&tmp_meta)?;
        self.io(&meta_path, std::fs::rename(&tmp_meta, &meta_path))
    }

    fn current_file(&self) -> PathBuf {
        self.dir.join("current.db")
    }

    fn current_meta(&self) -> Result<Option<Meta>, Error> {
        let meta_path = self.dir.join("current.meta.json");
        if !meta_path.exists() {
            return Ok(None);
        }
        let text = self.io(&meta_path, std::fs::read(&meta_path))?;
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| Error::corrupt("snapshot meta", e))
    }

    fn current(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
        let _pair = self.current_pair.lock().unwrap_or_else(|p| p.into_inner());
        let Some(meta) = self.current_meta()? else {
            return Ok(None);
        };
        let current = self.current_file();
        let data = self.io(&current, std::fs::read(&current))?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// Builds snapshots off the apply path, from read connections.
pub struct SnapshotBuilder {
    snapshots: Arc<SnapshotDir>,
    writer: StateWriter,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        // The snapshot holds what is committed: commit what was applied, so it is all there.
        self.writer.flush().map_err(snapshot_err)?;
        self.snapshots.build().await.map_err(snapshot_err)
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
            .await
            .map_err(sm_err)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            snapshots: self.snapshots.clone(),
            writer: self.writer.clone(),
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
        self.snapshots.current().map_err(read_sm_err)
    }
}

#[cfg(test)]
#[path = "state_machine_tests.rs"]
mod tests;
