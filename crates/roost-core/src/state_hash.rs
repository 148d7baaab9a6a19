//! The state's digest without rehashing the whole state on every request: the sum of one
//! SHA-256 per row (lane-wise, modulo 2^64), so a changed row is swapped out of the sum
//! alone. Apply only marks the rows it changed; the next [`RowDigests::sum`] rehashes those.
//! Hashing a million issues as one JSON document took 5.7 s under the state's read lock.
//!
//! The sum depends on the rows alone, not on the order they changed in, so replicas that
//! applied the same entries agree.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use crate::state::State;

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
}

const TABLES: [Table; 12] = [
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
];

type Lanes = [u64; 4];

#[derive(Clone, Debug)]
struct Inner {
    /// Until the first sum (and after too many marks): every row must be hashed.
    rebuild: bool,
    dirty: HashSet<(Table, String)>,
    digests: HashMap<(Table, String), Lanes>,
    sum: Lanes,
}

#[derive(Debug)]
pub(crate) struct RowDigests(Mutex<Inner>);

impl Default for RowDigests {
    fn default() -> Self {
        RowDigests(Mutex::new(Inner {
            rebuild: true,
            dirty: HashSet::new(),
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
        inner.dirty.insert((table, key.to_string()));
        if inner.dirty.len() > MAX_DIRTY {
            inner.rebuild = true;
            inner.dirty = HashSet::new();
            inner.digests = HashMap::new();
        }
    }

    /// The sum of every row's digest in `state`, rehashing only the rows changed since the
    /// last call (all of them on the first).
    pub(crate) fn sum(&self, state: &State) -> Lanes {
        let mut inner = self.lock();
        if inner.rebuild {
            let mut digests = HashMap::new();
            let mut sum = [0; 4];
            for table in TABLES {
                for key in keys(state, table) {
                    if let Some(d) = row_digest(state, table, &key) {
                        add(&mut sum, d);
                        digests.insert((table, key), d);
                    }
                }
            }
            *inner = Inner {
                rebuild: false,
                dirty: HashSet::new(),
                digests,
                sum,
            };
            return sum;
        }
        let dirty = std::mem::take(&mut inner.dirty);
        for (table, key) in dirty {
            if let Some(old) = inner.digests.remove(&(table, key.clone())) {
                sub(&mut inner.sum, old);
            }
            if let Some(new) = row_digest(state, table, &key) {
                add(&mut inner.sum, new);
                inner.digests.insert((table, key), new);
            }
        }
        inner.sum
    }
}

fn keys(state: &State, table: Table) -> Vec<String> {
    fn of<V>(m: &std::collections::BTreeMap<String, V>) -> Vec<String> {
        m.keys().cloned().collect()
    }
    match table {
        Table::Company => of(&state.companies),
        Table::Agent => of(&state.agents),
        Table::Issue => of(&state.issues),
        Table::Run => of(&state.runs),
        Table::Credential => of(&state.credentials),
        Table::Comment => of(&state.comments),
        Table::Wake => of(&state.wakes),
        Table::Worker => of(&state.workers),
        Table::BudgetPolicy => of(&state.budget_policies),
        Table::CostEvent => of(&state.cost_events),
        Table::BudgetIncident => of(&state.budget_incidents),
        Table::IdempotencyKey => state.idempotency.keys().cloned().collect(),
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
        Table::Issue => json(state.issues.get(key)),
        Table::Run => json(state.runs.get(key)),
        Table::Credential => json(state.credentials.get(key)),
        Table::Comment => json(state.comments.get(key)),
        Table::Wake => json(state.wakes.get(key)),
        Table::Worker => json(state.workers.get(key)),
        Table::BudgetPolicy => json(state.budget_policies.get(key)),
        Table::CostEvent => json(state.cost_events.get(key)),
        Table::BudgetIncident => json(state.budget_incidents.get(key)),
        Table::IdempotencyKey => state.idempotency.get(key).map(|_| key.as_bytes().to_vec()),
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
