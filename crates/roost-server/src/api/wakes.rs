//! Wakes: asking for a run, and seeing what became of each request and why.
//!
//! A wakeup only records a wake. The leader's dispatcher turns queued wakes into runs on
//! workers later, asynchronously, so the answer to a wakeup usually carries no run yet; the wake
//! view's `blockedBy` says what it is waiting for.

use roost_core::scheduling::{budget_blocker, claim_blocker, quota_blocker, worker_suits};
pub use roost_core::views::{WakeFilter, WakeView, WakeupResult};
use roost_core::{Command, Outcome, Run, State, Wake, WakeReason, WakeStatus, Worker};
use serde_json::Value;

use super::views::run_view;
use super::workers::live_runs_by_worker;
use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// How many wakes a list returns when the caller does not say, and at most.
const DEFAULT_WAKE_LIMIT: usize = 100;
const MAX_WAKE_LIMIT: usize = 1000;

/// `POST /api/agents/{id}/wakeup`.
#[derive(Clone, Debug, Default)]
pub struct WakeupRequest {
    /// The issue the run is about: an id or a `PREFIX-N` identifier.
    pub issue_id: Option<String>,
    /// `on_demand` when absent.
    pub reason: Option<WakeReason>,
    /// Handed to the agent in a file named by `ROOST_WAKE_PAYLOAD_PATH` (and, up to 16 KiB, as
    /// `ROOST_WAKE_PAYLOAD_JSON`); a JSON object of at most 64 KiB.
    pub payload: Option<Value>,
    /// A repeat with the same key returns the first wake instead of recording another.
    pub idempotency_key: Option<String>,
}

/// How long a wakeup waits for the dispatcher to claim its wake, when an online worker could.
const CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a queued wake has not become a run; `None` for any other status.
pub fn blocked_by(state: &State, wake: &Wake) -> Option<String> {
    if wake.status != WakeStatus::Queued {
        return None;
    }
    Some(held_back(state, wake).unwrap_or_else(|| worker_wait(state, wake)))
}

/// What holds a queued wake back besides the workers: the agent and its limits, the
/// company's quota, a budget.
fn held_back(state: &State, wake: &Wake) -> Option<String> {
    let budget = || {
        let agent = state.agents.get(&wake.agent_id)?;
        budget_blocker(
            state,
            agent,
            state.project_of(wake.issue_id.as_deref()).as_deref(),
            super::now(),
        )
    };
    claim_blocker(state, wake)
        .or_else(|| quota_blocker(state, &wake.company_id, super::now()))
        .or_else(budget)
}

/// A claimable wake waits for the dispatcher; say whether any worker could take it at all, so
/// that a fleet without the agent's adapter or labels is visible rather than a silent wait.
fn worker_wait(state: &State, wake: &Wake) -> String {
    let Some(agent) = state.agents.get(&wake.agent_id) else {
        return "waiting for a worker".into();
    };
    let able: Vec<&Worker> = state
        .workers
        .values()
        .filter(|w| worker_suits(w, agent).is_ok())
        .collect();
    if able.is_empty() {
        let labels: Vec<String> = agent
            .placement_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let with_labels = if labels.is_empty() {
            String::new()
        } else {
            format!(" with labels {}", labels.join(","))
        };
        return format!(
            "waiting for a worker: none online runs the {} adapter{with_labels}",
            agent.adapter_type
        );
    }
    if !has_free_slot(state, &able) {
        "waiting for a worker: every worker that can run it is full".into()
    } else {
        "waiting for a worker".into()
    }
}

/// Whether one of `workers` has a slot its live runs leave free.
fn has_free_slot(state: &State, workers: &[&Worker]) -> bool {
    let busy = live_runs_by_worker(state);
    workers
        .iter()
        .any(|w| busy.get(w.id.as_str()).copied().unwrap_or(0) < w.slots as usize)
}

