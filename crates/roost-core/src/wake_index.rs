//! The derived indexes over wakes (pending by agent and issue, pending by issue, queued in claim
//! order, deferred by the run they wait on, by idempotency key): how a wake's write keeps them, and the reads
//! that walk them, so that no rule or API read scans every wake ever made.

use crate::entity::{Wake, WakeStatus};
use crate::set_index::{link, unlink};
use crate::state::State;

impl State {
    /// Writes a wake and moves its entries in every index.
    pub(crate) fn put_wake(&mut self, w: Wake) {
        let old = self.wakes.get(&w.id);
        if old.is_none() {
            self.recent_wakes.insert(&w);
        }
        self.wake_statuses
            .moved(old.map(|o| o.status.as_str()), Some(w.status.as_str()));
        self.wake_reasons
            .moved(old.map(|o| o.reason.as_str()), Some(w.reason.as_str()));
        if let Some(old) = old {
            let slot = (old.agent_id.clone(), old.issue_id.clone());
            if self.pending_wakes.get(&slot) == Some(&old.id) {
                self.pending_wakes.remove(&slot);
            }
            self.queued_wakes.remove(&(old.seq, old.id.clone()));
            if let (true, Some(issue)) = (old.status.is_pending(), &old.issue_id) {
                unlink(&mut self.pending_by_issue, issue, &old.id);
            }
            if let Some(run) = &old.waiting_on_run {
                unlink(&mut self.deferred_on_run, run, &old.id);
            }
        }
        if w.status.is_pending() {
            self.pending_wakes
                .insert((w.agent_id.clone(), w.issue_id.clone()), w.id.clone());
            if let Some(issue) = &w.issue_id {
                link(&mut self.pending_by_issue, issue, &w.id);
            }
        }
        if w.status == WakeStatus::Queued {
            self.queued_wakes.insert((w.seq, w.id.clone()));
        }
        if let (WakeStatus::Deferred, Some(run)) = (w.status, &w.waiting_on_run) {
            link(&mut self.deferred_on_run, run, &w.id);
        }
        if let Some(key) = &w.idempotency_key {
            self.wake_keys
                .entry((w.agent_id.clone(), key.clone()))
                .or_insert_with(|| w.id.clone());
        }
        self.wakes.insert(w.id.clone(), w);
    }

    /// Every pending wake for `issue_id`, in id order, without a walk of other wakes.
    pub fn pending_wakes_for_issue<'a>(
        &'a self,
        issue_id: &'a str,
    ) -> impl Iterator<Item = &'a Wake> {
        (self.pending_by_issue.get(issue_id).into_iter())
            .flatten()
            .filter_map(|id| self.wakes.get(id))
    }

    /// The pending wake of `agent_id` for `issue_id` (or for no issue), if any.
    pub fn pending_wake(&self, agent_id: &str, issue_id: Option<&str>) -> Option<&Wake> {
        self.pending_wakes
            .get(&(agent_id.to_string(), issue_id.map(str::to_string)))
            .and_then(|id| self.wakes.get(id))
    }

    pub fn wake_by_key(&self, agent_id: &str, key: &str) -> Option<&Wake> {
        self.wake_keys
            .get(&(agent_id.to_string(), key.to_string()))
            .and_then(|id| self.wakes.get(id))
    }

    pub fn wakes_waiting_on(&self, run_id: &str) -> impl Iterator<Item = &Wake> {
        self.deferred_on_run
            .get(run_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.wakes.get(id))
    }

    /// Queued wakes, oldest first: the order they are claimed in.
    pub fn queued_wakes(&self) -> impl Iterator<Item = &Wake> {
        self.queued_wakes
            .iter()
            .filter_map(|(_, id)| self.wakes.get(id))
    }
}
