//! The agent's home files on the worker: before a run the home directory is
//! made to match the replicated manifest (missing or changed files fetched by chunk, files the
//! manifest does not have removed); after it, the files the run changed are uploaded (only the
//! chunks the manifest does not already name) and saved as a new version, a write of that run.
//! Memory's own files (`roost_core::home::is_managed`) are left to `memory/mod.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use roost_client::{HomeFile, HomeView, RoostClient};
use roost_core::home::{chunk_hash, is_managed, HOME_CHUNK_BYTES};
use roost_core::limits::{MAX_HOME_FILES, MAX_HOME_UPLOAD_BYTES, MAX_HOME_UPLOAD_CHUNKS};

/// The bytes one upload of chunks carries at most: one full chunk (small ones share it), under
/// the server's bound, so that no log entry is big (`roost-raft/src/proposer.rs`: an entry of
/// a few hundred KiB already misses openraft's one-heartbeat answer time).
const UPLOAD_BYTES: usize = {
    let one_chunk = HOME_CHUNK_BYTES as usize;
    if one_chunk < MAX_HOME_UPLOAD_BYTES {
        one_chunk
    } else {
        MAX_HOME_UPLOAD_BYTES
    }
};

/// A file found in the home: its manifest entry and where it is.
struct LocalFile {
    entry: HomeFile,
    path: PathBuf,
}

/// The home as this run restored it.
pub(crate) struct RestoredHome {
    pub view: HomeView,
    /// How many files were fetched (the rest were already here).
    pub fetched: usize,
    pub removed: usize,
}

/// Makes `dir` hold exactly the files of the agent's replicated home (memory's own files aside).
pub(crate) async fn restore(
    client: &RoostClient,
    agent_id: &str,
    dir: &Path,
) -> Result<RestoredHome, String> {
    let view = client
        .agent_home(agent_id)
        .await
        .map_err(|e| format!("home: reading the agent's home: {e}"))?;
    let local = scan(dir).map_err(|e| format!("home: reading {}: {e}", dir.display()))?;
    let mut fetched = 0;
    for (path, file) in &view.home.files {
        if local.get(path).is_some_and(|l| l.entry == *file) {
            continue;
        }
        let mut bytes = Vec::with_capacity(usize::try_from(file.size).unwrap_or(0));
        for hash in &file.chunks {
            let chunk = client
                .home_chunk(agent_id, hash)
                .await
                .map_err(|e| format!("home: fetching {path}: {e}"))?;
            if chunk_hash(&chunk) != *hash {
                return Err(format!("home: a chunk of {path} does not match its hash"));
            }
            bytes.extend_from_slice(&chunk);
        }
        write_file(&dir.join(path), &bytes, file.executable)
            .map_err(|e| format!("home: writing {path}: {e}"))?;
        fetched += 1;
    }
    let mut removed = 0;
    for (path, l) in &local {
        if !view.home.files.contains_key(path) {
            std::fs::remove_file(&l.path).map_err(|e| format!("home: removing {path}: {e}"))?;
            removed += 1;
        }
    }
    Ok(RestoredHome {
        view,
        fetched,
        removed,
    })
}

/// Saves what the run changed in `dir` against `base`; `Ok(None)` when it changed nothing.
pub(crate) async fn save(
    client: &RoostClient,
    base: &HomeView,
    dir: &Path,
) -> Result<Option<HomeView>, String> {
    let local = scan(dir).map_err(|e| format!("home: reading {}: {e}", dir.display()))?;
    let base_files = &base.home.files;
    let changed: BTreeMap<String, &LocalFile> = local
        .iter()
        .filter(|(p, l)| base_files.get(*p) != Some(&l.entry))
        .map(|(p, l)| (p.clone(), l))
        .collect();
    let deleted: Vec<String> = base_files
        .keys()
        .filter(|p| !local.contains_key(*p))
        .cloned()
        .collect();
    if changed.is_empty() && deleted.is_empty() {
        return Ok(None);
    }
    let total: u64 = local.values().map(|l| l.entry.size).sum();
    if total > base.max_bytes {
        return Err(format!(
            "home: not saved: its files hold {total} bytes, over the agent's cap of {} bytes \
             (homeMaxBytes); version {} is kept. Remove files or ask an administrator to raise \
             the cap",
            base.max_bytes, base.home.version
        ));
    }
    let known: BTreeSet<&String> = base_files.values().flat_map(|f| f.chunks.iter()).collect();
    upload(client, &changed, &known).await?;
    let files: BTreeMap<String, HomeFile> = changed
        .iter()
        .map(|(p, l)| (p.clone(), l.entry.clone()))
        .collect();
    client
        .save_agent_home(base.home.version, &files, &deleted)
        .await
        .map(Some)
        .map_err(|e| match e.status() {
            Some(409) => format!(
                "home: not saved: another run saved the agent's home after this run restored \
                 version {}: {e}",
                base.home.version
            ),
            _ => format!("home: not saved: {e}"),
        })
}

