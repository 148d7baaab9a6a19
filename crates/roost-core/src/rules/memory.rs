//! Agent memory: the rolling log, versioned documents and live state.
//!
//! - An entry is written by the agent (or an administrator acting for the run) for a live run
//!   of that agent: a write of a run that ended is refused `stale_run` and stores nothing. At
//!   [`MAX_MEMORY_ENTRIES_PER_AGENT`] the oldest entries are dropped in the same command. A
//!   shared entry goes to the company's log instead, written the same way (capped at
//!   [`MAX_MEMORY_ENTRIES_PER_COMPANY`]).
//! - A document is saved by an administrator or, for its own documents, by the agent (fenced
//!   when it names a run) when its current version is the expected one (409 otherwise). The
//!   company's shared documents are saved by administrators only. At
//!   [`MAX_MEMORY_DOCUMENT_VERSIONS`] the oldest version is dropped.
//! - Live state is saved by the agent during a run, each part with the command's time. A
//!   company's live state is saved by an administrator, or by an agent of the company during
//!   its run (fenced).
//!
//! Nothing here deletes memory when an agent is terminated.

use serde_json::json;

use super::agent::{agent_note, visible_agent};
use super::{require_id, Ctx};
use crate::command::Outcome;
use crate::entity::{Agent, Run};
use crate::error::DomainError;
use crate::limits::{
    MAX_MEMORY_DOCUMENT_VERSIONS, MAX_MEMORY_ENTRIES_PER_AGENT, MAX_MEMORY_ENTRIES_PER_COMPANY,
};
use crate::memory::*;
use crate::state::{ActivityNote, Change, Decision};

/// The agent whose memory this is, if the actor may write it: an administrator any, an agent
/// only its own (another company's is not found).
pub(super) fn writable_agent<'a>(ctx: &Ctx<'a>, agent_id: &str) -> Result<&'a Agent, DomainError> {
    let agent = visible_agent(ctx, agent_id)?;
    if let Some(own) = ctx.actor.agent_id() {
        if own != agent_id {
            return Err(DomainError::forbidden(
                "an agent reads and writes only its own memory",
            ));
        }
    } else if !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only an agent or an administrator writes an agent's memory",
        ));
    }
    Ok(agent)
}

/// The live run of `agent` this write is made for: required, and fenced.
pub(super) fn live_run_of<'c>(
    ctx: &'c Ctx<'_>,
    agent: &Agent,
    what: &str,
) -> Result<&'c Run, DomainError> {
    let run_id = ctx.actor.run_id.as_deref().ok_or_else(|| {
        DomainError::invalid(
            "runId",
            format!("{what} is written during a run: send its run id (X-Roost-Run-Id) or use the run's key"),
        )
    })?;
    let run = ctx
        .fence()?
        .ok_or_else(|| DomainError::not_found("run", run_id))?;
    if run.agent_id != agent.id {
        return Err(DomainError::forbidden(format!(
            "run {run_id} belongs to another agent"
        )));
    }
    Ok(run)
}

const DAY_MS: i64 = 24 * 3_600_000;
/// Entries of whole UTC days older than this are compacted into one summary per day
///: still searchable and in the log, at a fraction of the entries.
pub const COMPACT_AFTER_DAYS: i64 = 7;
/// How much of a summary's `did` (the merged entries' `what` lines) and errors are kept.
const SUMMARY_DID_CHARS: usize = 4_000;
const SUMMARY_ERRORS: usize = 10;
const SUMMARY_ERROR_CHARS: usize = 300;

