//! `state.db`'s one write connection, with applies gathered into one transaction that commits
//! every [`COMMIT_EVERY`] or when a reader needs it (etcd's backend batches the same way).
//!
//! Every apply rewrites the page of each row it touches; committing each apply on its own wrote
//! those pages to the WAL again and again (an apply of 19 checkouts rewrote ~19 issue pages, on
//! each node, hundreds of times a second). Inside one open transaction the pages change in
//! SQLite's cache and reach the WAL once per commit.
//!
//! Nothing is lost by committing late: the log holds every applied entry, `state.db` records the
//! applied index in the same transaction as the rows, and a restart replays the log from the
//! index `state.db` has. Snapshots read committed data only, and are taken after a flush, so
//! openraft never purges log entries `state.db` has not committed. Readers of what lives only in
//! SQLite (comments, activity) flush first, so they see every applied write.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError, Weak};
use std::time::Duration;

use crate::db;
use crate::error::Error;

/// How long applied rows may wait in the open transaction before a commit. Longer gathers more
/// rewrites of a page into one; a commit holds apply for as long as it writes.
pub(crate) const COMMIT_EVERY: Duration = Duration::from_millis(50);

/// Cache for the open transaction's pages (negative: KiB), so a large batch does not spill
/// pages to the WAL before it commits.
const WRITER_CACHE_KIB: i64 = 64 * 1024;

struct Inner {
    conn: rusqlite::Connection,
    /// A transaction is open and holds applied rows not yet committed.
    open: bool,
    /// A commit or a write failed: the open transaction is gone, and `state.db` no longer
    /// matches what was applied. Every later use fails; the node must restart and replay.
    failed: Option<String>,
}

/// Cheap handle to the writer; the commit thread stops when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct StateWriter {
    inner: Arc<Mutex<Inner>>,
}

