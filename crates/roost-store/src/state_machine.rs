//! The Raft state machine on `state.db`, with snapshots as consistent copies of that file.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StoredMembership,
};
use roost_core::State;
use sqlx::sqlite::SqlitePool;
use sqlx::{Connection, Row, SqliteConnection};
use tokio::sync::watch;

use crate::db;
use crate::error::{read_sm_err, sm_err, snapshot_err, Error};
use crate::reader::StateReader;
use crate::row_batch::RowBatch;
use crate::rows;
use crate::types::{ApplyResult, NodeInfo, TypeConfig};

type NodeId = u64;
type Membership = StoredMembership<NodeId, NodeInfo>;
type Meta = SnapshotMeta<NodeId, NodeInfo>;

pub struct StateMachineStore {
    writer: SqlitePool,
    state: Arc<RwLock<State>>,
    applied_tx: watch::Sender<u64>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    snapshots: Arc<SnapshotDir>,
}

impl StateMachineStore {
    /// Opens `dir/state.db` and loads its state into memory.
    pub async fn open(dir: &Path) -> Result<(Self, StateReader), Error> {
        let path = dir.join("state.db");
        let writer = db::open_writer(&path).await?;
        sqlx::raw_sql(rows::SCHEMA)
            .execute(&writer)
            .await
            .map_err(Error::sql("create state schema"))?;
        let mut conn = writer.acquire().await.map_err(Error::sql("acquire"))?;
        check_schema(&mut conn, &path).await?;
        let mut state = rows::load_state(&mut conn).await?;
        let (last_applied, membership) = read_applied(&mut conn).await?;
        state.applied_index = last_applied.map(|l| l.index).unwrap_or(0);
        drop(conn);
        let state = Arc::new(RwLock::new(state));
        let (applied_tx, applied_rx) = watch::channel(last_applied.map(|l| l.index).unwrap_or(0));
        let readers = db::open_readers(&path, 4).await?;
        let snapshots = Arc::new(SnapshotDir::new(dir.join("snapshots"), readers.clone())?);
        let reader = StateReader::new(state.clone(), readers, applied_rx);
        Ok((
            StateMachineStore {
                writer,
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
        let mut tx = self
            .writer
            .begin()
            .await
            .map_err(Error::sql("begin apply"))?;
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
        rows.write(&mut tx).await?;
        write_applied(&mut tx, self.last_applied, &self.membership).await?;
        tx.commit().await.map_err(Error::sql("commit apply"))?;
        if let Some(last) = self.last_applied {
            self.applied_tx.send_replace(last.index);
        }
        Ok(responses)
    }

    async fn install(&mut self, meta: &Meta, data: Vec<u8>) -> Result<(), Error> {
        let incoming = self.snapshots.write_incoming(&data)?;
        let mut conn = self.writer.acquire().await.map_err(Error::sql("acquire"))?;
        sqlx::query("ATTACH DATABASE ? AS snap")
            .bind(incoming.display().to_string())
            .execute(&mut *conn)
            .await
            .map_err(Error::sql("attach snapshot"))?;
        let copied = copy_from_attached(&mut conn).await;
        sqlx::query("DETACH DATABASE snap")
            .execute(&mut *conn)
            .await
            .map_err(Error::sql("detach snapshot"))?;
        copied?;
        let mut state = rows::load_state(&mut conn).await?;
        let (last_applied, membership) = read_applied(&mut conn).await?;
        state.applied_index = last_applied.map(|l| l.index).unwrap_or(0);
        drop(conn);
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

async fn copy_from_attached(conn: &mut SqliteConnection) -> Result<(), Error> {
    let mut tx = conn.begin().await.map_err(Error::sql("begin install"))?;
    for table in rows::TABLES {
        sqlx::query(&format!("DELETE FROM main.{table}"))
            .execute(&mut *tx)
            .await
            .map_err(Error::sql("clear table"))?;
        sqlx::query(&format!(
            "INSERT INTO main.{table} SELECT * FROM snap.{table}"
        ))
        .execute(&mut *tx)
        .await
        .map_err(Error::sql("copy snapshot table"))?;
    }
    tx.commit().await.map_err(Error::sql("commit install"))
}

async fn check_schema(conn: &mut SqliteConnection, path: &Path) -> Result<(), Error> {
    let found = sqlx::query("SELECT value FROM sm_meta WHERE key = 'schema'")
        .fetch_optional(&mut *conn)
        .await
        .map_err(Error::sql("read schema version"))?
        .map(|r| r.get::<String, _>(0));
    match found {
        None => {
            sqlx::query("INSERT INTO sm_meta (key, value) VALUES ('schema', ?)")
                .bind(rows::SCHEMA_VERSION)
                .execute(&mut *conn)
                .await
                .map_err(Error::sql("write schema version"))?;
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
    let mut last_applied = None;
    let mut membership = Membership::default();
    for row in rows {
        let key: String = row.get(0);
        let value: String = row.get(1);
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

async fn write_applied(
    conn: &mut SqliteConnection,
    last_applied: Option<LogId<NodeId>>,
    membership: &Membership,
) -> Result<(), Error> {
    for (key, value) in [
        ("last_applied", serde_json::to_string(&last_applied)),
        ("membership", serde_json::to_string(membership)),
    ] {
        let value = value.map_err(|e| Error::corrupt("applied state", e))?;
        sqlx::query("INSERT INTO sm_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&mut *conn)
            .await
            .map_err(Error::sql("write applied state"))?;
    }
    Ok(())
}

/// `snapshots/`: the current snapshot (`current.db` + `current.meta.json`) and files in flight.
struct SnapshotDir {
    dir: PathBuf,
    readers: SqlitePool,
    builds: AtomicU64,
}

impl SnapshotDir {
    fn new(dir: PathBuf, readers: SqlitePool) -> Result<Self, Error> {
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.display().to_string(),
            source,
        })?;
        Ok(SnapshotDir {
            dir,
            readers,
            builds: AtomicU64::new(0),
        })
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
        let current = self.dir.join("current.db");
        let meta_path = self.dir.join("current.meta.json");
        let text = serde_json::to_vec(meta).map_err(|e| Error::corrupt("snapshot meta", e))?;
        let tmp_meta = self.dir.join("current.meta.json.tmp");
        self.io(&tmp_meta, std::fs::write(&tmp_meta, text))?;
        self.sync(file)?;
        self.sync(&tmp_meta)?;
        self.io(&current, std::fs::rename(file, &current))?;
        self.io(&meta_path, std::fs::rename(&tmp_meta, &meta_path))?;
        self.sync(&self.dir)
    }

    fn current(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
        let meta_path = self.dir.join("current.meta.json");
        if !meta_path.exists() {
            return Ok(None);
        }
        let meta: Meta = serde_json::from_slice(&self.io(&meta_path, std::fs::read(&meta_path))?)
            .map_err(|e| Error::corrupt("snapshot meta", e))?;
        let current = self.dir.join("current.db");
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
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
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
