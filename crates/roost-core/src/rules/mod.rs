//! The domain's rules, one module per domain object. Each rule reads the state, decides,
//! and returns the rows to write; none mutates the state itself.

mod agent;
mod agent_delete;
#[cfg(test)]
mod agent_delete_tests;
#[cfg(test)]
mod agent_revision_tests;
mod approval;
#[cfg(test)]
mod approval_tests;
mod attachment;
#[cfg(test)]
mod attachment_tests;
#[cfg(test)]
mod batch_tests;
pub(crate) mod budget;
#[cfg(test)]
mod budget_project_tests;
#[cfg(test)]
mod budget_tests;
mod checkout;
mod claim;
mod comment;
#[cfg(test)]
mod comment_tests;
mod company;
#[cfg(test)]
mod company_issue_tests;
pub(crate) mod credential;
#[cfg(test)]
mod daily_cap_tests;
mod document;
#[cfg(test)]
mod document_tests;
// The credential tests' helpers, for worker_credential_tests.rs.
#[cfg(test)]
use credential::tests as credential_tests;
#[cfg(test)]
mod cold_issue_tests;
mod home;
#[cfg(test)]
mod home_tests;
#[cfg(test)]
mod hostile_tests;
pub(crate) mod interaction;
#[cfg(test)]
mod interaction_tests;
mod issue;
#[cfg(test)]
mod issue_index_tests;
mod label;
#[cfg(test)]
mod label_tests;
pub(crate) mod loop_breaker;
mod memory;
#[cfg(test)]
mod memory_company_tests;
#[cfg(test)]
mod memory_tests;
pub(crate) mod monitor;
#[cfg(test)]
mod monitor_tests;
pub(crate) mod org;
#[cfg(test)]
mod org_tests;
#[cfg(test)]
mod paperclip_rules_tests;
mod project;
#[cfg(test)]
mod project_tests;
pub(crate) mod recovery;
#[cfg(test)]
mod recovery_tests;
pub(crate) mod routine;
pub(crate) mod routine_due;
#[cfg(test)]
mod routine_tests;
pub(crate) mod run;
#[cfg(test)]
mod session_tests;
mod skill;
#[cfg(test)]
mod skill_tests;
#[cfg(test)]
mod state_hash_tests;
#[cfg(test)]
pub(crate) mod test_world;
#[cfg(test)]
mod tests;
pub(crate) mod wake;
#[cfg(test)]
mod wake_merge_tests;
#[cfg(test)]
mod wake_tests;
mod work_product;
mod worker;
#[cfg(test)]
mod worker_credential_tests;

use crate::command::{Actor, ActorKind, Command, Envelope};
use crate::entity::{Run, RunStatus};
use crate::error::DomainError;
use crate::state::{Decision, State};

