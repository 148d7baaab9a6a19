//! Who a registering worker is. A worker makes its own secret, the worker
//! credential, at its first start and keeps it in a private file; it sends it with every
//! `Register`. The first time, the cluster does not know it yet: the worker's join token
//! vouches for it, and the leader exchanges the join token for it once
//! (`Command::ExchangeJoinToken`, `roost-core/src/rules/credential.rs`), binding the credential
//! to the worker id. From then on the credential alone admits the worker, as that id only.
//!
//! The worker makes the secret, not the server, so an exchange whose answer is lost (a broken
//! session, a leader change) is simply repeated: the same credential again changes nothing.
//! Only the SHA-256 of a credential is replicated; neither it nor a join token is logged.

use roost_core::{Actor, ActorKind, Command, CredentialKind, Outcome};
use roost_proto::v1::Register;
use tonic::Status;
use tracing::info;

use super::Workers;
use crate::api::new_id;
use crate::auth::{hash_token, Caller, WORKER_CREDENTIAL_PREFIX};
use crate::error::ApiError;

/// A registering worker as authenticated: its caller, and the hash of a credential still to be
/// exchanged for its join token (first start).
pub(super) struct Admission {
    pub caller: Caller,
    pub exchange: Option<String>,
}

/// What the state knows of a credential, copied out of the read lock.
struct Known {
    id: String,
    name: String,
    kind: CredentialKind,
    revoked: bool,
    worker_id: Option<String>,
}

fn worker_caller(worker_id: &str, credential_id: String) -> Caller {
    Caller {
        actor: Actor {
            kind: ActorKind::Worker,
            id: worker_id.to_string(),
            credential_id: Some(credential_id),
            run_id: None,
            company_id: None,
        },
        idempotency_key: None,
    }
}

