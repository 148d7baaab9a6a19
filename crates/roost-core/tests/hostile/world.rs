//! A small multi-tenant world driven through the public API only: three companies, their
//! agents, a worker, runs and budgets; generated steps are resolved into envelopes against
//! its state and applied with `State::apply_entry`, as the state machine applies log entries.
//! It keeps every entry (to replay) and the rows the store would hold (to rebuild from).

use std::collections::BTreeMap;

use roost_core::command::IssuePatch;
use roost_core::*;
use serde_json::json;

use super::ops::{self, hostile_id, Id, IssueFields, Op, RunOf, Step, Text, When, Who};
use super::rows::Rows;

mod commands;
mod deliverables;
mod governance;
mod interactions;

/// A day past the idempotency retention, and a month past any budget month.
const DAY_MS: i64 = 25 * 60 * 60 * 1000;
const MONTH_MS: i64 = 32 * 24 * 60 * 60 * 1000;

/// The kinds of object a field names.
#[derive(Clone, Copy)]
enum Kind {
    Company,
    Agent,
    Issue,
    Run,
    Wake,
    Worker,
    Incident,
    Comment,
    Policy,
    Cost,
    Credential,
    Goal,
    Project,
    Approval,
    Routine,
    Trigger,
    Skill,
    Label,
}

impl Kind {
    fn pool_prefix(self) -> &'static str {
        match self {
            Kind::Company => "co",
            Kind::Agent => "ag",
            Kind::Issue => "is",
            Kind::Run => "ru",
            Kind::Wake => "wa",
            Kind::Worker => "wk",
            Kind::Incident => "inc",
            Kind::Comment => "cm",
            Kind::Policy => "bp",
            Kind::Cost => "ce",
            Kind::Credential => "cr",
            Kind::Goal => "go",
            Kind::Project => "pj",
            Kind::Approval => "ap",
            Kind::Routine => "rt",
            Kind::Trigger => "tr",
            Kind::Skill => "sk",
            Kind::Label => "lb",
        }
    }
}

pub struct World {
    pub state: State,
    index: u64,
    clock: i64,
    /// Every entry applied, with its log index: the log to replay.
    pub log: Vec<(u64, Envelope)>,
    pub rows: Rows,
}

pub fn admin() -> Actor {
    Actor {
        kind: ActorKind::User,
        id: "admin".into(),
        credential_id: Some("cred-admin".into()),
        run_id: None,
        company_id: None,
    }
}

fn hash_of(n: u8) -> String {
    format!("{:064x}", 0xabc0_u64 + n as u64)
}

impl World {
    /// Companies c1, c2 and c3; agents a1, a2 (c1), b1, b2 (c2), d1 (c3), named as their
    /// ids so comments can mention them; worker wk1; a run of a1, b1 and d1; an issue in c1
    /// and in c2; a company budget on c1, an agent budget on b1; a queued wake of a2; the
    /// governance objects of `world/governance.rs`.
    pub fn new() -> World {
        let mut w = World {
            state: State::new(),
            index: 0,
            clock: 1_767_225_600_000,
            log: Vec::new(),
            rows: Rows::default(),
        };
        for (id, prefix) in [("c1", "ACM"), ("c2", "OTH"), ("c3", "THR")] {
            w.setup(Command::CreateCompany {
                id: id.into(),
                name: id.into(),
                issue_prefix: prefix.into(),
            });
        }
        for (id, company) in [
            ("a1", "c1"),
            ("a2", "c1"),
            ("b1", "c2"),
            ("b2", "c2"),
            ("d1", "c3"),
        ] {
            let heartbeat = HeartbeatPolicy {
                enabled: id == "b1",
                interval_sec: 10,
                skip_when_idle: false,
                ..Default::default()
            };
            w.setup(Command::CreateAgent {
                id: id.into(),
                company_id: company.into(),
                name: id.into(),
                role: "engineer".into(),
                title: None,
                adapter_type: AdapterType::Process,
                adapter_config: json!({ "env": { "KEY": format!("secret-of-{id}") } }),
                heartbeat,
                placement_labels: BTreeMap::new(),
            });
            w.setup(Command::CreateCredential {
                id: format!("key-{id}"),
                kind: CredentialKind::AgentKey,
                name: id.into(),
                agent_id: Some(id.into()),
                token_hash: format!(
                    "{:064x}",
                    id.len() as u64 * 7 + id.as_bytes()[0] as u64 * 1000 + id.as_bytes()[1] as u64
                ),
            });
        }
        w.setup(Command::RegisterWorker {
            worker_id: "wk1".into(),
            name: "one".into(),
            adapters: AdapterType::ALL.to_vec(),
            labels: BTreeMap::new(),
            slots: 8,
            version: "1".into(),
        });
        for (issue, company, agent) in [("is-a", "c1", "a1"), ("is-b", "c2", "b1")] {
            let fields = IssuePatch {
                title: Some(issue.into()),
                status: Some(IssueStatus::Todo),
                assignee_agent_id: Some(Some(agent.into())),
                ..Default::default()
            };
            w.setup(Command::CreateIssue {
                id: issue.into(),
                company_id: company.into(),
                fields,
            });
        }
        for (run, agent) in [("ru-a1", "a1"), ("ru-b1", "b1"), ("ru-d1", "d1")] {
            w.setup(Command::StartRun {
                id: run.into(),
                agent_id: agent.into(),
                issue_id: None,
                invocation_source: "on_demand".into(),
            });
        }
        w.setup(Command::SetBudgetPolicy {
            id: "bp-c1".into(),
            company_id: "c1".into(),
            scope_type: BudgetScopeType::Company,
            scope_id: "c1".into(),
            window_kind: BudgetWindow::CalendarMonthUtc,
            amount: 10_000,
            warn_percent: 80,
            hard_stop_enabled: true,
        });
        w.setup(Command::SetBudgetPolicy {
            id: "bp-b1".into(),
            company_id: "c2".into(),
            scope_type: BudgetScopeType::Agent,
            scope_id: "b1".into(),
            window_kind: BudgetWindow::Lifetime,
            amount: 500,
            warn_percent: 50,
            hard_stop_enabled: true,
        });
        w.setup(Command::Wakeup {
            id: "wake-a2".into(),
            agent_id: "a2".into(),
            issue_id: None,
            reason: WakeReason::OnDemand,
            payload: json!({}),
            wake_key: None,
        });
        w.setup_governance();
        w
    }

