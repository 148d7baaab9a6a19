//! The state's digest without rehashing the whole state on every request: the sum of one
//! SHA-256 per row (lane-wise, modulo 2^64), so a changed row is swapped out of the sum
//! alone. Apply only marks the rows it changed; the next [`RowDigests::sum`] rehashes those.
//! Hashing a million issues as one JSON document took 5.7 s under the state's read lock.
//!
//! The sum depends on the rows alone, not on the order they changed in, so replicas that
//! applied the same entries agree.

// The one place hash order is harmless: the digests are summed, so no order reaches a result
// (roost-core's clippy.toml refuses hash collections elsewhere).
#![allow(clippy::disallowed_types)]

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crate::home::HomeChange;
use crate::memory::MemoryChange;
use crate::state::{Change, State};

/// Rows marked changed at most before the digests are dropped and rebuilt from scratch on the
/// next sum: bounds the memory of a node nobody asks for hashes.
const MAX_DIRTY: usize = 1 << 18;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Table {
    Company,
    Agent,
    Issue,
    Run,
    Credential,
    Comment,
    Wake,
    Worker,
    BudgetPolicy,
    CostEvent,
    BudgetIncident,
    IdempotencyKey,
    MemoryEntry,
    MemoryDocument,
    MemoryLive,
    Routine,
    RoutineTrigger,
    RoutineRun,
    AgentHome,
    HomeChunk,
    Approval,
    Goal,
    Project,
    Skill,
    CompanyMemoryLive,
    IssueDocument,
    Interaction,
    IssueAttachment,
    WorkProduct,
    AttachmentUpload,
    // New tables go last: a table's number is hashed with each of its rows.
    Label,
}

const TABLES: [Table; 31] = [
    Table::Company,
    Table::Agent,
    Table::Issue,
    Table::Run,
    Table::Credential,
    Table::Comment,
    Table::Wake,
    Table::Worker,
    Table::BudgetPolicy,
    Table::CostEvent,
    Table::BudgetIncident,
    Table::IdempotencyKey,
    Table::MemoryEntry,
    Table::MemoryDocument,
    Table::MemoryLive,
    Table::Routine,
    Table::RoutineTrigger,
    Table::RoutineRun,
    Table::AgentHome,
    Table::HomeChunk,
    Table::Approval,
    Table::Goal,
    Table::Project,
    Table::Skill,
    Table::Label,
    Table::CompanyMemoryLive,
    Table::IssueDocument,
    Table::Interaction,
    Table::IssueAttachment,
    Table::WorkProduct,
    Table::AttachmentUpload,
];

type Lanes = [u64; 4];

/// A row's name in the digest map: the first 16 bytes of SHA-256 over its table and key. Two
/// rows sharing one would need a 128-bit collision; the key is hashed only when the row's digest
/// is, on a sum.
type RowId = [u8; 16];

fn row_id(table: Table, key: &str) -> RowId {
    let full = Sha256::new()
        .chain_update([table as u8])
        .chain_update(key.as_bytes())
        .finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&full[..16]);
    id
}

#[derive(Clone, Debug)]
struct Inner {
    /// Until the first sum (and after too many marks): every row must be hashed.
    rebuild: bool,
    /// Rows to rehash before the sum is right: those changed since, and during a rebuild
    /// every row not hashed yet.
    dirty: HashSet<(Table, String)>,
    /// Rows newly marked since the last complete sum; past [`MAX_DIRTY`] the digests are
    /// dropped.
    marks: usize,
    /// Each row's digest by [`row_id`]: a fixed 16 bytes where the table and key would be a
    /// string of their own per row (about 90 bytes less a row: at 10^6 closed issues, 90 MB).
    digests: HashMap<RowId, Lanes>,
    sum: Lanes,
}

#[derive(Debug)]
pub(crate) struct RowDigests(Mutex<Inner>);

impl Default for RowDigests {
    fn default() -> Self {
        RowDigests(Mutex::new(Inner {
            rebuild: true,
            dirty: HashSet::new(),
            marks: 0,
            digests: HashMap::new(),
            sum: [0; 4],
        }))
    }
}

