//! Approvals: who asks and who decides, the requester woken once with the decision, issues
//! waiting on an open approval, hires that run only once approved.

use serde_json::json;

use super::test_world::*;
use crate::approval::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;

fn ask(w: &mut World, actor: Actor, id: &str, issues: &[&str]) -> Result<Approval, DomainError> {
    match w.run(
        actor,
        Command::CreateApproval {
            id: id.into(),
            company_id: "c1".into(),
            approval_type: ApprovalType::RequestBoardApproval,
            payload: json!({ "plan": "ship it" }),
            requested_by_agent_id: None,
            issue_ids: issues.iter().map(|s| s.to_string()).collect(),
        },
    )? {
        Outcome::Approval(a) => Ok(a),
        other => panic!("unexpected {other:?}"),
    }
}

fn decide(
    w: &mut World,
    actor: Actor,
    id: &str,
    decision: ApprovalDecision,
) -> Result<Approval, DomainError> {
    match w.run(
        actor,
        Command::DecideApproval {
            approval_id: id.into(),
            decision,
            decision_note: Some("looks good".into()),
        },
    )? {
        Outcome::Approval(a) => Ok(a),
        other => panic!("unexpected {other:?}"),
    }
}

/// The wakes that start a run with an approval's decision (a wake merged into another is not
/// one: the one it merged into carries its reason and payload).
fn approval_wakes<'a>(w: &'a World, agent: &str) -> Vec<&'a Wake> {
    wakes_of(w, agent)
        .into_iter()
        .filter(|x| x.reason == WakeReason::ApprovalResolved && x.status != WakeStatus::Coalesced)
        .collect()
}

#[test]
fn an_approved_request_wakes_its_requester_once_with_the_decision() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let a = ask(&mut w, agent_actor("a1", "c1", None), "ap1", &["i1"]).expect("asked");
    assert_eq!(a.status, ApprovalStatus::Pending);
    assert_eq!(a.requested_by_agent_id.as_deref(), Some("a1"));
    let err = decide(
        &mut w,
        agent_actor("a1", "c1", None),
        "ap1",
        ApprovalDecision::Approve,
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden", "agents do not decide");
    let decided = decide(&mut w, admin(), "ap1", ApprovalDecision::Approve).expect("approved");
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decision_note.as_deref(), Some("looks good"));
    let again = decide(&mut w, admin(), "ap1", ApprovalDecision::Approve).expect("idempotent");
    assert_eq!(again, decided);
    let wakes = approval_wakes(&w, "a1");
    assert_eq!(wakes.len(), 1, "woken once: {wakes:?}");
    assert_eq!(wakes[0].payload["reason"], "approval_approved");
    assert_eq!(wakes[0].payload["approvalStatus"], "approved");
    assert_eq!(wakes[0].payload["decisionNote"], "looks good");
    assert_eq!(wakes[0].issue_id.as_deref(), Some("i1"));
    let err = decide(&mut w, admin(), "ap1", ApprovalDecision::Reject).unwrap_err();
    assert_eq!(err.code(), "invariant_violation");
}

#[test]
fn a_revision_is_resubmitted_by_its_requester_then_rejected() {
    let mut w = world();
    ask(&mut w, agent_actor("a1", "c1", None), "ap1", &[]).expect("asked");
    let sent_back =
        decide(&mut w, admin(), "ap1", ApprovalDecision::RequestRevision).expect("revision");
    assert_eq!(sent_back.status, ApprovalStatus::RevisionRequested);
    let resubmit = |w: &mut World, actor| {
        w.run(
            actor,
            Command::ResubmitApproval {
                approval_id: "ap1".into(),
                payload: Some(json!({ "plan": "ship it, with tests" })),
            },
        )
    };
    let err = resubmit(&mut w, agent_actor("a2", "c1", None)).unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let Outcome::Approval(back) = resubmit(&mut w, agent_actor("a1", "c1", None)).expect("ok")
    else {
        panic!("not an approval")
    };
    assert_eq!(back.status, ApprovalStatus::Pending);
    assert_eq!(back.payload["plan"], "ship it, with tests");
    decide(&mut w, admin(), "ap1", ApprovalDecision::Reject).expect("rejected");
    // The revision's wake still waits, so the rejection merges into it: one run, which sees
    // the latest decision.
    let wakes = approval_wakes(&w, "a1");
    assert_eq!(wakes.len(), 1, "{wakes:#?}");
    assert_eq!(wakes[0].count, 2);
    assert_eq!(wakes[0].payload["reason"], "approval_rejected");
    assert_eq!(wakes[0].payload["approvalStatus"], "rejected");
}

