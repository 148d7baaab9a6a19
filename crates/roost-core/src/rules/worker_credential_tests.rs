//! Worker credentials (`credential.rs`): a join token exchanged once for a credential bound to
//! one worker id, registrations with it, refusals, and revocation.

use std::collections::BTreeMap;

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::rules::credential_tests::{hash, join_token};
use crate::rules::test_world::{admin, World};

fn worker(id: &str, cred: &str) -> Actor {
    Actor {
        kind: ActorKind::Worker,
        id: id.into(),
        credential_id: Some(cred.into()),
        run_id: None,
        company_id: None,
    }
}

fn exchange(worker_id: &str, credential_id: &str, n: u8) -> Command {
    Command::ExchangeJoinToken {
        worker_id: worker_id.into(),
        credential_id: credential_id.into(),
        token_hash: hash(n),
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

fn revoke(kind: CredentialKind, id: &str) -> Command {
    Command::RevokeCredential {
        id: id.into(),
        kind,
        agent_id: None,
    }
}

fn forbidden_with(err: DomainError, words: &[&str]) {
    match &err {
        DomainError::Forbidden { message } if words.iter().all(|w| message.contains(w)) => {}
        _ => panic!("expected a refusal naming {words:?}, got {err:?}"),
    }
}

#[test]
fn a_join_token_is_exchanged_for_a_credential_bound_to_one_worker_id() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, Some(3600), Some(2));
    let outcome = w.ok(worker("wk1", "j1"), exchange("wk1", "wc1", 10));
    let Outcome::Credential(cred) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(cred.kind, CredentialKind::Worker);
    assert_eq!(cred.worker_id.as_deref(), Some("wk1"));
    assert_eq!(cred.join_token_id.as_deref(), Some("j1"));
    assert_eq!(cred.token_hash, hash(10));
    // One use of two spent, bound to wk1.
    assert_eq!(
        w.state.credentials["j1"].worker_ids,
        vec!["wk1".to_string()]
    );
    // The worker registers with its credential, as often as it reconnects.
    w.ok(worker("wk1", "wc1"), register("wk1"));
    w.ok(worker("wk1", "wc1"), register("wk1"));
    assert_eq!(w.state.workers["wk1"].status, WorkerStatus::Online);
    // The same exchange again (its answer was lost) changes nothing.
    let seq = w.state.credentials.len();
    w.ok(worker("wk1", "j1"), exchange("wk1", "wc1-again", 10));
    assert_eq!(w.state.credentials.len(), seq);
    assert!(!w.state.credentials.contains_key("wc1-again"));
}

#[test]
fn a_second_exchange_for_a_worker_id_with_a_credential_is_refused() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, None);
    join_token(&mut w, "j2", 2, None, None);
    w.ok(worker("wk1", "j1"), exchange("wk1", "wc1", 10));
    // Another secret, through the same token or another one: the id is taken.
    for token in ["j1", "j2"] {
        let err = w
            .run(worker("wk1", token), exchange("wk1", "wc2", 11))
            .unwrap_err();
        forbidden_with(err, &["wk1", "already has a worker credential", "wc1"]);
    }
    assert!(!w.state.credentials.contains_key("wc2"));
    // Nor does a join token register that id any more.
    let err = w.run(worker("wk1", "j2"), register("wk1")).unwrap_err();
    forbidden_with(err, &["wk1", "registers only with that credential"]);
}

#[test]
fn a_credential_registers_only_as_its_own_worker() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, None);
    w.ok(worker("wk1", "j1"), exchange("wk1", "wc1", 10));
    w.ok(worker("wk2", "j1"), exchange("wk2", "wc2", 11));
    let err = w.run(worker("wk2", "wc1"), register("wk2")).unwrap_err();
    forbidden_with(
        err,
        &["bound to worker wk1", "cannot register as worker wk2"],
    );
    assert!(!w.state.workers.contains_key("wk2"));
    // A worker exchanges only for itself, and only a join token.
    let err = w
        .run(worker("wk3", "j1"), exchange("wk4", "wc4", 12))
        .unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    let err = w
        .run(worker("wk3", "wc1"), exchange("wk3", "wc3", 13))
        .unwrap_err();
    forbidden_with(err, &["only for a join token"]);
    let err = w.run(admin(), exchange("wk3", "wc3", 13)).unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    // An administrator cannot mint one directly either.
    let err = w
        .run(
            admin(),
            Command::CreateCredential {
                id: "wc5".into(),
                kind: CredentialKind::Worker,
                name: "w".into(),
                agent_id: None,
                token_hash: hash(14),
            },
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::Invalid { .. }), "{err:?}");
}

