//! Transition tests for wakes, runs on workers and lost workers.

use std::collections::BTreeMap;

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::rules::run::claim_blocker;

use super::test_world::*;

#[test]
fn assignment_wakes_the_assignee_unless_the_issue_is_parked() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    w.issue(
        "i2",
        "c1",
        IssuePatch {
            assignee_agent_id: Some(Some("a2".into())),
            status: Some(IssueStatus::Backlog),
            ..Default::default()
        },
    );
    let a1 = pending(&w, "a1");
    assert_eq!(a1.len(), 1);
    assert_eq!(
        (a1[0].reason, a1[0].status, a1[0].issue_id.as_deref()),
        (WakeReason::IssueAssigned, WakeStatus::Queued, Some("i1"))
    );
    assert!(
        wakes_of(&w, "a2").is_empty(),
        "a backlog issue wakes nobody"
    );
    // Moving it to todo is the moment it becomes work.
    w.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "i2".into(),
            patch: IssuePatch {
                status: Some(IssueStatus::Todo),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert_eq!(pending(&w, "a2")[0].reason, WakeReason::IssueStatusChanged);
}

#[test]
fn an_agents_own_comment_never_wakes_it() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").unwrap();
    comment(
        &mut w,
        agent_actor("a1", "c1", Some(&run.id)),
        "i1",
        "cm1",
        "progress note",
    );
    let own = wakes_of(&w, "a1")
        .into_iter()
        .find(|x| x.comment_ids == vec!["cm1".to_string()])
        .cloned();
    let own = own.expect("the suppressed wake is recorded");
    assert_eq!(
        (own.status, own.status_reason.as_deref()),
        (WakeStatus::Suppressed, Some("self_authored"))
    );
    assert!(pending(&w, "a1").is_empty());
}

#[test]
fn comments_and_mentions_wake_and_coalesce_in_order() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let first = claim(&mut w, "a1", "r0").unwrap();
    finish(&mut w, &first.id);
    for n in 0..3 {
        comment(
            &mut w,
            admin(),
            "i1",
            &format!("cm{n}"),
            &format!("note {n} for @a2"),
        );
    }
    let a1 = pending(&w, "a1");
    assert_eq!(a1.len(), 1);
    assert_eq!((a1[0].reason, a1[0].count), (WakeReason::IssueCommented, 3));
    assert_eq!(a1[0].comment_ids, vec!["cm0", "cm1", "cm2"]);
    let merged: Vec<&Wake> = wakes_of(&w, "a1")
        .into_iter()
        .filter(|x| x.status == WakeStatus::Coalesced)
        .collect();
    assert_eq!(merged.len(), 2);
    assert!(merged
        .iter()
        .all(|m| m.coalesced_into.as_deref() == Some(a1[0].id.as_str())));
    let a2 = pending(&w, "a2");
    assert_eq!(
        (a2.len(), a2[0].reason, a2[0].count),
        (1, WakeReason::IssueCommentMentioned, 3)
    );
}

/// 50 comments while the agent's run is running: one follow-up run, with every comment id in
/// order, and never a second concurrent run on the issue.
#[test]
fn fifty_comments_during_a_run_make_one_follow_up_run() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").unwrap();
    w.ok(
        worker_actor("wk1"),
        Command::RunStarted {
            run_id: run.id.clone(),
        },
    );
    let ids: Vec<String> = (0..50).map(|n| format!("c{n:02}")).collect();
    for id in &ids {
        comment(&mut w, admin(), "i1", id, "more");
    }
    let follow_up = pending(&w, "a1")[0].clone();
    assert_eq!(follow_up.comment_ids, ids);
    assert_eq!(
        claim_blocker(&w.state, &follow_up).map(|s| s.starts_with("follow-up")),
        Some(true)
    );
    assert!(matches!(
        claim(&mut w, "a1", "r2"),
        Err(DomainError::Conflict { .. })
    ));
    finish(&mut w, "r1");
    let next = claim(&mut w, "a1", "r2").unwrap();
    assert_eq!(next.comment_ids, ids);
    assert!(pending(&w, "a1").is_empty());
}

#[test]
fn a_repeated_wake_key_returns_the_first_wake() {
    let mut w = world();
    let wake = |id: &str| Command::Wakeup {
        id: id.into(),
        agent_id: "a1".into(),
        issue_id: None,
        reason: WakeReason::OnDemand,
        payload: serde_json::Value::Null,
        wake_key: Some("k1".into()),
    };
    let first = w.ok(admin(), wake("w-1"));
    let seq = w.state.activity_seq;
    let again = w.ok(admin(), wake("w-2"));
    assert_eq!(first, again);
    assert_eq!(wakes_of(&w, "a1").len(), 1);
    assert_eq!(
        w.state.activity_seq, seq,
        "the repeat changes nothing, so records nothing"
    );
}

