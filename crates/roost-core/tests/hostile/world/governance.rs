//! Resolving the governance and home steps (`hostile/governance.rs`) into commands against the
//! world's state, as `World::command` does for the rest.

use base64::Engine;
use roost_core::command::{AgentPatch, IssuePatch};
use roost_core::home::HomeFile;
use roost_core::project::{GoalPatch, ProjectPatch};
use roost_core::routine::{CatchUpPolicy, ConcurrencyPolicy, RoutineAction, RoutineStatus};
use roost_core::routine::{RunSource, TriggerKind};
use roost_core::routine_command::{
    NewTrigger, RoutineCommand, RoutineFields, RoutinePatch, RunRequest,
};
use roost_core::*;
use sha2::{Digest, Sha256};

use super::super::governance::{Chunk, GovOp, HomePath, Schedule};
use super::super::ops::{hostile_id, Id, Text};
use super::{Kind, World};

fn chunk_bytes(c: Chunk) -> String {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    match c {
        Chunk::Small(n) => b64(format!("note {n}\n").as_bytes()),
        Chunk::Empty => String::new(),
        Chunk::NotBase64 => "not base64 at all!".into(),
        Chunk::Oversized => b64(&vec![7u8; 256 * 1024 + 1]),
    }
}

fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn home_path(p: HomePath) -> String {
    match p {
        HomePath::Ordinary(n) => format!("life/projects/p{}.md", n % 4),
        HomePath::Managed => "MEMORY.md".into(),
        HomePath::Hostile(n) => match n % 7 {
            0 => "../escape".into(),
            1 => "/etc/passwd".into(),
            2 => "a/./b".into(),
            3 => "nul\0byte".into(),
            4 => "x".repeat(5000),
            5 => String::new(),
            _ => hostile_id(n),
        },
    }
}

fn schedule(s: Schedule) -> (String, Option<String>) {
    match s {
        Schedule::Cron(n) => {
            let zones = ["America/New_York", "Europe/Berlin", "UTC", "Asia/Kolkata"];
            (
                format!("{} 9 * * 1-5", n % 60),
                Some(zones[n as usize % zones.len()].into()),
            )
        }
        Schedule::Every(n) => (format!("every {}s", u32::from(n) + 1), None),
        Schedule::At => ("at 2026-03-08T07:30:00Z".into(), None),
        Schedule::Bad(n) => match n % 5 {
            0 => ("61 25 * * *".into(), Some("UTC".into())),
            1 => ("0 9 * * *".into(), Some("Mars/Olympus".into())),
            2 => ("every 0s".into(), None),
            3 => ("every 99999999999d".into(), None),
            _ => (hostile_id(n), None),
        },
    }
}

impl World {
    /// Objects the governance steps can name from the start (as the issues and runs above):
    /// a goal and a project of c1 and c2, an approval asked in each, and a routine of c1 with
    /// an `every 10s` schedule.
    pub(super) fn setup_governance(&mut self) {
        for (company, agent) in [("c1", "a1"), ("c2", "b1")] {
            self.setup(Command::CreateGoal {
                id: format!("goal-{company}"),
                company_id: company.into(),
                fields: GoalPatch {
                    title: Some("Ship".into()),
                    ..Default::default()
                },
            });
            self.setup(Command::CreateProject {
                id: format!("proj-{company}"),
                company_id: company.into(),
                fields: ProjectPatch {
                    name: Some("Launch".into()),
                    lead_agent_id: Some(Some(agent.into())),
                    goal_ids: Some(vec![format!("goal-{company}")]),
                    ..Default::default()
                },
            });
            self.setup(Command::CreateApproval {
                id: format!("appr-{company}"),
                company_id: company.into(),
                approval_type: roost_core::approval::ApprovalType::RequestBoardApproval,
                payload: serde_json::json!({ "why": "setup" }),
                requested_by_agent_id: Some(agent.into()),
                issue_ids: Vec::new(),
            });
        }
        self.setup(Command::Routine {
            routine: RoutineCommand::Create {
                id: "rt-c1".into(),
                company_id: "c1".into(),
                fields: RoutineFields {
                    title: "Daily {{topic}}".into(),
                    description: None,
                    assignee_agent_id: Some("a2".into()),
                    priority: Priority::Medium,
                    status: RoutineStatus::Active,
                    concurrency_policy: ConcurrencyPolicy::AlwaysEnqueue,
                    catch_up_policy: CatchUpPolicy::EnqueueMissedWithCap,
                    variables: serde_json::json!([]),
                    project_id: None,
                    goal_id: None,
                    parent_issue_id: None,
                    action: RoutineAction::Issue,
                    failure_alert_after: 2,
                },
            },
        });
        self.setup(Command::Routine {
            routine: RoutineCommand::CreateTrigger {
                id: "tr-c1".into(),
                routine_id: "rt-c1".into(),
                trigger: NewTrigger {
                    kind: TriggerKind::Schedule,
                    label: None,
                    enabled: true,
                    cron_expression: Some("every 10s".into()),
                    timezone: None,
                    public_id: None,
                    signing_mode: None,
                    replay_window_sec: None,
                    secret: None,
                },
            },
        });
    }

