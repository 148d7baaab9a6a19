//! A small in-memory world for the transition tests.

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::State;
use crate::time::Timestamp;
use std::collections::BTreeMap;

pub(crate) struct World {
    pub state: State,
    pub index: u64,
}

pub(crate) fn admin() -> Actor {
    Actor {
        kind: ActorKind::User,
        id: "admin".into(),
        credential_id: Some("cred-admin".into()),
        run_id: None,
        company_id: None,
    }
}

pub(crate) fn agent_actor(agent: &str, company: &str, run: Option<&str>) -> Actor {
    Actor {
        kind: ActorKind::Agent,
        id: agent.into(),
        credential_id: Some(format!("key-{agent}")),
        run_id: run.map(str::to_string),
        company_id: Some(company.into()),
    }
}

/// Creates agent `id` (named `id`, a `process` agent with the default heartbeat) in `company`.
pub(crate) fn create_agent(id: &str, company: &str) -> Command {
    Command::CreateAgent {
        id: id.into(),
        company_id: company.into(),
        name: id.into(),
        role: "engineer".into(),
        title: None,
        adapter_type: AdapterType::Process,
        adapter_config: serde_json::json!({}),
        heartbeat: HeartbeatPolicy::default(),
        placement_labels: Default::default(),
    }
}

impl World {
    pub(crate) fn new() -> World {
        let mut w = World {
            state: State::new(),
            index: 0,
        };
        w.ok(
            admin(),
            Command::CreateCompany {
                id: "c1".into(),
                name: "Acme".into(),
                issue_prefix: "ACM".into(),
            },
        );
        w.ok(
            admin(),
            Command::CreateCompany {
                id: "c2".into(),
                name: "Other".into(),
                issue_prefix: "OTH".into(),
            },
        );
        for (id, company) in [("a1", "c1"), ("a2", "c1"), ("b1", "c2")] {
            w.ok(admin(), create_agent(id, company));
        }
        w
    }

    /// Applies `command` stamped with time `at_ms`.
    pub(crate) fn run_at(
        &mut self,
        at_ms: i64,
        actor: Actor,
        command: Command,
    ) -> Result<Outcome, DomainError> {
        self.applied_at(at_ms, actor, command).outcome
    }

    /// The outcome and the changes of applying `command` stamped with time `at_ms`.
    pub(crate) fn applied_at(
        &mut self,
        at_ms: i64,
        actor: Actor,
        command: Command,
    ) -> crate::state::Applied {
        self.index += 1;
        let env = Envelope {
            request_id: None,
            at: Timestamp(at_ms),
            actor,
            command,
            idempotency_key: None,
        };
        self.state.apply(self.index, &env)
    }

    pub(crate) fn run(&mut self, actor: Actor, command: Command) -> Result<Outcome, DomainError> {
        self.applied(actor, command).outcome
    }

    /// The outcome and the changes of applying `command` as `actor`.
    pub(crate) fn applied(&mut self, actor: Actor, command: Command) -> crate::state::Applied {
        let at = 1_000 * (self.index as i64 + 1);
        self.applied_at(at, actor, command)
    }

    pub(crate) fn ok(&mut self, actor: Actor, command: Command) -> Outcome {
        match self.run(actor, command.clone()) {
            Ok(o) => o,
            Err(e) => panic!("{command:?} failed: {e:?}"),
        }
    }

    /// Issue `id` in company `c1`, in `todo`: ready for a checkout.
    pub(crate) fn todo_issue(&mut self, id: &str) -> Issue {
        self.issue(
            id,
            "c1",
            IssuePatch {
                status: Some(IssueStatus::Todo),
                ..Default::default()
            },
        )
    }

    pub(crate) fn issue(&mut self, id: &str, company: &str, patch: IssuePatch) -> Issue {
        let fields = IssuePatch {
            title: Some(format!("issue {id}")),
            ..patch
        };
        match self.ok(
            admin(),
            Command::CreateIssue {
                id: id.into(),
                company_id: company.into(),
                fields,
            },
        ) {
            Outcome::Issue { issue, .. } => Issue::clone(&issue),
            other => panic!("unexpected {other:?}"),
        }
    }

    pub(crate) fn start_run(&mut self, id: &str, agent: &str) {
        self.ok(
            admin(),
            Command::StartRun {
                id: id.into(),
                agent_id: agent.into(),
                issue_id: None,
                invocation_source: "on_demand".into(),
            },
        );
    }

    pub(crate) fn checkout(
        &mut self,
        issue: &str,
        agent: &str,
        run: &str,
    ) -> Result<Outcome, DomainError> {
        self.run(
            agent_actor(agent, "c1", Some(run)),
            Command::Checkout {
                issue_id: issue.into(),
                agent_id: agent.into(),
                expected_statuses: vec![IssueStatus::Todo, IssueStatus::Backlog],
            },
        )
    }

    /// An administrator's `UpdateAgent` of `agent` with `patch`, which must be accepted.
    pub(crate) fn patch_agent(&mut self, agent: &str, patch: crate::command::AgentPatch) {
        self.ok(
            admin(),
            Command::UpdateAgent {
                agent_id: agent.into(),
                patch,
            },
        );
    }