#[test]
fn a_wake_for_an_issue_held_by_another_agent_waits_and_is_promoted() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a2");
    let holder = claim(&mut w, "a2", "rb").unwrap();
    w.ok(
        agent_actor("a2", "c1", Some(&holder.id)),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a2".into(),
            expected_statuses: vec![IssueStatus::Todo],
        },
    );
    comment(&mut w, admin(), "i1", "cm1", "@a1 can you review");
    let deferred = pending(&w, "a1")[0].clone();
    assert_eq!(
        (deferred.status, deferred.waiting_on_run.as_deref()),
        (WakeStatus::Deferred, Some("rb"))
    );
    assert!(claim(&mut w, "a1", "ra").is_err());
    finish(&mut w, "rb");
    assert_eq!(pending(&w, "a1")[0].status, WakeStatus::Queued);
    assert!(claim(&mut w, "a1", "ra").is_ok());
}

#[test]
fn max_concurrent_runs_is_enforced_by_the_state_machine() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    assigned_issue(&mut w, "i2", "a1");
    assert_eq!(pending(&w, "a1").len(), 2);
    claim(&mut w, "a1", "r1").unwrap();
    let second = pending(&w, "a1")[0].id.clone();
    let refused = w.run(
        admin(),
        Command::AssignRun {
            wake_id: second,
            run_id: "r2".into(),
            worker_id: "wk1".into(),
            token_hash: None,
        },
    );
    assert!(
        matches!(refused, Err(DomainError::Conflict { ref message }) if message.contains("max_concurrent_runs")),
        "{refused:?}"
    );
    finish(&mut w, "r1");
    assert!(claim(&mut w, "a1", "r2").is_ok());
}

#[test]
fn placement_needs_the_adapter_labels_and_a_free_slot() {
    let mut w = world();
    let mut labels = BTreeMap::new();
    labels.insert("gpu".to_string(), "yes".to_string());
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                placement_labels: Some(labels),
                ..Default::default()
            },
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    let refused = claim(&mut w, "a1", "r1");
    assert!(
        matches!(refused, Err(DomainError::Conflict { ref message }) if message.contains("label")),
        "{refused:?}"
    );
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a2".into(),
            patch: AgentPatch {
                adapter_type: Some(AdapterType::Claude),
                ..Default::default()
            },
        },
    );
    assigned_issue(&mut w, "i2", "a2");
    let refused = claim(&mut w, "a2", "r2");
    assert!(
        matches!(refused, Err(DomainError::Conflict { ref message }) if message.contains("adapter")),
        "{refused:?}"
    );
}

fn timer_agent(w: &mut World, skip_when_idle: bool) {
    let policy = HeartbeatPolicy {
        enabled: true,
        interval_sec: 60,
        skip_when_idle,
        ..Default::default()
    };
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                heartbeat: Some(policy),
                ..Default::default()
            },
        },
    );
}

#[test]
fn timer_ticks_skip_idle_agents_and_apply_once_per_interval() {
    let mut w = world();
    let tick = |id: &str| Command::TimerTick {
        agent_id: "a1".into(),
        wake_id: id.into(),
    };
    // Disabled: the scheduler has nothing due.
    assert_eq!(crate::rules::wake::next_tick(&w.state.agents["a1"]), None);
    timer_agent(&mut w, true);
    let due = crate::rules::wake::next_tick(&w.state.agents["a1"])
        .unwrap()
        .0;
    assert!(
        w.run_at(due - 1, admin(), tick("t0")).is_err(),
        "not due yet"
    );
    let idle = w.run_at(due, admin(), tick("t1")).unwrap();
    assert!(
        matches!(idle, Outcome::Wake(ref x) if x.status == WakeStatus::Skipped && x.status_reason.as_deref() == Some("idle"))
    );
    // The same tick proposed again (a second leader) is refused: the interval restarted.
    assert!(w.run_at(due + 5, admin(), tick("t2")).is_err());
    // Ten missed intervals collapse into one tick.
    assigned_issue(&mut w, "i1", "a1");
    let late = w.run_at(due + 600_000, admin(), tick("t3")).unwrap();
    assert!(
        matches!(late, Outcome::Wake(ref x) if x.reason == WakeReason::HeartbeatTimer),
        "{late:?}"
    );
    assert!(w.run_at(due + 600_001, admin(), tick("t4")).is_err());
}