/// Compaction, done with an append at the append's time (so every replica does the same):
/// each UTC day wholly older than [`COMPACT_AFTER_DAYS`] with more than one entry becomes one
/// summary entry (a day's earlier summary absorbs later stragglers). Returns the changes and
/// the ids of the entries it removed.
fn compact_old_days(
    ctx: &Ctx<'_>,
    log: &LogOwner,
) -> (Vec<Change>, std::collections::BTreeSet<String>) {
    let before_day = ctx.now().0.div_euclid(DAY_MS) - COMPACT_AFTER_DAYS;
    let mut days: std::collections::BTreeMap<i64, Vec<&MemoryEntry>> = Default::default();
    for e in ctx.state.memory.log_entries(log) {
        let day = e.created_at.0.div_euclid(DAY_MS);
        if day < before_day {
            days.entry(day).or_default().push(e);
        }
    }
    let mut changes = Vec::new();
    let mut removed = std::collections::BTreeSet::new();
    for (day, entries) in days {
        if entries.len() < 2 {
            continue;
        }
        let summary = summarize(ctx, day, &entries);
        for e in &entries {
            if e.id != summary.id {
                removed.insert(e.id.clone());
                changes.push(Change::Memory(MemoryChange::EntryDropped(e.id.clone())));
            }
        }
        changes.push(Change::Memory(MemoryChange::Entry(summary)));
    }
    (changes, removed)
}

/// One day's entries (in seq order) as one: a summary already among them keeps its id and
/// place; its `did` lists every run's `what`, its errors the first few, verbatim but cut.
fn summarize(ctx: &Ctx<'_>, day: i64, entries: &[&MemoryEntry]) -> MemoryEntry {
    let first = entries[0];
    let base = entries.iter().find(|e| e.summary_of > 0).copied();
    let runs: u32 = entries
        .iter()
        .map(|e| e.summary_of.max(1))
        .fold(0u32, |a, b| a.saturating_add(b));
    let mut did = base.map(|b| b.did.clone()).unwrap_or_default();
    let mut errors: Vec<String> = base.map(|b| b.errors.clone()).unwrap_or_default();
    for e in entries.iter().filter(|e| e.summary_of == 0) {
        let about = e
            .issue_id
            .as_deref()
            .map(|i| format!(" [issue {i}]"))
            .unwrap_or_default();
        // The company's log holds several agents' entries: each line says whose.
        let by = if e.shared {
            format!(" (agent {})", e.agent_id)
        } else {
            String::new()
        };
        did.push_str(&format!("- {}{by}{about}\n", e.what));
        for error in &e.errors {
            if errors.len() < SUMMARY_ERRORS {
                errors.push(error.chars().take(SUMMARY_ERROR_CHARS).collect());
            }
        }
    }
    if did.chars().count() > SUMMARY_DID_CHARS {
        did = did.chars().take(SUMMARY_DID_CHARS).collect::<String>() + "…";
    }
    let date = crate::time::Timestamp(day * DAY_MS).to_rfc3339();
    MemoryEntry {
        id: base.map_or_else(|| format!("{}-day-{day}", ctx.slot), |b| b.id.clone()),
        company_id: first.company_id.clone(),
        agent_id: first.agent_id.clone(),
        seq: base.map_or(first.seq, |b| b.seq),
        run_id: first.run_id.clone(),
        wake_reason: None,
        issue_id: None,
        what: format!(
            "Summary of {} ({runs} runs' entries)",
            date.get(..10).unwrap_or(&date)
        ),
        did,
        next: entries.last().map(|e| e.next.clone()).unwrap_or_default(),
        errors,
        created_at: base.map_or(first.created_at, |b| b.created_at),
        summary_of: runs,
        shared: first.shared,
    }
}

