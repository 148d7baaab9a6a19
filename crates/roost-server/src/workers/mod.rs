//! The worker plane on the leader: connections and leases of workers, the dispatcher that turns
//! queued wakes into runs on workers, and the timer that wakes agents on their interval.
//! Followers keep none of it; they relay the workers that dial them to the leader (`relay.rs`).

mod agent_timer;
mod connection;
mod identity;
mod issue_sweep;
mod registry;
mod relay;
mod routine_timer;
mod spread;

use std::collections::BTreeMap;
use std::time::Duration;

use roost_core::scheduling::{
    budget_blocker, claim_blocker, exhausted, hard_incident_open, quota_blocker, worker_suits,
};
use roost_core::{task_key, Actor, Command, Outcome, Run, State, WakeReason, WorkerStatus};
use roost_proto::v1::{server_message, Assignment, IssueSummary, SkillFiles, WakeComment};
use roost_proto::ProtoEnum;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{debug, info, warn};

pub use agent_timer::{AgentTimer, Clock};

use crate::api::{new_id, Api};
use crate::auth::{generate_token, hash_token, Caller};
use crate::supervise::{Supervisor, TaskFailure};
pub(crate) use connection::WorkerService;
use registry::Registry;
use relay::Relay;
pub(crate) use relay::{RELAY_CONNECTION_WINDOW, RELAY_STREAM_WINDOW};
use spread::Spread;

/// How often workers renew their leases, and how long a lease lasts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// `heartbeat_interval_ms` is its name in configs written before the worker's lease renewal
    /// had its own name; both are read.
    #[serde(alias = "heartbeat_interval_ms")]
    pub renew_interval_ms: u64,
    /// A worker that has not renewed its lease for this long is lost.
    pub lease_ttl_ms: u64,
    /// The leader's renewals a second at most: past `max_renewals_per_sec * renew_interval_ms /
    /// 1000` connected workers, the interval and the lease stretch in proportion (Nomad scales
    /// its heartbeat TTLs with its node count the same way). 0: never stretched.
    pub max_renewals_per_sec: u64,
    /// Routines due at one instant are proposed spread over this window, each routine always
    /// at the same offset (`roost_core::routine::stagger_ms`; the routine timer).
    pub routine_stagger_window_ms: u64,
    /// A follower serves the workers that dial it through itself, over connections to the
    /// leader it shares among them (`relay.rs`); off, it sends them on to dial the leader.
    pub relay: bool,
    /// Workers the leader serves over connections of their own at most, with `relay` on: past
    /// it, one that dials the leader is sent to a follower, which relays it (`spread.rs`).
    /// 0: no bound.
    pub max_leader_connections: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            renew_interval_ms: 1000,
            lease_ttl_ms: 5000,
            max_renewals_per_sec: 1000,
            routine_stagger_window_ms: roost_core::routine::DEFAULT_STAGGER_WINDOW_MS,
            relay: true,
            max_leader_connections: 200,
        }
    }
}

/// How often a worker renews and how long its lease lasts, for a given fleet size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTerms {
    pub renew_interval_ms: u64,
    pub lease_ttl_ms: u64,
}

impl LeaseTerms {
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }
}

impl WorkerConfig {
    /// The terms for a leader with `workers` connected: the configured ones while the fleet
    /// renews at most `max_renewals_per_sec` times a second; beyond that, an interval of
    /// `workers / max_renewals_per_sec` seconds, and a lease longer by the same factor. At
    /// 10,000 workers and the defaults: every 10 s, lost after 50 s without a renewal.
    pub fn lease_terms(&self, workers: usize) -> LeaseTerms {
        let configured = LeaseTerms {
            renew_interval_ms: self.renew_interval_ms,
            lease_ttl_ms: self.lease_ttl_ms,
        };
        if self.max_renewals_per_sec == 0 || self.renew_interval_ms == 0 {
            return configured;
        }
        let needed = (workers as u128 * 1000).div_ceil(u128::from(self.max_renewals_per_sec));
        if needed <= u128::from(self.renew_interval_ms) {
            return configured;
        }
        let stretched = |ms: u64| {
            let v = u128::from(ms) * needed / u128::from(self.renew_interval_ms);
            u64::try_from(v).unwrap_or(u64::MAX)
        };
        LeaseTerms {
            renew_interval_ms: stretched(self.renew_interval_ms),
            lease_ttl_ms: stretched(self.lease_ttl_ms),
        }
    }
}

