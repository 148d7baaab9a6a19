//! Companies, agents and their keys; the bootstrap of a fresh node.

use std::collections::BTreeMap;

use roost_core::command::AgentPatch;
use roost_core::PauseReason;
use roost_core::{
    Actor, AdapterType, Agent, Command, Company, Credential, CredentialKind, HeartbeatPolicy,
    Outcome,
};

use super::views::agent_view;
use super::{expect_outcome, new_id, Api};
use crate::auth::{self, Caller};
use crate::error::ApiError;

/// Fields of a new agent.
#[derive(Clone, Debug)]
pub struct NewAgent {
    pub name: String,
    pub role: String,
    pub title: Option<String>,
    pub adapter_type: AdapterType,
    pub adapter_config: serde_json::Value,
    pub heartbeat: HeartbeatPolicy,
    pub placement_labels: BTreeMap<String, String>,
}

/// The issue prefix of a company created without one: the initials of its name, or its first
/// letters ("Acme Corp" → "AC", "roost" → "ROO"), or "ISS" when the name has no letters.
pub fn default_prefix(name: &str) -> String {
    let initials: String = name
        .split_whitespace()
        .filter_map(|word| word.chars().find(|c| c.is_ascii_alphabetic()))
        .take(4)
        .collect();
    let prefix = if initials.len() >= 2 {
        initials
    } else {
        name.chars()
            .filter(|c| c.is_ascii_alphabetic())
            .take(3)
            .collect()
    };
    if prefix.is_empty() {
        "ISS".into()
    } else {
        prefix.to_ascii_uppercase()
    }
}

