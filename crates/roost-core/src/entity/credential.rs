//! Credentials: bearer secrets (administrators', agents', workers' and join tokens) the state
//! machine knows only by their hashes.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

string_enum!(CredentialKind { Admin => "admin", AgentKey => "agent_key", WorkerJoin => "worker_join", Worker => "worker" });

/// A bearer secret, known to the state machine only by its SHA-256 hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub id: String,
    pub kind: CredentialKind,
    pub name: String,
    /// For agent keys: the agent; admin tokens are instance-wide.
    pub agent_id: Option<String>,
    pub company_id: Option<String>,
    /// Never returned by the API; see the server's key views.
    pub token_hash: String,
    pub revoked: bool,
    pub created_at: Timestamp,
    /// When it was revoked (`RevokeCredential`, or its agent's termination). The fields below
    /// are absent from rows written before they existed, hence the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// Join tokens: from this time on no worker registers with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Join tokens: how many distinct worker ids may register with it; none means any number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_uses: Option<u32>,
    /// Join tokens with `max_uses`: the worker ids it admitted, each bound to it for good.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worker_ids: Vec<String>,
    /// Worker credentials: the one worker id it registers as (`ExchangeJoinToken`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// Worker credentials: the join token it was exchanged for; revoking that token revokes
    /// what it admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_token_id: Option<String>,
}

impl Credential {
    /// A credential not revoked, bound to nothing; callers set the fields of their kind.
    pub fn new(
        id: impl Into<String>,
        kind: CredentialKind,
        name: impl Into<String>,
        token_hash: impl Into<String>,
        created_at: Timestamp,
    ) -> Credential {
        Credential {
            id: id.into(),
            kind,
            name: name.into(),
            agent_id: None,
            company_id: None,
            token_hash: token_hash.into(),
            revoked: false,
            created_at,
            revoked_at: None,
            expires_at: None,
            max_uses: None,
            worker_ids: Vec::new(),
            worker_id: None,
            join_token_id: None,
        }
    }
}
