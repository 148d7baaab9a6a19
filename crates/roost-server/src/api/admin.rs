//! Companies, agents and their keys; the bootstrap of a fresh node.

use std::collections::BTreeMap;

use roost_core::command::{AgentPatch, CompanyPatch};
use roost_core::{
    Actor, AdapterType, Agent, Command, Company, Credential, CredentialKind, HeartbeatPolicy,
    Outcome,
};
use roost_core::{DomainError, PauseReason};

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

/// The prefix Paperclip derives from a company's name: its first three letters, upper-cased
/// (`CMP` when it has none). `suffixed` adds `A`s until a prefix is free.
pub fn paperclip_prefix(name: &str) -> String {
    let letters: String = name
        .chars()
        .filter(char::is_ascii_alphabetic)
        .take(3)
        .collect::<String>()
        .to_ascii_uppercase();
    if letters.is_empty() {
        "CMP".into()
    } else {
        letters
    }
}

/// The `attempt`-th candidate (from 0): the base, then the base with 1, 2, ... `A`s. Bounded
/// by the 10 characters a prefix may have.
pub fn suffixed(base: &str, attempt: usize) -> Option<String> {
    let candidate = format!("{base}{}", "A".repeat(attempt));
    (candidate.len() <= 10).then_some(candidate)
}

/// How many suffixed prefixes a company creation tries before it gives up with the 409.
const PREFIX_ATTEMPTS: usize = 8;

impl Api {
    /// Creates a company whose prefix is derived from its name as Paperclip does, with `A`s
    /// added until it is free. Two concurrent creations may pick the same candidate; the one
    /// the state machine refuses tries the next.
    pub async fn create_company_derived(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<Company, ApiError> {
        let base = paperclip_prefix(name);
        self.barrier().await?;
        let mut attempt = 0;
        loop {
            let Some(prefix) = suffixed(&base, attempt) else {
                return Err(ApiError::Domain(DomainError::AlreadyExists {
                    entity: "issuePrefix".into(),
                    id: base,
                }));
            };
            attempt += 1;
            if self
                .reader()
                .read(|s| s.company_by_prefix(&prefix).is_some())
            {
                continue;
            }
            match self.create_company(caller, name, &prefix).await {
                Err(ApiError::Domain(DomainError::AlreadyExists { entity, .. }))
                    if entity == "issuePrefix" && attempt < PREFIX_ATTEMPTS => {}
                other => return other,
            }
        }
    }

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

    pub async fn update_company(
        &self,
        caller: &Caller,
        company_id: &str,
        patch: CompanyPatch,
    ) -> Result<Company, ApiError> {
        let command = Command::UpdateCompany {
            company_id: company_id.into(),
            patch,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Company(c) => c)
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

    /// Forgets the agent's saved sessions, all or one task's.
    pub async fn reset_agent_session(
        &self,
        caller: &Caller,
        agent_id: &str,
        task_key: Option<String>,
    ) -> Result<Agent, ApiError> {
        let command = Command::ResetAgentSession {
            agent_id: agent_id.into(),
            task_key,
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

    /// Paperclip's delete: terminates the agent and lets go of its work
    /// (`roost-core/src/rules/agent_delete.rs`).
    pub async fn delete_agent(&self, caller: &Caller, agent_id: &str) -> Result<Agent, ApiError> {
        let command = Command::DeleteAgent {
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

#[cfg(test)]
mod tests {
    use super::{paperclip_prefix, suffixed};

    #[test]
    fn prefixes_are_derived_as_paperclip_does() {
        assert_eq!(paperclip_prefix("Acme Robotics"), "ACM");
        assert_eq!(paperclip_prefix("a1 b2"), "AB");
        assert_eq!(paperclip_prefix("42 !!"), "CMP");
        assert_eq!(suffixed("ACM", 0).as_deref(), Some("ACM"));
        assert_eq!(suffixed("ACM", 2).as_deref(), Some("ACMAA"));
        assert_eq!(suffixed("ACM", 8), None);
    }
}
