//! Revocation and join-token rules (`credential.rs`).

use std::collections::BTreeMap;

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::rules::test_world::{admin, agent_actor, World};
use crate::state::{Applied, Change};
use crate::time::Timestamp;

pub(crate) fn hash(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

fn create(w: &mut World, id: &str, kind: CredentialKind, agent: Option<&str>, n: u8) {
    w.ok(
        admin(),
        Command::CreateCredential {
            id: id.into(),
            kind,
            name: format!("{id}-name"),
            agent_id: agent.map(str::to_string),
            token_hash: hash(n),
        },
    );
}

fn revoke(kind: CredentialKind, id: &str, agent: Option<&str>) -> Command {
    Command::RevokeCredential {
        id: id.into(),
        kind,
        agent_id: agent.map(str::to_string),
    }
}

/// Applies at index `w.index + 1` and returns every change, the activity entry included.
fn apply(w: &mut World, actor: Actor, command: Command, at_ms: i64) -> Applied {
    w.index += 1;
    let env = Envelope {
        request_id: None,
        at: Timestamp(at_ms),
        actor,
        command,
        idempotency_key: None,
    };
    w.state.apply(w.index, &env)
}

fn worker(id: &str, cred: &str) -> Actor {
    Actor {
        kind: ActorKind::Worker,
        id: id.into(),
        credential_id: Some(cred.into()),
        run_id: None,
        company_id: None,
    }
}

fn register(worker_id: &str) -> Command {
    Command::RegisterWorker {
        worker_id: worker_id.into(),
        name: worker_id.into(),
        adapters: vec![AdapterType::Process],
        labels: BTreeMap::new(),
        slots: 1,
        version: "test".into(),
    }
}

#[test]
fn revoking_records_the_time_and_an_activity_entry_without_the_hash() {
    let mut w = World::new();
    create(&mut w, "k1", CredentialKind::AgentKey, Some("a1"), 1);
    let applied = apply(
        &mut w,
        admin(),
        revoke(CredentialKind::AgentKey, "k1", Some("a1")),
        77_000,
    );
    applied.outcome.expect("revoked");
    let cred = &w.state.credentials["k1"];
    assert!(cred.revoked);
    assert_eq!(cred.revoked_at, Some(Timestamp(77_000)));
    let entry = applied
        .changes
        .iter()
        .find_map(|c| match c {
            Change::Activity(e) => Some(e),
            _ => None,
        })
        .expect("an activity entry");
    assert_eq!(entry.action, "credential.revoked");
    assert_eq!(entry.entity_id, "k1");
    assert_eq!(entry.company_id.as_deref(), Some("c1"));
    let text = serde_json::to_string(entry).unwrap();
    assert!(text.contains("k1-name"), "{text}");
    assert!(!text.contains(&hash(1)), "the hash leaked: {text}");
    // Revoked twice: a clear conflict, nothing written.
    let seq = w.state.activity_seq;
    let err = w
        .run(admin(), revoke(CredentialKind::AgentKey, "k1", Some("a1")))
        .unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }), "{err:?}");
    assert_eq!(w.state.activity_seq, seq);
}

#[test]
fn a_credential_of_another_kind_agent_or_company_is_not_found() {
    let mut w = World::new();
    create(&mut w, "k1", CredentialKind::AgentKey, Some("a1"), 1);
    create(&mut w, "kb", CredentialKind::AgentKey, Some("b1"), 2);
    for command in [
        revoke(CredentialKind::Admin, "k1", None),
        revoke(CredentialKind::WorkerJoin, "k1", None),
        revoke(CredentialKind::AgentKey, "k1", Some("a2")),
        revoke(CredentialKind::AgentKey, "nope", None),
    ] {
        let err = w.run(admin(), command).unwrap_err();
        assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");
    }
    // Agents revoke nothing, not even their own key.
    let err = w
        .run(
            agent_actor("a1", "c1", None),
            revoke(CredentialKind::AgentKey, "k1", Some("a1")),
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    assert!(!w.state.credentials["k1"].revoked);
    assert!(!w.state.credentials["kb"].revoked);
}

#[test]
fn the_last_admin_token_cannot_be_revoked() {
    let mut w = World::new();
    create(&mut w, "t1", CredentialKind::Admin, None, 1);
    let err = w
        .run(admin(), revoke(CredentialKind::Admin, "t1", None))
        .unwrap_err();
    assert!(
        matches!(&err, DomainError::Conflict { message } if message.contains("last admin token")),
        "{err:?}"
    );
    assert!(!w.state.credentials["t1"].revoked);
    create(&mut w, "t2", CredentialKind::Admin, None, 2);
    w.ok(admin(), revoke(CredentialKind::Admin, "t1", None));
    let err = w
        .run(admin(), revoke(CredentialKind::Admin, "t2", None))
        .unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }), "{err:?}");
    assert!(!w.state.credentials["t2"].revoked);
}