/// The run answering `wake`: its own, or for a wake merged into another, that one's.
fn answering_run(state: &State, wake: &Wake) -> Option<Run> {
    let answered = match &wake.coalesced_into {
        Some(into) => state.wakes.get(into)?,
        None => wake,
    };
    state.runs.get(answered.run_id.as_deref()?).cloned()
}

fn view(state: &State, wake: Wake) -> WakeView {
    let blocked_by = blocked_by(state, &wake);
    WakeView { wake, blocked_by }
}

impl Api {
    /// Asks for a run of `agent_id`. An agent may wake only itself; the state machine refuses
    /// anything else, and a wake it cannot act on is recorded with the reason (skipped,
    /// coalesced, deferred) rather than refused.
    pub async fn wakeup(
        &self,
        caller: &Caller,
        agent_id: &str,
        request: WakeupRequest,
    ) -> Result<WakeupResult, ApiError> {
        let payload = match request.payload {
            None | Some(Value::Null) => Value::Null,
            Some(object @ Value::Object(_)) => object,
            Some(_) => return Err(ApiError::bad_request("payload must be a JSON object")),
        };
        let issue_id = match request.issue_id.as_deref() {
            Some(issue) => Some(self.get_issue(caller, issue).await?.id),
            None => None,
        };
        let command = Command::Wakeup {
            id: new_id(),
            agent_id: agent_id.into(),
            issue_id,
            reason: request.reason.unwrap_or(WakeReason::OnDemand),
            payload,
            wake_key: request.idempotency_key,
        };
        let wake = expect_outcome!(self.submit(caller, command).await?, Outcome::Wake(w) => w)?;
        self.wait_for_claim(&wake.id).await;
        // This node has applied the write; show the wake as it is now (a repeated request's
        // outcome may be older than the wake).
        Ok(self.reader().read(|s| {
            let wake = s.wakes.get(&wake.id).cloned().unwrap_or(wake);
            let run = answering_run(s, &wake).map(|r| run_view(caller, s, r));
            WakeupResult {
                wake: view(s, wake),
                run,
            }
        }))
    }

    /// Waits (up to [`CLAIM_WAIT`]) while [`claim_expected`] says the dispatcher will claim the
    /// wake, so the answer can carry the run as Paperclip's does.
    async fn wait_for_claim(&self, wake_id: &str) {
        let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
        // A claim is a replicated write: look again only when this node applies an entry.
        let mut applied = self.reader().applied_watch();
        loop {
            applied.borrow_and_update();
            if !self.reader().read(|s| claim_expected(s, wake_id)) {
                return;
            }
            match tokio::time::timeout_at(deadline, applied.changed()).await {
                Ok(Ok(())) => {}
                // The deadline passed, or the node is stopping.
                _ => return,
            }
        }
    }

    /// A company's wakes, newest first (by the log index that created them).
    pub async fn list_wakes(
        &self,
        caller: &Caller,
        company_id: &str,
        filter: &WakeFilter,
    ) -> Result<Vec<WakeView>, ApiError> {
        self.get_company(caller, company_id).await?;
        let issue_id = match filter.issue_id.as_deref() {
            Some(issue) => Some(self.get_issue(caller, issue).await?.id),
            None => None,
        };
        let limit = filter
            .limit
            .unwrap_or(DEFAULT_WAKE_LIMIT)
            .clamp(1, MAX_WAKE_LIMIT);
        Ok(self.reader().read(|s| {
            let mut wakes: Vec<&Wake> = s
                .wakes
                .values()
                .filter(|w| w.company_id == company_id)
                .filter(|w| filter.agent_id.as_ref().is_none_or(|a| &w.agent_id == a))
                .filter(|w| filter.statuses.is_empty() || filter.statuses.contains(&w.status))
                .filter(|w| issue_id.is_none() || w.issue_id == issue_id)
                .collect();
            // Wakes made by one command share a sequence number; the id keeps the order stable.
            wakes.sort_by(|a, b| b.seq.cmp(&a.seq).then_with(|| b.id.cmp(&a.id)));
            wakes.truncate(limit);
            wakes.into_iter().map(|w| view(s, w.clone())).collect()
        }))
    }

