//! The API's wire types: the JSON shapes the server writes and the client reads, declared once
//! here for both (credentials, memory, homes and events in this file; runs, issues, budgets and
//! wakes in `views/`). A credential's shows what it is, never what it opens.

mod budgets;
mod filters;
mod issues;
mod runs;
mod wakes;

pub use budgets::{AgentSpend, BudgetOverview, CostSummary, PolicyStatus, ProjectSpend};
pub use filters::{has_text, IssueFilter, WakeFilter};
pub use issues::{
    CommentCursor, HeartbeatContext, IssueDetail, IssueSummary, IssueWithComment, LabeledIssue,
};
pub use runs::{AuditReport, LogPage, RunView};
pub use wakes::{WakeView, WakeupResult, WorkerView};

use serde::{Deserialize, Serialize};

use crate::entity::{Credential, CredentialKind};
use crate::time::Timestamp;

/// A credential as every list and revocation shows it: no field for the secret or its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CredentialView {
    pub id: String,
    pub kind: CredentialKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub created_at: Timestamp,
    pub revoked: bool,
    /// `null` while it is valid (and for keys revoked before revocation times were kept).
    #[serde(default)]
    pub revoked_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    /// Join tokens with `maxUses`: the worker ids bound to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_ids: Vec<String>,
    /// Worker credentials: the worker it is bound to, and the join token it was exchanged for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_token_id: Option<String>,
}

impl From<Credential> for CredentialView {
    fn from(c: Credential) -> Self {
        CredentialView {
            id: c.id,
            kind: c.kind,
            name: c.name,
            agent_id: c.agent_id,
            created_at: c.created_at,
            revoked: c.revoked,
            revoked_at: c.revoked_at,
            expires_at: c.expires_at,
            max_uses: c.max_uses,
            worker_ids: c.worker_ids,
            worker_id: c.worker_id,
            join_token_id: c.join_token_id,
        }
    }
}

/// An admin token as shown once, at creation (`POST /api/admin/tokens`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedAdminToken {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
    pub token: String,
}

impl CreatedAdminToken {
    pub fn new(c: Credential, token: String) -> Self {
        CreatedAdminToken {
            id: c.id,
            name: c.name,
            created_at: c.created_at,
            token,
        }
    }
}

/// An agent key as shown once, at creation (`POST /api/agents/{id}/keys`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    pub id: String,
    pub name: String,
    pub agent_id: Option<String>,
    pub created_at: Timestamp,
    pub token: String,
}

impl CreatedKey {
    pub fn new(c: Credential, token: String) -> Self {
        CreatedKey {
            id: c.id,
            name: c.name,
            agent_id: c.agent_id,
            created_at: c.created_at,
            token,
        }
    }
}

/// A worker join token as shown once, at creation (`POST /api/workers/join-tokens`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedJoinToken {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    pub token: String,
}

impl CreatedJoinToken {
    pub fn new(c: Credential, token: String) -> Self {
        CreatedJoinToken {
            id: c.id,
            name: c.name,
            created_at: c.created_at,
            expires_at: c.expires_at,
            max_uses: c.max_uses,
            token,
        }
    }
}

/// An agent's memory at a glance (`GET /api/agents/{id}/memory`, `roost memory show`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemorySummary {
    pub agent_id: String,
    pub company_id: String,
    /// `current-task` and `coordinates` with their update times; `null` if never saved.
    #[serde(default)]
    pub live: Option<crate::memory::MemoryLive>,
    /// The door a run starting now would take, computed at the time of the request.
    pub recovery: crate::memory::Recovery,
    /// The current version of each document the agent has.
    #[serde(default)]
    pub documents: Vec<MemoryDocumentInfo>,
    pub entry_count: usize,
    #[serde(default)]
    pub latest_entry_at: Option<Timestamp>,
    /// Bytes held: entries' text, every kept document version, live state.
    pub bytes_used: u64,
    pub limits: MemoryLimits,
}

/// A document's current version, without its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDocumentInfo {
    pub name: String,
    pub version: u64,
    pub bytes: u64,
    pub updated_at: Timestamp,
    /// Versions kept (the current one included).
    pub versions_kept: usize,
}

/// The caps an agent's memory lives under (`limits.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryLimits {
    pub max_entry_bytes: u64,
    pub max_entries: u64,
    pub max_document_bytes: u64,
    pub max_document_versions: u64,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        use crate::limits::*;
        MemoryLimits {
            max_entry_bytes: MAX_MEMORY_ENTRY_BYTES as u64,
            max_entries: MAX_MEMORY_ENTRIES_PER_AGENT as u64,
            max_document_bytes: MAX_MEMORY_DOCUMENT_BYTES as u64,
            max_document_versions: MAX_MEMORY_DOCUMENT_VERSIONS as u64,
        }
    }
}

