//! Credentials' lifecycle: named admin tokens, an agent's keys, worker join tokens: listed and
//! revoked (administrators only). Lists never carry a secret or its hash.

pub use roost_core::views::{CreatedAdminToken, CredentialView};
use serde::Serialize;

use crate::{Result, RoostClient, API};

#[derive(Serialize)]
struct NameBody<'a> {
    name: &'a str,
}

impl RoostClient {
    /// Mints a named admin token; its secret is shown once.
    pub async fn create_admin_token(&self, name: &str) -> Result<CreatedAdminToken> {
        self.post(&[API, "admin", "tokens"], &NameBody { name })
            .await
    }

    pub async fn list_admin_tokens(&self) -> Result<Vec<CredentialView>> {
        self.get(&[API, "admin", "tokens"], &[]).await
    }

    /// Refused (`409`) for the last admin token that is not revoked.
    pub async fn revoke_admin_token(&self, id: &str) -> Result<CredentialView> {
        self.delete(&[API, "admin", "tokens", id]).await
    }

    pub async fn list_agent_keys(&self, agent_id: &str) -> Result<Vec<CredentialView>> {
        self.get(&[API, "agents", agent_id, "keys"], &[]).await
    }

    /// Paperclip's `DELETE /api/agents/{id}/keys/{keyId}`, answered `{"ok": true}`.
    pub async fn revoke_agent_key(&self, agent_id: &str, key_id: &str) -> Result<()> {
        let _: serde_json::Value = self
            .delete(&[API, "agents", agent_id, "keys", key_id])
            .await?;
        Ok(())
    }

    pub async fn list_join_tokens(&self) -> Result<Vec<CredentialView>> {
        self.get(&[API, "workers", "join-tokens"], &[]).await
    }

    pub async fn revoke_join_token(&self, id: &str) -> Result<CredentialView> {
        self.delete(&[API, "workers", "join-tokens", id]).await
    }

    /// Every worker's credential (no secrets): the worker it is bound to, revoked or not.
    pub async fn list_worker_credentials(&self) -> Result<Vec<CredentialView>> {
        self.get(&[API, "workers", "credentials"], &[]).await
    }

    /// Revokes worker `worker_id` (its credential): its session ends and its runs are handled
    /// as a lost worker's.
    pub async fn revoke_worker(&self, worker_id: &str) -> Result<CredentialView> {
        self.delete(&[API, "workers", worker_id]).await
    }
}
