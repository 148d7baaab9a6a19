//! Routines' rules: create and change routines and triggers, fire a schedule trigger's due
//! instant once, run a routine by hand, by API or by webhook, follow the issue a run opened to
//! its outcome, and open the alert after consecutive failures. The leader proposes firings and
//! alerts (`routine_due.rs`); apply decides.

use serde_json::json;

use super::{issue, require_id, require_text, wake, Ctx};
use crate::command::{IssuePatch, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::routine::*;
use crate::routine_command::*;
use crate::state::{ActivityNote, Change, Decision, State};
use crate::time::Timestamp;

#[path = "routine_setup.rs"]
mod setup;
use setup::{create, create_trigger, update, update_trigger};

pub(crate) fn decide(ctx: &Ctx<'_>, command: &RoutineCommand) -> Result<Decision, DomainError> {
    match command {
        RoutineCommand::Create {
            id,
            company_id,
            fields,
        } => create(ctx, id, company_id, fields),
        RoutineCommand::Update { routine_id, patch } => update(ctx, routine_id, patch),
        RoutineCommand::CreateTrigger {
            id,
            routine_id,
            trigger,
        } => create_trigger(ctx, id, routine_id, trigger),
        RoutineCommand::UpdateTrigger { trigger_id, patch } => {
            update_trigger(ctx, trigger_id, patch)
        }
        RoutineCommand::DeleteTrigger { trigger_id } => {
            let t = writable_trigger(ctx, trigger_id)?;
            Ok(decision(
                Outcome::Routine(RoutineOutcome::TriggerDeleted {
                    trigger_id: t.id.clone(),
                }),
                vec![Change::Routine(RoutineChange::TriggerDeleted(t.id.clone()))],
                &t.company_id,
                "routine_trigger",
                &t.id,
                json!({ "routineId": t.routine_id, "kind": t.kind }),
            ))
        }
        RoutineCommand::RotateSecret { trigger_id, secret } => {
            let mut t = writable_trigger(ctx, trigger_id)?.clone();
            if t.kind != TriggerKind::Webhook {
                return Err(DomainError::invalid(
                    "triggerId",
                    "only webhook triggers have a secret to rotate",
                ));
            }
            require_text("secret", secret, MAX_SECRET_CHARS)?;
            t.secret = Some(secret.clone());
            t.last_rotated_at = Some(ctx.now());
            t.updated_at = ctx.now();
            Ok(trigger_decision(t, json!({ "rotated": true })))
        }
        RoutineCommand::Fire {
            trigger_id,
            scheduled_for,
            run_id,
            issue_id,
            stagger_ms,
        } => fire(
            ctx,
            trigger_id,
            *scheduled_for,
            *stagger_ms,
            run_id,
            issue_id,
        ),
        RoutineCommand::Run {
            request,
            run_id,
            issue_id,
        } => run(ctx, request, run_id, issue_id),
        RoutineCommand::Alert {
            routine_id,
            issue_id,
        } => alert(ctx, routine_id, issue_id),
    }
}

fn decision(
    outcome: Outcome,
    changes: Vec<Change>,
    company_id: &str,
    entity_type: &'static str,
    entity_id: &str,
    details: serde_json::Value,
) -> Decision {
    Decision {
        outcome,
        changes,
        note: ActivityNote {
            company_id: Some(company_id.to_string()),
            entity_type,
            entity_id: entity_id.to_string(),
            details,
        },
    }
}

fn routine_decision(r: Routine, mut changes: Vec<Change>, details: serde_json::Value) -> Decision {
    changes.push(Change::Routine(RoutineChange::Routine(r.clone())));
    let (company, id) = (r.company_id.clone(), r.id.clone());
    decision(
        Outcome::Routine(RoutineOutcome::Routine { routine: r }),
        changes,
        &company,
        "routine",
        &id,
        details,
    )
}

fn trigger_decision(t: RoutineTrigger, details: serde_json::Value) -> Decision {
    let changes = vec![Change::Routine(RoutineChange::Trigger(t.clone()))];
    let (company, id) = (t.company_id.clone(), t.id.clone());
    decision(
        Outcome::Routine(RoutineOutcome::Trigger { trigger: t }),
        changes,
        &company,
        "routine_trigger",
        &id,
        details,
    )
}

/// A routine the actor may see.
pub(crate) fn visible_routine<'a>(ctx: &Ctx<'a>, id: &str) -> Result<&'a Routine, DomainError> {
    let r = ctx
        .state
        .routines
        .routines
        .get(id)
        .ok_or_else(|| DomainError::not_found("routine", id))?;
    ctx.require_company(&r.company_id, "routine", id)?;
    Ok(r)
}