/// The worker plane of one node: a cheap `Clone` handle, one pointer, since each connected
/// worker's tasks hold one (ten thousand of them on one leader).
#[derive(Clone)]
pub(crate) struct Workers(std::sync::Arc<Inner>);

impl std::ops::Deref for Workers {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// What [`Workers`] points to.
pub(crate) struct Inner {
    api: Api,
    registry: Registry,
    relay: Relay,
    spread: Spread,
    config: WorkerConfig,
}

/// What the API and the metrics read of a node's worker plane.
struct Plane {
    registry: Registry,
    relay: Relay,
}

impl crate::api::WorkerPlane for Plane {
    fn connected_count(&self) -> usize {
        self.registry.connected_count()
    }

    fn relayed_count(&self) -> usize {
        self.relay.relayed()
    }

    fn lease_left(&self, worker_id: &str) -> Option<Duration> {
        self.registry.lease_left(worker_id)
    }
}

fn system() -> Caller {
    Caller {
        actor: Actor::system(),
        idempotency_key: None,
    }
}

/// The prefix of run-scoped API keys.
pub const RUN_TOKEN_PREFIX: &str = "rst_run_";

/// Comments sent with an assignment, the newest (a coalesced wake can carry many; the agent
/// reads the rest through the API).
const ASSIGNMENT_COMMENTS: usize = 50;
/// Issue descriptions and comment bodies are cut to this many bytes in an assignment.
const ASSIGNMENT_TEXT_BYTES: usize = 4096;

fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// What a worker needs to run `run`, with the run-scoped key `run_token` for the agent: the
/// agent, its adapter, the session to resume, and what the wake is about (the issue and the
/// comments that caused it, oldest first).
pub(crate) async fn assignment_for(api: &Api, run: &Run, run_token: String) -> Option<Assignment> {
    let mut assignment = api
        .reader()
        .read(|s| assignment_from_state(s, run, run_token))?;
    let skip = run.comment_ids.len().saturating_sub(ASSIGNMENT_COMMENTS);
    for id in &run.comment_ids[skip..] {
        match api.reader().comment(id).await {
            // Deleted by its author after the run was claimed (a pending wake lets go of it,
            // `roost-core/src/rules/comment.rs`): nothing of it is left to tell the agent, and
            // the wake's comment must not name it.
            Ok(Some(c)) if c.deleted_at.is_some() => assignment.comment_ids.retain(|i| *i != c.id),
            Ok(Some(c)) => assignment.comments.push(WakeComment {
                id: c.id,
                author: c.author_agent_id.or(c.author_user_id).unwrap_or_default(),
                body: cut(&c.body, ASSIGNMENT_TEXT_BYTES),
                created_at_ms: c.created_at.0,
            }),
            Ok(None) => {}
            Err(e) => debug!(run_id = %run.id, comment_id = %id, error = %e, "comment not read"),
        }
    }
    Some(assignment)
}

fn assignment_from_state(state: &State, run: &Run, run_token: String) -> Option<Assignment> {
    let agent = state.agents.get(&run.agent_id)?;
    let issue = run.issue_id.as_ref().and_then(|i| state.issues.get(i));
    Some(Assignment {
        run_id: run.id.clone(),
        company_id: run.company_id.clone(),
        agent_id: agent.id.clone(),
        agent_name: agent.name.clone(),
        issue_id: run.issue_id.clone(),
        wake_reason: run.wake_reason.map_or(0, WakeReason::to_proto),
        comment_ids: run.comment_ids.clone(),
        payload_json: run.payload.to_string(),
        adapter_type: agent.adapter_type.to_proto(),
        adapter_config_json: agent.adapter_config.to_string(),
        run_token,
        session_id: run.session_id_before.clone().unwrap_or_default(),
        session_rotated: run.session_rotated.clone().unwrap_or_default(),
        task_key: task_key(run.issue_id.as_deref()).to_string(),
        issue: issue.map(|i| IssueSummary {
            identifier: i.identifier.clone(),
            title: i.title.clone(),
            status: i.status.to_proto(),
            priority: i.priority.to_proto(),
            description: cut(
                i.description.as_deref().unwrap_or(""),
                ASSIGNMENT_TEXT_BYTES,
            ),
        }),
        comments: Vec::new(),
        skills: agent
            .desired_skills
            .iter()
            .filter_map(|key| {
                state
                    .skills
                    .values()
                    .find(|s| s.company_id == agent.company_id && s.key == *key)
            })
            .map(|s| SkillFiles {
                key: s.key.clone(),
                version: s.version,
                files: s.files.clone().into_iter().collect(),
            })
            .collect(),
    })
}

impl Workers {
    /// `max_streams`: the streams a node serves on one connection (`[limits]
    /// grpc_max_concurrent_streams`), which bounds the workers a follower relays on one.
    pub(crate) fn new(api: Api, config: WorkerConfig, max_streams: u32) -> Self {
        let (registry, relay) = (Registry::default(), Relay::new(max_streams));
        api.attach_worker_plane(std::sync::Arc::new(Plane {
            registry: registry.clone(),
            relay: relay.clone(),
        }));
        Workers(std::sync::Arc::new(Inner {
            api,
            registry,
            relay,
            spread: Spread::default(),
            config,
        }))
    }

