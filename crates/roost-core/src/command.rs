//! Commands: the only way state changes. Each is proposed to Raft inside an [`Envelope`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::entity::*;
pub use crate::outcome::Outcome;
use crate::time::Timestamp;

/// Who asked for a change. Recorded in the activity log of every change it causes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    User,
    Agent,
    Worker,
    System,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Agent => "agent",
            ActorKind::Worker => "worker",
            ActorKind::System => "system",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    pub kind: ActorKind,
    /// User name, agent id, worker id or `system`.
    pub id: String,
    /// The credential the request authenticated with (its id, never the secret).
    pub credential_id: Option<String>,
    /// The run the request was made for, if any. Writes for a run are fenced on it.
    pub run_id: Option<String>,
    /// Admins may act on every company; agents only on their own.
    pub company_id: Option<String>,
}

impl Actor {
    /// Whose requests an idempotency key is scoped to: the credential, or without one the
    /// actor. A run key is a credential of its own.
    pub fn credential_or_id(&self) -> &str {
        self.credential_id.as_deref().unwrap_or(&self.id)
    }

    /// Who a per-caller bound counts against (rate limits, uploads at once): an agent with
    /// all its keys and run keys together (each of its runs would otherwise bring a share of
    /// its own), anyone else by credential.
    pub fn principal(&self) -> &str {
        self.agent_id().unwrap_or_else(|| self.credential_or_id())
    }

    pub fn system() -> Actor {
        Actor {
            kind: ActorKind::System,
            id: "system".into(),
            credential_id: None,
            run_id: None,
            company_id: None,
        }
    }

    pub fn agent_id(&self) -> Option<&str> {
        (self.kind == ActorKind::Agent).then_some(self.id.as_str())
    }

    /// The person (an administrator's token name) acting, as rows record their author.
    pub fn user_id(&self) -> Option<String> {
        (self.kind == ActorKind::User).then(|| self.id.clone())
    }

    /// Whether this actor is the author a row records (its `authorAgentId` and
    /// `authorUserId`, as [`Actor::agent_id`] and [`Actor::user_id`] stamp them).
    pub fn wrote(&self, author_agent_id: Option<&str>, author_user_id: Option<&str>) -> bool {
        match self.kind {
            ActorKind::Agent => author_agent_id == Some(self.id.as_str()),
            ActorKind::User => author_user_id == Some(self.id.as_str()),
            ActorKind::Worker | ActorKind::System => false,
        }
    }
}

/// A command with everything `apply` needs from outside: the time and the actor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub at: Timestamp,
    pub actor: Actor,
    pub command: Command,
    /// A client's key for this write: a retry with the same key (for instance after a leader
    /// change) returns the first outcome instead of applying again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The id of the request that proposed it (REST's `X-Request-Id`), so the log lines of the
    /// request, its proposal and its apply on every replica can be found together. Left out of
    /// the entry when there is none, so older entries keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// Keeps "clear this field" (`Some(None)`, serialized as `null`) distinct from "leave it"
/// (`None`, not serialized) through the JSON form of log entries.
pub(crate) mod nullable {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// Fields of an issue that a create or an update may set. `None` leaves a field unchanged;
/// `Some(None)` clears an optional field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuePatch {
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<IssueStatus>,
    pub priority: Option<Priority>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub assignee_agent_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub assignee_user_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub parent_id: Option<Option<String>>,
    pub blocked_by_issue_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub billing_code: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub project_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub goal_id: Option<Option<String>>,
    /// The monitor of the `executionPolicy` sent (`monitor.rs`): `Some(None)` for a policy
    /// without one, which clears a scheduled monitor. Absent from entries written before it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub monitor: Option<Option<crate::monitor::MonitorPolicy>>,
    /// Fields of Paperclip's issue schemas Roost does not use, to keep as sent
    /// (`limits::PAPERCLIP_ISSUE_FIELDS`); a `null` value removes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paperclip: Option<BTreeMap<String, serde_json::Value>>,
}

