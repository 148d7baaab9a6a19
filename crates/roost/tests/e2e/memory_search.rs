//! Recall on a 3-node cluster: an agent's log entry and a comment on an old
//! issue assigned to it are found by one query on a follower; comments of issues the agent has
//! nothing to do with, and of a deleted issue, are not; hostile query text is a 400 or a
//! search, never a 5xx; another agent of the company cannot search this one's memory; and
//! `roost memory search --json`.

use serde_json::{json, Value};

use roost_testkit::{Http, TestCluster};

use crate::support::{agent_with_key, one_cluster_at_a_time, roost_binary, str_field};

/// Every byte but ASCII letters and digits as `%XX`: any text as a query string value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn search(http: &Http, agent: &str, q: &str) -> anyhow::Result<Vec<Value>> {
    let reply = http
        .get(&format!(
            "/api/agents/{agent}/memory/search?q={}",
            encode(q)
        ))
        .await?
        .ok()?;
    Ok(reply.as_array().cloned().unwrap_or_default())
}

fn kinds_and_ids(hits: &[Value]) -> Vec<(String, String)> {
    hits.iter()
        .map(|h| (str_field(h, "kind"), str_field(h, "id")))
        .collect()
}

async fn issue_with_comment(
    admin: &Http,
    company_id: &str,
    assignee: Option<&str>,
    comment: &str,
) -> anyhow::Result<(String, String)> {
    let mut body = json!({ "title": "search me", "status": "todo" });
    if let Some(agent) = assignee {
        body["assigneeAgentId"] = json!(agent);
    }
    let issue = admin
        .post(&format!("/api/companies/{company_id}/issues"), body)
        .await?
        .ok()?;
    let issue = str_field(&issue, "id");
    let posted = admin
        .post(
            &format!("/api/issues/{issue}/comments"),
            json!({ "body": comment }),
        )
        .await?
        .ok()?;
    Ok((issue, str_field(&posted, "id")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_search_finds_entries_and_old_comments_on_a_follower_for_the_agent_only(
) -> anyhow::Result<()> {
    let _one = one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let leader = c.leader().await?;
    let followers: Vec<u64> = c.ids().into_iter().filter(|id| *id != leader).collect();
    let (writer, reader) = (followers[0], followers[1]);
    let cid = c.company_id.clone();
    let admin_w = c.admin(writer);

    let (agent, key) = agent_with_key(&admin_w, &cid, "recaller").await?;
    let (other, other_key) = agent_with_key(&admin_w, &cid, "bystander").await?;
    // An old issue of the agent's, closed since, with the operator's diagnosis in a comment.
    let (old_issue, old_comment) = issue_with_comment(
        &admin_w,
        &cid,
        Some(&agent),
        "The flaky deploy came from a stale DNS cache on the staging proxy.",
    )
    .await?;
    admin_w
        .patch(
            &format!("/api/issues/{old_issue}"),
            json!({ "status": "done" }),
        )
        .await?
        .ok()?;
    // The same words on an issue the agent has nothing to do with, and on one deleted later.
    issue_with_comment(&admin_w, &cid, Some(&other), "stale DNS cache again").await?;
    let (doomed, _) =
        issue_with_comment(&admin_w, &cid, Some(&agent), "stale DNS cache, doomed").await?;
    // The agent's own log entry, written during a run.
    let run = admin_w
        .post(&format!("/api/agents/{agent}/runs"), json!({}))
        .await?
        .ok()?;
    let run = str_field(&run, "id");
    let entry = c
        .http(writer)
        .with_token(&key)
        .with_run(&run)
        .post(
            "/api/agents/me/memory/entries",
            json!({ "what": "flushed the DNS cache", "did": "the deploy went green" }),
        )
        .await?
        .ok()?;
    let entry_id = str_field(&entry, "id");
    admin_w
        .delete(&format!("/api/issues/{doomed}"))
        .await?
        .ok()?;

    // On another follower, as the agent itself (`me` and its id) and as an administrator.
    let as_agent = c.http(reader).with_token(&key);
    let hits = search(&as_agent, "me", "dns cache").await?;
    let mut found = kinds_and_ids(&hits);
    found.sort();
    let mut expected = vec![
        ("comment".to_string(), old_comment.clone()),
        ("entry".to_string(), entry_id.clone()),
    ];
    expected.sort();
    assert_eq!(found, expected, "{hits:?}");
    let comment = hits
        .iter()
        .find(|h| h["kind"] == "comment")
        .cloned()
        .unwrap_or_default();
    assert_eq!(comment["issueId"], old_issue.as_str(), "{comment}");
    assert!(
        comment["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains("[DNS]"),
        "{comment}"
    );
    assert!(comment["score"].as_f64().is_some(), "{comment}");
    assert!(comment["createdAt"].is_string(), "{comment}");
    assert_eq!(search(&as_agent, &agent, "dns cache").await?.len(), 2);
    assert_eq!(
        search(&c.admin(reader), &agent, "DNS").await?.len(),
        2,
        "an administrator searches any agent"
    );
    // Stemmed and ranked: `deploying` finds both texts that say `deploy`.
    assert_eq!(search(&as_agent, "me", "deploying").await?.len(), 2);

    // Another agent of the company cannot search this one's; its own search misses it.
    let as_other = c.http(reader).with_token(&other_key);
    let refused = as_other
        .get(&format!("/api/agents/{agent}/memory/search?q=dns"))
        .await?;
    assert_eq!(
        (refused.status.as_u16(), refused.code()),
        (403, "forbidden"),
        "{}",
        refused.body
    );
    assert!(refused.body["error"]
        .as_str()
        .unwrap_or_default()
        .contains(' '));
    let own = search(&as_other, "me", "dns cache").await?;
    assert_eq!(own.len(), 1, "the bystander's assigned issue: {own:?}");
    assert_ne!(str_field(&own[0], "id"), old_comment);

    // Hostile text: a sentence with 400, or a search; never a 5xx.
    let long = "cache ".repeat(2000);
    for q in [
        "",
        "\"",
        "\"dns",
        "*",
        "NEAR(dns cache)",
        "dns -cache",
        "((",
        "dns OR",
        "body:dns",
        &long,
    ] {
        let reply = as_agent
            .get(&format!(
                "/api/agents/me/memory/search?q={}&limit=5",
                encode(q)
            ))
            .await?;
        let status = reply.status.as_u16();
        assert!(
            status == 200 || (status == 400 && reply.code() == "bad_request"),
            "q {q:?}: {status} {}",
            reply.body
        );
        if status == 400 {
            assert!(reply.body["error"]
                .as_str()
                .unwrap_or_default()
                .contains(' '));
        }
    }
    // No words (no `q` at all) finds nothing; too long a text is a 400 with a sentence.
    let missing = as_agent.get("/api/agents/me/memory/search").await?.ok()?;
    assert_eq!(missing, json!([]));
    let too_long = as_agent
        .get(&format!(
            "/api/agents/me/memory/search?q={}",
            "x".repeat(1001)
        ))
        .await?;
    assert_eq!(too_long.status.as_u16(), 400, "{}", too_long.body);

    // The CLI, as an administrator on the reader.
    let out = std::process::Command::new(roost_binary())
        .args([
            "memory", "search", &agent, "stale", "dns", "--limit", "5", "--json",
        ])
        .env("ROOST_SERVER", c.admin(reader).base())
        .env("ROOST_TOKEN", &c.admin_token)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "roost memory search failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        kinds_and_ids(cli.as_array().map(Vec::as_slice).unwrap_or_default()),
        vec![("comment".to_string(), old_comment)],
        "{cli}"
    );
    c.shutdown().await;
    Ok(())
}