    /// Makes `agent` its company's `ceo` (Paperclip's role with hiring rights).
    pub(crate) fn make_ceo(&mut self, agent: &str) {
        self.patch_agent(
            agent,
            crate::command::AgentPatch {
                role: Some("ceo".into()),
                ..Default::default()
            },
        );
    }

    /// Everything but the activity log, to prove a refusal changed nothing.
    pub(crate) fn fingerprint(&self) -> String {
        format!(
            "{:?}{:?}{:?}{:?}{:?}{}",
            self.state.companies,
            self.state.agents,
            self.state.issues,
            self.state.runs,
            self.state.interactions.pending,
            self.state.activity_seq
        )
    }
}

pub(crate) fn token_of(outcome: Outcome) -> u64 {
    match outcome {
        Outcome::Issue { issue, .. } => issue.checkout.as_ref().expect("checked out").token,
        other => panic!("unexpected {other:?}"),
    }
}

pub(crate) fn worker_actor(id: &str) -> Actor {
    Actor {
        kind: ActorKind::Worker,
        id: id.into(),
        credential_id: None,
        run_id: None,
        company_id: None,
    }
}

/// A world with worker `wk1` (process adapter, 4 slots) online.
pub(crate) fn world() -> World {
    let mut w = World::new();
    w.ok(
        admin(),
        Command::RegisterWorker {
            worker_id: "wk1".into(),
            name: "worker one".into(),
            adapters: vec![AdapterType::Process],
            labels: BTreeMap::new(),
            slots: 4,
            version: "test".into(),
        },
    );
    w
}

pub(crate) fn wakes_of<'a>(w: &'a World, agent: &str) -> Vec<&'a Wake> {
    let mut v: Vec<&Wake> = w
        .state
        .wakes
        .values()
        .filter(|x| x.agent_id == agent)
        .collect();
    v.sort_by_key(|x| (x.seq, x.id.clone()));
    v
}

pub(crate) fn pending<'a>(w: &'a World, agent: &str) -> Vec<&'a Wake> {
    wakes_of(w, agent)
        .into_iter()
        .filter(|x| x.status.is_pending())
        .collect()
}

/// Claims the agent's oldest queued wake on `wk1`; returns the run.
pub(crate) fn claim(w: &mut World, agent: &str, run_id: &str) -> Result<Run, DomainError> {
    let wake = pending(w, agent)
        .into_iter()
        .find(|x| x.status == WakeStatus::Queued)
        .map(|x| x.id.clone());
    let wake = wake.ok_or_else(|| DomainError::conflict("nothing queued"))?;
    match w.run(
        admin(),
        Command::AssignRun {
            wake_id: wake,
            run_id: run_id.into(),
            worker_id: "wk1".into(),
            token_hash: None,
        },
    )? {
        Outcome::Run(r) => Ok(r),
        other => Err(DomainError::conflict(format!("not assigned: {other:?}"))),
    }
}

pub(crate) fn finish(w: &mut World, run: &str) {
    w.ok(
        admin(),
        Command::FinishRun {
            run_id: run.into(),
            status: RunStatus::Succeeded,
            error: None,
            report: Default::default(),
        },
    );
}

pub(crate) fn comment(w: &mut World, actor: Actor, issue: &str, id: &str, body: &str) {
    w.ok(
        actor,
        Command::AddComment {
            issue_id: issue.into(),
            comment: NewComment {
                id: id.into(),
                body: body.into(),
            },
        },
    );
}

pub(crate) fn assigned_issue(w: &mut World, id: &str, agent: &str) -> Issue {
    w.issue(
        id,
        "c1",
        IssuePatch {
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some(agent.into())),
            ..Default::default()
        },
    )
}

/// Issue `parent`, assigned to a1, which has run once on it and has no wake pending, and its
/// open child `k1`.
pub(crate) fn parent_with_child(w: &mut World) {
    assigned_issue(w, "parent", "a1");
    let r = claim(w, "a1", "rp").expect("a1 claims its assignment wake");
    finish(w, &r.id);
    w.issue(
        "k1",
        "c1",
        IssuePatch {
            parent_id: Some(Some("parent".into())),
            ..Default::default()
        },
    );
}

/// The command that moves `issue` to `status` as it is (no comment).
pub(crate) fn status_update(issue: &str, status: IssueStatus) -> Command {
    Command::UpdateIssue {
        issue_id: issue.into(),
        patch: IssuePatch {
            status: Some(status),
            ..Default::default()
        },
        comment: None,
    }
}

/// The row a keyed write remembered its key in: what answers a repeat of it
/// ([`Outcome::Repeated`] names its key; the proposing node reads the row from `state.db`).
pub(crate) fn remembered(applied: &crate::state::Applied) -> crate::idempotency::Remembered {
    applied
        .changes
        .iter()
        .find_map(|c| match c {
            crate::state::Change::Remembered(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a keyed write remembers its key")
}
