//! The wake and budget workload: an agent (the "waker") that the scenario's `roost run-worker`
//! runs, woken over the API by one client while another reports its costs against a small
//! hard budget; an operator raises the budget each time it stops the agent, and a sampler
//! reads the budget on random nodes (spent, reserved, limit at one applied index) for the
//! reservation checker. The wakes and cost reports are recorded as operations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use roost_check::{Action, BudgetObservation, OkResult, Outcome};
use roost_testkit::Http;
use serde_json::{json, Value};

use crate::text;
use crate::workload::{self, classify, ok, Recorder, Target, OP_TIMEOUT};

/// The waker's hard budget at the start, in cents: spent in roughly ten seconds of costs.
pub const INITIAL_LIMIT_CENTS: u64 = 100;
/// What the operator adds above spent + reserved when the budget stopped the agent.
const RAISE_CENTS: u64 = 100;
/// Cents each run of the waker holds while live; up to three run at once.
const RUN_RESERVE_CENTS: u64 = 10;

/// The woken agent: its id, its API key (for cost reports) and its hard budget policy.
#[derive(Clone, Debug)]
pub struct Waker {
    pub agent_id: String,
    pub key: String,
    pub policy_id: String,
}

impl Waker {
    /// The budget scope key of its policy.
    pub fn scope(&self) -> String {
        format!("agent:{}", self.agent_id)
    }
}

/// Creates the waker (a `process` agent that sleeps a moment and succeeds), its key, and a
/// hard agent budget of [`INITIAL_LIMIT_CENTS`].
pub async fn create_waker(admin: &Http, company_id: &str) -> anyhow::Result<Waker> {
    let heartbeat = json!({ "enabled": false, "wakeOnDemand": true, "maxConcurrentRuns": 3,
                            "skipWhenIdle": true, "runReserveCents": RUN_RESERVE_CENTS });
    let agent = admin
        .post(
            &format!("/api/companies/{company_id}/agents"),
            json!({ "name": "waker", "adapterType": "process", "heartbeat": heartbeat,
                    "adapterConfig": { "command": "sh", "args": ["-c", "sleep 0.2"] } }),
        )
        .await?
        .ok()?;
    let agent_id = text(&agent, "id")?;
    let key = admin
        .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
        .await?
        .ok()?;
    let policy = admin
        .post(
            &format!("/api/companies/{company_id}/budgets/policies"),
            json!({ "scopeType": "agent", "scopeId": agent_id,
                    "amount": INITIAL_LIMIT_CENTS, "hardStopEnabled": true }),
        )
        .await?
        .ok()?;
    Ok(Waker {
        agent_id,
        key: text(&key, "token")?,
        policy_id: text(&policy, "id")?,
    })
}

/// Wakes the waker every 150-450 ms through a random node, on no issue or on one of the
/// contended issues (a wake on an issue another agent's run holds is deferred). An
/// acknowledged wake without its id ends the client with an error.
pub async fn wake_client(
    process: u64,
    target: Target,
    seed: u64,
    deadline: Instant,
    rec: Arc<Recorder>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ (process * 0x51_7CC1));
    let mut n = 0u64;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(150..450))).await;
        n += 1;
        let issue = match rng.gen_range(0..=workload::ISSUES_PER_WINDOW) {
            0 => None,
            _ => Some(target.contended_issue(&mut rng)),
        };
        let mut body = json!({ "idempotencyKey": format!("wake-{process}-{n}") });
        if let Some(i) = &issue {
            body["issueId"] = json!(i);
        }
        let admin = target.admin(&mut rng);
        let call = rec.now_ns();
        let reply = classify(
            tokio::time::timeout(
                OP_TIMEOUT,
                admin.post(
                    &format!("/api/agents/{}/wakeup", target.waker.agent_id),
                    body,
                ),
            )
            .await,
        );
        let action = Action::Wake {
            agent_id: target.waker.agent_id.clone(),
            issue_id: issue,
        };
        let outcome = match reply {
            Ok(body) => ok(OkResult {
                wake_id: Some(text(&body["wake"], "id")?),
                ..OkResult::default()
            }),
            Err(outcome) => outcome,
        };
        rec.record(process, call, action, outcome);
    }
    Ok(())
}

