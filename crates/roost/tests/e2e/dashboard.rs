//! The web dashboard in a real browser: Debian's `chromium` headless,
//! driven over WebDriver by `chromedriver` (both installed by `.ci/run`). An operator logs in
//! with an admin token, creates an issue from the board, and sees it move to `in_progress`
//! when an agent checks it out, through the event stream, without the page reloading; opens
//! the issue; pauses the agent from the agents page (audited as the operator). Screenshots of
//! the board and the issue go to `target/dashboard-screenshots/` (linked from README).
//! Without a session every page sends the browser to the login form, and a form posted from
//! another site is refused.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use roost_testkit::{wait_for, TestNode};

use crate::support::*;

/// WebDriver's key for an element reference (W3C).
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless Chromium under chromedriver, one WebDriver session; both stop when dropped.
struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    async fn start() -> anyhow::Result<Browser> {
        let port = roost_testkit::ports::free_port()?;
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot run chromedriver ({e}): install chromium and chromium-driver \
                     (apt-get install chromium chromium-driver), as .ci/run does"
                )
            })?;
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            http,
            session: base.clone(),
            driver,
        };
        wait_for("chromedriver to answer", Duration::from_secs(20), || {
            let (http, base) = (browser.http.clone(), base.clone());
            async move {
                let status: Value = http
                    .get(format!("{base}/status"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                status["value"]["ready"].as_bool().filter(|r| *r)
            }
        })
        .await?;
        let created: Value = browser
            .http
            .post(format!("{base}/session"))
            .json(&json!({ "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": "/usr/bin/chromium",
                    "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                             "--window-size=1280,900"]
                }
            }}}))
            .send()
            .await?
            .json()
            .await?;
        let id = created["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no WebDriver session: {created}"))?;
        browser.session = format!("{base}/session/{id}");
        Ok(browser)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> anyhow::Result<Value> {
        let reply: Value = self
            .http
            .request(method, format!("{}{path}", self.session))
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(
            reply["value"].get("error").is_none(),
            "WebDriver {path}: {reply}"
        );
        Ok(reply["value"].clone())
    }

    async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.call(reqwest::Method::POST, "/url", json!({ "url": url }))
            .await
            .map(drop)
    }

    async fn find(&self, css: &str) -> anyhow::Result<String> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({ "using": "css selector", "value": css }),
            )
            .await?;
        found[ELEMENT]
            .as_str()
            .map(String::from)
            .ok_or_else(|| anyhow::anyhow!("no element {css}: {found}"))
    }

    async fn click(&self, css: &str) -> anyhow::Result<()> {
        let el = self.find(css).await?;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/click"),
            json!({}),
        )
        .await
        .map(drop)
    }

    async fn type_into(&self, css: &str, text: &str) -> anyhow::Result<()> {
        let el = self.find(css).await?;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{el}/value"),
            json!({ "text": text }),
        )
        .await
        .map(drop)
    }

    async fn script(&self, source: &str) -> anyhow::Result<Value> {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            json!({ "script": source, "args": [] }),
        )
        .await
    }

    /// Waits until `source` (a script's body) returns something other than null or false.
    async fn until(&self, what: &str, source: &str) -> anyhow::Result<Value> {
        wait_for(what, Duration::from_secs(20), || async {
            self.script(source)
                .await
                .ok()
                .filter(|v| !v.is_null() && *v != json!(false))
        })
        .await
    }

    async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        let shot = self
            .call(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        let shot = match shot {
            Ok(v) => v,
            Err(_) => {
                // Some drivers refuse a GET with a body.
                let reply: Value = self
                    .http
                    .get(format!("{}/screenshot", self.session))
                    .send()
                    .await?
                    .json()
                    .await?;
                reply["value"].clone()
            }
        };
        let png = base64::engine::general_purpose::STANDARD.decode(shot.as_str().unwrap_or(""))?;
        let dir =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(name);
        std::fs::write(&path, png)?;
        Ok(path)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_watches_an_issue_move_live_and_pauses_an_agent_in_a_browser(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = node.http().base().to_string();
    let cid = node.company_id.clone();
    let (agent_id, key) = node.agent("coder").await?;
    let browser = Browser::start().await?;

    // No session: the board sends the browser to the login form.
    browser.goto(&format!("{base}/board")).await?;
    browser
        .until(
            "the login form",
            "return document.getElementById('token') !== null",
        )
        .await?;
    browser.type_into("#token", "rst_not-a-real-token").await?;
    browser.click("#login").await?;
    browser
        .until(
            "the refusal of a bad token",
            "return document.querySelector('.error') && document.querySelector('.error').textContent",
        )
        .await?;
    browser.type_into("#token", &node.admin_token).await?;
    browser.click("#login").await?;
    browser
        .until(
            "the board",
            "return document.getElementById('board') !== null",
        )
        .await?;

    // Create an issue from the board.
    browser
        .type_into("#new-title", "Fix the login page")
        .await?;
    browser.click("#create-issue").await?;
    let ident = browser
        .until(
            "the new card in todo",
            "var c=document.querySelector('section[data-status=todo] .card');\
             return c && c.textContent.indexOf('Fix the login page')>=0 && c.dataset.identifier",
        )
        .await?;
    let ident = ident.as_str().unwrap_or_default().to_string();
    let issue = node
        .admin
        .get(&format!("/api/issues/{ident}"))
        .await?
        .ok()?;
    let issue_id = str_field(&issue, "id");

    // The agent checks it out; the card moves to in_progress on the open page.
    browser
        .script("window.__notReloaded = 42; return true")
        .await?;
    let run = node.start_run(&agent_id).await?;
    let agent = node.http().with_token(&key).with_run(&run);
    let checkout = agent
        .post(
            &format!("/api/issues/{issue_id}/checkout"),
            json!({ "agentId": agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?;
    assert!(checkout.status.is_success(), "{}", checkout.body);
    browser
        .until(
            "the card in in_progress, without a reload",
            &format!(
                "return window.__notReloaded === 42 && \
                 document.querySelector('section[data-status=in_progress] [data-identifier=\"{ident}\"]') !== null"
            ),
        )
        .await?;
    let board_png = browser.screenshot("board.png").await?;

    // The issue page names the holder.
    browser
        .click(&format!("[data-identifier=\"{ident}\"]"))
        .await?;
    let status = browser
        .until(
            "the issue page",
            "var s=document.getElementById('status'); return s && s.textContent",
        )
        .await?;
    assert_eq!(status, "in_progress");
    let issue_png = browser.screenshot("issue.png").await?;

    // The holder's run: cancelled from its page.
    browser.click("#holder-run").await?;
    browser.click("#cancel").await?;
    browser
        .until(
            "the run cancelled",
            "var s=document.getElementById('run-status'); return s && s.textContent==='cancelled'",
        )
        .await?;

    // Wake the agent, then pause it, from the agents page; the writes are the operator's.
    browser
        .goto(&format!("{base}/agents?company={cid}"))
        .await?;
    browser.click("tr[data-agent=coder] button.wake").await?;
    browser
        .until(
            "the wake on the agents page",
            "var w=document.querySelector('tr[data-agent=coder] .wake'); \
             return w && w.textContent.indexOf('on_demand')===0",
        )
        .await?;
    browser.click("tr[data-agent=coder] button.pause").await?;
    browser
        .until(
            "the agent shown paused",
            "var s=document.querySelector('tr[data-agent=coder] .status');\
             return s && s.textContent.indexOf('paused')===0",
        )
        .await?;
    let agent_row = node
        .admin
        .get(&format!("/api/agents/{agent_id}"))
        .await?
        .ok()?;
    assert_eq!(agent_row["status"], "paused", "{agent_row}");
    let activity = node
        .admin
        .get(&format!("/api/companies/{cid}/activity"))
        .await?
        .ok()?;
    let paused = activity
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["action"] == "agent.paused")
        .cloned()
        .unwrap_or_default();
    assert_eq!(paused["actorType"], "user", "{activity}");

    // Budgets: a hard stop's incident shows up and is resolved from the page.
    node.admin
        .post(
            &format!("/api/companies/{cid}/budgets/policies"),
            json!({ "scopeType": "agent", "scopeId": agent_id, "amount": 30 }),
        )
        .await?
        .ok()?;
    node.admin
        .post(
            &format!("/api/companies/{cid}/cost-events"),
            json!({ "agentId": agent_id, "provider": "anthropic", "costCents": 40 }),
        )
        .await?
        .ok()?;
    browser
        .goto(&format!("{base}/budgets?company={cid}"))
        .await?;
    // The hard incident's row of the budgets page, as the first statement of each script.
    let hard_row = "var r=[...document.querySelectorAll('tr[data-incident]')]\
                    .find(function(r){return r.cells[0].textContent==='hard'});";
    let row_status = |status: &str| {
        format!("{hard_row} return r && r.querySelector('.status').textContent==='{status}'")
    };
    browser
        .until("an open hard incident", &row_status("open"))
        .await?;
    browser
        .script(&format!(
            "{hard_row} [...r.querySelectorAll('button')]\
             .find(function(b){{return b.textContent==='keep_paused'}}).click(); return true"
        ))
        .await?;
    browser
        .until("the incident resolved", &row_status("resolved"))
        .await?;
    // The agents page shows the spend against the budget, and the agent's last wake.
    browser
        .goto(&format!("{base}/agents?company={cid}"))
        .await?;
    let spend = browser
        .until(
            "the agent's spend",
            "var r=document.querySelector('tr[data-agent=coder]'); return r && r.cells[4].textContent",
        )
        .await?;
    assert_eq!(spend, "$0.40 of $0.30");
    // The cluster and the workers, as the node sees them.
    browser
        .goto(&format!("{base}/cluster?company={cid}"))
        .await?;
    let leader = browser
        .until(
            "the cluster page",
            "var l=document.getElementById('leader'); return l && l.textContent",
        )
        .await?;
    assert_eq!(leader, "1");
    browser
        .goto(&format!("{base}/workers?company={cid}"))
        .await?;
    browser
        .until(
            "the workers page",
            "return document.querySelector('h1') && document.querySelector('h1').textContent==='Workers'",
        )
        .await?;

    // A form posted from another site, even with the session, is refused.
    let cookie = format!("roost_session={}", node.admin_token);
    let forged = reqwest::Client::new()
        .post(format!("{base}/agents/{agent_id}/resume"))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .form(&[("company", cid.as_str())])
        .send()
        .await?;
    assert_eq!(forged.status().as_u16(), 403);
    let still = node
        .admin
        .get(&format!("/api/agents/{agent_id}"))
        .await?
        .ok()?;
    assert_eq!(still["status"], "paused", "{still}");

    assert!(board_png.exists() && issue_png.exists());
    Ok(())
}

/// A run's page follows its live log as the agent writes it: a real worker runs a process
/// agent that prints a line, waits for the test's signal (a file), prints another and ends;
/// both lines appear on the open page in order, and the page sees the stream end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runs_page_follows_its_live_log_in_a_browser() -> anyhow::Result<()> {
    use crate::worker_process::{cluster_with_worker_leases, start_worker};
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(1, 1500).await?;
    let dir = tempfile::tempdir()?;
    let go = dir.path().join("go");
    let script = format!(
        "echo first-line; while [ ! -e '{}' ]; do sleep 0.05; done; echo second-line",
        go.display()
    );
    let _worker = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let admin = c.admin(1);
    let agent = admin
        .post(
            &format!("/api/companies/{}/agents", c.company_id),
            json!({ "name": "logger", "adapterType": "process",
                    "adapterConfig": { "command": "sh", "args": ["-c", script], "cwd": "." } }),
        )
        .await?
        .ok()?;
    let agent_id = str_field(&agent, "id");
    admin
        .post(&format!("/api/agents/{agent_id}/wakeup"), json!({}))
        .await?
        .ok()?;
    let run_id = wait_for("a running run", Duration::from_secs(20), || {
        crate::support::run_in_status(&admin, &c.company_id, &agent_id, "running")
    })
    .await?;

    let browser = Browser::start().await?;
    browser.goto(&format!("{}/login", admin.base())).await?;
    browser.type_into("#token", &c.admin_token).await?;
    browser.click("#login").await?;
    browser
        .until(
            "the board",
            "return document.getElementById('board') !== null",
        )
        .await?;
    // From the agents page to the agent's live run.
    browser
        .goto(&format!("{}/agents?company={}", admin.base(), c.company_id))
        .await?;
    browser.click("tr[data-agent=logger] a.run").await?;
    browser
        .until(
            "the first line on the run's page",
            "var l=document.getElementById('log'); return l && l.textContent.indexOf('first-line')>=0",
        )
        .await?;
    let status = browser
        .script("return document.getElementById('run-status').textContent")
        .await?;
    assert_eq!(status, "running");
    std::fs::write(&go, "")?;
    let log = browser
        .until(
            "the second line, and the end of the stream",
            "var l=document.getElementById('log'); \
             return l && l.dataset.ended==='true' && l.textContent",
        )
        .await?;
    let log = log.as_str().unwrap_or_default();
    let (first, second) = (log.find("first-line"), log.find("second-line"));
    assert!(
        first.is_some() && second.is_some() && first < second,
        "both lines, in order: {log}"
    );
    browser.screenshot("run.png").await?;
    // The stream ended because the run did.
    wait_for("the run to succeed", Duration::from_secs(20), || async {
        let run = admin
            .get(&format!("/api/heartbeat-runs/{run_id}"))
            .await
            .ok()?;
        (run.body["status"] == "succeeded").then_some(())
    })
    .await?;
    c.shutdown().await;
    Ok(())
}