fn writable_routine<'a>(ctx: &Ctx<'a>, id: &str) -> Result<&'a Routine, DomainError> {
    let r = visible_routine(ctx, id)?;
    ctx.require_admin("change routines")?;
    Ok(r)
}

fn writable_trigger<'a>(ctx: &Ctx<'a>, id: &str) -> Result<&'a RoutineTrigger, DomainError> {
    let t = ctx
        .state
        .routines
        .triggers
        .get(id)
        .ok_or_else(|| DomainError::not_found("routine trigger", id))?;
    ctx.require_company(&t.company_id, "routine trigger", id)?;
    ctx.require_admin("change routine triggers")?;
    Ok(t)
}

/// An agent of `company_id` a routine may assign work to.
fn assignable<'a>(ctx: &Ctx<'a>, company_id: &str, agent_id: &str) -> Result<&'a Agent, String> {
    match ctx.state.agents.get(agent_id) {
        Some(a) if a.company_id == company_id && a.status != AgentStatus::Terminated => Ok(a),
        Some(a) if a.company_id == company_id => Err(format!(
            "agent {agent_id} is terminated; assign the routine to another agent"
        )),
        _ => Err(format!("agent {agent_id} is not an agent of this company")),
    }
}

/// What one firing is about.
struct Firing<'a> {
    routine: &'a Routine,
    trigger_id: Option<String>,
    source: RunSource,
    scheduled_for: Option<Timestamp>,
    payload: serde_json::Value,
    variables: serde_json::Value,
    assignee: Option<String>,
    idempotency_key: Option<String>,
    run_id: &'a str,
    issue_id: &'a str,
}

/// What the routine's last firing left running, if it is still active: its issue neither done
/// nor cancelled, or a live run on it (Paperclip: an open execution issue with a live run; in
/// Roost an open issue is enough, since its agent will be woken for it anyway). For a `wake`
/// routine: its wake still pending, or the run it became still live.
fn active_target(state: &State, r: &Routine) -> Option<(Option<String>, Option<String>)> {
    match r.action {
        RoutineAction::Issue => {
            let id = r.last_issue_id.as_ref()?;
            let issue = state.issues.get(id)?;
            let live = state
                .live_runs()
                .any(|run| run.issue_id.as_deref() == Some(id));
            (!issue.status.is_terminal() || live).then(|| (Some(id.clone()), None))
        }
        RoutineAction::Wake => {
            let id = r.last_wake_id.as_ref()?;
            let w = state.wakes.get(id)?;
            let live = w
                .run_id
                .as_ref()
                .and_then(|run| state.runs.get(run))
                .is_some_and(|run| run.status.is_live());
            (w.status.is_pending() || live).then(|| (None, Some(id.clone())))
        }
    }
}

