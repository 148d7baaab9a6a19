//! Bounds on every number, text and collection a command may carry, and the per-company
//! quotas. [`check`] is a pure function of the command: the server calls it before proposing
//! (so bad input is a clear 4xx and nothing enters the log), and `apply` calls it again, so an
//! entry that reached the log anyway (an older node, a forged proposal) is refused identically
//! on every replica instead of overflowing a sum or bloating the state.
//!
//! The numeric bounds are chosen so that no sum the rules make can overflow `u64`/`i64`: a sum
//! of a million maximal costs is still far below `u64::MAX`, and the rules saturate anyway.

use std::collections::BTreeMap;

use crate::command::{AgentPatch, Command, IssuePatch, NewComment, NewCostEvent};
use crate::entity::{HeartbeatPolicy, RunReport, Usage};
use crate::error::DomainError;
use crate::time::Timestamp;

/// The largest amount of money in any one field: ten billion dollars, in cents.
pub const MAX_CENTS: u64 = 1_000_000_000_000;
/// The largest cost in micro-dollars (`MAX_CENTS` in micro-dollars).
pub const MAX_MICRO_USD: u64 = MAX_CENTS * 10_000;
/// The largest token count in any one usage counter (10^15).
pub const MAX_TOKENS: u64 = 1_000_000_000_000_000;
/// The longest heartbeat interval: one year.
pub const MAX_INTERVAL_SEC: u64 = 366 * 24 * 60 * 60;
/// The latest timestamp a client may name: 9999-12-31T23:59:59.999Z.
pub const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

pub const MAX_TITLE_CHARS: usize = 500;
pub const MAX_DESCRIPTION_CHARS: usize = 100_000;
pub const MAX_COMMENT_CHARS: usize = 100_000;
pub const MAX_BILLING_CODE_CHARS: usize = 200;
pub const MAX_NAME_CHARS: usize = 200;
/// Issues one issue may be blocked by.
pub const MAX_BLOCKERS: usize = 100;
/// `adapterConfig` as JSON text.
pub const MAX_ADAPTER_CONFIG_BYTES: usize = 64 * 1024;
/// A wake's payload as JSON text (it reaches the agent in a file when large).
pub const MAX_WAKE_PAYLOAD_BYTES: usize = 64 * 1024;
/// Placement labels of an agent, or labels of a worker.
pub const MAX_LABELS: usize = 64;
pub const MAX_LABEL_KEY_CHARS: usize = 63;
pub const MAX_LABEL_VALUE_CHARS: usize = 255;
/// Slots a worker may offer.
pub const MAX_WORKER_SLOTS: u32 = 1024;
/// Adapters a worker may offer.
pub const MAX_WORKER_ADAPTERS: usize = 32;
/// An error text recorded on a run.
pub const MAX_ERROR_CHARS: usize = 4000;
/// A client's idempotency key (checked by the server before anything is proposed).
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = crate::idempotency::MAX_KEY_LEN;

/// One memory log entry: the bytes of `what`, `did`, `next` and `errors` together.
pub const MAX_MEMORY_ENTRY_BYTES: usize = 8 * 1024;
/// Entries kept per agent: the oldest is dropped when a new one would pass this.
pub const MAX_MEMORY_ENTRIES_PER_AGENT: usize = 500;
/// Entries kept in a company's shared log, likewise.
pub const MAX_MEMORY_ENTRIES_PER_COMPANY: usize = 1_000;
/// One memory document (`MEMORY.md`, `STATE.md`), in bytes of UTF-8.
pub const MAX_MEMORY_DOCUMENT_BYTES: usize = 64 * 1024;
/// Versions kept per document (the current one included): the oldest is dropped.
pub const MAX_MEMORY_DOCUMENT_VERSIONS: usize = 20;
/// `current-task`: `doing`, and each of at most 3 `last` and 3 `next` items.
pub const MAX_CURRENT_TASK_CHARS: usize = 2_000;
pub const MAX_CURRENT_TASK_ITEMS: usize = 3;
/// Live `coordinates`, as JSON text.
pub const MAX_COORDINATES_BYTES: usize = 4 * 1024;
/// An agent's home (`home.rs`): files it may hold, a path's length, and the largest cap an
/// administrator may give it (`homeMaxBytes`).
pub const MAX_HOME_FILES: usize = 10_000;
pub const MAX_HOME_PATH_BYTES: usize = 512;
pub const MAX_HOME_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// One upload of home chunks: their bytes together (base64 in the request: under the 1 MiB
/// REST body limit) and their count.
pub const MAX_HOME_UPLOAD_BYTES: usize = 512 * 1024;
pub const MAX_HOME_UPLOAD_CHUNKS: usize = 64;
/// An approval (`approval.rs`): its payload as JSON, the issues it links, its comments and a
/// comment's or decision note's length.
pub const MAX_APPROVAL_PAYLOAD_BYTES: usize = 64 * 1024;
pub const MAX_APPROVAL_ISSUES: usize = 50;
pub const MAX_APPROVAL_COMMENTS: usize = 200;
pub const MAX_APPROVAL_TEXT_CHARS: usize = 10_000;

