//! Agent memory: what follows an agent from machine to machine, replicated like the
//! board. Per agent a rolling log (one structured entry per run), versioned documents
//! (`MEMORY.md`, `STATE.md`) and live state (`current-task`, `coordinates`); per company the
//! same three, shared by its agents: documents an administrator keeps, a log its agents' runs
//! write to, and live state. The rules are in `rules/memory.rs`, the bounds in `limits.rs`.
//!
//! [`recovery`] is the recovery door: a pure function of the live state's age at a given time,
//! computed when it is read (never in apply).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::entity::WakeReason;
use crate::time::Timestamp;

/// The documents a scope may hold: the curated long-term memory and the ground-truth state.
pub const MEMORY_DOCUMENT_NAMES: [&str; 2] = ["MEMORY.md", "STATE.md"];

/// One entry of a rolling log, written by an agent during a run (fenced on it): of the agent's
/// own log, or, `shared`, of its company's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEntry {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    /// The slot of the command that wrote it: entries of an agent in the order written.
    pub seq: u64,
    pub run_id: String,
    /// Why the run was woken (from the run) and the issue it was about.
    #[serde(default)]
    pub wake_reason: Option<WakeReason>,
    #[serde(default)]
    pub issue_id: Option<String>,
    pub what: String,
    #[serde(default)]
    pub did: String,
    #[serde(default)]
    pub next: String,
    /// Error texts exactly as the agent saw them.
    #[serde(default)]
    pub errors: Vec<String>,
    pub created_at: Timestamp,
    /// A daily summary: how many runs' entries it replaced (`rules/memory.rs`, compaction);
    /// 0 for an entry a run wrote.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub summary_of: u32,
    /// In the company's shared log (every agent of the company reads it), not the agent's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// Whose rolling log an entry is in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogOwner {
    /// An agent's own log (its id).
    Agent(String),
    /// A company's shared log (its id).
    Company(String),
}

impl MemoryEntry {
    pub fn log(&self) -> LogOwner {
        if self.shared {
            LogOwner::Company(self.company_id.clone())
        } else {
            LogOwner::Agent(self.agent_id.clone())
        }
    }

    /// The bytes of its text fields (what the per-entry cap counts).
    pub fn bytes(&self) -> u64 {
        entry_bytes(&self.what, &self.did, &self.next, &self.errors)
    }
}

pub(crate) fn entry_bytes(what: &str, did: &str, next: &str, errors: &[String]) -> u64 {
    let errors: usize = errors.iter().map(String::len).sum();
    (what.len() + did.len() + next.len() + errors) as u64
}

/// An entry as its agent sends it; the run, the wake reason and the time come from the run and
/// the command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewMemoryEntry {
    #[serde(default)]
    pub issue_id: Option<String>,
    pub what: String,
    #[serde(default)]
    pub did: String,
    #[serde(default)]
    pub next: String,
    #[serde(default)]
    pub errors: Vec<String>,
}

/// One version of a document. `agent_id` is `None` for the company's shared scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDocument {
    pub company_id: String,
    #[serde(default)]
    pub agent_id: Option<String>,
    pub name: String,
    /// 1 for the first version, one more for each save.
    pub version: u64,
    pub content: String,
    pub updated_at: Timestamp,
    /// Who saved this version: `user`/`agent`/`system` and its id, and the run if any.
    pub updated_by_type: String,
    pub updated_by_id: String,
    #[serde(default)]
    pub run_id: Option<String>,
}

impl MemoryDocument {
    /// The row's key: its scope, name and zero-padded version, so a scope's versions of a name
    /// sort in version order.
    pub fn key(&self) -> String {
        document_key(
            &self.company_id,
            self.agent_id.as_deref(),
            &self.name,
            self.version,
        )
    }
}

/// The scope part of a document's key: `agent:<id>` or `company:<id>`.
pub fn document_scope(company_id: &str, agent_id: Option<&str>) -> String {
    match agent_id {
        Some(agent) => format!("agent:{agent}"),
        None => format!("company:{company_id}"),
    }
}

