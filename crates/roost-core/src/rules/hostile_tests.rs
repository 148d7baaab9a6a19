//! Regressions for issue 20's findings: input a hostile tenant can send never panics apply,
//! never wraps a sum, and never reads or suppresses another tenant's write.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::limits::{MAX_AGENTS_PER_COMPANY, MAX_CENTS};
use crate::state::State;
use crate::time::Timestamp;

fn cost(id: &str, agent: &str, company: &str, cents: u64) -> Command {
    Command::RecordCostEvent {
        event: NewCostEvent {
            id: id.into(),
            company_id: company.into(),
            agent_id: agent.into(),
            issue_id: None,
            heartbeat_run_id: None,
            provider: "anthropic".into(),
            model: "m".into(),
            input_tokens: 0,
            cached_input_tokens: 0,
            output_tokens: 0,
            cost_cents: cents,
            occurred_at: None,
            biller: None,
            billing_type: None,
        },
    }
}

fn keyed(actor: Actor, command: Command, key: &str, at: i64) -> Envelope {
    Envelope {
        request_id: None,
        at: Timestamp(at),
        actor,
        command,
        idempotency_key: Some(key.into()),
    }
}

fn create_issue(id: &str, company: &str, title: &str) -> Command {
    Command::CreateIssue {
        id: id.into(),
        company_id: company.into(),
        fields: IssuePatch {
            title: Some(title.into()),
            ..Default::default()
        },
    }
}

fn company_policy(amount: u64) -> Command {
    Command::SetBudgetPolicy {
        id: "p1".into(),
        company_id: "c1".into(),
        scope_type: BudgetScopeType::Company,
        scope_id: "c1".into(),
        window_kind: BudgetWindow::Lifetime,
        amount,
        warn_percent: 80,
        hard_stop_enabled: true,
    }
}

#[test]
fn cost_cents_overflow_is_refused_and_spend_never_wraps() {
    let mut w = World::new();
    w.ok(admin(), company_policy(1_000));
    let agent = agent_actor("a1", "c1", None);
    let err = w
        .run(agent.clone(), cost("e1", "a1", "c1", u64::MAX))
        .unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    w.ok(agent.clone(), cost("e2", "a1", "c1", 1));
    let policy = w.state.budget_policies["p1"].clone();
    assert_eq!(w.state.spent(&policy, Timestamp(0)), 1);
    // Even maximal costs, many times over, saturate instead of wrapping to a small spend.
    for n in 0..3 {
        w.ok(admin(), cost(&format!("big{n}"), "a1", "c1", MAX_CENTS));
    }
    assert_eq!(w.state.spent(&policy, Timestamp(0)), 3 * MAX_CENTS + 1);
    assert_eq!(w.state.agents["a1"].status, AgentStatus::Paused);
}

#[test]
fn spend_saturates_when_rows_hold_more_than_a_u64() {
    // Rows written before the bounds existed may hold u64::MAX cents: loading and adding to them
    // saturates rather than panicking or wrapping.
    let mut w = World::new();
    w.ok(admin(), cost("e1", "a1", "c1", 5));
    let mut event = w.state.cost_events["e1"].clone();
    let mut rows = crate::state::StateRows {
        companies: w.state.companies.values().cloned().collect(),
        agents: w.state.agents.values().cloned().collect(),
        ..Default::default()
    };
    event.cost_cents = u64::MAX;
    rows.cost_events.push(event.clone());
    event.id = "e2".into();
    rows.cost_events.push(event);
    let state = State::from_rows(rows);
    assert_eq!(
        state.spend.values().copied().max(),
        Some(u64::MAX),
        "the sum saturates"
    );
}

#[test]
fn budget_amount_u64_max_is_refused() {
    let mut w = World::new();
    let err = w.run(admin(), company_policy(u64::MAX)).unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    assert!(w.state.budget_policies.is_empty());
    // The largest accepted amount does not overflow the warning threshold either.
    w.ok(admin(), company_policy(MAX_CENTS));
    w.ok(agent_actor("a1", "c1", None), cost("e1", "a1", "c1", 1));
}