/// Goals and projects a company may have (`project.rs`).
pub const MAX_GOALS_PER_COMPANY: usize = 1_000;
pub const MAX_PROJECTS_PER_COMPANY: usize = 1_000;
/// Agents a company may have (terminated ones included: their rows stay).
pub const MAX_AGENTS_PER_COMPANY: usize = 1_000;
/// Issues of a company that are not done or cancelled.
pub const MAX_OPEN_ISSUES_PER_COMPANY: usize = 100_000;
/// Runs a company may start in one clock hour (UTC, from the leader's stamped time): enough for
/// every agent of a full company to run once a minute, so only a runaway start loop meets it.
pub const MAX_RUNS_PER_HOUR_PER_COMPANY: u32 = 60 * MAX_AGENTS_PER_COMPANY as u32;
/// The loop breaker's windows (`loopBreaker.windowMinutes`, `runWindowMinutes`): up to a day,
/// which also bounds the wakes the state keeps for it (`loop_breaker.rs`).
pub const MAX_LOOP_WINDOW_MINUTES: u32 = 24 * 60;
/// The loop breaker's counts (`issueWakes`, `pingPongWakes`, `runWakes`).
pub const MAX_LOOP_WAKES: u32 = 10_000;

/// Refuses a command any of whose fields is out of range. Depends on the command alone.
pub fn check(command: &Command) -> Result<(), DomainError> {
    match command {
        Command::Batch { envelopes } => {
            // Each envelope is checked when it is applied; a batch only bounds its length.
            if envelopes.len() as u64 > crate::state::SLOTS_PER_ENTRY {
                return Err(DomainError::too_large(
                    "batch",
                    crate::state::SLOTS_PER_ENTRY,
                    "commands",
                ));
            }
            Ok(())
        }
        Command::CreateCompany { name, .. } => chars("name", name, MAX_NAME_CHARS),
        Command::UpdateCompany { patch, .. } => {
            if let Some(lb) = &patch.loop_breaker {
                lb.check("loopBreaker")?;
            }
            opt_chars("name", patch.name.as_ref(), MAX_NAME_CHARS)?;
            opt_chars(
                "description",
                patch.description.as_ref().and_then(|d| d.as_ref()),
                MAX_DESCRIPTION_CHARS,
            )
        }
        Command::DeleteIssue { .. } | Command::DeleteComment { .. } => Ok(()),
        Command::CreateCredential { name, .. } => chars("name", name, MAX_NAME_CHARS),
        Command::CreateJoinToken {
            name,
            ttl_secs,
            max_uses,
            ..
        } => crate::rules::credential::check_join_token(name, *ttl_secs, *max_uses),
        Command::RevokeCredential { .. } => Ok(()),
        Command::CreateAgent {
            name,
            role,
            title,
            adapter_config,
            heartbeat,
            placement_labels,
            ..
        } => {
            chars("name", name, MAX_NAME_CHARS)?;
            chars("role", role, MAX_NAME_CHARS)?;
            opt_chars("title", title.as_ref(), MAX_NAME_CHARS)?;
            json_bytes("adapterConfig", adapter_config, MAX_ADAPTER_CONFIG_BYTES)?;
            heartbeat_policy(heartbeat)?;
            labels("placementLabels", placement_labels)
        }
        Command::UpdateAgent { patch, .. } => agent_patch(patch),
        Command::CreateIssue { fields, .. } => issue_patch(fields),
        Command::UpdateIssue { patch, comment, .. } => {
            issue_patch(patch)?;
            comment.as_ref().map_or(Ok(()), new_comment)
        }
        Command::AddComment { comment, .. } => new_comment(comment),
        Command::Checkout {
            expected_statuses, ..
        } => {
            if expected_statuses.len() > 32 {
                return Err(DomainError::too_large("expectedStatuses", 32, "entries"));
            }
            Ok(())
        }
        Command::StartRun {
            invocation_source, ..
        } => chars("invocationSource", invocation_source, MAX_NAME_CHARS),
        Command::FinishRun { error, report, .. } => {
            opt_chars("error", error.as_ref(), MAX_ERROR_CHARS)?;
            run_report(report)
        }
        Command::SetBudgetPolicy { amount, .. } => cents("amount", *amount),
        Command::RecordCostEvent { event } => cost_event(event),
        Command::ResolveBudgetIncident { amount, .. } => {
            amount.map_or(Ok(()), |a| cents("amount", a))
        }
        Command::ReportUsage { usage, .. } => usage_in_range("usage", usage),
        Command::Wakeup {
            payload, wake_key, ..
        } => {
            json_bytes("payload", payload, MAX_WAKE_PAYLOAD_BYTES)?;
            opt_chars("idempotencyKey", wake_key.as_ref(), MAX_IDEMPOTENCY_KEY_LEN)
        }
        Command::RegisterWorker {
            name,
            adapters,
            labels: worker_labels,
            slots,
            version,
            ..
        } => {
            chars("name", name, MAX_NAME_CHARS)?;
            chars("version", version, MAX_NAME_CHARS)?;
            if adapters.len() > MAX_WORKER_ADAPTERS {
                return Err(DomainError::too_large(
                    "adapters",
                    MAX_WORKER_ADAPTERS as u64,
                    "entries",
                ));
            }
            if *slots > MAX_WORKER_SLOTS {
                return Err(out_of_range("slots", 0, MAX_WORKER_SLOTS as u64));
            }
            labels("labels", worker_labels)
        }
        Command::Routine { routine } => routine.check(),
        Command::AppendMemoryEntry { entry, .. } => memory_entry(entry),
        Command::PutMemoryDocument { content, .. } => {
            if content.len() > MAX_MEMORY_DOCUMENT_BYTES {
                return Err(DomainError::too_large(
                    "content",
                    MAX_MEMORY_DOCUMENT_BYTES as u64,
                    "bytes",
                ));
            }
            Ok(())
        }
        Command::SetMemoryLive {
            current_task,
            coordinates,
            ..
        }
        | Command::SetCompanyMemoryLive {
            current_task,
            coordinates,
            ..
        } => live_parts(current_task.as_ref(), coordinates.as_ref()),
        Command::PutHomeChunks { chunks, .. } => home_upload(chunks),
        Command::CreateApproval { payload, .. } => {
            json_bytes("payload", payload, MAX_APPROVAL_PAYLOAD_BYTES)
        }
        Command::HireAgent { agent, payload, .. } => {
            json_bytes("payload", payload, MAX_APPROVAL_PAYLOAD_BYTES)?;
            check(agent)
        }
        Command::DecideApproval { decision_note, .. } => opt_chars(
            "decisionNote",
            decision_note.as_ref(),
            MAX_APPROVAL_TEXT_CHARS,
        ),
        Command::ResubmitApproval { payload, .. } => payload.as_ref().map_or(Ok(()), |p| {
            json_bytes("payload", p, MAX_APPROVAL_PAYLOAD_BYTES)
        }),
        Command::AddApprovalComment { body, .. } => chars("body", body, MAX_APPROVAL_TEXT_CHARS),
        Command::SaveAgentHome { files, deleted, .. } => {
            if files.len() > MAX_HOME_FILES || deleted.len() > MAX_HOME_FILES {
                return Err(DomainError::too_large(
                    "files",
                    MAX_HOME_FILES as u64,
                    "files",
                ));
            }
            for path in files.keys() {
                if let Some(problem) = crate::home::path_problem(path) {
                    return Err(DomainError::invalid("files", problem));
                }
            }
            // A path that memory has since taken over (`home::MANAGED_DIRS` grew) may still be
            // in a home saved before; deleting it must stay possible, or that home could never
            // be saved again.
            for path in deleted {
                if let Some(problem) = crate::home::relative_path_problem(path) {
                    return Err(DomainError::invalid("deleted", problem));
                }
            }
            Ok(())
        }
        // Goals, projects and labels are checked field by field in `rules/project.rs` and
        // `rules/label.rs`.
        Command::CreateGoal { .. }
        | Command::UpdateGoal { .. }
        | Command::DeleteGoal { .. }
        | Command::CreateProject { .. }
        | Command::UpdateProject { .. }
        | Command::DeleteProject { .. }
        | Command::CreateLabel { .. }
        | Command::DeleteLabel { .. } => Ok(()),
        Command::CreateSkill { fields, .. } => skill_files(
            fields
                .files
                .iter()
                .map(|(p, c)| (p.as_str(), Some(c.as_str())))
                .chain(
                    fields
                        .markdown
                        .as_deref()
                        .map(|m| (crate::skill::SKILL_FILE, Some(m))),
                ),
        ),
        Command::UpdateSkill { patch, .. } => {
            skill_files(patch.files.iter().map(|(p, c)| (p.as_str(), c.as_deref())))
        }
        Command::SetAgentSkills { skills, .. } => {
            if skills.len() > crate::skill::MAX_AGENT_SKILLS {
                return Err(DomainError::too_large(
                    "desiredSkills",
                    crate::skill::MAX_AGENT_SKILLS as u64,
                    "skills",
                ));
            }
            Ok(())
        }
        Command::DeleteSkill { .. } | Command::LinkApprovalIssue { .. } => Ok(()),
        Command::IssueDocument { op, .. } => op.check(),
        Command::AddIssueAttachment { upload, .. } => upload.check(),
        Command::PutAttachmentChunk { index, content, .. } => {
            crate::attachment::check_chunk(*index, content)
        }
        Command::RemoveIssueAttachment { .. } | Command::DeleteWorkProduct { .. } => Ok(()),
        Command::CreateWorkProduct { fields, .. } => fields.check_create(),
        Command::UpdateWorkProduct { fields, .. } => fields.check(),
        Command::IssueInteraction { op, .. } => op.check(),
        Command::ResetAgentSession { task_key, .. } => {
            opt_chars("taskKey", task_key.as_ref(), MAX_NAME_CHARS)
        }
        Command::PauseAgent { .. }
        | Command::ResumeAgent { .. }
        | Command::TerminateAgent { .. }
        | Command::DeleteAgent { .. }
        | Command::Release { .. }
        | Command::TimerTick { .. }
        | Command::EscalateIssue { .. }
        | Command::RecoverIssue { .. }
        | Command::TriggerIssueMonitor { .. }
        | Command::AssignRun { .. }
        | Command::AddRunToken { .. }
        | Command::RunStarted { .. }
        | Command::WorkerLost { .. }
        | Command::ExchangeJoinToken { .. } => Ok(()),
    }
}