/// Uploads the chunks of `changed` files the server is not known to hold, in batches under the
/// upload limits.
async fn upload(
    client: &RoostClient,
    changed: &BTreeMap<String, &LocalFile>,
    known: &BTreeSet<&String>,
) -> Result<(), String> {
    let mut sent: BTreeSet<String> = BTreeSet::new();
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut batch_bytes = 0usize;
    for (path, file) in changed {
        if file
            .entry
            .chunks
            .iter()
            .all(|h| known.contains(h) || sent.contains(h))
        {
            continue;
        }
        let bytes = std::fs::read(&file.path).map_err(|e| format!("home: reading {path}: {e}"))?;
        for (piece, hash) in bytes
            .chunks(HOME_CHUNK_BYTES as usize)
            .zip(&file.entry.chunks)
        {
            if known.contains(hash) || !sent.insert(hash.clone()) {
                continue;
            }
            if batch_bytes + piece.len() > UPLOAD_BYTES || batch.len() == MAX_HOME_UPLOAD_CHUNKS {
                send(client, &mut batch).await?;
                batch_bytes = 0;
            }
            batch_bytes += piece.len();
            batch.push(piece.to_vec());
        }
    }
    if !batch.is_empty() {
        send(client, &mut batch).await?;
    }
    Ok(())
}

async fn send(client: &RoostClient, batch: &mut Vec<Vec<u8>>) -> Result<(), String> {
    let parts: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    client
        .put_home_chunks(&parts)
        .await
        .map_err(|e| format!("home: not saved: uploading files: {e}"))?;
    batch.clear();
    Ok(())
}

/// The home's regular files by relative `/` path, memory's own and symlinks left out.
fn scan(dir: &Path) -> std::io::Result<BTreeMap<String, LocalFile>> {
    let mut files = BTreeMap::new();
    if !dir.exists() {
        return Ok(files);
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for item in std::fs::read_dir(&at)? {
            let item = item?;
            let path = item.path();
            let Ok(relative) = path.strip_prefix(dir) else {
                continue;
            };
            let Some(name) = relative.to_str().map(|s| s.replace('\\', "/")) else {
                continue; // a name that is not UTF-8 cannot be in a manifest
            };
            if is_managed(&name) {
                continue;
            }
            let kind = item.file_type()?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                if files.len() >= MAX_HOME_FILES {
                    return Err(std::io::Error::other(format!(
                        "more than {MAX_HOME_FILES} files"
                    )));
                }
                let bytes = std::fs::read(&path)?;
                let entry = HomeFile {
                    size: bytes.len() as u64,
                    chunks: bytes
                        .chunks(HOME_CHUNK_BYTES as usize)
                        .map(chunk_hash)
                        .collect(),
                    executable: is_executable(&item.metadata()?),
                };
                files.insert(name, LocalFile { entry, path });
            }
        }
    }
    Ok(files)
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    false
}

/// Writes through a temporary file and a rename, so a crash leaves the old file or the new.
fn write_file(path: &Path, bytes: &[u8], executable: bool) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.roost-restoring"));
    std::fs::write(&tmp, bytes)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = if executable { 0o700 } else { 0o600 };
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    }
    let _ = executable;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_lists_files_by_relative_path_and_leaves_memory_files_out() {
        let dir = std::env::temp_dir().join(format!("roost-home-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("life/projects")).expect("dirs");
        std::fs::create_dir_all(dir.join("memory/conflicts")).expect("dirs");
        std::fs::write(dir.join("life/projects/roost.md"), "# Roost\n").expect("file");
        std::fs::write(dir.join("memory/2026-11-25.md"), "- shipped\n").expect("file");
        std::fs::write(dir.join("MEMORY.md"), "memory's own").expect("file");
        std::fs::write(dir.join("memory/recent.md"), "memory's own").expect("file");
        std::fs::write(dir.join("memory/conflicts/r1-MEMORY.md"), "kept").expect("file");
        let big = vec![7u8; HOME_CHUNK_BYTES as usize + 10];
        std::fs::write(dir.join("big.bin"), &big).expect("file");
        let files = scan(&dir).expect("scan");
        let paths: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            ["big.bin", "life/projects/roost.md", "memory/2026-11-25.md"]
        );
        let big_entry = &files["big.bin"].entry;
        assert_eq!(big_entry.size, big.len() as u64);
        assert_eq!(
            big_entry.chunks.len(),
            2,
            "two chunks for a file past one chunk"
        );
        assert_eq!(
            files["life/projects/roost.md"].entry.chunks,
            [chunk_hash(b"# Roost\n")]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
