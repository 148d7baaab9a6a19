//! How `roost agent revisions` and `roost agent revision` show an agent's config revisions.

use roost_client::AgentConfigRevision;
use serde_json::Value;

use super::output::{fields, one_line, or_dash, table, when};

/// Who made a revision: the administrator's token name, or the agent.
fn author(r: &AgentConfigRevision) -> String {
    or_dash(
        r.created_by_user_id
            .as_deref()
            .or(r.created_by_agent_id.as_deref()),
    )
}

pub(super) fn revision_table(revisions: &[AgentConfigRevision]) -> String {
    let rows: Vec<Vec<String>> = revisions
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                when(r.created_at),
                r.source.clone(),
                author(r),
                r.changed_keys.join(","),
            ]
        })
        .collect();
    table(&["ID", "WHEN", "SOURCE", "BY", "CHANGED"], &rows)
}

/// A field of a configuration by its camelCase name, as compact JSON.
fn field(config: &impl serde::Serialize, key: &str) -> String {
    let value = serde_json::to_value(config).unwrap_or(Value::Null);
    one_line(&value.get(key).unwrap_or(&Value::Null).to_string())
}

/// The revision, then each changed field as `before -> after`.
pub(super) fn revision_text(r: &AgentConfigRevision) -> String {
    let mut text = fields(&[
        ("id", r.id.clone()),
        ("agent", r.agent_id.clone()),
        ("source", r.source.clone()),
        (
            "rolled back from",
            or_dash(r.rolled_back_from_revision_id.as_deref()),
        ),
        ("by", author(r)),
        ("when", when(r.created_at)),
    ]);
    for key in &r.changed_keys {
        text.push_str(&format!(
            "{key}: {} -> {}\n",
            field(&r.before_config, key),
            field(&r.after_config, key)
        ));
    }
    text
}