    /// The leader's gRPC address when another node leads.
    fn leader_elsewhere(&self) -> Option<String> {
        let leadership = self.api.node().leadership();
        match leadership.leader_id {
            Some(l) if l != self.api.node().id() => leadership.leader_grpc_addr,
            _ => None,
        }
    }

    fn is_leader(&self) -> bool {
        self.api.node().leadership().is_leader
    }

    /// Where a worker that dials this leader is served (`spread.rs`): here, or at a follower
    /// whose answers to the leader's replication came within the last second.
    fn place(&self, worker_id: &str) -> spread::Placement {
        const IN_REACH: Duration = Duration::from_secs(1);
        self.spread.place(
            worker_id,
            self.config.max_leader_connections,
            || self.api.node().members_in_reach(IN_REACH),
            std::time::Instant::now(),
        )
    }

    /// Runs the leader's duties whenever this node leads, each under `tasks`, until `stop`
    /// flips or `tasks` gives up on a task (the node then stops Raft: lib.rs).
    pub(crate) async fn run(
        self,
        agent_timer: AgentTimer,
        tasks: Supervisor,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut metrics = self.api.node().leadership_watch();
        loop {
            if *stop.borrow() || tasks.failure().is_some() {
                self.registry.redirect_all("");
                return;
            }
            if self.is_leader() {
                self.become_leader();
                tokio::select! {
                    failure = self.duties(&agent_timer, &tasks) => {
                        warn!(%failure, "leader duties given up on; sending workers away");
                        self.registry.redirect_all("");
                        return;
                    }
                    () = self.until_not_leader() => {}
                    _ = stop.wait_for(|s| *s) => {
                        self.registry.redirect_all("");
                        return;
                    }
                }
                let addr = self.leader_elsewhere().unwrap_or_default();
                info!(
                    node_id = self.api.node().id(),
                    "leadership lost; redirecting workers"
                );
                self.registry.redirect_all(&addr);
            }
            let core_gone = tokio::select! {
                changed = metrics.changed() => changed.is_err(),
                _ = tasks.tripped() => false,
                _ = stop.wait_for(|s| *s) => {
                    self.registry.redirect_all("");
                    return;
                }
            };
            if core_gone {
                // The Raft core is gone (`/readyz` says so): nothing to lead until the node
                // stops. Returning early would read as a failure of this task.
                let _ = stop.wait_for(|s| *s).await;
                return;
            }
        }
    }

