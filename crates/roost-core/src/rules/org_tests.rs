//! The org chart's rules (`rules/org.rs`) on a fixed clock: reporting lines refused for a
//! cycle, another company, a terminated manager or the agent itself; the chain's order; the
//! tree; a blocked issue escalated to the assignee's manager once per blocked spell.

use super::org::{chain_of_command, escalations_due, org_tree};
use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::time::Timestamp;

const MIN: i64 = 60_000;
/// The fixed clock's start: every command of these tests is stamped from here.
const T0: i64 = 1_800_000_000_000;

fn report(
    w: &mut World,
    at: i64,
    agent: &str,
    manager: Option<&str>,
) -> Result<Outcome, DomainError> {
    w.run_at(
        at,
        admin(),
        Command::UpdateAgent {
            agent_id: agent.into(),
            patch: AgentPatch {
                reports_to: Some(manager.map(str::to_string)),
                ..Default::default()
            },
        },
    )
}

fn invalid_message(r: Result<Outcome, DomainError>) -> String {
    match r {
        Err(DomainError::Invalid { field, message }) => {
            assert_eq!(field, "reportsTo");
            message
        }
        other => panic!("expected an invalid reportsTo, got {other:?}"),
    }
}

/// c1: a1 <- a2 <- a3 (a3 reports to a2, a2 to a1).
fn chain_world() -> World {
    let mut w = World::new();
    w.ok(admin(), create_agent("a3", "c1"));
    report(&mut w, T0, "a2", Some("a1")).expect("a2 reports to a1");
    report(&mut w, T0, "a3", Some("a2")).expect("a3 reports to a2");
    w
}

#[test]
fn the_chain_of_command_runs_from_the_direct_manager_up() {
    let w = chain_world();
    let chain: Vec<&str> = chain_of_command(&w.state, "a3")
        .iter()
        .map(|a| a.id.as_str())
        .collect();
    assert_eq!(chain, ["a2", "a1"]);
    assert!(chain_of_command(&w.state, "a1").is_empty());
    assert_eq!(w.state.agents["a3"].reports_to.as_deref(), Some("a2"));
    let tree = org_tree(&w.state, "c1");
    assert_eq!(tree.len(), 1, "one root: {tree:?}");
    assert_eq!(tree[0].id, "a1");
    assert_eq!(tree[0].reports[0].id, "a2");
    assert_eq!(tree[0].reports[0].reports[0].id, "a3");
}

#[test]
fn a_cycle_is_refused_and_changes_nothing() {
    let mut w = chain_world();
    let before = w.fingerprint();
    let message = invalid_message(report(&mut w, T0, "a1", Some("a3")));
    assert!(message.contains("cycle"), "{message}");
    let message = invalid_message(report(&mut w, T0, "a1", Some("a1")));
    assert!(message.contains("itself"), "{message}");
    assert_eq!(w.fingerprint(), before, "a refusal writes nothing");
}

#[test]
fn a_manager_of_another_company_or_terminated_or_unknown_is_refused() {
    let mut w = World::new();
    let message = invalid_message(report(&mut w, T0, "a1", Some("b1")));
    assert!(message.contains("another company"), "{message}");
    w.ok(admin(), create_agent("a3", "c1"));
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a3".into(),
        },
    );
    let message = invalid_message(report(&mut w, T0, "a1", Some("a3")));
    assert!(message.contains("terminated"), "{message}");
    let message = invalid_message(report(&mut w, T0, "a1", Some("nobody")));
    assert!(message.contains("no agent"), "{message}");
    assert_eq!(w.state.agents["a1"].reports_to, None);
    // `null` clears a manager.
    report(&mut w, T0, "a1", Some("a2")).expect("set");
    report(&mut w, T0, "a1", None).expect("cleared");
    assert_eq!(w.state.agents["a1"].reports_to, None);
}

#[test]
fn a_terminated_manager_leaves_its_reports_as_roots_of_the_tree() {
    let mut w = chain_world();
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a2".into(),
        },
    );
    let roots: Vec<String> = org_tree(&w.state, "c1").into_iter().map(|n| n.id).collect();
    assert_eq!(roots, ["a1", "a3"]);
}

/// a2 reports to a1; issue i1 assigned to a2 is blocked at `T0`; threshold 10 minutes.
fn blocked_world() -> World {
    let mut w = World::new();
    report(&mut w, T0, "a2", Some("a1")).expect("a2 reports to a1");
    w.run_at(
        T0,
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                escalate_blocked_after_secs: Some(600),
                ..Default::default()
            },
        },
    )
    .expect("threshold set");
    w.run_at(
        T0,
        admin(),
        Command::CreateIssue {
            id: "i1".into(),
            company_id: "c1".into(),
            fields: IssuePatch {
                title: Some("stuck".into()),
                status: Some(IssueStatus::Todo),
                assignee_agent_id: Some(Some("a2".into())),
                ..Default::default()
            },
        },
    )
    .expect("issue");
    set_status(&mut w, T0, IssueStatus::Blocked);
    w
}