impl Clone for RowDigests {
    fn clone(&self) -> Self {
        RowDigests(Mutex::new(self.lock().clone()))
    }
}

fn add(sum: &mut Lanes, d: Lanes) {
    for (s, x) in sum.iter_mut().zip(d) {
        *s = s.wrapping_add(x);
    }
}

fn sub(sum: &mut Lanes, d: Lanes) {
    for (s, x) in sum.iter_mut().zip(d) {
        *s = s.wrapping_sub(x);
    }
}

impl RowDigests {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each operation below leaves the digests consistent before it releases the lock.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a row changed (or gone); called by every change to the state.
    pub(crate) fn touch(&self, table: Table, key: &str) {
        let mut inner = self.lock();
        if inner.rebuild {
            return;
        }
        // Count rows newly marked, not touches: a hot row written a million times between
        // two reports is one row to rehash.
        if inner.dirty.insert((table, key.to_string())) {
            inner.marks += 1;
        }
        if inner.marks > MAX_DIRTY {
            inner.rebuild = true;
            inner.dirty = HashSet::new();
            inner.digests = HashMap::new();
        }
    }

    /// The sum of every row's digest in `state`, rehashing only the rows changed since the
    /// last call (all of them on the first).
    pub(crate) fn sum(&self, state: &State) -> Lanes {
        loop {
            if let Some(sum) = self.sum_step(state, usize::MAX) {
                return sum;
            }
        }
    }

    /// Rehashes at most `budget` rows; the sum once none is left. A caller that releases the
    /// state's lock between steps lets apply run meanwhile: rows it changes after they were
    /// hashed are marked again, so the steps still end on the sum of the rows as they are.
    pub(crate) fn sum_step(&self, state: &State, budget: usize) -> Option<Lanes> {
        let mut inner = self.lock();
        if inner.rebuild {
            // Start over: every row is to be hashed, from an empty sum.
            let mut dirty = HashSet::new();
            for table in TABLES {
                dirty.extend(keys(state, table).into_iter().map(|key| (table, key)));
            }
            *inner = Inner {
                rebuild: false,
                dirty,
                marks: 0,
                digests: HashMap::new(),
                sum: [0; 4],
            };
        }
        let batch: Vec<(Table, String)> = if inner.dirty.len() <= budget {
            inner.dirty.drain().collect()
        } else {
            let some: Vec<_> = inner.dirty.iter().take(budget).cloned().collect();
            for row in &some {
                inner.dirty.remove(row);
            }
            some
        };
        for (table, key) in batch {
            let id = row_id(table, &key);
            if let Some(old) = inner.digests.remove(&id) {
                sub(&mut inner.sum, old);
            }
            if let Some(new) = row_digest(state, table, &key) {
                add(&mut inner.sum, new);
                inner.digests.insert(id, new);
            }
        }
        if !inner.dirty.is_empty() {
            return None;
        }
        inner.marks = 0;
        Some(inner.sum)
    }
}

fn keys(state: &State, table: Table) -> Vec<String> {
    fn of<V>(m: &std::collections::BTreeMap<String, V>) -> Vec<String> {
        m.keys().cloned().collect()
    }
    match table {
        Table::Company => of(&state.companies),
        Table::Agent => of(&state.agents),
        Table::Issue => state.issues.keys().cloned().collect(),
        Table::Run => of(&state.runs),
        Table::Credential => of(&state.credentials),
        Table::Comment => of(&state.comments),
        Table::Wake => of(&state.wakes),
        Table::Worker => of(&state.workers),
        Table::BudgetPolicy => of(&state.budget_policies),
        Table::CostEvent => of(&state.cost_events),
        Table::BudgetIncident => of(&state.budget_incidents),
        Table::IdempotencyKey => state.idempotency.keys().map(str::to_string).collect(),
        Table::MemoryEntry => of(&state.memory.entries),
        Table::MemoryDocument => of(&state.memory.documents),
        Table::MemoryLive => of(&state.memory.live),
        Table::Routine => of(&state.routines.routines),
        Table::RoutineTrigger => of(&state.routines.triggers),
        Table::RoutineRun => of(&state.routines.runs),
        Table::AgentHome => of(&state.home.homes),
        Table::HomeChunk => of(&state.home.chunks),
        Table::Approval => of(&state.approvals.approvals),
        Table::Goal => of(&state.goals),
        Table::Project => of(&state.projects),
        Table::Skill => of(&state.skills),
        Table::Label => of(&state.labels),
        Table::CompanyMemoryLive => of(&state.memory.company_live),
        Table::IssueDocument => of(&state.documents.documents),
        Table::IssueAttachment => of(&state.attachments.attachments),
        Table::WorkProduct => of(&state.work_products.products),
        Table::AttachmentUpload => of(&state.attachments.uploads),
        Table::Interaction => of(&state.interactions.pending),
    }
}