    fn setup(&mut self, command: Command) {
        self.clock += 1000;
        let name = command.name();
        let env = Envelope {
            request_id: None,
            at: Timestamp(self.clock),
            actor: admin(),
            command,
            idempotency_key: None,
        };
        let applied = self.apply(env);
        assert!(
            applied[0].outcome.is_ok(),
            "setup {name}: {:?}",
            applied[0].outcome
        );
    }

    /// Applies one log entry and records it.
    pub fn apply(&mut self, env: Envelope) -> Vec<Applied> {
        self.index += 1;
        let applied = self.state.apply_entry(self.index, &env);
        for a in &applied {
            self.rows.absorb(&a.changes);
        }
        self.log.push((self.index, env));
        applied
    }

    /// The envelope `step` stands for in the current state.
    pub fn envelope(&mut self, step: &Step) -> Envelope {
        let at = match step.when {
            When::Later(s) => {
                self.clock += s as i64 * 1000;
                self.clock
            }
            When::NextDay => {
                self.clock += DAY_MS;
                self.clock
            }
            When::NextMonth => {
                self.clock += MONTH_MS;
                self.clock
            }
            When::Hostile(t) => t,
        };
        let actor = self.actor(step.who);
        let command = match &step.op {
            Op::Batch { steps, nested } => {
                let mut envelopes: Vec<Envelope> = steps.iter().map(|s| self.envelope(s)).collect();
                if *nested {
                    let inner = Command::Batch {
                        envelopes: envelopes.clone(),
                    };
                    envelopes.push(Envelope {
                        request_id: None,
                        at: Timestamp(at),
                        actor: admin(),
                        command: inner,
                        idempotency_key: None,
                    });
                }
                Command::Batch { envelopes }
            }
            op => self.command(op, &actor),
        };
        Envelope {
            request_id: None,
            at: Timestamp(at),
            actor,
            command,
            idempotency_key: step.key.map(ops::key),
        }
    }

