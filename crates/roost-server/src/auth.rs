//! Bearer tokens: generation, hashing and resolving a request's caller.

use rand::RngCore;
use roost_core::{Actor, ActorKind, AgentStatus, CredentialKind};
use roost_store::StateReader;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

pub const ADMIN_TOKEN_PREFIX: &str = "rst_admin_";
pub const AGENT_KEY_PREFIX: &str = "rst_agent_";
/// A worker's own credential, made by the worker and bound to it by exchanging a join token
/// (`workers/identity.rs`); the worker crate has the same constant.
pub const WORKER_CREDENTIAL_PREFIX: &str = "rst_worker_";

/// A fresh random secret with a prefix that says what it is.
pub fn generate_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// Reads the admin token kept in `path`, or creates one there (0600, written atomically and
/// synced before its hash is committed, so a crash in between is repaired by the next start).
/// Returns the token and whether it is new.
pub fn load_or_create_token_file(
    path: &std::path::Path,
    prefix: &str,
) -> std::io::Result<(String, bool)> {
    use std::io::Write;
    if let Ok(text) = std::fs::read_to_string(path) {
        let token = text.trim().to_string();
        if token.starts_with(prefix) {
            return Ok((token, false));
        }
        return Err(std::io::Error::other(format!(
            "{} does not hold a Roost token ({prefix}...); remove it to create a new one",
            path.display()
        )));
    }
    let token = generate_token(prefix);
    let tmp = path.with_extension("tmp");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&tmp)?;
        writeln!(f, "{token}")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    Ok((token, true))
}

/// Only this hash of a token is ever stored or replicated.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Reads an `Idempotency-Key` (REST header or gRPC metadata, `source` names which in the
/// error): trimmed, 1 to 128 printable ASCII characters (spaces too), refused before anything
/// is proposed.
pub fn idempotency_key(raw: &[u8], source: &str) -> Result<String, ApiError> {
    let max = roost_core::limits::MAX_IDEMPOTENCY_KEY_LEN;
    let key = std::str::from_utf8(raw)
        .ok()
        .map(str::trim)
        .filter(|k| {
            !k.is_empty() && k.len() <= max && k.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{source} must be 1 to {max} printable ASCII characters; \
                 send a fresh random key (a UUID) for each new write"
            ))
        })?;
    Ok(key.to_string())
}

/// Who is calling, resolved from the bearer token and the run header.
#[derive(Clone, Debug)]
pub struct Caller {
    pub actor: Actor,
    /// The request's `Idempotency-Key`: a retried write with the same key is applied once.
    pub idempotency_key: Option<String>,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.actor.kind == ActorKind::User
    }

    pub fn agent_id(&self) -> Option<&str> {
        self.actor.agent_id()
    }

    /// Company scoping for reads: another company's objects are "not found".
    pub fn check_company(&self, company_id: &str, entity: &str, id: &str) -> Result<(), ApiError> {
        match &self.actor.company_id {
            Some(own) if own != company_id => Err(ApiError::not_found(entity, id)),
            _ => Ok(()),
        }
    }

    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                "this operation needs an administrator token",
            ))
        }
    }
}

/// Resolves `Authorization: Bearer <token>` (already stripped to the token) and an optional
/// run id into a caller.
pub fn authenticate(
    reader: &StateReader,
    token: Option<&str>,
    run_id: Option<&str>,
) -> Result<Caller, ApiError> {
    let token = token.ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
    let hash = hash_token(token);
    let run_id = run_id
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string);
    if run_id.as_ref().is_some_and(|r| r.len() > 64) {
        return Err(ApiError::bad_request("run id header is too long"));
    }
    reader.read(|state| {
        if let Some(run) = state.run_by_token_hash(&hash) {
            return run_caller(state, run, run_id);
        }
        let cred = state
            .credential_by_token_hash(&hash)
            .filter(|c| !c.revoked)
            .ok_or_else(|| ApiError::unauthorized("invalid or revoked token"))?;
        let actor = match cred.kind {
            CredentialKind::Admin => Actor {
                kind: ActorKind::User,
                id: cred.name.clone(),
                credential_id: Some(cred.id.clone()),
                run_id,
                company_id: None,
            },
            CredentialKind::AgentKey => {
                let agent = cred.agent_id.as_ref().and_then(|id| state.agents.get(id));
                let agent = agent_who_may_act(agent)?;
                Actor {
                    kind: ActorKind::Agent,
                    id: agent.id.clone(),
                    credential_id: Some(cred.id.clone()),
                    run_id,
                    company_id: Some(agent.company_id.clone()),
                }
            }
            // A join token only opens a worker connection; it is no key to the API.
            CredentialKind::WorkerJoin => {
                return Err(ApiError::unauthorized(
                    "a worker join token cannot call the API",
                ))
            }
            // Nor is a worker's credential.
            CredentialKind::Worker => {
                return Err(ApiError::unauthorized(
                    "a worker credential cannot call the API",
                ))
            }
        };
        Ok(Caller {
            actor,
            idempotency_key: None,
        })
    })
}

/// A run-scoped key acts as the run's agent, for that run only, while the run is live.
fn run_caller(
    state: &roost_core::State,
    run: &roost_core::Run,
    header_run: Option<String>,
) -> Result<Caller, ApiError> {
    if !run.status.is_live() {
        return Err(ApiError::unauthorized(format!(
            "the run this key belongs to is {}",
            run.status
        )));
    }
    if header_run.as_ref().is_some_and(|h| h != &run.id) {
        return Err(ApiError::forbidden(
            "a run-scoped key acts only for its own run",
        ));
    }
    let agent = agent_who_may_act(state.agents.get(&run.agent_id))?;
    Ok(Caller {
        actor: Actor {
            kind: ActorKind::Agent,
            id: agent.id.clone(),
            credential_id: Some(format!("run:{}", run.id)),
            run_id: Some(run.id.clone()),
            company_id: Some(agent.company_id.clone()),
        },
        idempotency_key: None,
    })
}

/// The agent a key belongs to, if that agent may act: a terminated agent's keys are dead, and
/// a hired agent's key works only once its hire is approved (as in Paperclip, where neither
/// authenticates).
fn agent_who_may_act(agent: Option<&roost_core::Agent>) -> Result<&roost_core::Agent, ApiError> {
    match agent {
        Some(a) if a.status == AgentStatus::PendingApproval => {
            Err(ApiError::unauthorized(format!(
                "agent {} is waiting for its hire to be approved; its key works once the \
             hire_agent approval is approved",
                a.id
            )))
        }
        Some(a) if a.status != AgentStatus::Terminated => Ok(a),
        _ => Err(ApiError::unauthorized("invalid or revoked token")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hash_to_hex_sha256() {
        let a = generate_token(ADMIN_TOKEN_PREFIX);
        let b = generate_token(ADMIN_TOKEN_PREFIX);
        assert_ne!(a, b);
        assert!(a.starts_with(ADMIN_TOKEN_PREFIX));
        let h = hash_token(&a);
        assert_eq!(h.len(), 64);
        assert_ne!(h, hash_token(&b));
        assert!(!h.contains(&a));
    }
}
