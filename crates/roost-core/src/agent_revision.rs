//! An agent's configuration history (Paperclip's agent config revisions): every update that
//! changes what the agent runs with records its configuration before and after, and a rollback
//! applies an earlier one's `afterConfig` as a new update, so history only grows.
//!
//! A revision's `adapterConfig` is kept redacted (`adapter_config::redact`): no secret enters a
//! history that outlives a key's rotation. A rollback sends the redacted marker back, which keeps
//! the value the agent holds for that key now (`adapter_config::resolve`). Revisions live only
//! in `state.db`, read on demand, as document revisions do.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::adapter_config;
use crate::command::AgentPatch;
use crate::entity::{AdapterType, Agent, HeartbeatPolicy, SessionRotation};
use crate::loop_breaker::LoopBreaker;
use crate::time::Timestamp;

/// Paperclip's `runtimeConfig`, of which Roost keeps the heartbeat policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeConfig {
    pub heartbeat: HeartbeatPolicy,
}

/// What an agent runs with, as a revision records it: the fields an update may change, but not
/// its grants (`permissions`, changed by their own route) nor its status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    pub name: String,
    pub role: String,
    pub title: Option<String>,
    pub reports_to: Option<String>,
    pub adapter_type: AdapterType,
    /// Redacted ([`adapter_config::redact`]).
    pub adapter_config: serde_json::Value,
    pub runtime_config: RuntimeConfig,
    pub placement_labels: BTreeMap<String, String>,
    pub session_rotation: SessionRotation,
    pub loop_breaker: LoopBreaker,
    pub home_max_bytes: u64,
}

impl AgentConfig {
    /// `agent`'s configuration, its secrets redacted.
    pub fn of(agent: &Agent) -> AgentConfig {
        AgentConfig {
            name: agent.name.clone(),
            role: agent.role.clone(),
            title: agent.title.clone(),
            reports_to: agent.reports_to.clone(),
            adapter_type: agent.adapter_type,
            adapter_config: adapter_config::redact(&agent.adapter_config),
            runtime_config: RuntimeConfig {
                heartbeat: agent.heartbeat.clone(),
            },
            placement_labels: agent.placement_labels.clone(),
            session_rotation: agent.session_rotation,
            loop_breaker: agent.loop_breaker,
            home_max_bytes: agent.home_max_bytes,
        }
    }

    /// The names of the fields that differ from `before`, in Paperclip's camelCase.
    pub fn changed_since(&self, before: &AgentConfig) -> Vec<String> {
        let mut changed = Vec::new();
        macro_rules! compare {
            ($($name:literal => $field:ident),+) => {$(
                if self.$field != before.$field {
                    changed.push($name.to_string());
                }
            )+};
        }
        compare!(
            "name" => name,
            "role" => role,
            "title" => title,
            "reportsTo" => reports_to,
            "adapterType" => adapter_type,
            "adapterConfig" => adapter_config,
            "runtimeConfig" => runtime_config,
            "placementLabels" => placement_labels,
            "sessionRotation" => session_rotation,
            "loopBreaker" => loop_breaker,
            "homeMaxBytes" => home_max_bytes
        );
        changed
    }

    /// The update that puts this configuration back over `current`, recorded as rolled back
    /// from `revision_id`: only the fields that differ, so one that did not change (a manager
    /// terminated since, a name) is not checked again.
    pub fn into_patch(self, current: &AgentConfig, revision_id: &str) -> AgentPatch {
        fn differs<T: PartialEq>(value: T, now: &T) -> Option<T> {
            (value != *now).then_some(value)
        }
        AgentPatch {
            name: differs(self.name, &current.name),
            role: differs(self.role, &current.role),
            title: differs(self.title, &current.title),
            reports_to: differs(self.reports_to, &current.reports_to),
            adapter_type: differs(self.adapter_type, &current.adapter_type),
            adapter_config: differs(self.adapter_config, &current.adapter_config),
            heartbeat: differs(self.runtime_config, &current.runtime_config).map(|r| r.heartbeat),
            placement_labels: differs(self.placement_labels, &current.placement_labels),
            session_rotation: differs(self.session_rotation, &current.session_rotation),
            loop_breaker: differs(self.loop_breaker, &current.loop_breaker),
            home_max_bytes: differs(self.home_max_bytes, &current.home_max_bytes),
            rolled_back_from: Some(revision_id.to_string()),
            ..AgentPatch::default()
        }
    }

    /// The secret `env` keys this configuration shows redacted: a rollback to it keeps the
    /// value the agent holds for each, so each must still be held.
    pub fn redacted_secrets(&self) -> impl Iterator<Item = &str> {
        self.adapter_config
            .get("env")
            .and_then(serde_json::Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, v)| **v == adapter_config::redacted_secret())
            .map(|(k, _)| k.as_str())
    }
}

/// One recorded change of an agent's configuration, in Paperclip's shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfigRevision {
    pub id: String,
    pub company_id: String,
    pub agent_id: String,
    /// The slot of the update that made it: revisions of an agent in the order they were made.
    pub seq: u64,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    /// `patch`, or `rollback` for a rollback's update.
    pub source: String,
    pub rolled_back_from_revision_id: Option<String>,
    pub changed_keys: Vec<String>,
    pub before_config: AgentConfig,
    pub after_config: AgentConfig,
    pub created_at: Timestamp,
}

/// The revision an update from `before` to `after` records, or none when the configuration
/// did not change (a grant, or a patch that sends the values the agent has).
pub(crate) fn record(
    ctx: &crate::rules::Ctx<'_>,
    before: &Agent,
    after: &Agent,
    patch: &AgentPatch,
) -> Option<AgentConfigRevision> {
    let (before_config, after_config) = (AgentConfig::of(before), AgentConfig::of(after));
    let changed_keys = after_config.changed_since(&before_config);
    if changed_keys.is_empty() {
        return None;
    }
    Some(AgentConfigRevision {
        id: format!("rev-{}", ctx.slot),
        company_id: after.company_id.clone(),
        agent_id: after.id.clone(),
        seq: ctx.slot,
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        source: if patch.rolled_back_from.is_some() {
            "rollback"
        } else {
            "patch"
        }
        .to_string(),
        rolled_back_from_revision_id: patch.rolled_back_from.clone(),
        changed_keys,
        before_config,
        after_config,
        created_at: ctx.now(),
    })
}
