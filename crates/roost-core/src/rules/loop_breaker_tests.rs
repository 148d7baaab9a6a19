//! The loop breaker's checks at their boundaries, on a fixed clock (`rules/loop_breaker.rs`).

use super::super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::loop_breaker::{LoopBreaker, LoopKind, LoopPolicy};
use crate::state::State;

const MIN: i64 = 60_000;
/// The clock the tests start at (any time far from 0).
const T0: i64 = 1_700_000_000_000;

/// Only the checks a test names: every other count is off.
fn only(window: u32, issue: u32, ping_pong: u32, runs: u32) -> LoopBreaker {
    LoopBreaker {
        enabled: None,
        window_minutes: Some(window),
        issue_wakes: Some(issue),
        ping_pong_wakes: Some(ping_pong),
        run_window_minutes: Some(window),
        run_wakes: Some(runs),
    }
}

fn set_company(w: &mut World, lb: LoopBreaker) {
    let patch = CompanyPatch {
        loop_breaker: Some(lb),
        ..Default::default()
    };
    let command = Command::UpdateCompany {
        company_id: "c1".into(),
        patch,
    };
    w.run_at(T0 - MIN, admin(), command)
        .expect("company patched");
}

fn set_agent(w: &mut World, agent: &str, lb: LoopBreaker) {
    let patch = AgentPatch {
        loop_breaker: Some(lb),
        ..Default::default()
    };
    let command = Command::UpdateAgent {
        agent_id: agent.into(),
        patch,
    };
    w.run_at(T0 - MIN, admin(), command).expect("agent patched");
}

/// A backlog issue with no assignee: only mentions wake anyone on it.
fn open_issue(w: &mut World, id: &str) {
    let command = Command::CreateIssue {
        id: id.into(),
        company_id: "c1".into(),
        fields: IssuePatch {
            title: Some(format!("issue {id}")),
            ..Default::default()
        },
    };
    w.run_at(T0 - MIN, admin(), command).expect("issue created");
}

/// `from` comments on `issue` at `at_ms`, mentioning `to` when given.
fn say(w: &mut World, at_ms: i64, from: &str, issue: &str, to: Option<&str>) {
    let n = w.index + 1;
    let body = to.map_or_else(|| "working".to_string(), |to| format!("@{to} your turn"));
    let command = Command::AddComment {
        issue_id: issue.into(),
        comment: NewComment {
            id: format!("cm{n}"),
            body,
        },
    };
    w.run_at(at_ms, agent_actor(from, "c1", None), command)
        .expect("comment accepted");
}

fn status(w: &World, agent: &str) -> (AgentStatus, Option<PauseReason>) {
    let a = &w.state.agents[agent];
    (a.status, a.pause_reason)
}

fn loop_incidents(state: &State) -> Vec<&BudgetIncident> {
    state
        .budget_incidents
        .values()
        .filter(|i| i.kind == IncidentKind::WakeLoop)
        .collect()
}

const PAUSED: (AgentStatus, Option<PauseReason>) =
    (AgentStatus::Paused, Some(PauseReason::LoopDetected));
const ACTIVE: (AgentStatus, Option<PauseReason>) = (AgentStatus::Active, None);

/// a1 and a2 mention each other `hops` times, a minute apart, from `start`.
fn ping_pong(w: &mut World, start: i64, hops: usize) {
    for n in 0..hops {
        let (from, to) = if n % 2 == 0 {
            ("a1", "a2")
        } else {
            ("a2", "a1")
        };
        say(w, start + n as i64 * MIN, from, "i1", Some(to));
    }
}

