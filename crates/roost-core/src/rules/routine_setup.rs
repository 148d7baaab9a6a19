//! Routines' setup rules (`rules/routine.rs`): create and change routines and triggers.

use serde_json::json;

use super::{assignable, routine_decision, trigger_decision, writable_routine, writable_trigger};
use crate::error::DomainError;
use crate::routine::*;
use crate::routine_command::*;
use crate::rules::{require_id, require_text, Ctx};
use crate::state::{Change, Decision};
use crate::time::Timestamp;

pub(super) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    f: &RoutineFields,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    ctx.require_admin("create routines")?;
    if !ctx.state.companies.contains_key(company_id) {
        return Err(DomainError::not_found("company", company_id));
    }
    ctx.require_company(company_id, "company", company_id)?;
    if ctx.state.routines.routines.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "routine".into(),
            id: id.into(),
        });
    }
    let n = ctx.state.routines.count_of_company(company_id);
    if n >= MAX_ROUTINES_PER_COMPANY {
        return Err(DomainError::quota(
            "routines",
            MAX_ROUTINES_PER_COMPANY as u64,
            format!("this company has {n} routines, the most it may have; archive and reuse one"),
        ));
    }
    let title = require_text("title", &f.title, MAX_ROUTINE_TITLE_CHARS)?;
    if let Some(a) = &f.assignee_agent_id {
        assignable(ctx, company_id, a).map_err(|m| DomainError::invalid("assigneeAgentId", m))?;
    }
    // Paperclip: an active routine needs its default agent; without one it starts paused.
    let status = match (f.status, &f.assignee_agent_id) {
        (RoutineStatus::Active, None) => RoutineStatus::Paused,
        (s, _) => s,
    };
    let r = Routine {
        id: id.into(),
        company_id: company_id.into(),
        title,
        description: f.description.clone(),
        assignee_agent_id: f.assignee_agent_id.clone(),
        priority: f.priority,
        status,
        concurrency_policy: f.concurrency_policy,
        catch_up_policy: f.catch_up_policy,
        variables: f.variables.clone(),
        project_id: f.project_id.clone(),
        goal_id: f.goal_id.clone(),
        parent_issue_id: f.parent_issue_id.clone(),
        action: f.action,
        failure_alert_after: f.failure_alert_after.min(1000),
        consecutive_failures: 0,
        alerted: false,
        alert_issue_id: None,
        last_issue_id: None,
        last_wake_id: None,
        last_triggered_at: None,
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    let details = json!({ "title": r.title, "status": r.status });
    Ok(routine_decision(r, Vec::new(), details))
}

pub(super) fn update(ctx: &Ctx<'_>, id: &str, p: &RoutinePatch) -> Result<Decision, DomainError> {
    let old = writable_routine(ctx, id)?;
    let mut r = old.clone();
    if let Some(t) = &p.title {
        r.title = require_text("title", t, MAX_ROUTINE_TITLE_CHARS)?;
    }
    if let Some(d) = &p.description {
        r.description = d.clone();
    }
    if let Some(a) = &p.assignee_agent_id {
        if let Some(agent) = a {
            assignable(ctx, &r.company_id, agent)
                .map_err(|m| DomainError::invalid("assigneeAgentId", m))?;
        }
        r.assignee_agent_id = a.clone();
    }
    if let Some(v) = p.priority {
        r.priority = v;
    }
    if let Some(v) = p.concurrency_policy {
        r.concurrency_policy = v;
    }
    if let Some(v) = p.catch_up_policy {
        r.catch_up_policy = v;
    }
    if let Some(v) = &p.variables {
        r.variables = v.clone();
    }
    if let Some(v) = p.action {
        r.action = v;
    }
    if let Some(v) = p.failure_alert_after {
        r.failure_alert_after = v.min(1000);
    }
    if let Some(s) = p.status {
        if s == RoutineStatus::Active && r.assignee_agent_id.is_none() {
            return Err(DomainError::invariant(
                "routine_default_agent",
                "an active routine needs assigneeAgentId (its default agent); set one first",
            ));
        }
        r.status = s;
    }
    let mut changes = Vec::new();
    // Resuming does not make up the firings missed while paused: each schedule starts again
    // from now.
    if old.status != RoutineStatus::Active && r.status == RoutineStatus::Active {
        for t in ctx.state.routines.triggers_of(id) {
            if let Some(next) = next_from(t, ctx.now()) {
                let mut t = t.clone();
                t.next_run_at = Some(next);
                t.late_firings = 0;
                t.updated_at = ctx.now();
                changes.push(Change::Routine(RoutineChange::Trigger(t)));
            }
        }
    }
    r.updated_at = ctx.now();
    let details = json!({ "status": r.status, "from": old.status });
    Ok(routine_decision(r, changes, details))
}

/// A schedule trigger's next instant after `now` (None for other kinds or a spent `at`).
fn next_from(t: &RoutineTrigger, now: Timestamp) -> Option<Timestamp> {
    if t.kind != TriggerKind::Schedule {
        return None;
    }
    Schedule::parse(
        t.cron_expression.as_deref()?,
        t.timezone.as_deref(),
        t.created_at,
    )
    .ok()?
    .next_after(now)
}

