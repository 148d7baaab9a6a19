//! The agent's home files follow it between machines: a
//! run on worker A writes files under `$AGENT_HOME` in the layout of Paperclip's
//! `para-memory-files` skill (a PARA tree under `life/`, a daily note under `memory/`); A goes
//! away; the agent's next run, on worker B with an empty work directory, finds them. That run
//! then grows the home past the agent's `homeMaxBytes`: the save is refused with a clear error
//! in the run's log, and the replicated home keeps the previous version. Both workers are the
//! real `roost-worker` with the `process` adapter, against a 3-node cluster.

use serde_json::json;

use crate::support::str_field;
use crate::worker_process::{
    cluster_with_worker_leases, create_agent, start_named_worker, wake_and_wait_finished,
    worker_gone,
};

const SUMMARY: &str = "# Roost\nA replicated control plane for agents.\n";
const CAP: u64 = 100_000;

/// First run (no PARA tree yet): writes one. Later runs: copy what they found next to the work
/// directory, then edit the summary and add a file that takes the home past its cap.
const AGENT: &str = r#"
P="$AGENT_HOME/life/projects/roost"
if [ ! -f "$P/summary.md" ]; then
  mkdir -p "$P" "$AGENT_HOME/life/areas/people/ada"
  printf '# Roost\nA replicated control plane for agents.\n' > "$P/summary.md"
  printf -- '- id: roost-001\n  fact: "uses openraft"\n  status: active\n' > "$P/items.yaml"
  printf -- '- fact: reviews the storage layer\n' > "$AGENT_HOME/life/areas/people/ada/items.yaml"
  printf '## Today\n- set up the PARA tree\n' > "$AGENT_HOME/memory/2026-11-25.md"
else
  (cd "$AGENT_HOME" && find life memory -type f | sort) > "found-$ROOST_RUN_ID.txt"
  cat "$P/summary.md" "$AGENT_HOME/memory/2026-11-25.md" >> "found-$ROOST_RUN_ID.txt"
  printf 'edited by a run whose save is refused\n' >> "$P/summary.md"
  mkdir -p "$AGENT_HOME/life/resources"
  head -c 150000 /dev/zero > "$AGENT_HOME/life/resources/too-big.bin"
fi
"#;

fn sha256(text: &str) -> String {
    roost_core::home::chunk_hash(text.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agents_home_files_follow_it_and_a_home_over_its_cap_is_refused() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(3, 1500).await?;
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
    let patched = c
        .admin(leader)
        .patch(
            &format!("/api/agents/{agent}"),
            json!({ "homeMaxBytes": CAP }),
        )
        .await?
        .ok()?;
    assert_eq!(patched["homeMaxBytes"], CAP, "{patched}");

    let first = wake_and_wait_finished(&c, leader, &agent, &[]).await?;
    assert_eq!(first["status"], "succeeded", "{first}");
    assert_eq!(first["workerId"], "worker-a", "{first}");
    let first_id = str_field(&first, "id");
    let home = c
        .admin(leader)
        .get(&format!("/api/agents/{agent}/home"))
        .await?
        .ok()?;
    assert_eq!(home["version"], 1, "{home}");
    assert_eq!(home["runId"], first_id.as_str(), "{home}");
    assert_eq!(home["maxBytes"], CAP, "{home}");
    let files: Vec<&str> = home["files"]
        .as_object()
        .map(|f| f.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        files,
        [
            "life/areas/people/ada/items.yaml",
            "life/projects/roost/items.yaml",
            "life/projects/roost/summary.md",
            "memory/2026-11-25.md",
        ],
        "memory's own files (MEMORY.md, memory/recent.md, ...) are not home files: {home}"
    );
    let summary = &home["files"]["life/projects/roost/summary.md"];
    assert_eq!(summary["chunks"], json!([sha256(SUMMARY)]), "{home}");

    // Worker A goes away; worker B, with an empty work dir, is the only one left.
    drop(stop_a);
    worker_gone(&c, leader, "worker-a").await?;
    let _stop_b = start_named_worker(
        &c,
        "worker-b",
        dir_b.path(),
        c.grpc_addrs(),
        Some(c.admin(leader).base().to_string()),
    )
    .await?;
    let second =
        wake_and_wait_finished(&c, leader, &agent, std::slice::from_ref(&first_id)).await?;
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(second["workerId"], "worker-b", "{second}");
    let second_id = str_field(&second, "id");
    let found = std::fs::read_to_string(dir_b.path().join(format!("found-{second_id}.txt")))?;
    for line in [
        "life/areas/people/ada/items.yaml",
        "life/projects/roost/items.yaml",
        "life/projects/roost/summary.md",
        "memory/2026-11-25.md",
        "A replicated control plane for agents.",
        "- set up the PARA tree",
    ] {
        assert!(
            found.contains(line),
            "{line:?} not found by run 2:\n{found}"
        );
    }

    // Run 2's home is over the cap: refused with a clear error, version 1 kept.
    let log = c
        .admin(leader)
        .get(&format!("/api/heartbeat-runs/{second_id}/log"))
        .await?
        .ok()?;
    let text = log["content"].as_str().unwrap_or_default();
    assert!(
        text.contains("home: not saved") && text.contains(&format!("cap of {CAP} bytes")),
        "the run's log says why its home was not saved:\n{text}"
    );
    assert!(text.contains("version 1 is kept"), "{text}");
    let kept = c
        .admin(leader)
        .get(&format!("/api/agents/{agent}/home"))
        .await?
        .ok()?;
    assert_eq!(kept["version"], 1, "{kept}");
    assert_eq!(
        kept["files"]["life/projects/roost/summary.md"]["chunks"],
        json!([sha256(SUMMARY)]),
        "{kept}"
    );
    assert!(
        kept["files"]["life/resources/too-big.bin"].is_null(),
        "{kept}"
    );
    c.shutdown().await;
    Ok(())
}
