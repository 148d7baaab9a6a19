//! The worker fleet as the API shows it: each registered worker with its live runs and, on the
//! leader, its lease; and the prefix of the join tokens workers register with.

use std::collections::BTreeMap;

pub use roost_core::views::WorkerView;
use roost_core::State;

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// What a worker join token starts with (minted by `credentials.rs`).
pub const WORKER_JOIN_PREFIX: &str = "rst_join_";

/// Live runs per worker id.
pub(super) fn live_runs_by_worker(state: &State) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for run in state.live_runs() {
        if let Some(worker) = run.worker_id.as_deref() {
            *counts.entry(worker).or_insert(0) += 1;
        }
    }
    counts
}

impl Api {
    /// Every registered worker with its live runs (administrators only).
    pub async fn list_workers(&self, caller: &Caller) -> Result<Vec<WorkerView>, ApiError> {
        caller.require_admin()?;
        self.barrier().await?;
        let mut workers: Vec<WorkerView> = self.reader().read(|s| {
            let busy = live_runs_by_worker(s);
            s.workers
                .values()
                .map(|w| WorkerView {
                    live_runs: busy.get(w.id.as_str()).copied().unwrap_or(0),
                    worker: w.clone(),
                    lease_expires_in_ms: None,
                })
                .collect::<Vec<_>>()
        });
        if let Some(plane) = self.worker_plane() {
            for w in &mut workers {
                w.lease_expires_in_ms = plane
                    .lease_left(&w.worker.id)
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            }
        }
        workers.sort_by(|a, b| {
            a.worker
                .registered_at
                .cmp(&b.worker.registered_at)
                .then_with(|| a.worker.id.cmp(&b.worker.id))
        });
        Ok(workers)
    }
}