pub(super) fn create_trigger(
    ctx: &Ctx<'_>,
    id: &str,
    routine_id: &str,
    n: &NewTrigger,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    let r = writable_routine(ctx, routine_id)?;
    if ctx.state.routines.triggers.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "routine trigger".into(),
            id: id.into(),
        });
    }
    let count = ctx.state.routines.triggers_of(routine_id).count();
    if count >= MAX_TRIGGERS_PER_ROUTINE {
        return Err(DomainError::quota(
            "routine_triggers",
            MAX_TRIGGERS_PER_ROUTINE as u64,
            format!("routine {routine_id} has {count} triggers, the most it may have; delete one"),
        ));
    }
    let mut t = RoutineTrigger {
        id: id.into(),
        company_id: r.company_id.clone(),
        routine_id: routine_id.into(),
        kind: n.kind,
        label: n.label.clone(),
        enabled: n.enabled,
        cron_expression: None,
        timezone: None,
        next_run_at: None,
        last_fired_at: None,
        last_result: None,
        late_firings: 0,
        public_id: None,
        signing_mode: None,
        replay_window_sec: None,
        secret: None,
        last_rotated_at: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    match n.kind {
        TriggerKind::Schedule => {
            let expr = n.cron_expression.as_deref().ok_or_else(|| {
                DomainError::invalid(
                    "cronExpression",
                    "a schedule trigger needs one: `0 9 * * 1-5`, `every 15m` or `at 2030-01-01T09:00:00Z`",
                )
            })?;
            let tz = n.timezone.clone().unwrap_or_else(|| "UTC".into());
            let schedule = Schedule::parse(expr, Some(&tz), ctx.now())
                .map_err(|m| DomainError::invalid("cronExpression", m))?;
            t.cron_expression = Some(expr.trim().to_string());
            t.timezone = Some(tz);
            t.next_run_at = schedule.first(ctx.now());
        }
        TriggerKind::Webhook => {
            let public_id = n.public_id.as_deref().ok_or_else(|| {
                DomainError::invalid("publicId", "a webhook trigger needs a public id")
            })?;
            require_id("publicId", public_id)?;
            if ctx.state.routines.trigger_by_public_id(public_id).is_some() {
                return Err(DomainError::conflict("that public id is taken"));
            }
            let mode = n.signing_mode.unwrap_or(SigningMode::Bearer);
            if mode != SigningMode::None && n.secret.is_none() {
                return Err(DomainError::invalid(
                    "secret",
                    "a signed webhook needs a secret",
                ));
            }
            t.public_id = Some(public_id.into());
            t.signing_mode = Some(mode);
            t.replay_window_sec = Some(n.replay_window_sec.unwrap_or(300));
            t.secret = n.secret.clone();
            t.last_rotated_at = n.secret.as_ref().map(|_| ctx.now());
        }
        TriggerKind::Api => {}
    }
    let details = json!({ "routineId": routine_id, "kind": t.kind, "nextRunAt": t.next_run_at });
    Ok(trigger_decision(t, details))
}

pub(super) fn update_trigger(
    ctx: &Ctx<'_>,
    id: &str,
    p: &TriggerPatch,
) -> Result<Decision, DomainError> {
    let old = writable_trigger(ctx, id)?;
    let mut t = old.clone();
    if let Some(l) = &p.label {
        t.label = l.clone();
    }
    if let Some(e) = p.enabled {
        t.enabled = e;
    }
    if p.signing_mode.is_some() || p.replay_window_sec.is_some() {
        if t.kind != TriggerKind::Webhook {
            return Err(DomainError::invalid(
                "signingMode",
                "only webhook triggers have a signing mode and a replay window",
            ));
        }
        if let Some(m) = p.signing_mode {
            if m != SigningMode::None && t.secret.is_none() {
                return Err(DomainError::invalid(
                    "signingMode",
                    "this trigger has no secret yet: rotate its secret first",
                ));
            }
            t.signing_mode = Some(m);
        }
        if let Some(w) = p.replay_window_sec {
            t.replay_window_sec = Some(w);
        }
    }
    let reschedule =
        p.cron_expression.is_some() || p.timezone.is_some() || (t.enabled && !old.enabled);
    if p.cron_expression.is_some() || p.timezone.is_some() {
        if t.kind != TriggerKind::Schedule {
            return Err(DomainError::invalid(
                "cronExpression",
                "only schedule triggers have a schedule",
            ));
        }
        if let Some(e) = &p.cron_expression {
            t.cron_expression = Some(e.trim().to_string());
        }
        if let Some(z) = &p.timezone {
            t.timezone = Some(z.clone());
        }
    }
    if reschedule && t.kind == TriggerKind::Schedule {
        let expr = t.cron_expression.clone().unwrap_or_default();
        // A changed schedule counts from now.
        t.created_at = ctx.now();
        let s = Schedule::parse(&expr, t.timezone.as_deref(), ctx.now())
            .map_err(|m| DomainError::invalid("cronExpression", m))?;
        t.next_run_at = s.first(ctx.now());
        t.late_firings = 0;
    }
    t.updated_at = ctx.now();
    let details = json!({ "enabled": t.enabled, "nextRunAt": t.next_run_at });
    Ok(trigger_decision(t, details))
}
