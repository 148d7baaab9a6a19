//! Transition tests for budgets (docs/budgets.md): reservations at claim, metering during a
//! run, settlement at its end, incidents, operator decisions, windows, bad input.

use std::collections::BTreeMap;

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::time::Timestamp;

use super::test_world::*;

/// 2026-02-01T00:00:00Z in milliseconds.
const FEB_1: i64 = 1_769_904_000_000;

/// A world with worker `big` (20 slots) and agent `spender` in c1 that may run 10 at a time
/// with a 25¢ reserve per run, under a $1.00 hard company budget (calendar month).
pub(super) fn budget_world() -> World {
    let mut w = world();
    w.ok(
        admin(),
        Command::RegisterWorker {
            worker_id: "big".into(),
            name: "big".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 20,
            version: "test".into(),
        },
    );
    w.ok(
        admin(),
        Command::CreateAgent {
            id: "spender".into(),
            company_id: "c1".into(),
            name: "spender".into(),
            role: "engineer".into(),
            title: None,
            adapter_type: AdapterType::Process,
            adapter_config: serde_json::json!({}),
            heartbeat: HeartbeatPolicy {
                max_concurrent_runs: 10,
                run_reserve_cents: 25,
                ..HeartbeatPolicy::default()
            },
            placement_labels: BTreeMap::new(),
        },
    );
    set_budget(&mut w, BudgetScopeType::Company, "c1", 100).expect("budget");
    w
}

pub(super) fn set_budget(
    w: &mut World,
    scope_type: BudgetScopeType,
    scope_id: &str,
    amount: u64,
) -> Result<Outcome, DomainError> {
    w.run(
        admin(),
        Command::SetBudgetPolicy {
            id: format!("pol-{scope_id}"),
            company_id: "c1".into(),
            scope_type,
            scope_id: scope_id.into(),
            window_kind: BudgetWindow::CalendarMonthUtc,
            amount,
            warn_percent: 80,
            hard_stop_enabled: true,
        },
    )
}

/// Claims the spender's oldest queued wake on worker `big`.
pub(super) fn claim_big(w: &mut World, run_id: &str) -> Result<Outcome, DomainError> {
    let wake = pending(w, "spender")
        .into_iter()
        .find(|x| x.status == WakeStatus::Queued)
        .map(|x| x.id.clone())
        .ok_or_else(|| DomainError::conflict("nothing queued"))?;
    w.run(
        admin(),
        Command::AssignRun {
            wake_id: wake,
            run_id: run_id.into(),
            worker_id: "big".into(),
            token_hash: None,
        },
    )
}

pub(super) fn finish_costing(w: &mut World, run: &str, cents: u64) {
    w.ok(
        worker_actor("big"),
        Command::FinishRun {
            run_id: run.into(),
            status: RunStatus::Succeeded,
            error: None,
            report: RunReport {
                usage: Usage {
                    cost_micro_usd: cents * 10_000,
                    ..Usage::default()
                },
                ..RunReport::default()
            },
        },
    );
}

fn report(w: &mut World, run: &str, cents: u64) -> Result<Outcome, DomainError> {
    w.run(
        worker_actor("big"),
        Command::ReportUsage {
            run_id: run.into(),
            usage: Usage {
                cost_micro_usd: cents * 10_000,
                ..Usage::default()
            },
        },
    )
}

fn live_reserved(w: &World) -> u64 {
    w.state.live_runs().map(|r| r.reserved_cents).sum()
}

pub(super) fn incidents(w: &World, kind: IncidentKind) -> Vec<&BudgetIncident> {
    w.state
        .budget_incidents
        .values()
        .filter(|i| i.kind == kind)
        .collect()
}

/// A cost report of `cents` by `agent` in c1, for no issue or run.
pub(super) fn cost_event(id: &str, agent: &str, cents: u64) -> NewCostEvent {
    NewCostEvent {
        id: id.into(),
        company_id: "c1".into(),
        agent_id: agent.into(),
        issue_id: None,
        heartbeat_run_id: None,
        provider: "anthropic".into(),
        model: "claude".into(),
        input_tokens: 1,
        cached_input_tokens: 0,
        output_tokens: 1,
        cost_cents: cents,
        occurred_at: None,
        biller: None,
        billing_type: None,
    }
}

