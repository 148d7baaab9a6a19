//! The agent's home: whatever files an agent keeps under `$AGENT_HOME`
//! (Paperclip's `para-memory-files` PARA tree, OpenClaw workspace files, ...), replicated so the
//! next run finds them on any worker.
//!
//! A home is a manifest (path → size and the content hashes of its chunks) plus the chunks,
//! content-addressed per company. The manifest and every chunk's metadata are in memory on every
//! node; a chunk's bytes only in the store (`home_chunk_bytes`), read when a worker restores a
//! home. A worker uploads the chunks it lacks (`PutHomeChunks`), then saves the manifest
//! (`SaveAgentHome`): both are writes of the agent's live run, fenced like its other writes.
//! The rules are in `rules/home.rs`, the bounds in `limits.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::time::Timestamp;

/// A file is stored in chunks of at most this many bytes (so one upload stays under the REST
/// body limit, and an edit near a big file's end uploads only its last chunk).
pub const HOME_CHUNK_BYTES: u64 = 256 * 1024;

/// A home's cap when its agent sets none (`Agent::home_max_bytes`).
pub const DEFAULT_HOME_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// One file of a home.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeFile {
    pub size: u64,
    /// The SHA-256 (lowercase hex) of each chunk, in order; empty for an empty file.
    pub chunks: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub executable: bool,
}

/// An agent's home: its files by relative path (`/`-separated).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentHome {
    pub agent_id: String,
    pub company_id: String,
    /// 0 before the first save, one more at each.
    pub version: u64,
    /// The sum of the files' sizes.
    pub bytes: u64,
    pub files: BTreeMap<String, HomeFile>,
    pub updated_at: Timestamp,
    /// The run that saved this version.
    #[serde(default)]
    pub run_id: Option<String>,
}

/// A stored chunk. Immutable once written; dropped when no home refers to it (or, uploaded by a
/// run that never saved, when its agent's next upload finds that run ended).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeChunk {
    pub company_id: String,
    pub hash: String,
    pub size: u64,
    /// Who uploaded it first.
    pub agent_id: String,
    pub run_id: String,
}

impl HomeChunk {
    pub fn key(&self) -> String {
        chunk_key(&self.company_id, &self.hash)
    }
}

/// Chunks are content-addressed within a company only: a hash names no other company's bytes.
pub fn chunk_key(company_id: &str, hash: &str) -> String {
    format!("{company_id}/{hash}")
}

/// The SHA-256 of `bytes`, lowercase hex: a chunk's address.
pub fn chunk_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A chunk's bytes, on their way from the command to the store (never kept in memory).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkBytes(pub Vec<u8>);

impl std::fmt::Debug for ChunkBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HomeChange {
    Home(AgentHome),
    /// A new chunk and its bytes (the store keeps a chunk's first write).
    Chunk(HomeChunk, ChunkBytes),
    /// A chunk no home refers to any more (its key).
    ChunkDropped(String),
}

/// Every home and every chunk's metadata, with the derived reference counts.
#[derive(Clone, Debug, Default)]
pub struct HomeState {
    /// Homes by agent id.
    pub homes: BTreeMap<String, AgentHome>,
    /// Chunks by key ([`chunk_key`]).
    pub chunks: BTreeMap<String, HomeChunk>,
    /// How many file entries of all homes name each chunk key (derived).
    refs: BTreeMap<String, u64>,
    /// Unreferenced chunks by the agent that uploaded them (derived).
    pending: BTreeMap<String, BTreeSet<String>>,
}

impl HomeState {
    pub(crate) fn put(&mut self, change: HomeChange) {
        match change {
            HomeChange::Home(home) => {
                if let Some(old) = self.homes.remove(&home.agent_id) {
                    for key in chunk_keys(&old) {
                        if let Some(n) = self.refs.get_mut(&key) {
                            *n = n.saturating_sub(1);
                            if *n == 0 {
                                self.refs.remove(&key);
                            }
                        }
                    }
                }
                for key in chunk_keys(&home) {
                    *self.refs.entry(key.clone()).or_default() += 1;
                    if let Some(chunk) = self.chunks.get(&key) {
                        if let Some(set) = self.pending.get_mut(&chunk.agent_id) {
                            set.remove(&key);
                        }
                    }
                }
                self.homes.insert(home.agent_id.clone(), home);
            }
            HomeChange::Chunk(chunk, _) => {
                let key = chunk.key();
                if !self.refs.contains_key(&key) {
                    self.pending
                        .entry(chunk.agent_id.clone())
                        .or_default()
                        .insert(key.clone());
                }
                self.chunks.insert(key, chunk);
            }
            HomeChange::ChunkDropped(key) => {
                if let Some(chunk) = self.chunks.remove(&key) {
                    if let Some(set) = self.pending.get_mut(&chunk.agent_id) {
                        set.remove(&key);
                        if set.is_empty() {
                            self.pending.remove(&chunk.agent_id);
                        }
                    }
                }
                self.refs.remove(&key);
            }
        }
    }