#[test]
fn an_issue_waiting_on_an_open_approval_is_checked_out_by_its_requester_only() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a2");
    ask(&mut w, agent_actor("a1", "c1", None), "ap1", &["i1"]).expect("asked");
    claim(&mut w, "a2", "r2").expect("a2 runs");
    let err = w
        .checkout("i1", "a2", "r2")
        .expect_err("the issue waits on the approval");
    assert!(err.to_string().contains("waits on approval ap1"), "{err}");
    decide(&mut w, admin(), "ap1", ApprovalDecision::Approve).expect("approved");
    w.checkout("i1", "a2", "r2").expect("free once decided");
}

#[test]
fn approvals_are_company_scoped_and_validated() {
    let mut w = world();
    let err = ask(&mut w, agent_actor("b1", "c2", None), "ap1", &[]).unwrap_err();
    assert_eq!(err.code(), "not_found", "another company's is not found");
    let err = ask(&mut w, agent_actor("a1", "c1", None), "ap1", &["missing"]).unwrap_err();
    assert_eq!(err.code(), "not_found");
    let err = w
        .run(
            agent_actor("a1", "c1", None),
            Command::CreateApproval {
                id: "ap2".into(),
                company_id: "c1".into(),
                approval_type: ApprovalType::RequestBoardApproval,
                payload: json!({}),
                requested_by_agent_id: Some("a2".into()),
                issue_ids: vec![],
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "forbidden", "an agent asks for itself only");
    assert!(w.state.approvals.approvals.is_empty());
}

fn hire(w: &mut World, actor: Actor, agent: &str) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::HireAgent {
            approval_id: format!("hire-{agent}"),
            agent: Box::new(create_agent(agent, "c1")),
            payload: json!({ "reason": "we need a tester" }),
        },
    )
}

/// The test world, its company requiring the board's approval for new agents.
fn world_requiring_hire_approval() -> World {
    let mut w = world();
    w.ok(
        admin(),
        Command::UpdateCompany {
            company_id: "c1".into(),
            patch: CompanyPatch {
                require_board_approval_for_new_agents: Some(true),
                ..Default::default()
            },
        },
    );
    w
}

#[test]
fn a_hired_agent_runs_only_once_its_hire_is_approved() {
    let mut w = world_requiring_hire_approval();
    let err = hire(&mut w, agent_actor("a1", "c1", None), "h1").unwrap_err();
    assert_eq!(err.code(), "forbidden", "hiring needs canCreateAgents");
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                permissions: Some(AgentPermissions {
                    can_create_agents: true,
                    ..Default::default()
                }),
                ..Default::default()
            },
        },
    );
    let Outcome::Hire { agent, approval } =
        hire(&mut w, agent_actor("a1", "c1", None), "h1").expect("hired")
    else {
        panic!("not a hire")
    };
    assert_eq!(agent.status, AgentStatus::PendingApproval);
    let approval = approval.expect("a hire_agent approval");
    assert_eq!(approval.approval_type, ApprovalType::HireAgent);
    assert_eq!(approval.payload["agentId"], "h1");
    assigned_issue(&mut w, "i1", "h1");
    assert!(pending(&w, "h1").is_empty(), "a pending hire is not woken");
    let skipped: Vec<_> = wakes_of(&w, "h1")
        .iter()
        .map(|x| x.status_reason.clone().unwrap_or_default())
        .collect();
    assert_eq!(skipped, ["agent_pending_approval"]);
    decide(&mut w, admin(), &approval.id, ApprovalDecision::Approve).expect("approved");
    assert_eq!(w.state.agents["h1"].status, AgentStatus::Active);
    assigned_issue(&mut w, "i2", "h1");
    claim(&mut w, "h1", "r1").expect("it runs now");
    // Without the company's requirement a hire is active at once.
    let mut w = world();
    let Outcome::Hire { agent, approval } = hire(&mut w, admin(), "h2").expect("hired") else {
        panic!("not a hire")
    };
    assert_eq!((agent.status, approval), (AgentStatus::Active, None));
}

#[test]
fn a_rejected_hire_is_terminated() {
    let mut w = world_requiring_hire_approval();
    hire(&mut w, admin(), "h1").expect("hired");
    decide(&mut w, admin(), "hire-h1", ApprovalDecision::Reject).expect("rejected");
    assert_eq!(w.state.agents["h1"].status, AgentStatus::Terminated);
}