/// Reports 1-5 cents of the waker's cost every 200-400 ms through a random node, with the
/// waker's key (an agent's cost report is never refused for the budget). An acknowledged
/// report without its event's id ends the client with an error.
pub async fn cost_client(
    process: u64,
    target: Target,
    seed: u64,
    deadline: Instant,
    rec: Arc<Recorder>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ (process * 0xC0_57));
    let mut n = 0u64;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(200..400))).await;
        n += 1;
        let cents: u64 = rng.gen_range(1..=5);
        let as_waker = target
            .http(target.pick_url(&mut rng))
            .with_token(&target.waker.key);
        let call = rec.now_ns();
        let reply = classify(
            tokio::time::timeout(
                OP_TIMEOUT,
                as_waker.post_with_key(
                    &format!("/api/companies/{}/cost-events", target.company_id),
                    json!({ "provider": "faults", "model": "seeded", "costCents": cents }),
                    &format!("cost-{process}-{n}"),
                ),
            )
            .await,
        );
        let action = Action::CostReport {
            agent_id: target.waker.agent_id.clone(),
            run_id: None,
            amount_cents: cents,
        };
        let outcome = match reply {
            Ok(body) => ok(OkResult {
                cost_event_id: Some(text(&body, "id")?),
                ..OkResult::default()
            }),
            Err(outcome) => outcome,
        };
        rec.record(process, call, action, outcome);
    }
    Ok(())
}

/// The company's budget overview through `admin`, or `None` if it did not answer in time or
/// refused.
async fn budget_overview(admin: &Http, target: &Target) -> Option<Value> {
    let path = format!("/api/companies/{}/budgets/overview", target.company_id);
    tokio::time::timeout(OP_TIMEOUT, admin.get(&path))
        .await
        .ok()?
        .ok()?
        .ok()
        .ok()
}

/// The waker's policy in a budget overview.
fn waker_policy<'a>(overview: &'a Value, target: &Target) -> Option<&'a Value> {
    overview["policies"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == target.waker.policy_id)
}

/// The open hard incident of the waker's policy and the amount to raise it to: `Ok(None)` if
/// the budget does not stop the agent, `Err(())` if the overview could not be read.
async fn open_hard_incident(admin: &Http, target: &Target) -> Result<Option<(String, u64)>, ()> {
    let overview = budget_overview(admin, target).await.ok_or(())?;
    let incidents = overview["incidents"].as_array().ok_or(())?;
    let Some(incident) = incidents.iter().find(|i| {
        i["kind"] == "hard" && i["status"] == "open" && i["policyId"] == target.waker.policy_id
    }) else {
        return Ok(None);
    };
    let policy = waker_policy(&overview, target).ok_or(())?;
    let used = policy["spent"].as_u64().ok_or(())? + policy["reserved"].as_u64().ok_or(())?;
    let id = incident["id"].as_str().ok_or(())?;
    Ok(Some((id.to_string(), used + RAISE_CENTS)))
}

/// What one raise attempt came to.
#[derive(Debug)]
enum Raise {
    /// The budget does not stop the agent: nothing to raise.
    NotStopped,
    Raised,
    /// A definite refusal (4xx).
    Refused(Outcome),
    /// The overview could not be read, or the raise's outcome is unknown.
    Unknown,
}

