//! The agent's home: its manifest and chunks, read by the agent itself or an
//! administrator (as memory is), written by the agent's live run. The state machine re-checks
//! every write (`roost-core/src/rules/home.rs`).

use std::collections::BTreeMap;

use roost_core::home::{chunk_key, AgentHome, HomeFile};
use roost_core::views::HomeView;
use roost_core::{Command, Outcome};

use super::memory::require_run;
use super::{expect_outcome, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    /// The agent's home (version 0 and no files before its first save).
    pub async fn agent_home(&self, caller: &Caller, agent_ref: &str) -> Result<HomeView, ApiError> {
        let agent = self.memory_agent(caller, agent_ref).await?;
        let home = self.reader().read(|s| s.home.homes.get(&agent.id).cloned());
        let home = home.unwrap_or_else(|| AgentHome {
            agent_id: agent.id.clone(),
            company_id: agent.company_id.clone(),
            version: 0,
            bytes: 0,
            files: BTreeMap::new(),
            updated_at: agent.created_at,
            run_id: None,
        });
        Ok(HomeView {
            home,
            max_bytes: agent.home_max_bytes,
        })
    }

    /// A chunk's bytes, if the agent's home names it or the agent uploaded it.
    pub async fn home_chunk(
        &self,
        caller: &Caller,
        agent_ref: &str,
        hash: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let agent = self.memory_agent(caller, agent_ref).await?;
        let readable = self
            .reader()
            .read(|s| s.home.readable_by(&agent.company_id, &agent.id, hash));
        if !readable {
            return Err(ApiError::not_found("home chunk", hash));
        }
        self.reader()
            .home_chunk(&chunk_key(&agent.company_id, hash))
            .await?
            .ok_or_else(|| ApiError::not_found("home chunk", hash))
    }

    /// Stores chunks (base64) for the calling agent's run; returns their hashes in order.
    pub async fn put_home_chunks(
        &self,
        caller: &Caller,
        chunks: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        require_run(caller, "a home upload")?;
        let agent = self.memory_agent(caller, "me").await?;
        let command = Command::PutHomeChunks {
            agent_id: agent.id,
            chunks,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::HomeChunks(h) => h)
    }

    /// Saves the calling agent's home for its run, if it is still at `base_version`.
    pub async fn save_agent_home(
        &self,
        caller: &Caller,
        base_version: u64,
        files: BTreeMap<String, HomeFile>,
        deleted: Vec<String>,
    ) -> Result<HomeView, ApiError> {
        require_run(caller, "a home save")?;
        let agent = self.memory_agent(caller, "me").await?;
        let command = Command::SaveAgentHome {
            agent_id: agent.id,
            base_version,
            files,
            deleted,
        };
        let home =
            expect_outcome!(self.submit(caller, command).await?, Outcome::AgentHome(h) => h)?;
        Ok(HomeView {
            home,
            max_bytes: agent.home_max_bytes,
        })
    }
}
