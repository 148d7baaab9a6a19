//! Group commit: one log entry carrying several clients' commands applies each as if it had
//! its own entry, in order, with its own slot.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{slot, SLOTS_PER_ENTRY};
use crate::time::Timestamp;

fn envelope(actor: Actor, command: Command, key: Option<&str>) -> Envelope {
    Envelope {
        request_id: None,
        at: Timestamp(1_000_000),
        actor,
        command,
        idempotency_key: key.map(str::to_string),
    }
}

fn checkout(issue: &str, agent: &str, run: &str) -> Envelope {
    envelope(
        agent_actor(agent, "c1", Some(run)),
        Command::Checkout {
            issue_id: issue.into(),
            agent_id: agent.into(),
            expected_statuses: vec![IssueStatus::Todo, IssueStatus::Backlog],
        },
        None,
    )
}

fn release(issue: &str, agent: &str, run: &str) -> Envelope {
    envelope(
        agent_actor(agent, "c1", Some(run)),
        Command::Release {
            issue_id: issue.into(),
        },
        None,
    )
}

fn batch(envelopes: Vec<Envelope>) -> Envelope {
    envelope(admin(), Command::Batch { envelopes }, None)
}

fn todo_world() -> World {
    let mut w = World::new();
    w.todo_issue("i1");
    w.start_run("r1", "a1");
    w.start_run("r2", "a2");
    w
}

#[test]
fn two_holders_of_one_issue_in_one_entry_get_strictly_increasing_tokens() {
    let mut w = todo_world();
    let index = w.index + 1;
    let applied = w.state.apply_entry(
        index,
        &batch(vec![
            checkout("i1", "a1", "r1"),
            release("i1", "a1", "r1"),
            checkout("i1", "a2", "r2"),
        ]),
    );
    let outcomes: Vec<_> = applied.into_iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes.len(), 3);
    let first = token_of(outcomes[0].clone().expect("first checkout"));
    assert!(outcomes[1].is_ok(), "release: {:?}", outcomes[1]);
    let second = token_of(outcomes[2].clone().expect("second checkout"));
    assert_eq!((first, second), (slot(index, 0), slot(index, 2)));
    assert!(second > first);
    // A later entry's commands come after every command of this one.
    assert!(slot(index + 1, 0) > slot(index, SLOTS_PER_ENTRY - 1));
    assert_eq!(w.state.applied_index, index);
}

#[test]
fn a_refused_command_in_a_batch_changes_nothing_and_the_others_apply() {
    let mut w = todo_world();
    let index = w.index + 1;
    let before = w.state.activity_seq;
    let applied = w.state.apply_entry(
        index,
        &batch(vec![
            checkout("i1", "a1", "r1"),
            checkout("i1", "a2", "r2"),
            release("i1", "a1", "r1"),
        ]),
    );
    assert!(applied[0].outcome.is_ok());
    assert!(
        matches!(
            applied[1].outcome,
            Err(DomainError::CheckoutConflict { .. })
        ),
        "{:?}",
        applied[1].outcome
    );
    assert!(applied[1].changes.is_empty());
    assert!(applied[2].outcome.is_ok());
    // Two activity entries (checkout, release), none for the refused command.
    assert_eq!(w.state.activity_seq, before + 2);
    assert!(w.state.issues["i1"].checkout.is_none());
}

#[test]
fn a_key_repeated_inside_one_batch_applies_once() {
    let mut w = todo_world();
    // The same request twice: each copy has its own minted id.
    let create = |id: &str| {
        envelope(
            admin(),
            Command::CreateIssue {
                id: format!("id-{id}"),
                company_id: "c1".into(),
                fields: IssuePatch {
                    title: Some("same title".into()),
                    ..Default::default()
                },
            },
            Some("same-key"),
        )
    };
    let issues = w.state.issues.len();
    let applied = w
        .state
        .apply_entry(w.index + 1, &batch(vec![create("a"), create("b")]));
    let kept = remembered(&applied[0]);
    assert_eq!(kept.outcome, applied[0].outcome);
    assert_eq!(
        applied[1].outcome,
        Ok(Outcome::Repeated {
            key: kept.key,
            at: kept.at
        })
    );
    assert_eq!(w.state.issues.len(), issues + 1);
}

#[test]
fn a_nested_batch_is_refused() {
    let mut w = todo_world();
    let applied = w.state.apply_entry(
        w.index + 1,
        &batch(vec![batch(vec![checkout("i1", "a1", "r1")])]),
    );
    assert!(matches!(
        applied[0].outcome,
        Err(DomainError::Invalid { .. })
    ));
    assert!(w.state.issues["i1"].checkout.is_none());
}
