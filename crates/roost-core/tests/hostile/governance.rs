//! Steps for the governance objects and the agent's home: goals,
//! projects and their budgets, approvals and hires, the org chart, routines with their
//! triggers and firings, home chunks and saves. Resolved into commands in `world/governance.rs`.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use roost_core::approval::{ApprovalDecision, ApprovalType};
use roost_core::project::{GoalLevel, ProjectStatus};

use super::ops::{Id, Json, Text};
use super::strategies::{big, id, json, mine_id, new_id, text};

/// A chunk a run uploads: base64 of a small text, of nothing, not base64, or past the chunk
/// size.
#[derive(Clone, Copy, Debug)]
pub enum Chunk {
    Small(u8),
    Empty,
    NotBase64,
    Oversized,
}

/// A path of a home file: ordinary, memory's own, or one no honest worker sends.
#[derive(Clone, Copy, Debug)]
pub enum HomePath {
    Ordinary(u8),
    Managed,
    Hostile(u8),
}

/// A schedule: cron in a zone, `every`, `at`, or garbage.
#[derive(Clone, Copy, Debug)]
pub enum Schedule {
    Cron(u8),
    Every(u8),
    At,
    Bad(u8),
}

#[derive(Clone, Debug)]
pub enum GovOp {
    CreateGoal {
        id: Id,
        company: Id,
        title: Text,
        level: GoalLevel,
        parent: Option<Id>,
    },
    /// Re-parents a goal (cycles included) or renames it.
    UpdateGoal {
        goal: Id,
        parent: Option<Option<Id>>,
        title: Option<Text>,
    },
    DeleteGoal {
        goal: Id,
    },
    CreateProject {
        id: Id,
        company: Id,
        name: Text,
        status: ProjectStatus,
        lead: Option<Id>,
        goals: Vec<Id>,
    },
    UpdateProject {
        project: Id,
        name: Option<Text>,
        lead: Option<Option<Id>>,
        paused: Option<bool>,
    },
    DeleteProject {
        project: Id,
    },
    /// Moves an issue into or out of a project and goal, and sets Paperclip's kept fields
    /// (`kept`: ordinary, a name that is an issue's own field, huge, a removal).
    FileIssue {
        issue: Id,
        project: Option<Option<Id>>,
        goal: Option<Option<Id>>,
        kept: Option<u8>,
    },
    ProjectBudget {
        id: Id,
        project: Id,
        amount: u64,
        hard: bool,
    },
    CreateApproval {
        id: Id,
        company: Id,
        kind: ApprovalType,
        payload: Json,
        issues: Vec<Id>,
    },
    HireAgent {
        approval: Id,
        agent: Id,
        company: Id,
        name: Text,
        payload: Json,
    },
    DecideApproval {
        approval: Id,
        decision: ApprovalDecision,
        note: Option<Text>,
    },
    ResubmitApproval {
        approval: Id,
        payload: Option<Json>,
    },
    CommentOnApproval {
        approval: Id,
        id: Id,
        body: Text,
    },
    /// Sets or clears an agent's manager (cycles included).
    ReportsTo {
        agent: Id,
        manager: Option<Id>,
    },
    EscalateIssue {
        issue: Id,
    },
    RecoverIssue {
        issue: Id,
        wake: Id,
    },
    /// Schedules (at a time near the world's clock or at an extreme, with bounds that may be
    /// used up) or clears (`at` none) an issue's monitor, moving the issue with it or not.
    Monitor {
        issue: Id,
        agent: Option<Id>,
        at: Option<i64>,
        max_attempts: Option<u32>,
        recovery: u8,
        status: Option<u8>,
    },
    /// Fires an issue's monitor (due or not: as the sweep or as a check now); `scheduled`
    /// aims at an issue whose monitor is scheduled, if there is one.
    TriggerMonitor {
        issue: Id,
        id: Id,
        scheduled: bool,
    },
    CreateRoutine {
        id: Id,
        company: Id,
        title: Text,
        agent: Option<Id>,
        wake: bool,
        policy: u8,
        variables: Json,
    },
    PauseRoutine {
        routine: Id,
        paused: bool,
    },
    CreateTrigger {
        id: Id,
        routine: Id,
        schedule: Schedule,
        webhook: bool,
    },
    /// A firing of a schedule trigger: at its due instant, or at a hostile one.
    Fire {
        trigger: Id,
        due: bool,
        run: Id,
        issue: Id,
    },
    RunRoutine {
        routine: Id,
        run: Id,
        issue: Id,
        variables: Json,
    },
    PutHomeChunks {
        agent: Id,
        chunks: Vec<Chunk>,
    },
    SaveAgentHome {
        agent: Id,
        base: u8,
        files: Vec<(HomePath, u8, u64)>,
        deleted: Vec<HomePath>,
    },
    /// A company skill: name, slug (`None`: from the name), `SKILL.md` and files.
    CreateSkill {
        id: Id,
        company: Id,
        name: Text,
        slug: Option<Text>,
        markdown: Option<Text>,
        files: Vec<(HomePath, Text)>,
    },
    /// Writes (`Some`) or removes a file of a skill, or renames it.
    WriteSkill {
        skill: Id,
        name: Option<Text>,
        files: Vec<(HomePath, Option<Text>)>,
    },
    DeleteSkill {
        skill: Id,
    },
    /// An issue label: a colour that is `#RRGGBB` (`color` even) or not.
    CreateLabel {
        id: Id,
        company: Id,
        name: Text,
        color: u8,
    },
    DeleteLabel {
        label: Id,
    },
    /// Sets an issue's `labelIds` to these labels (mostly its company's), repeated or not.
    LabelIssue {
        issue: Id,
        labels: Vec<Id>,
    },
    /// Assigns skills by the key of a skill (any company's) or a made-up one.
    AssignSkills {
        agent: Id,
        skills: Vec<Id>,
        made_up: Option<Text>,
    },
}