pub fn document_key(company_id: &str, agent_id: Option<&str>, name: &str, version: u64) -> String {
    format!(
        "{}/{name}/{version:020}",
        document_scope(company_id, agent_id)
    )
}

/// What the agent is doing: one sentence, the last three things done, the next three steps.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentTask {
    pub doing: String,
    #[serde(default)]
    pub last: Vec<String>,
    #[serde(default)]
    pub next: Vec<String>,
}

/// The two parts of live state, what is being done (`currentTask`) and where things are
/// (`coordinates`), each with the time it was last saved. Flattened into an agent's and a
/// company's live state, so both read and store the same fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveParts {
    #[serde(default)]
    pub current_task: Option<CurrentTask>,
    #[serde(default)]
    pub current_task_updated_at: Option<Timestamp>,
    #[serde(default)]
    pub coordinates: Option<serde_json::Value>,
    #[serde(default)]
    pub coordinates_updated_at: Option<Timestamp>,
}

impl LiveParts {
    /// Saves each part that was sent, stamped with `at`; a part not sent keeps its value and time.
    pub fn save(
        &mut self,
        current_task: Option<&CurrentTask>,
        coordinates: Option<&serde_json::Value>,
        at: Timestamp,
    ) {
        if let Some(task) = current_task {
            self.current_task = Some(task.clone());
            self.current_task_updated_at = Some(at);
        }
        if let Some(c) = coordinates {
            self.coordinates = Some(c.clone());
            self.coordinates_updated_at = Some(at);
        }
    }

    /// When either part was last saved.
    pub fn saved_at(&self) -> Option<Timestamp> {
        self.current_task_updated_at
            .max(self.coordinates_updated_at)
    }
}

/// A company's live state: what its agents are doing together and where things are, and who
/// saved it last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompanyLive {
    pub company_id: String,
    #[serde(flatten)]
    pub parts: LiveParts,
    /// `user`/`agent` and its id, and the run if an agent saved it during one.
    pub updated_by_type: String,
    pub updated_by_id: String,
    #[serde(default)]
    pub run_id: Option<String>,
}

/// An agent's live state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryLive {
    pub agent_id: String,
    pub company_id: String,
    #[serde(flatten)]
    pub parts: LiveParts,
    /// The run that saved it last.
    #[serde(default)]
    pub run_id: Option<String>,
}

/// A memory row `apply` writes or drops (the store's `memory_*` tables).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryChange {
    Entry(MemoryEntry),
    /// An entry dropped to keep the agent under its entry cap (its id).
    EntryDropped(String),
    Document(MemoryDocument),
    /// A version dropped from a document's history (its key).
    DocumentDropped(String),
    Live(MemoryLive),
    CompanyLive(CompanyLive),
}

/// Every memory row, in memory on every node (bounded by `limits.rs`).
#[derive(Clone, Debug, Default)]
pub struct MemoryState {
    pub entries: BTreeMap<String, MemoryEntry>,
    /// Document versions by key ([`MemoryDocument::key`]).
    pub documents: BTreeMap<String, MemoryDocument>,
    /// Live state by agent id.
    pub live: BTreeMap<String, MemoryLive>,
    /// Companies' live state by company id.
    pub company_live: BTreeMap<String, CompanyLive>,
    /// Entry ids by (log, seq): a log in order without a scan.
    entries_by_log: BTreeMap<(LogOwner, u64), String>,
}

impl MemoryState {
    pub(crate) fn put(&mut self, change: MemoryChange) {
        match change {
            MemoryChange::Entry(e) => {
                self.entries_by_log.insert((e.log(), e.seq), e.id.clone());
                self.entries.insert(e.id.clone(), e);
            }
            MemoryChange::EntryDropped(id) => {
                if let Some(e) = self.entries.remove(&id) {
                    self.entries_by_log.remove(&(e.log(), e.seq));
                }
            }
            MemoryChange::Document(d) => {
                self.documents.insert(d.key(), d);
            }
            MemoryChange::DocumentDropped(key) => {
                self.documents.remove(&key);
            }
            MemoryChange::Live(l) => {
                self.live.insert(l.agent_id.clone(), l);
            }
            MemoryChange::CompanyLive(l) => {
                self.company_live.insert(l.company_id.clone(), l);
            }
        }
    }