/// A skill's files as sent: paths that can be written on a worker, and no more files or bytes
/// than one skill may hold (the rules check the skill as it would become).
fn skill_files<'a>(
    files: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<(), DomainError> {
    use crate::skill::{file_path_problem, MAX_SKILL_BYTES, MAX_SKILL_FILES};
    let (mut count, mut bytes) = (0usize, 0usize);
    for (path, content) in files {
        count += 1;
        bytes = bytes.saturating_add(content.map_or(0, str::len));
        if let Some(problem) = file_path_problem(path) {
            return Err(DomainError::invalid("files", problem));
        }
    }
    if count > MAX_SKILL_FILES + 1 {
        return Err(DomainError::too_large(
            "files",
            MAX_SKILL_FILES as u64,
            "files",
        ));
    }
    if bytes > MAX_SKILL_BYTES {
        return Err(DomainError::too_large(
            "files",
            MAX_SKILL_BYTES as u64,
            "bytes",
        ));
    }
    Ok(())
}

/// The clock hour (UTC) a time falls in, the window of the runs-per-hour quota.
pub fn hour_of(at: Timestamp) -> i64 {
    at.0.div_euclid(3_600_000)
}

fn out_of_range(field: &str, min: u64, max: u64) -> DomainError {
    DomainError::invalid(field, format!("must be between {min} and {max}"))
}