    /// The leader's duties, each restarted by `tasks` when it panics or returns (a panic in
    /// one once ended all three for good). Resolves when `tasks` gives up on one of
    /// them or on another of the node's tasks.
    async fn duties(&self, agent_timer: &AgentTimer, tasks: &Supervisor) -> TaskFailure {
        let dispatcher = || {
            let workers = self.clone();
            async move { workers.dispatch_loop().await }
        };
        let lease_keeper = || {
            let workers = self.clone();
            async move { workers.lease_loop().await }
        };
        let timer = || {
            let (agent_timer, api) = (agent_timer.clone(), self.api.clone());
            async move { agent_timer.run(api).await }
        };
        let routine_timer = || {
            let timer = routine_timer::RoutineTimer::new(
                Clock::system(),
                self.config.routine_stagger_window_ms,
            );
            let api = self.api.clone();
            async move { timer.run(api).await }
        };
        let escalation_timer = || {
            let sweep = issue_sweep::IssueSweep::escalations(Clock::system());
            let api = self.api.clone();
            async move { sweep.run(api).await }
        };
        let recovery_timer = || {
            let sweep = issue_sweep::IssueSweep::recoveries(Clock::system());
            let api = self.api.clone();
            async move { sweep.run(api).await }
        };
        let monitor_timer = || {
            let sweep = issue_sweep::IssueSweep::monitors(Clock::system());
            let api = self.api.clone();
            async move { sweep.run(api).await }
        };
        tokio::select! {
            failure = tasks.supervise("escalation timer", escalation_timer) => failure,
            failure = tasks.supervise("monitor timer", monitor_timer) => failure,
            failure = tasks.supervise("recovery timer", recovery_timer) => failure,
            failure = tasks.supervise("routine timer", routine_timer) => failure,
            failure = tasks.supervise("dispatcher", dispatcher) => failure,
            failure = tasks.supervise("lease keeper", lease_keeper) => failure,
            failure = tasks.supervise("agent timer", timer) => failure,
            failure = tasks.tripped() => failure,
        }
    }

    async fn until_not_leader(&self) {
        let mut metrics = self.api.node().leadership_watch();
        while self.is_leader() {
            if metrics.changed().await.is_err() {
                return;
            }
        }
    }

    /// Every worker the state knows as online gets a full lease from now: a leader change
    /// never expires a healthy worker.
    fn become_leader(&self) {
        // Terms for every worker the cluster ever registered, not the online ones: a worker may
        // hold a lease an earlier leader stretched for a larger fleet (a lease never shortens
        // while held), and one that cannot reach this node fences itself by that lease, so this
        // node must not declare it lost sooner. A fleet never connects more workers than it
        // registered, and worker rows are never removed.
        let (online, registered) = self.api.reader().read(|s| {
            let online: Vec<String> = (s.workers.values())
                .filter(|w| w.status == WorkerStatus::Online)
                .map(|w| w.id.clone())
                .collect();
            (online, s.workers.len())
        });
        info!(
            node_id = self.api.node().id(),
            workers = online.len(),
            "leading: workers get a full lease"
        );
        let ttl = self.config.lease_terms(registered).ttl();
        self.registry.grant_full_leases(online, ttl);
    }

    async fn lease_loop(&self) {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            for worker_id in self.registry.take_expired() {
                warn!(worker_id, "worker lease expired; declaring it lost");
                match self
                    .api
                    .submit(
                        &system(),
                        Command::WorkerLost {
                            worker_id: worker_id.clone(),
                        },
                    )
                    .await
                {
                    Ok(_) => self.api.metrics().lease_expired(),
                    Err(e) => {
                        warn!(worker_id, error = %e, "could not record a lost worker; retrying");
                        self.registry.renew(&worker_id, Duration::from_millis(200));
                    }
                }
            }
        }
    }