pub(crate) fn decide(state: &State, slot: u64, env: &Envelope) -> Result<Decision, DomainError> {
    let ctx = Ctx {
        state,
        slot,
        env,
        actor: &env.actor,
    };
    // Out-of-range input is refused here too: an entry that reached the log without the
    // server's check (an older node, a forged proposal) must not overflow or bloat the state.
    crate::limits::check(&env.command)?;
    match &env.command {
        Command::Batch { .. } => Err(DomainError::invalid(
            "batch",
            "a batch is only valid as a whole log entry",
        )),
        Command::CreateCompany {
            id,
            name,
            issue_prefix,
        } => company::create(&ctx, id, name, issue_prefix),
        Command::UpdateCompany { company_id, patch } => company::update(&ctx, company_id, patch),
        Command::CreateCredential {
            id,
            kind,
            name,
            agent_id,
            token_hash,
        } => agent::create_credential(&ctx, id, *kind, name, agent_id.as_deref(), token_hash),
        Command::CreateJoinToken {
            id,
            name,
            token_hash,
            ttl_secs,
            max_uses,
        } => credential::create_join_token(&ctx, id, name, token_hash, *ttl_secs, *max_uses),
        Command::ExchangeJoinToken {
            worker_id,
            credential_id,
            token_hash,
        } => credential::exchange_join_token(&ctx, worker_id, credential_id, token_hash),
        Command::RevokeCredential { id, kind, agent_id } => {
            credential::revoke(&ctx, id, *kind, agent_id.as_deref())
        }
        Command::CreateAgent { .. } => agent::create(&ctx, &env.command),
        Command::UpdateAgent { agent_id, patch } => agent::update(&ctx, agent_id, patch),
        Command::PauseAgent { agent_id, reason } => agent::pause(&ctx, agent_id, *reason),
        Command::ResumeAgent { agent_id } => agent::resume(&ctx, agent_id),
        Command::ResetAgentSession { agent_id, task_key } => {
            agent::reset_session(&ctx, agent_id, task_key.as_deref())
        }
        Command::TerminateAgent { agent_id } => agent::terminate(&ctx, agent_id),
        Command::DeleteAgent { agent_id } => agent_delete::delete(&ctx, agent_id),
        Command::CreateIssue {
            id,
            company_id,
            fields,
        } => issue::create(&ctx, id, company_id, fields),
        Command::UpdateIssue {
            issue_id,
            patch,
            comment,
        } => issue::update(&ctx, issue_id, patch, comment.as_ref()),
        Command::DeleteIssue { issue_id } => issue::delete(&ctx, issue_id),
        Command::AddComment { issue_id, comment } => issue::add_comment(&ctx, issue_id, comment),
        Command::DeleteComment {
            issue_id,
            comment_id,
        } => comment::delete(&ctx, issue_id, comment_id),
        Command::Checkout {
            issue_id,
            agent_id,
            expected_statuses,
        } => checkout::checkout(&ctx, issue_id, agent_id, expected_statuses),
        Command::Release { issue_id } => checkout::release(&ctx, issue_id),
        Command::StartRun {
            id,
            agent_id,
            issue_id,
            invocation_source,
        } => run::start(&ctx, id, agent_id, issue_id.as_deref(), invocation_source),
        Command::Wakeup {
            id,
            agent_id,
            issue_id,
            reason,
            payload,
            wake_key,
        } => wake::wakeup(
            &ctx,
            id,
            agent_id,
            issue_id.as_deref(),
            *reason,
            payload,
            wake_key.as_deref(),
        ),
        Command::TimerTick { agent_id, wake_id } => wake::timer_tick(&ctx, agent_id, wake_id),
        Command::EscalateIssue { issue_id } => org::escalate_issue(&ctx, issue_id),
        Command::RecoverIssue { issue_id, wake_id } => {
            recovery::recover_issue(&ctx, issue_id, wake_id)
        }
        Command::TriggerIssueMonitor { issue_id, id } => monitor::trigger(&ctx, issue_id, id),
        Command::AssignRun {
            wake_id,
            run_id,
            worker_id,
            token_hash,
        } => run::assign(&ctx, wake_id, run_id, worker_id, token_hash.as_deref()),
        Command::AddRunToken { run_id, token_hash } => run::add_token(&ctx, run_id, token_hash),
        Command::RunStarted { run_id } => run::started(&ctx, run_id),
        Command::RegisterWorker {
            worker_id,
            name,
            adapters,
            labels,
            slots,
            version,
        } => worker::register(&ctx, worker_id, name, adapters, labels, *slots, version),
        Command::WorkerLost { worker_id } => worker::lost(&ctx, worker_id),
        Command::FinishRun {
            run_id,
            status,
            error,
            report,
        } => run::finish(&ctx, run_id, *status, error.as_deref(), report),
        Command::ReportUsage { run_id, usage } => run::report_usage(&ctx, run_id, usage),
        Command::SetBudgetPolicy {
            id,
            company_id,
            scope_type,
            scope_id,
            window_kind,
            amount,
            warn_percent,
            hard_stop_enabled,
        } => budget::set_policy(
            &ctx,
            id,
            company_id,
            *scope_type,
            scope_id,
            *window_kind,
            *amount,
            *warn_percent,
            *hard_stop_enabled,
        ),
        Command::RecordCostEvent { event } => budget::record_cost(&ctx, event),
        Command::Routine { routine: cmd } => routine::decide(&ctx, cmd),
        Command::AppendMemoryEntry {
            id,
            agent_id,
            entry,
            shared,
        } => memory::append_entry(&ctx, id, agent_id, entry, *shared),
        Command::PutMemoryDocument {
            company_id,
            agent_id,
            name,
            content,
            expected_version,
        } => memory::put_document(
            &ctx,
            company_id,
            agent_id.as_deref(),
            name,
            content,
            *expected_version,
        ),
        Command::SetMemoryLive {
            agent_id,
            current_task,
            coordinates,
        } => memory::set_live(&ctx, agent_id, current_task.as_ref(), coordinates.as_ref()),
        Command::SetCompanyMemoryLive {
            company_id,
            current_task,
            coordinates,
        } => memory::set_company_live(
            &ctx,
            company_id,
            current_task.as_ref(),
            coordinates.as_ref(),
        ),
        Command::CreateGoal {
            id,
            company_id,
            fields,
        } => project::create_goal(&ctx, id, company_id, fields),
        Command::UpdateGoal { goal_id, patch } => project::update_goal(&ctx, goal_id, patch),
        Command::DeleteGoal { goal_id } => project::delete_goal(&ctx, goal_id),
        Command::CreateProject {
            id,
            company_id,
            fields,
        } => project::create_project(&ctx, id, company_id, fields),
        Command::UpdateProject { project_id, patch } => {
            project::update_project(&ctx, project_id, patch)
        }
        Command::DeleteProject { project_id } => project::delete_project(&ctx, project_id),
        Command::CreateLabel {
            id,
            company_id,
            name,
            color,
        } => label::create(&ctx, id, company_id, name, color),
        Command::DeleteLabel { label_id } => label::delete(&ctx, label_id),
        Command::CreateSkill {
            id,
            company_id,
            fields,
        } => skill::create(&ctx, id, company_id, fields),
        Command::UpdateSkill { skill_id, patch } => skill::update(&ctx, skill_id, patch),
        Command::DeleteSkill { skill_id } => skill::delete(&ctx, skill_id),
        Command::IssueDocument { issue_id, key, op } => document::decide(&ctx, issue_id, key, op),
        Command::PutAttachmentChunk {
            issue_id,
            attachment_id,
            index,
            content,
        } => attachment::put_chunk(&ctx, issue_id, attachment_id, *index, content),
        Command::AddIssueAttachment {
            issue_id,
            attachment_id,
            work_product_id,
            upload,
        } => attachment::add(&ctx, issue_id, attachment_id, work_product_id, upload),
        Command::RemoveIssueAttachment { attachment_id } => attachment::remove(&ctx, attachment_id),
        Command::CreateWorkProduct {
            issue_id,
            work_product_id,
            fields,
        } => work_product::create(&ctx, issue_id, work_product_id, fields),
        Command::UpdateWorkProduct {
            work_product_id,
            fields,
        } => work_product::update(&ctx, work_product_id, fields),
        Command::DeleteWorkProduct { work_product_id } => {
            work_product::delete(&ctx, work_product_id)
        }
        Command::IssueInteraction { issue_id, op } => interaction::decide(&ctx, issue_id, op),
        Command::SetAgentSkills { agent_id, skills } => {
            skill::set_agent_skills(&ctx, agent_id, skills)
        }
        Command::CreateApproval {
            id,
            company_id,
            approval_type,
            payload,
            requested_by_agent_id,
            issue_ids,
        } => approval::create(
            &ctx,
            id,
            company_id,
            *approval_type,
            payload,
            requested_by_agent_id.as_deref(),
            issue_ids,
        ),
        Command::HireAgent {
            approval_id,
            agent,
            payload,
        } => agent::hire(&ctx, approval_id, agent, payload),
        Command::DecideApproval {
            approval_id,
            decision,
            decision_note,
        } => approval::decide(&ctx, approval_id, *decision, decision_note.as_deref()),
        Command::ResubmitApproval {
            approval_id,
            payload,
        } => approval::resubmit(&ctx, approval_id, payload.as_ref()),
        Command::AddApprovalComment {
            approval_id,
            comment_id,
            body,
        } => approval::comment(&ctx, approval_id, comment_id, body),
        Command::LinkApprovalIssue {
            approval_id,
            issue_id,
            linked,
        } => approval::link_issue(&ctx, approval_id, issue_id, *linked),
        Command::PutHomeChunks { agent_id, chunks } => home::put_chunks(&ctx, agent_id, chunks),
        Command::SaveAgentHome {
            agent_id,
            base_version,
            files,
            deleted,
        } => home::save(&ctx, agent_id, *base_version, files, deleted),
        Command::ResolveBudgetIncident {
            incident_id,
            action,
            amount,
        } => budget::resolve_incident(&ctx, incident_id, *action, *amount),
    }
}