/// Regression: an operator could resume (or pause) an agent whose hire waited for approval;
/// resumed, it was active and its keys worked without the approval, which then found no pending
/// agent to activate or terminate.
#[test]
fn a_pending_hire_is_neither_resumed_nor_paused_past_its_approval() {
    let mut w = world_requiring_hire_approval();
    hire(&mut w, admin(), "h1").expect("hired");
    let resumed = w.run(
        admin(),
        Command::ResumeAgent {
            agent_id: "h1".into(),
        },
    );
    assert!(
        matches!(resumed, Err(DomainError::Conflict { .. })),
        "{resumed:?}"
    );
    let paused = w.run(
        admin(),
        Command::PauseAgent {
            agent_id: "h1".into(),
            reason: PauseReason::Manual,
        },
    );
    assert!(
        matches!(paused, Err(DomainError::Conflict { .. })),
        "{paused:?}"
    );
    assert_eq!(w.state.agents["h1"].status, AgentStatus::PendingApproval);
    decide(&mut w, admin(), "hire-h1", ApprovalDecision::Approve).expect("approved");
    assert_eq!(w.state.agents["h1"].status, AgentStatus::Active);
}

/// Bug: an approval's wake merged into its requester's pending wake for the same issue kept the
/// pending wake's reason and payload, so the run it started had no `PAPERCLIP_APPROVAL_ID` and
/// never saw the decision.
#[test]
fn an_approval_wake_merged_into_a_pending_wake_carries_the_decision_to_the_run() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let waiting = pending(&w, "a1");
    assert_eq!(waiting.len(), 1, "the assignment wake waits");
    assert_eq!(waiting[0].reason, WakeReason::IssueAssigned);
    ask(&mut w, agent_actor("a1", "c1", None), "ap1", &["i1"]).expect("asked");
    decide(&mut w, admin(), "ap1", ApprovalDecision::Approve).expect("approved");
    let waiting = pending(&w, "a1");
    assert_eq!(waiting.len(), 1, "merged: {waiting:#?}");
    assert_eq!(waiting[0].count, 2);
    assert_eq!(waiting[0].reason, WakeReason::ApprovalResolved);
    assert_eq!(waiting[0].payload["approvalId"], "ap1");
    assert_eq!(waiting[0].payload["approvalStatus"], "approved");
    let run = claim(&mut w, "a1", "r1").expect("claimed");
    assert_eq!(run.issue_id.as_deref(), Some("i1"));
}

fn link(
    w: &mut World,
    actor: Actor,
    approval: &str,
    issue: &str,
    linked: bool,
) -> Result<Approval, DomainError> {
    match w.run(
        actor,
        Command::LinkApprovalIssue {
            approval_id: approval.into(),
            issue_id: issue.into(),
            linked,
        },
    )? {
        Outcome::Approval(a) => Ok(a),
        other => panic!("unexpected {other:?}"),
    }
}

/// Paperclip's `issue approval:link` and `approval:unlink`: an administrator, or an agent that
/// may hire; twice changes nothing; another company's approval is not found.
#[test]
fn an_approval_is_linked_to_an_issue_and_unlinked_by_those_who_may_hire() {
    let mut w = world();
    w.todo_issue("i1");
    w.issue("o1", "c2", Default::default());
    ask(&mut w, admin(), "ap1", &[]).expect("asked");
    let a = link(&mut w, admin(), "ap1", "i1", true).expect("linked");
    assert_eq!(a.issue_ids, ["i1"]);
    assert_eq!(
        w.state.approvals.open_for_issue("i1").count(),
        1,
        "the issue waits on it"
    );
    let again = link(&mut w, admin(), "ap1", "i1", true).expect("linked twice");
    assert_eq!(again.issue_ids, ["i1"]);
    let err = link(&mut w, admin(), "ap1", "o1", true).unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }), "{err:?}");

    w.start_run("ra1", "a1");
    let agent = agent_actor("a1", "c1", Some("ra1"));
    let err = link(&mut w, agent.clone(), "ap1", "i1", false).unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    w.make_ceo("a1");
    // Even the ceo cannot lift a board's approval off an issue: only its own.
    let err = link(&mut w, agent.clone(), "ap1", "i1", false).unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }), "{err:?}");
    let own = ask(&mut w, agent.clone(), "ap2", &[]).expect("the ceo asks");
    assert_eq!(own.requested_by_agent_id.as_deref(), Some("a1"));
    link(&mut w, agent.clone(), "ap2", "i1", true).expect("the ceo links its own");
    let a = link(&mut w, agent, "ap2", "i1", false).expect("and unlinks it");
    assert!(a.issue_ids.is_empty());
    let a = link(&mut w, admin(), "ap1", "i1", false).expect("an administrator unlinks any");
    assert!(a.issue_ids.is_empty());
    assert_eq!(w.state.approvals.open_for_issue("i1").count(), 0);
}

/// Regression: a deleted issue stayed linked to its approvals, where no one could unlink it.
#[test]
fn a_deleted_issue_is_unlinked_from_its_approvals() {
    let mut w = world();
    w.todo_issue("i1");
    w.todo_issue("i2");
    ask(&mut w, admin(), "ap1", &["i1", "i2"]).expect("asked");
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    let a = &w.state.approvals.approvals["ap1"];
    assert_eq!(a.issue_ids, ["i2"]);
}
