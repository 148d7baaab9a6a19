//! Routine rules (`rules/routine.rs`) through `State::apply`, on a fixed clock.

use serde_json::json;

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::routine::*;
use crate::routine_command::*;
use crate::scheduling::{alerts_due, due_firings};
use crate::time::Timestamp;

const T0: i64 = 1_800_000_000_000;
const MIN: i64 = 60_000;

fn routine_cmd(cmd: RoutineCommand) -> Command {
    Command::Routine { routine: cmd }
}

fn fields(concurrency: ConcurrencyPolicy, catch_up: CatchUpPolicy) -> RoutineFields {
    RoutineFields {
        title: "Daily report for {{team}}".into(),
        description: Some("Write the report.".into()),
        assignee_agent_id: Some("a1".into()),
        priority: Priority::High,
        status: RoutineStatus::Active,
        concurrency_policy: concurrency,
        catch_up_policy: catch_up,
        variables: json!([{ "name": "team", "defaultValue": "core" }]),
        project_id: None,
        goal_id: None,
        parent_issue_id: None,
        action: RoutineAction::Issue,
        failure_alert_after: 3,
    }
}

/// A routine `r1` of company c1 (agent a1) with a schedule trigger `t1`, created at `T0`.
fn setup(w: &mut World, f: RoutineFields, expr: &str) {
    let create = RoutineCommand::Create {
        id: "r1".into(),
        company_id: "c1".into(),
        fields: f,
    };
    w.run_at(T0, admin(), routine_cmd(create))
        .expect("routine created");
    let trigger = RoutineCommand::CreateTrigger {
        id: "t1".into(),
        routine_id: "r1".into(),
        trigger: NewTrigger {
            kind: TriggerKind::Schedule,
            label: None,
            enabled: true,
            cron_expression: Some(expr.into()),
            timezone: None,
            public_id: None,
            signing_mode: None,
            replay_window_sec: None,
            secret: None,
        },
    };
    w.run_at(T0, admin(), routine_cmd(trigger))
        .expect("trigger created");
}

fn fire_cmd(w: &World, trigger: &str, at: Timestamp) -> Command {
    fire_staggered(w, trigger, at, 0)
}

fn fire_staggered(w: &World, trigger: &str, at: Timestamp, stagger_ms: u64) -> Command {
    let n = w.index + 1;
    routine_cmd(RoutineCommand::Fire {
        trigger_id: trigger.into(),
        scheduled_for: at,
        run_id: format!("rr{n}"),
        issue_id: format!("ri{n}"),
        stagger_ms,
    })
}

/// What the leader's duty does at `now`: proposes every due firing until none is due.
fn tick(w: &mut World, now: i64) -> usize {
    let mut fired = 0;
    for _ in 0..1000 {
        let due = due_firings(&w.state, Timestamp(now), 0);
        if due.is_empty() {
            return fired;
        }
        for f in due {
            let cmd = fire_staggered(w, &f.trigger_id, f.scheduled_for, f.stagger_ms);
            w.run_at(now, Actor::system(), cmd)
                .expect("a due firing applies");
            fired += 1;
        }
    }
    panic!("the duty never ran out of due firings");
}

fn runs(w: &World) -> Vec<RoutineRun> {
    let mut v: Vec<RoutineRun> = w.state.routines.runs_of("r1").cloned().collect();
    v.reverse();
    v
}

fn close(w: &mut World, issue: &str, status: IssueStatus, at: i64) {
    let patch = IssuePatch {
        status: Some(status),
        ..Default::default()
    };
    w.run_at(
        at,
        admin(),
        Command::UpdateIssue {
            issue_id: issue.into(),
            patch,
            comment: None,
        },
    )
    .expect("issue closed");
}