pub(crate) fn append_entry(
    ctx: &Ctx<'_>,
    id: &str,
    agent_id: &str,
    new: &NewMemoryEntry,
    shared: bool,
) -> Result<Decision, DomainError> {
    let agent = writable_agent(ctx, agent_id)?;
    let run = live_run_of(ctx, agent, "a memory entry")?;
    require_id("id", id)?;
    if ctx.state.memory.entries.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "memory entry".into(),
            id: id.into(),
        });
    }
    if new.what.trim().is_empty() {
        return Err(DomainError::invalid(
            "what",
            "must say what the run was about",
        ));
    }
    // The issue the agent names (its id or `PREFIX-N`, stored as the id), else the run's.
    let issue_id = match &new.issue_id {
        Some(r) => Some(
            ctx.state
                .issue_by_ref(r)
                .filter(|i| i.company_id == agent.company_id)
                .map(|i| i.id.clone())
                .ok_or_else(|| DomainError::not_found("issue", r))?,
        ),
        None => run.issue_id.clone(),
    };
    let entry = MemoryEntry {
        id: id.into(),
        company_id: agent.company_id.clone(),
        agent_id: agent.id.clone(),
        seq: ctx.slot,
        run_id: run.id.clone(),
        wake_reason: run.wake_reason,
        issue_id,
        what: new.what.clone(),
        did: new.did.clone(),
        next: new.next.clone(),
        errors: new.errors.clone(),
        created_at: ctx.now(),
        summary_of: 0,
        shared,
    };
    let log = entry.log();
    let cap = if shared {
        MAX_MEMORY_ENTRIES_PER_COMPANY
    } else {
        MAX_MEMORY_ENTRIES_PER_AGENT
    };
    let (mut changes, compacted) = compact_old_days(ctx, &log);
    let kept = ctx
        .state
        .memory
        .log_entries(&log)
        .count()
        .saturating_sub(compacted.len());
    let drop = (kept + 1).saturating_sub(cap);
    for old in ctx
        .state
        .memory
        .log_entries(&log)
        .filter(|e| !compacted.contains(&e.id))
        .take(drop)
    {
        changes.push(Change::Memory(MemoryChange::EntryDropped(old.id.clone())));
    }
    changes.push(Change::Memory(MemoryChange::Entry(entry.clone())));
    Ok(Decision {
        note: agent_note(
            agent,
            json!({ "memory": "entry", "entryId": entry.id, "dropped": drop, "shared": shared }),
        ),
        outcome: Outcome::MemoryEntry(entry),
        changes,
    })
}

pub(crate) fn require_document_name(name: &str) -> Result<(), DomainError> {
    if MEMORY_DOCUMENT_NAMES.contains(&name) {
        Ok(())
    } else {
        Err(DomainError::invalid(
            "name",
            format!(
                "a memory document is one of {}",
                MEMORY_DOCUMENT_NAMES.join(", ")
            ),
        ))
    }
}

pub(crate) fn put_document(
    ctx: &Ctx<'_>,
    company_id: &str,
    agent_id: Option<&str>,
    name: &str,
    content: &str,
    expected_version: u64,
) -> Result<Decision, DomainError> {
    let company = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(&company.id, "company", company_id)?;
    let owner = match agent_id {
        Some(agent_id) => {
            let agent = writable_agent(ctx, agent_id)?;
            if agent.company_id != company.id {
                return Err(DomainError::not_found("agent", agent_id));
            }
            // An agent's write for a run is fenced on it, as every write of a run.
            ctx.fence()?;
            Some(agent)
        }
        None => {
            ctx.require_admin("save the company's shared memory")?;
            None
        }
    };
    require_document_name(name)?;
    let current = ctx.state.memory.document(company_id, agent_id, name);
    let version = current.map_or(0, |d| d.version);
    if version != expected_version {
        let whose = match agent_id {
            Some(a) => format!("agent {a}'s"),
            None => "the company's".to_string(),
        };
        return Err(DomainError::conflict(format!(
            "{whose} {name} is at version {version}, not {expected_version}: it was saved since \
             you read it, and saving would lose that update. Read version {version}, merge, and \
             send expectedVersion {version}"
        )));
    }
    let details = json!({ "memory": "document", "name": name, "version": version + 1 });
    let note = match owner {
        Some(agent) => agent_note(agent, details),
        None => ActivityNote {
            company_id: Some(company.id.clone()),
            entity_type: "company",
            entity_id: company.id.clone(),
            details,
        },
    };
    if let Some(current) = current.filter(|d| d.content == content) {
        // Nothing changed: no new version, nothing written.
        return Ok(Decision {
            outcome: Outcome::MemoryDocument(current.clone()),
            changes: Vec::new(),
            note,
        });
    }
    let document = MemoryDocument {
        company_id: company.id.clone(),
        agent_id: agent_id.map(str::to_string),
        name: name.into(),
        version: version + 1,
        content: content.into(),
        updated_at: ctx.now(),
        updated_by_type: ctx.actor.kind.as_str().into(),
        updated_by_id: ctx.actor.id.clone(),
        run_id: ctx.actor.run_id.clone(),
    };
    let mut changes = Vec::new();
    let kept = ctx
        .state
        .memory
        .versions(company_id, agent_id, name)
        .count();
    let drop = (kept + 1).saturating_sub(MAX_MEMORY_DOCUMENT_VERSIONS);
    for old in ctx
        .state
        .memory
        .versions(company_id, agent_id, name)
        .take(drop)
    {
        changes.push(Change::Memory(MemoryChange::DocumentDropped(old.key())));
    }
    changes.push(Change::Memory(MemoryChange::Document(document.clone())));
    Ok(Decision {
        outcome: Outcome::MemoryDocument(document),
        changes,
        note,
    })
}