/// Makes one firing: coalesced or skipped while the last one is active (per the routine's
/// policy), else an issue from the template (or a wake). A firing that cannot open its issue
/// is recorded `failed` with the reason; it is never refused, so a schedule moves on.
fn dispatch(ctx: &Ctx<'_>, f: Firing<'_>) -> (RoutineRun, Vec<Change>) {
    let now = ctx.now();
    let mut r = f.routine.clone();
    r.last_triggered_at = Some(now);
    r.updated_at = now;
    let mut run = RoutineRun {
        id: f.run_id.into(),
        company_id: r.company_id.clone(),
        routine_id: r.id.clone(),
        trigger_id: f.trigger_id,
        source: f.source,
        status: RoutineRunStatus::Received,
        triggered_at: now,
        scheduled_for: f.scheduled_for,
        idempotency_key: f.idempotency_key,
        trigger_payload: f.payload,
        linked_issue_id: None,
        linked_wake_id: None,
        coalesced_into_run_id: None,
        failure_reason: None,
        completed_at: None,
        seq: ctx.slot,
        created_at: now,
        updated_at: now,
    };
    let mut changes = Vec::new();
    let active = active_target(ctx.state, &r);
    let failure: Option<String> = match active {
        Some((issue, wake_id)) if r.concurrency_policy != ConcurrencyPolicy::AlwaysEnqueue => {
            run.status = if r.concurrency_policy == ConcurrencyPolicy::SkipIfActive {
                RoutineRunStatus::Skipped
            } else {
                RoutineRunStatus::Coalesced
            };
            run.coalesced_into_run_id = issue
                .as_deref()
                .and_then(|i| ctx.state.routines.run_for_issue(i))
                .map(|x| x.id.clone());
            run.linked_issue_id = issue;
            run.linked_wake_id = wake_id;
            run.completed_at = Some(now);
            None
        }
        _ => open_work(
            ctx,
            &mut r,
            &mut run,
            f.issue_id,
            f.assignee,
            &f.variables,
            &mut changes,
        )
        .err(),
    };
    if let Some(reason) = failure {
        run.status = RoutineRunStatus::Failed;
        run.failure_reason = Some(reason);
        run.completed_at = Some(now);
        r.consecutive_failures = r.consecutive_failures.saturating_add(1);
    }
    trim_history(ctx, &r.id, &mut changes);
    changes.push(Change::Routine(RoutineChange::Routine(r)));
    changes.push(Change::Routine(RoutineChange::Run(run.clone())));
    (run, changes)
}

/// Opens the firing's issue (or wake); the error is the run's failure reason.
fn open_work(
    ctx: &Ctx<'_>,
    r: &mut Routine,
    run: &mut RoutineRun,
    id: &str,
    assignee: Option<String>,
    variables: &serde_json::Value,
    changes: &mut Vec<Change>,
) -> Result<(), String> {
    let agent = assignee
        .or_else(|| r.assignee_agent_id.clone())
        .ok_or("the routine has no default agent (assigneeAgentId)")?;
    assignable(ctx, &r.company_id, &agent)?;
    match r.action {
        RoutineAction::Issue => {
            let given = if variables.is_null() {
                run.trigger_payload
                    .get("variables")
                    .cloned()
                    .unwrap_or_default()
            } else {
                variables.clone()
            };
            let values = variable_values(&r.variables, &given);
            let mut title = interpolate(&r.title, &values);
            if title.chars().count() > crate::limits::MAX_TITLE_CHARS {
                title = title.chars().take(crate::limits::MAX_TITLE_CHARS).collect();
            }
            let parent = r.parent_issue_id.clone().filter(|p| {
                ctx.state
                    .issues
                    .get(p)
                    .is_some_and(|i| i.company_id == r.company_id)
            });
            let patch = IssuePatch {
                title: Some(title),
                description: Some(r.description.as_deref().map(|d| interpolate(d, &values))),
                status: Some(IssueStatus::Todo),
                priority: Some(r.priority),
                assignee_agent_id: Some(Some(agent)),
                parent_id: parent.map(Some),
                ..Default::default()
            };
            let d = issue::create(ctx, id, &r.company_id, &patch).map_err(|e| e.to_string())?;
            changes.extend(d.changes);
            run.status = RoutineRunStatus::IssueCreated;
            run.linked_issue_id = Some(id.to_string());
            r.last_issue_id = Some(id.to_string());
        }
        RoutineAction::Wake => {
            let req = wake::WakeRequest {
                id: id.to_string(),
                agent_id: agent,
                issue_id: None,
                reason: WakeReason::Routine,
                comment_ids: Vec::new(),
                payload: json!({ "routineId": r.id, "routineRunId": run.id, "payload": run.trigger_payload }),
                idempotency_key: None,
                retry_of_run_id: None,
            };
            let w = wake::enqueue(ctx, &mut wake::Pending { changes }, req)
                .map_err(|e| e.to_string())?;
            run.linked_wake_id = Some(w.id.clone());
            run.completed_at = Some(ctx.now());
            if matches!(w.status, WakeStatus::Skipped | WakeStatus::Suppressed) {
                run.status = RoutineRunStatus::Skipped;
                run.failure_reason = w.status_reason.clone();
            } else {
                run.status = RoutineRunStatus::Completed;
                r.consecutive_failures = 0;
                r.alerted = false;
            }
            r.last_wake_id = Some(w.id);
        }
    }
    Ok(())
}

