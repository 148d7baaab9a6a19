//! The records the state machine holds, serialized in Paperclip's JSON shapes (camelCase).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Defines a closed string enum with `as_str`, `FromStr`, `Display` and `ALL`.
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident => $text:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text $(, alias = $alias)*)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text $(| $alias)* => Ok($name::$variant),)+
                    other => Err(format!(
                        "unknown {} `{}`; expected one of: {}",
                        stringify!($name),
                        other,
                        [$($text),+].join(", ")
                    )),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use string_enum;

mod budget;
mod credential;
pub use budget::*;
pub use credential::*;

string_enum!(
    /// Lifecycle of an issue. `done` and `cancelled` are terminal.
    IssueStatus {
        Backlog => "backlog",
        Todo => "todo",
        InProgress => "in_progress",
        InReview => "in_review",
        Blocked => "blocked",
        Done => "done",
        Cancelled => "cancelled",
    }
);

impl IssueStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, IssueStatus::Done | IssueStatus::Cancelled)
    }
}

string_enum!(Priority { Critical => "critical", High => "high", Medium => "medium", Low => "low" });

string_enum!(
    /// `pending_approval`: hired through a `hire_agent` approval not yet approved; it runs
    /// nothing until then (`rules/approval.rs`).
    AgentStatus {
        Active => "active",
        Paused => "paused",
        Terminated => "terminated",
        PendingApproval => "pending_approval",
    }
);
string_enum!(
    /// A paused or archived company starts no runs: its wakes are skipped and its queued ones
    /// wait (`rules/wake.rs`).
    CompanyStatus { Active => "active", Paused => "paused", Archived => "archived" }
);

// `string_enum!` has no place for `#[default]` on a variant.
#[allow(clippy::derivable_impls)]
impl Default for CompanyStatus {
    fn default() -> Self {
        CompanyStatus::Active
    }
}

string_enum!(PauseReason { Manual => "manual", Budget => "budget", System => "system", LoopDetected => "loop_detected" });

string_enum!(
    /// How a worker runs an agent. Paperclip's names for the same adapters are read as aliases
    /// (`claude_local`, `codex_local`, ...), so its clients' agent bodies work unchanged; Roost's
    /// own name is what it stores and shows.
    AdapterType {
        Process => "process",
        Claude => "claude" | "claude_local",
        Codex => "codex" | "codex_local",
        Gemini => "gemini" | "gemini_local",
        OpenCode => "opencode" | "opencode_local",
        Hermes => "hermes" | "hermes_local",
        OpenClawGateway => "openclaw_gateway" | "openclaw",
        Http => "http",
    }
);

string_enum!(
    /// Lifecycle of a run. The last five are terminal; a terminal run releases its checkouts in
    /// the same committed command that ends it.
    RunStatus {
        Queued => "queued",
        Assigned => "assigned",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
        TimedOut => "timed_out",
        Lost => "lost",
    }
);

impl RunStatus {
    pub fn is_live(self) -> bool {
        matches!(
            self,
            RunStatus::Queued | RunStatus::Assigned | RunStatus::Running
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Company {
    pub id: String,
    pub name: String,
    /// Absent from rows written before companies could be edited.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub status: CompanyStatus,
    /// Kept for the approvals of agent hires (Paperclip's company setting).
    #[serde(default)]
    pub require_board_approval_for_new_agents: bool,
    /// Loop-breaker settings its agents inherit (`loop_breaker.rs`); left out of the row
    /// while unset.
    #[serde(
        default,
        skip_serializing_if = "crate::loop_breaker::LoopBreaker::is_unset"
    )]
    pub loop_breaker: crate::loop_breaker::LoopBreaker,
    /// Seconds an issue may stay `blocked` before its assignee's manager is woken
    /// (`rules/org.rs`); 0 is off. Left out of the row at the default (an hour).
    #[serde(
        default = "crate::rules::org::default_escalate_secs",
        skip_serializing_if = "crate::rules::org::is_default_escalate_secs"
    )]
    pub escalate_blocked_after_secs: u32,
    /// Seconds a stranded issue (assigned, open, nothing left to wake its agent) stays quiet
    /// before its agent is woken again (`rules/recovery.rs`); 0 is off, and a row without it
    /// (written before it existed) reads as off. New companies get a minute.
    #[serde(default, skip_serializing_if = "crate::rules::recovery::is_off")]
    pub recover_stranded_after_secs: u32,
    pub issue_prefix: String,
    pub issue_counter: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// When and how often an agent is woken, and how much in a day: enforced by the wake rules
