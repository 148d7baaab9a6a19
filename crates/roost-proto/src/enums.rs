//! The enums of `proto/roost/v1/enums.proto` and the roost-core enums they carry, matched
//! variant by variant (the proto's `ISSUE_STATUS_IN_PROGRESS` is `IssueStatus::InProgress`).
//!
//! The matches are written out, so a variant added to a roost-core enum without its proto value
//! fails to compile here rather than travelling as UNSPECIFIED.
//!
//! Roost's own ends of the wire (the server's conversions, the worker) go through
//! [`ProtoEnum`]; code that stands where an outside client would (the benchmarks, the end-to-end
//! tests) writes the generated enums (`pb::IssueStatus::Todo as i32`), as such a client must.

use std::fmt;

use roost_core::approval::{ApprovalDecision, ApprovalStatus, ApprovalType};
use roost_core::cluster_view::{MemberHealth, NodeRole};
use roost_core::interaction::{
    ContinuationPolicy, InteractionKind, InteractionStatus, ItemVerdict, ResolverPolicy,
};
use roost_core::monitor::{ClearReason, MonitorRecovery, MonitorStatus, ScheduledBy};
use roost_core::project::{GoalLevel, GoalStatus, ProjectStatus};
use roost_core::routine::{
    CatchUpPolicy, ConcurrencyPolicy, RoutineAction, RoutineRunStatus, RoutineStatus, RunSource,
    SigningMode, TriggerKind,
};
use roost_core::views::MemoryHitKind;
use roost_core::{
    AdapterType, AgentStatus, BudgetScopeType, BudgetWindow, CompanyStatus, CredentialKind,
    IncidentAction, IncidentKind, IncidentStatus, IssueStatus, PauseReason, Priority, RunStatus,
    WakeReason, WakeStatus, WorkerStatus,
};

use crate::v1 as pb;

/// A roost-core enum that travels as a proto enum (an `i32` in prost's messages).
pub trait ProtoEnum: Copy + Sized {
    /// The proto value.
    fn to_proto(self) -> i32;
    /// The domain value of a proto value, or why there is none: UNSPECIFIED, or a number this
    /// build does not know.
    fn from_proto(value: i32) -> Result<Self, NotAValue>;
}

/// A proto enum value with no domain value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAValue {
    /// The value received; 0 is UNSPECIFIED.
    pub value: i32,
    /// The proto enum's name.
    pub enum_name: &'static str,
    /// The names of the values that would do.
    pub expected: Vec<&'static str>,
}

impl fmt::Display for NotAValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value == 0 {
            write!(f, "{} is required", self.enum_name)?;
        } else {
            write!(f, "{} is not a value of {}", self.value, self.enum_name)?;
        }
        write!(f, "; expected one of: {}", self.expected.join(", "))
    }
}

impl std::error::Error for NotAValue {}

macro_rules! proto_enum {
    ($($domain:ident => $pb:ident { $($variant:ident),+ $(,)? })+) => {$(
        impl ProtoEnum for $domain {
            fn to_proto(self) -> i32 {
                match self {
                    $($domain::$variant => pb::$pb::$variant as i32,)+
                }
            }

            fn from_proto(value: i32) -> Result<Self, NotAValue> {
                match pb::$pb::try_from(value) {
                    $(Ok(pb::$pb::$variant) => Ok($domain::$variant),)+
                    _ => Err(NotAValue {
                        value,
                        enum_name: stringify!($pb),
                        expected: vec![$(pb::$pb::$variant.as_str_name()),+],
                    }),
                }
            }
        }
    )+};
}