/// A worker credential is the prefix and 64 hex digits (32 random bytes).
fn well_formed(credential: &str) -> bool {
    credential
        .strip_prefix(WORKER_CREDENTIAL_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Workers {
    fn known(&self, hash: &str) -> Option<Known> {
        self.api.reader().read(|s| {
            s.credential_by_token_hash(hash).map(|c| Known {
                id: c.id.clone(),
                name: c.name.clone(),
                kind: c.kind,
                revoked: c.revoked,
                worker_id: c.worker_id.clone(),
            })
        })
    }

    /// Authenticates a `Register`: by its worker credential, or, while the cluster does not
    /// know that credential, by its join token (then the credential is to be exchanged).
    pub(super) async fn admit(&self, register: &Register) -> Result<Admission, Status> {
        let worker_id = register.worker_id.as_str();
        if worker_id.is_empty() || worker_id.len() > 64 {
            return Err(ApiError::bad_request("worker_id must be 1-64 characters").into());
        }
        if register.worker_credential.is_empty() {
            return Err(ApiError::bad_request(
                "this worker sent no worker credential: a join token is exchanged once for a \
                 credential the worker keeps; upgrade the worker",
            )
            .into());
        }
        if !well_formed(&register.worker_credential) {
            return Err(ApiError::bad_request(format!(
                "worker_credential must be {WORKER_CREDENTIAL_PREFIX} followed by 64 hex digits"
            ))
            .into());
        }
        let hash = hash_token(&register.worker_credential);
        let mut known = self.known(&hash);
        if known.is_none() {
            // Exchanged through the leader a moment ago: this node may not have applied it.
            self.api.barrier().await?;
            known = self.known(&hash);
        }
        match known {
            Some(c) if c.kind == CredentialKind::Worker => {
                if c.revoked {
                    return Err(ApiError::unauthorized(format!(
                        "the worker credential of worker {} ({}) was revoked (roost worker \
                         revoke, or its join token was revoked); remove the worker's credential \
                         file and start it with a new join token",
                        c.worker_id.as_deref().unwrap_or("?"),
                        c.id
                    ))
                    .into());
                }
                if c.worker_id.as_deref() != Some(worker_id) {
                    return Err(ApiError::forbidden(format!(
                        "this worker credential ({}) is bound to worker {}; it cannot register \
                         as worker {worker_id}",
                        c.id,
                        c.worker_id.as_deref().unwrap_or("?")
                    ))
                    .into());
                }
                Ok(Admission {
                    caller: worker_caller(worker_id, c.id),
                    exchange: None,
                })
            }
            Some(_) => Err(ApiError::unauthorized("invalid worker credential").into()),
            None => {
                let token = self.join_token(worker_id, &register.join_token)?;
                self.unclaimed(worker_id)?;
                Ok(Admission {
                    caller: worker_caller(worker_id, token),
                    exchange: Some(hash),
                })
            }
        }
    }

    /// The id of the join token a first registration brings (not revoked, as far as this node
    /// knows; apply checks again, with expiry and use count).
    fn join_token(&self, worker_id: &str, join_token: &str) -> Result<String, Status> {
        if join_token.is_empty() {
            return Err(ApiError::unauthorized(format!(
                "the cluster does not know this worker's credential and the worker brought no \
                 join token: start worker {worker_id} once with a join token (roost worker \
                 token create)"
            ))
            .into());
        }
        let hash = hash_token(join_token);
        let found = self
            .known(&hash)
            .filter(|c| c.kind == CredentialKind::WorkerJoin);
        match found {
            None => Err(ApiError::unauthorized("invalid worker join token").into()),
            // Its holder may learn which token it was: they hold its secret.
            Some(c) if c.revoked => Err(ApiError::unauthorized(format!(
                "worker join token {} ({}) was revoked; create another one (roost worker \
                 token create)",
                c.name, c.id
            ))
            .into()),
            Some(c) => Ok(c.id),
        }
    }

    /// Refuses, before anything is proposed, an exchange for a worker id that has a credential
    /// (apply refuses it too): a second machine retrying under a taken id costs no log entry.
    fn unclaimed(&self, worker_id: &str) -> Result<(), Status> {
        let taken = self.api.reader().read(|s| {
            s.credentials
                .values()
                .find(|c| {
                    c.kind == CredentialKind::Worker
                        && !c.revoked
                        && c.worker_id.as_deref() == Some(worker_id)
                })
                .map(|c| c.id.clone())
        });
        match taken {
            None => Ok(()),
            Some(id) => Err(ApiError::forbidden(format!(
                "worker {worker_id} already has a worker credential ({id}): it registers with \
                 that credential, and a join token is exchanged only once. If the worker lost \
                 its credential file, revoke the worker (roost worker revoke {worker_id}) and \
                 start it with a new join token"
            ))
            .into()),
        }
    }

    /// Exchanges the join token `admission` authenticated with for the worker's credential;
    /// returns the caller the session goes on as (the worker credential).
    pub(super) async fn exchange(&self, admission: Admission) -> Result<Caller, Status> {
        let Some(token_hash) = admission.exchange else {
            return Ok(admission.caller);
        };
        let worker_id = admission.caller.actor.id.clone();
        let command = Command::ExchangeJoinToken {
            worker_id: worker_id.clone(),
            credential_id: new_id(),
            token_hash,
        };
        let outcome = self.api.submit(&admission.caller, command).await?;
        let Outcome::Credential(credential) = outcome else {
            return Err(ApiError::internal("the exchange answered with no credential").into());
        };
        info!(
            worker_id,
            credential_id = %credential.id,
            "join token exchanged for a worker credential"
        );
        Ok(worker_caller(&worker_id, credential.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_credential_is_the_prefix_and_64_hex_digits() {
        let good = format!("{WORKER_CREDENTIAL_PREFIX}{}", "ab".repeat(32));
        assert!(well_formed(&good));
        for bad in [
            String::new(),
            "ab".repeat(32),
            format!("{WORKER_CREDENTIAL_PREFIX}{}", "ab".repeat(31)),
            format!("{WORKER_CREDENTIAL_PREFIX}{}", "zz".repeat(32)),
            format!("rst_admin_{}", "ab".repeat(32)),
        ] {
            assert!(!well_formed(&bad), "{bad}");
        }
    }
}