/// Drops the routine's oldest finished runs past [`MAX_RUNS_KEPT_PER_ROUTINE`] (one new run
/// is about to be added).
fn trim_history(ctx: &Ctx<'_>, routine_id: &str, changes: &mut Vec<Change>) {
    let runs: Vec<&RoutineRun> = ctx.state.routines.runs_of(routine_id).collect();
    if runs.len() < MAX_RUNS_KEPT_PER_ROUTINE {
        return;
    }
    let excess = runs.len() + 1 - MAX_RUNS_KEPT_PER_ROUTINE;
    for old in runs
        .iter()
        .rev()
        .filter(|r| r.status != RoutineRunStatus::IssueCreated)
        .take(excess)
    {
        changes.push(Change::Routine(RoutineChange::RunDropped(old.id.clone())));
    }
}

fn run_decision(
    run: RoutineRun,
    mut changes: Vec<Change>,
    trigger: Option<RoutineTrigger>,
) -> Decision {
    if let Some(t) = trigger {
        changes.push(Change::Routine(RoutineChange::Trigger(t)));
    }
    let details = json!({
        "routineId": run.routine_id, "source": run.source, "status": run.status,
        "scheduledFor": run.scheduled_for, "linkedIssueId": run.linked_issue_id,
    });
    let (company, id) = (run.company_id.clone(), run.id.clone());
    decision(
        Outcome::Routine(RoutineOutcome::Run { run }),
        changes,
        &company,
        "routine_run",
        &id,
        details,
    )
}