#[test]
fn heartbeat_interval_i64_max_is_refused_and_next_tick_saturates() {
    let mut w = World::new();
    let heartbeat = HeartbeatPolicy {
        enabled: true,
        interval_sec: i64::MAX as u64,
        ..HeartbeatPolicy::default()
    };
    let err = w
        .run(
            admin(),
            Command::UpdateAgent {
                agent_id: "a1".into(),
                patch: AgentPatch {
                    heartbeat: Some(heartbeat.clone()),
                    ..Default::default()
                },
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    // An agent row that holds such an interval anyway (an old log) gives a far tick, no panic.
    let mut agent = w.state.agents["a1"].clone();
    agent.heartbeat = HeartbeatPolicy {
        interval_sec: u64::MAX,
        ..heartbeat
    };
    assert_eq!(
        crate::rules::wake::next_tick(&agent),
        Some(Timestamp(i64::MAX))
    );
}

#[test]
fn idempotency_key_of_another_company_is_invisible() {
    let mut w = World::new();
    let b = agent_actor("b1", "c2", None);
    let a = agent_actor("a1", "c1", None);
    let first = w
        .state
        .apply(100, &keyed(b, create_issue("ib", "c2", "B's"), "k", 1_000))
        .outcome
        .unwrap();
    let mine = w
        .state
        .apply(101, &keyed(a, create_issue("ia", "c1", "A's"), "k", 2_000))
        .outcome
        .unwrap();
    assert_ne!(first, mine, "A got its own issue, not B's");
    assert_eq!(w.state.issues["ia"].company_id, "c1");
    assert_eq!(w.state.issues.len(), 2, "A's write was not dropped");
}

#[test]
fn idempotency_key_reused_with_a_different_request_is_refused() {
    let mut w = World::new();
    let a = agent_actor("a1", "c1", None);
    let first = w.state.apply(
        100,
        &keyed(a.clone(), create_issue("i1", "c1", "one"), "k", 1_000),
    );
    assert!(first.outcome.is_ok());
    let first = remembered(&first);
    let other = w
        .state
        .apply(
            101,
            &keyed(a.clone(), create_issue("i2", "c1", "two"), "k", 2_000),
        )
        .outcome;
    assert_eq!(other, Err(DomainError::IdempotencyKeyReused));
    assert_eq!(
        DomainError::IdempotencyKeyReused.code(),
        "idempotency_key_reused"
    );
    // The same request again (its own minted id) is answered with the first outcome.
    let again = w
        .state
        .apply(102, &keyed(a, create_issue("i3", "c1", "one"), "k", 3_000))
        .outcome;
    assert_eq!(
        again,
        Ok(Outcome::Repeated {
            key: first.key,
            at: first.at
        })
    );
    assert_eq!(w.state.issues.len(), 1);
}

#[test]
fn idempotency_key_for_another_kind_of_write_is_another_key() {
    // A comment key colliding with an issue key answered 500 ("unexpected outcome") and
    // printed the other write's outcome; kinds are scoped apart now.
    let mut w = World::new();
    w.issue("i1", "c1", IssuePatch::default());
    let admin = admin();
    let issue = w
        .state
        .apply(
            100,
            &keyed(admin.clone(), create_issue("i2", "c1", "t"), "k", 1_000),
        )
        .outcome;
    assert!(matches!(issue, Ok(Outcome::Issue { .. })));
    let comment = Command::AddComment {
        issue_id: "i1".into(),
        comment: NewComment {
            id: "cm1".into(),
            body: "hello".into(),
        },
    };
    let outcome = w
        .state
        .apply(101, &keyed(admin, comment, "k", 2_000))
        .outcome;
    assert!(matches!(outcome, Ok(Outcome::Comment(_))), "{outcome:?}");
}

#[test]
fn a_megabyte_billing_code_is_refused() {
    let mut w = World::new();
    let err = w
        .run(
            agent_actor("a1", "c1", None),
            Command::CreateIssue {
                id: "i1".into(),
                company_id: "c1".into(),
                fields: IssuePatch {
                    title: Some("t".into()),
                    billing_code: Some(Some("x".repeat(1 << 20))),
                    ..Default::default()
                },
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
    assert!(w.state.issues.is_empty());
}

#[test]
fn a_megabyte_wake_payload_is_refused() {
    let mut w = world();
    let err = w
        .run(
            admin(),
            Command::Wakeup {
                id: "wk".into(),
                agent_id: "a1".into(),
                issue_id: None,
                reason: WakeReason::OnDemand,
                payload: serde_json::json!({ "blob": "x".repeat(1 << 20) }),
                wake_key: None,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
    assert!(w.state.wakes.is_empty());
}

#[test]
fn a_company_may_not_pass_its_agent_quota() {
    let mut w = World::new();
    let existing = w
        .state
        .agents
        .values()
        .filter(|a| a.company_id == "c1")
        .count();
    let agent_in = |company: &str, n: usize| create_agent(&format!("q{n}"), company);
    let new_agent = |n: usize| agent_in("c1", n);
    for n in existing..MAX_AGENTS_PER_COMPANY {
        w.ok(admin(), new_agent(n));
    }
    let err = w
        .run(admin(), new_agent(MAX_AGENTS_PER_COMPANY))
        .unwrap_err();
    assert_eq!(err.code(), "quota_exceeded", "{err}");
    // Another company is not affected.
    w.ok(admin(), agent_in("c2", MAX_AGENTS_PER_COMPANY + 1));
}

#[test]
fn usage_beyond_the_bounds_is_refused() {
    let mut w = World::new();
    w.start_run("r1", "a1");
    let err = w
        .run(
            admin(),
            Command::ReportUsage {
                run_id: "r1".into(),
                usage: Usage {
                    cost_micro_usd: u64::MAX,
                    ..Default::default()
                },
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
}

/// Regression (fault suite's `membership_change` and `worker_cut_off` stalled): the runs quota was
/// 3,600 an hour, which the fault workload's run starts reached in under a minute, after which
/// every wake stayed queued and every start was refused. A full company running each agent once a
/// minute must fit; one more start than that is refused.
#[test]
fn runs_quota_admits_every_agent_of_a_full_company_running_each_minute() {
    let mut w = World::new();
    let now = Timestamp(1_700_000_000_000);
    let fleet_per_hour = (MAX_AGENTS_PER_COMPANY * 60) as u32;
    let hour = crate::limits::hour_of(now);
    w.state
        .runs_per_hour
        .insert(("c1".to_string(), hour), fleet_per_hour - 1);
    assert_eq!(
        crate::rules::run::quota_blocker(&w.state, "c1", now),
        None,
        "the last run a full fleet starts in its hour is admitted"
    );
    w.state
        .runs_per_hour
        .insert(("c1".to_string(), hour), fleet_per_hour);
    assert!(crate::rules::run::quota_blocker(&w.state, "c1", now).is_some());
    assert_eq!(crate::rules::run::quota_blocker(&w.state, "c2", now), None);
}

/// Regression (`roost-bench scale --issues 1000000` stopped at 100,000 issues): the open-issue
/// quota refused issues created done or cancelled, which take no open slot.
#[test]
fn a_company_at_its_open_issue_quota_may_still_record_closed_issues() {
    let mut w = World::new();
    w.state
        .open_issues
        .insert("c1".into(), crate::limits::MAX_OPEN_ISSUES_PER_COMPANY);
    let create = |id: &str, status| Command::CreateIssue {
        id: id.into(),
        company_id: "c1".into(),
        fields: IssuePatch {
            title: Some(format!("issue {id}")),
            status: Some(status),
            ..Default::default()
        },
    };
    let err = w
        .run(admin(), create("open", IssueStatus::Todo))
        .unwrap_err();
    assert_eq!(err.code(), "quota_exceeded", "{err}");
    assert!(!w.state.issues.contains_key("open"));
    w.ok(admin(), create("done", IssueStatus::Done));
    w.ok(admin(), create("cancelled", IssueStatus::Cancelled));
    assert_eq!(
        w.state.open_issue_count("c1"),
        crate::limits::MAX_OPEN_ISSUES_PER_COMPANY
    );
}

/// Review of the fix above: with closed issues free to create, reopening them (an update, or a
/// checkout that expects `done`) would pass the open-issue quota two commands an issue. A
/// reopen needs a free slot like a creation; an issue that stays open needs none.
#[test]
fn reopening_an_issue_needs_a_free_slot_under_the_open_issue_quota() {
    let mut w = World::new();
    let patch = |status| IssuePatch {
        status: Some(status),
        ..Default::default()
    };
    w.issue("closed", "c1", patch(IssueStatus::Done));
    w.issue("open", "c1", patch(IssueStatus::Todo));
    w.start_run("r1", "a1");
    w.state
        .open_issues
        .insert("c1".into(), crate::limits::MAX_OPEN_ISSUES_PER_COMPANY);
    let before = w.fingerprint();
    let err = w
        .run(admin(), status_update("closed", IssueStatus::Todo))
        .unwrap_err();
    assert_eq!(err.code(), "quota_exceeded", "{err}");
    let checkout = Command::Checkout {
        issue_id: "closed".into(),
        agent_id: "a1".into(),
        expected_statuses: vec![IssueStatus::Done],
    };
    let err = w
        .run(agent_actor("a1", "c1", Some("r1")), checkout)
        .unwrap_err();
    assert_eq!(err.code(), "quota_exceeded", "{err}");
    assert_eq!(
        w.fingerprint(),
        before,
        "a refused reopen changed the state"
    );
    // An open issue moving between open statuses takes no new slot.
    w.ok(admin(), status_update("open", IssueStatus::Blocked));
}
