//! A company's shared memory over REST and the CLI: its agents write to the company's log
//! during their runs and all of them read it; its live state is saved by an administrator or
//! an agent in a run; another company's agent sees none of it; a dead run's write is refused
//! and stores nothing; and it is kept across a restart.

use serde_json::{json, Value};

use roost_testkit::TestNode;

use crate::support::{agent_with_key, roost_binary, str_field};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_share_their_companys_log_and_live_state_and_no_other_company_sees_them(
) -> anyhow::Result<()> {
    let mut node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let log_path = format!("/api/companies/{cid}/memory/entries");
    let live_path = format!("/api/companies/{cid}/memory/live");
    let (writer, writer_key) = node.agent("writer").await?;
    let (_reader, reader_key) = node.agent("reader").await?;
    let other_company = node
        .admin
        .post("/api/companies", json!({ "name": "Elsewhere" }))
        .await?
        .ok()?;
    let other_cid = str_field(&other_company, "id");
    let (stranger, stranger_key) = agent_with_key(&node.admin, &other_cid, "stranger").await?;

    // Never saved: a 404 that names what is missing.
    let none = node.admin.get(&live_path).await?;
    assert_eq!(none.status, 404, "{}", none.body);

    // The writer, in its run, adds to the company's log and sets its live state.
    let run = node.start_run(&writer).await?;
    let as_run = node.http().with_token(&writer_key).with_run(&run);
    let entry = as_run
        .post(
            &log_path,
            json!({ "what": "staging moved to eu-west", "did": "updated the deploy docs" }),
        )
        .await?;
    assert_eq!(entry.status, 201, "{}", entry.body);
    assert_eq!(entry.body["shared"], true, "{}", entry.body);
    assert_eq!(entry.body["agentId"], writer.as_str());
    assert_eq!(entry.body["runId"], run.as_str());
    let live = as_run
        .put(
            &live_path,
            json!({ "currentTask": { "doing": "release 1.3", "next": ["tag it"] } }),
        )
        .await?
        .ok()?;
    assert_eq!(
        (live["updatedByType"].as_str(), live["runId"].as_str()),
        (Some("agent"), Some(run.as_str())),
        "{live}"
    );
    // Not in the writer's own log.
    let own = as_run.get("/api/agents/me/memory/entries").await?.ok()?;
    assert_eq!(own, json!([]), "{own}");

    // Another agent of the company reads both, with no run of its own.
    let as_reader = node.http().with_token(&reader_key);
    let log = as_reader.get(&log_path).await?.ok()?;
    assert_eq!(log[0]["what"], "staging moved to eu-west", "{log}");
    let read_live = as_reader.get(&live_path).await?.ok()?;
    assert_eq!(read_live["currentTask"]["doing"], "release 1.3");
    // ... but writes them only in a run.
    let no_run = as_reader
        .put(&live_path, json!({ "currentTask": { "doing": "mine" } }))
        .await?;
    assert_eq!(no_run.status, 400, "{}", no_run.body);
    assert!(no_run.body["error"]
        .as_str()
        .unwrap_or_default()
        .contains("during a run"));

    // Another company's agent: not found, reading or writing, even in a run of its own.
    let as_stranger = node.http().with_token(&stranger_key);
    for path in [&log_path, &live_path] {
        let seen = as_stranger.get(path).await?;
        assert_eq!(seen.status, 404, "{path}: {}", seen.body);
    }
    let stranger_run = node.start_run(&stranger).await?;
    let intrude = as_stranger
        .clone()
        .with_run(&stranger_run)
        .post(&log_path, json!({ "what": "planted" }))
        .await?;
    assert_eq!(intrude.status, 404, "{}", intrude.body);
    let other_log = node
        .admin
        .get(&format!("/api/companies/{other_cid}/memory/entries"))
        .await?
        .ok()?;
    assert_eq!(
        other_log,
        json!([]),
        "nothing leaked into the other company's log"
    );

    // The run ends: its late writes are refused and store nothing.
    node.admin
        .post(
            &format!("/api/heartbeat-runs/{run}/finish"),
            json!({ "status": "succeeded" }),
        )
        .await?
        .ok()?;
    let late = as_run.post(&log_path, json!({ "what": "late" })).await?;
    assert_eq!((late.status.as_u16(), late.code()), (409, "stale_run"));
    let late = as_run
        .put(&live_path, json!({ "coordinates": { "late": true } }))
        .await?;
    assert_eq!((late.status.as_u16(), late.code()), (409, "stale_run"));

    // An administrator saves it without a run: a part not sent stays.
    let by_admin = node
        .admin
        .put(&live_path, json!({ "coordinates": { "release": "1.3" } }))
        .await?
        .ok()?;
    assert_eq!(by_admin["currentTask"]["doing"], "release 1.3");
    assert_eq!(by_admin["coordinates"]["release"], "1.3");
    assert_eq!(by_admin["updatedByType"], "user", "{by_admin}");
    assert!(by_admin["runId"].is_null(), "{by_admin}");
    // A body it does not know is refused with a sentence.
    let unknown = node.admin.put(&live_path, json!({ "doin": "x" })).await?;
    assert_eq!(unknown.status, 400, "{}", unknown.body);

    // Kept across a restart, and shown by the CLI.
    node.restart().await?;
    let log = node.admin.get(&log_path).await?.ok()?;
    assert_eq!(log.as_array().map(Vec::len), Some(1), "{log}");
    let live = node.admin.get(&live_path).await?.ok()?;
    assert_eq!(live["coordinates"]["release"], "1.3", "{live}");
    let (base, token) = (node.admin.base().to_string(), node.admin_token.clone());
    let (cli_log, cli_live, cli_set) = tokio::task::spawn_blocking(move || {
        let c = cid.as_str();
        anyhow::Ok((
            cli(&base, &token, &["memory", "company-log", c])?,
            cli(&base, &token, &["memory", "company-live", c])?,
            cli(
                &base,
                &token,
                &[
                    "memory",
                    "company-live",
                    c,
                    "--doing",
                    "release 1.4",
                    "--next",
                    "branch",
                ],
            )?,
        ))
    })
    .await??;
    assert_eq!(cli_log[0]["what"], "staging moved to eu-west", "{cli_log}");
    assert_eq!(
        cli_live["currentTask"]["doing"], "release 1.3",
        "{cli_live}"
    );
    assert_eq!(cli_set["currentTask"]["doing"], "release 1.4", "{cli_set}");
    assert_eq!(cli_set["currentTask"]["next"][0], "branch", "{cli_set}");
    node.shutdown().await
}

/// `roost ARGS --json` against the node as its administrator; the parsed output.
fn cli(base: &str, token: &str, args: &[&str]) -> anyhow::Result<Value> {
    let out = std::process::Command::new(roost_binary())
        .args(args)
        .arg("--json")
        .env("ROOST_SERVER", base)
        .env("ROOST_TOKEN", token)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "roost {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}