#[test]
fn paused_and_unwilling_agents_record_why_they_did_not_wake() {
    let mut w = world();
    w.ok(
        admin(),
        Command::PauseAgent {
            agent_id: "a1".into(),
            reason: PauseReason::Manual,
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    let a1 = wakes_of(&w, "a1");
    assert_eq!(
        (a1[0].status, a1[0].status_reason.as_deref()),
        (WakeStatus::Skipped, Some("agent_paused"))
    );
    let policy = HeartbeatPolicy {
        wake_on_demand: false,
        ..Default::default()
    };
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a2".into(),
            patch: AgentPatch {
                heartbeat: Some(policy),
                ..Default::default()
            },
        },
    );
    let out = w.ok(
        admin(),
        Command::Wakeup {
            id: "od".into(),
            agent_id: "a2".into(),
            issue_id: None,
            reason: WakeReason::OnDemand,
            payload: serde_json::Value::Null,
            wake_key: None,
        },
    );
    assert!(
        matches!(out, Outcome::Wake(ref x) if x.status_reason.as_deref() == Some("wake_on_demand_disabled"))
    );
}

#[test]
fn closing_the_last_child_or_blocker_wakes_who_waits_on_it() {
    let mut w = world();
    parent_with_child(&mut w);
    w.issue(
        "k2",
        "c1",
        IssuePatch {
            parent_id: Some(Some("parent".into())),
            blocked_by_issue_ids: Some(vec!["k1".into()]),
            assignee_agent_id: Some(Some("a2".into())),
            // Parked until its blocker is done (assigned without a status it would be todo).
            status: Some(IssueStatus::Backlog),
            ..Default::default()
        },
    );
    let done = |id: &str| Command::UpdateIssue {
        issue_id: id.into(),
        patch: IssuePatch {
            status: Some(IssueStatus::Done),
            ..Default::default()
        },
        comment: None,
    };
    w.ok(admin(), done("k1"));
    assert_eq!(
        pending(&w, "a2")[0].reason,
        WakeReason::IssueBlockersResolved
    );
    assert!(pending(&w, "a1").is_empty(), "one child is still open");
    w.ok(admin(), done("k2"));
    assert_eq!(
        pending(&w, "a1")[0].reason,
        WakeReason::IssueChildrenCompleted
    );
}

#[test]
fn a_lost_worker_loses_its_runs_releases_their_checkouts_and_retries_once() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").unwrap();
    w.ok(
        worker_actor("wk1"),
        Command::RunStarted {
            run_id: run.id.clone(),
        },
    );
    w.ok(
        agent_actor("a1", "c1", Some("r1")),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a1".into(),
            expected_statuses: vec![IssueStatus::Todo],
        },
    );
    w.ok(
        admin(),
        Command::WorkerLost {
            worker_id: "wk1".into(),
        },
    );
    assert_eq!(w.state.runs["r1"].status, RunStatus::Lost);
    assert!(w.state.issues["i1"].checkout.is_none());
    let retry = pending(&w, "a1")[0].clone();
    assert_eq!(
        (retry.reason, retry.retry_of_run_id.as_deref()),
        (WakeReason::ProcessLostRetry, Some("r1"))
    );
    // The retry runs elsewhere; if that worker is lost too, there is no second retry.
    w.ok(
        admin(),
        Command::RegisterWorker {
            worker_id: "wk2".into(),
            name: "two".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 1,
            version: "t".into(),
        },
    );
    assert!(
        w.run(
            admin(),
            Command::AssignRun {
                wake_id: retry.id.clone(),
                run_id: "r2".into(),
                worker_id: "wk1".into(),
                token_hash: None,
            }
        )
        .is_err(),
        "wk1 is lost"
    );
    w.ok(
        admin(),
        Command::AssignRun {
            wake_id: retry.id,
            run_id: "r2".into(),
            worker_id: "wk2".into(),
            token_hash: None,
        },
    );
    w.ok(
        admin(),
        Command::WorkerLost {
            worker_id: "wk2".into(),
        },
    );
    assert!(pending(&w, "a1").is_empty());
    // A late write from the first run is fenced.
    let late = w.run(
        agent_actor("a1", "c1", Some("r1")),
        Command::AddComment {
            issue_id: "i1".into(),
            comment: NewComment {
                id: "late".into(),
                body: "done!".into(),
            },
        },
    );
    assert!(
        matches!(late, Err(DomainError::StaleRun { .. })),
        "{late:?}"
    );
}

