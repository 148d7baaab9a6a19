//! The issues by id: open ones in memory, closed ones, once their row is in `state.db`, read
//! back from it when asked for.
//!
//! Why: a company's closed history only grows, and every node held every issue it ever closed
//! (1.47 KiB each at 10^6 issues, BENCHMARKS.md "Closed issues lighter in memory"). A closed
//! issue whose row the store has written (`State::forget_closed_issue`) keeps only its slot
//! here; [`IssueMap::get`] reads it from the store's [`IssueRows`]. That changes where a row
//! lives, never what it holds: a cold row is the issue as memory held it when it went cold, and
//! nothing changes one without reading it first (every write goes through `State::put_issue`,
//! which puts the new issue back in memory). So the rules see the same state on every replica,
//! whichever of its closed issues each node still holds in memory.
//!
//! Why behind a pointer: an ordered map keeps its values inline in nodes of eleven slots, about a
//! third of them empty on average, so every issue paid for half an issue more of empty slot (an
//! issue is about 600 bytes). Behind a pointer, a slot is one word (a status for a cold issue),
//! and leaves are small enough that a lookup's walk over the keys reads fewer cache lines. The
//! pointer is an `Arc`, shared with the change that wrote the issue and with the command's
//! outcome, so an apply copies an issue once, to change it. Nothing outside
//! `issue_index.rs` writes it: every write goes through `State::put_issue`, which keeps the
//! indexes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Index;
use std::sync::Arc;

use crate::entity::{Issue, IssueStatus};

/// Where a closed issue's row is read from once memory has let it go: the store's `state.db`,
/// as its write connection sees it (rows written by applies not yet committed included).
///
/// A row that cannot be read reads as no issue. During an apply that means a damaged file, and
/// the store stops the node (`roost-store/src/state_machine.rs`) rather than keep a decision
/// made without it; a read between a snapshot's install and the state it loads (the file
/// replaced under the old state) just misses the issue.
pub trait IssueRows: Send + Sync {
    /// The row of issue `id`, or why it cannot be read.
    fn issue(&self, id: &str) -> Result<Issue, String>;
}

#[derive(Clone, Default)]
pub struct IssueMap {
    map: BTreeMap<String, Slot>,
    rows: Option<Arc<dyn IssueRows>>,
    cold: usize,
}

#[derive(Clone)]
enum Slot {
    Hot(Arc<Issue>),
    /// Closed, and only its row in `rows` holds it. Its status stays, so lists filtered by
    /// status read only the rows they answer with (a board's `cancelled` column among a
    /// million done issues).
    Cold(IssueStatus),
}

impl fmt::Debug for IssueMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssueMap")
            .field("issues", &self.map.len())
            .field("in_state_db_only", &self.cold)
            .finish()
    }
}

impl IssueMap {
    /// The issue `id`, read from `state.db` if memory has let it go ([`IssueRows`] on a row
    /// that cannot be read).
    pub fn get(&self, id: &str) -> Option<Cow<'_, Issue>> {
        match self.map.get(id)? {
            Slot::Hot(issue) => Some(Cow::Borrowed(issue)),
            Slot::Cold(_) => self.read_cold(id).map(Cow::Owned),
        }
    }

    /// The status of issue `id`, without reading its row.
    pub fn status(&self, id: &str) -> Option<IssueStatus> {
        match self.map.get(id)? {
            Slot::Hot(issue) => Some(issue.status),
            Slot::Cold(status) => Some(*status),
        }
    }

    fn read_cold(&self, id: &str) -> Option<Issue> {
        self.rows.as_ref()?.issue(id).ok()
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.map.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether issue `id` is done or cancelled (`None`: no such issue), without reading it
    /// from `state.db`: only closed issues live there.
    pub fn is_closed(&self, id: &str) -> Option<bool> {
        self.status(id).map(IssueStatus::is_terminal)
    }

    /// Whether issue `id` lives in `state.db` only.
    pub fn is_cold(&self, id: &str) -> bool {
        matches!(self.map.get(id), Some(Slot::Cold(_)))
    }

    /// How many issues live in `state.db` only.
    pub fn cold_len(&self) -> usize {
        self.cold
    }

    /// Every issue, in id order (cold ones read from `state.db`).
    pub fn values(&self) -> impl Iterator<Item = Cow<'_, Issue>> {
        self.map.iter().filter_map(|(id, slot)| match slot {
            Slot::Hot(issue) => Some(Cow::Borrowed(&**issue)),
            Slot::Cold(_) => self.read_cold(id).map(Cow::Owned),
        })
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.map.keys()
    }

    /// Lets closed issues leave memory, read back from `rows` on demand.
    pub fn read_closed_from(&mut self, rows: Arc<dyn IssueRows>) {
        self.rows = Some(rows);
    }

    /// Lets issue `id` leave memory if it is closed and there is a store to read it back
    /// from. The caller has written its row as it is now.
    pub(crate) fn forget_closed(&mut self, id: &str) -> bool {
        if self.rows.is_none() {
            return false;
        }
        match self.map.get_mut(id) {
            Some(slot) => forget(slot, &mut self.cold),
            None => false,
        }
    }

    /// [`Self::forget_closed`] for every closed issue in memory.
    pub(crate) fn forget_all_closed(&mut self) {
        if self.rows.is_none() {
            return;
        }
        for slot in self.map.values_mut() {
            forget(slot, &mut self.cold);
        }
    }

    /// Writes `issue` under its id: the change that carries it shares the allocation.
    pub(crate) fn put(&mut self, issue: Arc<Issue>) {
        match self.map.get_mut(&issue.id) {
            Some(Slot::Hot(slot)) => *slot = issue,
            Some(slot) => {
                *slot = Slot::Hot(issue);
                self.cold -= 1;
            }
            None => {
                self.map.insert(issue.id.clone(), Slot::Hot(issue));
            }
        }
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<Issue> {
        match self.map.get(id)? {
            Slot::Hot(_) => match self.map.remove(id) {
                Some(Slot::Hot(issue)) => Some(Arc::unwrap_or_clone(issue)),
                _ => None,
            },
            Slot::Cold(_) => {
                let issue = self.read_cold(id);
                self.map.remove(id);
                self.cold -= 1;
                issue
            }
        }
    }
}

/// Lets a closed issue's slot go cold; whether it did.
fn forget(slot: &mut Slot, cold: &mut usize) -> bool {
    match slot {
        Slot::Hot(issue) if issue.status.is_terminal() => {
            *slot = Slot::Cold(issue.status);
            *cold += 1;
            true
        }
        _ => false,
    }
}

impl Index<&str> for IssueMap {
    type Output = Issue;

    /// Panics if there is no such issue in memory, as a map's index does: for tests, whose
    /// states have no store and so keep every issue in memory.
    fn index(&self, id: &str) -> &Issue {
        match self.map.get(id) {
            Some(Slot::Hot(i)) => i,
            Some(Slot::Cold(_)) => panic!("issue {id} is in state.db only: read it with get"),
            None => panic!("no issue {id}"),
        }
    }
}

impl serde::Serialize for IssueMap {
    /// As the map by id it is.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.values().map(|i| (i.id.clone(), i)))
    }
}