impl MemorySummary {
    /// The summary of `agent`'s memory in `state`, its door computed for `now`.
    pub fn of(state: &crate::State, agent: &crate::Agent, now: Timestamp) -> MemorySummary {
        let memory = &state.memory;
        let live = memory.live.get(&agent.id).cloned();
        let saved_at = live.as_ref().and_then(|l| l.parts.current_task_updated_at);
        let documents = crate::memory::MEMORY_DOCUMENT_NAMES
            .iter()
            .filter_map(|name| {
                let current = memory.document(&agent.company_id, Some(&agent.id), name)?;
                Some(MemoryDocumentInfo {
                    name: current.name.clone(),
                    version: current.version,
                    bytes: current.content.len() as u64,
                    updated_at: current.updated_at,
                    versions_kept: memory
                        .versions(&agent.company_id, Some(&agent.id), name)
                        .count(),
                })
            })
            .collect();
        MemorySummary {
            agent_id: agent.id.clone(),
            company_id: agent.company_id.clone(),
            recovery: crate::memory::recovery(saved_at, now),
            live,
            documents,
            entry_count: memory.entry_count(&agent.id),
            latest_entry_at: memory
                .entries_of(&agent.id)
                .next_back()
                .map(|e| e.created_at),
            bytes_used: memory.bytes_of(&agent.company_id, &agent.id),
            limits: MemoryLimits::default(),
        }
    }
}

/// What a memory search hit is: a log entry, a document's current version, or an issue's comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryHitKind {
    Entry,
    Document,
    Comment,
}

impl MemoryHitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryHitKind::Entry => "entry",
            MemoryHitKind::Document => "document",
            MemoryHitKind::Comment => "comment",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "entry" => Some(MemoryHitKind::Entry),
            "document" => Some(MemoryHitKind::Document),
            "comment" => Some(MemoryHitKind::Comment),
            _ => None,
        }
    }
}

/// One result of `GET /api/agents/{id}/memory/search` (`roost memory search`), best first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemorySearchHit {
    pub kind: MemoryHitKind,
    /// The entry's id, the document's name (`MEMORY.md`), or the comment's id.
    pub id: String,
    /// The comment's issue, or the issue an entry was about.
    #[serde(default)]
    pub issue_id: Option<String>,
    /// The best-matching stretch of the text, matched words in `[` `]`.
    pub snippet: String,
    /// Relevance, higher is better: SQLite FTS5's bm25 negated (`lexical`), or the hybrid
    /// score, 0 to 1 (`hybrid`: roost-server/src/recall/score.rs).
    pub score: f64,
    /// The entry's or comment's creation, the document version's save.
    pub created_at: Timestamp,
    /// How `score` was computed: `lexical` (bm25 only: no embeddings endpoint configured, or
    /// it failed) or `hybrid` (bm25 and embedding similarity).
    #[serde(default)]
    pub ranking: MemoryRanking,
    /// With `hybrid`: the cosine similarity of the query's and the text's embeddings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_score: Option<f64>,
}

/// How a search ranked its hits ([`MemorySearchHit::ranking`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryRanking {
    #[default]
    Lexical,
    Hybrid,
}

impl MemoryRanking {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryRanking::Lexical => "lexical",
            MemoryRanking::Hybrid => "hybrid",
        }
    }
}

/// An agent's home as served (`GET /api/agents/{id}/home`): the manifest and its cap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomeView {
    #[serde(flatten)]
    pub home: crate::home::AgentHome,
    pub max_bytes: u64,
}

/// What an upload of home chunks answers: their hashes, in the order sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HomeChunksStored {
    pub hashes: Vec<String>,
}

/// One event of a company's event stream (`GET /api/companies/{cid}/events`, gRPC `Watch`):
/// an accepted write, as the activity log records it, with the Raft index it was applied at.
/// `seq` orders events and is the same on every node: a client that saw `seq` resumes from
/// there on any node (`after`, or SSE's `Last-Event-ID`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub seq: u64,
    /// The Raft log index of the entry that made it.
    pub index: u64,
    pub at: Timestamp,
    pub company_id: Option<String>,
    /// What happened: `issue.created`, `issue.checked_out`, `run.finished`, ...
    pub action: String,
    pub entity_type: String,
    pub entity_id: String,
    pub actor_type: String,
    pub actor_id: String,
    pub run_id: Option<String>,
    pub details: serde_json::Value,
}

impl From<crate::activity::ActivityEntry> for Event {
    fn from(a: crate::activity::ActivityEntry) -> Self {
        Event {
            seq: a.seq,
            index: a.log_index,
            at: a.at,
            company_id: a.company_id,
            action: a.action,
            entity_type: a.entity_type,
            entity_id: a.entity_id,
            actor_type: a.actor_type,
            actor_id: a.actor_id,
            run_id: a.run_id,
            details: a.details,
        }
    }
}

#[cfg(test)]
mod wire_tests;