/// One raise: resolves the open hard incident with `raise_and_resume`, recorded.
async fn raise_once(process: u64, target: &Target, rng: &mut StdRng, rec: &Recorder) -> Raise {
    let admin = target.admin(rng);
    let (incident, amount) = match open_hard_incident(&admin, target).await {
        Ok(Some(found)) => found,
        Ok(None) => return Raise::NotStopped,
        Err(()) => return Raise::Unknown,
    };
    let call = rec.now_ns();
    let reply = classify(
        tokio::time::timeout(
            OP_TIMEOUT,
            admin.post(
                &format!(
                    "/api/companies/{}/budget-incidents/{incident}/resolve",
                    target.company_id
                ),
                json!({ "action": "raise_and_resume", "amount": amount }),
            ),
        )
        .await,
    );
    let action = Action::Other {
        name: "raise_budget".into(),
        write: true,
    };
    let (outcome, raise) = match reply {
        Ok(_) => (ok(OkResult::default()), Raise::Raised),
        Err(o @ Outcome::Failed { .. }) => (o.clone(), Raise::Refused(o)),
        Err(o) => (o, Raise::Unknown),
    };
    rec.record(process, call, action, outcome);
    raise
}

/// The operator: about once a second, raises the waker's budget if it stopped the agent.
pub async fn operator(
    process: u64,
    target: Target,
    seed: u64,
    deadline: Instant,
    rec: Arc<Recorder>,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ (process * 0x0_BEEF));
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(700..1300))).await;
        // Whatever this attempt came to, the next one looks again.
        raise_once(process, &target, &mut rng, &rec).await;
    }
    Ok(())
}

/// Reads the waker's budget on random nodes until `deadline`, a sample every 100-300 ms. A
/// sample counts only if the node's applied index was the same before and after the budget
/// read, so the numbers belong to that index; under load that takes a few tries (at once,
/// at most 20 in a row).
pub async fn sample_budget(target: Target, seed: u64, deadline: Instant) -> Vec<BudgetObservation> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xB0D6E7);
    let mut samples = Vec::new();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(100..300))).await;
        for _try in 0..20 {
            let admin = target.admin(&mut rng);
            if let Some(o) = budget_at_one_index(&admin, &target).await {
                samples.push(o);
                break;
            }
        }
    }
    samples
}

async fn node_index(admin: &Http) -> Option<(u64, u64)> {
    let r = tokio::time::timeout(OP_TIMEOUT, admin.get("/api/cluster/node"))
        .await
        .ok()?
        .ok()?;
    Some((r.body["id"].as_u64()?, r.body["stateIndex"].as_u64()?))
}

async fn budget_at_one_index(admin: &Http, target: &Target) -> Option<BudgetObservation> {
    let (node, before) = node_index(admin).await?;
    let overview = budget_overview(admin, target).await?;
    let (_, after) = node_index(admin).await?;
    if before != after {
        return None;
    }
    let policy = waker_policy(&overview, target)?;
    Some(BudgetObservation {
        node: format!("n{node}"),
        applied_index: before,
        scope: target.waker.scope(),
        spent_cents: policy["spent"].as_u64()?,
        reserved_cents: policy["reserved"].as_u64()?,
        limit_cents: policy["amount"].as_u64()?,
    })
}

