//! Agent memory follows the agent between machines: a run on worker A
//! logs an entry, edits MEMORY.md and its current task in its home; A goes away; the agent's
//! next run lands on worker B, and its prompt and home hold what A's run left, its company's
//! shared log and live state too. Both workers are the real `roost-worker` with the `process`
//! adapter, against a 3-node cluster.

use std::path::Path;

use serde_json::{json, Value};

use roost_testkit::TestCluster;

use crate::support::str_field;
use crate::worker_process::{
    cluster_with_worker_leases, create_agent, start_named_worker, worker_gone,
};

/// The agent: keeps its prompt and the MEMORY.md it found, its own and its company's; on its
/// first run (an empty MEMORY.md) it writes a fact, a log entry, an entry for its company's
/// shared log and its current task as files in its home, and scribbles on the company's
/// read-only copy.
const AGENT: &str = r#"
cat > "prompt-$ROOST_RUN_ID.txt"
cp "$AGENT_HOME/MEMORY.md" "memory-seen-$ROOST_RUN_ID.md"
cp "$AGENT_HOME/memory/company/MEMORY.md" "company-seen-$ROOST_RUN_ID.md"
if [ ! -s "$AGENT_HOME/MEMORY.md" ]; then
  printf 'scribbled by the agent\n' >> "$AGENT_HOME/memory/company/MEMORY.md"
  printf '# Facts\n- the parser lives in src/parse.rs\n' >> "$AGENT_HOME/MEMORY.md"
  printf '# What\nfound the parser bug\n\n# Did\nread src/parse.rs\n\n# Next\nwrite the fix\n' > "$AGENT_HOME/memory/entry.md"
  printf '# What\nthe parser is shared by every service\n\n# Did\nlisted its callers\n' > "$AGENT_HOME/memory/company-entry.md"
  printf '# Doing\nfixing the parser\n\n# Last\n- found the bug\n\n# Next\n- write the fix\n' > "$AGENT_HOME/memory/current-task.md"
fi
"#;