#[test]
fn expiry_uses_and_revocation_are_enforced_at_the_stamped_time() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, Some(60), Some(1));
    let created = w.state.credentials["j1"].created_at.0;
    // At its expiry (the exchange's stamped time, not the clock of whoever applies it):
    // refused; a millisecond earlier: exchanged.
    let err = w
        .run_at(
            created + 60_000,
            worker("wk1", "j1"),
            exchange("wk1", "wc1", 10),
        )
        .unwrap_err();
    forbidden_with(err, &["expired"]);
    w.run_at(
        created + 59_999,
        worker("wk1", "j1"),
        exchange("wk1", "wc1", 10),
    )
    .expect("exchanged before expiry");
    // Its one use is spent: another worker id is refused.
    let err = w
        .run_at(created + 1, worker("wk2", "j1"), exchange("wk2", "wc2", 11))
        .unwrap_err();
    forbidden_with(err, &["bound to worker wk1", "wk2"]);
    // A credential outlives its join token's expiry.
    w.run_at(created + 120_000, worker("wk1", "wc1"), register("wk1"))
        .expect("registered with its credential after the token expired");
    // A revoked join token exchanges nothing.
    join_token(&mut w, "j2", 2, None, None);
    w.ok(admin(), revoke(CredentialKind::WorkerJoin, "j2"));
    let err = w
        .run(worker("wk3", "j2"), exchange("wk3", "wc3", 12))
        .unwrap_err();
    forbidden_with(err, &["revoked"]);
}

#[test]
fn revoking_a_worker_credential_refuses_it_and_the_token_is_not_exchanged_again() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, None);
    w.ok(worker("wk1", "j1"), exchange("wk1", "wc1", 10));
    w.ok(worker("wk1", "wc1"), register("wk1"));
    let Outcome::Credential(revoked) = w.ok(admin(), revoke(CredentialKind::Worker, "wc1")) else {
        panic!("not a credential")
    };
    assert!(revoked.revoked && revoked.revoked_at.is_some());
    let err = w.run(worker("wk1", "wc1"), register("wk1")).unwrap_err();
    forbidden_with(err, &["wk1", "revoked"]);
    // The join token it came from is spent for this worker id.
    let err = w
        .run(worker("wk1", "j1"), exchange("wk1", "wc2", 11))
        .unwrap_err();
    forbidden_with(err, &["already exchanged for worker wk1"]);
    // A new join token brings the worker back, with a new credential.
    join_token(&mut w, "j2", 2, None, Some(1));
    w.ok(worker("wk1", "j2"), exchange("wk1", "wc2", 11));
    w.ok(worker("wk1", "wc2"), register("wk1"));
    // Revoked twice: a conflict. Of another kind: not found.
    let err = w
        .run(admin(), revoke(CredentialKind::Worker, "wc1"))
        .unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }), "{err:?}");
    let err = w
        .run(admin(), revoke(CredentialKind::Worker, "j2"))
        .unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");
}

#[test]
fn revoking_a_join_token_revokes_the_credentials_it_was_exchanged_for() {
    let mut w = World::new();
    join_token(&mut w, "j1", 1, None, None);
    join_token(&mut w, "j2", 2, None, None);
    w.ok(worker("wk1", "j1"), exchange("wk1", "wc1", 10));
    w.ok(worker("wk2", "j1"), exchange("wk2", "wc2", 11));
    w.ok(worker("wk3", "j2"), exchange("wk3", "wc3", 12));
    w.ok(admin(), revoke(CredentialKind::WorkerJoin, "j1"));
    assert!(w.state.credentials["wc1"].revoked);
    assert!(w.state.credentials["wc2"].revoked);
    assert!(!w.state.credentials["wc3"].revoked);
    let err = w.run(worker("wk2", "wc2"), register("wk2")).unwrap_err();
    forbidden_with(err, &["revoked"]);
    w.ok(worker("wk3", "wc3"), register("wk3"));
}
