//! A node's files are its own: the data directory and its subdirectories are 0700, every file in
//! them 0600. `state.db` and `raft-log.db` hold agents' configurations (secrets included) and
//! the hashes of every token, so no other user of the machine may read them.
//!
//! SQLite gives a database's `-wal` and `-shm` files the mode of the database file itself, so
//! creating that file 0600 before SQLite opens it covers all three. A directory or file left
//! readable by an older version is tightened when the node opens it.

use std::path::Path;

use crate::error::Error;

pub(crate) const PRIVATE_DIR: u32 = 0o700;
pub(crate) const PRIVATE_FILE: u32 = 0o600;

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Creates `dir` (and missing parents) 0700, or tightens it if it exists.
pub(crate) fn private_dir(dir: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR)
            .create(dir)
            .map_err(io_error(dir))?;
        tighten(dir, PRIVATE_DIR)
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).map_err(io_error(dir))
}

/// Makes sure the SQLite file at `path` exists 0600 before SQLite opens it (an empty file is
/// an empty database), and tightens it and its `-wal` and `-shm` files if they exist.
pub(crate) fn private_db_file(path: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE)
            .open(path);
        match created {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error(path)(e)),
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let file = Path::new(&name);
            if file.exists() {
                private_file(file)?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Writes `data` to a new file at `path`, created 0600 (any file there is replaced).
pub(crate) fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE);
    options.open(path)?.write_all(data)
}

/// Makes an existing file 0600: one another library created with its own default mode.
pub(crate) fn private_file(path: &Path) -> Result<(), Error> {
    tighten(path, PRIVATE_FILE)
}

/// Tightens every file under `dir` to 0600 and every directory to 0700 (what an older version
/// may have left readable by others).
pub(crate) fn tighten_tree(dir: &Path) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(io_error(&path))?;
        if kind.is_dir() {
            tighten(&path, PRIVATE_DIR)?;
            tighten_tree(&path)?;
        } else if kind.is_file() {
            tighten(&path, PRIVATE_FILE)?;
        }
    }
    Ok(())
}

/// Removes the group's and others' access to `path`, leaving the owner's as `mode` says. A
/// file gone since it was listed is skipped: SQLite removes a `-wal` and `-shm` file when its
/// last connection closes, which a node restarted in the same process may not have waited for.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let current = match std::fs::metadata(path) {
        Ok(metadata) => metadata.permissions(),
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(io_error(path)(e)),
    };
    if current.mode() & 0o777 != mode {
        tracing::info!(path = %path.display(), from = format!("{:o}", current.mode() & 0o777),
            to = format!("{mode:o}"), "made a data file private");
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
            Err(e) if !gone(&e) => return Err(io_error(path)(e)),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten(_path: &Path, _mode: u32) -> Result<(), Error> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    /// Every file and directory under `dir`, with `dir` itself.
    fn tree(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut all = vec![dir.to_path_buf()];
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                all.extend(tree(&path));
            } else {
                all.push(path);
            }
        }
        all
    }

    fn assert_private(dir: &Path) {
        for path in tree(dir) {
            let want = if path.is_dir() {
                PRIVATE_DIR
            } else {
                PRIVATE_FILE
            };
            assert_eq!(mode(&path), want, "{} is {:o}", path.display(), mode(&path));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn data_files_are_created_0600_in_0700_directories() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("node").join("data");
        let (log, _sm, _reader) = crate::open(&dir, 1).await.expect("open");
        let names: Vec<String> = tree(&dir)
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        for expected in [
            "state.db",
            "state.db-wal",
            "state.db-shm",
            "raft-log.db",
            "snapshots",
        ] {
            assert!(
                names.iter().any(|n| n == expected),
                "no {expected} in {names:?}"
            );
        }
        assert_private(&dir);
        assert_eq!(
            mode(&base.path().join("node")),
            PRIVATE_DIR,
            "created parents too"
        );
        drop(log);
    }

    /// Regression (e2e `memory_is_the_agents_own_capped_and_kept_after_termination`, 2026-11-28):
    /// a node restarted in the same process listed the old log's `raft-log.db-wal`, SQLite
    /// removed it as the old writer closed, and the open failed with "No such file or
    /// directory". A file gone between the listing and its tightening is skipped.
    #[test]
    fn a_data_file_gone_before_it_is_tightened_is_skipped() {
        let base = tempfile::tempdir().expect("tempdir");
        let gone = base.path().join("raft-log.db-wal");
        assert!(tighten(&gone, PRIVATE_FILE).is_ok());
        assert!(tighten_tree(base.path()).is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_world_readable_data_dir_is_made_private_on_open() {
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("data");
        {
            let (_log, _sm, _reader) = crate::open(&dir, 1).await.expect("first open");
        }
        // A file the first open's writer removed as it closed (a WAL) is not one to check: it
        // vanished between the listing and the chmod once in a full run.
        let open_up = |path: &Path, m: u32| match std::fs::set_permissions(
            path,
            std::fs::Permissions::from_mode(m),
        ) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => other.expect("chmod"),
        };
        for path in tree(&dir) {
            open_up(&path, if path.is_dir() { 0o755 } else { 0o644 });
        }
        let (_log, _sm, _reader) = crate::open(&dir, 1).await.expect("reopen");
        assert_private(&dir);
    }
}