fn cents(field: &str, value: u64) -> Result<(), DomainError> {
    if value > MAX_CENTS {
        return Err(out_of_range(field, 0, MAX_CENTS));
    }
    Ok(())
}

pub(crate) fn chars(field: &str, value: &str, max: usize) -> Result<(), DomainError> {
    // Bytes bound chars from above: only long texts need counting.
    if value.len() > max && value.chars().count() > max {
        return Err(DomainError::too_large(field, max as u64, "characters"));
    }
    Ok(())
}

fn opt_chars(field: &str, value: Option<&String>, max: usize) -> Result<(), DomainError> {
    value.map_or(Ok(()), |v| chars(field, v, max))
}

fn json_bytes(field: &str, value: &serde_json::Value, max: usize) -> Result<(), DomainError> {
    let len = serde_json::to_vec(value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if len > max {
        return Err(DomainError::too_large(field, max as u64, "bytes of JSON"));
    }
    Ok(())
}

fn labels(field: &str, labels: &BTreeMap<String, String>) -> Result<(), DomainError> {
    if labels.len() > MAX_LABELS {
        return Err(DomainError::too_large(field, MAX_LABELS as u64, "labels"));
    }
    for (key, value) in labels {
        chars(field, key, MAX_LABEL_KEY_CHARS)?;
        chars(field, value, MAX_LABEL_VALUE_CHARS)?;
    }
    Ok(())
}

fn heartbeat_policy(policy: &HeartbeatPolicy) -> Result<(), DomainError> {
    if policy.interval_sec > MAX_INTERVAL_SEC {
        return Err(out_of_range("heartbeat.intervalSec", 0, MAX_INTERVAL_SEC));
    }
    cents("heartbeat.runReserveCents", policy.run_reserve_cents)?;
    policy
        .max_daily_cost_cents
        .map_or(Ok(()), |c| cents("heartbeat.maxDailyCostCents", c))
}

fn agent_patch(patch: &AgentPatch) -> Result<(), DomainError> {
    if let Some(lb) = &patch.loop_breaker {
        lb.check("loopBreaker")?;
    }
    opt_chars("name", patch.name.as_ref(), MAX_NAME_CHARS)?;
    opt_chars("role", patch.role.as_ref(), MAX_NAME_CHARS)?;
    opt_chars(
        "rolledBackFrom",
        patch.rolled_back_from.as_ref(),
        MAX_NAME_CHARS,
    )?;
    opt_chars(
        "title",
        patch.title.as_ref().and_then(Option::as_ref),
        MAX_NAME_CHARS,
    )?;
    if let Some(config) = &patch.adapter_config {
        json_bytes("adapterConfig", config, MAX_ADAPTER_CONFIG_BYTES)?;
    }
    if let Some(policy) = &patch.heartbeat {
        heartbeat_policy(policy)?;
    }
    if let Some(cap) = patch.home_max_bytes {
        if cap > MAX_HOME_MAX_BYTES {
            return Err(out_of_range("homeMaxBytes", 0, MAX_HOME_MAX_BYTES));
        }
    }
    patch
        .placement_labels
        .as_ref()
        .map_or(Ok(()), |l| labels("placementLabels", l))
}

/// Fields of Paperclip's issue schemas that Roost accepts and keeps as sent (its clients send
/// them, often with their defaults), but `labelIds`, checked against the company's labels
/// (`rules/label.rs`); any other unknown field is refused.
pub const PAPERCLIP_ISSUE_FIELDS: &[&str] = &[
    "projectWorkspaceId",
    "teamId",
    "inheritExecutionWorkspaceFromIssueId",
    "estimate",
    "requestDepth",
    "assigneeAdapterOverrides",
    "executionPolicy",
    "executionWorkspaceId",
    "executionWorkspacePreference",
    "executionWorkspaceSettings",
    "labelIds",
    "allowDuplicate",
    "acceptanceCriteria",
    "blockParentUntilDone",
    "interrupt",
    "hiddenAt",
    "reviewRequest",
    "unblockDescriptor",
    "workMode",
    "harnessKind",
    "reviewPolicy",
    "responsibleUserId",
    "watchdogDiscovery",
    "watchdog",
    "initialPlan",
    "onboardingFirstTask",
    "commentClientRequestId",
    "attachmentIds",
    "onBehalfOfUserId",
    "reviewInteractionId",
    "deferWakeForGoal",
];
/// The most the kept Paperclip fields of one issue hold, as JSON.
pub const MAX_PAPERCLIP_FIELDS_BYTES: usize = 16 * 1024;

fn issue_patch(patch: &IssuePatch) -> Result<(), DomainError> {
    if let Some(fields) = &patch.paperclip {
        if let Some(unknown) = fields
            .keys()
            .find(|k| !PAPERCLIP_ISSUE_FIELDS.contains(&k.as_str()))
        {
            let shown: String = unknown.chars().take(64).collect();
            return Err(DomainError::invalid(
                "paperclipFields",
                format!("`{shown}` is not a field of Paperclip's issue schemas that Roost keeps"),
            ));
        }
        let bytes = serde_json::to_vec(fields)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if bytes > MAX_PAPERCLIP_FIELDS_BYTES {
            return Err(DomainError::too_large(
                "paperclipFields",
                MAX_PAPERCLIP_FIELDS_BYTES as u64,
                "bytes of JSON",
            ));
        }
    }
    if let Some(Some(monitor)) = &patch.monitor {
        monitor.check()?;
    }
    opt_chars("title", patch.title.as_ref(), MAX_TITLE_CHARS)?;
    opt_chars(
        "description",
        patch.description.as_ref().and_then(Option::as_ref),
        MAX_DESCRIPTION_CHARS,
    )?;
    opt_chars(
        "billingCode",
        patch.billing_code.as_ref().and_then(Option::as_ref),
        MAX_BILLING_CODE_CHARS,
    )?;
    opt_chars(
        "assigneeUserId",
        patch.assignee_user_id.as_ref().and_then(Option::as_ref),
        MAX_NAME_CHARS,
    )?;
    if patch
        .blocked_by_issue_ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_BLOCKERS)
    {
        return Err(DomainError::too_large(
            "blockedByIssueIds",
            MAX_BLOCKERS as u64,
            "issues",
        ));
    }
    Ok(())
}

