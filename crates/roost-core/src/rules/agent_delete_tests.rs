//! `DeleteAgent` (`rules/agent_delete.rs`): the agent is terminated and lets go of its work.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;

fn delete(w: &mut World, actor: Actor, agent: &str) -> Result<Outcome, crate::DomainError> {
    w.run(
        actor,
        Command::DeleteAgent {
            agent_id: agent.into(),
        },
    )
}

/// Paperclip's `DELETE /api/agents/{id}` had no route: Roost's CLI users and Paperclip's
/// `agent delete` got a 404. Deleting stops the agent and frees what it held.
#[test]
fn deleting_an_agent_terminates_it_and_frees_its_runs_wakes_issues_and_reports() {
    let mut w = world();
    // a1: an issue it works on (a live run holding it), another queued for it, a key, and a2
    // reporting to it.
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").expect("claimed");
    w.checkout("i1", "a1", &run.id).expect("checked out");
    assigned_issue(&mut w, "i2", "a1");
    assert_eq!(pending(&w, "a1").len(), 1, "i2's wake waits");
    w.ok(
        admin(),
        Command::CreateCredential {
            id: "key1".into(),
            kind: CredentialKind::AgentKey,
            name: "k".into(),
            agent_id: Some("a1".into()),
            token_hash: "a".repeat(64),
        },
    );
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a2".into(),
            patch: AgentPatch {
                reports_to: Some(Some("a1".into())),
                ..Default::default()
            },
        },
    );

    // Not an agent's to do; a refusal changes nothing.
    let before = w.fingerprint();
    let refused = delete(&mut w, agent_actor("a2", "c1", None), "a1");
    assert_eq!(refused.map(|_| ()).unwrap_err().code(), "forbidden");
    let missing = delete(&mut w, admin(), "nobody");
    assert_eq!(missing.map(|_| ()).unwrap_err().code(), "not_found");
    assert_eq!(before, w.fingerprint());

    let Ok(Outcome::Agent(agent)) = delete(&mut w, admin(), "a1") else {
        panic!("not deleted")
    };
    assert_eq!(agent.status, AgentStatus::Terminated);
    let r1 = &w.state.runs["r1"];
    assert_eq!(r1.status, RunStatus::Cancelled);
    assert_eq!(r1.error.as_deref(), Some("agent_deleted"));
    assert!(pending(&w, "a1").is_empty(), "its wakes are cancelled");
    assert!(wakes_of(&w, "a1")
        .iter()
        .any(|x| x.status == WakeStatus::Cancelled
            && x.status_reason.as_deref() == Some("agent_deleted")));
    for id in ["i1", "i2"] {
        let issue = w.state.issues.get(id).expect("kept");
        assert_eq!(issue.assignee_agent_id, None, "{id} unassigned");
        assert!(issue.checkout.is_none(), "{id} not held");
    }
    assert_eq!(
        w.state.issues.status("i1"),
        Some(IssueStatus::Todo),
        "in progress needs an assignee: back to todo, as a release leaves it"
    );
    assert_eq!(w.state.issues.status("i2"), Some(IssueStatus::Todo));
    // The unassigned issue can still be edited (an in-progress issue without an assignee
    // could not).
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                title: Some("renamed".into()),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(w.state.credentials["key1"].revoked);
    assert_eq!(w.state.agents["a2"].reports_to, None);

    // Again: nothing more to do, and no error.
    let again = delete(&mut w, admin(), "a1");
    assert!(matches!(again, Ok(Outcome::Agent(_))), "{again:?}");
}