#[test]
fn a_ping_pong_trips_at_n_wakes_pausing_both_with_one_incident() {
    let mut w = world();
    set_company(&mut w, only(30, 0, 4, 0));
    open_issue(&mut w, "i1");
    ping_pong(&mut w, T0, 3);
    assert_eq!(status(&w, "a1"), ACTIVE, "3 of 4 wakes do not trip");
    assert_eq!(status(&w, "a2"), ACTIVE);
    assert!(loop_incidents(&w.state).is_empty());
    say(&mut w, T0 + 3 * MIN, "a2", "i1", Some("a1"));
    assert_eq!(status(&w, "a1"), PAUSED, "the 4th wake trips");
    assert_eq!(status(&w, "a2"), PAUSED, "both agents of the pair");
    let incidents = loop_incidents(&w.state);
    assert_eq!(incidents.len(), 1, "one incident for the pair");
    let l = incidents[0].wake_loop.as_ref().expect("loop details");
    assert_eq!(l.loop_kind, LoopKind::PingPong);
    assert_eq!(l.agent_ids, vec!["a1".to_string(), "a2".to_string()]);
    assert_eq!(l.issue_ids, vec!["i1".to_string()]);
    assert_eq!((l.count, l.threshold, l.wake_ids.len()), (4, 4, 4));
    assert_eq!(incidents[0].status, IncidentStatus::Open);
    // The tripping wake is skipped and no wake of either agent is left to start.
    let tripping = &w.state.wakes[l.wake_ids.last().expect("a wake")];
    assert_eq!(tripping.status, WakeStatus::Skipped);
    assert!(tripping
        .status_reason
        .as_deref()
        .is_some_and(|r| r.starts_with("loop_detected: ping_pong")));
    assert!(pending(&w, "a1").is_empty() && pending(&w, "a2").is_empty());
    // Budget incidents keep Paperclip's JSON; a loop incident adds `wakeLoop`.
    let json = serde_json::to_value(incidents[0]).expect("json");
    assert_eq!(json["kind"], "wake_loop");
    assert_eq!(json["wakeLoop"]["loopKind"], "ping_pong");
    // Further mentions while paused are skipped, and open no second incident.
    say(&mut w, T0 + 4 * MIN, "a1", "i1", Some("a2"));
    assert_eq!(loop_incidents(&w.state).len(), 1);
    assert_eq!(
        wakes_of(&w, "a2").last().map(|x| x.status),
        Some(WakeStatus::Skipped)
    );
}

#[test]
fn a_ping_pong_window_slides_past_its_oldest_wake() {
    let mut w = world();
    set_company(&mut w, only(10, 0, 3, 0));
    open_issue(&mut w, "i1");
    say(&mut w, T0, "a1", "i1", Some("a2"));
    say(&mut w, T0 + 5 * MIN, "a2", "i1", Some("a1"));
    // Exactly 10 minutes after the first wake it has left the window: 2 alternations.
    say(&mut w, T0 + 10 * MIN, "a1", "i1", Some("a2"));
    assert_eq!(status(&w, "a2"), ACTIVE);
    // (T0+1min, T0+11min] holds a1 (5), a2 (10), a1 (11): three alternations.
    say(&mut w, T0 + 11 * MIN, "a2", "i1", Some("a1"));
    assert_eq!(status(&w, "a1"), PAUSED);
    assert_eq!(status(&w, "a2"), PAUSED);
}

#[test]
fn wakes_in_one_direction_count_once() {
    let mut w = world();
    set_company(&mut w, only(30, 0, 3, 0));
    open_issue(&mut w, "i1");
    for n in 0..5 {
        say(&mut w, T0 + n * MIN, "a1", "i1", Some("a2"));
    }
    say(&mut w, T0 + 5 * MIN, "a2", "i1", Some("a1"));
    assert_eq!(
        status(&w, "a1"),
        ACTIVE,
        "a1→a2 ×5 then a2→a1 is 2 alternations"
    );
    say(&mut w, T0 + 6 * MIN, "a1", "i1", Some("a2"));
    assert_eq!(status(&w, "a2"), PAUSED);
}

/// a2 is the assignee; a1's comments wake it (issue_commented), no ping-pong.
fn churn_world(window: u32, n: u32) -> World {
    let mut w = world();
    set_company(&mut w, only(window, n, 0, 0));
    let command = Command::CreateIssue {
        id: "i1".into(),
        company_id: "c1".into(),
        fields: IssuePatch {
            title: Some("churn".into()),
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some("a2".into())),
            ..Default::default()
        },
    };
    w.run_at(T0 - MIN, admin(), command).expect("issue");
    w
}

fn set_status(w: &mut World, at_ms: i64, status: IssueStatus) {
    let command = Command::UpdateIssue {
        issue_id: "i1".into(),
        patch: IssuePatch {
            status: Some(status),
            ..Default::default()
        },
        comment: None,
    };
    w.run_at(at_ms, admin(), command).expect("status changed");
}

#[test]
fn issue_churn_trips_at_n_wakes_and_not_before() {
    let mut w = churn_world(30, 5);
    for n in 0..4 {
        say(&mut w, T0 + n * MIN, "a1", "i1", None);
    }
    assert_eq!(status(&w, "a2"), ACTIVE, "4 of 5 wakes");
    say(&mut w, T0 + 4 * MIN, "a1", "i1", None);
    assert_eq!(status(&w, "a2"), PAUSED);
    assert_eq!(status(&w, "a1"), ACTIVE, "a1 was never woken");
    let incidents = loop_incidents(&w.state);
    let l = incidents[0].wake_loop.as_ref().expect("details");
    assert_eq!(l.loop_kind, LoopKind::IssueChurn);
    assert_eq!(l.issue_ids, vec!["i1".to_string()]);
    assert_eq!(l.agent_ids, vec!["a2".to_string()]);
    assert_eq!(l.wake_ids.len(), 5);
}

