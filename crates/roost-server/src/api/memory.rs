//! Agent memory: an agent's rolling log, documents and live state, and its company's shared
//! log, documents and live state. An agent reads and writes its own memory, reads its
//! company's, and writes the company's log and live state during its runs; an administrator
//! reads any and writes the company's documents and live state; another company's objects are
//! not found. The state
//! machine re-checks every write (`roost-core/src/rules/memory.rs`), fencing a run's writes.

use roost_core::memory::{
    CompanyLive, CurrentTask, LogOwner, MemoryDocument, MemoryEntry, MemoryLive, NewMemoryEntry,
    MEMORY_DOCUMENT_NAMES,
};
use roost_core::views::{MemorySearchHit, MemorySummary};
use roost_core::{Agent, Command, Outcome};

use super::{expect_outcome, new_id, now, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// Entries a page holds unless asked otherwise, and at most.
pub const DEFAULT_ENTRY_PAGE: usize = 50;
pub const MAX_ENTRY_PAGE: usize = roost_core::limits::MAX_MEMORY_ENTRIES_PER_AGENT;
pub const MAX_SHARED_ENTRY_PAGE: usize = roost_core::limits::MAX_MEMORY_ENTRIES_PER_COMPANY;

/// Search hits an answer holds unless asked otherwise, and at most.
pub const DEFAULT_SEARCH_HITS: u32 = 20;
pub const MAX_SEARCH_HITS: u32 = 100;

/// Whose documents: an agent's (its id, or `me`) or its company's shared scope.
#[derive(Clone, Debug)]
pub enum MemoryScope {
    Agent(String),
    Company(String),
}

impl Api {
    /// The agent `agent_ref` names (`me`: the caller) if the caller may read its memory: the
    /// agent itself or an administrator; another agent of its company is refused, another
    /// company's agent is not found.
    pub(super) async fn memory_agent(
        &self,
        caller: &Caller,
        agent_ref: &str,
    ) -> Result<Agent, ApiError> {
        let agent_id = if agent_ref == "me" {
            caller.agent_id().ok_or_else(|| {
                ApiError::forbidden(
                    "`me` names the calling agent; an administrator names the agent by id",
                )
            })?
        } else {
            agent_ref
        };
        self.barrier().await?;
        let agent = self
            .reader()
            .read(|s| s.agents.get(agent_id).cloned())
            .ok_or_else(|| ApiError::not_found("agent", agent_id))?;
        caller.check_company(&agent.company_id, "agent", agent_id)?;
        if let Some(own) = caller.agent_id() {
            if own != agent.id {
                return Err(ApiError::forbidden(
                    "an agent reads and writes only its own memory",
                ));
            }
        }
        Ok(agent)
    }

    /// The scope's (company id, agent id), checked for reading.
    async fn memory_scope(
        &self,
        caller: &Caller,
        scope: &MemoryScope,
    ) -> Result<(String, Option<String>), ApiError> {
        match scope {
            MemoryScope::Agent(agent_ref) => {
                let agent = self.memory_agent(caller, agent_ref).await?;
                Ok((agent.company_id, Some(agent.id)))
            }
            MemoryScope::Company(company_id) => {
                let company = self.get_company(caller, company_id).await?;
                Ok((company.id, None))
            }
        }
    }

    /// Live state, documents' versions, entry count, bytes used, and the door a run starting
    /// now would take.
    pub async fn memory_summary(
        &self,
        caller: &Caller,
        agent_ref: &str,
    ) -> Result<MemorySummary, ApiError> {
        let agent = self.memory_agent(caller, agent_ref).await?;
        let at = now();
        Ok(self.reader().read(|s| MemorySummary::of(s, &agent, at)))
    }

    /// An agent's log entries, newest first.
    pub async fn memory_entries(
        &self,
        caller: &Caller,
        agent_ref: &str,
        limit: Option<usize>,
    ) -> Result<Vec<MemoryEntry>, ApiError> {
        let agent = self.memory_agent(caller, agent_ref).await?;
        let limit = limit.unwrap_or(DEFAULT_ENTRY_PAGE).clamp(1, MAX_ENTRY_PAGE);
        Ok(self.reader().read(|s| {
            s.memory
                .entries_of(&agent.id)
                .rev()
                .take(limit)
                .cloned()
                .collect()
        }))
    }

    /// Recall: full-text search, best first, over the agent's log entries, the current
    /// versions of its documents, and the comments of the issues of its company it is assigned
    /// to or has commented on (`roost-store/src/search.rs`). Every word of `q` is required;
    /// (with `any`, one of them is enough); FTS syntax in it is taken as words; a `q` without words (or none) finds nothing, one
    /// over `MAX_QUERY_CHARS` is a 400. Who may search is checked before `q`.
    pub async fn memory_search(
        &self,
        caller: &Caller,
        agent_ref: &str,
        q: Option<&str>,
        limit: Option<u32>,
        any: bool,
    ) -> Result<Vec<MemorySearchHit>, ApiError> {
        let agent = self.memory_agent(caller, agent_ref).await?;
        let text = q.unwrap_or_default();
        let query = if any {
            roost_store::SearchQuery::parse_any(text)
        } else {
            roost_store::SearchQuery::parse(text)
        }
        .map_err(|why| ApiError::bad_request(format!("q: {why}")))?;
        let limit = limit
            .unwrap_or(DEFAULT_SEARCH_HITS)
            .clamp(1, MAX_SEARCH_HITS);
        if query.expression().is_some() {
            if let Some(hits) = self.hybrid_search(&agent, text, limit).await? {
                return Ok(hits);
            }
        }
        Ok(self
            .reader()
            .search_memory(&agent.company_id, &agent.id, &query, limit)
            .await?)
    }

    /// With `[recall]` embeddings: the index's best any-word candidates and the agent's newest
    /// texts, ranked by bm25 and embedding similarity (`recall/score.rs`). `None` without an
    /// endpoint, or when it failed (logged in `recall/`): the caller ranks lexically.
    async fn hybrid_search(
        &self,
        agent: &Agent,
        text: &str,
        limit: u32,
    ) -> Result<Option<Vec<MemorySearchHit>>, ApiError> {
        let Some(recall) = self.recall() else {
            return Ok(None);
        };
        let any = roost_store::SearchQuery::parse_any(text)
            .map_err(|why| ApiError::bad_request(format!("q: {why}")))?;
        let (lexical, recent) = self
            .reader()
            .search_memory_texts(
                &agent.company_id,
                &agent.id,
                &any,
                recall.candidates.max(limit),
                recall.recent,
            )
            .await?;
        let mut texts: Vec<&str> = vec![text];
        texts.extend(lexical.iter().map(|t| t.body.as_str()));
        texts.extend(recent.iter().map(|t| t.body.as_str()));
        let Ok(vectors) = recall.embed(&texts).await else {
            return Ok(None);
        };
        let mut vectors = vectors.into_iter();
        let Some(query) = vectors.next() else {
            return Ok(None);
        };
        let mut with_vectors = |list: Vec<roost_store::SearchText>| -> Vec<_> {
            list.into_iter()
                .map(|t| {
                    (
                        t.hit,
                        vectors.next().map(|v| v.to_vec()).unwrap_or_default(),
                    )
                })
                .collect()
        };
        let lexical = with_vectors(lexical);
        let recent = with_vectors(recent);
        Ok(Some(crate::recall::score::rank(
            &query,
            lexical,
            recent,
            recall.weights,
            limit as usize,
        )))
    }

    /// The calling agent's entry for its run (`POST /api/agents/me/memory/entries`), or, with
    /// `shared` naming its company, for the company's log
    /// (`POST /api/companies/{cid}/memory/entries`).
    pub async fn append_memory_entry(
        &self,
        caller: &Caller,
        entry: NewMemoryEntry,
        shared: Option<&str>,
    ) -> Result<MemoryEntry, ApiError> {
        require_run(caller, "a memory entry")?;
        if shared.is_some() && caller.agent_id().is_none() {
            return Err(ApiError::forbidden(
                "a company's shared log is written by its agents during their runs; an \
                 administrator keeps the company's documents and live state instead",
            ));
        }
        let agent = self.memory_agent(caller, "me").await?;
        if let Some(company_id) = shared {
            caller.check_company(company_id, "company", company_id)?;
            if agent.company_id != company_id {
                return Err(ApiError::not_found("company", company_id));
            }
        }
        let command = Command::AppendMemoryEntry {
            id: new_id(),
            agent_id: agent.id,
            entry,
            shared: shared.is_some(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::MemoryEntry(e) => e)
    }

    /// The company, if the caller may read its shared memory: an administrator or an agent of
    /// it.
    async fn shared_memory_company(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<String, ApiError> {
        if !caller.is_admin() && caller.agent_id().is_none() {
            return Err(ApiError::forbidden(
                "a company's memory is read by its agents and administrators",
            ));
        }
        Ok(self.get_company(caller, company_id).await?.id)
    }

    /// The company's shared log, newest first.
    pub async fn shared_memory_entries(
        &self,
        caller: &Caller,
        company_id: &str,
        limit: Option<usize>,
    ) -> Result<Vec<MemoryEntry>, ApiError> {
        let company_id = self.shared_memory_company(caller, company_id).await?;
        let limit = limit
            .unwrap_or(DEFAULT_ENTRY_PAGE)
            .clamp(1, MAX_SHARED_ENTRY_PAGE);
        let log = LogOwner::Company(company_id);
        Ok(self.reader().read(|s| {
            s.memory
                .log_entries(&log)
                .rev()
                .take(limit)
                .cloned()
                .collect()
        }))
    }

    /// The company's live state (404 while it was never saved).
    pub async fn company_memory_live(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<CompanyLive, ApiError> {
        let company_id = self.shared_memory_company(caller, company_id).await?;
        self.reader()
            .read(|s| s.memory.company_live.get(&company_id).cloned())
            .ok_or_else(|| ApiError::not_found("saved live memory of company", &company_id))
    }

    /// Saves the company's live state: an administrator, or an agent of it during its run.
    pub async fn set_company_memory_live(
        &self,
        caller: &Caller,
        company_id: &str,
        current_task: Option<CurrentTask>,
        coordinates: Option<serde_json::Value>,
    ) -> Result<CompanyLive, ApiError> {
        let company_id = self.shared_memory_company(caller, company_id).await?;
        if !caller.is_admin() {
            require_run(caller, "the company's live memory")?;
        }
        let command = Command::SetCompanyMemoryLive {
            company_id,
            current_task,
            coordinates,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::CompanyMemoryLive(l) => l)
    }

    /// The calling agent's live state, during its run (`PUT /api/agents/me/memory/live`).
    pub async fn set_memory_live(
        &self,
        caller: &Caller,
        current_task: Option<CurrentTask>,
        coordinates: Option<serde_json::Value>,
    ) -> Result<MemoryLive, ApiError> {
        require_run(caller, "live memory")?;
        let agent = self.memory_agent(caller, "me").await?;
        let command = Command::SetMemoryLive {
            agent_id: agent.id,
            current_task,
            coordinates,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::MemoryLive(l) => l)
    }

    /// The current version of a document (404 while it has none).
    pub async fn memory_document(
        &self,
        caller: &Caller,
        scope: &MemoryScope,
        name: &str,
    ) -> Result<MemoryDocument, ApiError> {
        check_name(name)?;
        let (company_id, agent_id) = self.memory_scope(caller, scope).await?;
        self.reader()
            .read(|s| {
                s.memory
                    .document(&company_id, agent_id.as_deref(), name)
                    .cloned()
            })
            .ok_or_else(|| ApiError::not_found("memory document", name))
    }

    /// A document's kept versions, newest first (empty while it has none).
    pub async fn memory_history(
        &self,
        caller: &Caller,
        scope: &MemoryScope,
        name: &str,
    ) -> Result<Vec<MemoryDocument>, ApiError> {
        check_name(name)?;
        let (company_id, agent_id) = self.memory_scope(caller, scope).await?;
        Ok(self.reader().read(|s| {
            s.memory
                .versions(&company_id, agent_id.as_deref(), name)
                .rev()
                .cloned()
                .collect()
        }))
    }

    /// Saves a document if its current version is `expected_version` (0: it has none yet).
    pub async fn put_memory_document(
        &self,
        caller: &Caller,
        scope: &MemoryScope,
        name: &str,
        content: String,
        expected_version: u64,
    ) -> Result<MemoryDocument, ApiError> {
        check_name(name)?;
        let (company_id, agent_id) = self.memory_scope(caller, scope).await?;
        if agent_id.is_none() {
            // The company's shared scope: its agents read it, administrators write it.
            caller.require_admin()?;
        }
        let command = Command::PutMemoryDocument {
            company_id,
            agent_id,
            name: name.into(),
            content,
            expected_version,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::MemoryDocument(d) => d)
    }
}

/// Refuses before proposing what the state machine would refuse: a run's write with no run.
pub(super) fn require_run(caller: &Caller, what: &str) -> Result<(), ApiError> {
    if caller.actor.run_id.is_some() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "{what} is written during a run: send its run id in X-Roost-Run-Id, or use the run's own key"
    )))
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if MEMORY_DOCUMENT_NAMES.contains(&name) {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "no memory document {name:?}: a memory document is one of {}",
        MEMORY_DOCUMENT_NAMES.join(", ")
    )))
}