/// (`rules/wake.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HeartbeatPolicy {
    pub enabled: bool,
    pub interval_sec: u64,
    pub wake_on_demand: bool,
    pub max_concurrent_runs: u32,
    pub skip_when_idle: bool,
    /// Cents reserved against every matching budget when a run is claimed, and the step by
    /// which a running run's reservation grows as it reports usage.
    pub run_reserve_cents: u64,
    /// Paperclip's per-agent daily caps: once the agent's runs created, or its cost events'
    /// cents, in the current UTC day reach one, a new wake is skipped until the next day (a
    /// wake merged into a pending one is not new), and so is a queued wake when a worker
    /// claims it. `0` is a hard stop; none: no cap (`rules/wake.rs`, `daily_cap`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_daily_runs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_daily_cost_cents: Option<u64>,
}

impl Default for HeartbeatPolicy {
    fn default() -> Self {
        HeartbeatPolicy {
            enabled: false,
            interval_sec: 300,
            wake_on_demand: true,
            max_concurrent_runs: 1,
            skip_when_idle: true,
            run_reserve_cents: 25,
            max_daily_runs: None,
            max_daily_cost_cents: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: String,
    pub company_id: String,
    pub name: String,
    pub role: String,
    pub title: Option<String>,
    pub status: AgentStatus,
    pub pause_reason: Option<PauseReason>,
    pub adapter_type: AdapterType,
    pub adapter_config: serde_json::Value,
    pub heartbeat: HeartbeatPolicy,
    pub placement_labels: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When the agent's last heartbeat ended (a run finished or a timer tick was skipped): the
    /// base of its next timer tick, committed so a new leader continues from it.
    #[serde(default)]
    pub last_heartbeat_at: Option<Timestamp>,
    /// Saved adapter sessions by `{adapterType}:{taskKey}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_sessions: BTreeMap<String, TaskSession>,
    /// What an operator lets the agent do beyond its own work. Left out of the row while it
    /// grants nothing, so rows written before it existed keep their bytes and hash.
    #[serde(default, skip_serializing_if = "AgentPermissions::grants_nothing")]
    pub permissions: AgentPermissions,
    /// When a saved session is retired. Left out of the row at its default, as `permissions`.
    #[serde(default, skip_serializing_if = "SessionRotation::is_default")]
    pub session_rotation: SessionRotation,
    /// The most its home's files may hold (`home.rs`); left out of the row at the default.
    #[serde(
        default = "default_home_max_bytes",
        skip_serializing_if = "is_default_home_max"
    )]
    pub home_max_bytes: u64,
    /// Loop-breaker settings over its company's (`loop_breaker.rs`); left out while unset.
    #[serde(
        default,
        skip_serializing_if = "crate::loop_breaker::LoopBreaker::is_unset"
    )]
    pub loop_breaker: crate::loop_breaker::LoopBreaker,
    /// Set by each resume: the loop breaker counts none of its wakes from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_window_since: Option<Timestamp>,
    /// Its manager in the org chart (Paperclip's `reportsTo`, `rules/org.rs`); left out of
    /// the row while none, so older rows keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reports_to: Option<String>,
    /// Keys of the company skills its worker writes before every run (`skill.rs`); Paperclip's
    /// `desiredSkills`. Left out of the row while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub desired_skills: Vec<String>,
}

fn default_home_max_bytes() -> u64 {
    crate::home::DEFAULT_HOME_MAX_BYTES
}

fn is_default_home_max(n: &u64) -> bool {
    *n == crate::home::DEFAULT_HOME_MAX_BYTES
}

/// When an agent's saved adapter session is retired and its next run starts a fresh one
///: a long conversation costs more per turn and drifts, and the agent's
/// memory carries it across. `0` is no limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SessionRotation {
    /// Runs one session may serve.
    pub max_runs: u32,
    /// Input plus output tokens one session may use.
    pub max_tokens: u64,
    /// Seconds since the session started.
    pub max_age_secs: u64,
}

