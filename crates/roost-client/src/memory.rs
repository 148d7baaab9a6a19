//! Agent memory: an agent's summary with its recovery door, its log entries, its
//! documents and their history, and the company's shared log, documents and live state.

use reqwest::Method;
pub use roost_core::memory::{
    CompanyLive, CurrentTask, Door, LiveParts, MemoryDocument, MemoryEntry, MemoryLive,
    NewMemoryEntry, Recovery,
};
pub use roost_core::views::{MemoryDocumentInfo, MemoryHitKind, MemorySearchHit, MemorySummary};
use serde::Serialize;

use crate::{Result, RoostClient, API};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DocumentBody<'a> {
    content: &'a str,
    expected_version: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    current_task: Option<&'a CurrentTask>,
    #[serde(skip_serializing_if = "Option::is_none")]
    coordinates: Option<&'a serde_json::Value>,
}

impl RoostClient {
    /// Live state, documents' versions, entry count, bytes used and the recovery door.
    pub async fn memory_summary(&self, agent_id: &str) -> Result<MemorySummary> {
        self.get(&[API, "agents", agent_id, "memory"], &[]).await
    }

    /// An agent's log entries or its company's shared log, newest first (the server's
    /// default page without `limit`).
    pub async fn memory_entries(
        &self,
        scope: &MemoryScope<'_>,
        limit: Option<usize>,
    ) -> Result<Vec<MemoryEntry>> {
        let query: Vec<(&str, String)> = limit
            .map(|l| ("limit", l.to_string()))
            .into_iter()
            .collect();
        let mut path = scope.base();
        path.extend(["memory", "entries"]);
        self.get(&path, &query).await
    }

    /// Full-text search over the agent's memory (`me`: the calling agent's): its log entries,
    /// its documents' current versions, the comments of issues it is assigned to or commented
    /// on; best first, every word of `query` required (the server's default page without
    /// `limit`).
    pub async fn memory_search(
        &self,
        agent_id: &str,
        query: &str,
        limit: Option<u32>,
        any_word: bool,
    ) -> Result<Vec<MemorySearchHit>> {
        let mut params: Vec<(&str, String)> = vec![("q", query.to_string())];
        params.extend(limit.map(|l| ("limit", l.to_string())));
        if any_word {
            params.push(("match", "any".to_string()));
        }
        self.get(&[API, "agents", agent_id, "memory", "search"], &params)
            .await
    }

    /// An entry of the calling agent's run (the client needs the run: a run-scoped key or
    /// [`RoostClient::with_run_id`]).
    pub async fn append_memory_entry(&self, entry: &NewMemoryEntry) -> Result<MemoryEntry> {
        self.post(&[API, "agents", "me", "memory", "entries"], entry)
            .await
    }

    /// An entry of the calling agent's run for its company's shared log.
    pub async fn append_shared_memory_entry(
        &self,
        company_id: &str,
        entry: &NewMemoryEntry,
    ) -> Result<MemoryEntry> {
        self.post(&[API, "companies", company_id, "memory", "entries"], entry)
            .await
    }

    /// A company's live state (`404` while never saved).
    pub async fn company_memory_live(&self, company_id: &str) -> Result<CompanyLive> {
        self.get(&[API, "companies", company_id, "memory", "live"], &[])
            .await
    }

    /// Saves a company's live state: an administrator, or an agent of it during its run.
    pub async fn set_company_memory_live(
        &self,
        company_id: &str,
        current_task: Option<&CurrentTask>,
        coordinates: Option<&serde_json::Value>,
    ) -> Result<CompanyLive> {
        let body = LiveBody {
            current_task,
            coordinates,
        };
        self.send(
            Method::PUT,
            &[API, "companies", company_id, "memory", "live"],
            &[],
            Some(&body),
        )
        .await
    }

    /// Saves the calling agent's live state during its run.
    pub async fn set_memory_live(
        &self,
        current_task: Option<&CurrentTask>,
        coordinates: Option<&serde_json::Value>,
    ) -> Result<MemoryLive> {
        let body = LiveBody {
            current_task,
            coordinates,
        };
        self.send(
            Method::PUT,
            &[API, "agents", "me", "memory", "live"],
            &[],
            Some(&body),
        )
        .await
    }

    /// An agent's document (`company_id` given and `agent_id` none: the company's shared one).
    pub async fn memory_document(
        &self,
        scope: &MemoryScope<'_>,
        name: &str,
    ) -> Result<MemoryDocument> {
        self.get(&scope.path(name, false), &[]).await
    }

    /// Its kept versions, newest first.
    pub async fn memory_history(
        &self,
        scope: &MemoryScope<'_>,
        name: &str,
    ) -> Result<Vec<MemoryDocument>> {
        self.get(&scope.path(name, true), &[]).await
    }

    /// Saves a new version if the current one is `expected_version` (0: none yet); a lost
    /// update is refused `409 conflict`.
    pub async fn put_memory_document(
        &self,
        scope: &MemoryScope<'_>,
        name: &str,
        content: &str,
        expected_version: u64,
    ) -> Result<MemoryDocument> {
        let body = DocumentBody {
            content,
            expected_version,
        };
        self.send(Method::PUT, &scope.path(name, false), &[], Some(&body))
            .await
    }
}

/// Whose documents or log: an agent's or a company's shared scope.
#[derive(Clone, Copy, Debug)]
pub enum MemoryScope<'a> {
    Agent(&'a str),
    Company(&'a str),
}

impl<'a> MemoryScope<'a> {
    fn base(self) -> Vec<&'a str> {
        match self {
            MemoryScope::Agent(id) => vec![API, "agents", id],
            MemoryScope::Company(id) => vec![API, "companies", id],
        }
    }

    fn path(self, name: &'a str, history: bool) -> Vec<&'a str> {
        let mut path = self.base();
        path.extend(["memory", "documents", name]);
        if history {
            path.push("history");
        }
        path
    }
}
