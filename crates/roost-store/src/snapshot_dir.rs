//! `snapshots/` of a node's data dir: the record of the snapshot openraft was last told of and
//! the last copy of `state.db`, made only when a snapshot is sent.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use openraft::{LogId, Snapshot};
use tokio::sync::watch;

use crate::error::Error;
use crate::purge_gate::OnDisk;
use crate::state_machine::{meta_at, parse_applied, without_bytes, Meta, NodeId};
use crate::types::TypeConfig;

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
pub(crate) struct SnapshotDir {
    dir: PathBuf,
    state_db: PathBuf,
    pub(crate) copies: AtomicU64,
    /// Held while `current.db` is replaced or read, so a reader never sees half a replacement.
    current_file: Mutex<()>,
    /// Held while `current.meta.json` is replaced: a build (openraft runs it in its own task)
    /// and an install may record at the same time.
    recording: Mutex<()>,
    /// What `state.db` holds on disk, for the log store's purges (`purge_gate.rs`).
    on_disk: watch::Sender<OnDisk>,
}

impl SnapshotDir {
    pub(crate) fn new(dir: PathBuf, state_db: PathBuf) -> Result<Self, Error> {
        crate::files::private_dir(&dir)?;
        let snapshots = SnapshotDir {
            dir,
            state_db,
            copies: AtomicU64::new(0),
            current_file: Mutex::new(()),
            recording: Mutex::new(()),
            on_disk: watch::Sender::new(OnDisk::default()),
        };
        snapshots.remove_unfinished_copies();
        Ok(snapshots)
    }

    /// A copy or an incoming snapshot cut short by a crash is never resumed.
    pub(crate) fn remove_unfinished_copies(&self) {
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

    pub(crate) fn io<T>(&self, path: &Path, r: std::io::Result<T>) -> Result<T, Error> {
        r.map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Records `meta` as the current snapshot: its log id is durable in `state.db`. The record
    /// never goes back: a build that read the applied id before an install recorded a later one
    /// records nothing (openraft ignores a built snapshot older than its current one too).
    pub(crate) fn record(&self, meta: &Meta) -> Result<(), Error> {
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
        self.sync(&self.dir)?;
        self.note_durable(meta.last_log_id);
        Ok(())
    }

    /// Raises the log id `state.db` is known to hold on disk to `id`, if it is later.
    pub(crate) fn note_durable(&self, id: Option<LogId<NodeId>>) {
        self.on_disk.send_if_modified(|on_disk| {
            let later = id > on_disk.applied;
            if later {
                on_disk.applied = id;
            }
            later
        });
    }

    /// Notes that snapshots arrive: a purge past `state.db` is an install's from now on.
    pub(crate) fn note_receiving(&self) {
        self.on_disk.send_if_modified(|on_disk| {
            let first = !on_disk.receives_snapshots;
            on_disk.receives_snapshots = true;
            first
        });
    }

    /// Follows what `state.db` holds on disk.
    pub(crate) fn on_disk(&self) -> watch::Receiver<OnDisk> {
        self.on_disk.subscribe()
    }

    pub(crate) fn write_incoming(&self, data: &[u8]) -> Result<PathBuf, Error> {
        let path = self.dir.join("incoming.db");
        self.io(&path, crate::files::write_private(&path, data))?;
        Ok(path)
    }

    /// fsync of a file or a directory (after a rename in it): openraft purges the log up to a
    /// snapshot once it is current, so the snapshot must survive a power loss by then.
    pub(crate) fn sync(&self, path: &Path) -> Result<(), Error> {
        self.io(path, std::fs::File::open(path).and_then(|f| f.sync_all()))
    }

    pub(crate) fn promote_incoming(&self) -> Result<(), Error> {
        let _file = self.current_file.lock().unwrap_or_else(|p| p.into_inner());
        self.promote(&self.dir.join("incoming.db"))
    }

    /// Makes `file` the current copy; the caller holds `current_file`.
    pub(crate) fn promote(&self, file: &Path) -> Result<(), Error> {
        let current = self.current_file();
        self.sync(file)?;
        self.io(&current, std::fs::rename(file, &current))?;
        self.sync(&self.dir)
    }

    /// Replaces `current.meta.json` atomically (a synced temporary file, renamed); the caller
    /// holds `recording`.
    pub(crate) fn write_meta(&self, meta: &Meta) -> Result<(), Error> {
        let meta_path = self.dir.join("current.meta.json");
        let text = serde_json::to_vec(meta).map_err(|e| Error::corrupt("snapshot meta", e))?;
        let tmp_meta = self.dir.join("current.meta.json.tmp");
        self.io(&tmp_meta, crate::files::write_private(&tmp_meta, &text))?;
        self.sync(&tmp_meta)?;
        self.io(&meta_path, std::fs::rename(&tmp_meta, &meta_path))
    }

    pub(crate) fn current_file(&self) -> PathBuf {
        self.dir.join("current.db")
    }

    /// The snapshot openraft was last told of, if any. A record that cannot be parsed (it is
    /// replaced by rename, so only a disk fault garbles it) counts as none: openraft then builds
    /// a snapshot anew on start if its log was purged.
    pub(crate) fn recorded(&self) -> Result<Option<Meta>, Error> {
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
    pub(crate) fn recorded_only(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
        Ok(self.recorded()?.map(without_bytes))
    }

    /// The meta of the copy `file`, from its own `sm_meta`.
    pub(crate) fn meta_of(&self, file: &Path) -> Result<Meta, Error> {
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
    pub(crate) fn current_file_meta(&self) -> Option<Meta> {
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
    pub(crate) fn current_file_log_id(&self) -> Option<LogId<NodeId>> {
        let _file = self.current_file.lock().unwrap_or_else(|p| p.into_inner());
        self.current_file_meta().and_then(|m| m.last_log_id)
    }

    /// Copies committed `state.db` to `copy` (SQLite's `VACUUM INTO` reads one consistent
    /// snapshot of it).
    pub(crate) fn copy_state_db(&self, copy: &Path) -> Result<(), Error> {
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
    pub(crate) fn refresh_current_file(&self, recorded: &Meta) -> Result<Meta, Error> {
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
    pub(crate) fn current(&self) -> Result<Option<Snapshot<TypeConfig>>, Error> {
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