    /// A log's entries, oldest first.
    pub fn log_entries<'a>(
        &'a self,
        log: &LogOwner,
    ) -> impl DoubleEndedIterator<Item = &'a MemoryEntry> {
        let range = (log.clone(), 0)..=(log.clone(), u64::MAX);
        self.entries_by_log
            .range(range)
            .filter_map(|(_, id)| self.entries.get(id))
    }

    /// An agent's own entries, oldest first.
    pub fn entries_of<'a>(
        &'a self,
        agent_id: &str,
    ) -> impl DoubleEndedIterator<Item = &'a MemoryEntry> {
        self.log_entries(&LogOwner::Agent(agent_id.to_string()))
    }

    pub fn entry_count(&self, agent_id: &str) -> usize {
        self.entries_of(agent_id).count()
    }

    /// The versions of `name` in a scope, oldest first.
    pub fn versions<'a>(
        &'a self,
        company_id: &str,
        agent_id: Option<&str>,
        name: &str,
    ) -> impl DoubleEndedIterator<Item = &'a MemoryDocument> {
        let from = document_key(company_id, agent_id, name, 0);
        let to = document_key(company_id, agent_id, name, u64::MAX);
        self.documents.range(from..=to).map(|(_, d)| d)
    }

    /// The current version of `name` in a scope.
    pub fn document(
        &self,
        company_id: &str,
        agent_id: Option<&str>,
        name: &str,
    ) -> Option<&MemoryDocument> {
        self.versions(company_id, agent_id, name).next_back()
    }

    /// Bytes an agent's memory holds: entries' text, every kept version of its documents, its
    /// live state as JSON.
    pub fn bytes_of(&self, company_id: &str, agent_id: &str) -> u64 {
        let entries: u64 = self.entries_of(agent_id).map(MemoryEntry::bytes).sum();
        let documents: u64 = MEMORY_DOCUMENT_NAMES
            .iter()
            .flat_map(|name| self.versions(company_id, Some(agent_id), name))
            .map(|d| d.content.len() as u64)
            .sum();
        let live = self
            .live
            .get(agent_id)
            .and_then(|l| serde_json::to_vec(l).ok())
            .map_or(0, |v| v.len() as u64);
        entries + documents + live
    }
}

/// Which way a run gets back into its work after a gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Door {
    /// Recent live state: resume from `current-task`.
    Resume,
    /// Hours old: `current-task` plus the day's log entries.
    CatchUp,
    /// Older or missing: a full rebuild (`MEMORY.md`, `STATE.md`, the latest entries, the
    /// issue's history).
    Rebuild,
}

impl Door {
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Resume => "resume",
            Door::CatchUp => "catch_up",
            Door::Rebuild => "rebuild",
        }
    }
}

/// The door and how far the live state can be trusted, at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recovery {
    pub door: Door,
    /// 1.0 just saved, 0.0 at 48 hours and after (or with no live state).
    pub confidence: f64,
    /// The live state's age in seconds; `null` when there is none.
    #[serde(default)]
    pub age_secs: Option<i64>,
    pub why: String,
}

const HOUR_MS: i64 = 3_600_000;

/// Below this age the run resumes from `current-task`.
pub const RESUME_BELOW_MS: i64 = HOUR_MS;
/// Below this age (and from [`RESUME_BELOW_MS`]) it catches up with the day's entries; from it
/// on, it rebuilds.
pub const CATCH_UP_BELOW_MS: i64 = 24 * HOUR_MS;

/// The confidence table: (age in hours, confidence), linear between points, 0 from the last on.
///
/// | age | 0 h | 1 h | 6 h | 24 h | 48 h |
/// |---|---|---|---|---|---|
/// | confidence | 1.0 | 0.9 | 0.7 | 0.3 | 0.0 |
pub const CONFIDENCE_TABLE: [(i64, f64); 5] = [(0, 1.0), (1, 0.9), (6, 0.7), (24, 0.3), (48, 0.0)];