pub(super) fn cost(
    w: &mut World,
    actor: Actor,
    id: &str,
    agent: &str,
    cents: u64,
) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::RecordCostEvent {
            event: cost_event(id, agent, cents),
        },
    )
}

#[test]
fn claims_stop_at_the_limit_and_resume_when_runs_settle_below_their_reserve() {
    let mut w = budget_world();
    for i in 0..10 {
        assigned_issue(&mut w, &format!("i{i}"), "spender");
    }
    let mut claimed = Vec::new();
    for i in 0..10 {
        if let Ok(Outcome::Run(r)) = claim_big(&mut w, &format!("r{i}")) {
            claimed.push(r.id);
        }
    }
    assert_eq!(claimed.len(), 4, "4 × 25¢ fill the $1.00 budget");
    assert_eq!(live_reserved(&w), 100);
    assert!(
        incidents(&w, IncidentKind::Hard).is_empty(),
        "a full budget of reservations is not spent"
    );
    assert_eq!(w.state.agents["spender"].status, AgentStatus::Active);

    finish_costing(&mut w, &claimed[0], 10);
    // 10 spent + 75 reserved + 25 > 100: still waits.
    assert!(claim_big(&mut w, "r-fifth").is_err());
    finish_costing(&mut w, &claimed[1], 10);
    // 20 + 50 + 25 = 95.
    assert!(matches!(claim_big(&mut w, "r-fifth"), Ok(Outcome::Run(_))));
    assert!(live_reserved(&w) + 20 <= 100);
}

#[test]
fn metering_extends_the_reservation_while_there_is_room_and_cancels_when_there_is_none() {
    let mut w = budget_world();
    assigned_issue(&mut w, "i1", "spender");
    claim_big(&mut w, "r1").expect("claimed");
    report(&mut w, "r1", 20).expect("within the reserve");
    assert_eq!(w.state.runs["r1"].reserved_cents, 25);
    report(&mut w, "r1", 30).expect("extended");
    assert_eq!(w.state.runs["r1"].reserved_cents, 55);
    report(&mut w, "r1", 90).expect("extended to the limit");
    assert_eq!(w.state.runs["r1"].reserved_cents, 100);
    let cancelled = report(&mut w, "r1", 120).expect("decided");
    match cancelled {
        Outcome::Run(r) => {
            assert_eq!(r.status, RunStatus::Cancelled);
            assert!(r
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("budget_exceeded")));
        }
        other => panic!("unexpected {other:?}"),
    }
    let policy = w.state.budget_policies["pol-c1"].clone();
    let spent = w.state.spent(&policy, Timestamp(w.index as i64 * 1000));
    assert_eq!(spent, 120, "settled at what it used");
    assert!(
        spent - policy.amount <= 120 - 90,
        "over by at most one report's growth"
    );
    assert_eq!(incidents(&w, IncidentKind::Hard).len(), 1);
    let agent = &w.state.agents["spender"];
    assert_eq!(
        (agent.status, agent.pause_reason),
        (AgentStatus::Paused, Some(PauseReason::Budget))
    );
}

#[test]
fn the_warning_fires_once_the_hard_stop_pauses_and_raise_and_resume_resumes() {
    let mut w = budget_world();
    let me = agent_actor("spender", "c1", None);
    cost(&mut w, me.clone(), "e1", "spender", 50).expect("cost");
    assert!(incidents(&w, IncidentKind::Soft).is_empty());
    cost(&mut w, me.clone(), "e2", "spender", 35).expect("cost");
    cost(&mut w, me.clone(), "e3", "spender", 5).expect("cost");
    assert_eq!(
        incidents(&w, IncidentKind::Soft).len(),
        1,
        "one warning at 80%"
    );
    assert_eq!(w.state.agents["spender"].status, AgentStatus::Active);
    // A wake now waits, and since spend leaves no room for a 25¢ run, the scope stops.
    assigned_issue(&mut w, "i1", "spender");
    assert!(matches!(claim_big(&mut w, "r1"), Ok(Outcome::Wake(_))));
    assert!(
        claim_big(&mut w, "r1").is_err(),
        "the paused agent is not claimed"
    );
    let hard = incidents(&w, IncidentKind::Hard);
    assert_eq!(hard.len(), 1, "one hard incident");
    let incident = hard[0].id.clone();
    assert_eq!(
        w.state.agents["spender"].pause_reason,
        Some(PauseReason::Budget)
    );

    let before = w.fingerprint();
    let low = w.run(
        admin(),
        Command::ResolveBudgetIncident {
            incident_id: incident.clone(),
            action: IncidentAction::RaiseAndResume,
            amount: Some(90),
        },
    );
    assert!(matches!(low, Err(DomainError::Invariant { .. })), "{low:?}");
    assert_eq!(w.fingerprint(), before);
    w.ok(
        admin(),
        Command::ResolveBudgetIncident {
            incident_id: incident,
            action: IncidentAction::RaiseAndResume,
            amount: Some(200),
        },
    );
    assert_eq!(w.state.agents["spender"].status, AgentStatus::Active);
    assert_eq!(w.state.budget_policies["pol-c1"].amount, 200);
    assert!(
        matches!(claim_big(&mut w, "r1"), Ok(Outcome::Run(_))),
        "the blocked wake runs"
    );
}

