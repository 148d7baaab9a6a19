//! Credentials' lifecycle: join tokens with an expiry and a bounded number of workers, the
//! revocation of any credential, and what a join token lets a registering worker do.
//!
//! A credential is never deleted: a revoked one stays, flagged, so its hash keeps being refused
//! on every replica that applied the revocation (`roost-server/src/auth.rs` filters `revoked`),
//! and a token file holding it is not registered again on the next start (`Api::ensure_token`).
//! Activity entries name the credential's id, kind and name, never its secret or hash.

use serde_json::json;

use super::{agent, Ctx};
use crate::command::{ActorKind, Outcome};
use crate::entity::{Credential, CredentialKind};
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};
use crate::time::Timestamp;

/// The longest lifetime a join token gets: ten years.
pub const MAX_JOIN_TOKEN_TTL_SECS: u64 = 10 * 366 * 24 * 3600;
/// The most workers a bounded join token admits: each admitted id is kept in its row.
pub const MAX_JOIN_TOKEN_USES: u32 = 1024;

/// The bounds of a `CreateJoinToken` (`limits::check`).
pub(crate) fn check_join_token(
    name: &str,
    ttl_secs: Option<u64>,
    max_uses: Option<u32>,
) -> Result<(), DomainError> {
    crate::limits::chars("name", name, crate::limits::MAX_NAME_CHARS)?;
    if ttl_secs.is_some_and(|t| t == 0 || t > MAX_JOIN_TOKEN_TTL_SECS) {
        return Err(DomainError::invalid(
            "ttlSecs",
            format!("must be between 1 and {MAX_JOIN_TOKEN_TTL_SECS} seconds"),
        ));
    }
    if max_uses.is_some_and(|u| u == 0 || u > MAX_JOIN_TOKEN_USES) {
        return Err(DomainError::invalid(
            "maxUses",
            format!("must be between 1 and {MAX_JOIN_TOKEN_USES}"),
        ));
    }
    Ok(())
}

/// What the API and messages call a credential of `kind`.
fn entity_name(kind: CredentialKind) -> &'static str {
    match kind {
        CredentialKind::Admin => "admin token",
        CredentialKind::AgentKey => "agent key",
        CredentialKind::WorkerJoin => "join token",
    }
}

/// A join token: a credential of kind `worker_join` with its expiry (from the envelope's time)
/// and use count.
pub(crate) fn create_join_token(
    ctx: &Ctx<'_>,
    id: &str,
    name: &str,
    token_hash: &str,
    ttl_secs: Option<u64>,
    max_uses: Option<u32>,
) -> Result<Decision, DomainError> {
    check_join_token(name, ttl_secs, max_uses)?;
    let mut decision =
        agent::create_credential(ctx, id, CredentialKind::WorkerJoin, name, None, token_hash)?;
    // At most ten years of milliseconds: no overflow.
    let expires_at = ttl_secs.map(|s| Timestamp(ctx.now().0.saturating_add(s as i64 * 1000)));
    let limit = |c: &mut Credential| {
        c.expires_at = expires_at;
        c.max_uses = max_uses;
    };
    if let Outcome::Credential(c) = &mut decision.outcome {
        limit(c);
    }
    for change in &mut decision.changes {
        if let Change::Credential(c) = change {
            limit(c);
        }
    }
    if let Some(details) = decision.note.details.as_object_mut() {
        details.insert("expiresAt".into(), json!(expires_at));
        details.insert("maxUses".into(), json!(max_uses));
    }
    Ok(decision)
}