#[test]
fn a_firing_opens_the_templated_issue_wakes_its_agent_and_applies_once() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::AlwaysEnqueue, CatchUpPolicy::SkipMissed),
        "every 1m",
    );
    let due = T0 + MIN;
    assert_eq!(tick(&mut w, due - 1), 0, "not before its instant");
    let cmd = fire_cmd(&w, "t1", Timestamp(due));
    assert!(
        w.run_at(due - 1, Actor::system(), cmd).is_err(),
        "a firing proposed early is refused"
    );
    assert_eq!(tick(&mut w, due), 1);
    let run = &runs(&w)[0];
    assert_eq!(run.status, RoutineRunStatus::IssueCreated);
    assert_eq!(run.scheduled_for, Some(Timestamp(due)));
    let issue = &w.state.issues[run.linked_issue_id.as_deref().expect("linked")];
    assert_eq!(issue.title, "Daily report for core");
    assert_eq!(issue.assignee_agent_id.as_deref(), Some("a1"));
    assert_eq!(issue.priority, Priority::High);
    assert!(
        wakes_of(&w, "a1")
            .iter()
            .any(|x| x.reason == WakeReason::IssueAssigned
                && x.issue_id.as_deref() == Some(&issue.id)),
        "the assignee is woken"
    );
    // A second leader proposing the same instant (a failover) changes nothing.
    let before = w.state.hash();
    let again = fire_cmd(&w, "t1", Timestamp(due));
    assert!(w.run_at(due + 500, Actor::system(), again).is_err());
    assert_eq!(w.state.hash(), before, "a refused duplicate writes nothing");
    assert_eq!(
        w.state.routines.triggers["t1"].next_run_at,
        Some(Timestamp(due + MIN))
    );
}

#[test]
fn catch_up_after_a_long_downtime_makes_at_most_25_firings() {
    let mut w = World::new();
    let f = fields(
        ConcurrencyPolicy::AlwaysEnqueue,
        CatchUpPolicy::EnqueueMissedWithCap,
    );
    setup(&mut w, f, "every 1m");
    // Down for 100 minutes: instants 1..=100 are due.
    let now = T0 + 100 * MIN + 1_000;
    tick(&mut w, now);
    let all = runs(&w);
    let created: Vec<_> = all
        .iter()
        .filter(|r| r.status == RoutineRunStatus::IssueCreated)
        .collect();
    assert_eq!(created.len(), MAX_CATCH_UP_RUNS as usize);
    let instants: Vec<i64> = created.iter().map(|r| r.scheduled_for.unwrap().0).collect();
    let expected: Vec<i64> = (1..=25).map(|k| T0 + k * MIN).collect();
    assert_eq!(instants, expected, "the oldest 25, each once, in order");
    let dropped = all.last().expect("a last run");
    assert_eq!(dropped.status, RoutineRunStatus::Skipped);
    assert!(dropped
        .failure_reason
        .as_deref()
        .unwrap_or("")
        .contains("at most 25"));
    assert_eq!(all.len(), 26);
    assert_eq!(
        w.state.routines.triggers["t1"].next_run_at,
        Some(Timestamp(T0 + 101 * MIN)),
        "the schedule resumes after now"
    );
    // Back to normal: the next instant fires on time, once.
    assert_eq!(tick(&mut w, T0 + 101 * MIN), 1);
}

/// Regression (found by the fault suite's routine check): a routine whose stagger (2.7 s)
/// is longer than its period (`every 2s`) looked late at every firing, so after 25 firings
/// on time the 26th instant was dropped as if the cluster had been down.
#[test]
fn a_stagger_longer_than_the_period_drops_no_firing() {
    let mut w = World::new();
    let f = fields(
        ConcurrencyPolicy::AlwaysEnqueue,
        CatchUpPolicy::EnqueueMissedWithCap,
    );
    setup(&mut w, f, "every 2s");
    let stagger = 2_700u64;
    for k in 1..=60i64 {
        let at = Timestamp(T0 + k * 2_000);
        // The leader fires each instant once its stagger has passed (and a tick later).
        let now = at.0 + stagger as i64 + 150;
        let cmd = fire_staggered(&w, "t1", at, stagger);
        w.run_at(now, Actor::system(), cmd)
            .expect("each instant fires");
    }
    let all = runs(&w);
    assert_eq!(all.len(), 60, "one run per instant, none dropped");
    assert!(all
        .iter()
        .all(|r| r.status == RoutineRunStatus::IssueCreated));
    assert_eq!(
        w.state.routines.triggers["t1"].next_run_at,
        Some(Timestamp(T0 + 61 * 2_000))
    );
}