    async fn dispatch_loop(&self) {
        let mut applied = self.api.reader().applied_watch();
        loop {
            self.dispatch_once().await;
            tokio::select! {
                _ = applied.changed() => {}
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
    }

    /// Assigns every queued wake that can run to a connected worker with room for it.
    async fn dispatch_once(&self) {
        // In id order: ties between equally loaded workers go by id.
        let connected = self.registry.connected();
        if connected.is_empty() {
            return;
        }
        let now = crate::api::now();
        let plan: Vec<(String, String)> = self.api.reader().read(|s| {
            let mut load: BTreeMap<String, u32> = BTreeMap::new();
            for run in s.live_runs() {
                if let Some(w) = &run.worker_id {
                    *load.entry(w.clone()).or_default() += 1;
                }
            }
            let mut plan = Vec::new();
            for wake in s.queued_wakes().take(256) {
                if claim_blocker(s, wake).is_some()
                    || quota_blocker(s, &wake.company_id, now).is_some()
                {
                    continue;
                }
                let Some(agent) = s.agents.get(&wake.agent_id) else {
                    continue;
                };
                // A wake held back by a budget waits here, unless spend has used the budget
                // up and the claim must open the incident and pause the scope.
                let project = s.project_of(wake.issue_id.as_deref());
                let project = project.as_deref();
                if budget_blocker(s, agent, project, now).is_some()
                    && exhausted(s, agent, project, now)
                        .iter()
                        .all(|p| hard_incident_open(s, p))
                {
                    continue;
                }
                let previous = agent
                    .task_session(task_key(wake.issue_id.as_deref()))
                    .and_then(|t| t.worker_id.as_deref());
                let load_of = |w: &str| load.get(w).copied().unwrap_or(0);
                let chosen = choose_worker(&connected, previous, load_of, |w| {
                    s.workers.get(w).is_some_and(|worker| {
                        worker_suits(worker, agent).is_ok() && load_of(w) < worker.slots
                    })
                })
                .cloned();
                if let Some(w) = chosen {
                    *load.entry(w.clone()).or_default() += 1;
                    plan.push((wake.id.clone(), w));
                }
            }
            plan
        });
        for (wake_id, worker_id) in plan {
            // The key exists only here and in the assignment: the state keeps its hash.
            let token = generate_token(RUN_TOKEN_PREFIX);
            let command = Command::AssignRun {
                wake_id: wake_id.clone(),
                run_id: new_id(),
                worker_id: worker_id.clone(),
                token_hash: Some(hash_token(&token)),
            };
            match self.api.submit(&system(), command).await {
                Ok(Outcome::Run(run)) => {
                    if let Some(a) = assignment_for(&self.api, &run, token).await {
                        if !self
                            .registry
                            .send(&worker_id, server_message::Body::Assignment(a))
                        {
                            debug!(worker_id, run_id = %run.id, "worker not connected; the run is sent when it reconnects");
                        }
                    }
                }
                Ok(_) => debug!(wake_id, "wake deferred or skipped at claim"),
                Err(e) => debug!(wake_id, error = %e, "wake not assigned"),
            }
        }
    }
}

/// The worker a wake goes to, of the connected ones (`connected`, sorted by id) that `fits`:
/// the worker whose disk holds the agent's session for the task (`previous`), else the least
/// loaded, ties by id. One pass that stops at the first idle fit: it sorted every connected
/// worker for every wake, cloning each id at each comparison, and at 10,000 workers a wake's
/// reply waited 12.8 ms for that (BENCHMARKS.md "Workers: renewals at a bounded rate").
/// `connected` comes sorted from the registry, which sorts it again only when a connection
/// opens or closes.
fn choose_worker<'a>(
    connected: &'a [String],
    previous: Option<&str>,
    load_of: impl Fn(&str) -> u32,
    fits: impl Fn(&str) -> bool,
) -> Option<&'a String> {
    if let Some(p) = previous {
        if let Ok(at) = connected.binary_search_by(|w| w.as_str().cmp(p)) {
            if fits(p) {
                return connected.get(at);
            }
        }
    }
    let mut best: Option<(&String, u32)> = None;
    for w in connected {
        let load = load_of(w);
        // In id order, only a strictly lighter worker beats the one held.
        if best.is_some_and(|(_, held)| load >= held) || !fits(w) {
            continue;
        }
        best = Some((w, load));
        if load == 0 {
            break;
        }
    }
    best.map(|(w, _)| w)
}

#[cfg(test)]
mod choose_tests {
    use super::choose_worker;

    /// Regression (a_wake_sorted_every_connected_worker: at 10,000 workers a wake's reply took
    /// 12.8 ms): the one-pass choice picks what the sort picked.
    #[test]
    fn a_wake_goes_to_its_session_worker_else_the_least_loaded_fit_else_none() {
        let connected: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let load = |w: &str| match w {
            "a" => 2,
            "b" => 1,
            "c" => 1,
            _ => 3,
        };
        let all = |_: &str| true;
        let pick = |previous, fits: &dyn Fn(&str) -> bool| {
            choose_worker(&connected, previous, load, fits).map(String::as_str)
        };
        assert_eq!(pick(None, &all), Some("b"), "least loaded, then by id");
        assert_eq!(
            pick(Some("d"), &all),
            Some("d"),
            "the session's worker first"
        );
        assert_eq!(
            pick(Some("gone"), &all),
            Some("b"),
            "a session worker not connected"
        );
        assert_eq!(
            pick(Some("d"), &|w| w != "d"),
            Some("b"),
            "a session worker full"
        );
        assert_eq!(pick(None, &|w| w == "a" || w == "d"), Some("a"));
        assert_eq!(pick(None, &|_| false), None);
        let idle = |w: &str| u32::from(w != "c");
        assert_eq!(
            choose_worker(&connected, None, idle, all).map(String::as_str),
            Some("c")
        );
    }
}
