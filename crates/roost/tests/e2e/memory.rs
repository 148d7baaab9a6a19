//! Agent memory over REST: written through one node of a 3-node cluster and read on
//! another; a dead run's entry refused `stale_run` with nothing stored; lost updates refused;
//! caps; who may read whose memory; and `roost memory show|log|edit|history --json`.

use serde_json::{json, Value};

use roost_testkit::{TestCluster, TestNode};

use crate::support::{agent_with_key, one_cluster_at_a_time, roost_binary, str_field};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_written_on_one_node_is_read_on_another_and_a_dead_runs_entry_is_refused(
) -> anyhow::Result<()> {
    let _one = one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let leader = c.leader().await?;
    let others: Vec<u64> = c.ids().into_iter().filter(|id| *id != leader).collect();
    let (writer, reader) = (others[0], others[1]);
    let cid = c.company_id.clone();

    // Everything is written through a follower (forwarded to the leader).
    let admin_w = c.admin(writer);
    let (agent, key) = agent_with_key(&admin_w, &cid, "rememberer").await?;
    let run = admin_w
        .post(&format!("/api/agents/{agent}/runs"), json!({}))
        .await?
        .ok()?;
    let run = str_field(&run, "id");
    let as_run = c.http(writer).with_token(&key).with_run(&run);
    let entry = as_run
        .post(
            "/api/agents/me/memory/entries",
            json!({
                "what": "fix the flaky build",
                "did": "pinned the toolchain",
                "next": "watch the nightly",
                "errors": ["error[E0433]: failed to resolve\n --> src/main.rs:3:5"],
            }),
        )
        .await?;
    assert_eq!(entry.status, 201, "{}", entry.body);
    assert_eq!(entry.body["runId"], run.as_str());
    let live = as_run.put("/api/agents/me/memory/live",
        json!({
            "currentTask": { "doing": "fixing the build", "last": ["read the log"], "next": ["rerun CI"] },
            "coordinates": { "branch": "fix-build" },
        }),
    )
    .await?
    .ok()?;
    assert!(live["currentTaskUpdatedAt"].is_string(), "{live}");
    let doc_path = format!("/api/agents/{agent}/memory/documents/MEMORY.md");
    let saved = as_run
        .put(
            &doc_path,
            json!({ "content": "# Memory\nThe build needs rust 1.85.\n", "expectedVersion": 0 }),
        )
        .await?
        .ok()?;
    assert_eq!(saved["version"], 1);
    // An operator who also read version 0 would overwrite it: refused, with a sentence.
    let lost = admin_w
        .put(
            &doc_path,
            json!({ "content": "stale edit", "expectedVersion": 0 }),
        )
        .await?;
    assert_eq!((lost.status.as_u16(), lost.code()), (409, "conflict"));
    let sentence = lost.body["error"].as_str().unwrap_or_default();
    assert!(sentence.contains("version 1, not 0"), "{sentence}");
    admin_w
        .put(
            &format!("/api/companies/{cid}/memory/documents/STATE.md"),
            json!({ "content": "CI runs on main.", "expectedVersion": 0 }),
        )
        .await?
        .ok()?;

    // Read on another node, as the agent itself.
    let as_agent_r = c.http(reader).with_token(&key);
    let summary = as_agent_r
        .get(&format!("/api/agents/{agent}/memory"))
        .await?
        .ok()?;
    assert_eq!(summary["entryCount"], 1, "{summary}");
    assert_eq!(summary["recovery"]["door"], "resume", "{summary}");
    assert!(summary["recovery"]["confidence"].as_f64().unwrap_or(0.0) > 0.9);
    assert_eq!(summary["documents"][0]["name"], "MEMORY.md");
    assert_eq!(summary["documents"][0]["version"], 1);
    assert_eq!(summary["live"]["currentTask"]["doing"], "fixing the build");
    assert!(summary["bytesUsed"].as_u64().unwrap_or(0) > 0);
    let own = as_agent_r.get("/api/agents/me/memory").await?.ok()?;
    assert_eq!(own["agentId"], agent.as_str());
    let entries = as_agent_r
        .get(&format!("/api/agents/{agent}/memory/entries?limit=10"))
        .await?
        .ok()?;
    assert_eq!(entries[0]["what"], "fix the flaky build");
    assert_eq!(
        entries[0]["errors"][0],
        "error[E0433]: failed to resolve\n --> src/main.rs:3:5"
    );
    let doc = as_agent_r.get(&doc_path).await?.ok()?;
    assert_eq!(doc["content"], "# Memory\nThe build needs rust 1.85.\n");
    let history = as_agent_r.get(&format!("{doc_path}/history")).await?.ok()?;
    assert_eq!(history.as_array().map(Vec::len), Some(1));
    let shared = as_agent_r
        .get(&format!("/api/companies/{cid}/memory/documents/STATE.md"))
        .await?
        .ok()?;
    assert_eq!(shared["content"], "CI runs on main.");

    // The run ends; a late entry of it is refused and nothing of it appears anywhere.
    admin_w
        .post(
            &format!("/api/heartbeat-runs/{run}/finish"),
            json!({ "status": "succeeded" }),
        )
        .await?
        .ok()?;
    let late = as_run
        .post(
            "/api/agents/me/memory/entries",
            json!({ "what": "written after the run ended" }),
        )
        .await?;
    assert_eq!((late.status.as_u16(), late.code()), (409, "stale_run"));
    let late_live = as_run
        .put(
            "/api/agents/me/memory/live",
            json!({ "currentTask": { "doing": "late" } }),
        )
        .await?;
    assert_eq!(late_live.code(), "stale_run", "{}", late_live.body);
    c.converged(roost_testkit::TestNode::default_timeout())
        .await?;
    for id in c.ids() {
        let entries = c
            .admin(id)
            .get(&format!("/api/agents/{agent}/memory/entries"))
            .await?
            .ok()?;
        assert_eq!(entries.as_array().map(Vec::len), Some(1), "node {id}");
        let summary = c
            .admin(id)
            .get(&format!("/api/agents/{agent}/memory"))
            .await?
            .ok()?;
        assert_eq!(summary["live"]["currentTask"]["doing"], "fixing the build");
    }
    c.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_is_the_agents_own_capped_and_kept_after_termination() -> anyhow::Result<()> {
    let mut node = TestNode::start().await?;
    let admin = node.admin.clone();
    let admin = &admin;
    let (agent, key) = node.agent("keeper").await?;
    let (_, peer_key) = node.agent("peer").await?;
    let run = node.start_run(&agent).await?;
    let as_run = node.http().with_token(&key).with_run(&run);

    // Caps: one entry, one document.
    let big = as_run
        .post(
            "/api/agents/me/memory/entries",
            json!({ "what": "x".repeat(roost_core::limits::MAX_MEMORY_ENTRY_BYTES + 1) }),
        )
        .await?;
    assert_eq!((big.status.as_u16(), big.code()), (413, "too_large"));
    assert!(
        big.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("at most 8192 bytes"),
        "{}",
        big.body
    );
    let doc_path = format!("/api/agents/{agent}/memory/documents/STATE.md");
    let content = "y".repeat(roost_core::limits::MAX_MEMORY_DOCUMENT_BYTES + 1);
    let big = as_run
        .put(
            &doc_path,
            json!({ "content": content, "expectedVersion": 0 }),
        )
        .await?;
    assert_eq!((big.status.as_u16(), big.code()), (413, "too_large"));
    // Bad input: a 4xx with a sentence.
    let no_run = node
        .http()
        .with_token(&key)
        .post("/api/agents/me/memory/entries", json!({ "what": "w" }))
        .await?;
    assert_eq!(no_run.status, 400, "{}", no_run.body);
    assert!(no_run.body["error"]
        .as_str()
        .unwrap_or_default()
        .contains("run"));
    let bad_name = as_run
        .put(
            &format!("/api/agents/{agent}/memory/documents/NOTES.md"),
            json!({ "content": "x", "expectedVersion": 0 }),
        )
        .await?;
    assert_eq!(bad_name.status, 400, "{}", bad_name.body);
    let no_version = as_run.put(&doc_path, json!({ "content": "x" })).await?;
    assert_eq!(no_version.status, 400, "{}", no_version.body);

    as_run
        .post("/api/agents/me/memory/entries", json!({ "what": "mine" }))
        .await?
        .ok()?;
    // Another agent of the company: refused; another company's agent: not found.
    let as_peer = node.http().with_token(&peer_key);
    let refused = as_peer.get(&format!("/api/agents/{agent}/memory")).await?;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let company_b = admin
        .post(
            "/api/companies",
            json!({ "name": "Elsewhere", "issuePrefix": "ELS" }),
        )
        .await?
        .ok()?;
    let (_, key_b) = agent_with_key(admin, &str_field(&company_b, "id"), "stranger").await?;
    let as_b = node.http().with_token(&key_b);
    for path in [
        format!("/api/agents/{agent}/memory"),
        format!("/api/agents/{agent}/memory/entries"),
        doc_path.clone(),
        format!(
            "/api/companies/{}/memory/documents/MEMORY.md",
            node.company_id
        ),
    ] {
        let reply = as_b.get(&path).await?;
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
    }

    // Terminated: the memory stays, readable by an administrator.
    admin
        .post(&format!("/api/agents/{agent}/terminate"), json!({}))
        .await?
        .ok()?;
    admin
        .put(
            &doc_path,
            json!({ "content": "kept after termination", "expectedVersion": 0 }),
        )
        .await?
        .ok()?;
    // And across a restart: loaded back from state.db.
    node.restart().await?;
    let summary = node
        .admin
        .get(&format!("/api/agents/{agent}/memory"))
        .await?
        .ok()?;
    assert_eq!(summary["entryCount"], 1, "{summary}");
    assert_eq!(summary["documents"][0]["name"], "STATE.md", "{summary}");
    let doc = node.admin.get(&doc_path).await?.ok()?;
    assert_eq!(doc["content"], "kept after termination");
    node.shutdown().await
}

fn cli(node: &TestNode, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(roost_binary())
        .args(args)
        .arg("--json")
        .env("ROOST_SERVER", node.admin.base())
        .env("ROOST_TOKEN", &node.admin_token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or_default().as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "roost {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cli_shows_logs_edits_and_lists_history() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (agent, key) = node.agent("cli-agent").await?;
    let run = node.start_run(&agent).await?;
    node.http()
        .with_token(&key)
        .with_run(&run)
        .post(
            "/api/agents/me/memory/entries",
            json!({ "what": "from the cli test" }),
        )
        .await?
        .ok()?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("memory.md");
    std::fs::write(&file, "first\n")?;
    let file = file.display().to_string();
    let n = std::sync::Arc::new(node);
    let node = n.clone();
    let agent2 = agent.clone();
    let (edited, from_stdin, shown, log, history) = tokio::task::spawn_blocking(move || {
        let a = agent2.as_str();
        anyhow::Ok((
            cli(
                &node,
                &["memory", "edit", a, "MEMORY.md", "--file", &file],
                None,
            )?,
            cli(
                &node,
                &["memory", "edit", "cli-agent", "MEMORY.md"],
                Some("second\n"),
            )?,
            cli(&node, &["memory", "show", a], None)?,
            cli(&node, &["memory", "log", a, "--limit", "5"], None)?,
            cli(&node, &["memory", "history", a, "MEMORY.md"], None)?,
        ))
    })
    .await??;
    assert_eq!(edited["version"], 1, "{edited}");
    assert_eq!(from_stdin["version"], 2, "{from_stdin}");
    assert_eq!(from_stdin["content"], "second\n");
    assert_eq!(shown["agentId"], agent.as_str());
    assert_eq!(
        shown["recovery"]["door"], "rebuild",
        "no live state: {shown}"
    );
    assert_eq!(shown["documents"][0]["version"], 2);
    assert_eq!(log[0]["what"], "from the cli test");
    let versions: Vec<u64> = history
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["version"].as_u64())
        .collect();
    assert_eq!(versions, [2, 1]);
    Ok(())
}