fn fire(
    ctx: &Ctx<'_>,
    trigger_id: &str,
    scheduled_for: Timestamp,
    stagger_ms: u64,
    run_id: &str,
    issue_id: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("fire routines")?;
    require_id("runId", run_id)?;
    require_id("issueId", issue_id)?;
    let t = ctx
        .state
        .routines
        .triggers
        .get(trigger_id)
        .ok_or_else(|| DomainError::not_found("routine trigger", trigger_id))?;
    let r = ctx
        .state
        .routines
        .routines
        .get(&t.routine_id)
        .ok_or_else(|| DomainError::not_found("routine", &t.routine_id))?;
    if t.kind != TriggerKind::Schedule || !t.enabled || r.status != RoutineStatus::Active {
        return Err(DomainError::conflict(format!(
            "trigger {trigger_id} is not an enabled schedule of an active routine"
        )));
    }
    if t.next_run_at != Some(scheduled_for) {
        return Err(DomainError::conflict(format!(
            "the firing of trigger {trigger_id} at {scheduled_for} is not the one due (already made, or another)"
        )));
    }
    if ctx.now() < scheduled_for {
        return Err(DomainError::conflict(format!(
            "trigger {trigger_id} is not due until {scheduled_for}"
        )));
    }
    let expr = t.cron_expression.as_deref().unwrap_or_default();
    let schedule = Schedule::parse(expr, t.timezone.as_deref(), t.created_at)
        .map_err(|m| DomainError::invalid("cronExpression", m))?;
    let now = ctx.now();
    let next = schedule.next_after(scheduled_for);
    // Late: the next instant is due already, with the same stagger this one waited (the
    // cluster was down, or the routine busy). Without the stagger, a routine whose stagger
    // passes its period would look late at every firing and have its 26th dropped
    // (`routine_tests.rs`: a_stagger_longer_than_the_period_drops_no_firing).
    let stagger = i64::try_from(stagger_ms).unwrap_or(i64::MAX);
    let late = next.is_some_and(|n| n.0.saturating_add(stagger) <= now.0);
    let mut trig = t.clone();
    let (fires, next_run_at, dropped) = match (r.catch_up_policy, late) {
        (_, false) => {
            trig.late_firings = 0;
            (true, next, None)
        }
        (CatchUpPolicy::SkipMissed, true) => {
            trig.late_firings = 0;
            (true, schedule.next_after(now), None)
        }
        (CatchUpPolicy::EnqueueMissedWithCap, true) if trig.late_firings >= MAX_CATCH_UP_RUNS => {
            trig.late_firings = 0;
            let reason = format!(
                "missed firings from {scheduled_for} on were dropped: at most {MAX_CATCH_UP_RUNS} are made up after downtime"
            );
            (false, schedule.next_after(now), Some(reason))
        }
        (CatchUpPolicy::EnqueueMissedWithCap, true) => {
            trig.late_firings += 1;
            (true, next, None)
        }
    };
    trig.next_run_at = next_run_at;
    trig.last_fired_at = Some(now);
    trig.updated_at = now;
    let (run, changes) = if fires {
        dispatch(
            ctx,
            Firing {
                routine: r,
                trigger_id: Some(t.id.clone()),
                source: RunSource::Schedule,
                scheduled_for: Some(scheduled_for),
                payload: serde_json::Value::Null,
                variables: serde_json::Value::Null,
                assignee: None,
                idempotency_key: None,
                run_id,
                issue_id,
            },
        )
    } else {
        let run = RoutineRun {
            id: run_id.into(),
            company_id: r.company_id.clone(),
            routine_id: r.id.clone(),
            trigger_id: Some(t.id.clone()),
            source: RunSource::Schedule,
            status: RoutineRunStatus::Skipped,
            triggered_at: now,
            scheduled_for: Some(scheduled_for),
            idempotency_key: None,
            trigger_payload: serde_json::Value::Null,
            linked_issue_id: None,
            linked_wake_id: None,
            coalesced_into_run_id: None,
            failure_reason: dropped,
            completed_at: Some(now),
            seq: ctx.slot,
            created_at: now,
            updated_at: now,
        };
        let mut changes = Vec::new();
        trim_history(ctx, &r.id, &mut changes);
        changes.push(Change::Routine(RoutineChange::Run(run.clone())));
        (run, changes)
    };
    trig.last_result = Some(run.status.as_str().to_string());
    Ok(run_decision(run, changes, Some(trig)))
}