fn chunk() -> impl Strategy<Value = Chunk> {
    prop_oneof![
        6 => any::<u8>().prop_map(Chunk::Small),
        1 => Just(Chunk::Empty),
        1 => Just(Chunk::NotBase64),
        1 => Just(Chunk::Oversized),
    ]
}

/// Mostly ordinary: one bad path refuses the whole save, and saves must get through too.
fn home_path() -> impl Strategy<Value = HomePath> {
    prop_oneof![
        16 => any::<u8>().prop_map(HomePath::Ordinary),
        1 => Just(HomePath::Managed),
        2 => any::<u8>().prop_map(HomePath::Hostile),
    ]
}

fn schedule() -> impl Strategy<Value = Schedule> {
    prop_oneof![
        4 => any::<u8>().prop_map(Schedule::Cron),
        3 => any::<u8>().prop_map(Schedule::Every),
        1 => Just(Schedule::At),
        2 => any::<u8>().prop_map(Schedule::Bad),
    ]
}

fn opt<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

pub fn gov_op() -> impl Strategy<Value = GovOp> {
    prop_oneof![
        2 => (new_id(), mine_id(), text(), select(GoalLevel::ALL), opt(id())).prop_map(
            |(id, company, title, level, parent)| GovOp::CreateGoal { id, company, title, level, parent }
        ),
        1 => (id(), opt(opt(id())), opt(text()))
            .prop_map(|(goal, parent, title)| GovOp::UpdateGoal { goal, parent, title }),
        1 => id().prop_map(|goal| GovOp::DeleteGoal { goal }),
        2 => (new_id(), mine_id(), text(), select(ProjectStatus::ALL), opt(id()), vec(id(), 0..3))
            .prop_map(|(id, company, name, status, lead, goals)| GovOp::CreateProject {
                id, company, name, status, lead, goals
            }),
        2 => (id(), opt(text()), opt(opt(id())), opt(any::<bool>()))
            .prop_map(|(project, name, lead, paused)| GovOp::UpdateProject { project, name, lead, paused }),
        1 => id().prop_map(|project| GovOp::DeleteProject { project }),
        2 => (mine_id(), opt(opt(id())), opt(opt(id())), opt(any::<u8>()))
            .prop_map(|(issue, project, goal, kept)| GovOp::FileIssue { issue, project, goal, kept }),
        1 => (new_id(), id(), big(), any::<bool>())
            .prop_map(|(id, project, amount, hard)| GovOp::ProjectBudget { id, project, amount, hard }),
        2 => (new_id(), mine_id(), select(ApprovalType::ALL), json(), vec(id(), 0..3))
            .prop_map(|(id, company, kind, payload, issues)| GovOp::CreateApproval {
                id, company, kind, payload, issues
            }),
        1 => (new_id(), new_id(), mine_id(), text(), json())
            .prop_map(|(approval, agent, company, name, payload)| GovOp::HireAgent {
                approval, agent, company, name, payload
            }),
        2 => (id(), select(ApprovalDecision::ALL), opt(text()))
            .prop_map(|(approval, decision, note)| GovOp::DecideApproval { approval, decision, note }),
        1 => (id(), opt(json()))
            .prop_map(|(approval, payload)| GovOp::ResubmitApproval { approval, payload }),
        1 => (id(), new_id(), text())
            .prop_map(|(approval, id, body)| GovOp::CommentOnApproval { approval, id, body }),
        2 => (mine_id(), opt(id())).prop_map(|(agent, manager)| GovOp::ReportsTo { agent, manager }),
        1 => id().prop_map(|issue| GovOp::EscalateIssue { issue }),
        1 => (id(), new_id()).prop_map(|(issue, wake)| GovOp::RecoverIssue { issue, wake }),
        4 => (
            (id(), prop_oneof![4 => id().prop_map(Some), 1 => Just(None)]),
            prop_oneof![
                4 => (-5_000i64..60_000).prop_map(Some),
                1 => prop_oneof![Just(i64::MIN), Just(i64::MAX)].prop_map(Some),
                1 => Just(None),
            ],
            prop_oneof![
                6 => Just(None),
                3 => (1u32..4).prop_map(Some),
                1 => prop_oneof![Just(0), Just(101), Just(u32::MAX)].prop_map(Some),
            ],
            any::<u8>(),
            prop_oneof![4 => any::<u8>().prop_map(Some), 1 => Just(None)],
        )
            .prop_map(|((issue, agent), at, max_attempts, recovery, status)| GovOp::Monitor {
                issue, agent, at, max_attempts, recovery, status
            }),
        8 => (id(), new_id(), prop::bool::weighted(0.8))
            .prop_map(|(issue, id, scheduled)| GovOp::TriggerMonitor { issue, id, scheduled }),
        2 => (new_id(), mine_id(), text(), opt(id()), any::<bool>(), any::<u8>(), json())
            .prop_map(|(id, company, title, agent, wake, policy, variables)| GovOp::CreateRoutine {
                id, company, title, agent, wake, policy, variables
            }),
        1 => (id(), any::<bool>()).prop_map(|(routine, paused)| GovOp::PauseRoutine { routine, paused }),
        2 => (new_id(), id(), schedule(), prop::bool::weighted(0.2))
            .prop_map(|(id, routine, schedule, webhook)| GovOp::CreateTrigger { id, routine, schedule, webhook }),
        3 => (id(), prop::bool::weighted(0.8), new_id(), new_id())
            .prop_map(|(trigger, due, run, issue)| GovOp::Fire { trigger, due, run, issue }),
        1 => (id(), new_id(), new_id(), json())
            .prop_map(|(routine, run, issue, variables)| GovOp::RunRoutine { routine, run, issue, variables }),
        4 => (mine_id(), vec(chunk(), 0..4)).prop_map(|(agent, chunks)| GovOp::PutHomeChunks { agent, chunks }),
        4 => (mine_id(), any::<u8>(), vec((home_path(), any::<u8>(), big()), 0..3), vec(home_path(), 0..2))
            .prop_map(|(agent, base, files, deleted)| GovOp::SaveAgentHome { agent, base, files, deleted }),
        3 => (new_id(), mine_id(), text(), opt(text()), opt(text()), vec((home_path(), text()), 0..3))
            .prop_map(|(id, company, name, slug, markdown, files)| GovOp::CreateSkill {
                id, company, name, slug, markdown, files
            }),
        4 => (id(), opt(text()), vec((home_path(), opt(text())), 0..3))
            .prop_map(|(skill, name, files)| GovOp::WriteSkill { skill, name, files }),
        6 => id().prop_map(|skill| GovOp::DeleteSkill { skill }),
        2 => (mine_id(), vec(id(), 0..4), opt(text()))
            .prop_map(|(agent, skills, made_up)| GovOp::AssignSkills { agent, skills, made_up }),
        // A label's delete needs a label created earlier in the same sequence: both weighted up.
        6 => (new_id(), mine_id(), text(), any::<u8>())
            .prop_map(|(id, company, name, color)| GovOp::CreateLabel { id, company, name, color }),
        6 => mine_id().prop_map(|label| GovOp::DeleteLabel { label }),
        3 => (mine_id(), vec(prop_oneof![3 => mine_id(), 1 => id()], 0..4))
            .prop_map(|(issue, labels)| GovOp::LabelIssue { issue, labels }),
    ]
}

/// Whether an agent sends this op in the natural case (the rest: an administrator).
pub fn agent_sends(op: &GovOp) -> bool {
    matches!(
        op,
        GovOp::CreateGoal { .. }
            | GovOp::UpdateGoal { .. }
            | GovOp::CreateProject { .. }
            | GovOp::UpdateProject { .. }
            | GovOp::FileIssue { .. }
            | GovOp::CreateApproval { .. }
            | GovOp::HireAgent { .. }
            | GovOp::ResubmitApproval { .. }
            | GovOp::CommentOnApproval { .. }
            | GovOp::RunRoutine { .. }
            | GovOp::PutHomeChunks { .. }
            | GovOp::SaveAgentHome { .. }
            | GovOp::CreateLabel { .. }
            | GovOp::DeleteLabel { .. }
            | GovOp::LabelIssue { .. }
    )
}
