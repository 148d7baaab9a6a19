//! `roost agent chain <agent>`: an agent's chain of command, walked from the `reportsTo` of
//! its company's agent rows (the server's `chainOfCommand` rule is
//! `roost-core/src/rules/org.rs`). `--json` prints Paperclip's `chainOfCommand` shape.

use roost_core::Agent;
use serde::Serialize;

use super::output::{or_dash, table};

/// One manager in a chain (Paperclip's `chainOfCommand` entry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainLink {
    pub id: String,
    pub name: String,
    pub role: String,
    pub title: Option<String>,
}

/// `agent`'s managers among `colleagues`, its direct manager first. Stops at a manager not
/// listed or already seen, so it ends whatever the rows say.
pub fn chain_of(agent: &Agent, colleagues: &[Agent]) -> Vec<ChainLink> {
    let mut chain: Vec<ChainLink> = Vec::new();
    let mut cursor = agent.reports_to.as_deref();
    while let Some(id) = cursor {
        if id == agent.id || chain.iter().any(|l| l.id == id) {
            break;
        }
        let Some(manager) = colleagues.iter().find(|a| a.id == id) else {
            break;
        };
        chain.push(ChainLink {
            id: manager.id.clone(),
            name: manager.name.clone(),
            role: manager.role.clone(),
            title: manager.title.clone(),
        });
        cursor = manager.reports_to.as_deref();
    }
    chain
}

/// The chain as a table, the agent itself on the first line.
pub fn chain_text(agent: &Agent, chain: &[ChainLink]) -> String {
    let mut rows = vec![vec![
        "0".to_string(),
        agent.id.clone(),
        agent.role.clone(),
        or_dash(agent.title.as_deref()),
        agent.name.clone(),
    ]];
    for (level, link) in chain.iter().enumerate() {
        rows.push(vec![
            (level + 1).to_string(),
            link.id.clone(),
            link.role.clone(),
            or_dash(link.title.as_deref()),
            link.name.clone(),
        ]);
    }
    let mut text = table(&["LEVEL", "ID", "ROLE", "TITLE", "NAME"], &rows);
    if chain.is_empty() {
        text.push_str(&format!("{} reports to nobody.\n", agent.name));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, manager: Option<&str>) -> Agent {
        let json = serde_json::json!({
            "id": id, "companyId": "c", "name": format!("name-{id}"), "role": "engineer",
            "title": null, "status": "active", "pauseReason": null, "adapterType": "process",
            "adapterConfig": {}, "heartbeat": {}, "placementLabels": {},
            "createdAt": 1, "updatedAt": 1, "reportsTo": manager,
        });
        serde_json::from_value(json).expect("an agent row")
    }

    #[test]
    fn the_chain_runs_up_from_the_direct_manager_and_ends_on_a_loop() {
        let all = vec![
            agent("a", Some("b")),
            agent("b", Some("c")),
            agent("c", Some("b")),
        ];
        let chain = chain_of(&all[0], &all);
        let ids: Vec<&str> = chain.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["b", "c"]);
        let text = chain_text(&all[0], &chain);
        assert!(text.contains("name-c"), "{text}");
        let top = agent("t", None);
        assert!(chain_text(&top, &chain_of(&top, &all)).contains("reports to nobody"));
    }
}
