//! The tail of the Raft log in memory: every entry appended since start-up, minus the oldest
//! durable ones beyond [`KEPT_DURABLE`]. Entries not yet durable must be readable as soon as
//! `append` returns (openraft's contract), and they cannot be read from the file yet; durable
//! ones are kept too so that applying and replicating recent entries, nearly every log read
//! under load, never goes to SQLite and never parses JSON again (the leader's profile spent
//! 8.5% of its CPU there).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::{Entry, LogId, RaftLogId};

use crate::types::TypeConfig;

/// Durable entries kept in memory at most: a follower lagging by fewer entries is still
/// served from memory. At up to 64 writes per entry this is a few MiB.
pub(crate) const KEPT_DURABLE: usize = 1024;

struct Slot {
    entry: Entry<TypeConfig>,
    durable: bool,
}

#[derive(Default)]
struct Inner {
    slots: BTreeMap<u64, Slot>,
    durable: usize,
}

/// A cheap handle; every clone sees the same tail.
#[derive(Clone, Default)]
pub(crate) struct LogTail(Arc<Mutex<Inner>>);

impl LogTail {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change below is complete before the lock is released; a panic elsewhere
        // cannot leave the map half-updated.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Entries just appended, not durable yet.
    pub(crate) fn insert(&self, entries: &[Entry<TypeConfig>]) {
        let mut inner = self.lock();
        for e in entries {
            let slot = Slot {
                entry: e.clone(),
                durable: false,
            };
            if let Some(old) = inner.slots.insert(e.get_log_id().index, slot) {
                inner.durable -= usize::from(old.durable);
            }
        }
    }

    /// The entries of `[start, end_exclusive)` if the tail holds all of them that exist (every
    /// index from `start` up to the end of the range or of the log); None if some of them may
    /// be only in the file.
    pub(crate) fn covering(
        &self,
        start: u64,
        end_exclusive: u64,
    ) -> Option<Vec<Entry<TypeConfig>>> {
        let inner = self.lock();
        let first = *inner.slots.keys().next()?;
        if start < first {
            return None;
        }
        if start >= end_exclusive {
            return Some(Vec::new());
        }
        let entries: Vec<Entry<TypeConfig>> = inner
            .slots
            .range(start..end_exclusive)
            .map(|(_, s)| s.entry.clone())
            .collect();
        // Contiguous from `start`: a gap means some index lives only in the file.
        let contiguous = entries
            .iter()
            .zip(start..)
            .all(|(e, index)| e.get_log_id().index == index);
        contiguous.then_some(entries)
    }

    /// The entries of `[start, end_exclusive)` the tail holds, whatever the file has.
    pub(crate) fn range(&self, start: u64, end_exclusive: u64) -> Vec<Entry<TypeConfig>> {
        if start >= end_exclusive {
            return Vec::new();
        }
        self.lock()
            .slots
            .range(start..end_exclusive)
            .map(|(_, s)| s.entry.clone())
            .collect()
    }

    /// The id of the last entry appended since start-up (None: none, or all purged).
    pub(crate) fn last(&self) -> Option<LogId<u64>> {
        self.lock()
            .slots
            .values()
            .next_back()
            .map(|s| *s.entry.get_log_id())
    }

    /// Entries not yet durable.
    #[cfg(test)]
    pub(crate) fn not_durable(&self) -> usize {
        let inner = self.lock();
        inner.slots.len() - inner.durable
    }

    /// Drops entries at `since` and after (a truncation).
    pub(crate) fn remove_from(&self, since: u64) {
        let mut inner = self.lock();
        let dropped = inner.slots.split_off(&since);
        inner.durable -= dropped.values().filter(|s| s.durable).count();
    }

    /// Drops entries at `upto` and before (a purge).
    pub(crate) fn remove_upto(&self, upto: u64) {
        let mut inner = self.lock();
        let rest = inner.slots.split_off(&upto.saturating_add(1));
        let dropped = std::mem::replace(&mut inner.slots, rest);
        inner.durable -= dropped.values().filter(|s| s.durable).count();
    }

