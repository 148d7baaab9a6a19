//! Agent updates as the activity log records them, and secret `env` values across updates.

use serde_json::{json, Value};

use super::super::test_world::{admin, agent_actor, create_agent, World};
use crate::activity::ActivityEntry;
use crate::command::{AgentPatch, Command, Envelope, Outcome};
use crate::entity::{Agent, AgentPermissions};
use crate::error::DomainError;
use crate::state::Change;
use crate::time::Timestamp;

/// Applies an update of `a1` and returns the agent and the activity entry it wrote.
fn update(w: &mut World, patch: AgentPatch) -> (Agent, ActivityEntry) {
    w.index += 1;
    let env = Envelope {
        request_id: None,
        at: Timestamp(1_000 * w.index as i64),
        actor: admin(),
        command: Command::UpdateAgent {
            agent_id: "a1".into(),
            patch,
        },
        idempotency_key: None,
    };
    let applied = w.state.apply(w.index, &env);
    let agent = match applied.outcome {
        Ok(Outcome::Agent(agent)) => agent,
        Ok(_) => panic!("an update answers with the agent"),
        Err(e) => panic!("update refused: {e}"),
    };
    let entry = applied
        .changes
        .into_iter()
        .find_map(|c| match c {
            Change::Activity(entry) => Some(entry),
            _ => None,
        })
        .expect("an accepted update writes an activity entry");
    (agent, entry)
}

fn config_patch(config: Value) -> AgentPatch {
    AgentPatch {
        adapter_config: Some(config),
        ..Default::default()
    }
}

#[test]
fn activity_does_not_show_adapter_config_secrets() {
    let mut w = World::new();
    let (_, first) = update(
        &mut w,
        config_patch(json!({ "command": "old", "env": { "OPENAI_API_KEY": "sk-first" } })),
    );
    let (_, entry) = update(
        &mut w,
        AgentPatch {
            name: Some("renamed".into()),
            adapter_config: Some(json!({
                "command": "new-command",
                "env": { "OPENAI_API_KEY": { "type": "secret", "value": "sk-second" } },
            })),
            ..Default::default()
        },
    );
    for entry in [&first, &entry] {
        let text = entry.details.to_string();
        for value in ["sk-first", "sk-second", "new-command", "old"] {
            assert!(!text.contains(value), "{value} leaked into {text}");
        }
    }
    assert_eq!(
        entry.details["changed"],
        json!([
            "name",
            "adapterConfig.command",
            "adapterConfig.env.OPENAI_API_KEY"
        ])
    );
    assert_eq!(entry.details["name"], "renamed", "harmless values stay");
    assert_eq!(
        first.details["changed"],
        json!(["adapterConfig.command", "adapterConfig.env"])
    );
}

#[test]
fn an_update_that_changes_nothing_names_nothing() {
    let mut w = World::new();
    let config = json!({ "command": "same", "env": { "K": { "type": "secret", "value": "v" } } });
    update(&mut w, config_patch(config.clone()));
    let (_, entry) = update(
        &mut w,
        AgentPatch {
            name: Some("a1".into()),
            adapter_config: Some(
                json!({ "command": "same", "env": { "K": { "type": "secret" } } }),
            ),
            ..Default::default()
        },
    );
    assert_eq!(entry.details["changed"], json!([]));
}

#[test]
fn a_patch_sending_back_a_redacted_secret_keeps_the_stored_value() {
    let mut w = World::new();
    update(
        &mut w,
        config_patch(json!({ "env": {
            "TOKEN": { "type": "secret", "value": "t0ken" },
            "PLAIN": "p",
        }})),
    );
    let (agent, _) = update(
        &mut w,
        config_patch(json!({ "model": "m2", "env": {
            "TOKEN": { "type": "secret", "redacted": true },
            "PLAIN": "q",
        }})),
    );
    assert_eq!(
        agent.adapter_config,
        json!({ "model": "m2", "env": {
            "TOKEN": { "type": "secret", "value": "t0ken" },
            "PLAIN": "q",
        }})
    );
}

#[test]
fn a_redacted_secret_with_nothing_stored_is_refused_and_changes_nothing() {
    let mut w = World::new();
    let before = w.fingerprint();
    let refused = w.run(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: config_patch(
                json!({ "env": { "NEW": { "type": "secret", "redacted": true } } }),
            ),
        },
    );
    assert!(
        matches!(&refused, Err(DomainError::Invalid { field, .. }) if field == "adapterConfig.env.NEW"),
        "{refused:?}"
    );
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn permissions_are_granted_by_a_patch_and_old_rows_read_without_them() {
    let mut w = World::new();
    let grant = AgentPermissions {
        read_company_run_logs: true,
        ..Default::default()
    };
    let (agent, entry) = update(
        &mut w,
        AgentPatch {
            permissions: Some(grant),
            ..Default::default()
        },
    );
    assert_eq!(agent.permissions, grant);
    assert_eq!(entry.details["changed"], json!(["permissions"]));
    let mut row = serde_json::to_value(&agent).expect("agent JSON");
    row.as_object_mut().map(|o| o.remove("permissions"));
    let old: Agent = serde_json::from_value(row).expect("a row from before permissions");
    assert!(old.permissions.grants_nothing());
    assert!(
        serde_json::to_value(&old)
            .expect("agent JSON")
            .get("permissions")
            .is_none(),
        "a row granting nothing keeps its old bytes"
    );
    let old_patch: AgentPatch = serde_json::from_value(json!({ "name": "x" })).expect("old entry");
    assert_eq!(old_patch.permissions, None);
}