fn new_comment(comment: &NewComment) -> Result<(), DomainError> {
    chars("body", &comment.body, MAX_COMMENT_CHARS)
}

fn live_parts(
    current_task: Option<&crate::memory::CurrentTask>,
    coordinates: Option<&serde_json::Value>,
) -> Result<(), DomainError> {
    if let Some(task) = current_task {
        chars("currentTask.doing", &task.doing, MAX_CURRENT_TASK_CHARS)?;
        for (field, items) in [
            ("currentTask.last", &task.last),
            ("currentTask.next", &task.next),
        ] {
            if items.len() > MAX_CURRENT_TASK_ITEMS {
                return Err(DomainError::too_large(
                    field,
                    MAX_CURRENT_TASK_ITEMS as u64,
                    "items",
                ));
            }
            for item in items {
                chars(field, item, MAX_CURRENT_TASK_CHARS)?;
            }
        }
    }
    coordinates.map_or(Ok(()), |c| {
        json_bytes("coordinates", c, MAX_COORDINATES_BYTES)
    })
}

fn memory_entry(entry: &crate::memory::NewMemoryEntry) -> Result<(), DomainError> {
    let bytes = crate::memory::entry_bytes(&entry.what, &entry.did, &entry.next, &entry.errors);
    if bytes > MAX_MEMORY_ENTRY_BYTES as u64 {
        return Err(DomainError::too_large(
            "entry",
            MAX_MEMORY_ENTRY_BYTES as u64,
            "bytes (what, did, next and errors together)",
        ));
    }
    Ok(())
}