    /// Marks entries durable (unless a newer entry took their index meanwhile), then forgets
    /// the oldest durable entries beyond [`KEPT_DURABLE`]. Only a prefix is ever forgotten, so
    /// the tail stays contiguous.
    pub(crate) fn settle(&self, written: &[LogId<u64>]) {
        let mut inner = self.lock();
        for id in written {
            let Some(slot) = inner.slots.get_mut(&id.index) else {
                continue;
            };
            if slot.entry.get_log_id() == id && !slot.durable {
                slot.durable = true;
                inner.durable += 1;
            }
        }
        while inner.durable > KEPT_DURABLE {
            match inner.slots.first_entry() {
                Some(first) if first.get().durable => {
                    first.remove();
                    inner.durable -= 1;
                }
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn ids(entries: &[Entry<TypeConfig>]) -> Vec<u64> {
        entries.iter().map(|e| e.log_id.index).collect()
    }

    #[test]
    fn durable_entries_stay_readable_until_the_oldest_beyond_the_limit_are_forgotten() {
        let tail = LogTail::default();
        let total = KEPT_DURABLE as u64 + 10;
        let entries: Vec<_> = (1..=total).map(entry).collect();
        tail.insert(&entries);
        let written: Vec<_> = entries.iter().map(|e| e.log_id).collect();
        tail.settle(&written[..5]);
        assert_eq!(
            ids(&tail.covering(1, 6).expect("in memory")),
            [1, 2, 3, 4, 5]
        );
        tail.settle(&written);
        assert_eq!(tail.not_durable(), 0);
        // The 10 oldest are gone: a read that starts there must go to the file.
        assert!(tail.covering(10, 12).is_none());
        let newest = tail.covering(11, total + 100).expect("the rest in memory");
        assert_eq!(newest.len(), KEPT_DURABLE);
        assert_eq!(tail.last().map(|l| l.index), Some(total));
    }

    #[test]
    fn entries_not_yet_durable_are_never_forgotten() {
        let tail = LogTail::default();
        let entries: Vec<_> = (1..=(KEPT_DURABLE as u64 * 2)).map(entry).collect();
        tail.insert(&entries);
        // Only the newer half becomes durable; the older half must stay in memory.
        let newer: Vec<_> = entries[KEPT_DURABLE..].iter().map(|e| e.log_id).collect();
        tail.settle(&newer);
        assert_eq!(ids(&tail.covering(1, 3).expect("in memory")), [1, 2]);
        assert_eq!(tail.not_durable(), KEPT_DURABLE);
    }

    #[test]
    fn a_gap_or_a_start_before_the_tail_sends_the_read_to_the_file() {
        let tail = LogTail::default();
        tail.insert(&[entry(5), entry(6), entry(8)]);
        assert!(tail.covering(4, 7).is_none(), "index 4 may be in the file");
        assert_eq!(ids(&tail.covering(5, 7).expect("contiguous")), [5, 6]);
        assert!(tail.covering(5, 9).is_none(), "index 7 is missing");
        assert_eq!(ids(&tail.range(5, 9)), [5, 6, 8]);
    }

    #[test]
    fn truncation_and_purge_keep_the_durable_count_right() {
        let tail = LogTail::default();
        let entries: Vec<_> = (1..=10).map(entry).collect();
        tail.insert(&entries);
        tail.settle(&entries.iter().map(|e| e.log_id).collect::<Vec<_>>());
        tail.remove_from(8);
        tail.remove_upto(3);
        assert_eq!(
            ids(&tail.covering(4, 100).expect("in memory")),
            [4, 5, 6, 7]
        );
        tail.insert(&[entry(8)]);
        assert_eq!(tail.not_durable(), 1);
        assert_eq!(tail.last().map(|l| l.index), Some(8));
    }
}