impl Default for SessionRotation {
    fn default() -> Self {
        SessionRotation {
            max_runs: 20,
            max_tokens: 2_000_000,
            max_age_secs: 24 * 3600,
        }
    }
}

impl SessionRotation {
    pub fn is_default(&self) -> bool {
        *self == SessionRotation::default()
    }

    /// Why `session` is past a limit at `now`, if it is.
    pub fn passed(&self, session: &TaskSession, now: Timestamp) -> Option<String> {
        if self.max_runs > 0 && session.runs >= self.max_runs {
            return Some(format!(
                "it served {} runs (sessionRotation.maxRuns {})",
                session.runs, self.max_runs
            ));
        }
        if self.max_tokens > 0 && session.tokens >= self.max_tokens {
            return Some(format!(
                "it used {} tokens (sessionRotation.maxTokens {})",
                session.tokens, self.max_tokens
            ));
        }
        let started = session.started_at.unwrap_or(session.updated_at);
        let age_secs = now.0.saturating_sub(started.0) / 1000;
        if self.max_age_secs > 0 && age_secs >= i64::try_from(self.max_age_secs).unwrap_or(i64::MAX)
        {
            return Some(format!(
                "it is {age_secs} s old (sessionRotation.maxAgeSecs {})",
                self.max_age_secs
            ));
        }
        None
    }
}

/// Grants an administrator gives an agent (Paperclip agents carry a `permissions` object).
/// Unknown names are refused, so a misspelt grant is an error rather than silently nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AgentPermissions {
    /// Read the logs (and log tails) of every run of its company, not only its own runs'.
    pub read_company_run_logs: bool,
    /// Hire agents (`POST /api/companies/{cid}/agent-hires`), as Paperclip's `canCreateAgents`.
    pub can_create_agents: bool,
}

impl AgentPermissions {
    pub fn grants_nothing(&self) -> bool {
        *self == AgentPermissions::default()
    }
}

impl Agent {
    /// Its company's `ceo` (Paperclip's role): it may link approvals and grant `canCreateAgents`.
    pub fn is_ceo(&self) -> bool {
        self.role.trim().eq_ignore_ascii_case("ceo")
    }

    /// Whether its role and grants count: not once terminated, nor while its hire waits for
    /// approval (its keys do not authenticate then either: `roost-server/src/auth.rs`).
    pub fn exercises_grants(&self) -> bool {
        !matches!(
            self.status,
            AgentStatus::Terminated | AgentStatus::PendingApproval
        )
    }

    /// The session a run on `task_key` would resume with the agent's current adapter.
    pub fn task_session(&self, task_key: &str) -> Option<&TaskSession> {
        self.task_sessions
            .get(&format!("{}:{task_key}", self.adapter_type))
    }
}

/// The lease a live run holds on an issue. `token` is the checkout command's slot (its Raft log
/// index × 1000 + its position in the entry, see [`crate::state::slot`]), so it strictly
/// increases per issue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkout {
    pub agent_id: String,
    pub run_id: String,
    pub token: u64,
    pub at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    pub id: String,
    pub company_id: String,
    pub identifier: String,
    pub issue_number: u64,
    pub title: String,
    pub description: Option<String>,
    pub status: IssueStatus,
    pub priority: Priority,
    pub assignee_agent_id: Option<String>,
    pub assignee_user_id: Option<String>,
    pub parent_id: Option<String>,
    pub blocked_by_issue_ids: Vec<String>,
    pub billing_code: Option<String>,
    pub checkout: Option<Checkout>,
    /// Paperclip's name for the run holding the checkout; kept equal to `checkout.run_id`.
    pub checkout_run_id: Option<String>,
    pub execution_run_id: Option<String>,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub started_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When its status last changed (stamped in apply, `rules/loop_breaker.rs`); absent until
    /// the first change, when `createdAt` stands for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_changed_at: Option<Timestamp>,
    /// The start of the blocked spell whose escalation woke the assignee's manager
    /// (`rules/org.rs`): a spell escalates once; a new spell has another start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_blocked_since: Option<Timestamp>,
    /// Its recovery wakes since its assignee was set or someone else last moved it, when it was
    /// stranded (`rules/recovery.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<crate::recovery::IssueRecovery>,
    /// The project and goal it serves (`project.rs`); left out of the row when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_id: Option<String>,
    /// Its monitor (`monitor.rs`), flattened as Paperclip shows one; before `paperclip`, whose
    /// map would otherwise take its fields up when a row is read.
    #[serde(default, flatten)]
    pub monitor: crate::monitor::IssueMonitor,
    /// Fields of Paperclip's issue schemas Roost keeps without using them (`executionPolicy`,
    /// ...: `limits::PAPERCLIP_ISSUE_FIELDS`), kept as a client sent them and shown back at
    /// the top level of the issue, as Paperclip shows them; and `labelIds`, checked against
    /// the company's labels when set (`rules/label.rs`).
    #[serde(default, flatten)]
    pub paperclip: BTreeMap<String, serde_json::Value>,
}

