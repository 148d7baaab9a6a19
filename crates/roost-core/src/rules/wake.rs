//! Wakes: who is woken by what, and what happens to a wake that cannot
//! run now. Every wake that does not become a run records why (skipped, suppressed,
//! coalesced, deferred), so "why didn't my agent run?" always has an answer.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::Ctx;
use crate::entity::*;
use crate::error::DomainError;
use crate::limits::MAX_WAKE_PAYLOAD_BYTES;
use crate::state::Change;

/// What asks for a wake: an event of an issue, a timer, an operator.
#[derive(Clone, Debug)]
pub(crate) struct WakeRequest {
    pub id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    pub reason: WakeReason,
    pub comment_ids: Vec<String>,
    pub payload: Value,
    pub idempotency_key: Option<String>,
    pub retry_of_run_id: Option<String>,
}

impl WakeRequest {
    pub fn event(
        id: String,
        agent_id: &str,
        issue_id: &str,
        reason: WakeReason,
        comment: Option<&str>,
    ) -> Self {
        WakeRequest {
            id,
            agent_id: agent_id.into(),
            issue_id: Some(issue_id.into()),
            reason,
            comment_ids: comment.map(|c| vec![c.to_string()]).unwrap_or_default(),
            payload: Value::Null,
            idempotency_key: None,
            retry_of_run_id: None,
        }
    }
}

/// The wakes a set of changes has touched so far, so that several events of one command see
/// each other (two mentions of one agent in one comment make one wake).
pub(crate) struct Pending<'c> {
    pub changes: &'c mut Vec<Change>,
}

impl Pending<'_> {
    fn latest_wake(&self, id: &str) -> Option<Wake> {
        self.changes.iter().rev().find_map(|c| match c {
            Change::Wake(w) if w.id == id => Some(w.clone()),
            _ => None,
        })
    }

    /// The `w{slot}-{n}` after the greatest this command has taken. One command can raise
    /// issue events more than once (a comment's mentions, then the closed issue's parent and
    /// dependents), and numbering each from 1 gave two wakes one id: the later overwrote the
    /// earlier, or merged into it. One pass over the changes: a blocker done may wake
    /// thousands of dependents in one command.
    fn fresh_event_id(&self, ctx: &Ctx<'_>) -> String {
        let prefix = format!("w{}-", ctx.slot);
        let taken = self
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Wake(w) => w.id.strip_prefix(&prefix)?.parse::<u64>().ok(),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        format!("{prefix}{}", taken.saturating_add(1))
    }

    /// The issue as this command leaves it (it may have just changed), or as it was.
    fn issue(&self, ctx: &Ctx<'_>, id: Option<&str>) -> Option<Issue> {
        let id = id?;
        self.changes
            .iter()
            .rev()
            .find_map(|c| match c {
                Change::Issue(i) if i.id == id => Some(Issue::clone(i)),
                _ => None,
            })
            .or_else(|| ctx.state.issues.get(id).map(Cow::into_owned))
    }

    /// The pending wake of `agent_id` for `issue_id` as this command leaves it so far.
    ///
    /// A wake of the slot this command wrote and left pending comes first. A wake it wrote
    /// as coalesced, skipped or suppressed is not one to merge into: the scan goes on past it
    /// (stopping there left a second pending wake in one slot, and replicas that rebuilt the
    /// slot index from rows then merged into another wake than the running ones). Each wake
    /// counts by its latest version only: one this command took out of pending stays out.
    fn pending_for(&self, ctx: &Ctx<'_>, agent_id: &str, issue_id: Option<&str>) -> Option<Wake> {
        let mut seen: Vec<&str> = Vec::new();
        for change in self.changes.iter().rev() {
            let Change::Wake(w) = change else { continue };
            if w.agent_id != agent_id || w.issue_id.as_deref() != issue_id {
                continue;
            }
            if seen.contains(&w.id.as_str()) {
                continue;
            }
            if w.status.is_pending() {
                return Some(w.clone());
            }
            seen.push(&w.id);
        }
        let before = ctx.state.pending_wake(agent_id, issue_id)?;
        match self.latest_wake(&before.id) {
            Some(now) => now.status.is_pending().then_some(now),
            None => Some(before.clone()),
        }
    }
}

/// Whether the agent has anything to act on: an assigned issue that is open for work.
pub(crate) fn has_actionable_work(ctx: &Ctx<'_>, agent_id: &str) -> bool {
    ctx.state
        .open_issues_assigned_to(agent_id)
        .any(|i| matches!(i.status, IssueStatus::Todo | IssueStatus::InProgress))
}