/// Fields of a company an administrator may change; `None` leaves a field unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompanyPatch {
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<CompanyStatus>,
    pub require_board_approval_for_new_agents: Option<bool>,
    /// Replaces the company's loop-breaker settings (`loop_breaker.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_breaker: Option<crate::loop_breaker::LoopBreaker>,
    /// Seconds an issue may stay blocked before its manager is woken; 0 is off (`rules/org.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_blocked_after_secs: Option<u32>,
    /// Seconds a stranded issue stays quiet before its agent is woken again; 0 is off
    /// (`rules/recovery.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover_stranded_after_secs: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentPatch {
    pub name: Option<String>,
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub title: Option<Option<String>>,
    pub adapter_type: Option<AdapterType>,
    pub adapter_config: Option<serde_json::Value>,
    pub heartbeat: Option<HeartbeatPolicy>,
    pub placement_labels: Option<BTreeMap<String, String>>,
    /// Replaces the agent's grants. Absent from entries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<AgentPermissions>,
    /// Grants or withdraws `canCreateAgents` alone, over the grants the agent has when the entry
    /// applies (Paperclip's `PATCH /api/agents/{id}/permissions`; the only change a ceo agent
    /// may make). Absent from entries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_create_agents: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_rotation: Option<SessionRotation>,
    /// Replaces the agent's loop-breaker settings (`loop_breaker.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_breaker: Option<crate::loop_breaker::LoopBreaker>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_max_bytes: Option<u64>,
    /// Its manager (`rules/org.rs`); `Some(None)` clears it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub reports_to: Option<Option<String>>,
    /// The config revision this update puts back (`agent_revision.rs`); absent before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_from: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewComment {
    pub id: String,
    pub body: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Several clients' envelopes committed in one log entry (group commit on the leader).
    /// Each is applied on its own, in order, at its own slot ([`crate::state::slot`]).
    Batch {
        envelopes: Vec<Envelope>,
    },
    CreateCompany {
        id: String,
        name: String,
        issue_prefix: String,
    },
    UpdateCompany {
        company_id: String,
        patch: CompanyPatch,
    },
    CreateCredential {
        id: String,
        kind: CredentialKind,
        name: String,
        agent_id: Option<String>,
        token_hash: String,
    },
    /// A worker join token that expires `ttl_secs` after the envelope's time and admits at most
    /// `max_uses` distinct worker ids, each bound to it (`rules/credential.rs`).
    CreateJoinToken {
        id: String,
        name: String,
        token_hash: String,
        ttl_secs: Option<u64>,
        max_uses: Option<u32>,
    },
    /// A worker exchanges its join token (the envelope's credential) for a worker credential
    /// bound to `worker_id`: once per join token and worker id, one use of a bounded token
    /// (`rules/credential.rs`). The worker made the secret; only its hash travels.
    ExchangeJoinToken {
        worker_id: String,
        credential_id: String,
        token_hash: String,
    },
    /// Revokes an admin token, agent key or join token. `kind` (and `agent_id` for a key) say
    /// what the caller means, so an id of another kind or another agent is not found.
    RevokeCredential {
        id: String,
        kind: CredentialKind,
        agent_id: Option<String>,
    },
    CreateAgent {
        id: String,
        company_id: String,
        name: String,
        role: String,
        title: Option<String>,
        adapter_type: AdapterType,
        adapter_config: serde_json::Value,
        heartbeat: HeartbeatPolicy,
        placement_labels: BTreeMap<String, String>,
    },
    UpdateAgent {
        agent_id: String,
        patch: AgentPatch,
    },
    PauseAgent {
        agent_id: String,
        reason: PauseReason,
    },
    ResumeAgent {
        agent_id: String,
    },
    /// Forgets the agent's saved adapter sessions: every one, or those of one task
    /// (`rules/agent.rs`).
    ResetAgentSession {
        agent_id: String,
        #[serde(default)]
        task_key: Option<String>,
    },
    /// Paperclip's delete: terminates the agent and lets go of its work (`rules/agent_delete.rs`).
    DeleteAgent {
        agent_id: String,
    },
    TerminateAgent {
        agent_id: String,
    },
    CreateIssue {
        id: String,
        company_id: String,
        fields: IssuePatch,
    },
    UpdateIssue {
        issue_id: String,
        patch: IssuePatch,
        comment: Option<NewComment>,
    },
    /// Writes, restores, locks, unlocks or deletes the document `key` of an issue
    /// (`document.rs`, `rules/document.rs`).
    IssueDocument {
        issue_id: String,
        key: String,
        op: crate::document::DocumentOp,
    },
    /// One chunk of a file being uploaded to an issue (base64, `attachment::CHUNK_BYTES` at
    /// most): a file travels in chunks so that no log entry is big (`attachment.rs`).
    PutAttachmentChunk {
        issue_id: String,
        attachment_id: String,
        index: u32,
        content: String,
    },
    /// Makes the attachment of an upload's chunks (`attachment.rs`, `rules/attachment.rs`). An
    /// agent run's upload is also recorded as an artifact work product, `work_product_id`.
    AddIssueAttachment {
        issue_id: String,
        attachment_id: String,
        work_product_id: String,
        upload: crate::attachment::AttachmentUpload,
    },
    /// Removes an attachment with its bytes.
    RemoveIssueAttachment {
        attachment_id: String,
    },
    /// Records a work product of an issue (`work_product.rs`, `rules/work_product.rs`), or
    /// updates the one the same run recorded for the same attachment.
    CreateWorkProduct {
        issue_id: String,
        work_product_id: String,
        fields: crate::work_product::WorkProductFields,
    },
    UpdateWorkProduct {
        work_product_id: String,
        fields: crate::work_product::WorkProductFields,
    },
    DeleteWorkProduct {
        work_product_id: String,
    },
    /// Creates, answers or withdraws an issue-thread interaction of an issue
    /// (`interaction.rs`, `rules/interaction.rs`).
    IssueInteraction {
        issue_id: String,
        op: crate::interaction::InteractionOp,
    },
    /// Removes an issue with its comments and documents (Paperclip's `DELETE /issues/{id}`);
    /// refused while a live run works on it. Its activity entries stay in the chain.
    DeleteIssue {
        issue_id: String,
    },
    AddComment {
        issue_id: String,
        comment: NewComment,
    },
    /// Empties a comment's body and records who deleted it (Paperclip's tombstone,
    /// `rules/comment.rs`); the API has checked that the caller wrote it.
    DeleteComment {
        issue_id: String,
        comment_id: String,
    },
    Checkout {
        issue_id: String,
        agent_id: String,
        expected_statuses: Vec<IssueStatus>,
    },
    Release {
        issue_id: String,
    },
    StartRun {
        id: String,
        agent_id: String,
        issue_id: Option<String>,
        invocation_source: String,
    },
    FinishRun {
        run_id: String,
        status: RunStatus,
        error: Option<String>,
        /// Usage, session and log tail, when a worker ends the run.
        #[serde(default)]
        report: RunReport,
    },
    /// Creates or replaces the budget of a scope and window.
    SetBudgetPolicy {
        id: String,
        company_id: String,
        scope_type: BudgetScopeType,
        scope_id: String,
        window_kind: BudgetWindow,
        amount: u64,
        warn_percent: u8,
        hard_stop_enabled: bool,
    },
    RecordCostEvent {
        event: NewCostEvent,
    },
    ResolveBudgetIncident {
        incident_id: String,
        action: IncidentAction,
        amount: Option<u64>,
    },
    /// A worker's lease renewal carried new usage for a running run.
    ReportUsage {
        run_id: String,
        usage: Usage,
    },
    /// Asks for a run of an agent (`POST /api/agents/{id}/wakeup`, routines).
    Wakeup {
        id: String,
        agent_id: String,
        issue_id: Option<String>,
        reason: WakeReason,
        payload: serde_json::Value,
        /// Deduplicates wakes of this agent: a repeat returns the first wake.
        wake_key: Option<String>,
    },
    /// The leader's escalation timer: `issue_id` has been blocked past its company's
    /// `escalateBlockedAfterSecs`; its assignee's manager is woken once per blocked spell
    /// (`rules/org.rs`).
    EscalateIssue {
        issue_id: String,
    },
    /// The leader's recovery timer: `issue_id` is stranded (`rules/recovery.rs`); its
    /// assignee is woken (as `wake_id`), or the issue is blocked once its recoveries are used up.
    RecoverIssue {
        issue_id: String,
        wake_id: String,
    },
    /// The leader's monitor sweep, or a check now by the board or the issue's assignee: the
    /// issue's scheduled monitor fires (`rules/monitor.rs`); `id` names the wake, comment or
    /// recovery sub-issue it makes.
    TriggerIssueMonitor {
        issue_id: String,
        id: String,
    },
    /// The leader's agent timer: the agent's timer interval has passed.
    TimerTick {
        agent_id: String,
        wake_id: String,
    },
    /// The leader's dispatcher: a queued wake becomes a run on a worker.
    AssignRun {
        wake_id: String,
        run_id: String,
        worker_id: String,
        /// The hash of the run-scoped API key the worker hands to the agent.
        #[serde(default)]
        token_hash: Option<String>,
    },
    /// Another run-scoped key for a run (its assignment was sent again).
    AddRunToken {
        run_id: String,
        token_hash: String,
    },
    /// The worker started the agent process of an assigned run.
    RunStarted {
        run_id: String,
    },
    RegisterWorker {
        worker_id: String,
        name: String,
        adapters: Vec<AdapterType>,
        labels: BTreeMap<String, String>,
        slots: u32,
        version: String,
    },
    /// The leader saw a worker's lease expire: its runs are lost.
    WorkerLost {
        worker_id: String,
    },
    /// Routines, their triggers and firings (`routine_command.rs`, `rules/routine.rs`).
    Routine {
        routine: crate::routine_command::RoutineCommand,
    },
    /// An agent's log entry, written during its run (fenced on it; `rules/memory.rs`): to its
    /// own log, or (`shared`) to its company's.
    AppendMemoryEntry {
        id: String,
        agent_id: String,
        entry: crate::memory::NewMemoryEntry,
        #[serde(default, skip_serializing_if = "crate::memory::is_false")]
        shared: bool,
    },
    /// Saves a new version of a memory document of an agent (`agent_id`) or of its company's
    /// shared scope (`agent_id: None`), if its current version is `expected_version`.
    PutMemoryDocument {
        company_id: String,
        #[serde(default)]
        agent_id: Option<String>,
        name: String,
        content: String,
        expected_version: u64,
    },
    /// Saves an agent's live state: the parts present, each with the command's time.
    SetMemoryLive {
        agent_id: String,
        #[serde(default)]
        current_task: Option<crate::memory::CurrentTask>,
        #[serde(default)]
        coordinates: Option<serde_json::Value>,
    },
    /// Saves a company's live state: the parts present, each with the command's time (an
    /// administrator, or an agent of the company during its run).
    SetCompanyMemoryLive {
        company_id: String,
        #[serde(default)]
        current_task: Option<crate::memory::CurrentTask>,
        #[serde(default)]
        coordinates: Option<serde_json::Value>,
    },
    /// Goals and projects (`rules/project.rs`): `fields` holds every field at creation.
    CreateGoal {
        id: String,
        company_id: String,
        fields: crate::project::GoalPatch,
    },
    UpdateGoal {
        goal_id: String,
        patch: crate::project::GoalPatch,
    },
    DeleteGoal {
        goal_id: String,
    },
    CreateProject {
        id: String,
        company_id: String,
        fields: crate::project::ProjectPatch,
    },
    UpdateProject {
        project_id: String,
        patch: crate::project::ProjectPatch,
    },
    DeleteProject {
        project_id: String,
    },
    /// An issue label (`label.rs`, `rules/label.rs`).
    CreateLabel {
        id: String,
        company_id: String,
        name: String,
        color: String,
    },
    /// Removes the label and takes it off every issue that carries it.
    DeleteLabel {
        label_id: String,
    },
    /// A company skill (`skill.rs`, `rules/skill.rs`).
    CreateSkill {
        id: String,
        company_id: String,
        fields: crate::skill::SkillCreate,
    },
    UpdateSkill {
        skill_id: String,
        patch: crate::skill::SkillPatch,
    },
    /// Removes the skill and unassigns it from every agent.
    DeleteSkill {
        skill_id: String,
    },
    /// Replaces the agent's assigned skills with these keys (Paperclip's `skills/sync`).
    SetAgentSkills {
        agent_id: String,
        skills: Vec<String>,
    },
    /// Opens an approval (`rules/approval.rs`); not `hire_agent`, which `HireAgent` opens.
    CreateApproval {
        id: String,
        company_id: String,
        approval_type: crate::approval::ApprovalType,
        payload: serde_json::Value,
        #[serde(default)]
        requested_by_agent_id: Option<String>,
        #[serde(default)]
        issue_ids: Vec<String>,
    },
    /// Creates an agent (`agent`, a `CreateAgent`); when its company requires board approval
    /// for new agents it is `pending_approval` with a `hire_agent` approval `approval_id`.
    HireAgent {
        approval_id: String,
        agent: Box<Command>,
        payload: serde_json::Value,
    },
    DecideApproval {
        approval_id: String,
        decision: crate::approval::ApprovalDecision,
        #[serde(default)]
        decision_note: Option<String>,
    },
    ResubmitApproval {
        approval_id: String,
        #[serde(default)]
        payload: Option<serde_json::Value>,
    },
    AddApprovalComment {
        approval_id: String,
        comment_id: String,
        body: String,
    },
    /// Links (`linked`) or unlinks an approval and an issue of its company
    /// (`rules/approval.rs`, `link_issue`).
    LinkApprovalIssue {
        approval_id: String,
        issue_id: String,
        linked: bool,
    },
    /// Chunks of an agent's home files (base64), uploaded by its live run before it saves the
    /// home (`rules/home.rs`).
    PutHomeChunks {
        agent_id: String,
        chunks: Vec<String>,
    },
    /// A new version of an agent's home, if it is still at `base_version`: the files that
    /// changed (their chunks uploaded or already stored) and the paths removed.
    SaveAgentHome {
        agent_id: String,
        base_version: u64,
        #[serde(default)]
        files: BTreeMap<String, crate::home::HomeFile>,
        #[serde(default)]
        deleted: Vec<String>,
    },
}