/// After the heal, every 200 ms until none of the waker's wakes is queued: the operator raises
/// the budget if it stops the agent (a refusal ends it). A wake still queued after `patience`
/// is left for the wake checker to report.
pub async fn settle(target: &Target, rec: &Recorder, patience: Duration) {
    let mut rng = StdRng::seed_from_u64(0x5E771E);
    let give_up = Instant::now() + patience;
    let queued = format!(
        "/api/companies/{}/wakes?agentId={}&status=queued&limit=1000",
        target.company_id, target.waker.agent_id
    );
    // Raise and wait in one loop: a queued wake the scheduler tries while the drain is under
    // way can stop the agent again (regression: worker_cut_off seed 269793, a hard incident
    // opened after the last raise and the wake behind it never ran).
    loop {
        if let Raise::Refused(o) = raise_once(u64::MAX - 1, target, &mut rng, rec).await {
            println!("the last raise of the waker's budget was refused: {o:?}");
            break;
        }
        let admin = target.admin(&mut rng);
        let drained = async {
            let wakes = admin.get(&queued).await.ok()?.ok().ok()?;
            Some(wakes.as_array()?.is_empty())
        }
        .await;
        if drained == Some(true) {
            return;
        }
        if Instant::now() >= give_up {
            println!("the waker's wakes are still queued after {patience:?}");
            return;
        }
        // Backoff: look again whether the budget stops the agent and the wakes ran.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the wake and budget workload did, for the report: acknowledged wakes by where they
/// ended on one replica, acknowledged cost reports, and the budget samples.
pub fn summary(
    ops: &[roost_check::Op],
    replica: &roost_check::ReplicaSnapshot,
    samples: &[BudgetObservation],
) -> WorkloadSummary {
    use roost_check::WakeStatus;
    let mut s = WorkloadSummary::default();
    for op in ops {
        match (&op.action, op.ok_result()) {
            (Action::Wake { .. }, Some(r)) => {
                s.wakes_acknowledged += 1;
                let status = r
                    .wake_id
                    .as_ref()
                    .and_then(|w| replica.wakes.get(w))
                    .map(|w| w.status);
                match status {
                    Some(WakeStatus::Claimed) => s.wakes_ran += 1,
                    Some(WakeStatus::Coalesced) => s.wakes_coalesced += 1,
                    Some(WakeStatus::Skipped) => s.wakes_skipped += 1,
                    Some(WakeStatus::Deferred) => s.wakes_deferred += 1,
                    _ => {}
                }
            }
            (Action::CostReport { amount_cents, .. }, Some(_)) => {
                s.costs_acknowledged += 1;
                s.cents_acknowledged += amount_cents;
            }
            (Action::Other { name, .. }, Some(_)) if name == "raise_budget" => s.raises += 1,
            _ => {}
        }
    }
    s.samples = samples.len();
    s.samples_reserving = samples.iter().filter(|o| o.reserved_cents > 0).count();
    s.max_reserved = samples.iter().map(|o| o.reserved_cents).max().unwrap_or(0);
    s
}

#[derive(Debug, Default)]
pub struct WorkloadSummary {
    pub wakes_acknowledged: usize,
    pub wakes_ran: usize,
    pub wakes_coalesced: usize,
    pub wakes_skipped: usize,
    pub wakes_deferred: usize,
    pub costs_acknowledged: usize,
    pub cents_acknowledged: u64,
    pub raises: usize,
    pub samples: usize,
    pub samples_reserving: usize,
    pub max_reserved: u64,
}

impl WorkloadSummary {
    /// Whether the wake and reservation checkers had something to check: wakes acknowledged
    /// and run, cost reports acknowledged, budget samples with reservations, and the hard
    /// limit reached at least once (the operator raised it).
    pub fn nothing_to_check(&self) -> Option<String> {
        let missing = [
            (self.wakes_acknowledged == 0, "no acknowledged wake"),
            (self.wakes_ran == 0, "no acknowledged wake ran"),
            (self.costs_acknowledged == 0, "no acknowledged cost report"),
            (self.samples < 5, "fewer than 5 budget samples"),
            (
                self.samples_reserving == 0,
                "no budget sample with a reservation",
            ),
            (self.raises == 0, "the hard limit never stopped the agent"),
        ];
        let reasons: Vec<&str> = missing
            .iter()
            .filter(|(missing, _)| *missing)
            .map(|(_, why)| *why)
            .collect();
        (!reasons.is_empty()).then(|| reasons.join(", "))
    }
}

impl std::fmt::Display for WorkloadSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "wakes: {} acknowledged, {} ran, {} coalesced, {} skipped, {} deferred\n\
             costs: {} reports acknowledged ({} cents); the operator raised the hard limit {} times\n\
             budget: {} samples at one applied index, {} with reservations (max {} cents)",
            self.wakes_acknowledged,
            self.wakes_ran,
            self.wakes_coalesced,
            self.wakes_skipped,
            self.wakes_deferred,
            self.costs_acknowledged,
            self.cents_acknowledged,
            self.raises,
            self.samples,
            self.samples_reserving,
            self.max_reserved
        )
    }
}