/// Wakes `agent` through node `via` (by assigning it a new issue titled `issue`, if given) and
/// waits for a run other than `before` to finish.
async fn run_once(
    c: &TestCluster,
    via: u64,
    agent: &str,
    before: &[String],
    issue: Option<&str>,
) -> anyhow::Result<Value> {
    let admin = c.admin(via);
    match issue {
        Some(title) => admin
            .post(
                &format!("/api/companies/{}/issues", c.company_id),
                json!({ "title": title, "status": "todo", "assigneeAgentId": agent }),
            )
            .await?
            .ok()?,
        None => admin
            .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
            .await?
            .ok()?,
    };
    crate::worker_process::finished_run_besides(c, agent, before).await
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

async fn memory_moves_to_worker_b(kill_the_leader_between: bool) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let mut c = cluster_with_worker_leases(3, 1500).await?;
    let (dir_a, dir_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let leader = c.leader().await?;
    let stop_a = start_named_worker(
        &c,
        "worker-a",
        dir_a.path(),
        c.grpc_addrs(),
        Some(c.admin(leader).base().to_string()),
    )
    .await?;
    let adapter = json!({ "command": "sh", "args": ["-c", AGENT], "cwd": "." });
    let agent = create_agent(&c, "process", adapter).await?;
    // The company's shared memory, which every agent of the company reads and none writes.
    let company_doc = c
        .admin(leader)
        .put(
            &format!("/api/companies/{}/memory/documents/MEMORY.md", c.company_id),
            json!({ "content": COMPANY_FACT, "expectedVersion": 0 }),
        )
        .await?
        .ok()?;
    assert_eq!(company_doc["version"], 1, "{company_doc}");

    let first = run_once(&c, leader, &agent, &[], None).await?;
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["workerId"], "worker-a", "{first}");
    let first_id = str_field(&first, "id");
    let home_a = dir_a.path().join("agents").join(&agent);
    assert!(
        read(&dir_a.path().join(format!("prompt-{first_id}.txt"))).contains("$AGENT_HOME"),
        "the first prompt explains the memory files"
    );
    // What run 1 left is replicated: its entry is the run's, MEMORY.md has its first version.
    let memory = c
        .admin(leader)
        .get(&format!("/api/agents/{agent}/memory/entries"))
        .await?
        .ok()?;
    let entry = memory
        .as_array()
        .and_then(|e| e.iter().find(|e| e["what"] == "found the parser bug"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(entry["runId"], first_id.as_str(), "{memory}");
    assert_eq!(entry["did"], "read src/parse.rs", "{memory}");
    let doc = c
        .admin(leader)
        .get(&format!("/api/agents/{agent}/memory/documents/MEMORY.md"))
        .await?
        .ok()?;
    assert_eq!(doc["version"], 1, "{doc}");
    assert_eq!(doc["runId"], first_id.as_str(), "{doc}");
    assert!(
        !home_a.join("memory/entry.md").exists(),
        "the entry file was taken"
    );
    // Its entry for the company went to the company's shared log, not to its own.
    let shared = c
        .admin(leader)
        .get(&format!("/api/companies/{}/memory/entries", c.company_id))
        .await?
        .ok()?;
    assert_eq!(shared[0]["what"], SHARED_FACT, "{shared}");
    assert_eq!(
        (shared[0]["agentId"].as_str(), shared[0]["runId"].as_str()),
        (Some(agent.as_str()), Some(first_id.as_str())),
        "{shared}"
    );
    assert!(
        !memory.to_string().contains(SHARED_FACT),
        "the shared entry is not in the agent's own log: {memory}"
    );
    // An administrator sets what the company is doing now.
    c.admin(leader)
        .put(
            &format!("/api/companies/{}/memory/live", c.company_id),
            json!({ "currentTask": { "doing": COMPANY_DOING }, "coordinates": { "release": "1.3" } }),
        )
        .await?
        .ok()?;

    // Worker A goes away; worker B, with an empty work dir, is the only one left.
    drop(stop_a);
    let mut via = leader;
    if kill_the_leader_between {
        c.kill(leader).await;
        via = c.leader().await?;
    }
    // Gone for the cluster too, so the next run cannot be handed to A while it drains.
    worker_gone(&c, via, "worker-a").await?;
    let _stop_b = start_named_worker(
        &c,
        "worker-b",
        dir_b.path(),
        c.ids().iter().map(|id| c.grpc_addr(*id)).collect(),
        Some(c.admin(via).base().to_string()),
    )
    .await?;
    // The second run is about a new issue: recall finds run 1's entry for it.
    let second = run_once(
        &c,
        via,
        &agent,
        std::slice::from_ref(&first_id),
        Some("Fix the parser bug"),
    )
    .await?;
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(second["workerId"], "worker-b", "{second}");
    let second_id = str_field(&second, "id");

    let prompt = read(&dir_b.path().join(format!("prompt-{second_id}.txt")));
    for remembered in [
        "found the parser bug",
        "the parser lives in src/parse.rs",
        "fixing the parser",
        "write the fix",
    ] {
        assert!(
            prompt.contains(remembered),
            "{remembered:?} not in:\n{prompt}"
        );
    }
    assert!(prompt.contains("## Where you are: resume"), "{prompt}");
    let recalled = prompt
        .split("Recalled from your memory for this issue")
        .nth(1)
        .unwrap_or_default();
    assert!(
        recalled.contains("entry") && recalled.contains("[parser]"),
        "recall put run 1's entry in the prompt:\n{prompt}"
    );
    let home_b = dir_b.path().join("agents").join(&agent);
    assert!(read(&home_b.join("MEMORY.md")).contains("the parser lives in src/parse.rs"));
    assert!(
        read(&dir_b.path().join(format!("memory-seen-{second_id}.md")))
            .contains("the parser lives in src/parse.rs"),
        "the agent found A's edit in its home before it started"
    );
    assert!(read(&home_b.join("memory/recent.md")).contains("found the parser bug"));
    assert!(read(&home_b.join("memory/current-task.md")).contains("fixing the parser"));
    // The company's shared log and live state reached run 2 on worker B, in its prompt and,
    // read-only, in its home.
    for shared in [SHARED_FACT, COMPANY_DOING, "\"release\": \"1.3\""] {
        assert!(prompt.contains(shared), "{shared:?} not in:\n{prompt}");
    }
    assert!(read(&home_b.join("memory/company/log.md")).contains(SHARED_FACT));
    assert!(read(&home_b.join("memory/company/live.md")).contains(COMPANY_DOING));

    // The company's MEMORY.md reached both runs, in their homes and their prompts, and the
    // first run's scribble on it was neither saved nor carried to worker B as a home file.
    for (dir, run) in [(&dir_a, &first_id), (&dir_b, &second_id)] {
        let seen = read(&dir.path().join(format!("company-seen-{run}.md")));
        assert_eq!(seen, COMPANY_FACT, "run {run} read the company's MEMORY.md");
    }
    assert!(
        prompt.contains("## Company MEMORY.md (version 1)") && prompt.contains(COMPANY_FACT),
        "{prompt}"
    );
    let company_doc = c
        .admin(via)
        .get(&format!(
            "/api/companies/{}/memory/documents/MEMORY.md",
            c.company_id
        ))
        .await?
        .ok()?;
    assert_eq!(
        (
            company_doc["version"].as_u64(),
            company_doc["content"].as_str()
        ),
        (Some(1), Some(COMPANY_FACT)),
        "{company_doc}"
    );
    let home = c
        .admin(via)
        .get(&format!("/api/agents/{agent}/home"))
        .await?
        .ok()?;
    assert!(
        !home.to_string().contains("memory/company"),
        "the company's documents were saved as the agent's home files: {home}"
    );
    c.shutdown().await;
    Ok(())
}

const COMPANY_FACT: &str = "# Company\n- releases go out on Tuesdays\n";
const SHARED_FACT: &str = "the parser is shared by every service";
const COMPANY_DOING: &str = "shipping release 1.3";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agents_memory_follows_it_to_another_worker() -> anyhow::Result<()> {
    memory_moves_to_worker_b(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agents_memory_follows_it_across_a_leader_kill() -> anyhow::Result<()> {
    memory_moves_to_worker_b(true).await
}
