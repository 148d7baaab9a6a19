//! An agent's config revisions (`/api/agents/{id}/config-revisions`), in the server's own type
//! (`roost_core::agent_revision`).

pub use roost_core::agent_revision::AgentConfigRevision;
use roost_core::Agent;
use serde_json::json;

use crate::{Result, RoostClient, API};

impl RoostClient {
    /// The agent's configuration changes, newest first (at most 100), secrets redacted.
    pub async fn agent_config_revisions(&self, agent_id: &str) -> Result<Vec<AgentConfigRevision>> {
        self.get(&[API, "agents", agent_id, "config-revisions"], &[])
            .await
    }

    /// One of the agent's config revisions.
    pub async fn agent_config_revision(
        &self,
        agent_id: &str,
        revision_id: &str,
    ) -> Result<AgentConfigRevision> {
        let path = [API, "agents", agent_id, "config-revisions", revision_id];
        self.get(&path, &[]).await
    }

    /// Puts back the configuration `revision_id` recorded, as a new update; answers the agent.
    pub async fn rollback_agent_config(&self, agent_id: &str, revision_id: &str) -> Result<Agent> {
        let path = [
            API,
            "agents",
            agent_id,
            "config-revisions",
            revision_id,
            "rollback",
        ];
        self.post(&path, &json!({})).await
    }
}