/// What every rule sees.
pub(crate) struct Ctx<'a> {
    pub state: &'a State,
    /// This command's slot ([`crate::state::slot`]): fencing tokens and generated ids.
    pub slot: u64,
    pub env: &'a Envelope,
    pub actor: &'a Actor,
}

impl Ctx<'_> {
    pub fn is_admin(&self) -> bool {
        matches!(self.actor.kind, ActorKind::User | ActorKind::System)
    }

    pub fn require_admin(&self, what: &str) -> Result<(), DomainError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(DomainError::forbidden(format!(
                "only an administrator can {what}"
            )))
        }
    }

    /// Company scoping: an actor bound to a company never reads or writes another. Objects of
    /// another company are reported as not found so their existence does not leak.
    pub fn require_company(
        &self,
        company_id: &str,
        entity: &str,
        id: &str,
    ) -> Result<(), DomainError> {
        match &self.actor.company_id {
            Some(own) if own != company_id => Err(DomainError::not_found(entity, id)),
            _ => Ok(()),
        }
    }

    /// Fencing: a write made for a run is accepted only while that run is
    /// live, and only from the agent that owns it.
    pub fn fence(&self) -> Result<Option<&Run>, DomainError> {
        let Some(run_id) = &self.actor.run_id else {
            return Ok(None);
        };
        let Some(run) = self.state.runs.get(run_id) else {
            return Err(DomainError::StaleRun {
                run_id: run_id.clone(),
                status: "unknown".into(),
            });
        };
        if let Some(agent_id) = self.actor.agent_id() {
            if run.agent_id != agent_id {
                return Err(DomainError::forbidden(format!(
                    "run {run_id} belongs to another agent"
                )));
            }
        }
        if !run.status.is_live() {
            return Err(DomainError::StaleRun {
                run_id: run_id.clone(),
                status: run.status.as_str().into(),
            });
        }
        Ok(Some(run))
    }

    pub fn now(&self) -> crate::time::Timestamp {
        self.env.at
    }
}