#[test]
fn a_month_boundary_opens_a_fresh_window() {
    let mut w = budget_world();
    assigned_issue(&mut w, "i1", "spender");
    w.run_at(
        FEB_1 - 1,
        agent_actor("spender", "c1", None),
        Command::RecordCostEvent {
            event: NewCostEvent {
                input_tokens: 0,
                output_tokens: 0,
                occurred_at: Some(Timestamp(FEB_1 - 1)),
                ..cost_event("jan", "spender", 90)
            },
        },
    )
    .expect("cost");
    let wake = pending(&w, "spender")[0].id.clone();
    let assign = |run: &str| Command::AssignRun {
        wake_id: wake.clone(),
        run_id: run.into(),
        worker_id: "big".into(),
        token_hash: None,
    };
    let mut jan = w.state.clone();
    let mut jan_world = World {
        state: std::mem::take(&mut jan),
        index: w.index,
    };
    let in_january = jan_world.run_at(FEB_1 - 1, admin(), assign("r-jan"));
    assert!(
        matches!(in_january, Ok(Outcome::Wake(_))),
        "90 + 25 > 100 in January: {in_january:?}"
    );
    let in_february = w.run_at(FEB_1, admin(), assign("r-feb"));
    assert!(
        matches!(in_february, Ok(Outcome::Run(_))),
        "February starts at 0: {in_february:?}"
    );
}

#[test]
fn bad_budget_input_is_refused_and_changes_nothing() {
    let mut w = budget_world();
    let before = w.fingerprint();
    let stranger = cost(&mut w, agent_actor("a1", "c1", None), "e1", "spender", 5);
    assert!(
        matches!(stranger, Err(DomainError::Forbidden { .. })),
        "{stranger:?}"
    );
    let unknown = cost(&mut w, admin(), "e2", "nobody", 5);
    assert!(
        matches!(unknown, Err(DomainError::NotFound { .. })),
        "{unknown:?}"
    );
    let project = set_budget(&mut w, BudgetScopeType::Project, "no-such-project", 100);
    assert!(
        matches!(project, Err(DomainError::NotFound { .. })),
        "{project:?}"
    );
    let other_company_agent = set_budget(&mut w, BudgetScopeType::Agent, "b1", 100);
    assert!(other_company_agent.is_err());
    let by_agent = w.run(
        agent_actor("spender", "c1", None),
        Command::SetBudgetPolicy {
            id: "p".into(),
            company_id: "c1".into(),
            scope_type: BudgetScopeType::Agent,
            scope_id: "spender".into(),
            window_kind: BudgetWindow::Lifetime,
            amount: 1_000_000,
            warn_percent: 80,
            hard_stop_enabled: false,
        },
    );
    assert!(matches!(by_agent, Err(DomainError::Forbidden { .. })));
    assert_eq!(w.fingerprint(), before);
    assert!(w.state.cost_events.is_empty());
}

#[test]
fn budgets_and_spend_survive_a_reload_from_rows() {
    let mut w = budget_world();
    cost(&mut w, admin(), "e1", "spender", 85).expect("cost");
    let rows = crate::state::StateRows {
        companies: w.state.companies.values().cloned().collect(),
        agents: w.state.agents.values().cloned().collect(),
        budget_policies: w.state.budget_policies.values().cloned().collect(),
        cost_events: w.state.cost_events.values().cloned().collect(),
        budget_incidents: w.state.budget_incidents.values().cloned().collect(),
        ..Default::default()
    };
    let reloaded = crate::state::State::from_rows(rows);
    let policy = &reloaded.budget_policies["pol-c1"];
    let now = Timestamp(w.index as i64 * 1000);
    assert_eq!(reloaded.spent(policy, now), 85);
    assert_eq!(reloaded.budget_incidents.len(), 1);
}