/// The live run (other than `agent_id`'s own) holding `issue_id`, if any.
pub(crate) fn foreign_holder<'a>(
    ctx: &Ctx<'a>,
    agent_id: &str,
    issue_id: Option<&str>,
) -> Option<&'a Run> {
    let issue = ctx.state.issues.get(issue_id?)?;
    holder_of(ctx, agent_id, &issue)
}

/// The live run of another agent than `agent_id` holding `issue`'s checkout.
fn holder_of<'a>(ctx: &Ctx<'a>, agent_id: &str, issue: &Issue) -> Option<&'a Run> {
    let checkout = issue.checkout.as_ref()?;
    let run = ctx.state.runs.get(&checkout.run_id)?;
    (run.status.is_live() && run.agent_id != agent_id).then_some(run)
}

/// Records a wake request as a new wake (queued or deferred), merges it into a pending one, or
/// records it as skipped or suppressed. Returns the wake the caller should report.
pub(crate) fn enqueue(
    ctx: &Ctx<'_>,
    pending: &mut Pending<'_>,
    req: WakeRequest,
) -> Result<Wake, DomainError> {
    let agent = ctx
        .state
        .agents
        .get(&req.agent_id)
        .ok_or_else(|| DomainError::not_found("agent", &req.agent_id))?;
    if let Some(key) = &req.idempotency_key {
        if let Some(first) = ctx.state.wake_by_key(&agent.id, key) {
            return Ok(first.clone());
        }
    }
    let mut wake = Wake {
        id: req.id.clone(),
        company_id: agent.company_id.clone(),
        agent_id: agent.id.clone(),
        issue_id: req.issue_id.clone(),
        reason: req.reason,
        status: WakeStatus::Queued,
        status_reason: None,
        count: 1,
        comment_ids: req.comment_ids.clone(),
        payload: req.payload.clone(),
        idempotency_key: req.idempotency_key.clone(),
        requested_by_type: ctx.actor.kind.as_str().into(),
        requested_by_id: ctx.actor.id.clone(),
        coalesced_into: None,
        run_id: None,
        retry_of_run_id: req.retry_of_run_id.clone(),
        waiting_on_run: None,
        seq: ctx.slot,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    let skip = |wake: &mut Wake, status: WakeStatus, why: &str| {
        wake.status = status;
        wake.status_reason = Some(why.into());
    };
    if ctx.state.wakes.contains_key(&wake.id) || pending.latest_wake(&wake.id).is_some() {
        return Err(DomainError::AlreadyExists {
            entity: "wake".into(),
            id: wake.id,
        });
    }
    if req.reason.is_issue_event() && ctx.actor.agent_id() == Some(agent.id.as_str()) {
        // Self-wake suppression: an agent's own activity never wakes it.
        skip(&mut wake, WakeStatus::Suppressed, "self_authored");
    } else if agent.status == AgentStatus::Terminated {
        skip(&mut wake, WakeStatus::Skipped, "agent_terminated");
    } else if agent.status == AgentStatus::PendingApproval {
        skip(&mut wake, WakeStatus::Skipped, "agent_pending_approval");
    } else if let Some(why) = company_halt(ctx.state, &agent.company_id) {
        skip(&mut wake, WakeStatus::Skipped, why);
    } else if agent.status == AgentStatus::Paused {
        let why = match agent.pause_reason {
            Some(PauseReason::Budget) => "agent_paused_budget",
            Some(PauseReason::LoopDetected) => "agent_paused_loop",
            _ => "agent_paused",
        };
        skip(&mut wake, WakeStatus::Skipped, why);
    } else if req.reason == WakeReason::HeartbeatTimer && !agent.heartbeat.enabled {
        skip(&mut wake, WakeStatus::Skipped, "heartbeat_disabled");
    } else if req.reason == WakeReason::HeartbeatTimer
        && agent.heartbeat.skip_when_idle
        && !has_actionable_work(ctx, &agent.id)
    {
        skip(&mut wake, WakeStatus::Skipped, "idle");
    } else if req.reason == WakeReason::OnDemand && !agent.heartbeat.wake_on_demand {
        skip(&mut wake, WakeStatus::Skipped, "wake_on_demand_disabled");
    } else if let Some(mut into) = pending.pending_for(ctx, &agent.id, req.issue_id.as_deref()) {
        // (Before the daily caps: a merged wake starts no run of its own.)
        // Coalescing: one pending wake per (agent, issue) gathers every later one.
        into.count = into.count.saturating_add(1);
        into.comment_ids.extend(req.comment_ids.iter().cloned());
        into.updated_at = ctx.now();
        // An approval's decision reaches the run through its reason and payload
        // (`PAPERCLIP_APPROVAL_ID`): merged into another wake, it takes over the reason.
        if (into.reason == WakeReason::HeartbeatTimer && req.reason != WakeReason::HeartbeatTimer)
            || req.reason == WakeReason::ApprovalResolved
        {
            into.reason = req.reason;
        }
        merge_payload(&mut into.payload, &req.payload);
        wake.status = WakeStatus::Coalesced;
        wake.status_reason = Some(format!("merged into wake {}", into.id));
        wake.coalesced_into = Some(into.id.clone());
        pending.changes.push(Change::Wake(into));
    } else if let Some(why) = daily_cap(ctx.state, agent, ctx.now()) {
        skip(&mut wake, WakeStatus::Skipped, why);
    } else if let Some(holder) = pending
        .issue(ctx, req.issue_id.as_deref())
        .and_then(|i| holder_of(ctx, &agent.id, &i))
    {
        // Deferral: another agent's live run holds the issue; wait for it to end.
        wake.status = WakeStatus::Deferred;
        wake.status_reason = Some(format!(
            "issue held by run {} of agent {}",
            holder.id, holder.agent_id
        ));
        wake.waiting_on_run = Some(holder.id.clone());
    }
    if !matches!(wake.status, WakeStatus::Skipped | WakeStatus::Suppressed) {
        // The loop breaker decides here, where every wake is recorded.
        super::loop_breaker::guard(ctx, pending.changes, &mut wake);
    }
    pending.changes.push(Change::Wake(wake.clone()));
    Ok(wake)
}

/// A merged wake's payload gains the later request's keys, a later key winning, as Paperclip
/// merges a coalesced wake's context; if the merge would pass [`MAX_WAKE_PAYLOAD_BYTES`] (each
/// request was checked alone, not their sum), the later payload replaces it whole, so the
/// newest context (an approval's decision) is never the one lost.
fn merge_payload(into: &mut Value, later: &Value) {
    let Some(later) = later.as_object().filter(|o| !o.is_empty()) else {
        return;
    };
    let mut merged = match into {
        Value::Object(first) => first.clone(),
        Value::Null => serde_json::Map::new(),
        _ => return,
    };
    merged.extend(later.iter().map(|(k, v)| (k.clone(), v.clone())));
    let merged = Value::Object(merged);
    if serde_json::to_vec(&merged).is_ok_and(|b| b.len() <= MAX_WAKE_PAYLOAD_BYTES) {
        *into = merged;
    } else {
        *into = Value::Object(later.clone());
    }
}

/// Which of the agent's daily caps (`maxDailyRuns`, `maxDailyCostCents`) the current UTC day
/// has reached, if one: `daily_run_cap`, `daily_cost_cap`.
pub(crate) fn daily_cap(
    state: &crate::state::State,
    agent: &crate::entity::Agent,
    now: crate::time::Timestamp,
) -> Option<&'static str> {
    let policy = &agent.heartbeat;
    if policy.max_daily_runs.is_none() && policy.max_daily_cost_cents.is_none() {
        return None;
    }
    let day = state.agent_day(&agent.id, now);
    if policy.max_daily_runs.is_some_and(|cap| day.runs >= cap) {
        Some("daily_run_cap")
    } else if policy
        .max_daily_cost_cents
        .is_some_and(|cap| day.cents >= cap)
    {
        Some("daily_cost_cap")
    } else {
        None
    }
}