#[test]
fn skip_missed_fires_once_after_downtime() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::AlwaysEnqueue, CatchUpPolicy::SkipMissed),
        "every 1m",
    );
    assert_eq!(tick(&mut w, T0 + 100 * MIN + 1_000), 1);
    assert_eq!(
        w.state.routines.triggers["t1"].next_run_at,
        Some(Timestamp(T0 + 101 * MIN))
    );
}

#[test]
fn skip_if_active_skips_while_the_issue_is_open_and_fires_again_once_it_is_done() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::SkipIfActive, CatchUpPolicy::SkipMissed),
        "every 1m",
    );
    tick(&mut w, T0 + MIN);
    tick(&mut w, T0 + 2 * MIN);
    let r = runs(&w);
    assert_eq!(r[1].status, RoutineRunStatus::Skipped);
    assert_eq!(
        r[1].linked_issue_id, r[0].linked_issue_id,
        "names the active issue"
    );
    let first_issue = r[0].linked_issue_id.clone().expect("an issue");
    close(&mut w, &first_issue, IssueStatus::Done, T0 + 2 * MIN + 1);
    assert_eq!(
        runs(&w)[0].status,
        RoutineRunStatus::Completed,
        "the outcome follows the issue"
    );
    tick(&mut w, T0 + 3 * MIN);
    assert_eq!(runs(&w)[2].status, RoutineRunStatus::IssueCreated);
}

#[test]
fn coalesce_if_active_links_the_firing_to_the_run_that_opened_the_issue() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(
            ConcurrencyPolicy::CoalesceIfActive,
            CatchUpPolicy::SkipMissed,
        ),
        "every 1m",
    );
    tick(&mut w, T0 + MIN);
    tick(&mut w, T0 + 2 * MIN);
    let r = runs(&w);
    assert_eq!(r[1].status, RoutineRunStatus::Coalesced);
    assert_eq!(
        r[1].coalesced_into_run_id.as_deref(),
        Some(r[0].id.as_str())
    );
    assert_eq!(w.state.issues.len(), 1, "no second issue");
}

#[test]
fn consecutive_failures_open_one_alert_for_the_owner() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::AlwaysEnqueue, CatchUpPolicy::SkipMissed),
        "every 1m",
    );
    // The first firing's issue is cancelled: a failure.
    tick(&mut w, T0 + MIN);
    let first = runs(&w)[0].linked_issue_id.clone().expect("an issue");
    close(&mut w, &first, IssueStatus::Cancelled, T0 + MIN + 1);
    assert_eq!(runs(&w)[0].status, RoutineRunStatus::Failed);
    // Its agent is terminated: the next firings fail to open their issue.
    w.run_at(
        T0 + MIN + 2,
        admin(),
        Command::TerminateAgent {
            agent_id: "a1".into(),
        },
    )
    .expect("terminated");
    tick(&mut w, T0 + 2 * MIN);
    assert!(
        alerts_due(&w.state).is_empty(),
        "two failures: no alert yet"
    );
    tick(&mut w, T0 + 3 * MIN);
    let last = runs(&w).pop().expect("a run");
    assert_eq!(last.status, RoutineRunStatus::Failed);
    assert!(last
        .failure_reason
        .as_deref()
        .unwrap_or("")
        .contains("terminated"));
    assert_eq!(alerts_due(&w.state), vec!["r1".to_string()]);
    let alert = routine_cmd(RoutineCommand::Alert {
        routine_id: "r1".into(),
        issue_id: "alert1".into(),
    });
    w.run_at(T0 + 3 * MIN + 1, Actor::system(), alert.clone())
        .expect("alert opened");
    let issue = &w.state.issues["alert1"];
    assert!(
        issue.title.contains("failed 3 times in a row"),
        "{}",
        issue.title
    );
    assert_eq!(
        issue.assignee_user_id.as_deref(),
        Some("admin"),
        "the owner who created it"
    );
    assert!(alerts_due(&w.state).is_empty(), "once per streak");
    assert!(w.run_at(T0 + 3 * MIN + 2, Actor::system(), alert).is_err());
}

