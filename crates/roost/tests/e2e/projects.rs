//! Goals and projects through the REST API with Paperclip's bodies:
//! issues carry `projectId` and `goalId` (and Paperclip's other fields are accepted), the
//! heartbeat context names the project and goal, and a paused project holds its issues' runs.

use serde_json::json;

use roost_testkit::TestNode;

use crate::support::*;

#[tokio::test]
async fn issues_carry_projects_and_goals_and_a_paused_project_holds_their_runs(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let (agent_id, key) = node.agent("lead").await?;
    let agent = node.http().with_token(&key);
    let goal = agent
        .post(
            &format!("/api/companies/{cid}/goals"),
            json!({ "title": "Ship 1.0", "level": "company", "status": "active" }),
        )
        .await?;
    assert_eq!(goal.status.as_u16(), 201, "{}", goal.body);
    let goal_id = str_field(&goal.body, "id");
    // Paperclip's project body, with fields Roost does not use.
    let project = agent
        .post(
            &format!("/api/companies/{cid}/projects"),
            json!({ "name": "CLI", "status": "in_progress", "leadAgentId": agent_id,
                    "goalIds": [goal_id], "icon": "rocket", "color": "#ff0000",
                    "env": null, "archivedAt": null }),
        )
        .await?;
    assert_eq!(project.status.as_u16(), 201, "{}", project.body);
    let project_id = str_field(&project.body, "id");
    assert_eq!(project.body["goalId"], goal_id.as_str(), "{}", project.body);
    let bad = agent
        .post(
            &format!("/api/companies/{cid}/projects"),
            json!({ "name": "x", "leadAgentId": "nobody" }),
        )
        .await?;
    assert_eq!(bad.status.as_u16(), 400, "{}", bad.body);
    assert!(bad.body["error"]
        .as_str()
        .unwrap_or_default()
        .contains("not an agent of this company"));

    // An issue with projectId, goalId and fields Roost ignores, assigned by an operator (an
    // agent's own assignment would not wake it).
    let issue = node
        .admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "Write the docs", "status": "todo", "assigneeAgentId": agent_id,
                    "projectId": project_id, "goalId": goal_id, "labelIds": [],
                    "projectWorkspaceId": null }),
        )
        .await?;
    assert_eq!(issue.status.as_u16(), 201, "{}", issue.body);
    let issue_id = str_field(&issue.body, "id");
    assert_eq!(issue.body["projectId"], project_id.as_str());
    // Paperclip's fields Roost does not use are kept and shown back as sent; `labelIds`, a
    // company's labels (`labels.rs`), too.
    let label = node
        .admin
        .post(
            &format!("/api/companies/{}/labels", node.company_id),
            json!({ "name": "cli", "color": "#000000" }),
        )
        .await?
        .ok()?;
    let label_id = str_field(&label, "id");
    let kept = node
        .admin
        .patch(
            &format!("/api/issues/{issue_id}"),
            json!({ "labelIds": [label_id], "executionPolicy": { "mode": "review" } }),
        )
        .await?
        .ok()?;
    assert_eq!(kept["labelIds"], json!([label_id]), "{kept}");
    assert_eq!(kept["executionPolicy"]["mode"], "review", "{kept}");
    let read = node
        .admin
        .get(&format!("/api/issues/{issue_id}"))
        .await?
        .ok()?;
    assert_eq!(read["labelIds"], json!([label_id]), "{read}");
    let removed = node
        .admin
        .patch(
            &format!("/api/issues/{issue_id}"),
            json!({ "labelIds": null }),
        )
        .await?
        .ok()?;
    assert_eq!(removed["labelIds"], json!([]), "{removed}");
    let context = agent
        .get(&format!("/api/issues/{issue_id}/heartbeat-context"))
        .await?
        .ok()?;
    assert_eq!(context["project"]["name"], "CLI", "{context}");
    assert_eq!(context["goal"]["title"], "Ship 1.0", "{context}");

    // Paused: the issue's wake waits, and says why; resumed, it does not.
    let paused = node
        .admin
        .post(
            &format!("/api/projects/{project_id}/pause"),
            json!({ "reason": "waiting for legal" }),
        )
        .await?
        .ok()?;
    assert!(paused["pausedAt"].is_string(), "{paused}");
    let wakes = node
        .admin
        .get(&format!("/api/companies/{cid}/wakes?agentId={agent_id}"))
        .await?
        .ok()?;
    let blocked = wakes[0]["blockedBy"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        blocked.contains("project CLI is paused: waiting for legal"),
        "{wakes}"
    );
    node.admin
        .post(&format!("/api/projects/{project_id}/resume"), json!({}))
        .await?
        .ok()?;
    let wakes = node
        .admin
        .get(&format!("/api/companies/{cid}/wakes?agentId={agent_id}"))
        .await?
        .ok()?;
    let blocked = wakes[0]["blockedBy"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!blocked.contains("paused"), "{wakes}");

    // Deleting the goal detaches it; agents do not delete.
    let by_agent = agent.delete(&format!("/api/goals/{goal_id}")).await?;
    assert_eq!(by_agent.status.as_u16(), 403, "{}", by_agent.body);
    node.admin
        .delete(&format!("/api/goals/{goal_id}"))
        .await?
        .ok()?;
    let issue = node
        .admin
        .get(&format!("/api/issues/{issue_id}"))
        .await?
        .ok()?;
    assert!(issue["goalId"].is_null(), "{issue}");
    Ok(())
}