proto_enum! {
    IssueStatus => IssueStatus { Backlog, Todo, InProgress, InReview, Blocked, Done, Cancelled }
    Priority => Priority { Critical, High, Medium, Low }
    CompanyStatus => CompanyStatus { Active, Paused, Archived }
    AgentStatus => AgentStatus { Active, Paused, Terminated, PendingApproval }
    PauseReason => PauseReason { Manual, Budget, System, LoopDetected }
    AdapterType => AdapterType {
        Process, Claude, Codex, Gemini, OpenCode, Hermes, OpenClawGateway, Http,
    }
    RunStatus => RunStatus {
        Queued, Assigned, Running, Succeeded, Failed, Cancelled, TimedOut, Lost,
    }
    WakeReason => WakeReason {
        IssueAssigned, IssueCommented, IssueCommentMentioned, IssueStatusChanged,
        IssueChildrenCompleted, IssueBlockersResolved, ApprovalResolved, HeartbeatTimer,
        OnDemand, Routine, ProcessLostRetry, IssueEscalated, IncidentEscalated,
        IssueAssignmentRecovery, IssueContinuationNeeded, InteractionPending, IssueMonitorDue,
        IssueMonitorRecovery,
    }
    WakeStatus => WakeStatus {
        Queued, Deferred, Claimed, Coalesced, Skipped, Suppressed, Cancelled,
    }
    WorkerStatus => WorkerStatus { Online, Lost }
    CredentialKind => CredentialKind { Admin, AgentKey, WorkerJoin, Worker }
    BudgetScopeType => BudgetScopeType { Company, Agent, Project }
    BudgetWindow => BudgetWindow { CalendarMonthUtc, Lifetime }
    IncidentKind => IncidentKind { Soft, Hard, WakeLoop }
    IncidentStatus => IncidentStatus { Open, Resolved, Dismissed }
    IncidentAction => IncidentAction { RaiseAndResume, KeepPaused, Dismiss, Resume }
    GoalLevel => GoalLevel { Company, Team, Agent, Task }
    GoalStatus => GoalStatus { Planned, Active, Achieved, Cancelled }
    ProjectStatus => ProjectStatus { Backlog, Planned, InProgress, Completed, Cancelled }
    ApprovalType => ApprovalType {
        HireAgent, ApproveCeoStrategy, BudgetOverrideRequired, RequestBoardApproval,
    }
    ApprovalStatus => ApprovalStatus {
        Pending, RevisionRequested, Approved, Rejected, Cancelled,
    }
    ApprovalDecision => ApprovalDecision { Approve, Reject, RequestRevision }
    RoutineStatus => RoutineStatus { Active, Paused, Archived }
    ConcurrencyPolicy => ConcurrencyPolicy { CoalesceIfActive, AlwaysEnqueue, SkipIfActive }
    CatchUpPolicy => CatchUpPolicy { SkipMissed, EnqueueMissedWithCap }
    TriggerKind => TriggerKind { Schedule, Webhook, Api }
    SigningMode => SigningMode { None, Bearer, HmacSha256, GithubHmac }
    RunSource => RunSource { Schedule, Manual, Api, Webhook }
    RoutineRunStatus => RoutineRunStatus {
        Received, Coalesced, Skipped, IssueCreated, Completed, Failed,
    }
    RoutineAction => RoutineAction { Issue, Wake }
    MemoryHitKind => MemoryHitKind { Entry, Document, Comment }
    NodeRole => NodeRole { Leader, Follower, Candidate, Learner, Shutdown }
    MemberHealth => MemberHealth { Leader, Healthy, Lagging, Unreachable }
    InteractionKind => InteractionKind {
        RequestConfirmation, RequestCheckboxConfirmation, AskUserQuestions, RequestItemVerdicts,
    }
    InteractionStatus => InteractionStatus {
        Pending, Accepted, Rejected, Answered, Withdrawn, Cancelled, Expired,
    }
    ResolverPolicy => ResolverPolicy { Anyone, NotCreator, HumanOnly }
    ContinuationPolicy => ContinuationPolicy { None, WakeAssignee, WakeAssigneeOnAccept }
    ItemVerdict => ItemVerdict { Approve, Reject, Defer }
    MonitorStatus => MonitorStatus { Scheduled, Triggered, Cleared }
    ScheduledBy => MonitorScheduledBy { Assignee, Board }
    MonitorRecovery => MonitorRecoveryPolicy { WakeOwner, CreateRecoveryIssue, EscalateToBoard }
    ClearReason => MonitorClearReason {
        Manual, Triggered, Done, Cancelled, InvalidStatus, InvalidAssignee, DispatchSkipped,
        TimeoutExceeded, MaxAttemptsExhausted,
    }
}

#[cfg(test)]
mod tests;
