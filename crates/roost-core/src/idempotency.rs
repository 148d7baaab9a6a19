//! Idempotent writes: the outcome of each keyed command is remembered for a retention window
//! measured in command time (the envelope's `at`), so expiry is deterministic on every replica.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::command::Outcome;
use crate::error::DomainError;
use crate::time::Timestamp;

/// How long a key is remembered: longer than any client retries a write.
pub const RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// The longest accepted key.
pub const MAX_KEY_LEN: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub key: String,
    pub at: Timestamp,
    pub index: u64,
    pub outcome: Result<Outcome, DomainError>,
}

#[derive(Clone, Debug, Default)]
pub struct IdempotencyTable {
    by_key: BTreeMap<String, Remembered>,
    by_time: BTreeSet<(Timestamp, String)>,
}

impl IdempotencyTable {
    pub fn get(&self, key: &str) -> Option<&Remembered> {
        self.by_key.get(key)
    }

    pub fn insert(&mut self, r: Remembered) {
        if let Some(old) = self.by_key.remove(&r.key) {
            self.by_time.remove(&(old.at, old.key));
        }
        self.by_time.insert((r.at, r.key.clone()));
        self.by_key.insert(r.key.clone(), r);
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(old) = self.by_key.remove(key) {
            self.by_time.remove(&(old.at, old.key));
        }
    }

    /// Keys older than the retention window as of `now`, oldest first.
    pub fn expired(&self, now: Timestamp) -> Vec<String> {
        let cutoff = Timestamp(now.0.saturating_sub(RETENTION_MS));
        self.by_time
            .iter()
            .take_while(|(at, _)| *at < cutoff)
            .map(|(_, k)| k.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.by_key.keys()
    }
}
