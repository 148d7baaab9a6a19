//! What each agent used in each UTC day (runs created, cost events' cents): derived from the
//! runs and cost events as they are put, rebuilt on load, read by the daily caps
//! (`rules/wake.rs`, `daily_cap`). Not pruned, like `runs_per_hour`: one entry per agent and
//! day it ran, far smaller than the runs kept.

use crate::state::State;
use crate::time::Timestamp;

/// What an agent used in one UTC day (`State::agent_day`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentDay {
    pub runs: u32,
    pub cents: u64,
}

/// The UTC day `at` falls in, as days since 1970-01-01.
pub fn utc_day(at: Timestamp) -> i64 {
    at.0.div_euclid(86_400_000)
}

impl State {
    /// The runs `agent_id` created and the cents its cost events spent in the UTC day `at`
    /// falls in.
    pub fn agent_day(&self, agent_id: &str, at: Timestamp) -> AgentDay {
        self.agent_days
            .get(&(agent_id.to_string(), utc_day(at)))
            .copied()
            .unwrap_or_default()
    }

    /// Adds a new run or a cost event to its agent's day.
    pub(crate) fn count_agent_day(&mut self, agent_id: &str, at: Timestamp, runs: u32, cents: u64) {
        let day = self
            .agent_days
            .entry((agent_id.to_string(), utc_day(at)))
            .or_default();
        day.runs = day.runs.saturating_add(runs);
        day.cents = day.cents.saturating_add(cents);
    }
}