/// SHA-256 of the table's tag and the row's JSON (the key alone for idempotency keys, whose
/// stored outcomes are not part of the state's identity); None if the row does not exist.
fn row_digest(state: &State, table: Table, key: &str) -> Option<Lanes> {
    fn json<T: serde::Serialize>(row: Option<&T>) -> Option<Vec<u8>> {
        row.map(|r| {
            serde_json::to_vec(r).unwrap_or_else(|e| format!("unserializable: {e}").into_bytes())
        })
    }
    let bytes = match table {
        Table::Company => json(state.companies.get(key)),
        Table::Agent => json(state.agents.get(key)),
        Table::Issue => json(state.issues.get(key).as_deref()),
        Table::Run => json(state.runs.get(key)),
        Table::Credential => json(state.credentials.get(key)),
        Table::Comment => json(state.comments.get(key)),
        Table::Wake => json(state.wakes.get(key)),
        Table::Worker => json(state.workers.get(key)),
        Table::BudgetPolicy => json(state.budget_policies.get(key)),
        Table::CostEvent => json(state.cost_events.get(key)),
        Table::BudgetIncident => json(state.budget_incidents.get(key)),
        Table::IdempotencyKey => state.idempotency.get(key).map(|_| key.as_bytes().to_vec()),
        Table::MemoryEntry => json(state.memory.entries.get(key)),
        Table::MemoryDocument => json(state.memory.documents.get(key)),
        Table::MemoryLive => json(state.memory.live.get(key)),
        Table::Routine => json(state.routines.routines.get(key)),
        Table::RoutineTrigger => json(state.routines.triggers.get(key)),
        Table::RoutineRun => json(state.routines.runs.get(key)),
        Table::AgentHome => json(state.home.homes.get(key)),
        Table::HomeChunk => json(state.home.chunks.get(key)),
        Table::Approval => json(state.approvals.approvals.get(key)),
        Table::Goal => json(state.goals.get(key)),
        Table::Project => json(state.projects.get(key)),
        Table::Skill => json(state.skills.get(key)),
        Table::Label => json(state.labels.get(key)),
        Table::CompanyMemoryLive => json(state.memory.company_live.get(key)),
        Table::IssueDocument => json(state.documents.documents.get(key)),
        Table::IssueAttachment => json(state.attachments.attachments.get(key)),
        Table::WorkProduct => json(state.work_products.products.get(key)),
        Table::AttachmentUpload => json(state.attachments.uploads.get(key)),
        Table::Interaction => json(state.interactions.pending.get(key)),
    }?;
    let mut hasher = Sha256::new();
    hasher.update([table as u8]);
    hasher.update(&bytes);
    let digest = hasher.finalize();
    let mut lanes = [0u64; 4];
    for (lane, chunk) in lanes.iter_mut().zip(digest.chunks_exact(8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        *lane = u64::from_le_bytes(word);
    }
    Some(lanes)
}

/// The row a change writes, for the state's digest.
pub(crate) fn row_of(change: &Change) -> Option<(Table, &str)> {
    Some(match change {
        Change::Company(c) => (Table::Company, c.id.as_str()),
        Change::Agent(a) => (Table::Agent, a.id.as_str()),
        Change::Issue(i) => (Table::Issue, i.id.as_str()),
        Change::IssueDeleted(id) => (Table::Issue, id.as_str()),
        Change::Run(r) => (Table::Run, r.id.as_str()),
        Change::Credential(c) => (Table::Credential, c.id.as_str()),
        Change::Comment(c) => (Table::Comment, c.id.as_str()),
        Change::CommentTombstoned(t) => (Table::Comment, t.comment_id.as_str()),
        Change::Wake(w) => (Table::Wake, w.id.as_str()),
        Change::Worker(w) => (Table::Worker, w.id.as_str()),
        Change::BudgetPolicy(p) => (Table::BudgetPolicy, p.id.as_str()),
        Change::CostEvent(e) => (Table::CostEvent, e.id.as_str()),
        Change::BudgetIncident(i) => (Table::BudgetIncident, i.id.as_str()),
        Change::Remembered(r) => (Table::IdempotencyKey, r.key.as_str()),
        Change::Forgotten(key) => (Table::IdempotencyKey, key.as_str()),
        Change::Memory(MemoryChange::Entry(e)) => (Table::MemoryEntry, e.id.as_str()),
        Change::Memory(MemoryChange::EntryDropped(id)) => (Table::MemoryEntry, id.as_str()),
        // Its key is derived ([`MemoryDocument::key`]): `State::touch` marks it.
        Change::Memory(MemoryChange::Document(_)) => return None,
        Change::Memory(MemoryChange::DocumentDropped(key)) => (Table::MemoryDocument, key.as_str()),
        Change::Memory(MemoryChange::Live(l)) => (Table::MemoryLive, l.agent_id.as_str()),
        Change::Memory(MemoryChange::CompanyLive(l)) => {
            (Table::CompanyMemoryLive, l.company_id.as_str())
        }
        Change::Routine(c) => match c {
            crate::routine::RoutineChange::Routine(r) => (Table::Routine, r.id.as_str()),
            crate::routine::RoutineChange::Trigger(t) => (Table::RoutineTrigger, t.id.as_str()),
            crate::routine::RoutineChange::TriggerDeleted(id) => {
                (Table::RoutineTrigger, id.as_str())
            }
            crate::routine::RoutineChange::Run(r) => (Table::RoutineRun, r.id.as_str()),
            crate::routine::RoutineChange::RunDropped(id) => (Table::RoutineRun, id.as_str()),
        },
        Change::Approval(a) => (Table::Approval, a.id.as_str()),
        Change::Goal(g) => (Table::Goal, g.id.as_str()),
        Change::GoalDeleted(id) => (Table::Goal, id.as_str()),
        Change::Project(p) => (Table::Project, p.id.as_str()),
        Change::ProjectDeleted(id) => (Table::Project, id.as_str()),
        Change::Skill(k) => (Table::Skill, k.id.as_str()),
        Change::SkillDeleted(id) => (Table::Skill, id.as_str()),
        Change::Label(l) => (Table::Label, l.id.as_str()),
        Change::LabelDeleted(id) => (Table::Label, id.as_str()),
        Change::Home(HomeChange::Home(h)) => (Table::AgentHome, h.agent_id.as_str()),
        // Its key is derived ([`crate::home::HomeChunk::key`]): `State::touch` marks it.
        Change::Home(HomeChange::Chunk(..)) => return None,
        Change::Home(HomeChange::ChunkDropped(key)) => (Table::HomeChunk, key.as_str()),
        Change::Document(d) => match d {
            crate::document::DocumentChange::Document(d) => (Table::IssueDocument, d.id.as_str()),
            crate::document::DocumentChange::Deleted(id) => (Table::IssueDocument, id.as_str()),
            // Not in memory: its document's row (its latest revision and ids) is.
            crate::document::DocumentChange::Revision(_) => return None,
        },
        // Not in memory: the agent's row it records is.
        Change::AgentRevision(_) => return None,
        Change::Interaction(i) => match i {
            crate::interaction::InteractionChange::Interaction(i) => {
                (Table::Interaction, i.id.as_str())
            }
            crate::interaction::InteractionChange::Deleted(id) => (Table::Interaction, id.as_str()),
        },
        // An upload's chunk is its upload's row; making or removing an attachment ends the
        // upload too, which `State::touch` marks.
        Change::Attachment(a) => match a {
            crate::attachment::AttachmentChange::Chunk { chunk, .. } => {
                (Table::AttachmentUpload, chunk.attachment_id.as_str())
            }
            crate::attachment::AttachmentChange::Added(a) => {
                (Table::IssueAttachment, a.id.as_str())
            }
            crate::attachment::AttachmentChange::Removed(id) => {
                (Table::IssueAttachment, id.as_str())
            }
        },
        Change::WorkProduct(w) => match w {
            crate::work_product::WorkProductChange::Put(w) => (Table::WorkProduct, w.id.as_str()),
            crate::work_product::WorkProductChange::Removed(id) => {
                (Table::WorkProduct, id.as_str())
            }
        },
        Change::Activity(_) => return None,
    })
}

impl State {
    /// A digest of the whole replicated state. Replicas that applied the same entries have
    /// the same hash; tests and `roost cluster status` compare it across nodes. Only the rows
    /// changed since the last call are rehashed ([`RowDigests`]).
    pub fn hash(&self) -> String {
        self.hash_from(self.row_digests.sum(self))
    }

    /// One step of [`State::hash`]: rehashes at most `rows` rows and returns the hash once no
    /// row is left. The first hash of a large state rehashes every row; a caller that releases
    /// the state's lock between steps keeps apply (and every reader queued behind it) from
    /// waiting seconds for it.
    pub fn hash_step(&self, rows: usize) -> Option<String> {
        self.row_digests
            .sum_step(self, rows.max(1))
            .map(|sum| self.hash_from(sum))
    }

    fn hash_from(&self, sum: [u64; 4]) -> String {
        let mut hasher = Sha256::new();
        for lane in sum {
            hasher.update(lane.to_le_bytes());
        }
        hasher.update(self.activity_seq.to_le_bytes());
        hasher.update(self.activity_head.as_bytes());
        hex::encode(hasher.finalize())
    }

    /// The whole state hashed as one document: what [`State::hash`] replaced, kept to check
    /// that the incremental digest sees every change.
    #[cfg(test)]
    pub(crate) fn full_hash(&self) -> String {
        let mut hasher = Sha256::new();
        let mut feed = |part: Result<String, serde_json::Error>| {
            hasher.update(
                part.unwrap_or_else(|e| format!("unserializable: {e}"))
                    .as_bytes(),
            );
            hasher.update([0u8]);
        };
        feed(serde_json::to_string(&self.companies));
        feed(serde_json::to_string(&self.agents));
        feed(serde_json::to_string(&self.issues));
        feed(serde_json::to_string(&self.runs));
        feed(serde_json::to_string(&self.credentials));
        feed(serde_json::to_string(&self.comments));
        feed(serde_json::to_string(&self.wakes));
        feed(serde_json::to_string(&self.workers));
        feed(serde_json::to_string(&self.budget_policies));
        feed(serde_json::to_string(&self.cost_events));
        feed(serde_json::to_string(&self.budget_incidents));
        feed(serde_json::to_string(&self.memory.entries));
        feed(serde_json::to_string(&self.memory.documents));
        feed(serde_json::to_string(&self.memory.live));
        // Fed only when there is some, so a state without any hashes as before it existed.
        if !self.memory.company_live.is_empty() {
            feed(serde_json::to_string(&self.memory.company_live));
        }
        feed(serde_json::to_string(&self.routines.routines));
        feed(serde_json::to_string(&self.routines.triggers));
        feed(serde_json::to_string(&self.routines.runs));
        feed(serde_json::to_string(&self.home.homes));
        feed(serde_json::to_string(&self.home.chunks));
        feed(serde_json::to_string(&self.approvals.approvals));
        feed(serde_json::to_string(&self.goals));
        feed(serde_json::to_string(&self.projects));
        feed(serde_json::to_string(&self.skills));
        feed(serde_json::to_string(&(
            self.activity_seq,
            &self.activity_head,
        )));
        feed(serde_json::to_string(
            &self.idempotency.keys().collect::<Vec<_>>(),
        ));
        hex::encode(hasher.finalize())
    }
}