pub(crate) fn join_token(
    w: &mut World,
    id: &str,
    n: u8,
    ttl_secs: Option<u64>,
    max_uses: Option<u32>,
) {
    w.ok(
        admin(),
        Command::CreateJoinToken {
            id: id.into(),
            name: format!("{id}-name"),
            token_hash: hash(n),
            ttl_secs,
            max_uses,
        },
    );
}

#[test]
fn a_join_token_expires_at_the_envelope_time_plus_its_ttl() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, Some(60), None);
    let created = w.state.credentials["j1"].created_at;
    assert_eq!(
        w.state.credentials["j1"].expires_at,
        Some(Timestamp(created.0 + 60_000))
    );
    let before = created.0 + 59_999;
    apply(&mut w, worker("wk1", "j1"), register("wk1"), before)
        .outcome
        .expect("admitted before expiry");
    let err = apply(&mut w, worker("wk2", "j1"), register("wk2"), before + 1)
        .outcome
        .unwrap_err();
    assert!(
        matches!(&err, DomainError::Forbidden { message } if message.contains("expired")),
        "{err:?}"
    );
    assert!(!w.state.workers.contains_key("wk2"));
}

#[test]
fn a_join_token_with_one_use_is_bound_to_the_first_worker_id() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, Some(1));
    w.ok(worker("wk1", "j1"), register("wk1"));
    assert_eq!(
        w.state.credentials["j1"].worker_ids,
        vec!["wk1".to_string()]
    );
    // The same worker reconnecting registers again.
    w.ok(worker("wk1", "j1"), register("wk1"));
    let err = w.run(worker("wk2", "j1"), register("wk2")).unwrap_err();
    assert!(
        matches!(&err, DomainError::Forbidden { message }
            if message.contains("bound to worker wk1") && message.contains("wk2")),
        "{err:?}"
    );
    assert!(!w.state.workers.contains_key("wk2"));
    // A bound worker id cannot be taken with another (unbounded) token either.
    join_token(&mut w, "j2", 2, None, None);
    let err = w.run(worker("wk1", "j2"), register("wk1")).unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    // Revoked: refused, even for its own worker.
    w.ok(admin(), revoke(CredentialKind::WorkerJoin, "j1", None));
    let err = w.run(worker("wk1", "j1"), register("wk1")).unwrap_err();
    assert!(
        matches!(&err, DomainError::Forbidden { message } if message.contains("revoked")),
        "{err:?}"
    );
}

#[test]
fn unbounded_join_tokens_admit_any_number_of_workers() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, None);
    for id in ["wk1", "wk2", "wk3"] {
        w.ok(worker(id, "j1"), register(id));
    }
    assert!(w.state.credentials["j1"].worker_ids.is_empty());
}

#[test]
fn join_token_bounds_are_checked() {
    let mut w = World::new();
    for (ttl, uses) in [
        (Some(0), None),
        (Some(super::MAX_JOIN_TOKEN_TTL_SECS + 1), None),
        (None, Some(0)),
        (None, Some(super::MAX_JOIN_TOKEN_USES + 1)),
    ] {
        let err = w
            .run(
                admin(),
                Command::CreateJoinToken {
                    id: "j1".into(),
                    name: "j".into(),
                    token_hash: hash(1),
                    ttl_secs: ttl,
                    max_uses: uses,
                },
            )
            .unwrap_err();
        assert!(matches!(err, DomainError::Invalid { .. }), "{err:?}");
    }
    assert!(w.state.credentials.is_empty());
}