/// Revokes a credential. The last admin token that is not revoked stays: revoking it would
/// leave the cluster without an administrator.
pub(crate) fn revoke(
    ctx: &Ctx<'_>,
    id: &str,
    kind: CredentialKind,
    agent_id: Option<&str>,
) -> Result<Decision, DomainError> {
    ctx.require_admin("revoke credentials")?;
    let entity = entity_name(kind);
    let cred = ctx
        .state
        .credentials
        .get(id)
        .filter(|c| c.kind == kind)
        .filter(|c| agent_id.is_none_or(|a| c.agent_id.as_deref() == Some(a)))
        .ok_or_else(|| DomainError::not_found(entity, id))?;
    if let Some(company) = &cred.company_id {
        ctx.require_company(company, entity, id)?;
    }
    if cred.revoked {
        return Err(DomainError::conflict(format!(
            "{entity} {id} is already revoked"
        )));
    }
    let another_admin = ctx
        .state
        .credentials
        .values()
        .any(|c| c.kind == CredentialKind::Admin && !c.revoked && c.id != cred.id);
    if kind == CredentialKind::Admin && !another_admin {
        return Err(DomainError::conflict(format!(
            "admin token {id} is the last admin token that is not revoked, and revoking it \
             would leave no administrator; create another one first (roost token create)"
        )));
    }
    let mut revoked = cred.clone();
    revoked.revoked = true;
    revoked.revoked_at = Some(ctx.now());
    let note = ActivityNote {
        company_id: cred.company_id.clone(),
        entity_type: "credential",
        entity_id: id.into(),
        details: json!({ "kind": kind, "name": cred.name, "agentId": cred.agent_id }),
    };
    Ok(Decision {
        outcome: Outcome::Credential(revoked.clone()),
        changes: vec![Change::Credential(revoked)],
        note,
    })
}

/// Checks the join token a worker registers with: not revoked, not expired, and either
/// unbounded or already bound to this worker id or with a use left, which binds the id to it
/// (the row returned). A worker id bound to one join token cannot register with another.
/// Registrations made by an administrator carry no join token and pass.
pub(crate) fn admit_worker(ctx: &Ctx<'_>, worker_id: &str) -> Result<Option<Change>, DomainError> {
    if ctx.actor.kind != ActorKind::Worker {
        return Ok(None);
    }
    let cred = ctx
        .actor
        .credential_id
        .as_ref()
        .and_then(|id| ctx.state.credentials.get(id));
    if let Some(other) = ctx.state.credentials.values().find(|c| {
        c.kind == CredentialKind::WorkerJoin
            && c.worker_ids.iter().any(|w| w == worker_id)
            && cred.is_none_or(|mine| mine.id != c.id)
    }) {
        return Err(DomainError::forbidden(format!(
            "worker id {worker_id} is bound to join token {} ({}); it registers only with that token",
            other.name, other.id
        )));
    }
    let Some(cred) = cred else {
        return Ok(None);
    };
    if cred.kind != CredentialKind::WorkerJoin {
        return Err(DomainError::forbidden(
            "a worker registers only with a join token",
        ));
    }
    if cred.revoked {
        return Err(DomainError::forbidden(format!(
            "join token {} ({}) is revoked; create another one (roost worker token create)",
            cred.name, cred.id
        )));
    }
    if let Some(at) = cred.expires_at.filter(|at| ctx.now() >= *at) {
        return Err(DomainError::forbidden(format!(
            "join token {} ({}) expired at {at}; create another one (roost worker token create)",
            cred.name, cred.id
        )));
    }
    let Some(max) = cred.max_uses else {
        return Ok(None);
    };
    if cred.worker_ids.iter().any(|w| w == worker_id) {
        return Ok(None);
    }
    if cred.worker_ids.len() >= max as usize {
        return Err(DomainError::forbidden(format!(
            "join token {} ({}) is bound to worker {} (its {max} use(s) are taken), so worker \
             {worker_id} cannot register with it; create another join token for that worker",
            cred.name,
            cred.id,
            cred.worker_ids.join(", ")
        )));
    }
    let mut bound = cred.clone();
    bound.worker_ids.push(worker_id.to_string());
    Ok(Some(Change::Credential(bound)))
}

#[cfg(test)]
#[path = "credential_tests.rs"]
mod tests;
