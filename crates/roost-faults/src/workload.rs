//! The checkout workload: clients that check out issues, comment and end their runs through
//! random nodes with timeouts, recording every operation (call and return time, outcome) for
//! the checkers; and the [`Recorder`] and [`Target`] every client of the suite shares.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roost_check::{Action, OkResult, Op, Outcome};
use roost_testkit::{Http, Reply};
use serde_json::{json, Value};

use crate::text;

/// One request's budget before its outcome counts as unknown.
pub const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// Every operation of every client, on one monotonic clock.
pub struct Recorder {
    start: Instant,
    next_id: AtomicU64,
    ops: Mutex<Vec<Op>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder {
            start: Instant::now(),
            next_id: AtomicU64::new(1),
            ops: Mutex::new(Vec::new()),
        })
    }

    pub fn now_ns(&self) -> i64 {
        self.start.elapsed().as_nanos() as i64
    }

    pub fn record(&self, process: u64, call_ns: i64, action: Action, outcome: Outcome) {
        let op = Op {
            id: self.next_id.fetch_add(1, Ordering::SeqCst),
            process,
            call_ns,
            return_ns: self.now_ns(),
            action,
            outcome,
        };
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What the clients work on.
#[derive(Clone)]
pub struct Target {
    /// The REST URLs of the cluster's current nodes (a membership change updates them).
    urls: Arc<RwLock<Vec<String>>>,
    pub company_id: String,
    pub admin_token: String,
    /// The agent whose runs check out the contended issues (runs started over the API).
    pub agent_id: String,
    pub agent_key: String,
    /// Every issue the clients contend for, `ISSUES_PER_WINDOW` at a time (`contended_issue`).
    pub issues: Vec<String>,
    /// When the first window of contended issues opened.
    windows_from: Instant,
    /// The agent woken and run by the worker, under a hard budget.
    pub waker: crate::wakes_costs::Waker,
    /// A client trusting the cluster CA; every request goes through its connections.
    client: Http,
}

/// Issues contended at once: six clients still meet on them.
pub const ISSUES_PER_WINDOW: usize = 12;
/// How long a window of contended issues lasts before the clients move to the next one. The
/// linearizability checker gives up on an issue with more than `max_ops` (1,000) operations;
/// contending for the same issues the whole run made that count grow with the machine's speed
/// (1,004-1,088 per issue in a 60 s run with 12 issues, 2026-11-24, each an inconclusive
/// verdict). A window bounds it by its length: about 250 per issue here.
pub const WINDOW: Duration = Duration::from_secs(15);

/// The windows a run of `secs` seconds passes through, one more for the drain after it.
pub fn windows_for(secs: u64) -> usize {
    secs.div_ceil(WINDOW.as_secs()) as usize + 1
}

/// The issues contended `elapsed` after the first window opened; `issues` is not empty.
fn issues_of_window(issues: &[String], elapsed: Duration) -> &[String] {
    let windows = issues.len().div_ceil(ISSUES_PER_WINDOW).max(1);
    let window = ((elapsed.as_secs() / WINDOW.as_secs()) as usize).min(windows - 1);
    let first = window * ISSUES_PER_WINDOW;
    &issues[first..(first + ISSUES_PER_WINDOW).min(issues.len())]
}

impl Target {
    pub fn new(
        client: Http,
        urls: Vec<String>,
        company_id: String,
        admin_token: String,
        agent: (String, String),
        issues: Vec<String>,
        waker: crate::wakes_costs::Waker,
    ) -> Target {
        Target {
            urls: Arc::new(RwLock::new(urls)),
            company_id,
            admin_token,
            agent_id: agent.0,
            agent_key: agent.1,
            issues,
            windows_from: Instant::now(),
            waker,
            client,
        }
    }

    /// A client of `url` (one of the cluster's), without a token.
    pub fn http(&self, url: impl Into<String>) -> Http {
        self.client.at(url)
    }

    /// One of the issues of the current window, at random; the last window stays open after
    /// its time.
    pub fn contended_issue(&self, rng: &mut StdRng) -> String {
        let window = issues_of_window(&self.issues, self.windows_from.elapsed());
        window[rng.gen_range(0..window.len())].clone()
    }

    /// The current nodes' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.urls.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_urls(&self, urls: Vec<String>) {
        *self.urls.write().unwrap_or_else(|p| p.into_inner()) = urls;
    }

    /// One current node's URL, at random.
    pub fn pick_url(&self, rng: &mut StdRng) -> String {
        let urls = self.urls();
        urls[rng.gen_range(0..urls.len())].clone()
    }

    /// An administrator's client of one current node, at random.
    pub fn admin(&self, rng: &mut StdRng) -> Http {
        self.http(self.pick_url(rng)).with_token(&self.admin_token)
    }
}

