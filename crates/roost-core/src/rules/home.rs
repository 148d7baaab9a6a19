//! The agent's home.
//!
//! - Chunks are uploaded by the agent's live run (fenced like its other writes), content-
//!   addressed within the company: a chunk already stored is not stored twice. What one agent's
//!   unsaved uploads hold is bounded by its home's cap; uploads of a run that ended without
//!   saving are dropped at that agent's next upload or save.
//! - A save names the files that changed and the paths removed, against the version the run
//!   restored (409 if another run saved since). Every chunk a file names must be stored in the
//!   agent's company, and the sizes must add up. A home past its agent's `homeMaxBytes` is
//!   refused (413) and the previous version stays.
//! - A chunk no home names any more is dropped in the same command.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use serde_json::json;

use super::agent::agent_note;
use super::memory::{live_run_of, writable_agent};
use super::Ctx;
use crate::command::Outcome;
use crate::entity::{Agent, Run};
use crate::error::DomainError;
use crate::home::*;
use crate::limits::MAX_HOME_FILES;
use crate::state::{Change, Decision};

/// The pending chunks of `agent` uploaded by runs that are no longer live (never saved), to
/// drop, and what the rest hold.
fn orphans(ctx: &Ctx<'_>, agent: &Agent, run: &Run) -> (BTreeSet<String>, u64) {
    let mut keys = BTreeSet::new();
    let mut pending_bytes = 0u64;
    for chunk in ctx.state.home.pending_of(&agent.id) {
        let live = chunk.run_id == run.id
            || ctx
                .state
                .runs
                .get(&chunk.run_id)
                .is_some_and(|r| r.status.is_live());
        if live {
            pending_bytes = pending_bytes.saturating_add(chunk.size);
        } else {
            keys.insert(chunk.key());
        }
    }
    (keys, pending_bytes)
}

fn drops(keys: BTreeSet<String>) -> impl Iterator<Item = Change> {
    keys.into_iter()
        .map(|k| Change::Home(HomeChange::ChunkDropped(k)))
}

fn over_cap(agent: &Agent, what: String) -> DomainError {
    DomainError::too_large(
        what,
        agent.home_max_bytes,
        "bytes (the agent's homeMaxBytes; an administrator can raise it)",
    )
}

pub(crate) fn put_chunks(
    ctx: &Ctx<'_>,
    agent_id: &str,
    chunks: &[String],
) -> Result<Decision, DomainError> {
    let agent = writable_agent(ctx, agent_id)?;
    let run = live_run_of(ctx, agent, "a home upload")?;
    let (mut orphaned, pending_bytes) = orphans(ctx, agent, run);
    let mut changes = Vec::new();
    let mut hashes = Vec::with_capacity(chunks.len());
    let mut new_keys = BTreeSet::new();
    let mut new_bytes = 0u64;
    for (i, text) in chunks.iter().enumerate() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| {
                DomainError::invalid(format!("chunks[{i}]"), format!("is not base64: {e}"))
            })?;
        if bytes.len() as u64 > HOME_CHUNK_BYTES {
            return Err(DomainError::too_large(
                format!("chunks[{i}]"),
                HOME_CHUNK_BYTES,
                "bytes",
            ));
        }
        let hash = chunk_hash(&bytes);
        let key = chunk_key(&agent.company_id, &hash);
        hashes.push(hash.clone());
        // An orphan this run uploads again becomes this run's (it would be dropped below).
        let stored = ctx.state.home.chunks.contains_key(&key) && !orphaned.remove(&key);
        if stored || !new_keys.insert(key) {
            continue;
        }
        new_bytes = new_bytes.saturating_add(bytes.len() as u64);
        let chunk = HomeChunk {
            company_id: agent.company_id.clone(),
            hash,
            size: bytes.len() as u64,
            agent_id: agent.id.clone(),
            run_id: run.id.clone(),
        };
        changes.push(Change::Home(HomeChange::Chunk(chunk, ChunkBytes(bytes))));
    }
    changes.extend(drops(orphaned));
    let unsaved = pending_bytes.saturating_add(new_bytes);
    if unsaved > agent.home_max_bytes {
        return Err(over_cap(
            agent,
            format!("this run's unsaved home uploads ({unsaved} bytes)"),
        ));
    }
    Ok(Decision {
        note: agent_note(
            agent,
            json!({ "home": "chunks", "chunks": hashes.len(), "newBytes": new_bytes }),
        ),
        outcome: Outcome::HomeChunks(hashes),
        changes,
    })
}