#[test]
fn only_the_runs_worker_reports_it_started_or_finished() {
    let mut w = world();
    w.ok(
        admin(),
        Command::RegisterWorker {
            worker_id: "wk2".into(),
            name: "two".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 1,
            version: "t".into(),
        },
    );
    assigned_issue(&mut w, "i1", "a1");
    let run = claim(&mut w, "a1", "r1").unwrap();
    assert!(w
        .run(
            worker_actor("wk2"),
            Command::RunStarted {
                run_id: run.id.clone()
            }
        )
        .is_err());
    assert!(w
        .run(
            worker_actor("wk2"),
            Command::FinishRun {
                run_id: run.id.clone(),
                status: RunStatus::Succeeded,
                error: None,
                report: Default::default(),
            }
        )
        .is_err());
    w.ok(
        worker_actor("wk1"),
        Command::RunStarted {
            run_id: run.id.clone(),
        },
    );
    w.ok(
        worker_actor("wk1"),
        Command::FinishRun {
            run_id: run.id,
            status: RunStatus::Succeeded,
            error: None,
            report: Default::default(),
        },
    );
}

/// Regression: `State::from_rows` dropped wakes and workers, so a restarted node lost its
/// queue, forgot wake keys and disagreed with its peers' state hash.
#[test]
fn wakes_and_workers_survive_a_reload_from_rows() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
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
        remembered: Vec::new(),
        wakes: w.state.wakes.values().cloned().collect(),
        workers: w.state.workers.values().cloned().collect(),
        budget_policies: Vec::new(),
        cost_events: Vec::new(),
        budget_incidents: Vec::new(),
        activity_seq: w.state.activity_seq,
        activity_head: Some(w.state.activity_head.clone()),
        ..Default::default()
    };
    let reloaded = crate::state::State::from_rows(rows);
    assert_eq!(reloaded.hash(), w.state.hash());
    assert_eq!(reloaded.queued_wakes().count(), 1);
    assert_eq!(reloaded.workers.len(), 1);
}

/// Regression: a lost worker was recorded only in the instance's activity (no company), and a
/// company's activity and event stream are read by company, so no company ever saw its runs
/// lost, their checkouts released or their retries queued.
#[test]
fn a_lost_worker_is_recorded_in_each_company_it_touched_naming_only_that_companys_records() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    w.issue(
        "j1",
        "c2",
        IssuePatch {
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some("b1".into())),
            ..Default::default()
        },
    );
    claim(&mut w, "a1", "r1").expect("a1 claims");
    claim(&mut w, "b1", "s1").expect("b1 claims");
    w.ok(
        agent_actor("a1", "c1", Some("r1")),
        Command::Checkout {
            issue_id: "i1".into(),
            agent_id: "a1".into(),
            expected_statuses: vec![IssueStatus::Todo],
        },
    );
    let head = (w.state.activity_seq, w.state.activity_head.clone());
    w.index += 1;
    let env = crate::command::Envelope {
        request_id: None,
        at: crate::time::Timestamp(1_000 * w.index as i64),
        actor: admin(),
        command: Command::WorkerLost {
            worker_id: "wk1".into(),
        },
        idempotency_key: None,
    };
    let applied = w.state.apply(w.index, &env);
    assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
    let entries: Vec<&crate::activity::ActivityEntry> = applied
        .changes
        .iter()
        .filter_map(|c| match c {
            crate::state::Change::Activity(a) => Some(a),
            _ => None,
        })
        .collect();
    let companies: Vec<Option<&str>> = entries.iter().map(|e| e.company_id.as_deref()).collect();
    assert_eq!(companies, vec![None, Some("c1"), Some("c2")]);
    assert!(entries
        .iter()
        .all(|e| e.action == "worker.lost" && e.entity_id == "wk1"));
    let retry_of = |run: &str| format!("{run}-retry");
    assert_eq!(
        entries[1].details,
        serde_json::json!({ "issues": ["i1"], "runs": ["r1"], "wakes": [retry_of("r1")] }),
        "c1 sees its run lost, its checkout released and its retry"
    );
    assert_eq!(
        entries[2].details,
        serde_json::json!({ "issues": [], "runs": ["s1"], "wakes": [retry_of("s1")] }),
        "c2 sees only its own records"
    );
    // One chain: each entry follows the one before it.
    let mut prev = head;
    for e in &entries {
        assert_eq!((e.seq, Some(&e.prev_hash)), (prev.0 + 1, Some(&prev.1)));
        assert_eq!(e.hash, e.compute_hash());
        prev = (e.seq, e.hash.clone());
    }
    assert_eq!(
        (w.state.activity_seq, &w.state.activity_head),
        (prev.0, &prev.1)
    );
}

