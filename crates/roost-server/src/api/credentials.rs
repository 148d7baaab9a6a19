//! Credentials with a lifecycle: named admin tokens, agent keys and worker join tokens, listed
//! and revoked by an administrator.
//!
//! A secret is shown once, in the answer that created it; every other answer is a
//! [`CredentialView`], which has no field for the secret or its hash. Revocation is the
//! replicated `RevokeCredential` (`roost-core/src/rules/credential.rs`): each node refuses the
//! token once it has applied it (`auth::authenticate` filters `revoked`).

pub use roost_core::views::CredentialView;
use roost_core::{Command, Credential, CredentialKind, Outcome};

use super::workers::WORKER_JOIN_PREFIX;
use super::{expect_outcome, new_id, Api};
use crate::auth::{self, Caller};
use crate::error::ApiError;

/// What a new join token is limited to.
#[derive(Clone, Copy, Debug, Default)]
pub struct JoinTokenLimits {
    /// Seconds from its creation until it admits no more workers.
    pub ttl_secs: Option<u64>,
    /// How many distinct worker ids it admits, each bound to it.
    pub max_uses: Option<u32>,
}

impl Api {
    /// Mints a named admin token. The secret is returned once and stored only as a hash.
    pub async fn create_admin_token(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<(Credential, String), ApiError> {
        caller.require_admin()?;
        let token = auth::generate_token(auth::ADMIN_TOKEN_PREFIX);
        let command = Command::CreateCredential {
            id: new_id(),
            kind: CredentialKind::Admin,
            name: name.into(),
            agent_id: None,
            token_hash: auth::hash_token(&token),
        };
        let cred =
            expect_outcome!(self.submit(caller, command).await?, Outcome::Credential(c) => c)?;
        Ok((cred, token))
    }

    /// Mints a worker join token, limited as asked. Without limits it is the command older
    /// nodes know (`CreateCredential`), so a token made during a rolling upgrade applies
    /// everywhere.
    pub async fn create_join_token(
        &self,
        caller: &Caller,
        name: &str,
        limits: JoinTokenLimits,
    ) -> Result<(Credential, String), ApiError> {
        // Refused here too, so an agent's attempt costs no Raft entry.
        caller.require_admin()?;
        let token = auth::generate_token(WORKER_JOIN_PREFIX);
        let token_hash = auth::hash_token(&token);
        let command = if limits.ttl_secs.is_none() && limits.max_uses.is_none() {
            Command::CreateCredential {
                id: new_id(),
                kind: CredentialKind::WorkerJoin,
                name: name.into(),
                agent_id: None,
                token_hash,
            }
        } else {
            Command::CreateJoinToken {
                id: new_id(),
                name: name.into(),
                token_hash,
                ttl_secs: limits.ttl_secs,
                max_uses: limits.max_uses,
            }
        };
        let cred =
            expect_outcome!(self.submit(caller, command).await?, Outcome::Credential(c) => c)?;
        Ok((cred, token))
    }

    /// Every credential of `kind` (for agent keys, of `agent_id`), oldest first.
    pub async fn list_credentials(
        &self,
        caller: &Caller,
        kind: CredentialKind,
        agent_id: Option<&str>,
    ) -> Result<Vec<CredentialView>, ApiError> {
        caller.require_admin()?;
        if let Some(agent_id) = agent_id {
            // The agent must exist (and be visible): an unknown agent is a 404, not `[]`.
            self.get_agent(caller, agent_id).await?;
        } else {
            self.barrier().await?;
        }
        let mut creds: Vec<Credential> = self.reader().read(|s| {
            s.credentials
                .values()
                .filter(|c| c.kind == kind)
                .filter(|c| agent_id.is_none_or(|a| c.agent_id.as_deref() == Some(a)))
                .cloned()
                .collect()
        });
        creds.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(creds.into_iter().map(CredentialView::from).collect())
    }

    /// Revokes a credential of `kind` (for an agent key, one of `agent_id`'s). Refused with
    /// `409` if it is already revoked or is the last admin token that is not. For a worker
    /// credential `id` may also name the worker ([`Api::revoke_worker`]).
    pub async fn revoke_credential(
        &self,
        caller: &Caller,
        kind: CredentialKind,
        id: &str,
        agent_id: Option<&str>,
    ) -> Result<CredentialView, ApiError> {
        caller.require_admin()?;
        if kind == CredentialKind::Worker && !self.reader().read(|s| s.credentials.contains_key(id))
        {
            return self.revoke_worker(caller, id).await;
        }
        let command = Command::RevokeCredential {
            id: id.into(),
            kind,
            agent_id: agent_id.map(str::to_string),
        };
        let cred =
            expect_outcome!(self.submit(caller, command).await?, Outcome::Credential(c) => c)?;
        Ok(cred.into())
    }
}

impl Api {
    /// Revokes worker `worker_id`: its credential that is not revoked. Every node then refuses
    /// it; the leader ends its connection at its next lease renewal and, its lease unrenewed, declares
    /// it lost like any silent worker (`workers/connection.rs`): its runs become `lost`, each
    /// retried once. `404` for an unknown worker, `409` if nothing is left to revoke.
    pub async fn revoke_worker(
        &self,
        caller: &Caller,
        worker_id: &str,
    ) -> Result<CredentialView, ApiError> {
        caller.require_admin()?;
        // The newest credential: one exchanged through another node a moment ago counts.
        self.barrier().await?;
        let (live, any, registered) = self.reader().read(|s| {
            let all: Vec<&Credential> = s
                .credentials
                .values()
                .filter(|c| {
                    c.kind == CredentialKind::Worker && c.worker_id.as_deref() == Some(worker_id)
                })
                .collect();
            let live = all.iter().find(|c| !c.revoked).map(|c| c.id.clone());
            (live, !all.is_empty(), s.workers.contains_key(worker_id))
        });
        let id = match (live, any, registered) {
            (Some(id), _, _) => id,
            (None, true, _) => {
                return Err(ApiError::Domain(roost_core::DomainError::conflict(
                    format!("worker {worker_id}'s credential is already revoked"),
                )))
            }
            (None, false, true) => {
                return Err(ApiError::Domain(roost_core::DomainError::conflict(
                    format!(
                        "worker {worker_id} has no worker credential (it registered with a join \
                     token before workers had credentials); revoke that join token instead \
                     (roost worker token revoke)"
                    ),
                )))
            }
            (None, false, false) => return Err(ApiError::not_found("worker", worker_id)),
        };
        let command = Command::RevokeCredential {
            id,
            kind: CredentialKind::Worker,
            agent_id: None,
        };
        let cred =
            expect_outcome!(self.submit(caller, command).await?, Outcome::Credential(c) => c)?;
        Ok(cred.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_core::Timestamp;

    #[test]
    fn a_view_has_no_field_for_the_hash() {
        let cred = Credential {
            id: "k1".into(),
            kind: CredentialKind::AgentKey,
            name: "ci".into(),
            agent_id: Some("a1".into()),
            company_id: Some("c1".into()),
            token_hash: "ab".repeat(32),
            revoked: true,
            created_at: Timestamp(1),
            revoked_at: Some(Timestamp(2)),
            expires_at: None,
            max_uses: None,
            worker_ids: Vec::new(),
            worker_id: None,
            join_token_id: None,
        };
        let json = serde_json::to_value(CredentialView::from(cred)).unwrap();
        let text = json.to_string();
        assert!(!text.contains(&"ab".repeat(32)), "{text}");
        assert_eq!(
            json["revokedAt"],
            serde_json::json!("1970-01-01T00:00:00.002Z")
        );
        assert_eq!(json["agentId"], "a1");
        assert!(json.get("tokenHash").is_none());
    }
}
