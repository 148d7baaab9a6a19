//! An agent's config revisions (`roost_core::agent_revision`): read from `state.db`, rolled back
//! by an update that applies one's `afterConfig`. An administrator's, as the updates they record.

use roost_core::agent_revision::{AgentConfig, AgentConfigRevision};
use roost_core::error::DomainError;
use roost_core::Agent;

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    /// The agent's id, and the index memory had applied when it was read.
    async fn revised_agent(
        &self,
        caller: &Caller,
        agent_id: &str,
    ) -> Result<(String, u64), ApiError> {
        caller.require_admin()?;
        self.barrier().await?;
        let (agent, seen_at) = self.reader().read(|s| {
            let agent = s
                .agents
                .get(agent_id)
                .map(|a| (a.id.clone(), a.company_id.clone()));
            (agent, s.applied_index)
        });
        let (id, company_id) = agent.ok_or_else(|| ApiError::not_found("agent", agent_id))?;
        caller.check_company(&company_id, "agent", agent_id)?;
        Ok((id, seen_at))
    }

    /// The agent's newest config revisions, newest first.
    pub async fn agent_config_revisions(
        &self,
        caller: &Caller,
        agent_id: &str,
    ) -> Result<Vec<AgentConfigRevision>, ApiError> {
        let (id, seen_at) = self.revised_agent(caller, agent_id).await?;
        self.rows_written(seen_at).await?;
        Ok(self.reader().agent_config_revisions(&id).await?)
    }

    /// One of the agent's config revisions.
    pub async fn agent_config_revision(
        &self,
        caller: &Caller,
        agent_id: &str,
        revision_id: &str,
    ) -> Result<AgentConfigRevision, ApiError> {
        let (id, seen_at) = self.revised_agent(caller, agent_id).await?;
        self.rows_written(seen_at).await?;
        self.reader()
            .agent_config_revision(revision_id)
            .await?
            .filter(|r| r.agent_id == id)
            .ok_or_else(|| ApiError::not_found("config revision", revision_id))
    }

    /// Puts back the configuration revision `revision_id` recorded after its change: a new
    /// update, which records a revision of its own (`source` `rollback`).
    pub async fn rollback_agent_config(
        &self,
        caller: &Caller,
        agent_id: &str,
        revision_id: &str,
    ) -> Result<Agent, ApiError> {
        let revision = self
            .agent_config_revision(caller, agent_id, revision_id)
            .await?;
        let agent = self
            .reader()
            .read(|s| s.agents.get(&revision.agent_id).cloned())
            .ok_or_else(|| ApiError::not_found("agent", agent_id))?;
        let held = agent.adapter_config.get("env");
        if let Some(missing) = revision
            .after_config
            .redacted_secrets()
            .find(|k| held.and_then(|env| env.get(k)).is_none())
        {
            return Err(ApiError::Domain(DomainError::conflict(format!(
                "config revision {} uses the secret env {missing}, which agent {} no longer holds: \
                 set it with PATCH /api/agents/{}, then roll back",
                revision.id, agent.id, agent.id
            ))));
        }
        let patch = revision
            .after_config
            .into_patch(&AgentConfig::of(&agent), &revision.id);
        self.update_agent(caller, agent_id, patch).await
    }
}