impl Issue {
    pub fn set_checkout(&mut self, checkout: Option<Checkout>) {
        let run = checkout.as_ref().map(|c| c.run_id.clone());
        self.checkout_run_id = run.clone();
        self.execution_run_id = run;
        self.checkout = checkout;
    }

    /// Moves the issue to `status`, stamping `status_changed_at` if that is a move, as
    /// `rules::loop_breaker::stamp_status_changes` would after the rule: a rule that stamps
    /// its own issue spares that function a copy of an issue its outcome shares. Only for the
    /// issue as the state held it before this command: that function compares with that one,
    /// so a version this command already changed (A to B, then back to A) would be stamped
    /// where it would not.
    pub fn move_to(&mut self, status: IssueStatus, now: crate::time::Timestamp) {
        if self.status != status {
            self.status = status;
            self.status_changed_at = Some(now);
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    pub id: String,
    pub company_id: String,
    pub issue_id: String,
    pub body: String,
    pub author_agent_id: Option<String>,
    pub author_user_id: Option<String>,
    pub created_by_run_id: Option<String>,
    pub created_at: Timestamp,
    /// Set when its author deleted it (Paperclip's tombstone): the comment keeps its place in
    /// the thread with an empty body (`rules/comment.rs`). `null` on a live comment, as
    /// Paperclip answers; absent from rows written before deletion existed.
    #[serde(default)]
    pub deleted_at: Option<Timestamp>,
    #[serde(default)]
    pub deleted_by_type: Option<crate::command::ActorKind>,
    #[serde(default)]
    pub deleted_by_agent_id: Option<String>,
    #[serde(default)]
    pub deleted_by_user_id: Option<String>,
    #[serde(default)]
    pub deleted_by_run_id: Option<String>,
}

/// A comment's deletion, as the store writes it onto the comment's row (memory keeps no
/// bodies, so the rule that decides it cannot write the whole comment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentTombstone {
    pub comment_id: String,
    pub issue_id: String,
    pub deleted_at: Timestamp,
    pub deleted_by_type: crate::command::ActorKind,
    pub deleted_by_agent_id: Option<String>,
    pub deleted_by_user_id: Option<String>,
    pub deleted_by_run_id: Option<String>,
}

impl CommentTombstone {
    /// The comment as its deletion leaves it: the body emptied (Paperclip's
    /// `DELETED_ISSUE_COMMENT_BODY` is empty), who deleted it and when.
    pub fn apply_to(&self, comment: &mut Comment) {
        comment.body = String::new();
        comment.deleted_at = Some(self.deleted_at);
        comment.deleted_by_type = Some(self.deleted_by_type);
        comment.deleted_by_agent_id = self.deleted_by_agent_id.clone();
        comment.deleted_by_user_id = self.deleted_by_user_id.clone();
        comment.deleted_by_run_id = self.deleted_by_run_id.clone();
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    pub status: RunStatus,
    pub invocation_source: String,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// The wake this run answers, and what it carries to the agent.
    #[serde(default)]
    pub wake_id: Option<String>,
    #[serde(default)]
    pub wake_reason: Option<WakeReason>,
    #[serde(default)]
    pub comment_ids: Vec<String>,
    #[serde(default)]
    pub payload: serde_json::Value,
    /// The worker it was assigned to.
    #[serde(default)]
    pub worker_id: Option<String>,
    #[serde(default)]
    pub assigned_at: Option<Timestamp>,
    /// Set on the retry of a run that was lost with its worker.
    #[serde(default)]
    pub retry_of_run_id: Option<String>,
    /// Hashes of the run-scoped API keys handed to the agent process; they authenticate only
    /// while the run is live.
    #[serde(default)]
    pub token_hashes: Vec<String>,
    /// Tokens and money used so far (cumulative, from the worker's lease renewals and the end).
    #[serde(default)]
    pub usage: Usage,
    /// The adapter session the run was told to resume, and the one it ended in.
    #[serde(default)]
    pub session_id_before: Option<String>,
    #[serde(default)]
    pub session_id_after: Option<String>,
    /// The saved session could not be resumed; the run started a fresh one.
    #[serde(default)]
    pub session_reset: bool,
    /// Why the task's saved session was not offered: it passed the agent's rotation limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_rotated: Option<String>,
    /// The last bytes of the run's log (the worker keeps the whole log), its full length, and
    /// the adapter's one-paragraph result.
    #[serde(default)]
    pub log_tail: String,
    #[serde(default)]
    pub log_bytes: u64,
    #[serde(default)]
    pub summary: Option<String>,
    /// Cents held against the agent's budgets while the run is live (docs/budgets.md).
    #[serde(default)]
    pub reserved_cents: u64,
    /// The directory the agent ran in on its worker (`roost-worker/src/workspace.rs`), reported
    /// with its end; left out of the row while unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_path: Option<String>,
}

/// The most of a run's log the cluster keeps (the tail; the worker keeps the whole log).
pub const LOG_TAIL_MAX_BYTES: usize = 16 * 1024;

/// Tokens and money used by a run, as its adapter reported them. Cumulative: a report
/// replaces the previous one and never goes down, so a lost lease renewal loses nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// Millionths of a US dollar: adapters report fractions of a cent.
    pub cost_micro_usd: u64,
}

impl Usage {
    /// Whole cents, rounded up, so budgets never undercount.
    pub fn cost_cents(&self) -> u64 {
        self.cost_micro_usd.div_ceil(10_000)
    }