/// Validates a required human-readable text field.
pub(crate) fn require_text(
    field: &str,
    value: &str,
    max_chars: usize,
) -> Result<String, DomainError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(DomainError::invalid(field, "must not be empty"));
    }
    if trimmed.chars().count() > max_chars {
        return Err(DomainError::invalid(
            field,
            format!("must be at most {max_chars} characters"),
        ));
    }
    Ok(trimmed.to_string())
}

/// Validates an id proposed by a client node (a UUID or similar opaque token).
pub(crate) fn require_id(field: &str, value: &str) -> Result<(), DomainError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(DomainError::invalid(
            field,
            "must be 1-64 characters of [A-Za-z0-9_-]",
        ))
    }
}

/// Ends a run: the run's new row and the release of every checkout it held, in one decision.
pub(crate) fn end_run(
    ctx: &Ctx<'_>,
    run: &Run,
    status: RunStatus,
    error: Option<&str>,
) -> Vec<crate::state::Change> {
    use crate::state::Change;
    let mut changes = Vec::new();
    let mut ended = run.clone();
    ended.status = status;
    ended.error = error.map(str::to_string);
    ended.finished_at = Some(ctx.now());
    for issue in ctx.state.issues_checked_out_by(&run.id) {
        let mut released = issue.into_owned();
        released.set_checkout(None);
        released.updated_at = ctx.now();
        changes.push(Change::Issue(released.into()));
    }
    changes.push(Change::Run(ended));
    // Its usage becomes spend; its reservation ends with it.
    budget::settle(ctx, run, &mut changes);
    // Wakes deferred while this run held their issue may run now.
    wake::promote_deferred(ctx, &run.id, None, &mut changes);
    // The next timer tick counts from the end of this heartbeat.
    budget::upsert_agent(ctx, &mut changes, &run.agent_id, |a| {
        a.last_heartbeat_at = Some(ctx.now())
    });
    changes
}
