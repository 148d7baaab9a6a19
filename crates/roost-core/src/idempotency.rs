//! Idempotent writes: the outcome of each keyed command is remembered for a retention window
//! measured in command time (the envelope's `at`), so expiry is deterministic on every replica.
//!
//! A key is scoped by who sent it (the credential), the company it acts in and the kind of
//! command: the same key from another tenant, or for another kind of write, is another key, so
//! nobody can read or suppress someone else's write by guessing a key. A key remembers the
//! fingerprint of its request: the same key with a different request is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::command::{Actor, Command, Outcome};
use crate::error::DomainError;
use crate::time::Timestamp;

/// How long a key is remembered: longer than any client retries a write.
pub const RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// The longest accepted key.
pub const MAX_KEY_LEN: usize = 128;

/// The oldest time a key is still remembered at `now`.
fn retained_since(now: Timestamp) -> Timestamp {
    Timestamp(now.0.saturating_sub(RETENTION_MS))
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub key: String,
    pub at: Timestamp,
    pub index: u64,
    pub outcome: Result<Outcome, DomainError>,
    /// The [`fingerprint`] of the request that used the key (absent in rows written before
    /// fingerprints existed: those match any request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// The key a client's `Idempotency-Key` is remembered under: the credential (or, without one,
/// the actor), the company the actor is bound to, and the command's kind, then the key.
pub fn scoped_key(actor: &Actor, command: &Command, key: &str) -> String {
    let who = actor.credential_or_id();
    let company = actor.company_id.as_deref().unwrap_or("*");
    // 0x1f (unit separator) never appears in ids, company ids or command names.
    format!(
        "{}:{who}\u{1f}{company}\u{1f}{}\u{1f}{key}",
        actor.kind.as_str(),
        command.name()
    )
}

/// A digest of what a request asked for: the command without the ids and secrets the proposing
/// node minted for it, so a retry of the same request (with fresh ids) has the same fingerprint.
pub fn fingerprint(command: &Command) -> String {
    let mut c = command.clone();
    match &mut c {
        Command::CreateCompany { id, .. }
        | Command::CreateAgent { id, .. }
        | Command::CreateIssue { id, .. }
        | Command::StartRun { id, .. }
        | Command::SetBudgetPolicy { id, .. }
        | Command::Wakeup { id, .. }
        | Command::AppendMemoryEntry { id, .. } => id.clear(),
        Command::CreateCredential { id, token_hash, .. }
        | Command::CreateJoinToken { id, token_hash, .. } => {
            id.clear();
            token_hash.clear();
        }
        Command::UpdateIssue {
            comment: Some(comment),
            ..
        }
        | Command::AddComment { comment, .. } => comment.id.clear(),
        Command::RecordCostEvent { event } => event.id.clear(),
        Command::TimerTick { wake_id, .. } => wake_id.clear(),
        Command::TriggerIssueMonitor { id, .. } => id.clear(),
        Command::AddIssueAttachment {
            attachment_id,
            work_product_id,
            ..
        } => {
            attachment_id.clear();
            work_product_id.clear();
        }
        Command::CreateWorkProduct {
            work_product_id, ..
        } => work_product_id.clear(),
        Command::AssignRun {
            run_id, token_hash, ..
        } => {
            run_id.clear();
            *token_hash = None;
        }
        Command::AddRunToken { token_hash, .. } => token_hash.clear(),
        Command::Routine { routine } => routine.clear_generated(),
        _ => {}
    }
    let json = serde_json::to_vec(&c).unwrap_or_default();
    hex::encode(Sha256::digest(json))
}

/// What a node keeps in memory of a remembered key: enough to tell a retry from a reuse and
/// to expire it. The outcome stays in the key's row in `state.db` only, and the node answering
/// a retry reads it there ([`crate::Outcome::Repeated`]): kept in memory on every node, a
/// created issue's outcome cost about 1.6 KiB per keyed write for a day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub at: Timestamp,
    pub fingerprint: Print,
}

/// A remembered request's [`fingerprint`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Print {
    /// A row written before fingerprints existed: matches any request.
    Any,
    /// The digest, as [`fingerprint`] writes it in hex (lower case, 64 characters).
    Bytes([u8; 32]),
    /// Anything else a row holds, compared as the text it is, as before it was kept as bytes.
    Text(Box<str>),
}