pub(crate) fn save(
    ctx: &Ctx<'_>,
    agent_id: &str,
    base_version: u64,
    files: &BTreeMap<String, HomeFile>,
    deleted: &[String],
) -> Result<Decision, DomainError> {
    let agent = writable_agent(ctx, agent_id)?;
    let run = live_run_of(ctx, agent, "a home save")?;
    let current = ctx.state.home.homes.get(agent_id);
    let version = current.map_or(0, |h| h.version);
    if version != base_version {
        return Err(DomainError::conflict(format!(
            "the agent's home is at version {version}, not {base_version}: another run saved it \
             after this one restored it; restore version {version} and make the changes again"
        )));
    }
    let mut next = current.map(|h| h.files.clone()).unwrap_or_default();
    for path in deleted {
        next.remove(path);
    }
    for (path, file) in files {
        check_file(ctx, agent, path, file)?;
        next.insert(path.clone(), file.clone());
    }
    if next.len() > MAX_HOME_FILES {
        return Err(DomainError::too_large(
            "files",
            MAX_HOME_FILES as u64,
            "files in a home",
        ));
    }
    check_tree(&next)?;
    let bytes = next.values().fold(0u64, |a, f| a.saturating_add(f.size));
    if bytes > agent.home_max_bytes {
        return Err(over_cap(
            agent,
            format!("the agent's home ({bytes} bytes after this save)"),
        ));
    }
    let home = AgentHome {
        agent_id: agent.id.clone(),
        company_id: agent.company_id.clone(),
        version: version.saturating_add(1),
        bytes,
        files: next,
        updated_at: ctx.now(),
        run_id: Some(run.id.clone()),
    };
    // An orphan the new home names (its bytes were stored when a dead run uploaded them) stays.
    let (mut orphaned, _) = orphans(ctx, agent, run);
    for hash in home.files.values().flat_map(|f| f.chunks.iter()) {
        orphaned.remove(&chunk_key(&home.company_id, hash));
    }
    let mut changes: Vec<Change> = drops(orphaned).collect();
    changes.extend(unreferenced(ctx, agent, run, current, &home));
    changes.push(Change::Home(HomeChange::Home(home.clone())));
    Ok(Decision {
        note: agent_note(
            agent,
            json!({
                "home": "saved",
                "version": home.version,
                "changed": files.len(),
                "deleted": deleted.len(),
                "bytes": home.bytes,
            }),
        ),
        outcome: Outcome::AgentHome(home),
        changes,
    })
}

/// A file's chunks are stored in the agent's company and add up to its size.
fn check_file(
    ctx: &Ctx<'_>,
    agent: &Agent,
    path: &str,
    file: &HomeFile,
) -> Result<(), DomainError> {
    let mut sum = 0u64;
    for hash in &file.chunks {
        let chunk = ctx
            .state
            .home
            .chunks
            .get(&chunk_key(&agent.company_id, hash))
            .ok_or_else(|| {
                DomainError::invalid(
                    "files",
                    format!("{path} names chunk {hash}, which is not stored: upload it first"),
                )
            })?;
        sum = sum.saturating_add(chunk.size);
    }
    if sum != file.size {
        return Err(DomainError::invalid(
            "files",
            format!("{path} says {} bytes but its chunks hold {sum}", file.size),
        ));
    }
    Ok(())
}

/// No path is both a file and a directory of another (`a` and `a/b`): a worker could not
/// write both.
fn check_tree(files: &BTreeMap<String, HomeFile>) -> Result<(), DomainError> {
    for path in files.keys() {
        for (i, _) in path.match_indices('/') {
            let dir = &path[..i];
            if files.contains_key(dir) {
                return Err(DomainError::invalid(
                    "files",
                    format!("{dir} is a file, so {path} cannot be inside it"),
                ));
            }
        }
    }
    Ok(())
}

/// Drops for the chunks that no home names once `after` replaces `before`, and for this run's
/// uploads the save did not use.
fn unreferenced(
    ctx: &Ctx<'_>,
    agent: &Agent,
    run: &Run,
    before: Option<&AgentHome>,
    after: &AgentHome,
) -> Vec<Change> {
    let mut delta: BTreeMap<String, i64> = BTreeMap::new();
    let company = &agent.company_id;
    for (home, sign) in before.map(|b| (b, -1)).into_iter().chain([(after, 1)]) {
        for hash in home.files.values().flat_map(|f| f.chunks.iter()) {
            *delta.entry(chunk_key(company, hash)).or_default() += sign;
        }
    }
    let mut dropped = BTreeSet::new();
    for (key, d) in &delta {
        let refs = ctx.state.home.refs(key) as i64 + d;
        if refs <= 0 && ctx.state.home.refs(key) > 0 {
            dropped.insert(key.clone());
        }
    }
    for chunk in ctx.state.home.pending_of(&agent.id) {
        let key = chunk.key();
        if chunk.run_id == run.id && delta.get(&key).copied().unwrap_or(0) <= 0 {
            dropped.insert(key);
        }
    }
    drops(dropped).collect()
}