    pub(super) fn governance(&self, op: &GovOp, actor: &Actor) -> Command {
        let pick = |kind, id| self.pick(actor, kind, id);
        let opt = |kind, id: &Option<Id>| id.map(|id| self.pick(actor, kind, id));
        let opt2 = |kind, id: &Option<Option<Id>>| id.map(|i| i.map(|i| self.pick(actor, kind, i)));
        match op {
            GovOp::CreateGoal {
                id,
                company,
                title,
                level,
                parent,
            } => Command::CreateGoal {
                id: pick(Kind::Goal, *id),
                company_id: pick(Kind::Company, *company),
                fields: GoalPatch {
                    title: Some(title.render()),
                    level: Some(*level),
                    parent_id: Some(opt(Kind::Goal, parent)),
                    ..Default::default()
                },
            },
            GovOp::UpdateGoal {
                goal,
                parent,
                title,
            } => Command::UpdateGoal {
                goal_id: pick(Kind::Goal, *goal),
                patch: GoalPatch {
                    title: title.map(Text::render),
                    parent_id: opt2(Kind::Goal, parent),
                    ..Default::default()
                },
            },
            GovOp::DeleteGoal { goal } => Command::DeleteGoal {
                goal_id: pick(Kind::Goal, *goal),
            },
            GovOp::CreateProject {
                id,
                company,
                name,
                status,
                lead,
                goals,
            } => Command::CreateProject {
                id: pick(Kind::Project, *id),
                company_id: pick(Kind::Company, *company),
                fields: ProjectPatch {
                    name: Some(name.render()),
                    status: Some(*status),
                    lead_agent_id: Some(opt(Kind::Agent, lead)),
                    goal_ids: Some(goals.iter().map(|g| pick(Kind::Goal, *g)).collect()),
                    ..Default::default()
                },
            },
            GovOp::UpdateProject {
                project,
                name,
                lead,
                paused,
            } => Command::UpdateProject {
                project_id: pick(Kind::Project, *project),
                patch: ProjectPatch {
                    name: name.map(Text::render),
                    lead_agent_id: opt2(Kind::Agent, lead),
                    paused: *paused,
                    ..Default::default()
                },
            },
            GovOp::DeleteProject { project } => Command::DeleteProject {
                project_id: pick(Kind::Project, *project),
            },
            GovOp::FileIssue {
                issue,
                project,
                goal,
                kept,
            } => Command::UpdateIssue {
                issue_id: pick(Kind::Issue, *issue),
                patch: IssuePatch {
                    project_id: opt2(Kind::Project, project),
                    goal_id: opt2(Kind::Goal, goal),
                    paperclip: kept.map(|k| {
                        let (key, value) = match k % 5 {
                            0 | 1 => ("labelIds", serde_json::json!(["l1", k])),
                            // An issue's own field: must never reach the row.
                            2 => ("title", serde_json::json!("shadow")),
                            3 => (
                                "executionPolicy",
                                serde_json::json!({ "blob": "p".repeat(20_000) }),
                            ),
                            _ => ("labelIds", serde_json::Value::Null),
                        };
                        [(key.to_string(), value)].into_iter().collect()
                    }),
                    ..Default::default()
                },
                comment: None,
            },
            GovOp::ProjectBudget {
                id,
                project,
                amount,
                hard,
            } => {
                let project_id = pick(Kind::Project, *project);
                let company_id = self
                    .state
                    .projects
                    .get(&project_id)
                    .map(|p| p.company_id.clone())
                    .unwrap_or_else(|| pick(Kind::Company, Id::Mine(0)));
                Command::SetBudgetPolicy {
                    id: pick(Kind::Policy, *id),
                    company_id,
                    scope_type: BudgetScopeType::Project,
                    scope_id: project_id,
                    window_kind: BudgetWindow::Lifetime,
                    amount: *amount,
                    warn_percent: 80,
                    hard_stop_enabled: *hard,
                }
            }
            GovOp::CreateApproval {
                id,
                company,
                kind,
                payload,
                issues,
            } => Command::CreateApproval {
                id: pick(Kind::Approval, *id),
                company_id: pick(Kind::Company, *company),
                approval_type: *kind,
                payload: payload.render(),
                requested_by_agent_id: None,
                issue_ids: issues.iter().map(|i| pick(Kind::Issue, *i)).collect(),
            },
            GovOp::HireAgent {
                approval,
                agent,
                company,
                name,
                payload,
            } => Command::HireAgent {
                approval_id: pick(Kind::Approval, *approval),
                agent: Box::new(Command::CreateAgent {
                    id: pick(Kind::Agent, *agent),
                    company_id: pick(Kind::Company, *company),
                    name: name.render(),
                    role: "engineer".into(),
                    title: None,
                    adapter_type: AdapterType::Process,
                    adapter_config: serde_json::json!({}),
                    heartbeat: HeartbeatPolicy::default(),
                    placement_labels: Default::default(),
                }),
                payload: payload.render(),
            },
            GovOp::DecideApproval {
                approval,
                decision,
                note,
            } => Command::DecideApproval {
                approval_id: pick(Kind::Approval, *approval),
                decision: *decision,
                decision_note: note.map(Text::render),
            },
            GovOp::ResubmitApproval { approval, payload } => Command::ResubmitApproval {
                approval_id: pick(Kind::Approval, *approval),
                payload: payload.map(|p| p.render()),
            },
            GovOp::CommentOnApproval { approval, id, body } => Command::AddApprovalComment {
                approval_id: pick(Kind::Approval, *approval),
                comment_id: pick(Kind::Comment, *id),
                body: body.render(),
            },
            GovOp::ReportsTo { agent, manager } => Command::UpdateAgent {
                agent_id: pick(Kind::Agent, *agent),
                patch: AgentPatch {
                    reports_to: Some(opt(Kind::Agent, manager)),
                    ..Default::default()
                },
            },
            GovOp::EscalateIssue { issue } => Command::EscalateIssue {
                issue_id: pick(Kind::Issue, *issue),
            },
            GovOp::RecoverIssue { issue, wake } => Command::RecoverIssue {
                issue_id: pick(Kind::Issue, *issue),
                wake_id: pick(Kind::Wake, *wake),
            },
            GovOp::Monitor {
                issue,
                agent,
                at,
                max_attempts,
                recovery,
                status,
            } => {
                use roost_core::monitor::{MonitorPolicy, MonitorRecovery, ScheduledBy};
                let monitor = at.map(|at| MonitorPolicy {
                    next_check_at: Timestamp(self.clock.saturating_add(at)),
                    notes: (recovery % 3 == 0).then(|| "n".repeat(usize::from(*recovery) * 2)),
                    scheduled_by: ScheduledBy::Assignee,
                    kind: None,
                    service_name: None,
                    external_ref: None,
                    timeout_at: (recovery % 4 == 1).then_some(Timestamp(self.clock)),
                    max_attempts: *max_attempts,
                    recovery_policy: MonitorRecovery::ALL
                        .get(usize::from(*recovery) % 4)
                        .copied(),
                });
                // Mostly the statuses a monitor may run in, so that some fire.
                let status = status.map(|s| match s {
                    0..=179 => IssueStatus::InProgress,
                    180..=219 => IssueStatus::InReview,
                    _ => IssueStatus::ALL[usize::from(s) % IssueStatus::ALL.len()],
                });
                let issue_id = pick(Kind::Issue, *issue);
                // An agent of the issue's company where there is one, so that some schedule.
                let company = self
                    .state
                    .issues
                    .get(&issue_id)
                    .map(|i| i.company_id.clone());
                let colleague = |a: Id| {
                    let mut agents = self.state.agents.values();
                    agents
                        .find(|x| Some(&x.company_id) == company.as_ref())
                        .map_or_else(|| pick(Kind::Agent, a), |x| x.id.clone())
                };
                Command::UpdateIssue {
                    issue_id,
                    patch: IssuePatch {
                        status,
                        assignee_agent_id: agent.map(|a| Some(colleague(a))),
                        assignee_user_id: agent.map(|_| None),
                        monitor: Some(monitor),
                        ..Default::default()
                    },
                    comment: None,
                }
            }
            GovOp::TriggerMonitor {
                issue,
                id,
                scheduled,
            } => {
                let monitored = || {
                    let mut issues = self.state.issues.values();
                    issues
                        .find(|i| i.monitor.is_scheduled())
                        .map(|i| i.id.clone())
                };
                let issue_id = scheduled
                    .then(monitored)
                    .flatten()
                    .unwrap_or_else(|| pick(Kind::Issue, *issue));
                Command::TriggerIssueMonitor {
                    issue_id,
                    id: pick(Kind::Wake, *id),
                }
            }
            GovOp::CreateRoutine {
                id,
                company,
                title,
                agent,
                wake,
                policy,
                variables,
            } => Command::Routine {
                routine: RoutineCommand::Create {
                    id: pick(Kind::Routine, *id),
                    company_id: pick(Kind::Company, *company),
                    fields: RoutineFields {
                        title: title.render(),
                        description: None,
                        assignee_agent_id: opt(Kind::Agent, agent),
                        priority: Priority::Medium,
                        status: RoutineStatus::Active,
                        concurrency_policy: [
                            ConcurrencyPolicy::CoalesceIfActive,
                            ConcurrencyPolicy::AlwaysEnqueue,
                            ConcurrencyPolicy::SkipIfActive,
                        ][*policy as usize % 3],
                        catch_up_policy: if policy % 2 == 0 {
                            CatchUpPolicy::SkipMissed
                        } else {
                            CatchUpPolicy::EnqueueMissedWithCap
                        },
                        variables: variables.render(),
                        project_id: None,
                        goal_id: None,
                        parent_issue_id: None,
                        action: if *wake {
                            RoutineAction::Wake
                        } else {
                            RoutineAction::Issue
                        },
                        failure_alert_after: u32::from(*policy % 4),
                    },
                },
            },
            GovOp::PauseRoutine { routine, paused } => Command::Routine {
                routine: RoutineCommand::Update {
                    routine_id: pick(Kind::Routine, *routine),
                    patch: RoutinePatch {
                        status: Some(if *paused {
                            RoutineStatus::Paused
                        } else {
                            RoutineStatus::Active
                        }),
                        ..Default::default()
                    },
                },
            },
            GovOp::CreateTrigger {
                id,
                routine,
                schedule: s,
                webhook,
            } => {
                let (expression, timezone) = schedule(*s);
                let trigger = if *webhook {
                    NewTrigger {
                        kind: TriggerKind::Webhook,
                        label: None,
                        enabled: true,
                        cron_expression: None,
                        timezone: None,
                        public_id: Some(pick(Kind::Trigger, *id)),
                        signing_mode: Some(roost_core::routine::SigningMode::HmacSha256),
                        replay_window_sec: Some(300),
                        secret: Some("s".repeat(32)),
                    }
                } else {
                    NewTrigger {
                        kind: TriggerKind::Schedule,
                        label: None,
                        enabled: true,
                        cron_expression: Some(expression),
                        timezone,
                        public_id: None,
                        signing_mode: None,
                        replay_window_sec: None,
                        secret: None,
                    }
                };
                Command::Routine {
                    routine: RoutineCommand::CreateTrigger {
                        id: pick(Kind::Trigger, *id),
                        routine_id: pick(Kind::Routine, *routine),
                        trigger,
                    },
                }
            }
            GovOp::Fire {
                trigger,
                due,
                run,
                issue,
            } => {
                let trigger_id = pick(Kind::Trigger, *trigger);
                let next = self
                    .state
                    .routines
                    .triggers
                    .get(&trigger_id)
                    .and_then(|t| t.next_run_at);
                let scheduled_for = match (due, next) {
                    (true, Some(at)) => at,
                    _ => Timestamp(self.clock + 3_600_000),
                };
                Command::Routine {
                    routine: RoutineCommand::Fire {
                        trigger_id,
                        scheduled_for,
                        run_id: pick(Kind::Run, *run),
                        issue_id: pick(Kind::Issue, *issue),
                        stagger_ms: u64::from(*due) * 2_700,
                    },
                }
            }
            GovOp::RunRoutine {
                routine,
                run,
                issue,
                variables,
            } => Command::Routine {
                routine: RoutineCommand::Run {
                    request: RunRequest {
                        routine_id: pick(Kind::Routine, *routine),
                        trigger_id: None,
                        source: RunSource::Manual,
                        payload: serde_json::json!({}),
                        variables: variables.render(),
                        assignee_agent_id: None,
                        idempotency_key: None,
                    },
                    run_id: pick(Kind::Run, *run),
                    issue_id: pick(Kind::Issue, *issue),
                },
            },
            GovOp::PutHomeChunks { agent, chunks } => Command::PutHomeChunks {
                agent_id: pick(Kind::Agent, *agent),
                chunks: chunks.iter().map(|c| chunk_bytes(*c)).collect(),
            },
            GovOp::CreateSkill {
                id,
                company,
                name,
                slug,
                markdown,
                files,
            } => Command::CreateSkill {
                id: pick(Kind::Skill, *id),
                company_id: pick(Kind::Company, *company),
                fields: roost_core::skill::SkillCreate {
                    name: name.render(),
                    slug: slug.map(Text::render),
                    description: None,
                    markdown: markdown.map(Text::render),
                    files: files
                        .iter()
                        .map(|(p, t)| (home_path(*p), t.render()))
                        .collect(),
                },
            },
            GovOp::WriteSkill { skill, name, files } => Command::UpdateSkill {
                skill_id: pick(Kind::Skill, *skill),
                patch: roost_core::skill::SkillPatch {
                    name: name.map(Text::render),
                    description: None,
                    files: files
                        .iter()
                        .map(|(p, t)| (home_path(*p), t.map(Text::render)))
                        .collect(),
                },
            },
            GovOp::DeleteSkill { skill } => Command::DeleteSkill {
                skill_id: pick(Kind::Skill, *skill),
            },
            GovOp::CreateLabel {
                id,
                company,
                name,
                color,
            } => Command::CreateLabel {
                id: pick(Kind::Label, *id),
                company_id: pick(Kind::Company, *company),
                name: name.render(),
                color: if color % 2 == 0 {
                    format!("#{color:02x}{color:02X}a0")
                } else {
                    hostile_id(*color)
                },
            },
            GovOp::DeleteLabel { label } => Command::DeleteLabel {
                label_id: pick(Kind::Label, *label),
            },
            GovOp::LabelIssue { issue, labels } => Command::UpdateIssue {
                issue_id: pick(Kind::Issue, *issue),
                patch: IssuePatch {
                    paperclip: Some(
                        [(
                            "labelIds".to_string(),
                            serde_json::json!(labels
                                .iter()
                                .map(|l| pick(Kind::Label, *l))
                                .collect::<Vec<_>>()),
                        )]
                        .into_iter()
                        .collect(),
                    ),
                    ..Default::default()
                },
                comment: None,
            },
            GovOp::AssignSkills {
                agent,
                skills,
                made_up,
            } => Command::SetAgentSkills {
                agent_id: pick(Kind::Agent, *agent),
                skills: skills
                    .iter()
                    .map(|k| {
                        let id = pick(Kind::Skill, *k);
                        self.state.skills.get(&id).map_or(id, |s| s.key.clone())
                    })
                    .chain(made_up.map(Text::render))
                    .collect(),
            },
            GovOp::SaveAgentHome {
                agent,
                base,
                files,
                deleted,
            } => {
                let agent_id = pick(Kind::Agent, *agent);
                // Mostly a chunk of the agent's company with its true size (so saves get
                // through), else a foreign company's chunk, one never uploaded, or no hash.
                let company = self
                    .state
                    .agents
                    .get(&agent_id)
                    .map(|a| a.company_id.clone());
                let stored: Vec<&home::HomeChunk> = self.state.home.chunks.values().collect();
                let own: Vec<&&home::HomeChunk> = stored
                    .iter()
                    .filter(|c| Some(&c.company_id) == company.as_ref())
                    .collect();
                let file_for = |n: u8, size: u64| -> HomeFile {
                    let (chunks, size) = match n % 8 {
                        0..=4 if !own.is_empty() => {
                            let c = own[n as usize % own.len()];
                            (vec![c.hash.clone()], c.size)
                        }
                        0..=4 => (Vec::new(), 0),
                        5 if !stored.is_empty() => {
                            (vec![stored[n as usize % stored.len()].hash.clone()], size)
                        }
                        6 => (vec![sha_hex(b"never uploaded")], size),
                        _ => (vec!["not-a-hash".to_string()], size),
                    };
                    HomeFile {
                        size,
                        chunks,
                        executable: n.is_multiple_of(2),
                    }
                };
                let version = self
                    .state
                    .home
                    .homes
                    .get(&agent_id)
                    .map(|h| h.version)
                    .unwrap_or(0);
                Command::SaveAgentHome {
                    base_version: if base % 4 == 0 {
                        u64::from(*base)
                    } else {
                        version
                    },
                    files: files
                        .iter()
                        .map(|(p, chunk, size)| (home_path(*p), file_for(*chunk, *size)))
                        .collect(),
                    deleted: deleted.iter().map(|p| home_path(*p)).collect(),
                    agent_id,
                }
            }
        }
    }
}