fn set_status(w: &mut World, at: i64, status: IssueStatus) {
    w.run_at(
        at,
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                status: Some(status),
                ..Default::default()
            },
            comment: None,
        },
    )
    .expect("status");
}

/// What the leader's timer does at `at`: propose an `EscalateIssue` for each issue due.
fn tick(w: &mut World, at: i64) -> Vec<Result<Outcome, DomainError>> {
    escalations_due(&w.state, Timestamp(at))
        .into_iter()
        .map(|issue_id| w.run_at(at, system(), Command::EscalateIssue { issue_id }))
        .collect()
}

fn system() -> Actor {
    Actor::system()
}

fn escalation_wakes(w: &World) -> Vec<&Wake> {
    wakes_of(w, "a1")
        .into_iter()
        .filter(|x| x.reason == WakeReason::IssueEscalated)
        .collect()
}

#[test]
fn a_blocked_issue_wakes_the_managers_once_per_blocked_spell() {
    let mut w = blocked_world();
    // One minute short of the threshold: nothing.
    assert!(tick(&mut w, T0 + 9 * MIN).is_empty());
    let refused = w.run_at(
        T0 + 9 * MIN,
        system(),
        Command::EscalateIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(
        matches!(refused, Err(DomainError::Conflict { .. })),
        "{refused:?}"
    );
    assert!(escalation_wakes(&w).is_empty());

    // At the threshold: the manager is woken, once, about the issue.
    let woke = tick(&mut w, T0 + 10 * MIN);
    assert_eq!(woke.len(), 1);
    assert!(matches!(woke[0], Ok(Outcome::Wake(_))), "{woke:?}");
    let wakes = escalation_wakes(&w);
    assert_eq!(wakes.len(), 1);
    let wake = wakes[0];
    assert_eq!(wake.issue_id.as_deref(), Some("i1"));
    assert_eq!(wake.status, WakeStatus::Queued);
    assert_eq!(wake.payload["assigneeAgentId"], "a2");
    assert_eq!(wake.payload["issueId"], "i1");
    assert_eq!(wake.payload["blockedMinutes"], 10);
    assert_eq!(
        w.state.issues["i1"].escalated_blocked_since,
        Some(Timestamp(T0))
    );

    // A second tick (or a second leader proposing the same) wakes nobody.
    assert!(tick(&mut w, T0 + 11 * MIN).is_empty());
    let again = w.run_at(
        T0 + 11 * MIN,
        system(),
        Command::EscalateIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(again.is_err(), "{again:?}");
    assert_eq!(escalation_wakes(&w).len(), 1);

    // Unblocked and blocked again: a new spell, escalated again after its own threshold.
    set_status(&mut w, T0 + 12 * MIN, IssueStatus::InProgress);
    set_status(&mut w, T0 + 13 * MIN, IssueStatus::Blocked);
    assert!(
        tick(&mut w, T0 + 22 * MIN).is_empty(),
        "9 minutes into the spell"
    );
    assert_eq!(tick(&mut w, T0 + 23 * MIN).len(), 1);
    assert_eq!(escalation_wakes(&w).len(), 2);
}

#[test]
fn no_manager_or_escalation_off_escalates_nothing() {
    let mut w = blocked_world();
    report(&mut w, T0, "a2", None).expect("cleared");
    assert!(tick(&mut w, T0 + 60 * MIN).is_empty());
    report(&mut w, T0, "a2", Some("a1")).expect("set again");
    w.run_at(
        T0,
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                escalate_blocked_after_secs: Some(0),
                ..Default::default()
            },
        },
    )
    .expect("off");
    assert!(tick(&mut w, T0 + 600 * MIN).is_empty());
    assert!(escalation_wakes(&w).is_empty());
    let too_long = w.run_at(
        T0,
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                escalate_blocked_after_secs: Some(u32::MAX),
                ..Default::default()
            },
        },
    );
    assert!(
        matches!(too_long, Err(DomainError::Invalid { .. })),
        "{too_long:?}"
    );
}

#[test]
fn old_rows_keep_their_bytes() {
    let w = World::new();
    let agent = serde_json::to_value(&w.state.agents["a1"]).expect("json");
    assert!(agent.get("reportsTo").is_none(), "{agent}");
    let company = serde_json::to_value(&w.state.companies["c1"]).expect("json");
    assert!(
        company.get("escalateBlockedAfterSecs").is_none(),
        "{company}"
    );
    let read: Company = serde_json::from_value(company).expect("read back");
    assert_eq!(read.escalate_blocked_after_secs, 3600);
}
