//! A small in-memory world for the transition tests.

use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::state::State;
use crate::time::Timestamp;

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
            w.ok(
                admin(),
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
                },
            );
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
        self.index += 1;
        let env = Envelope {
            at: Timestamp(at_ms),
            actor,
            command,
            idempotency_key: None,
        };
        self.state.apply(self.index, &env).outcome
    }

    pub(crate) fn run(&mut self, actor: Actor, command: Command) -> Result<Outcome, DomainError> {
        self.index += 1;
        let env = Envelope {
            at: Timestamp(1_000 * self.index as i64),
            actor,
            command,
            idempotency_key: None,
        };
        self.state.apply(self.index, &env).outcome
    }

    pub(crate) fn ok(&mut self, actor: Actor, command: Command) -> Outcome {
        match self.run(actor, command.clone()) {
            Ok(o) => o,
            Err(e) => panic!("{command:?} failed: {e:?}"),
        }
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
            Outcome::Issue { issue, .. } => issue,
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

    /// Everything but the activity log, to prove a refusal changed nothing.
    pub(crate) fn fingerprint(&self) -> String {
        format!(
            "{:?}{:?}{:?}{:?}{}",
            self.state.companies,
            self.state.agents,
            self.state.issues,
            self.state.runs,
            self.state.activity_seq
        )
    }
}

pub(crate) fn token_of(outcome: Outcome) -> u64 {
    match outcome {
        Outcome::Issue { issue, .. } => issue.checkout.expect("checked out").token,
        other => panic!("unexpected {other:?}"),
    }
}
