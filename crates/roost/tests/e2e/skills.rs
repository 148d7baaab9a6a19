//! Company skills follow the agent: a skill added through
//! Paperclip's routes and assigned to an agent is in the agent's next run's work directory on
//! worker B, a different machine from the one it first ran on, where its runtime reads skills;
//! after it is unassigned the next run no longer finds it; each run says which workspace it ran
//! in, and the leader shows the lease it holds for that worker. Bad skill input is refused with a
//! clear error and changes nothing. Real `roost-worker`s with the `process` adapter, against a
//! 3-node cluster.

use reqwest::StatusCode;
use serde_json::json;

use roost_testkit::TestCluster;

use crate::support::str_field;
use crate::worker_process::{
    cluster_with_worker_leases, create_agent, start_named_worker, wake_and_wait_finished,
    worker_gone,
};

/// Prints every skill file it finds, then the skill's SKILL.md.
const AGENT: &str = r#"
echo "skills dir: $ROOST_SKILLS_DIR"
if [ -d "$ROOST_SKILLS_DIR" ]; then
  (cd "$ROOST_SKILLS_DIR" && find . -type f ! -name '.roost-*' | sort | sed 's/^/found /')
  cat "$ROOST_SKILLS_DIR/release-notes/SKILL.md" 2>/dev/null
fi
"#;

const SKILL_MD: &str =
    "---\nname: release-notes\ndescription: Write release notes from merged issues\n---\n\nUse scripts/notes.sh.\n";