/// A live-state write must carry a part.
fn require_some_part(
    current_task: Option<&CurrentTask>,
    coordinates: Option<&serde_json::Value>,
) -> Result<(), DomainError> {
    if current_task.is_none() && coordinates.is_none() {
        return Err(DomainError::invalid(
            "currentTask",
            "send currentTask, coordinates, or both",
        ));
    }
    Ok(())
}

pub(crate) fn set_live(
    ctx: &Ctx<'_>,
    agent_id: &str,
    current_task: Option<&CurrentTask>,
    coordinates: Option<&serde_json::Value>,
) -> Result<Decision, DomainError> {
    let agent = writable_agent(ctx, agent_id)?;
    let run = live_run_of(ctx, agent, "live memory")?;
    require_some_part(current_task, coordinates)?;
    let mut live = ctx
        .state
        .memory
        .live
        .get(agent_id)
        .cloned()
        .unwrap_or_else(|| MemoryLive {
            agent_id: agent.id.clone(),
            company_id: agent.company_id.clone(),
            parts: LiveParts::default(),
            run_id: None,
        });
    live.parts.save(current_task, coordinates, ctx.now());
    live.run_id = Some(run.id.clone());
    Ok(Decision {
        note: agent_note(
            agent,
            json!({
                "memory": "live",
                "currentTask": current_task.is_some(),
                "coordinates": coordinates.is_some(),
            }),
        ),
        outcome: Outcome::MemoryLive(live.clone()),
        changes: vec![Change::Memory(MemoryChange::Live(live))],
    })
}

pub(crate) fn set_company_live(
    ctx: &Ctx<'_>,
    company_id: &str,
    current_task: Option<&CurrentTask>,
    coordinates: Option<&serde_json::Value>,
) -> Result<Decision, DomainError> {
    let company = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(&company.id, "company", company_id)?;
    // An agent writes it during its run (fenced, as every write of a run); an administrator
    // any time, fenced too when it names a run.
    let run = ctx.fence()?;
    if let Some(run) = run.filter(|r| r.company_id != company.id) {
        return Err(DomainError::forbidden(format!(
            "run {} belongs to another company",
            run.id
        )));
    }
    if ctx.actor.agent_id().is_some() {
        if run.is_none() {
            return Err(DomainError::invalid(
                "runId",
                "an agent saves its company's live state during a run: send its run id \
                 (X-Roost-Run-Id) or use the run's key",
            ));
        }
    } else if !ctx.is_admin() {
        return Err(DomainError::forbidden(
            "only an agent of the company or an administrator saves its live state",
        ));
    }
    require_some_part(current_task, coordinates)?;
    let mut live = ctx
        .state
        .memory
        .company_live
        .get(company_id)
        .cloned()
        .unwrap_or_else(|| CompanyLive {
            company_id: company.id.clone(),
            parts: LiveParts::default(),
            updated_by_type: String::new(),
            updated_by_id: String::new(),
            run_id: None,
        });
    live.parts.save(current_task, coordinates, ctx.now());
    live.updated_by_type = ctx.actor.kind.as_str().into();
    live.updated_by_id = ctx.actor.id.clone();
    live.run_id = run.map(|r| r.id.clone());
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(company.id.clone()),
            entity_type: "company",
            entity_id: company.id.clone(),
            details: json!({
                "memory": "live",
                "currentTask": current_task.is_some(),
                "coordinates": coordinates.is_some(),
            }),
        },
        outcome: Outcome::CompanyMemoryLive(live.clone()),
        changes: vec![Change::Memory(MemoryChange::CompanyLive(live))],
    })
}
