//! Config revisions (`agent_revision.rs`): what an update records, and what a rollback puts back.

use serde_json::json;

use super::test_world::{admin, agent_actor, World};
use crate::adapter_config::redacted_secret;
use crate::agent_revision::{AgentConfig, AgentConfigRevision};
use crate::command::{AgentPatch, Command, Outcome};
use crate::entity::Agent;
use crate::state::Change;

/// Applies an administrator's update of `a1`: the agent, and the revision it recorded if any.
fn update(w: &mut World, patch: AgentPatch) -> (Agent, Option<AgentConfigRevision>) {
    let applied = w.applied(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch,
        },
    );
    let agent = match applied.outcome {
        Ok(Outcome::Agent(agent)) => agent,
        other => panic!("update refused or misanswered: {other:?}"),
    };
    let mut revisions = applied.changes.into_iter().filter_map(|c| match c {
        Change::AgentRevision(r) => Some(*r),
        _ => None,
    });
    let revision = revisions.next();
    assert!(
        revisions.next().is_none(),
        "one revision per update at most"
    );
    (agent, revision)
}

fn configured(command: &str, key: &str) -> AgentPatch {
    AgentPatch {
        adapter_config: Some(json!({
            "command": command,
            "env": { "API_KEY": { "type": "secret", "value": key } },
        })),
        ..AgentPatch::default()
    }
}

#[test]
fn an_update_records_what_it_changed_and_no_secret() {
    let mut w = World::new();
    let (_, revision) = update(
        &mut w,
        AgentPatch {
            name: Some("renamed".into()),
            ..configured("run-agent", "sk-first")
        },
    );
    let revision = revision.expect("a configuration change is recorded");
    assert_eq!(revision.agent_id, "a1");
    assert_eq!(revision.company_id, "c1");
    assert_eq!(revision.source, "patch");
    assert_eq!(revision.created_by_user_id.as_deref(), Some("admin"));
    assert_eq!(revision.created_by_agent_id, None);
    assert_eq!(revision.changed_keys, ["name", "adapterConfig"]);
    assert_eq!(revision.before_config.name, "a1");
    assert_eq!(revision.after_config.name, "renamed");
    assert_eq!(
        revision.after_config.adapter_config["env"]["API_KEY"],
        redacted_secret()
    );
    let row = serde_json::to_string(&revision).expect("a revision serializes");
    assert!(!row.contains("sk-first"), "{row}");

    // The same values again, and a grant: no configuration changed, nothing recorded.
    let (_, same) = update(
        &mut w,
        AgentPatch {
            name: Some("renamed".into()),
            ..AgentPatch::default()
        },
    );
    assert_eq!(same, None);
    let (_, grant) = update(
        &mut w,
        AgentPatch {
            can_create_agents: Some(true),
            ..AgentPatch::default()
        },
    );
    assert_eq!(grant, None);
    // Each revision has an id of its own, in the order they were made.
    let (_, next) = update(&mut w, configured("run-agent --fast", "sk-first"));
    let next = next.expect("recorded");
    assert_ne!(next.id, revision.id);
    assert!(next.seq > revision.seq);
}

#[test]
fn a_rollback_puts_back_the_configuration_and_keeps_the_secret_held_now() {
    let mut w = World::new();
    let (_, first) = update(&mut w, configured("old", "sk-first"));
    let first = first.expect("recorded");
    let (_, second) = update(
        &mut w,
        AgentPatch {
            title: Some(Some("Engineer".into())),
            ..configured("new", "sk-rotated")
        },
    );
    second.expect("recorded");

    let now = AgentConfig::of(&w.state.agents["a1"]);
    let (agent, rollback) = update(
        &mut w,
        first.after_config.clone().into_patch(&now, &first.id),
    );
    assert_eq!(agent.adapter_config["command"], "old");
    assert_eq!(agent.title, None, "the title it had then");
    assert_eq!(
        agent.adapter_config["env"]["API_KEY"],
        json!({ "type": "secret", "value": "sk-rotated" }),
        "a redacted secret keeps the value held now, not the one it had"
    );
    let rollback = rollback.expect("a rollback is recorded too");
    assert_eq!(rollback.source, "rollback");
    assert_eq!(
        rollback.rolled_back_from_revision_id.as_deref(),
        Some(first.id.as_str())
    );
    assert_eq!(rollback.changed_keys, ["title", "adapterConfig"]);
    assert_eq!(rollback.after_config, first.after_config);
}

#[test]
fn an_agent_key_cannot_roll_back_a_configuration() {
    let mut w = World::new();
    let (_, first) = update(&mut w, configured("old", "sk"));
    let now = AgentConfig::of(&w.state.agents["a1"]);
    let patch = first
        .expect("recorded")
        .before_config
        .into_patch(&now, "rev-1");
    let err = w
        .run(
            agent_actor("a1", "c1", None),
            Command::UpdateAgent {
                agent_id: "a1".into(),
                patch,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
}

/// Bug (review of the first version): a rollback sent every field, so a manager terminated
/// since the revision (a termination leaves its reports' `reportsTo`) was checked again and the
/// rollback refused, though it changed no reporting line.
#[test]
fn a_rollback_does_not_recheck_a_manager_terminated_since() {
    let mut w = World::new();
    let (_, first) = update(
        &mut w,
        AgentPatch {
            reports_to: Some(Some("a2".into())),
            ..configured("old", "sk")
        },
    );
    let first = first.expect("recorded");
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a2".into(),
        },
    );
    update(&mut w, configured("new", "sk"));
    let now = AgentConfig::of(&w.state.agents["a1"]);
    let patch = first.after_config.clone().into_patch(&now, &first.id);
    assert_eq!(patch.reports_to, None, "an unchanged manager is not sent");
    let (agent, rollback) = update(&mut w, patch);
    assert_eq!(agent.adapter_config["command"], "old");
    assert_eq!(agent.reports_to.as_deref(), Some("a2"));
    assert_eq!(rollback.expect("recorded").changed_keys, ["adapterConfig"]);
}