impl Api {
    pub async fn create_company(
        &self,
        caller: &Caller,
        name: &str,
        prefix: &str,
    ) -> Result<Company, ApiError> {
        let command = Command::CreateCompany {
            id: new_id(),
            name: name.into(),
            issue_prefix: prefix.into(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Company(c) => c)
    }

    pub async fn list_companies(&self, caller: &Caller) -> Result<Vec<Company>, ApiError> {
        self.barrier().await?;
        let mut companies: Vec<Company> = self.reader().read(|s| {
            s.companies
                .values()
                .filter(|c| {
                    caller
                        .actor
                        .company_id
                        .as_ref()
                        .is_none_or(|own| own == &c.id)
                })
                .cloned()
                .collect()
        });
        companies.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.issue_prefix.cmp(&b.issue_prefix))
        });
        Ok(companies)
    }

    pub async fn get_company(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Company, ApiError> {
        self.barrier().await?;
        caller.check_company(company_id, "company", company_id)?;
        self.reader()
            .read(|s| s.companies.get(company_id).cloned())
            .ok_or_else(|| ApiError::not_found("company", company_id))
    }

    pub async fn create_agent(
        &self,
        caller: &Caller,
        company_id: &str,
        new: NewAgent,
    ) -> Result<Agent, ApiError> {
        let command = Command::CreateAgent {
            id: new_id(),
            company_id: company_id.into(),
            name: new.name,
            role: new.role,
            title: new.title,
            adapter_type: new.adapter_type,
            adapter_config: new.adapter_config,
            heartbeat: new.heartbeat,
            placement_labels: new.placement_labels,
        };
        self.agent_outcome(caller, command).await
    }

    /// Proposes a command answered by an agent, shown as `caller` may see it.
    async fn agent_outcome(&self, caller: &Caller, command: Command) -> Result<Agent, ApiError> {
        let agent = expect_outcome!(self.submit(caller, command).await?, Outcome::Agent(a) => a)?;
        Ok(agent_view(caller, agent))
    }

    pub async fn list_agents(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Agent>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut agents: Vec<Agent> = self.reader().read(|s| {
            s.agents
                .values()
                .filter(|a| a.company_id == company_id)
                .cloned()
                .collect()
        });
        agents.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.name.cmp(&b.name))
        });
        Ok(agents.into_iter().map(|a| agent_view(caller, a)).collect())
    }

    pub async fn get_agent(&self, caller: &Caller, agent_id: &str) -> Result<Agent, ApiError> {
        self.barrier().await?;
        let agent = self
            .reader()
            .read(|s| s.agents.get(agent_id).cloned())
            .ok_or_else(|| ApiError::not_found("agent", agent_id))?;
        caller.check_company(&agent.company_id, "agent", agent_id)?;
        Ok(agent_view(caller, agent))
    }

    /// The calling agent (`GET /api/agents/me`).
    pub async fn me(&self, caller: &Caller) -> Result<Agent, ApiError> {
        let id = caller
            .agent_id()
            .ok_or_else(|| ApiError::unauthorized("this endpoint needs an agent key"))?;
        self.get_agent(caller, id).await
    }

    pub async fn update_agent(
        &self,
        caller: &Caller,
        agent_id: &str,
        patch: AgentPatch,
    ) -> Result<Agent, ApiError> {
        let command = Command::UpdateAgent {
            agent_id: agent_id.into(),
            patch,
        };
        self.agent_outcome(caller, command).await
    }

    pub async fn pause_agent(
        &self,
        caller: &Caller,
        agent_id: &str,
        reason: PauseReason,
    ) -> Result<Agent, ApiError> {
        let command = Command::PauseAgent {
            agent_id: agent_id.into(),
            reason,
        };
        self.agent_outcome(caller, command).await
    }

    pub async fn resume_agent(&self, caller: &Caller, agent_id: &str) -> Result<Agent, ApiError> {
        let command = Command::ResumeAgent {
            agent_id: agent_id.into(),
        };
        self.agent_outcome(caller, command).await
    }

    pub async fn terminate_agent(
        &self,
        caller: &Caller,
        agent_id: &str,
    ) -> Result<Agent, ApiError> {
        let command = Command::TerminateAgent {
            agent_id: agent_id.into(),
        };
        self.agent_outcome(caller, command).await
    }

    /// Mints an API key for an agent. The secret is returned once and stored only as a hash.
    pub async fn create_agent_key(
        &self,
        caller: &Caller,
        agent_id: &str,
        name: &str,
    ) -> Result<(Credential, String), ApiError> {
        let token = auth::generate_token(auth::AGENT_KEY_PREFIX);
        let command = Command::CreateCredential {
            id: new_id(),
            kind: CredentialKind::AgentKey,
            name: name.into(),
            agent_id: Some(agent_id.into()),
            token_hash: auth::hash_token(&token),
        };
        let cred =
            expect_outcome!(self.submit(caller, command).await?, Outcome::Credential(c) => c)?;
        Ok((cred, token))
    }

    /// Makes sure an admin token with this hash exists (first start of `roost dev`, or a
    /// restart after a crash between writing the token file and committing its hash).
    pub async fn ensure_admin_token(&self, token: &str, name: &str) -> Result<(), ApiError> {
        self.ensure_token(token, CredentialKind::Admin, name).await
    }

    /// Makes sure an instance-wide token of `kind` (admin or worker join) with this secret's
    /// hash exists.
    pub async fn ensure_token(
        &self,
        token: &str,
        kind: CredentialKind,
        name: &str,
    ) -> Result<(), ApiError> {
        let hash = auth::hash_token(token);
        let known = self
            .reader()
            .read(|s| s.credential_by_token_hash(&hash).map(|c| c.revoked));
        if let Some(revoked) = known {
            // A revoked token stays revoked: registering it again would undo the revocation.
            if revoked {
                tracing::warn!(
                    name,
                    kind = %kind,
                    "the token file's token was revoked and is refused; remove the file and \
                     restart to mint a new one"
                );
            }
            return Ok(());
        }
        let system = Caller {
            actor: Actor::system(),
            idempotency_key: None,
        };
        let command = Command::CreateCredential {
            id: new_id(),
            kind,
            name: name.into(),
            agent_id: None,
            token_hash: hash,
        };
        self.submit(&system, command).await.map(|_| ())
    }

    /// Creates a company named `name` unless some company exists already.
    pub async fn ensure_default_company(
        &self,
        name: &str,
        prefix: &str,
    ) -> Result<Company, ApiError> {
        self.barrier().await?;
        if let Some(c) = self.reader().read(|s| s.companies.values().next().cloned()) {
            return Ok(c);
        }
        let system = Caller {
            actor: Actor::system(),
            idempotency_key: None,
        };
        self.create_company(&system, name, prefix).await
    }
}