fn grant_hiring(to: &str, can: bool) -> Command {
    Command::UpdateAgent {
        agent_id: to.into(),
        patch: AgentPatch {
            can_create_agents: Some(can),
            ..Default::default()
        },
    }
}

fn forbidden(result: &Result<Outcome, DomainError>, why: &str) -> bool {
    matches!(result, Err(DomainError::Forbidden { message }) if message.contains(why))
}

/// Paperclip's `PATCH /api/agents/{id}/permissions`: the company's ceo agent grants and
/// withdraws `canCreateAgents` of another agent, over the grants it has; any other agent, any
/// other change, and its own grants stay an administrator's.
#[test]
fn a_ceo_agent_grants_hiring_to_others_and_nothing_else() {
    let mut w = World::new();
    let as_a1 = || agent_actor("a1", "c1", None);
    // a2 may read every run's logs: a grant of hiring keeps that.
    let logs = AgentPermissions {
        read_company_run_logs: true,
        ..Default::default()
    };
    w.patch_agent(
        "a2",
        AgentPatch {
            permissions: Some(logs),
            ..Default::default()
        },
    );
    // Not yet the ceo: refused, and nothing changes.
    let before = w.fingerprint();
    let refused = w.run(as_a1(), grant_hiring("a2", true));
    assert!(forbidden(&refused, "only an administrator"), "{refused:?}");
    assert_eq!(w.fingerprint(), before);
    w.make_ceo("a1");
    match w.run(as_a1(), grant_hiring("a2", true)) {
        Ok(Outcome::Agent(a)) => assert_eq!(
            a.permissions,
            AgentPermissions {
                can_create_agents: true,
                ..logs
            }
        ),
        other => panic!("the ceo's grant was refused: {other:?}"),
    }
    match w.run(as_a1(), grant_hiring("a2", false)) {
        Ok(Outcome::Agent(a)) => assert_eq!(a.permissions, logs),
        other => panic!("the ceo's withdrawal was refused: {other:?}"),
    }
    // Anything beyond canCreateAgents stays an administrator's, and so do its own grants.
    let before = w.fingerprint();
    let whole = Command::UpdateAgent {
        agent_id: "a2".into(),
        patch: AgentPatch {
            permissions: Some(AgentPermissions::default()),
            ..Default::default()
        },
    };
    let rename = Command::UpdateAgent {
        agent_id: "a2".into(),
        patch: AgentPatch {
            name: Some("renamed".into()),
            can_create_agents: Some(true),
            ..Default::default()
        },
    };
    for command in [whole, rename] {
        let refused = w.run(as_a1(), command);
        assert!(
            forbidden(&refused, "only grant or withdraw canCreateAgents"),
            "{refused:?}"
        );
    }
    let own = w.run(as_a1(), grant_hiring("a1", true));
    assert!(forbidden(&own, "its own grants"), "{own:?}");
    assert_eq!(w.fingerprint(), before);
    // Another company's agent is not found, whoever asks.
    let refused = w.run(as_a1(), grant_hiring("b1", true));
    assert!(
        matches!(&refused, Err(DomainError::NotFound { .. })),
        "{refused:?}"
    );
}

/// A ceo's grant is fenced on its run like every agent's write: a run that ended refuses it.
#[test]
fn a_ceo_grant_from_an_ended_run_is_refused() {
    let mut w = World::new();
    w.make_ceo("a1");
    w.start_run("r1", "a1");
    super::super::test_world::finish(&mut w, "r1");
    let before = w.fingerprint();
    let refused = w.run(
        agent_actor("a1", "c1", Some("r1")),
        grant_hiring("a2", true),
    );
    assert!(
        matches!(&refused, Err(DomainError::StaleRun { .. })),
        "{refused:?}"
    );
    assert_eq!(w.fingerprint(), before);
}

/// A ceo is made by an administrator: an agent that may hire cannot hire one (whatever the
/// role's case), which would hand it the ceo's grants.
#[test]
fn an_agent_that_may_hire_cannot_hire_a_ceo() {
    let mut w = World::new();
    w.ok(admin(), grant_hiring("a1", true));
    let before = w.fingerprint();
    let mut hire = create_agent("boss", "c1");
    if let Command::CreateAgent { role, .. } = &mut hire {
        *role = " CEO ".into();
    }
    let refused = w.run(
        agent_actor("a1", "c1", None),
        Command::HireAgent {
            approval_id: "ap".into(),
            agent: Box::new(hire),
            payload: json!({}),
        },
    );
    assert!(
        forbidden(&refused, "only an administrator makes"),
        "{refused:?}"
    );
    assert_eq!(w.fingerprint(), before);
}

/// A ceo terminated (or one whose hire waits for approval) exercises no grant, whatever its
/// key can still authenticate; the role counts whatever its case.
#[test]
fn a_terminated_ceo_grants_nothing() {
    let mut w = World::new();
    w.patch_agent(
        "a1",
        AgentPatch {
            role: Some("CEO".into()),
            ..Default::default()
        },
    );
    let as_a1 = || agent_actor("a1", "c1", None);
    assert!(w.run(as_a1(), grant_hiring("a2", true)).is_ok());
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a1".into(),
        },
    );
    let before = w.fingerprint();
    let refused = w.run(as_a1(), grant_hiring("a2", false));
    assert!(forbidden(&refused, "only an administrator"), "{refused:?}");
    assert_eq!(w.fingerprint(), before);
}