async fn log_of(c: &TestCluster, run: &str) -> anyhow::Result<String> {
    let leader = c.leader().await?;
    let log = c
        .admin(leader)
        .get(&format!("/api/heartbeat-runs/{run}/log"))
        .await?
        .ok()?;
    Ok(log["content"].as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_skill_added_through_the_api_reaches_the_agent_on_another_worker_and_leaves_when_unassigned(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(3, 1500).await?;
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let leader = c.leader().await?;
    let admin = c.admin(leader);
    let cid = c.company_id.clone();
    let stop_a = start_named_worker(&c, "worker-a", dir_a.path(), c.grpc_addrs(), None).await?;
    let agent = create_agent(
        &c,
        "process",
        json!({ "command": "sh", "args": ["-c", AGENT] }),
    )
    .await?;

    // A first run on A, before the skill exists: nothing to find.
    let first = wake_and_wait_finished(&c, leader, &agent, &[]).await?;
    assert_eq!(first["workerId"], "worker-a", "{first}");
    let first_log = log_of(&c, &str_field(&first, "id")).await?;
    assert!(!first_log.contains("found "), "{first_log}");

    // Paperclip's create body, then a second file.
    let skill = admin
        .post(
            &format!("/api/companies/{cid}/skills"),
            json!({ "name": "Release notes", "markdown": SKILL_MD, "tagline": "ignored" }),
        )
        .await?
        .ok()?;
    assert_eq!(
        (skill["key"].as_str(), skill["version"].as_u64()),
        (Some("release-notes"), Some(1)),
        "{skill}"
    );
    let skill_id = str_field(&skill, "id");
    let file = admin
        .patch(
            &format!("/api/companies/{cid}/skills/{skill_id}/files"),
            json!({ "path": "scripts/notes.sh", "content": "#!/bin/sh\necho notes\n" }),
        )
        .await?
        .ok()?;
    assert_eq!(file["kind"], "script", "{file}");

    // Bad input changes nothing: a second skill with the same slug, a path out of the skill,
    // removing SKILL.md, an unknown key, an agent's own key writing skills.
    let dup = admin
        .post(
            &format!("/api/companies/{cid}/skills"),
            json!({ "name": "release notes" }),
        )
        .await?;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.body);
    let escape = admin
        .patch(
            &format!("/api/companies/{cid}/skills/{skill_id}/files"),
            json!({ "path": "../../.bashrc", "content": "x" }),
        )
        .await?;
    assert_eq!(escape.status, StatusCode::BAD_REQUEST, "{}", escape.body);
    assert!(
        escape.body["error"].as_str().unwrap_or("").contains("'..'"),
        "{}",
        escape.body
    );
    let no_md = admin
        .delete(&format!(
            "/api/companies/{cid}/skills/{skill_id}/files?path=SKILL.md"
        ))
        .await?;
    assert_eq!(no_md.status, StatusCode::BAD_REQUEST, "{}", no_md.body);
    let unknown = admin
        .post(
            &format!("/api/agents/{agent}/skills/sync"),
            json!({ "desiredSkills": ["nope"] }),
        )
        .await?;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.body);
    let after = admin
        .get(&format!("/api/companies/{cid}/skills/{skill_id}"))
        .await?
        .ok()?;
    assert_eq!(
        after["version"], 2,
        "only the script write made a version: {after}"
    );

    let snapshot = admin
        .post(
            &format!("/api/agents/{agent}/skills/sync"),
            json!({ "desiredSkills": ["release-notes"] }),
        )
        .await?
        .ok()?;
    assert_eq!(
        snapshot["desiredSkills"],
        json!(["release-notes"]),
        "{snapshot}"
    );
    assert_eq!(snapshot["entries"][0]["state"], "configured", "{snapshot}");

    // Worker A goes away; B, with an empty work directory, runs the agent next.
    drop(stop_a);
    worker_gone(&c, leader, "worker-a").await?;
    let _stop_b = start_named_worker(&c, "worker-b", dir_b.path(), c.grpc_addrs(), None).await?;
    let second = wake_and_wait_finished(&c, leader, &agent, &[str_field(&first, "id")]).await?;
    assert_eq!(second["workerId"], "worker-b", "{second}");
    assert_eq!(second["status"], "succeeded", "{second}");
    let log = log_of(&c, &str_field(&second, "id")).await?;
    for line in [
        "found ./release-notes/SKILL.md",
        "found ./release-notes/scripts/notes.sh",
        "description: Write release notes from merged issues",
    ] {
        assert!(log.contains(line), "missing {line:?} in:\n{log}");
    }
    let skills_dir = log
        .lines()
        .find_map(|l| l.strip_prefix("skills dir: "))
        .map(str::to_string)
        .unwrap_or_default();
    let workspace = second["workspacePath"].as_str().unwrap_or_default();
    assert!(
        std::path::Path::new(workspace).starts_with(dir_b.path().join("workspaces")),
        "the run says where it ran: {second}"
    );
    assert!(
        std::path::Path::new(&skills_dir).starts_with(workspace),
        "the skills are in worker B's workspace of the run: {skills_dir}"
    );

    // The leader holds worker B's lease (1.5 s, renewed by its lease renewals); other nodes do not.
    let leader = c.leader().await?;
    let workers = c.admin(leader).get("/api/workers").await?.ok()?;
    let b = workers
        .as_array()
        .and_then(|w| w.iter().find(|w| w["id"] == "worker-b"))
        .cloned()
        .unwrap_or_default();
    let left = b["leaseExpiresInMs"].as_u64().unwrap_or(u64::MAX);
    assert!(left <= 1500, "{workers}");
    let follower = c
        .ids()
        .into_iter()
        .find(|id| *id != leader)
        .unwrap_or(leader);
    let seen = c.admin(follower).get("/api/workers").await?.ok()?;
    assert!(
        seen.as_array()
            .is_some_and(|w| w.iter().all(|w| w["leaseExpiresInMs"].is_null())),
        "{seen}"
    );

    // Unassigned: the next run finds nothing and the directory is gone.
    admin
        .post(
            &format!("/api/agents/{agent}/skills/sync"),
            json!({ "desiredSkills": [] }),
        )
        .await?
        .ok()?;
    let before = [str_field(&first, "id"), str_field(&second, "id")];
    let third = wake_and_wait_finished(&c, leader, &agent, &before).await?;
    assert_eq!(third["workerId"], "worker-b", "{third}");
    let log = log_of(&c, &str_field(&third, "id")).await?;
    assert!(!log.contains("found "), "{log}");
    assert!(log.contains("removed release-notes"), "{log}");
    assert!(!std::path::Path::new(&skills_dir)
        .join("release-notes")
        .exists());
    Ok(())
}
