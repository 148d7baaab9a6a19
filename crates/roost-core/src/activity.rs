//! The audit log: one entry per committed change, each carrying the hash of the one before it,
//! so editing or deleting any past row breaks the chain at that row.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::time::Timestamp;

/// The hash the first entry chains from.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityEntry {
    pub seq: u64,
    pub log_index: u64,
    pub company_id: Option<String>,
    pub at: Timestamp,
    pub actor_type: String,
    pub actor_id: String,
    pub credential_id: Option<String>,
    pub run_id: Option<String>,
    pub action: String,
    pub entity_type: String,
    pub entity_id: String,
    pub details: serde_json::Value,
    pub prev_hash: String,
    pub hash: String,
}

impl ActivityEntry {
    /// SHA-256 over the previous hash and every field but `hash`, in a fixed order: the
    /// compact JSON array of those fields, streamed into the hasher (no intermediate value).
    pub fn compute_hash(&self) -> String {
        let body = (
            self.seq,
            self.log_index,
            &self.company_id,
            self.at.millis(),
            &self.actor_type,
            &self.actor_id,
            &self.credential_id,
            &self.run_id,
            &self.action,
            &self.entity_type,
            &self.entity_id,
            &self.details,
        );
        let mut hasher = Sha256::new();
        hasher.update(self.prev_hash.as_bytes());
        // Writing into a hasher cannot fail, nor can serializing strings, numbers and a JSON
        // value: an error here would be a bug in serde_json, and it still yields a hash that
        // the chain verifier rejects rather than a panic.
        if serde_json::to_writer(&mut hasher, &body).is_err() {
            hasher.update(b"\0unserializable");
        }
        hex::encode(hasher.finalize())
    }
}

/// Where a chain stops verifying.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
pub enum ChainBreak {
    #[error("entry {seq}: stored hash does not match its contents")]
    HashMismatch { seq: u64 },
    #[error("entry {seq}: prevHash does not match the hash of entry {prev_seq}")]
    LinkMismatch { seq: u64, prev_seq: u64 },
    #[error("entry {seq} follows entry {prev_seq}: the sequence has a gap")]
    Gap { seq: u64, prev_seq: u64 },
}

/// The result of verifying a chain that holds no break.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainSummary {
    pub entries: u64,
    pub head_hash: String,
}

/// Incremental verifier, so a long chain can be streamed from storage in pages.
pub struct ChainVerifier {
    prev_seq: u64,
    prev_hash: String,
    entries: u64,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier {
            prev_seq: 0,
            prev_hash: GENESIS_HASH.to_string(),
            entries: 0,
        }
    }
}

impl ChainVerifier {
    pub fn push(&mut self, entry: &ActivityEntry) -> Result<(), ChainBreak> {
        if entry.seq != self.prev_seq + 1 {
            return Err(ChainBreak::Gap {
                seq: entry.seq,
                prev_seq: self.prev_seq,
            });
        }
        if entry.prev_hash != self.prev_hash {
            return Err(ChainBreak::LinkMismatch {
                seq: entry.seq,
                prev_seq: self.prev_seq,
            });
        }
        if entry.compute_hash() != entry.hash {
            return Err(ChainBreak::HashMismatch { seq: entry.seq });
        }
        self.prev_seq = entry.seq;
        self.prev_hash = entry.hash.clone();
        self.entries += 1;
        Ok(())
    }

    pub fn finish(self) -> ChainSummary {
        ChainSummary {
            entries: self.entries,
            head_hash: self.prev_hash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: u64) -> Vec<ActivityEntry> {
        let mut prev = GENESIS_HASH.to_string();
        (1..=n)
            .map(|seq| {
                let mut e = ActivityEntry {
                    seq,
                    log_index: seq + 10,
                    company_id: Some("c1".into()),
                    at: Timestamp(seq as i64 * 1000),
                    actor_type: "user".into(),
                    actor_id: "admin".into(),
                    credential_id: None,
                    run_id: None,
                    action: "issue.created".into(),
                    entity_type: "issue".into(),
                    entity_id: format!("i{seq}"),
                    details: serde_json::json!({"title": format!("t{seq}")}),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                e.hash = e.compute_hash();
                prev = e.hash.clone();
                e
            })
            .collect()
    }

    fn verify(entries: &[ActivityEntry]) -> Result<ChainSummary, ChainBreak> {
        let mut v = ChainVerifier::default();
        for e in entries {
            v.push(e)?;
        }
        Ok(v.finish())
    }

    /// The hash as the first releases built it: `json!` of the fields, then its text. Chains
    /// already on disk were hashed this way, so the streamed hash must give the same bytes.
    fn hash_as_first_written(e: &ActivityEntry) -> String {
        let body = serde_json::json!([
            e.seq,
            e.log_index,
            e.company_id,
            e.at.millis(),
            e.actor_type,
            e.actor_id,
            e.credential_id,
            e.run_id,
            e.action,
            e.entity_type,
            e.entity_id,
            e.details,
        ]);
        let mut hasher = Sha256::new();
        hasher.update(e.prev_hash.as_bytes());
        hasher.update(body.to_string().as_bytes());
        hex::encode(hasher.finalize())
    }

    #[test]
    fn streamed_hash_matches_chains_already_written() {
        let mut entries = chain(3);
        entries[1].credential_id = Some("cred-1".into());
        entries[1].run_id = Some("run \"quoted\" ü".into());
        entries[2].company_id = None;
        entries[2].at = Timestamp(-5);
        entries[2].details = serde_json::json!({
            "zeta": [1, 2.5, null, true],
            "alpha": {"nested": "line\nbreak\ttab\u{1}"},
            "big": u64::MAX,
        });
        for e in &entries {
            assert_eq!(
                e.compute_hash(),
                hash_as_first_written(e),
                "entry {}",
                e.seq
            );
        }
    }

    #[test]
    fn intact_chain_verifies() {
        let c = chain(5);
        let summary = verify(&c).unwrap();
        assert_eq!(summary.entries, 5);
        assert_eq!(summary.head_hash, c[4].hash);
    }

    #[test]
    fn edited_details_break_the_chain_at_that_entry() {
        let mut c = chain(5);
        c[2].details = serde_json::json!({"title": "forged"});
        assert_eq!(verify(&c), Err(ChainBreak::HashMismatch { seq: 3 }));
    }

    #[test]
    fn rehashed_forgery_breaks_the_next_link() {
        let mut c = chain(5);
        c[2].actor_id = "mallory".into();
        c[2].hash = c[2].compute_hash();
        assert_eq!(
            verify(&c),
            Err(ChainBreak::LinkMismatch {
                seq: 4,
                prev_seq: 3
            })
        );
    }

    #[test]
    fn deleted_entry_is_a_gap() {
        let mut c = chain(5);
        c.remove(1);
        assert_eq!(
            verify(&c),
            Err(ChainBreak::Gap {
                seq: 3,
                prev_seq: 1
            })
        );
    }
}