/// The confidence in live state saved `age_ms` ago, from [`CONFIDENCE_TABLE`], rounded to
/// three decimals. A negative age (a clock behind the saver's) counts as just saved.
pub fn confidence(age_ms: i64) -> f64 {
    let age = age_ms.max(0);
    for pair in CONFIDENCE_TABLE.windows(2) {
        let (h0, c0) = pair[0];
        let (h1, c1) = pair[1];
        let (from, to) = (h0 * HOUR_MS, h1 * HOUR_MS);
        if age < to {
            let t = (age - from) as f64 / (to - from) as f64;
            return ((c0 + (c1 - c0) * t) * 1000.0).round() / 1000.0;
        }
    }
    0.0
}

/// The door for live state last saved at `saved_at` (`None`: never), seen at `now`.
pub fn recovery(saved_at: Option<Timestamp>, now: Timestamp) -> Recovery {
    let Some(saved) = saved_at else {
        return Recovery {
            door: Door::Rebuild,
            confidence: 0.0,
            age_secs: None,
            why: "current-task was never saved: rebuild from MEMORY.md, STATE.md, the latest \
                  log entries and the issue's history"
                .into(),
        };
    };
    let age = now.0.saturating_sub(saved.0).max(0);
    let confidence = confidence(age);
    let (door, why) = if age < RESUME_BELOW_MS {
        (
            Door::Resume,
            format!(
                "current-task was saved {} ago (under 1 h): resume from it",
                human_age(age)
            ),
        )
    } else if age < CATCH_UP_BELOW_MS {
        (
            Door::CatchUp,
            format!(
                "current-task was saved {} ago (1-24 h): read it with the day's log entries",
                human_age(age)
            ),
        )
    } else {
        (
            Door::Rebuild,
            format!(
                "current-task was saved {} ago (24 h or more): rebuild from MEMORY.md, \
                 STATE.md, the latest log entries and the issue's history",
                human_age(age)
            ),
        )
    };
    Recovery {
        door,
        confidence,
        age_secs: Some(age / 1000),
        why,
    }
}

fn human_age(ms: i64) -> String {
    let secs = ms / 1000;
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 2 * 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = HOUR_MS;

    #[test]
    fn confidence_follows_the_table_at_every_point_and_between() {
        assert_eq!(confidence(0), 1.0);
        assert_eq!(confidence(H), 0.9);
        assert_eq!(confidence(6 * H), 0.7);
        assert_eq!(confidence(24 * H), 0.3);
        assert_eq!(confidence(48 * H), 0.0);
        assert_eq!(confidence(100 * H), 0.0);
        assert_eq!(confidence(H / 2), 0.95);
        assert_eq!(confidence(36 * H), 0.15);
        assert_eq!(
            confidence(-5 * H),
            1.0,
            "a save in the future counts as now"
        );
        // Never rises with age.
        let mut last = 1.0;
        for minutes in (0..=49 * 60).step_by(7) {
            let c = confidence(minutes * 60_000);
            assert!(c <= last, "confidence rose at {minutes} min");
            last = c;
        }
    }

    #[test]
    fn doors_change_exactly_at_their_boundaries() {
        let now = Timestamp(1_000 * H);
        let at = |age: i64| recovery(Some(Timestamp(now.0 - age)), now);
        assert_eq!(at(0).door, Door::Resume);
        assert_eq!(at(0).confidence, 1.0);
        assert_eq!(at(H - 1).door, Door::Resume);
        assert_eq!(at(H).door, Door::CatchUp);
        assert_eq!(at(24 * H - 1).door, Door::CatchUp);
        assert_eq!(at(24 * H).door, Door::Rebuild);
        assert_eq!(at(24 * H).age_secs, Some(24 * 3600));
        assert_eq!(at(48 * H).confidence, 0.0);
        let none = recovery(None, now);
        assert_eq!(
            (none.door, none.confidence, none.age_secs),
            (Door::Rebuild, 0.0, None)
        );
        assert!(none.why.contains("never"), "{}", none.why);
        assert!(at(2 * H).why.contains("2 h ago"), "{}", at(2 * H).why);
    }
}