#[test]
fn a_status_change_resets_issue_churn() {
    let mut w = churn_world(30, 5);
    for n in 0..4 {
        say(&mut w, T0 + n * MIN, "a1", "i1", None);
    }
    set_status(&mut w, T0 + 4 * MIN, IssueStatus::Blocked);
    assert_eq!(
        w.state.issues["i1"].status_changed_at.map(|t| t.0),
        Some(T0 + 4 * MIN)
    );
    for n in 5..9 {
        say(&mut w, T0 + n * MIN, "a1", "i1", None);
    }
    assert_eq!(status(&w, "a2"), ACTIVE, "4 wakes since the change");
    say(&mut w, T0 + 9 * MIN, "a1", "i1", None);
    assert_eq!(status(&w, "a2"), PAUSED, "the 5th since the change trips");
}

#[test]
fn issue_churn_window_slides() {
    let mut w = churn_world(10, 3);
    say(&mut w, T0, "a1", "i1", None);
    say(&mut w, T0 + 5 * MIN, "a1", "i1", None);
    say(&mut w, T0 + 10 * MIN, "a1", "i1", None);
    assert_eq!(status(&w, "a2"), ACTIVE, "the first is 10 minutes old: out");
    say(&mut w, T0 + 10 * MIN + 1, "a1", "i1", None);
    assert_eq!(status(&w, "a2"), PAUSED);
}

fn self_wake(w: &mut World, at_ms: i64, agent: &str, issue: &str) {
    let command = Command::Wakeup {
        id: format!("wk{}", w.index + 1),
        agent_id: agent.into(),
        issue_id: Some(issue.into()),
        reason: WakeReason::OnDemand,
        payload: serde_json::Value::Null,
        wake_key: None,
    };
    w.run_at(at_ms, agent_actor(agent, "c1", None), command)
        .expect("wake");
}

#[test]
fn the_run_cap_trips_at_n_run_starting_wakes_in_its_window() {
    let mut w = world();
    set_company(&mut w, only(60, 0, 0, 3));
    for i in ["i1", "i2", "i3", "i4"] {
        open_issue(&mut w, i);
    }
    self_wake(&mut w, T0, "a1", "i1");
    self_wake(&mut w, T0 + 30 * MIN, "a1", "i2");
    // A wake merged into a pending one starts no run of its own.
    self_wake(&mut w, T0 + 31 * MIN, "a1", "i2");
    // The first left the window: two remain with this one.
    self_wake(&mut w, T0 + 60 * MIN, "a1", "i3");
    assert_eq!(status(&w, "a1"), ACTIVE);
    self_wake(&mut w, T0 + 61 * MIN, "a1", "i4");
    assert_eq!(status(&w, "a1"), PAUSED);
    let l = loop_incidents(&w.state)[0]
        .wake_loop
        .clone()
        .expect("details");
    assert_eq!(l.loop_kind, LoopKind::RunCap);
    assert_eq!(l.agent_ids, vec!["a1".to_string()]);
    assert_eq!(l.count, 3);
}

#[test]
fn an_operators_wakes_never_count() {
    let mut w = churn_world(30, 2);
    for n in 0..5 {
        let command = Command::AddComment {
            issue_id: "i1".into(),
            comment: NewComment {
                id: format!("op{n}"),
                body: "please look".into(),
            },
        };
        w.run_at(T0 + n * MIN, admin(), command).expect("comment");
    }
    assert_eq!(status(&w, "a2"), ACTIVE);
}

