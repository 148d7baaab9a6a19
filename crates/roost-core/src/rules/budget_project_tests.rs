//! Project budgets and the `budget_override_required` approval a hard stop opens:
//! spend on a project's issues counts against its budget; at the limit the
//! project pauses (its issues start no run, its agents go on elsewhere); approving the
//! override raises the budget and resumes it. An agent a hard stop pauses has its manager
//! woken (`incident_escalated`).

use crate::approval::{ApprovalDecision, ApprovalStatus, ApprovalType};
use crate::command::*;
use crate::entity::*;
use crate::project::ProjectPatch;

use super::budget_tests::{budget_world, claim_big, cost, finish_costing, incidents, set_budget};
use super::test_world::*;

/// The budget world with a roomy company budget, project `p1` under a 50¢ budget, and issue
/// `i1` of that project assigned to the spender, which ran and spent `spent` cents on it.
fn spent_on_project(spent: u64) -> World {
    let mut w = budget_world();
    set_budget(&mut w, BudgetScopeType::Company, "c1", 100_000).expect("raised");
    w.ok(
        admin(),
        Command::CreateProject {
            id: "p1".into(),
            company_id: "c1".into(),
            fields: ProjectPatch {
                name: Some("Launch".into()),
                ..Default::default()
            },
        },
    );
    set_budget(&mut w, BudgetScopeType::Project, "p1", 50).expect("project budget");
    in_project(&mut w, "i1");
    claim_big(&mut w, "r1").expect("claimed");
    finish_costing(&mut w, "r1", spent);
    w
}

fn in_project(w: &mut World, id: &str) {
    w.issue(
        id,
        "c1",
        IssuePatch {
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some("spender".into())),
            project_id: Some(Some("p1".into())),
            ..Default::default()
        },
    );
}