#[test]
fn pause_stops_firings_and_resume_does_not_make_them_up() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(
            ConcurrencyPolicy::AlwaysEnqueue,
            CatchUpPolicy::EnqueueMissedWithCap,
        ),
        "every 1m",
    );
    let pause = |s| {
        routine_cmd(RoutineCommand::Update {
            routine_id: "r1".into(),
            patch: RoutinePatch {
                status: Some(s),
                ..Default::default()
            },
        })
    };
    w.run_at(T0 + 1, admin(), pause(RoutineStatus::Paused))
        .expect("paused");
    assert_eq!(tick(&mut w, T0 + 10 * MIN), 0);
    w.run_at(T0 + 10 * MIN + 1, admin(), pause(RoutineStatus::Active))
        .expect("resumed");
    assert_eq!(
        w.state.routines.triggers["t1"].next_run_at,
        Some(Timestamp(T0 + 11 * MIN))
    );
    assert_eq!(tick(&mut w, T0 + 11 * MIN), 1);
}

#[test]
fn a_manual_run_with_a_key_applies_once_and_an_agent_of_another_company_cannot_see_it() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::AlwaysEnqueue, CatchUpPolicy::SkipMissed),
        "every 1h",
    );
    let run = |n: &str| {
        routine_cmd(RoutineCommand::Run {
            request: RunRequest {
                routine_id: "r1".into(),
                trigger_id: None,
                source: RunSource::Manual,
                payload: serde_json::Value::Null,
                variables: json!({ "team": "infra" }),
                assignee_agent_id: None,
                idempotency_key: Some("k1".into()),
            },
            run_id: format!("m{n}"),
            issue_id: format!("mi{n}"),
        })
    };
    w.run_at(T0 + 1, admin(), run("1")).expect("ran");
    assert_eq!(w.state.issues["mi1"].title, "Daily report for infra");
    let again = w
        .run_at(T0 + 2, admin(), run("2"))
        .expect("the first run again");
    match again {
        Outcome::Routine(RoutineOutcome::Run { run }) => assert_eq!(run.id, "m1"),
        other => panic!("{other:?}"),
    }
    assert!(!w.state.issues.contains_key("mi2"));
    let err = w
        .run_at(T0 + 3, agent_actor("b1", "c2", None), run("3"))
        .expect_err("another company's agent");
    assert!(
        matches!(err, crate::error::DomainError::NotFound { .. }),
        "{err:?}"
    );
}

#[test]
fn a_wake_routine_wakes_its_agent_with_reason_routine() {
    let mut w = World::new();
    let mut f = fields(ConcurrencyPolicy::SkipIfActive, CatchUpPolicy::SkipMissed);
    f.action = RoutineAction::Wake;
    setup(&mut w, f, "every 1m");
    tick(&mut w, T0 + MIN);
    let run = &runs(&w)[0];
    let wake = &w.state.wakes[run.linked_wake_id.as_deref().expect("a wake")];
    assert_eq!(wake.reason, WakeReason::Routine);
    assert_eq!(wake.agent_id, "a1");
    assert_eq!(wake.payload["routineId"], "r1");
    // Still pending at the next instant: skipped.
    tick(&mut w, T0 + 2 * MIN);
    assert_eq!(runs(&w)[1].status, RoutineRunStatus::Skipped);
}

#[test]
fn routines_survive_a_reload_with_the_same_hash() {
    let mut w = World::new();
    setup(
        &mut w,
        fields(ConcurrencyPolicy::AlwaysEnqueue, CatchUpPolicy::SkipMissed),
        "0 9 * * *",
    );
    tick(&mut w, T0 + 2 * 86_400_000);
    let mut reloaded = super::memory_tests::reloaded(&w.state);
    let rs = &w.state.routines;
    reloaded.load_routines(
        rs.routines.values().cloned().collect(),
        rs.triggers.values().cloned().collect(),
        rs.runs.values().cloned().collect(),
    );
    assert_eq!(reloaded.hash(), w.state.hash());
    assert_eq!(reloaded.full_hash(), w.state.full_hash());
}