    pub async fn get_wake(&self, caller: &Caller, wake_id: &str) -> Result<WakeView, ApiError> {
        self.barrier().await?;
        let wake = self
            .reader()
            .read(|s| s.wakes.get(wake_id).map(|w| view(s, w.clone())))
            .ok_or_else(|| ApiError::not_found("wake", wake_id))?;
        caller.check_company(&wake.wake.company_id, "wake", wake_id)?;
        Ok(wake)
    }

    /// "Why didn't my agent run?" for one wake: what a queued wake waits for, or `None` when it
    /// is not queued (its `statusReason` then says what became of it).
    pub async fn why_not_running(
        &self,
        caller: &Caller,
        wake_id: &str,
    ) -> Result<Option<String>, ApiError> {
        Ok(self.get_wake(caller, wake_id).await?.blocked_by)
    }
}

/// Whether the dispatcher is about to claim the wake: it is queued, nothing but the workers
/// holds it back, and a worker that suits its agent has a free slot.
pub(crate) fn claim_expected(state: &State, wake_id: &str) -> bool {
    let Some(wake) = state.wakes.get(wake_id) else {
        return false;
    };
    let Some(agent) = state.agents.get(&wake.agent_id) else {
        return false;
    };
    let able: Vec<&Worker> = state
        .workers
        .values()
        .filter(|w| worker_suits(w, agent).is_ok())
        .collect();
    wake.status == WakeStatus::Queued
        && held_back(state, wake).is_none()
        && has_free_slot(state, &able)
}

#[cfg(test)]
mod tests {
    use roost_core::{AdapterType, Command, Timestamp};

    use super::*;

    /// Applies `command` a millisecond after the one before.
    fn apply(state: &mut State, index: &mut u64, command: Command) {
        let at = Timestamp(1_800_000_000_000 + *index as i64);
        crate::test_state::apply(state, index, at, command);
    }

    /// Bug: a wakeup waited for the claim only while `blocked_by` said nothing held the wake
    /// back, but "waiting for a worker" always did, so it never waited and its answer never
    /// carried the run.
    #[test]
    fn a_queued_wake_with_a_free_fitting_worker_is_expected_to_be_claimed() {
        let (mut state, mut index) = (State::new(), 0);
        let company = Command::CreateCompany {
            id: "c".into(),
            name: "C".into(),
            issue_prefix: "C".into(),
        };
        apply(&mut state, &mut index, company);
        let agent = Command::CreateAgent {
            id: "a".into(),
            company_id: "c".into(),
            name: "a".into(),
            role: "engineer".into(),
            title: None,
            adapter_type: AdapterType::Process,
            adapter_config: serde_json::json!({}),
            heartbeat: Default::default(),
            placement_labels: Default::default(),
        };
        apply(&mut state, &mut index, agent);
        let wakeup = Command::Wakeup {
            id: "w".into(),
            agent_id: "a".into(),
            issue_id: None,
            reason: roost_core::WakeReason::OnDemand,
            payload: serde_json::Value::Null,
            wake_key: None,
        };
        apply(&mut state, &mut index, wakeup);
        assert!(
            !claim_expected(&state, "w"),
            "no worker: nothing to wait for"
        );
        assert!(blocked_by(&state, &state.wakes["w"]).is_some());
        let register = |adapters: Vec<AdapterType>, slots: u32| Command::RegisterWorker {
            worker_id: "wk".into(),
            name: "wk".into(),
            adapters,
            labels: Default::default(),
            slots,
            version: "test".into(),
        };
        apply(
            &mut state,
            &mut index,
            register(vec![AdapterType::Claude], 1),
        );
        assert!(!claim_expected(&state, "w"), "no worker runs its adapter");
        apply(
            &mut state,
            &mut index,
            register(vec![AdapterType::Process], 1),
        );
        assert!(claim_expected(&state, "w"), "a free fitting worker");
        assert!(!claim_expected(&state, "no-such-wake"));
    }
}
