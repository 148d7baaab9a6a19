//! WAL checkpoints off the write path: a thread per SQLite file copies committed WAL frames
//! into the file, so no commit (an apply, a log append) ever runs one inline.
//!
//! SQLite's default checkpoints in the committing connection once the WAL passes 1,000 pages;
//! that commit then also writes those pages into the file and fsyncs it (and, under
//! `synchronous=NORMAL`, fsyncs the WAL first). Measured inside apply that was a stall of tens
//! of milliseconds at 256 clients (BENCHMARKS.md). Here the writer never checkpoints
//! (`wal_autocheckpoint=0`, see [`crate::db`]) and this thread runs a passive checkpoint, which
//! takes no lock a writer needs, every [`CHECKPOINT_EVERY`].

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::error::Error;

/// How often the WAL is copied into the file. Short enough that the WAL stays a few MB under
/// load (SQLite restarts it from the start once every frame is copied).
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Handle to a file's checkpoint thread; the thread stops when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the WAL of `path`, on a connection of its own.
    pub(crate) fn spawn(path: &Path) -> Result<Self, Error> {
        let conn = rusqlite::Connection::open(path).map_err(Error::write("open checkpointer"))?;
        // FULL: the WAL is fsynced before its pages are copied, the file after.
        conn.execute_batch("PRAGMA synchronous = FULL")
            .map_err(Error::write("set checkpointer pragmas"))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let file = path.display().to_string();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(CHECKPOINT_EVERY)
                {
                    if let Err(error) = checkpoint(&conn) {
                        tracing::warn!(file = %file, %error, "wal checkpoint failed");
                    }
                }
            })
            .map_err(|source| Error::Io {
                path: format!("checkpoint thread for {}", path.display()),
                source,
            })?;
        Ok(Checkpointer { _stop: stop })
    }
}

/// One passive checkpoint: copies what it can without waiting for readers or the writer.
fn checkpoint(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }

    /// With the writer's own checkpoints off, only the checkpointer moves committed pages from
    /// the WAL into the file: the file grows to hold the rows only if it runs.
    #[test]
    fn committed_pages_reach_the_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = crate::db::open_write_connection(&path).unwrap();
        writer.execute_batch("CREATE TABLE t (v BLOB)").unwrap();
        for _ in 0..64 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(16384))", [])
                .unwrap();
        }
        assert!(
            file_len(&path) < 64 * 16384,
            "the writer checkpointed by itself"
        );
        let _checkpointer = Checkpointer::spawn(&path).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while file_len(&path) < 64 * 16384 {
            assert!(Instant::now() < deadline, "no checkpoint within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
