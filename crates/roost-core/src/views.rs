//! The JSON shapes of credentials as the API shows them, shared by the server that writes them
//! and the client that reads them: what a credential is, never what it opens.

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