impl Print {
    fn of(row: Option<String>) -> Print {
        let Some(text) = row else {
            return Print::Any;
        };
        let bytes = hex::decode(&text)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok());
        match bytes {
            Some(b) if hex::encode(b) == text => Print::Bytes(b),
            _ => Print::Text(text.into()),
        }
    }
}

impl Seen {
    /// Whether `print` (a [`fingerprint`]) is another request than the one the key was used for.
    pub fn is_other_request(&self, print: &str) -> bool {
        match &self.fingerprint {
            Print::Any => false,
            Print::Bytes(seen) => hex::decode(print).ok().as_deref() != Some(&seen[..]),
            Print::Text(seen) => **seen != *print,
        }
    }
}

/// Remembered keys by key and by time. The key, a hundred-odd bytes, is shared by both.
#[derive(Clone, Debug, Default)]
pub struct IdempotencyTable {
    by_key: BTreeMap<Arc<str>, Seen>,
    by_time: BTreeSet<(Timestamp, Arc<str>)>,
}

impl IdempotencyTable {
    pub fn get(&self, key: &str) -> Option<&Seen> {
        self.by_key.get(key)
    }

    pub fn insert(&mut self, r: Remembered) {
        self.remove(&r.key);
        let key: Arc<str> = r.key.into();
        self.by_time.insert((r.at, key.clone()));
        let seen = Seen {
            at: r.at,
            fingerprint: Print::of(r.fingerprint),
        };
        self.by_key.insert(key, seen);
    }

    pub fn remove(&mut self, key: &str) {
        if let Some((key, old)) = self.by_key.remove_entry(key) {
            self.by_time.remove(&(old.at, key));
        }
    }

    /// Keys older than the retention window as of `now`, oldest first.
    pub fn expired(&self, now: Timestamp) -> Vec<String> {
        let cutoff = retained_since(now);
        self.by_time
            .iter()
            .take_while(|(at, _)| *at < cutoff)
            .map(|(_, k)| k.to_string())
            .collect()
    }

    /// `key` if a command applied at `at` would still find it: a key past the retention
    /// window stays in memory until the next apply forgets it, and answers nothing then.
    pub fn live_at(&self, key: &str, at: Timestamp) -> Option<&Seen> {
        self.get(key).filter(|seen| seen.at >= retained_since(at))
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.by_key.keys().map(|k| &**k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a keyed upload's retry skipped its chunks when its key was still in
    /// memory but past the retention window, so the last write, applied anew, had no chunks.
    /// A key counts only while a command applied then would still find it.
    #[test]
    fn a_key_past_its_retention_is_not_live_though_still_in_memory() {
        let mut table = IdempotencyTable::default();
        table.insert(Remembered {
            key: "k".into(),
            at: Timestamp(1_000),
            index: 1,
            outcome: Err(DomainError::conflict("x")),
            fingerprint: None,
        });
        let last_live = Timestamp(1_000 + RETENTION_MS);
        assert!(table.live_at("k", last_live).is_some());
        assert!(table.expired(last_live).is_empty());
        let past = Timestamp(last_live.0 + 1);
        assert!(table.live_at("k", past).is_none());
        assert_eq!(table.expired(past), ["k"]);
        assert!(
            table.get("k").is_some(),
            "in memory until an apply forgets it"
        );
        assert!(table.live_at("other", Timestamp(1_000)).is_none());
    }

    fn seen(row: Option<&str>) -> Seen {
        Seen {
            at: Timestamp(0),
            fingerprint: Print::of(row.map(str::to_string)),
        }
    }

    /// Keeping a row's fingerprint as bytes changes no answer: the same hex matches, other hex
    /// does not, a row without one matches anything, and text that is not this hex (upper
    /// case, damaged) is compared as text, as it was.
    #[test]
    fn a_kept_fingerprint_answers_as_the_text_it_was_read_from() {
        let print = hex::encode([0xabu8; 32]);
        assert!(!seen(Some(&print)).is_other_request(&print));
        assert!(seen(Some(&print)).is_other_request(&hex::encode([8u8; 32])));
        assert!(!seen(None).is_other_request(&print));
        let upper = print.to_uppercase();
        assert!(seen(Some(&upper)).is_other_request(&print));
        assert!(!seen(Some(&upper)).is_other_request(&upper));
        assert!(seen(Some("damaged")).is_other_request(&print));
    }
}