impl Command {
    /// The name recorded as the activity log's action.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Batch { .. } => "batch",
            Command::CreateCompany { .. } => "company.created",
            Command::UpdateCompany { .. } => "company.updated",
            Command::CreateCredential { .. } | Command::CreateJoinToken { .. } => {
                "credential.created"
            }
            Command::ExchangeJoinToken { .. } => "credential.exchanged",
            Command::RevokeCredential { .. } => "credential.revoked",
            Command::CreateAgent { .. } => "agent.created",
            Command::UpdateAgent { .. } => "agent.updated",
            Command::PauseAgent { .. } => "agent.paused",
            Command::ResumeAgent { .. } => "agent.resumed",
            Command::ResetAgentSession { .. } => "agent.session_reset",
            Command::TerminateAgent { .. } => "agent.terminated",
            Command::DeleteAgent { .. } => "agent.deleted",
            Command::CreateIssue { .. } => "issue.created",
            Command::UpdateIssue { .. } => "issue.updated",
            Command::DeleteIssue { .. } => "issue.deleted",
            Command::IssueDocument { op, .. } => op.name(),
            Command::IssueInteraction { op, .. } => op.name(),
            Command::PutAttachmentChunk { .. } => "issue.attachment_chunk_uploaded",
            Command::AddIssueAttachment { .. } => "issue.attachment_added",
            Command::RemoveIssueAttachment { .. } => "issue.attachment_removed",
            Command::CreateWorkProduct { .. } => "issue.work_product_created",
            Command::UpdateWorkProduct { .. } => "issue.work_product_updated",
            Command::DeleteWorkProduct { .. } => "issue.work_product_deleted",
            Command::AddComment { .. } => "issue.comment_added",
            Command::DeleteComment { .. } => "issue.comment_deleted",
            Command::Checkout { .. } => "issue.checked_out",
            Command::Release { .. } => "issue.released",
            Command::StartRun { .. } => "run.started",
            Command::FinishRun { .. } => "run.finished",
            Command::ReportUsage { .. } => "run.usage_reported",
            Command::SetBudgetPolicy { .. } => "budget.policy_set",
            Command::RecordCostEvent { .. } => "cost.recorded",
            Command::ResolveBudgetIncident { .. } => "budget.incident_resolved",
            Command::Wakeup { .. } => "wake.requested",
            Command::TimerTick { .. } => "agent.timer_tick",
            Command::TriggerIssueMonitor { .. } => "issue.monitor_triggered",
            Command::EscalateIssue { .. } => "issue.escalated",
            Command::RecoverIssue { .. } => "issue.recovered",
            Command::AssignRun { .. } => "run.assigned",
            Command::AddRunToken { .. } => "run.token_added",
            Command::RunStarted { .. } => "run.running",
            Command::RegisterWorker { .. } => "worker.registered",
            Command::WorkerLost { .. } => "worker.lost",
            Command::Routine { routine } => routine.name(),
            Command::AppendMemoryEntry { .. } => "memory.entry_added",
            Command::PutMemoryDocument { .. } => "memory.document_saved",
            Command::SetMemoryLive { .. } => "memory.live_saved",
            Command::SetCompanyMemoryLive { .. } => "memory.company_live_saved",
            Command::CreateGoal { .. } => "goal.created",
            Command::UpdateGoal { .. } => "goal.updated",
            Command::DeleteGoal { .. } => "goal.deleted",
            Command::CreateProject { .. } => "project.created",
            Command::UpdateProject { .. } => "project.updated",
            Command::DeleteProject { .. } => "project.deleted",
            Command::CreateLabel { .. } => "label.created",
            Command::DeleteLabel { .. } => "label.deleted",
            Command::CreateSkill { .. } => "skill.created",
            Command::UpdateSkill { .. } => "skill.updated",
            Command::DeleteSkill { .. } => "skill.deleted",
            Command::SetAgentSkills { .. } => "agent.skills_set",
            Command::CreateApproval { .. } => "approval.created",
            Command::HireAgent { .. } => "agent.hired",
            Command::DecideApproval { .. } => "approval.decided",
            Command::ResubmitApproval { .. } => "approval.resubmitted",
            Command::AddApprovalComment { .. } => "approval.comment_added",
            Command::LinkApprovalIssue { linked: true, .. } => "issue.approval_linked",
            Command::LinkApprovalIssue { linked: false, .. } => "issue.approval_unlinked",
            Command::PutHomeChunks { .. } => "home.chunks_uploaded",
            Command::SaveAgentHome { .. } => "home.saved",
        }
    }
}