/// An upload's chunks, as base64 text: their count, and their decoded size bounded from their
/// length (4 characters per 3 bytes) before anything is decoded.
fn home_upload(chunks: &[String]) -> Result<(), DomainError> {
    if chunks.is_empty() {
        return Err(DomainError::invalid("chunks", "send at least one chunk"));
    }
    if chunks.len() > MAX_HOME_UPLOAD_CHUNKS {
        return Err(DomainError::too_large(
            "chunks",
            MAX_HOME_UPLOAD_CHUNKS as u64,
            "chunks per upload",
        ));
    }
    let decoded: usize = chunks.iter().map(|c| c.len() / 4 * 3).sum();
    if decoded > MAX_HOME_UPLOAD_BYTES + 2 * chunks.len() {
        return Err(DomainError::too_large(
            "chunks",
            MAX_HOME_UPLOAD_BYTES as u64,
            "bytes per upload",
        ));
    }
    Ok(())
}

fn usage_in_range(field: &str, usage: &Usage) -> Result<(), DomainError> {
    let tokens = [
        usage.input_tokens,
        usage.cached_input_tokens,
        usage.output_tokens,
    ];
    if tokens.iter().any(|t| *t > MAX_TOKENS) {
        return Err(DomainError::invalid(
            field,
            format!("token counts must be between 0 and {MAX_TOKENS}"),
        ));
    }
    if usage.cost_micro_usd > MAX_MICRO_USD {
        return Err(out_of_range(
            &format!("{field}.costMicroUsd"),
            0,
            MAX_MICRO_USD,
        ));
    }
    Ok(())
}