    /// Whether `next` can follow `self` (no counter goes down).
    pub fn can_grow_to(&self, next: &Usage) -> bool {
        next.input_tokens >= self.input_tokens
            && next.cached_input_tokens >= self.cached_input_tokens
            && next.output_tokens >= self.output_tokens
            && next.cost_micro_usd >= self.cost_micro_usd
    }
}

/// What a worker reports with a run's end, beyond its status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunReport {
    pub usage: Usage,
    /// The adapter session the run ended in, saved for the next run on the same task.
    pub session_id: Option<String>,
    pub session_reset: bool,
    pub log_tail: String,
    pub log_bytes: u64,
    pub summary: Option<String>,
    /// Where the agent ran on the worker.
    pub workspace_path: Option<String>,
}

/// An agent's saved adapter session for one task (Paperclip's `agent_task_sessions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSession {
    pub task_key: String,
    pub adapter_type: AdapterType,
    pub session_id: String,
    /// The worker whose disk holds the session: the dispatcher prefers it.
    pub worker_id: Option<String>,
    pub last_run_id: String,
    pub updated_at: Timestamp,
    /// Runs the session served, tokens (input and output) it used, and when it started; absent
    /// from sessions saved before rotation existed (counted from then on).
    #[serde(default)]
    pub runs: u32,
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub started_at: Option<Timestamp>,
}

/// The task a run works on, for sessions: its issue, or the agent's timer heartbeat.
pub fn task_key(issue_id: Option<&str>) -> &str {
    issue_id.unwrap_or("__heartbeat__")
}

string_enum!(
    /// Why an agent is woken.
    WakeReason {
        IssueAssigned => "issue_assigned",
        IssueCommented => "issue_commented",
        IssueCommentMentioned => "issue_comment_mentioned",
        IssueStatusChanged => "issue_status_changed",
        IssueChildrenCompleted => "issue_children_completed",
        IssueBlockersResolved => "issue_blockers_resolved",
        ApprovalResolved => "approval_resolved",
        HeartbeatTimer => "heartbeat_timer",
        OnDemand => "on_demand",
        Routine => "routine",
        ProcessLostRetry => "process_lost_retry",
        IssueEscalated => "issue_escalated",
        IncidentEscalated => "incident_escalated",
        IssueAssignmentRecovery => "issue_assignment_recovery",
        IssueContinuationNeeded => "issue_continuation_needed",
        InteractionPending => "interaction_pending",
        IssueMonitorDue => "issue_monitor_due",
        IssueMonitorRecovery => "issue_monitor_recovery",
    }
);