/// A cost event as reported (`POST /api/companies/{cid}/cost-events`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewCostEvent {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    pub heartbeat_run_id: Option<String>,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_cents: u64,
    /// When it was spent (default: now); it counts in that time's window.
    pub occurred_at: Option<Timestamp>,
    /// Paperclip's `biller` and `billingType`; absent from entries written before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub biller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub billing_type: Option<crate::entity::BillingType>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: an agent's run keys each brought a rate limit and a share of the uploads a
    /// node reads at once of their own (they counted by credential).
    #[test]
    fn an_agents_keys_and_run_keys_count_as_the_agent() {
        let as_agent = |credential: &str| Actor {
            kind: ActorKind::Agent,
            id: "a1".into(),
            credential_id: Some(credential.into()),
            run_id: None,
            company_id: Some("c1".into()),
        };
        assert_eq!(
            as_agent("run-key-1").principal(),
            as_agent("run-key-2").principal()
        );
        assert_ne!(
            as_agent("run-key-1").credential_or_id(),
            as_agent("run-key-2").credential_or_id(),
            "idempotency keys stay scoped to their credential"
        );
        let admin = |credential: &str| Actor {
            kind: ActorKind::User,
            id: "ops".into(),
            credential_id: Some(credential.into()),
            run_id: None,
            company_id: None,
        };
        assert_ne!(admin("token-1").principal(), admin("token-2").principal());
    }

    /// Regression: a patch that clears a field (`Some(None)`) came back from the Raft log as
    /// "unchanged" (`None`), so clearing an assignee or description silently did nothing.
    #[test]
    fn clearing_a_field_survives_the_raft_log() {
        let patch = IssuePatch {
            assignee_agent_id: Some(None),
            description: Some(Some("kept".into())),
            ..Default::default()
        };
        let json = serde_json::to_string(&patch).unwrap();
        let back: IssuePatch = serde_json::from_str(&json).unwrap();
        assert_eq!(back, patch);
        assert_eq!(back.parent_id, None, "an absent field stays absent");
        let agent = AgentPatch {
            title: Some(None),
            ..Default::default()
        };
        let back: AgentPatch =
            serde_json::from_str(&serde_json::to_string(&agent).unwrap()).unwrap();
        assert_eq!(back, agent);
    }
}