#[test]
fn a_cost_reported_by_an_ended_run_is_fenced_and_not_spent() {
    let mut w = budget_world();
    w.start_run("r1", "spender");
    let in_run = agent_actor("spender", "c1", Some("r1"));
    cost(&mut w, in_run.clone(), "e1", "spender", 10).expect("a live run reports its cost");
    finish(&mut w, "r1");
    let before = w.fingerprint();
    match cost(&mut w, in_run, "e2", "spender", 40) {
        Err(DomainError::StaleRun { run_id, status }) => {
            assert_eq!((run_id.as_str(), status.as_str()), ("r1", "succeeded"))
        }
        other => panic!("expected stale_run, got {other:?}"),
    }
    assert_eq!(w.fingerprint(), before);
    assert_eq!(
        w.state.cost_events.keys().collect::<Vec<_>>(),
        vec!["e1"],
        "only the live run's cost counts"
    );
    // An administrator may still record what an ended run spent.
    cost(&mut w, admin(), "e3", "spender", 40).expect("admin records after the run");
    // A live run reports its own spend: under its id when it names none, and never under
    // the ended run's.
    w.start_run("r2", "spender");
    let r2 = agent_actor("spender", "c1", Some("r2"));
    cost(&mut w, r2.clone(), "e4", "spender", 1).expect("r2 reports");
    assert_eq!(
        w.state.cost_events["e4"].heartbeat_run_id.as_deref(),
        Some("r2")
    );
    let before = w.fingerprint();
    let mut as_r1 = NewCostEvent {
        heartbeat_run_id: Some("r1".into()),
        ..cost_event("e5", "spender", 40)
    };
    let refused = w.run(
        r2.clone(),
        Command::RecordCostEvent {
            event: as_r1.clone(),
        },
    );
    assert!(
        matches!(refused, Err(DomainError::Forbidden { .. })),
        "{refused:?}"
    );
    assert_eq!(w.fingerprint(), before);
    as_r1.heartbeat_run_id = Some("r2".into());
    w.run(r2, Command::RecordCostEvent { event: as_r1 })
        .expect("its own id named");
}

/// Paperclip's `biller` and `billingType` are kept as reported, read as the provider and
/// `unknown` when not, and left out of entries and rows that do not carry them (older ones).
#[test]
fn a_cost_keeps_its_biller_and_billing_type_and_old_entries_read_without_them() {
    let mut w = budget_world();
    let billed = NewCostEvent {
        biller: Some("openrouter".into()),
        billing_type: Some(BillingType::SubscriptionIncluded),
        ..cost_event("billed", "spender", 3)
    };
    w.run(admin(), Command::RecordCostEvent { event: billed })
        .expect("billed cost");
    cost(&mut w, admin(), "plain", "spender", 4).expect("plain cost");
    let billed = &w.state.cost_events["billed"];
    assert_eq!(
        (billed.biller(), billed.billing_type()),
        ("openrouter", BillingType::SubscriptionIncluded)
    );
    let plain = &w.state.cost_events["plain"];
    assert_eq!(
        (plain.biller(), plain.billing_type()),
        ("anthropic", BillingType::Unknown)
    );
    let row = serde_json::to_value(plain).expect("row JSON");
    assert!(
        row.get("biller").is_none() && row.get("billingType").is_none(),
        "{row}"
    );
    let entry = serde_json::to_value(cost_event("old", "spender", 1)).expect("entry JSON");
    assert!(entry.get("biller").is_none(), "{entry}");
    let back: NewCostEvent = serde_json::from_value(entry).expect("an older entry");
    assert_eq!(back.billing_type, None);
    // A biller past the bound is refused and changes nothing.
    let before = w.fingerprint();
    let long = NewCostEvent {
        biller: Some("b".repeat(101)),
        ..cost_event("long", "spender", 1)
    };
    let refused = w.run(admin(), Command::RecordCostEvent { event: long });
    assert!(
        matches!(&refused, Err(DomainError::Invalid { field, .. }) if field == "biller"),
        "{refused:?}"
    );
    assert_eq!(w.fingerprint(), before);
}