/// ok with the body, failed (a definite 4xx), or unknown (timeout, connection, 5xx). The
/// outcome goes straight into the history, so it is returned as is, not boxed.
#[allow(clippy::result_large_err)]
pub fn classify(
    reply: Result<Result<Reply, anyhow::Error>, tokio::time::error::Elapsed>,
) -> Result<Value, Outcome> {
    match reply {
        Err(_) => Err(Outcome::Unknown {
            reason: Some("timeout".into()),
        }),
        Ok(Err(e)) => Err(Outcome::Unknown {
            reason: Some(format!("transport: {e}")),
        }),
        Ok(Ok(r)) if r.status.is_success() => Ok(r.body),
        Ok(Ok(r)) if r.status.is_client_error() => Err(Outcome::Failed {
            status: Some(r.status.as_u16()),
            error: Some(r.code().to_string()),
        }),
        Ok(Ok(r)) => Err(Outcome::Unknown {
            reason: Some(format!("HTTP {}", r.status.as_u16())),
        }),
    }
}

pub fn ok(result: OkResult) -> Outcome {
    Outcome::Ok(result)
}

/// One client: start a run, check out a random issue, comment, end the run; until `deadline`.
/// An acknowledged reply without the id it must carry ends the client with an error.
pub async fn client(
    process: u64,
    target: Target,
    seed: u64,
    deadline: Instant,
    rec: Arc<Recorder>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ (process * 0x9E37_79B9));
    let mut n = 0u64;
    while Instant::now() < deadline {
        n += 1;
        let url = target.pick_url(&mut rng);
        let admin = target.http(url.clone()).with_token(&target.admin_token);
        let call = rec.now_ns();
        let started = classify(
            tokio::time::timeout(
                OP_TIMEOUT,
                admin.post(&format!("/api/agents/{}/runs", target.agent_id), json!({})),
            )
            .await,
        );
        let start_action = Action::Other {
            name: "start_run".into(),
            write: true,
        };
        let run_id = match started {
            Ok(body) => {
                rec.record(process, call, start_action, ok(OkResult::default()));
                text(&body, "id")?
            }
            Err(outcome) => {
                rec.record(process, call, start_action, outcome);
                // Give an election time rather than spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let issue = target.contended_issue(&mut rng);
        let as_agent = target
            .http(url.clone())
            .with_token(&target.agent_key)
            .with_run(&run_id);
        let call = rec.now_ns();
        let checkout = classify(
            tokio::time::timeout(
                OP_TIMEOUT,
                as_agent.post(
                    &format!("/api/issues/{issue}/checkout"),
                    json!({ "agentId": target.agent_id, "expectedStatuses": ["todo", "in_progress"] }),
                ),
            )
            .await,
        );
        let action = Action::Checkout {
            issue_id: issue.clone(),
            agent_id: target.agent_id.clone(),
            run_id: run_id.clone(),
        };
        let holds = match checkout {
            Ok(body) => {
                let token = body["checkout"]["token"].as_u64();
                rec.record(
                    process,
                    call,
                    action,
                    ok(OkResult {
                        token,
                        ..OkResult::default()
                    }),
                );
                true
            }
            Err(outcome) => {
                let unknown = matches!(outcome, Outcome::Unknown { .. });
                rec.record(process, call, action, outcome);
                unknown
            }
        };
        if holds {
            let call = rec.now_ns();
            let comment = classify(
                tokio::time::timeout(
                    OP_TIMEOUT,
                    as_agent.post(
                        &format!("/api/issues/{issue}/comments"),
                        json!({ "body": format!("p{process}-{n}") }),
                    ),
                )
                .await,
            );
            let action = Action::Comment {
                issue_id: issue.clone(),
                run_id: Some(run_id.clone()),
            };
            match comment {
                Ok(body) => {
                    let comment_id = text(&body, "id")?;
                    let result = OkResult {
                        comment_id: Some(comment_id),
                        ..OkResult::default()
                    };
                    rec.record(process, call, action, ok(result));
                }
                Err(outcome) => rec.record(process, call, action, outcome),
            }
        }
        memory_entry(process, &as_agent, &target, &run_id, n, &rec).await;
        end_run(process, &target, &run_id, &mut rng, &rec).await;
    }
    Ok(())
}

/// The run logs a memory entry (one operation): the checkers then require it on every
/// replica, unless newer entries displaced it under the agent's cap.
async fn memory_entry(
    process: u64,
    as_agent: &Http,
    target: &Target,
    run_id: &str,
    n: u64,
    rec: &Recorder,
) {
    let call = rec.now_ns();
    let reply = classify(
        tokio::time::timeout(
            OP_TIMEOUT,
            as_agent.post(
                "/api/agents/me/memory/entries",
                json!({ "what": format!("p{process}-{n}"), "did": "checked out and commented" }),
            ),
        )
        .await,
    );
    let action = Action::MemoryEntry {
        agent_id: target.agent_id.clone(),
        run_id: Some(run_id.to_string()),
    };
    match reply {
        Ok(body) => {
            let result = OkResult {
                memory_entry_id: body["id"].as_str().map(String::from),
                memory_entry_seq: body["seq"].as_u64(),
                ..OkResult::default()
            };
            rec.record(process, call, action, ok(result));
        }
        Err(outcome) => rec.record(process, call, action, outcome),
    }
}

/// Ends the run, retrying with one idempotency key through other nodes (one operation). Once
/// an attempt's outcome is unknown the run may have ended, so only a later success changes
/// that: a later refusal (say, the run is already finished) keeps the operation unknown.
pub async fn end_run(
    process: u64,
    target: &Target,
    run_id: &str,
    rng: &mut StdRng,
    rec: &Recorder,
) {
    let key = format!("end-{run_id}");
    let call = rec.now_ns();
    let mut unknown: Option<Outcome> = None;
    let mut outcome = None;
    for attempt in 0..4 {
        if attempt > 0 {
            // Backoff before a retry (an election may be under way).
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let admin = target.admin(rng);
        let reply = classify(
            tokio::time::timeout(
                OP_TIMEOUT,
                admin.post_with_key(
                    &format!("/api/heartbeat-runs/{run_id}/finish"),
                    json!({ "status": "succeeded" }),
                    &key,
                ),
            )
            .await,
        );
        match reply {
            Ok(_) => {
                outcome = Some(ok(OkResult::default()));
                break;
            }
            Err(o @ Outcome::Failed { .. }) => {
                // Failed only if no earlier attempt may have ended the run.
                outcome = Some(unknown.take().unwrap_or(o));
                break;
            }
            Err(o) => unknown = Some(o),
        }
    }
    let outcome = outcome
        .or(unknown)
        .unwrap_or(Outcome::Unknown { reason: None });
    rec.record(
        process,
        call,
        Action::RunEnd {
            run_id: run_id.to_string(),
        },
        outcome,
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{issues_of_window, windows_for, ISSUES_PER_WINDOW, WINDOW};

    /// Regression: the clients contended for the same twelve issues for the whole run, and on a
    /// faster machine an issue's history passed the linearizability checker's 1,000 operations
    /// (INCONCLUSIVE in membership_change and worker_cut_off). Each window's issues are new and
    /// every second of the run, and of the drain after it, falls in one.
    #[test]
    fn each_window_contends_for_issues_no_other_window_touches() {
        let secs = 60;
        let issues: Vec<String> = (0..windows_for(secs) * ISSUES_PER_WINDOW)
            .map(|i| format!("issue-{i}"))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut previous: Option<&[String]> = None;
        for second in 0..secs + WINDOW.as_secs() {
            let window = issues_of_window(&issues, Duration::from_secs(second));
            assert_eq!(window.len(), ISSUES_PER_WINDOW, "at {second} s");
            if previous != Some(window) {
                for issue in window {
                    assert!(
                        seen.insert(issue.clone()),
                        "{issue} contended in two windows"
                    );
                }
                previous = Some(window);
            }
        }
        assert_eq!(seen.len(), issues.len(), "some issues were never contended");
        // Past the planned windows the last one stays open rather than going back.
        let late = issues_of_window(&issues, Duration::from_secs(10 * secs));
        assert_eq!(late, &issues[issues.len() - ISSUES_PER_WINDOW..]);
    }
}