fn run_report(report: &RunReport) -> Result<(), DomainError> {
    usage_in_range("usage", &report.usage)
}

fn cost_event(e: &NewCostEvent) -> Result<(), DomainError> {
    cents("costCents", e.cost_cents)?;
    for (field, value) in [
        ("inputTokens", e.input_tokens),
        ("cachedInputTokens", e.cached_input_tokens),
        ("outputTokens", e.output_tokens),
    ] {
        if value > MAX_TOKENS {
            return Err(out_of_range(field, 0, MAX_TOKENS));
        }
    }
    chars("provider", &e.provider, MAX_NAME_CHARS)?;
    chars("model", &e.model, MAX_NAME_CHARS)?;
    opt_chars("biller", e.biller.as_ref(), MAX_NAME_CHARS)?;
    if let Some(at) = e.occurred_at {
        if !(0..=MAX_TIMESTAMP_MS).contains(&at.0) {
            return Err(DomainError::invalid(
                "occurredAt",
                "must be a time between 1970 and 9999",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (cost_cents_overflow_crashes_every_replica): u64::MAX cents is refused before
    /// it can reach the spend sum.
    #[test]
    fn cost_cents_beyond_the_bound_are_refused() {
        let event = NewCostEvent {
            id: "c".into(),
            company_id: "co".into(),
            agent_id: "a".into(),
            issue_id: None,
            heartbeat_run_id: None,
            provider: "p".into(),
            model: "m".into(),
            input_tokens: 0,
            cached_input_tokens: 0,
            output_tokens: 0,
            cost_cents: u64::MAX,
            occurred_at: None,
            biller: None,
            billing_type: None,
        };
        let err = check(&Command::RecordCostEvent {
            event: event.clone(),
        })
        .unwrap_err();
        assert!(err.to_string().contains("costCents"), "{err}");
        let ok = NewCostEvent {
            cost_cents: MAX_CENTS,
            ..event
        };
        assert!(check(&Command::RecordCostEvent { event: ok }).is_ok());
    }

    #[test]
    fn a_text_at_its_bound_passes_and_one_more_character_does_not() {
        let at = "é".repeat(MAX_BILLING_CODE_CHARS);
        assert!(chars("billingCode", &at, MAX_BILLING_CODE_CHARS).is_ok());
        let over = format!("{at}x");
        let err = chars("billingCode", &over, MAX_BILLING_CODE_CHARS).unwrap_err();
        assert_eq!(err.code(), "too_large");
    }
}
