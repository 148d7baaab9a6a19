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
        CredentialKind::Worker => "worker credential",
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
    let revoke = |c: &Credential| {
        let mut revoked = c.clone();
        revoked.revoked = true;
        revoked.revoked_at = Some(ctx.now());
        revoked
    };
    let revoked = revoke(cred);
    let mut changes = vec![Change::Credential(revoked.clone())];
    // A join token takes with it the worker credentials it was exchanged for: a leaked token
    // revoked also shuts out the workers its holder enrolled.
    let mut worker_credentials = Vec::new();
    if kind == CredentialKind::WorkerJoin {
        for c in ctx.state.credentials.values().filter(|c| {
            c.kind == CredentialKind::Worker && !c.revoked && c.join_token_id.as_deref() == Some(id)
        }) {
            worker_credentials.push(c.id.clone());
            changes.push(Change::Credential(revoke(c)));
        }
    }
    let mut details = json!({ "kind": kind, "name": cred.name, "agentId": cred.agent_id });
    if let (Some(d), Some(worker_id)) = (details.as_object_mut(), &cred.worker_id) {
        d.insert("workerId".into(), json!(worker_id));
    }
    if let (Some(d), false) = (details.as_object_mut(), worker_credentials.is_empty()) {
        d.insert("revokedWorkerCredentials".into(), json!(worker_credentials));
    }
    let note = ActivityNote {
        company_id: cred.company_id.clone(),
        entity_type: "credential",
        entity_id: id.into(),
        details,
    };
    Ok(Decision {
        outcome: Outcome::Credential(revoked),
        changes,
        note,
    })
}

/// Refuses a join token that is revoked or expired (at the envelope's time).
fn usable_join_token(ctx: &Ctx<'_>, cred: &Credential) -> Result<(), DomainError> {
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
    Ok(())
}

/// The refusal of a bounded join token whose uses are all taken by other worker ids.
fn uses_taken(cred: &Credential, max: u32, worker_id: &str) -> DomainError {
    DomainError::forbidden(format!(
        "join token {} ({}) is bound to worker {} (its {max} use(s) are taken), so worker \
         {worker_id} cannot register with it; create another join token for that worker",
        cred.name,
        cred.id,
        cred.worker_ids.join(", ")
    ))
}

/// A worker id bound to a join token before worker credentials existed (`worker_ids` of a
/// bounded token), other than `except`: it registers only with that token.
fn bound_elsewhere<'a>(
    ctx: &'a Ctx<'_>,
    worker_id: &str,
    except: Option<&str>,
) -> Option<&'a Credential> {
    ctx.state.credentials.values().find(|c| {
        c.kind == CredentialKind::WorkerJoin
            && c.worker_ids.iter().any(|w| w == worker_id)
            && except.is_none_or(|e| e != c.id)
    })
}

/// A worker exchanges the join token it authenticated with for a credential of its own,
/// bound to its id. Once per join token and worker id; a bounded token spends one use per
/// worker id. Refused while the worker id has a credential that is not revoked (a second
/// worker cannot take the id), unless it is this very credential (a retried exchange).
pub(crate) fn exchange_join_token(
    ctx: &Ctx<'_>,
    worker_id: &str,
    credential_id: &str,
    token_hash: &str,
) -> Result<Decision, DomainError> {
    super::require_id("workerId", worker_id)?;
    super::require_id("credentialId", credential_id)?;
    if token_hash.len() != 64 || !token_hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(DomainError::invalid(
            "tokenHash",
            "must be a hex SHA-256 digest",
        ));
    }
    if ctx.actor.kind != ActorKind::Worker || ctx.actor.id != worker_id {
        return Err(DomainError::forbidden(
            "only the worker itself exchanges a join token for its credential",
        ));
    }
    let token = ctx
        .actor
        .credential_id
        .as_ref()
        .and_then(|id| ctx.state.credentials.get(id))
        .filter(|c| c.kind == CredentialKind::WorkerJoin)
        .ok_or_else(|| {
            DomainError::forbidden("a worker credential is exchanged only for a join token")
        })?;
    usable_join_token(ctx, token)?;
    let mut theirs = ctx
        .state
        .credentials
        .values()
        .filter(|c| c.kind == CredentialKind::Worker && c.worker_id.as_deref() == Some(worker_id))
        .peekable();
    let had_one = theirs.peek().is_some();
    let mut from_this_token = false;
    for c in theirs {
        if !c.revoked && c.token_hash == token_hash {
            // The same exchange again: its answer was lost on the way. Nothing changes.
            return Ok(Decision {
                outcome: Outcome::Credential(c.clone()),
                changes: Vec::new(),
                note: exchange_note(c, token),
            });
        }
        if !c.revoked {
            return Err(DomainError::forbidden(format!(
                "worker {worker_id} already has a worker credential ({}): it registers with \
                 that credential, and a join token is exchanged only once. If the worker lost \
                 its credential file, revoke the worker (roost worker revoke {worker_id}) and \
                 start it with a new join token",
                c.id
            )));
        }
        from_this_token |= c.join_token_id.as_deref() == Some(token.id.as_str());
    }
    if from_this_token {
        return Err(DomainError::forbidden(format!(
            "join token {} ({}) was already exchanged for worker {worker_id}, whose credential \
             was revoked; start the worker with a new join token",
            token.name, token.id
        )));
    }
    if !had_one {
        if let Some(other) = bound_elsewhere(ctx, worker_id, Some(&token.id)) {
            return Err(DomainError::forbidden(format!(
                "worker id {worker_id} is bound to join token {} ({}); it registers only with \
                 that token",
                other.name, other.id
            )));
        }
    }
    let mut changes = Vec::new();
    if let Some(max) = token.max_uses {
        if !token.worker_ids.iter().any(|w| w == worker_id) {
            if token.worker_ids.len() >= max as usize {
                return Err(uses_taken(token, max, worker_id));
            }
            let mut bound = token.clone();
            bound.worker_ids.push(worker_id.to_string());
            changes.push(Change::Credential(bound));
        }
    }
    if ctx.state.credentials.contains_key(credential_id)
        || ctx.state.credential_by_token_hash(token_hash).is_some()
    {
        return Err(DomainError::AlreadyExists {
            entity: "credential".into(),
            id: credential_id.into(),
        });
    }
    let credential = Credential {
        worker_id: Some(worker_id.into()),
        join_token_id: Some(token.id.clone()),
        ..Credential::new(
            credential_id,
            CredentialKind::Worker,
            format!("worker {worker_id}"),
            token_hash,
            ctx.now(),
        )
    };
    changes.push(Change::Credential(credential.clone()));
    Ok(Decision {
        note: exchange_note(&credential, token),
        outcome: Outcome::Credential(credential),
        changes,
    })
}