    /// How many file entries name the chunk `key`.
    pub fn refs(&self, key: &str) -> u64 {
        self.refs.get(key).copied().unwrap_or(0)
    }

    /// The chunks `agent_id` uploaded that no home names yet.
    pub fn pending_of(&self, agent_id: &str) -> impl Iterator<Item = &HomeChunk> {
        self.pending
            .get(agent_id)
            .into_iter()
            .flatten()
            .filter_map(|k| self.chunks.get(k))
    }

    /// Whether `agent_id` may read the chunk `hash` of `company_id`: its home names it, or it
    /// uploaded it.
    pub fn readable_by(&self, company_id: &str, agent_id: &str, hash: &str) -> bool {
        let key = chunk_key(company_id, hash);
        let Some(chunk) = self.chunks.get(&key) else {
            return false;
        };
        chunk.agent_id == agent_id
            || self.homes.get(agent_id).is_some_and(|h| {
                h.company_id == company_id
                    && h.files.values().any(|f| f.chunks.iter().any(|c| c == hash))
            })
    }
}

/// The chunk keys a home's files name, once per file entry.
fn chunk_keys(home: &AgentHome) -> impl Iterator<Item = String> + '_ {
    home.files
        .values()
        .flat_map(|f| f.chunks.iter())
        .map(|h| chunk_key(&home.company_id, h))
}

/// Paths in a home that hold the replicated memory itself (`memory.rs`: documents, live state,
/// the rolling log's render, the entries a run leaves for its own log and its company's): synced
/// as memory, never as home files.
pub const MANAGED_FILES: [&str; 7] = [
    "MEMORY.md",
    "STATE.md",
    "memory/recent.md",
    "memory/current-task.md",
    "memory/coordinates.json",
    "memory/entry.md",
    "memory/company-entry.md",
];
/// Directories of the home that are the worker's, never synced: edits a save refused, and the
/// company's shared memory (documents, log, live state), written read-only before each run.
pub const MANAGED_DIRS: [&str; 2] = ["memory/conflicts", "memory/company"];

/// Whether `path` (relative, `/`-separated) is memory's rather than the home's.
pub fn is_managed(path: &str) -> bool {
    MANAGED_FILES.contains(&path)
        || MANAGED_DIRS.iter().any(|dir| {
            path == *dir
                || path
                    .strip_prefix(dir)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
}

/// Why `path` cannot name a file of a home, if it cannot: it must be relative, `/`-separated,
/// without empty, `.` or `..` parts, and not one of memory's own files.
pub fn path_problem(path: &str) -> Option<String> {
    if let Some(problem) = relative_path_problem(path) {
        return Some(problem);
    }
    if is_managed(path) {
        return Some(format!(
            "{path} is the agent's memory, saved through the memory API, not as a home file"
        ));
    }
    None
}

/// Why `path` cannot name a file under a directory a worker writes (a home, a skill), if it
/// cannot: it must be relative, '/'-separated, without empty, '.' or '..' parts.
pub fn relative_path_problem(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("a file path is empty".into());
    }
    if path.len() > crate::limits::MAX_HOME_PATH_BYTES {
        return Some(format!(
            "the file path {:?}... is longer than {} bytes",
            path.chars().take(40).collect::<String>(),
            crate::limits::MAX_HOME_PATH_BYTES
        ));
    }
    if path.starts_with('/') || path.contains('\\') || path.contains('\0') {
        return Some(format!(
            "the file path {path:?} must be relative and use '/' between its parts"
        ));
    }
    if path
        .split('/')
        .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return Some(format!(
            "the file path {path:?} has an empty, '.' or '..' part"
        ));
    }
    None
}