impl WakeReason {
    /// Wakes caused by something that happened to an issue, which an agent's own run must not
    /// cause for itself.
    pub fn is_issue_event(self) -> bool {
        matches!(
            self,
            WakeReason::IssueAssigned
                | WakeReason::IssueCommented
                | WakeReason::IssueCommentMentioned
                | WakeReason::IssueStatusChanged
                | WakeReason::IssueChildrenCompleted
                | WakeReason::IssueBlockersResolved
                | WakeReason::InteractionPending
        )
    }
}

string_enum!(
    /// Where a wake is. `queued` and `deferred` are pending; the rest are final, and every
    /// final state but `claimed` and `completed` says why no run came of it.
    WakeStatus {
        Queued => "queued",
        Deferred => "deferred",
        Claimed => "claimed",
        Coalesced => "coalesced",
        Skipped => "skipped",
        Suppressed => "suppressed",
        Cancelled => "cancelled",
    }
);

impl WakeStatus {
    pub fn is_pending(self) -> bool {
        matches!(self, WakeStatus::Queued | WakeStatus::Deferred)
    }
}

/// A durable request that an agent run happen, committed before anything acts on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wake {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    pub reason: WakeReason,
    pub status: WakeStatus,
    /// Why it is deferred, or why it was skipped, suppressed, coalesced or cancelled: the answer
    /// to "why didn't my agent run?".
    pub status_reason: Option<String>,
    /// How many wakes this one stands for (itself and those merged into it).
    pub count: u32,
    /// Comments that caused it and the wakes merged into it, in order.
    pub comment_ids: Vec<String>,
    pub payload: serde_json::Value,
    pub idempotency_key: Option<String>,
    pub requested_by_type: String,
    pub requested_by_id: String,
    /// The wake this one was merged into (status `coalesced`).
    pub coalesced_into: Option<String>,
    /// The run that answered it (status `claimed`).
    pub run_id: Option<String>,
    /// For a `process_lost_retry`: the lost run it retries.
    pub retry_of_run_id: Option<String>,
    /// A deferred wake waits for this run (another agent's, holding the issue) to end.
    pub waiting_on_run: Option<String>,
    /// The order wakes are claimed in: the log index that created it.
    pub seq: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

string_enum!(WorkerStatus { Online => "online", Lost => "lost" });

/// A machine that runs agents. Its liveness is tracked in the leader's memory; only its
/// registration and its loss are committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    pub id: String,
    pub name: String,
    pub adapters: Vec<AdapterType>,
    pub labels: BTreeMap<String, String>,
    pub slots: u32,
    pub version: String,
    pub status: WorkerStatus,
    pub registered_at: Timestamp,
    pub lost_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paperclips_adapter_names_read_as_roosts_and_roosts_are_written() {
        for (paperclip, roost) in [
            ("claude_local", AdapterType::Claude),
            ("codex_local", AdapterType::Codex),
            ("gemini_local", AdapterType::Gemini),
            ("opencode_local", AdapterType::OpenCode),
            ("hermes_local", AdapterType::Hermes),
            ("openclaw", AdapterType::OpenClawGateway),
        ] {
            assert_eq!(paperclip.parse::<AdapterType>(), Ok(roost));
            let read: AdapterType =
                serde_json::from_value(serde_json::json!(paperclip)).expect("an alias");
            assert_eq!(read, roost);
            assert_eq!(
                serde_json::to_value(read).expect("json"),
                serde_json::json!(roost.as_str())
            );
        }
        let unknown = "cursor_local".parse::<AdapterType>().unwrap_err();
        assert!(
            unknown.contains(
                "process, claude, codex, gemini, opencode, hermes, openclaw_gateway, http"
            ),
            "{unknown}"
        );
    }
}