fn override_approval(w: &World) -> crate::approval::Approval {
    let found: Vec<_> = w
        .state
        .approvals
        .approvals
        .values()
        .filter(|a| a.approval_type == ApprovalType::BudgetOverrideRequired)
        .cloned()
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

#[test]
fn a_project_budget_pauses_the_project_not_its_agent_and_an_approved_override_resumes_it() {
    let mut w = spent_on_project(60);
    let project = &w.state.projects["p1"];
    assert_eq!(project.pause_reason.as_deref(), Some("budget"));
    assert!(project.paused_at.is_some());
    assert_eq!(w.state.agents["spender"].status, AgentStatus::Active);
    let hard = incidents(&w, IncidentKind::Hard);
    assert_eq!(hard.len(), 1);
    assert_eq!(w.state.budget_policies[&hard[0].policy_id].scope_id, "p1");
    let approval = override_approval(&w);
    assert_eq!(approval.status, ApprovalStatus::Pending);
    assert_eq!(approval.payload["incidentId"], hard[0].id.as_str());
    assert_eq!(approval.payload["observedCents"], 60);
    assert_eq!(approval.payload["proposedAmountCents"], 100);

    // Work outside the project still runs; the project's issues wait.
    assigned_issue(&mut w, "elsewhere", "spender");
    in_project(&mut w, "i2");
    assert!(
        matches!(claim_big(&mut w, "r2"), Ok(Outcome::Run(r)) if r.issue_id.as_deref() == Some("elsewhere"))
    );
    let held = claim_big(&mut w, "r3");
    assert!(
        held.as_ref()
            .is_err_and(|e| e.to_string().contains("paused")),
        "{held:?}"
    );

    w.ok(
        admin(),
        Command::DecideApproval {
            approval_id: approval.id.clone(),
            decision: ApprovalDecision::Approve,
            decision_note: Some("ship it".into()),
        },
    );
    assert_eq!(w.state.budget_policies[&hard_policy(&w)].amount, 100);
    assert!(w.state.projects["p1"].paused_at.is_none());
    assert!(incidents(&w, IncidentKind::Hard)
        .iter()
        .all(|i| i.status == IncidentStatus::Resolved));
    assert!(
        matches!(claim_big(&mut w, "r3"), Ok(Outcome::Run(r)) if r.issue_id.as_deref() == Some("i2"))
    );
}

fn hard_policy(w: &World) -> String {
    incidents(w, IncidentKind::Hard)[0].policy_id.clone()
}

#[test]
fn a_rejected_override_keeps_the_project_paused_and_a_direct_resolution_closes_the_approval() {
    let mut w = spent_on_project(50);
    let approval = override_approval(&w);
    w.ok(
        admin(),
        Command::DecideApproval {
            approval_id: approval.id.clone(),
            decision: ApprovalDecision::Reject,
            decision_note: None,
        },
    );
    assert!(w.state.projects["p1"].paused_at.is_some());
    let incident = incidents(&w, IncidentKind::Hard)[0].clone();
    assert_eq!(incident.resolution, Some(IncidentAction::KeepPaused));
    assert_eq!(w.state.budget_policies[&incident.policy_id].amount, 50);

    // A second stop, resolved by the operator with an amount: its approval closes with it.
    let mut w = spent_on_project(70);
    let approval = override_approval(&w);
    let incident = incidents(&w, IncidentKind::Hard)[0].id.clone();
    w.ok(
        admin(),
        Command::ResolveBudgetIncident {
            incident_id: incident,
            action: IncidentAction::RaiseAndResume,
            amount: Some(500),
        },
    );
    assert!(w.state.projects["p1"].paused_at.is_none());
    let closed = &w.state.approvals.approvals[&approval.id];
    assert_eq!(closed.status, ApprovalStatus::Approved);
    assert!(closed
        .decision_note
        .as_deref()
        .is_some_and(|n| n.contains("raise_and_resume")));
}

#[test]
fn costs_on_a_project_issue_count_for_the_project_as_it_was_when_recorded() {
    let mut w = spent_on_project(20);
    let month = w.state.budget_policies["pol-p1"].clone();
    let at = crate::time::Timestamp(w.index as i64 * 1000);
    assert_eq!(w.state.spent(&month, at), 20);
    // Moving the issue out of the project later does not move its spend.
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i1".into(),
            patch: IssuePatch {
                project_id: Some(None),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert_eq!(w.state.spent(&month, at), 20);
    let rows = crate::state::StateRows {
        companies: w.state.companies.values().cloned().collect(),
        agents: w.state.agents.values().cloned().collect(),
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        budget_policies: w.state.budget_policies.values().cloned().collect(),
        cost_events: w.state.cost_events.values().cloned().collect(),
        ..Default::default()
    };
    let reloaded = crate::state::State::from_rows(rows);
    assert_eq!(
        reloaded.spent(&month, at),
        20,
        "the index rebuilds the same"
    );
}

#[test]
fn a_hard_stop_that_pauses_an_agent_wakes_its_manager_once() {
    let mut w = budget_world();
    w.ok(admin(), create_agent("boss", "c1"));
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "spender".into(),
            patch: AgentPatch {
                reports_to: Some(Some("boss".into())),
                ..Default::default()
            },
        },
    );
    set_budget(&mut w, BudgetScopeType::Agent, "spender", 30).expect("agent budget");
    cost(&mut w, admin(), "e1", "spender", 40).expect("cost");
    assert_eq!(
        w.state.agents["spender"].pause_reason,
        Some(PauseReason::Budget)
    );
    let escalations: Vec<&Wake> = wakes_of(&w, "boss")
        .into_iter()
        .filter(|x| x.reason == WakeReason::IncidentEscalated)
        .collect();
    assert_eq!(escalations.len(), 1, "{escalations:?}");
    let incident = incidents(&w, IncidentKind::Hard)[0].id.clone();
    assert_eq!(escalations[0].payload["incidentId"], incident.as_str());
    assert_eq!(escalations[0].payload["pausedAgentIds"][0], "spender");
    // More spend while the incident is open opens nothing and wakes nobody again.
    cost(&mut w, admin(), "e2", "spender", 5).expect("cost");
    assert_eq!(
        wakes_of(&w, "boss")
            .iter()
            .filter(|x| x.reason == WakeReason::IncidentEscalated)
            .count(),
        1
    );
}
