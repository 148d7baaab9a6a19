//! Paperclip's `company archive` against `roost dev`: an administrator archives a company, its
//! agents then start no runs (a wake is skipped in the company's words), an agent cannot
//! archive its own, and the other companies are untouched.

use roost_testkit::Http;
use serde_json::json;

use crate::paperclip_cli::start;
use crate::support::{agent_with_key, has_wake_skipped_for, str_field};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_archives_a_company_whose_agents_then_start_no_runs() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let http = Http::new(&base).with_token(&admin);
    let sunset = http
        .post("/api/companies", json!({ "name": "Sunset" }))
        .await?
        .ok()?;
    let cid = str_field(&sunset, "id");
    let (agent_id, key) = agent_with_key(&http, &cid, "last-shift").await?;

    let refused = cli.run(&base, &key, &["company", "archive", &cid])?;
    assert!(
        !refused.ok,
        "an agent archived its company: {}",
        refused.stdout
    );
    assert!(
        refused.stderr.contains("administrator"),
        "{}",
        refused.stderr
    );
    let company = http.get(&format!("/api/companies/{cid}")).await?.ok()?;
    assert_eq!(company["status"], "active", "{company}");

    let archived = cli
        .run(&base, &admin, &["company", "archive", &cid])?
        .json()?;
    assert_eq!(archived["id"], cid.as_str(), "{archived}");
    assert_eq!(archived["status"], "archived", "{archived}");
    let skipped = http
        .post(&format!("/api/agents/{agent_id}/wakeup"), json!({}))
        .await?;
    assert_eq!(skipped.status.as_u16(), 202, "{}", skipped.body);
    assert_eq!(skipped.body["status"], "skipped", "{}", skipped.body);
    assert!(has_wake_skipped_for(&http, &cid, "company_archived").await?);
    // Archiving again answers the same; the dev company is as it was.
    let again = cli
        .run(&base, &admin, &["company", "archive", &cid])?
        .json()?;
    assert_eq!(again["status"], "archived", "{again}");
    let dev = http
        .get(&format!("/api/companies/{}", roost.company_id))
        .await?
        .ok()?;
    assert_eq!(dev["status"], "active", "{dev}");
    Ok(())
}