impl StateWriter {
    /// Takes over `conn` and starts the thread that commits every [`COMMIT_EVERY`].
    pub(crate) fn spawn(conn: rusqlite::Connection) -> Result<Self, Error> {
        conn.execute_batch(&format!("PRAGMA cache_size = -{WRITER_CACHE_KIB}"))
            .map_err(Error::write("set writer cache"))?;
        let inner = Arc::new(Mutex::new(Inner {
            conn,
            open: false,
            failed: None,
        }));
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("state-db-commit".into())
            .spawn(move || commit_periodically(weak))
            .map_err(|source| Error::Io {
                path: "state.db commit thread".into(),
                source,
            })?;
        Ok(StateWriter { inner })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` inside the open transaction (beginning one if none is open). If `f` fails, the
    /// transaction is rolled back and the writer refuses every later use.
    ///
    /// Statements into an open transaction change pages in SQLite's cache (`holding`).
    pub(crate) fn write<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<R, Error>,
    ) -> Result<R, Error> {
        holding(&self.inner, |inner| inner.write(f))
    }

    /// Where closed issues are read back from once memory lets them go (`roost-core`'s
    /// `issue_map.rs`). It holds the writer weakly: the commit thread and the final commit
    /// still follow the store's own handles.
    pub(crate) fn issue_rows(&self) -> Arc<IssueRowReader> {
        Arc::new(IssueRowReader {
            inner: Arc::downgrade(&self.inner),
            failure: Mutex::default(),
            installs: Mutex::new(0),
            installed: Condvar::new(),
        })
    }

    /// Commits the open transaction, if any: afterwards readers see every write made so far.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        db::blocking(|| self.lock().commit())
    }

    /// Commits, then runs `f` on the connection outside any transaction (snapshot install).
    pub(crate) fn with_connection<R>(
        &self,
        f: impl FnOnce(&mut rusqlite::Connection) -> Result<R, Error>,
    ) -> Result<R, Error> {
        db::blocking(|| {
            let mut inner = self.lock();
            inner.commit()?;
            f(&mut inner.conn)
        })
    }
}

/// Runs `f` holding the connection. Statements wait for no disk, so they run on the calling
/// task's thread; only when a commit holds the connection is the wait handed to
/// `block_in_place` (whose thread handoff cost more than the statements).
fn holding<R>(inner: &Mutex<Inner>, f: impl FnOnce(&mut Inner) -> R) -> R {
    match inner.try_lock() {
        Ok(mut guard) => f(&mut guard),
        Err(TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
        Err(TryLockError::WouldBlock) => {
            db::blocking(|| f(&mut inner.lock().unwrap_or_else(|p| p.into_inner())))
        }
    }
}

/// Reads an issue's row through the write connection, so that a row written by an apply not
/// yet committed is read as written: memory lets a closed issue go as soon as its row is in
/// the open transaction (`state_machine.rs`).
pub(crate) struct IssueRowReader {
    inner: Weak<Mutex<Inner>>,
    /// The last row that could not be read, for apply to refuse the entry it was read for.
    failure: Mutex<Option<String>>,
    /// Odd while a snapshot install replaces `state.db` under the state that was (its closed
    /// issues read as missing then, not as the snapshot's rows); one more at each start and end.
    installs: Mutex<u64>,
    installed: Condvar,
}

impl IssueRowReader {
    /// The last failed read since the last call, if any.
    pub(crate) fn take_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// A snapshot install is about to replace `state.db`'s rows, until the guard is dropped or
    /// ended (a failed or abandoned install must not leave hashes waiting).
    pub(crate) fn begin_install(&self) -> Installing<'_> {
        *self.installs.lock().unwrap_or_else(|p| p.into_inner()) |= 1;
        Installing(self)
    }

    /// The install is over: the state that reads rows now is the one loaded from them.
    fn end_install(&self) {
        let mut installs = self.installs.lock().unwrap_or_else(|p| p.into_inner());
        if *installs % 2 == 1 {
            *installs += 1;
        }
        self.installed.notify_all();
    }

    /// Waits out an install in progress; the count of installs begun and ended so far.
    pub(crate) fn after_installs(&self) -> u64 {
        let installs = self.installs.lock().unwrap_or_else(|p| p.into_inner());
        let installs = self.installed.wait_while(installs, |n| *n % 2 == 1);
        *installs.unwrap_or_else(|p| p.into_inner())
    }

    fn installing(&self) -> bool {
        *self.installs.lock().unwrap_or_else(|p| p.into_inner()) % 2 == 1
    }

    fn read(&self, id: &str) -> Result<roost_core::Issue, String> {
        let inner = self.inner.upgrade().ok_or("state.db is closed")?;
        let read = |inner: &Inner| -> Result<String, String> {
            // Checked holding the connection, which an install's copy takes too: a read either
            // finishes before the copy or sees the install begun.
            if self.installing() {
                return Err("a snapshot is being installed".into());
            }
            inner.usable().map_err(|e| e.to_string())?;
            let mut statement = inner
                .conn
                .prepare_cached("SELECT data FROM issues WHERE id = ?1")
                .map_err(|e| e.to_string())?;
            statement
                .query_row([id], |row| row.get(0))
                .map_err(|e| e.to_string())
        };
        let data = holding(&inner, |inner| read(inner))?;
        serde_json::from_str(&data).map_err(|e| format!("its row does not parse: {e}"))
    }
}

/// An install in progress (`IssueRowReader::begin_install`).
pub(crate) struct Installing<'a>(&'a IssueRowReader);

impl Installing<'_> {
    /// Ends the install now: called holding the state's write lock as the loaded state
    /// replaces the old, so no step of a hash reads the new state's rows as missing.
    pub(crate) fn end(&self) {
        self.0.end_install();
    }
}

impl Drop for Installing<'_> {
    fn drop(&mut self) {
        self.0.end_install();
    }
}

impl roost_core::IssueRows for IssueRowReader {
    fn issue(&self, id: &str) -> Result<roost_core::Issue, String> {
        self.read(id).inspect_err(|e| {
            if !self.installing() {
                tracing::error!(issue = id, error = %e, "a closed issue's row cannot be read from state.db");
            }
            let failure = format!("closed issue {id} is in state.db only and its row cannot be read: {e}");
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
        })
    }
}

impl Inner {
    fn write<R>(
        &mut self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<R, Error>,
    ) -> Result<R, Error> {
        self.usable()?;
        if !self.open {
            let begun = self.conn.execute_batch("BEGIN");
            begun.map_err(|e| self.fail(Error::write("begin apply")(e)))?;
            self.open = true;
        }
        f(&self.conn).map_err(|e| self.fail(e))
    }

    fn usable(&self) -> Result<(), Error> {
        match &self.failed {
            Some(message) => Err(Error::StateWriterFailed {
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records `error` as fatal for this writer and drops the open transaction.
    fn fail(&mut self, error: Error) -> Error {
        if self.open {
            // Whatever state the transaction is in, none of it may be committed now.
            let _ = self.conn.execute_batch("ROLLBACK");
            self.open = false;
        }
        tracing::error!(%error, "state.db write failed; this node must restart");
        self.failed = Some(error.to_string());
        error
    }

    fn commit(&mut self) -> Result<(), Error> {
        self.usable()?;
        if !self.open {
            return Ok(());
        }
        match self.conn.execute_batch("COMMIT") {
            Ok(()) => {
                self.open = false;
                Ok(())
            }
            Err(e) => Err(self.fail(Error::write("commit apply")(e))),
        }
    }
}

impl Drop for Inner {
    /// A clean shutdown keeps what was applied (a crash would replay it from the log).
    fn drop(&mut self) {
        if self.failed.is_none() && self.open {
            if let Err(error) = self.conn.execute_batch("COMMIT") {
                tracing::warn!(%error, "state.db: final commit failed; the log will replay it");
            }
        }
    }
}

fn commit_periodically(inner: Weak<Mutex<Inner>>) {
    loop {
        std::thread::sleep(COMMIT_EVERY);
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut inner = inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.failed.is_some() {
            return;
        }
        // A failure is recorded in the writer, which the next apply reports to openraft.
        let _ = inner.commit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> (tempfile::TempDir, StateWriter) {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = db::open_write_connection(&dir.path().join("s.db")).expect("open");
        conn.execute_batch("CREATE TABLE t (v)").expect("schema");
        (dir, StateWriter::spawn(conn).expect("spawn"))
    }

    /// A failed apply leaves rows that match no applied index: none of the open transaction
    /// may be committed, and the writer must refuse to go on (the node restarts and replays).
    #[test]
    fn a_failed_write_discards_the_open_transaction_and_refuses_later_writes() {
        let (_dir, writer) = writer();
        writer
            .write(|c| {
                c.execute_batch("INSERT INTO t VALUES (1)")
                    .map_err(Error::write("insert"))
            })
            .expect("first write");
        let failed = writer.write(|c| {
            c.execute_batch("INSERT INTO t VALUES (2)")
                .map_err(Error::write("insert"))?;
            Err::<(), _>(Error::corrupt("test", "refused"))
        });
        assert!(failed.is_err());
        let later = writer.write(|c| {
            c.execute_batch("INSERT INTO t VALUES (3)")
                .map_err(Error::write("insert"))
        });
        assert!(
            matches!(later, Err(Error::StateWriterFailed { .. })),
            "{later:?}"
        );
        assert!(matches!(
            writer.flush(),
            Err(Error::StateWriterFailed { .. })
        ));
        let rows: i64 = writer
            .inner
            .lock()
            .unwrap()
            .conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(rows, 0, "rows of the failed transaction were committed");
    }

    /// Regression: with checkpoints moved to a thread on another connection, a checkpoint never
    /// finished between a commit and the next transaction, so SQLite never restarted the WAL:
    /// `state.db-wal` reached 226 MB in 30 s of load. Checkpoints now follow the commit on the
    /// writer's own connection, and the WAL stays near SQLite's 1,000-page threshold.
    #[test]
    fn the_wal_stays_bounded_across_many_commits() {
        let (dir, writer) = writer();
        let blob = vec![7u8; 16 * 1024];
        for round in 0..20 {
            for _ in 0..100 {
                writer
                    .write(|c| {
                        c.execute("INSERT INTO t VALUES (?1)", [&blob])
                            .map(|_| ())
                            .map_err(Error::write("insert"))
                    })
                    .unwrap_or_else(|e| panic!("write in round {round}: {e}"));
            }
            writer.flush().expect("commit");
        }
        let wal = std::fs::metadata(dir.path().join("s.db-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(
            wal < 16 * 1024 * 1024,
            "32 MB written in 20 commits left a WAL of {wal} bytes"
        );
    }
}