#[test]
fn resuming_resets_the_window_and_the_incident_resume_resumes_the_pair() {
    let mut w = world();
    set_company(&mut w, only(30, 0, 3, 0));
    open_issue(&mut w, "i1");
    ping_pong(&mut w, T0, 3);
    assert_eq!(status(&w, "a1"), PAUSED);
    for a in ["a1", "a2"] {
        let resume = Command::ResumeAgent { agent_id: a.into() };
        w.run_at(T0 + 3 * MIN, admin(), resume).expect("resumed");
    }
    // Two more alternations: counted from the resume only, so no trip.
    say(&mut w, T0 + 4 * MIN, "a1", "i1", Some("a2"));
    say(&mut w, T0 + 5 * MIN, "a2", "i1", Some("a1"));
    assert_eq!(status(&w, "a1"), ACTIVE);
    assert_eq!(status(&w, "a2"), ACTIVE);
    say(&mut w, T0 + 6 * MIN, "a1", "i1", Some("a2"));
    assert_eq!(
        status(&w, "a2"),
        PAUSED,
        "three since the resume trip again"
    );
    let open: Vec<String> = loop_incidents(&w.state)
        .into_iter()
        .filter(|i| i.status == IncidentStatus::Open)
        .map(|i| i.id.clone())
        .collect();
    assert_eq!(open.len(), 2);
    let resolve = |id: &str, action| Command::ResolveBudgetIncident {
        incident_id: id.into(),
        action,
        amount: None,
    };
    let refused = w.run_at(
        T0 + 7 * MIN,
        admin(),
        resolve(&open[1], IncidentAction::RaiseAndResume),
    );
    assert!(refused.is_err(), "no budget to raise: {refused:?}");
    w.run_at(
        T0 + 7 * MIN,
        admin(),
        resolve(&open[1], IncidentAction::Resume),
    )
    .expect("resolved");
    assert_eq!(status(&w, "a1"), ACTIVE);
    assert_eq!(status(&w, "a2"), ACTIVE);
    assert_eq!(
        w.state.agents["a2"].loop_window_since.map(|t| t.0),
        Some(T0 + 7 * MIN)
    );
}

#[test]
fn thresholds_resolve_agent_over_company_over_default_and_disable() {
    let mut w = world();
    set_company(
        &mut w,
        LoopBreaker {
            issue_wakes: Some(7),
            ..Default::default()
        },
    );
    set_agent(
        &mut w,
        "a1",
        LoopBreaker {
            issue_wakes: Some(3),
            enabled: Some(false),
            ..Default::default()
        },
    );
    let p1 = super::policy_of(&w.state, &w.state.agents["a1"]);
    let p2 = super::policy_of(&w.state, &w.state.agents["a2"]);
    assert_eq!((p1.enabled, p1.issue_wakes), (false, 3));
    assert_eq!((p2.enabled, p2.issue_wakes), (true, 7));
    assert_eq!(p2.ping_pong_wakes, LoopPolicy::DEFAULT.ping_pong_wakes);
    // Disabled on both agents: no ping-pong trips whatever the count.
    set_agent(
        &mut w,
        "a2",
        LoopBreaker {
            enabled: Some(false),
            ..Default::default()
        },
    );
    open_issue(&mut w, "i1");
    ping_pong(&mut w, T0, 12);
    assert_eq!(status(&w, "a1"), ACTIVE);
    assert_eq!(status(&w, "a2"), ACTIVE);
    // Out-of-range settings are refused by the limits, before the rules.
    let patch = AgentPatch {
        loop_breaker: Some(LoopBreaker {
            window_minutes: Some(24 * 60 + 1),
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = w.run_at(
        T0,
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch,
        },
    );
    let message = format!("{:?}", refused.expect_err("over a day"));
    assert!(message.contains("loopBreaker.windowMinutes"), "{message}");
}

/// The window is derived from the wakes: a state rebuilt from its rows trips at the same wake
/// as the one that applied every entry.
#[test]
fn a_state_reloaded_from_rows_trips_at_the_same_wake() {
    let mut w = world();
    set_company(&mut w, only(30, 0, 4, 0));
    open_issue(&mut w, "i1");
    ping_pong(&mut w, T0, 3);
    let rows = crate::state::StateRows {
        companies: w.state.companies.values().cloned().collect(),
        agents: w.state.agents.values().cloned().collect(),
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        runs: w.state.runs.values().cloned().collect(),
        credentials: w.state.credentials.values().cloned().collect(),
        comments: w
            .state
            .comments
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        wakes: w.state.wakes.values().cloned().collect(),
        workers: w.state.workers.values().cloned().collect(),
        budget_incidents: w.state.budget_incidents.values().cloned().collect(),
        activity_seq: w.state.activity_seq,
        activity_head: Some(w.state.activity_head.clone()),
        ..Default::default()
    };
    let mut reloaded = World {
        state: State::from_rows(rows),
        index: w.index,
    };
    assert_eq!(
        reloaded.state.recent_wakes.len(),
        w.state.recent_wakes.len()
    );
    say(&mut w, T0 + 3 * MIN, "a2", "i1", Some("a1"));
    say(&mut reloaded, T0 + 3 * MIN, "a2", "i1", Some("a1"));
    assert_eq!(status(&reloaded, "a1"), PAUSED);
    assert_eq!(reloaded.state.hash(), w.state.hash());
}