    /// Ids of `kind`, of `company` only if given (objects of no company then never match).
    fn keys(&self, kind: Kind, company: Option<&str>) -> Vec<&String> {
        fn of<'a, T>(
            m: &'a BTreeMap<String, T>,
            c: Option<&str>,
            owner: impl Fn(&T) -> Option<&str>,
        ) -> Vec<&'a String> {
            m.iter()
                .filter(|(_, r)| c.is_none() || owner(r) == c)
                .map(|(k, _)| k)
                .collect()
        }
        let (s, c) = (&self.state, company);
        match kind {
            Kind::Company => of(&s.companies, c, |r| Some(&r.id)),
            Kind::Agent => of(&s.agents, c, |r| Some(&r.company_id)),
            Kind::Issue => (s.issues.keys())
                .filter(|id| c.is_none() || Some(s.issues[id.as_str()].company_id.as_str()) == c)
                .collect(),
            Kind::Run => of(&s.runs, c, |r| Some(&r.company_id)),
            Kind::Wake => of(&s.wakes, c, |r| Some(&r.company_id)),
            Kind::Worker => of(&s.workers, c, |_| None),
            Kind::Incident => of(&s.budget_incidents, c, |r| Some(&r.company_id)),
            Kind::Comment => of(&s.comments, c, |r| Some(&r.company_id)),
            Kind::Policy => of(&s.budget_policies, c, |r| Some(&r.company_id)),
            Kind::Cost => of(&s.cost_events, c, |r| Some(&r.company_id)),
            Kind::Credential => of(&s.credentials, c, |r| r.company_id.as_deref()),
            Kind::Goal => of(&s.goals, c, |r| Some(&r.company_id)),
            Kind::Project => of(&s.projects, c, |r| Some(&r.company_id)),
            Kind::Approval => of(&s.approvals.approvals, c, |r| Some(&r.company_id)),
            Kind::Routine => of(&s.routines.routines, c, |r| Some(&r.company_id)),
            Kind::Trigger => of(&s.routines.triggers, c, |r| Some(&r.company_id)),
            Kind::Skill => of(&s.skills, c, |r| Some(&r.company_id)),
            Kind::Label => of(&s.labels, c, |r| Some(&r.company_id)),
        }
    }

    fn nth(&self, kind: Kind, company: Option<&str>, n: u8) -> Option<String> {
        let keys = self.keys(kind, company);
        (!keys.is_empty()).then(|| keys[n as usize % keys.len()].clone())
    }

    /// The id `id` names for a field of `kind` in a command `actor` sends.
    fn pick(&self, actor: &Actor, kind: Kind, id: Id) -> String {
        let pooled = |n: u8| format!("{}{}", kind.pool_prefix(), n % 6);
        match id {
            Id::Existing(n) => self.nth(kind, None, n).unwrap_or_else(|| pooled(n)),
            Id::Mine(n) => {
                let own = match kind {
                    Kind::Agent => actor.agent_id().map(str::to_string),
                    Kind::Run => actor.run_id.clone(),
                    Kind::Worker => (actor.kind == ActorKind::Worker).then(|| actor.id.clone()),
                    Kind::Company => actor.company_id.clone(),
                    _ => None,
                };
                own.or_else(|| self.nth(kind, actor.company_id.as_deref(), n))
                    .or_else(|| self.nth(kind, None, n))
                    .unwrap_or_else(|| pooled(n))
            }
            Id::Pool(n) => pooled(n),
            Id::Hostile(n) => hostile_id(n),
        }
    }

    /// The company of agent `agent_id`, or the company `company` names.
    fn company_of(&self, actor: &Actor, agent_id: &str, company: Option<Id>) -> String {
        match (company, self.state.agents.get(agent_id)) {
            (None, Some(agent)) => agent.company_id.clone(),
            (company, _) => self.pick(actor, Kind::Company, company.unwrap_or(Id::Mine(0))),
        }
    }

    fn actor(&self, who: Who) -> Actor {
        match who {
            Who::Admin => admin(),
            Who::System => Actor::system(),
            Who::Worker(n) => Actor {
                kind: ActorKind::Worker,
                id: self
                    .nth(Kind::Worker, None, n)
                    .unwrap_or_else(|| format!("wk{}", n % 6)),
                credential_id: None,
                run_id: None,
                company_id: None,
            },
            Who::Agent { agent, run } => {
                let agents: Vec<&Agent> = self.state.agents.values().collect();
                if agents.is_empty() {
                    return admin();
                }
                let agent = agents[agent as usize % agents.len()];
                let run_id = match run {
                    RunOf::None => None,
                    RunOf::Own(n) => {
                        // Its live runs if it has any (writes for them are accepted), else
                        // its ended ones (fenced).
                        let mut own: Vec<&Run> = self
                            .state
                            .runs
                            .values()
                            .filter(|r| r.agent_id == agent.id)
                            .collect();
                        if own.iter().any(|r| r.status.is_live()) {
                            own.retain(|r| r.status.is_live());
                        }
                        (!own.is_empty()).then(|| own[n as usize % own.len()].id.clone())
                    }
                    RunOf::Any(n) => self.nth(Kind::Run, None, n),
                    RunOf::Hostile(n) => Some(hostile_id(n)),
                };
                Actor {
                    kind: ActorKind::Agent,
                    id: agent.id.clone(),
                    credential_id: Some(format!("key-{}", agent.id)),
                    run_id,
                    company_id: Some(agent.company_id.clone()),
                }
            }
        }
    }

    fn patch(&self, actor: &Actor, f: &IssueFields) -> IssuePatch {
        let text = |t: &Option<Text>| t.map(Text::render);
        IssuePatch {
            title: text(&f.title),
            description: f.description.map(|d| text(&d)),
            status: f.status,
            priority: f.priority,
            assignee_agent_id: f
                .assignee_agent
                .map(|a| a.map(|a| self.pick(actor, Kind::Agent, a))),
            assignee_user_id: f.assignee_user.map(|u| text(&u)),
            parent_id: f
                .parent
                .map(|p| p.map(|p| self.pick(actor, Kind::Issue, p))),
            blocked_by_issue_ids: f.blocked_by.as_ref().map(|b| {
                b.iter()
                    .map(|i| self.pick(actor, Kind::Issue, *i))
                    .collect()
            }),
            billing_code: f.billing_code.map(|c| text(&c)),
            project_id: None,
            goal_id: None,
            // Monitors: `GovOp::Monitor` (governance.rs).
            monitor: None,
            paperclip: None,
        }
    }
}
