//! The load of `roost-bench scale`: growing the population of issues with many concurrent
//! gRPC `CreateIssue` calls (progress on stderr), checkout/release cycles by agents on random
//! open issues (a 409, `ABORTED` on gRPC, is counted apart), and the latency of closing one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{
    CheckoutRequest, CreateIssueRequest, IssueStatus, ReleaseRequest, UpdateIssueRequest,
};
use roost_testkit::Http;
use serde_json::json;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::stats::us;

/// A channel to `addr` (host:port) with Nagle off and a per-call deadline.
pub async fn connect(addr: &str) -> anyhow::Result<Channel> {
    Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .connect()
        .await
        .with_context(|| format!("connect gRPC {addr}"))
}

fn request<T>(token: &str, run_id: Option<&str>, message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    if let Some(run) = run_id {
        req.metadata_mut().insert("x-roost-run-id", run.parse()?);
    }
    Ok(req)
}

/// splitmix64: a small deterministic generator (no dependency), one per client.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `1..=n` for n far below 2^64.
    pub fn pick(&mut self, n: u64) -> u64 {
        self.next() % n.max(1) + 1
    }
}

fn human_secs(s: f64) -> String {
    if !s.is_finite() {
        return "?".into();
    }
    let s = s.max(0.0) as u64;
    match s {
        0..=99 => format!("{s}s"),
        100..=5999 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

/// What a growth step did.
#[derive(Default)]
pub struct Growth {
    pub created: u64,
    pub elapsed: Duration,
    /// Calls that failed and were retried.
    pub retries: u64,
}

impl Growth {
    /// Adds a later part of the same step.
    pub fn add(&mut self, part: &Growth) {
        self.created += part.created;
        self.elapsed += part.elapsed;
        self.retries += part.retries;
    }
}

struct Grow {
    /// Issues still to create, claimed one at a time by the clients.
    left: AtomicU64,
    created: AtomicU64,
    retries: AtomicU64,
    failed: AtomicBool,
    first_error: Mutex<Option<String>>,
}

/// Creates `count` issues with `status` in the company with `clients` concurrent callers
/// over `channels`, printing progress every `progress` to stderr. A failed call is retried
/// (up to 20 times, with backoff) before the growth gives up.
#[allow(clippy::too_many_arguments)]
pub async fn grow(
    channels: &[Channel],
    admin_token: &str,
    company_id: &str,
    count: u64,
    status: IssueStatus,
    clients: usize,
    description: &str,
    progress: Duration,
    label: &str,
    population_before: u64,
) -> anyhow::Result<Growth> {
    anyhow::ensure!(!channels.is_empty(), "no gRPC channel");
    let state = Arc::new(Grow {
        left: AtomicU64::new(count),
        created: AtomicU64::new(0),
        retries: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        first_error: Mutex::new(None),
    });
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..clients.max(1) {
        let (state, channel) = (state.clone(), channels[i % channels.len()].clone());
        let (token, company, description) = (
            admin_token.to_string(),
            company_id.to_string(),
            description.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            let mut grpc = ControlClient::new(channel);
            while !state.failed.load(Ordering::Relaxed)
                && state
                    .left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(1))
                    .is_ok()
            {
                let mut attempt = 0u32;
                loop {
                    let message = CreateIssueRequest {
                        company_id: company.clone(),
                        title: format!("Scale issue from client {i}"),
                        description: (!description.is_empty()).then(|| description.clone()),
                        status: Some(status as i32),
                        ..Default::default()
                    };
                    let call = match request(&token, None, message) {
                        Ok(req) => grpc.create_issue(req).await.map_err(|s| s.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    match call {
                        Ok(_) => {
                            state.created.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                        Err(e) => {
                            attempt += 1;
                            state.retries.fetch_add(1, Ordering::Relaxed);
                            if attempt >= 20 {
                                state.failed.store(true, Ordering::Relaxed);
                                let mut first =
                                    state.first_error.lock().unwrap_or_else(|p| p.into_inner());
                                first.get_or_insert(e);
                                return;
                            }
                            tokio::time::sleep(Duration::from_millis(100 * attempt as u64)).await;
                        }
                    }
                }
            }
        }));
    }
    // Progress until every client is done.
    let (mut last_at, mut last_n) = (start, 0u64);
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if last_at.elapsed() < progress {
            continue;
        }
        let n = state.created.load(Ordering::Relaxed);
        let now = Instant::now();
        let recent = (n - last_n) as f64 / now.duration_since(last_at).as_secs_f64();
        let average = n as f64 / start.elapsed().as_secs_f64();
        eprintln!(
            "[{label}] {n}/{count} created (population {}), {recent:.0}/s now, {average:.0}/s average, {} retried, ETA {}",
            population_before + n,
            state.retries.load(Ordering::Relaxed),
            human_secs((count - n.min(count)) as f64 / recent.max(average).max(1e-9))
        );
        (last_at, last_n) = (now, n);
    }
    for t in tasks {
        t.await?;
    }
    if state.failed.load(Ordering::Relaxed) {
        let e = state
            .first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        anyhow::bail!("creating issues failed 20 times in a row: {e}");
    }
    Ok(Growth {
        created: state.created.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        retries: state.retries.load(Ordering::Relaxed),
    })
}

/// Latencies of closing an issue (`UpdateIssue` to `done`), `samples` times one at a time, on
/// the open issues `PREFIX-1`, `PREFIX-2`, ... (at most `open` of them), each reopened (`todo`,
/// not timed) before the next, so the population and its numbering stay as they were. A close
/// looks for the closed issue's parent's other children and for the issues it blocked.
pub async fn close_latencies(
    channel: &Channel,
    admin_token: &str,
    prefix: &str,
    open: u64,
    samples: usize,
) -> anyhow::Result<Vec<u64>> {
    let mut grpc = ControlClient::new(channel.clone());
    let mut out = Vec::with_capacity(samples);
    for n in 0..samples as u64 {
        let issue_id = format!("{prefix}-{}", n % open.max(1) + 1);
        let to = |status: IssueStatus| UpdateIssueRequest {
            issue_id: issue_id.clone(),
            status: Some(status as i32),
            ..Default::default()
        };
        let began = Instant::now();
        grpc.update_issue(request(admin_token, None, to(IssueStatus::Done))?)
            .await
            .with_context(|| format!("close {issue_id}"))?;
        out.push(us(began.elapsed()));
        grpc.update_issue(request(admin_token, None, to(IssueStatus::Todo))?)
            .await
            .with_context(|| format!("reopen {issue_id}"))?;
    }
    out.sort_unstable();
    Ok(out)
}

/// An agent with a key and a live run, as the checkout and etcd benches make them.
pub struct Agent {
    pub agent_id: String,
    pub key: String,
    pub run_id: String,
}

pub async fn make_agents(
    admin: &Http,
    company_id: &str,
    n: usize,
    tag: &str,
) -> anyhow::Result<Vec<Agent>> {
    let mut agents = Vec::with_capacity(n);
    for i in 0..n {
        let agent = admin
            .post(
                &format!("/api/companies/{company_id}/agents"),
                json!({ "name": format!("scale-{tag}-{i}") }),
            )
            .await?
            .ok()?;
        let agent_id = agent["id"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("agent without an id: {agent}"))?
            .to_string();
        let key = admin
            .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
            .await?
            .ok()?;
        let run = admin
            .post(&format!("/api/agents/{agent_id}/runs"), json!({}))
            .await?
            .ok()?;
        agents.push(Agent {
            agent_id,
            key: key["token"].as_str().unwrap_or_default().to_string(),
            run_id: run["id"].as_str().unwrap_or_default().to_string(),
        });
    }
    Ok(agents)
}

/// The result of a checkout load.
#[derive(Default)]
pub struct Cycles {
    /// Successful checkouts (each followed by a release), measured window only.
    pub checkouts: u64,
    /// Checkouts refused with a conflict (409 / `ABORTED`): the issue was held by another.
    pub conflicts: u64,
    /// Other failures (checkout or release).
    pub errors: u64,
    pub first_error: Option<String>,
    /// Latency of the successful checkouts, sorted, in µs.
    pub latencies_us: Vec<u64>,
    /// Successful checkouts in each whole second of the measured window (empty when the load
    /// runs to a count): a stall behind a background write shows as one slow second, not as
    /// a lower average.
    pub per_second: Vec<u64>,
    pub elapsed: Duration,
}

fn fail(out: &mut Cycles, what: &str, e: String) {
    out.errors += 1;
    out.first_error.get_or_insert(format!("{what}: {e}"));
}

/// Checkout then release by each agent on random issues `PREFIX-1..=population`, until
/// `seconds` have passed after `warmup` (not counted), or until `max_cycles` successful
/// cycles if given (then there is no warm-up).
pub async fn cycles(
    channels: &[Channel],
    agents: &[Agent],
    prefix: &str,
    population: u64,
    warmup: Duration,
    seconds: Duration,
    max_cycles: Option<u64>,
) -> anyhow::Result<Cycles> {
    let start = Instant::now();
    let measure_from = start + warmup;
    let until = measure_from + seconds;
    let done = Arc::new(AtomicU64::new(0));
    let whole_seconds = if max_cycles.is_some() {
        0
    } else {
        seconds.as_secs() as usize
    };
    let seconds_counted: Arc<Vec<AtomicU64>> =
        Arc::new((0..whole_seconds).map(|_| AtomicU64::new(0)).collect());
    anyhow::ensure!(!channels.is_empty(), "no gRPC channel");
    let mut tasks = Vec::new();
    for (i, a) in agents.iter().enumerate() {
        let mut grpc = ControlClient::new(channels[i % channels.len()].clone());
        let (agent_id, key, run_id) = (a.agent_id.clone(), a.key.clone(), a.run_id.clone());
        let (prefix, done) = (prefix.to_string(), done.clone());
        let seconds_counted = seconds_counted.clone();
        let seed = (i as u64 + 1) * 7919 + population;
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed);
            let mut out = Cycles::default();
            loop {
                let now = Instant::now();
                if let Some(max) = max_cycles {
                    if done.load(Ordering::Relaxed) >= max {
                        break;
                    }
                } else if now >= until {
                    break;
                }
                let counted = max_cycles.is_some() || now >= measure_from;
                let issue = format!("{prefix}-{}", rng.pick(population));
                let checkout = CheckoutRequest {
                    issue_id: issue.clone(),
                    agent_id: agent_id.clone(),
                    expected_statuses: vec![IssueStatus::Todo as i32],
                };
                let req = match request(&key, Some(&run_id), checkout) {
                    Ok(r) => r,
                    Err(e) => {
                        fail(&mut out, "checkout", e.to_string());
                        break;
                    }
                };
                let began = Instant::now();
                match grpc.checkout(req).await {
                    Ok(_) => {
                        if counted {
                            out.latencies_us.push(us(began.elapsed()));
                            out.checkouts += 1;
                            done.fetch_add(1, Ordering::Relaxed);
                            let second = began.saturating_duration_since(measure_from).as_secs();
                            if let Some(n) = seconds_counted.get(second as usize) {
                                n.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    Err(s) if s.code() == Code::Aborted => {
                        if counted {
                            out.conflicts += 1;
                        }
                        continue;
                    }
                    Err(s) => {
                        fail(&mut out, "checkout", s.to_string());
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                }
                let release = ReleaseRequest { issue_id: issue };
                let released = match request(&key, Some(&run_id), release) {
                    Ok(req) => grpc.release(req).await.map_err(|s| s.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = released {
                    fail(&mut out, "release", e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            out
        }));
    }
    let mut total = Cycles::default();
    for t in tasks {
        let c = t.await?;
        total.checkouts += c.checkouts;
        total.conflicts += c.conflicts;
        total.errors += c.errors;
        if total.first_error.is_none() {
            total.first_error = c.first_error;
        }
        total.latencies_us.extend(c.latencies_us);
    }
    total.elapsed = if max_cycles.is_some() {
        start.elapsed()
    } else {
        Instant::now().saturating_duration_since(measure_from)
    };
    total.latencies_us.sort_unstable();
    total.per_second = seconds_counted
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    Ok(total)
}