fn run(
    ctx: &Ctx<'_>,
    req: &RunRequest,
    run_id: &str,
    issue_id: &str,
) -> Result<Decision, DomainError> {
    require_id("runId", run_id)?;
    require_id("issueId", issue_id)?;
    let r = visible_routine(ctx, &req.routine_id)?;
    ctx.fence()?;
    if r.status == RoutineStatus::Archived {
        return Err(DomainError::conflict(format!(
            "routine {} is archived; set its status to active or paused to run it",
            r.id
        )));
    }
    let trigger = match &req.trigger_id {
        Some(tid) => {
            let t = ctx
                .state
                .routines
                .triggers
                .get(tid)
                .filter(|t| t.routine_id == r.id)
                .ok_or_else(|| DomainError::not_found("routine trigger", tid))?;
            if !t.enabled {
                return Err(DomainError::conflict(format!(
                    "trigger {tid} is disabled; enable it first"
                )));
            }
            Some(t)
        }
        None => None,
    };
    if req.source == RunSource::Webhook && r.status != RoutineStatus::Active {
        return Err(DomainError::conflict(format!(
            "routine {} is {}; a webhook fires only an active routine",
            r.id,
            r.status.as_str()
        )));
    }
    if let Some(key) = &req.idempotency_key {
        let seen = ctx.state.routines.runs_of(&r.id).find(|x| {
            x.idempotency_key.as_deref() == Some(key.as_str())
                && x.source == req.source
                && x.trigger_id == req.trigger_id
        });
        if let Some(first) = seen {
            return Ok(Decision {
                outcome: Outcome::Routine(RoutineOutcome::Run { run: first.clone() }),
                changes: Vec::new(),
                note: ActivityNote {
                    company_id: Some(r.company_id.clone()),
                    entity_type: "routine_run",
                    entity_id: first.id.clone(),
                    details: serde_json::Value::Null,
                },
            });
        }
    }
    let assignee = req.assignee_agent_id.clone();
    match assignee.as_ref().or(r.assignee_agent_id.as_ref()) {
        Some(a) => {
            assignable(ctx, &r.company_id, a)
                .map_err(|m| DomainError::invalid("assigneeAgentId", m))?;
        }
        None => {
            return Err(DomainError::invalid(
                "assigneeAgentId",
                "the routine has no default agent: set the routine's assigneeAgentId or send one",
            ))
        }
    }
    let (run, changes) = dispatch(
        ctx,
        Firing {
            routine: r,
            trigger_id: trigger.map(|t| t.id.clone()),
            source: req.source,
            scheduled_for: None,
            payload: req.payload.clone(),
            variables: req.variables.clone(),
            assignee,
            idempotency_key: req.idempotency_key.clone(),
            run_id,
            issue_id,
        },
    );
    let trigger = trigger.map(|t| {
        let mut t = t.clone();
        t.last_fired_at = Some(ctx.now());
        t.last_result = Some(run.status.as_str().to_string());
        t.updated_at = ctx.now();
        t
    });
    Ok(run_decision(run, changes, trigger))
}

/// Whether the routine's failures in a row call for its alert now.
pub(super) fn alert_due(r: &Routine) -> bool {
    r.failure_alert_after > 0 && r.consecutive_failures >= r.failure_alert_after && !r.alerted
}

fn alert(ctx: &Ctx<'_>, routine_id: &str, issue_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("raise routine alerts")?;
    require_id("issueId", issue_id)?;
    let r = visible_routine(ctx, routine_id)?;
    if !alert_due(r) {
        return Err(DomainError::conflict(format!(
            "routine {routine_id} has no alert due"
        )));
    }
    let reasons: Vec<String> = ctx
        .state
        .routines
        .runs_of(routine_id)
        .filter_map(|x| x.failure_reason.clone())
        .take(5)
        .collect();
    let mut title = format!(
        "Routine \"{}\" failed {} times in a row",
        r.title, r.consecutive_failures
    );
    if title.chars().count() > crate::limits::MAX_TITLE_CHARS {
        title = title.chars().take(crate::limits::MAX_TITLE_CHARS).collect();
    }
    // The routine's owner: the agent that created it, else the user (an administrator).
    let owner_agent = r
        .created_by_agent_id
        .clone()
        .filter(|a| assignable(ctx, &r.company_id, a).is_ok());
    let patch = IssuePatch {
        title: Some(title),
        description: Some(Some(format!(
            "Routine {} (`{}`) failed {} times in a row. Latest reasons:\n- {}",
            r.title,
            r.id,
            r.consecutive_failures,
            reasons.join("\n- ")
        ))),
        status: Some(IssueStatus::Todo),
        priority: Some(Priority::High),
        assignee_user_id: if owner_agent.is_none() {
            Some(r.created_by_user_id.clone())
        } else {
            None
        },
        assignee_agent_id: owner_agent.map(Some),
        ..Default::default()
    };
    let mut routine = r.clone();
    routine.alerted = true;
    routine.updated_at = ctx.now();
    let mut changes = Vec::new();
    let details = match issue::create(ctx, issue_id, &r.company_id, &patch) {
        Ok(d) => {
            changes.extend(d.changes);
            routine.alert_issue_id = Some(issue_id.into());
            json!({ "alertIssueId": issue_id, "failures": r.consecutive_failures })
        }
        // Recorded as alerted anyway: a refused alert (a full company) is not retried forever.
        Err(e) => json!({ "alertError": e.to_string(), "failures": r.consecutive_failures }),
    };
    Ok(routine_decision(routine, changes, details))
}