fn exchange_note(credential: &Credential, token: &Credential) -> ActivityNote {
    ActivityNote {
        company_id: None,
        entity_type: "credential",
        entity_id: credential.id.clone(),
        details: json!({
            "kind": CredentialKind::Worker,
            "name": credential.name,
            "workerId": credential.worker_id,
            "joinTokenId": token.id,
            "joinTokenName": token.name,
        }),
    }
}

/// Checks the credential a worker registers with. A worker credential: not revoked and bound
/// to this worker id. A join token (registrations proposed before worker credentials existed,
/// replayed from the log): not revoked, not expired, and either unbounded or already bound to
/// this worker id or with a use left, which binds the id to it (the row returned); a worker id
/// with a worker credential, or bound to another join token, does not register with it.
/// Registrations made by an administrator carry no credential and pass.
pub(crate) fn admit_worker(ctx: &Ctx<'_>, worker_id: &str) -> Result<Option<Change>, DomainError> {
    if ctx.actor.kind != ActorKind::Worker {
        return Ok(None);
    }
    let cred = ctx
        .actor
        .credential_id
        .as_ref()
        .and_then(|id| ctx.state.credentials.get(id));
    if let Some(cred) = cred.filter(|c| c.kind == CredentialKind::Worker) {
        if cred.revoked {
            return Err(DomainError::forbidden(format!(
                "the worker credential of worker {} ({}) was revoked; start the worker with a \
                 new join token",
                cred.worker_id.as_deref().unwrap_or("?"),
                cred.id
            )));
        }
        if cred.worker_id.as_deref() != Some(worker_id) {
            return Err(DomainError::forbidden(format!(
                "this worker credential ({}) is bound to worker {}; it cannot register as \
                 worker {worker_id}",
                cred.id,
                cred.worker_id.as_deref().unwrap_or("?")
            )));
        }
        return Ok(None);
    }
    if let Some(own) = ctx
        .state
        .credentials
        .values()
        .find(|c| c.kind == CredentialKind::Worker && c.worker_id.as_deref() == Some(worker_id))
    {
        return Err(DomainError::forbidden(format!(
            "worker {worker_id} has a worker credential ({}); it registers only with that \
             credential",
            own.id
        )));
    }
    if let Some(other) = bound_elsewhere(ctx, worker_id, cred.map(|c| c.id.as_str())) {
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
            "a worker registers only with a join token or its worker credential",
        ));
    }
    usable_join_token(ctx, cred)?;
    let Some(max) = cred.max_uses else {
        return Ok(None);
    };
    if cred.worker_ids.iter().any(|w| w == worker_id) {
        return Ok(None);
    }
    if cred.worker_ids.len() >= max as usize {
        return Err(uses_taken(cred, max, worker_id));
    }
    let mut bound = cred.clone();
    bound.worker_ids.push(worker_id.to_string());
    Ok(Some(Change::Credential(bound)))
}

#[cfg(test)]
#[path = "credential_tests.rs"]
pub(super) mod tests;