/// Why a company starts no runs now (`company_paused`, `company_archived`), if it does not.
pub(crate) fn company_halt(state: &crate::state::State, company_id: &str) -> Option<&'static str> {
    match state.companies.get(company_id).map(|c| c.status) {
        Some(CompanyStatus::Paused) => Some("company_paused"),
        Some(CompanyStatus::Archived) => Some("company_archived"),
        _ => None,
    }
}

/// Promotes the wakes deferred on `run_id` (it ended, or released `issue_id`) to queued.
pub(crate) fn promote_deferred(
    ctx: &Ctx<'_>,
    run_id: &str,
    issue_id: Option<&str>,
    changes: &mut Vec<Change>,
) {
    let waiting = ctx
        .state
        .wakes_waiting_on(run_id)
        .filter(|w| issue_id.is_none() || w.issue_id.as_deref() == issue_id);
    for wake in waiting {
        let mut w = wake.clone();
        w.status = WakeStatus::Queued;
        w.status_reason = Some(format!("promoted: run {run_id} ended"));
        w.waiting_on_run = None;
        w.updated_at = ctx.now();
        changes.push(Change::Wake(w));
    }
}

/// Names mentioned as `@name` in a comment body, lower-cased.
pub(crate) fn mentions(body: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, _) in body.match_indices('@') {
        let before = body[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric()) {
            continue; // an e-mail address, not a mention
        }
        let name: String = body[i + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        let name = name.trim_end_matches('.').to_lowercase();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The wakes an issue event causes: its assignee for `reason`, plus every agent of the
/// company mentioned in `comment_body`.
pub(crate) fn wake_for_issue_event(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    issue: &Issue,
    reason: Option<WakeReason>,
    comment: Option<(&str, &str)>,
) -> Result<(), DomainError> {
    let mut pending = Pending { changes };
    if let (Some(reason), Some(agent)) = (reason, issue.assignee_agent_id.as_deref()) {
        let req = WakeRequest::event(
            pending.fresh_event_id(ctx),
            agent,
            &issue.id,
            reason,
            comment.map(|(id, _)| id),
        );
        enqueue(ctx, &mut pending, req)?;
    }
    if let Some((comment_id, body)) = comment {
        for name in mentions(body) {
            let mentioned = ctx.state.agents.values().find(|a| {
                a.company_id == issue.company_id
                    && a.status != AgentStatus::Terminated
                    && a.name.to_lowercase() == name
            });
            if let Some(agent) = mentioned {
                let req = WakeRequest::event(
                    pending.fresh_event_id(ctx),
                    &agent.id,
                    &issue.id,
                    WakeReason::IssueCommentMentioned,
                    Some(comment_id),
                );
                enqueue(ctx, &mut pending, req)?;
            }
        }
    }
    Ok(())
}

/// Wakes `agent_id` about an issue-thread interaction of `issue`, the card named in `payload`
/// (`rules/interaction.rs`).
pub(crate) fn wake_for_interaction(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    agent_id: &str,
    issue: &Issue,
    reason: WakeReason,
    payload: Value,
) -> Result<(), DomainError> {
    let mut pending = Pending { changes };
    let mut req = WakeRequest::event(
        pending.fresh_event_id(ctx),
        agent_id,
        &issue.id,
        reason,
        None,
    );
    req.payload = payload;
    enqueue(ctx, &mut pending, req).map(|_| ())
}

/// After `issue` reached done or cancelled: wake the parent's assignee when every child is
/// closed.
pub(crate) fn wake_for_closed_issue(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    issue: &Issue,
) -> Result<(), DomainError> {
    // Read without loading: a closed issue may be in state.db only (`issue_map.rs`).
    let closed = |id: &str| id == issue.id || ctx.state.issues.is_closed(id) == Some(true);
    // The parent is read only if it is open and this was its last open child.
    let open_parent = (issue.parent_id.as_deref())
        .filter(|p| ctx.state.issues.is_closed(p) == Some(false))
        .filter(|p| ctx.state.child_ids_of(p).all(closed));
    if let Some(parent) = open_parent.and_then(|p| ctx.state.issues.get(p)) {
        wake_for_issue_event(
            ctx,
            changes,
            &parent,
            Some(WakeReason::IssueChildrenCompleted),
            None,
        )?;
    }
    Ok(())
}

/// After `issue` became done (from any other status, a cancelled one too, as in Paperclip):
/// wake the assignee of each issue it was the last unresolved blocker of (a cancelled blocker
/// resolves nothing: `issue::unresolved_blockers`).
pub(crate) fn wake_for_done_blocker(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    issue: &Issue,
) -> Result<(), DomainError> {
    let resolved = |id: &str| id == issue.id || super::issue::blocker_resolved(ctx.state, id);
    let open_dependents = (ctx.state.issue_ids_blocked_by(&issue.id))
        .filter(|d| ctx.state.issues.is_closed(d) == Some(false))
        .filter_map(|d| ctx.state.issues.get(d));
    for dependent in open_dependents {
        if dependent.blocked_by_issue_ids.iter().all(|b| resolved(b)) {
            wake_for_issue_event(
                ctx,
                changes,
                &dependent,
                Some(WakeReason::IssueBlockersResolved),
                None,
            )?;
        }
    }
    Ok(())
}

/// A command's decision that reports `wake` and audits it.
fn wake_decision(wake: Wake, changes: Vec<Change>) -> crate::state::Decision {
    let note = crate::state::ActivityNote {
        company_id: Some(wake.company_id.clone()),
        entity_type: "wake",
        entity_id: wake.id.clone(),
        details: wake_details(&wake),
    };
    crate::state::Decision {
        outcome: crate::command::Outcome::Wake(wake),
        changes,
        note,
    }
}

/// The details an activity entry keeps about a wake.
pub(crate) fn wake_details(w: &Wake) -> Value {
    json!({ "wakeId": w.id, "agentId": w.agent_id, "reason": w.reason, "status": w.status, "statusReason": w.status_reason })
}

/// `Wakeup`: an operator, an agent (for itself) or a routine asks for a run.
pub(crate) fn wakeup(
    ctx: &Ctx<'_>,
    id: &str,
    agent_id: &str,
    issue_id: Option<&str>,
    reason: WakeReason,
    payload: &Value,
    wake_key: Option<&str>,
) -> Result<crate::state::Decision, DomainError> {
    super::require_id("id", id)?;
    let agent = super::agent::visible_agent(ctx, agent_id)?;
    if let Some(own) = ctx.actor.agent_id() {
        if own != agent_id {
            return Err(DomainError::forbidden("an agent can only wake itself"));
        }
    }
    if !matches!(
        reason,
        WakeReason::OnDemand | WakeReason::Routine | WakeReason::ApprovalResolved
    ) {
        return Err(DomainError::invalid(
            "reason",
            "a wakeup request is on_demand, routine or approval_resolved",
        ));
    }
    if let Some(key) = wake_key {
        if key.is_empty() || key.len() > 128 {
            return Err(DomainError::invalid(
                "idempotencyKey",
                "must be 1-128 characters",
            ));
        }
    }
    if let Some(issue) = issue_id {
        if ctx
            .state
            .issues
            .get(issue)
            .is_none_or(|i| i.company_id != agent.company_id)
        {
            return Err(DomainError::not_found("issue", issue));
        }
    }
    ctx.fence()?;
    let mut changes = Vec::new();
    let req = WakeRequest {
        id: id.into(),
        agent_id: agent_id.into(),
        issue_id: issue_id.map(str::to_string),
        reason,
        comment_ids: Vec::new(),
        payload: payload.clone(),
        idempotency_key: wake_key.map(str::to_string),
        retry_of_run_id: None,
    };
    let wake = enqueue(
        ctx,
        &mut Pending {
            changes: &mut changes,
        },
        req,
    )?;
    Ok(wake_decision(wake, changes))
}

/// `TimerTick`: the agent's interval has passed since its last heartbeat. Refused when it has
/// not (a tick proposed twice, by two leaders across a failover, applies once).
pub(crate) fn timer_tick(
    ctx: &Ctx<'_>,
    agent_id: &str,
    wake_id: &str,
) -> Result<crate::state::Decision, DomainError> {
    ctx.require_admin("fire timers")?;
    super::require_id("wakeId", wake_id)?;
    let agent = ctx
        .state
        .agents
        .get(agent_id)
        .ok_or_else(|| DomainError::not_found("agent", agent_id))?;
    if let Some(next) = next_tick(agent) {
        if ctx.now() < next {
            return Err(DomainError::conflict(format!(
                "the next tick of agent {agent_id} is due at {next}"
            )));
        }
    }
    let mut changes = Vec::new();
    let req = WakeRequest {
        id: wake_id.into(),
        agent_id: agent_id.into(),
        issue_id: None,
        reason: WakeReason::HeartbeatTimer,
        comment_ids: Vec::new(),
        payload: Value::Null,
        idempotency_key: None,
        retry_of_run_id: None,
    };
    let wake = enqueue(
        ctx,
        &mut Pending {
            changes: &mut changes,
        },
        req,
    )?;
    // The tick is the new base of the interval, whether or not it starts a run; missed ticks
    // therefore collapse into this one.
    let mut ticked = agent.clone();
    ticked.last_heartbeat_at = Some(ctx.now());
    changes.push(Change::Agent(ticked));
    Ok(wake_decision(wake, changes))
}

/// When the agent's next timer tick is due: its interval after its last heartbeat (or after
/// its creation). `None` when its timer is off.
pub fn next_tick(agent: &Agent) -> Option<crate::time::Timestamp> {
    if !agent.heartbeat.enabled
        || agent.heartbeat.interval_sec == 0
        || agent.status != AgentStatus::Active
    {
        return None;
    }
    let base = agent.last_heartbeat_at.unwrap_or(agent.created_at);
    Some(crate::time::Timestamp(
        base.0.saturating_add(
            i64::try_from(agent.heartbeat.interval_sec)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000),
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn mentions_are_found_and_emails_are_not() {
        assert_eq!(
            mentions("@Coder please look, and @reviewer-2."),
            vec!["coder", "reviewer-2"]
        );
        assert_eq!(mentions("mail bob@example.com"), Vec::<String>::new());
        assert_eq!(mentions("@a @a"), vec!["a"]);
    }
}