/// After every accepted command: a run waiting on its issue learns the issue's outcome (done:
/// `completed`; cancelled, blocked or deleted: `failed`), and its routine counts failures in a
/// row (a completion resets them), in the same command as the issue's change.
pub(crate) fn follow_issues(ctx: &Ctx<'_>, changes: &mut Vec<Change>) {
    let routines = &ctx.state.routines;
    if routines.runs.is_empty() {
        return;
    }
    let mut ended: Vec<(RoutineRun, Result<(), String>)> = Vec::new();
    for c in changes.iter() {
        let (issue_id, outcome) = match c {
            Change::Issue(i) => match i.status {
                IssueStatus::Done => (&i.id, Ok(())),
                IssueStatus::Cancelled | IssueStatus::Blocked => (
                    &i.id,
                    Err(format!(
                        "the routine's issue moved to {}",
                        i.status.as_str()
                    )),
                ),
                _ => continue,
            },
            Change::IssueDeleted(id) => (id, Err("the routine's issue was deleted".to_string())),
            _ => continue,
        };
        let Some(run) = routines.run_for_issue(issue_id) else {
            continue;
        };
        ended.retain(|(r, _)| r.id != run.id);
        ended.push((run.clone(), outcome));
    }
    for (mut run, outcome) in ended {
        let Some(mut r) = latest_routine(ctx, changes, &run.routine_id) else {
            continue;
        };
        match outcome {
            Ok(()) => {
                run.status = RoutineRunStatus::Completed;
                r.consecutive_failures = 0;
                r.alerted = false;
            }
            Err(reason) => {
                run.status = RoutineRunStatus::Failed;
                run.failure_reason = Some(reason);
                r.consecutive_failures = r.consecutive_failures.saturating_add(1);
            }
        }
        run.completed_at = Some(ctx.now());
        run.updated_at = ctx.now();
        r.updated_at = ctx.now();
        changes.push(Change::Routine(RoutineChange::Run(run)));
        changes.push(Change::Routine(RoutineChange::Routine(r)));
    }
}

/// The routine as this command leaves it so far.
fn latest_routine(ctx: &Ctx<'_>, changes: &[Change], id: &str) -> Option<Routine> {
    changes
        .iter()
        .rev()
        .find_map(|c| match c {
            Change::Routine(RoutineChange::Routine(r)) if r.id == id => Some(r.clone()),
            _ => None,
        })
        .or_else(|| ctx.state.routines.routines.get(id).cloned())
}

/// [`follow_issues`] for `State::apply`, which has the state, the slot and the envelope.
pub(crate) fn follow_issues_of(
    state: &State,
    slot: u64,
    env: &crate::command::Envelope,
    changes: &mut Vec<Change>,
) {
    let ctx = Ctx {
        state,
        slot,
        env,
        actor: &env.actor,
    };
    follow_issues(&ctx, changes);
}