/// Regression: after a run was lost with its worker, the issue stayed `in_progress` with no
/// checkout, and the retry, checking out with Paperclip's `["todo", "backlog"]`, got
/// `status_conflict` and never finished it. The agent's next run now adopts its own abandoned
/// issue; another agent still cannot take it that way.
#[test]
fn a_retry_adopts_its_agents_abandoned_in_progress_issue() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    let checkout = |agent: &str, run: &str| {
        (
            agent_actor(agent, "c1", Some(run)),
            Command::Checkout {
                issue_id: "i1".into(),
                agent_id: agent.into(),
                expected_statuses: vec![IssueStatus::Todo, IssueStatus::Backlog],
            },
        )
    };
    let (actor, command) = checkout("a1", "r1");
    w.ok(actor, command);
    w.ok(
        admin(),
        Command::WorkerLost {
            worker_id: "wk1".into(),
        },
    );
    assert_eq!(w.state.issues["i1"].status, IssueStatus::InProgress);
    assert!(w.state.issues["i1"].checkout.is_none());
    // Another agent's run (started by hand) may not take the abandoned issue this way.
    w.start_run("r-other", "a2");
    let (actor, command) = checkout("a2", "r-other");
    assert!(matches!(
        w.run(actor, command),
        Err(DomainError::StatusConflict { .. })
    ));
    w.ok(
        admin(),
        Command::RegisterWorker {
            worker_id: "wk2".into(),
            name: "two".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 1,
            version: "t".into(),
        },
    );
    let retry = pending(&w, "a1")[0].id.clone();
    w.ok(
        admin(),
        Command::AssignRun {
            wake_id: retry,
            run_id: "r2".into(),
            worker_id: "wk2".into(),
            token_hash: None,
        },
    );
    let (actor, command) = checkout("a1", "r2");
    let token = token_of(w.ok(actor, command));
    assert!(token > 0);
    assert_eq!(
        w.state.issues["i1"]
            .checkout
            .as_ref()
            .map(|c| c.run_id.as_str()),
        Some("r2")
    );
}

/// Regression (a metrics scrape walked every issue, run and wake under the state's read lock,
/// twice over the wakes; apply's write lock waited behind it, longer as history grew): the
/// counts apply keeps instead agree with a walk after assignments, runs, wakes, closes and a
/// deletion, and a state rebuilt from its rows counts the same.
#[test]
fn the_counts_a_scrape_reads_agree_with_a_walk_of_every_row() {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    assigned_issue(&mut w, "i2", "a2");
    let r = claim(&mut w, "a1", "r1").unwrap();
    finish(&mut w, &r.id);
    w.ok(admin(), status_update("i1", IssueStatus::Done));
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i2".into(),
        },
    );
    let walk = |state: &crate::State| {
        let issues = crate::tally::Tally::default();
        let (mut issues, mut runs, mut wakes, mut reasons) =
            (issues.clone(), issues.clone(), issues.clone(), issues);
        state
            .issues
            .values()
            .for_each(|i| issues.moved(None, Some(i.status.as_str())));
        state
            .runs
            .values()
            .for_each(|r| runs.moved(None, Some(r.status.as_str())));
        for wake in state.wakes.values() {
            wakes.moved(None, Some(wake.status.as_str()));
            reasons.moved(None, Some(wake.reason.as_str()));
        }
        (issues, runs, wakes, reasons)
    };
    let kept = |state: &crate::State| {
        let (wakes, reasons) = state.wake_counts();
        (
            state.issue_status_counts().clone(),
            state.run_status_counts().clone(),
            wakes.clone(),
            reasons.clone(),
        )
    };
    let (issues, runs, wakes, _) = kept(&w.state);
    assert_eq!((issues.get("done"), issues.get("todo")), (1, 0));
    assert!(runs.get("succeeded") + runs.get("failed") >= 1, "{runs:?}");
    assert!(
        wakes.get("cancelled") + wakes.get("claimed") >= 1,
        "{wakes:?}"
    );
    assert_eq!(kept(&w.state), walk(&w.state));
    let rows = crate::StateRows {
        issues: w.state.issues.values().map(|i| i.into_owned()).collect(),
        runs: w.state.runs.values().cloned().collect(),
        wakes: w.state.wakes.values().cloned().collect(),
        ..Default::default()
    };
    let rebuilt = crate::State::from_rows(rows);
    assert_eq!(kept(&rebuilt), walk(&w.state));
}
