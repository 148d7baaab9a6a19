//! What the rules and the servers ask of the replicated state (`state.rs`): budgets' spend
//! and reservations, counts kept as they change, and lookups by secondary keys. Reads only.

use std::collections::BTreeSet;

use crate::entity::*;
use crate::state::State;
use crate::time::Timestamp;

impl State {
    /// Cents spent in `policy`'s scope in the window `at` falls in.
    pub fn spent(&self, policy: &BudgetPolicy, at: Timestamp) -> u64 {
        self.spend
            .get(&(policy.scope_key(), policy.window_kind.key(at)))
            .copied()
            .unwrap_or(0)
    }

    /// Cents spent by a scope (a company or an agent) in the window `at` falls in.
    pub fn spent_in(
        &self,
        scope_type: BudgetScopeType,
        scope_id: &str,
        window: BudgetWindow,
        at: Timestamp,
    ) -> u64 {
        self.spend
            .get(&(scope_key(scope_type, scope_id), window.key(at)))
            .copied()
            .unwrap_or(0)
    }

    /// Cents reserved by live runs in `policy`'s scope, but `except` (a run being re-reserved).
    pub fn reserved(&self, policy: &BudgetPolicy, except: Option<&str>) -> u64 {
        self.live_runs()
            .filter(|r| Some(r.id.as_str()) != except)
            .filter(|r| {
                policy.applies_to(
                    &r.company_id,
                    &r.agent_id,
                    self.project_of(r.issue_id.as_deref()).as_deref(),
                )
            })
            .fold(0u64, |sum, r| sum.saturating_add(r.reserved_cents))
    }

    /// The project of an issue, if it has one. A closed issue in `state.db` only is found in
    /// the project index rather than read: budgets ask this for every live run.
    pub fn project_of(&self, issue_id: Option<&str>) -> Option<String> {
        let id = issue_id?;
        if self.issues.is_cold(id) {
            return (self.issues_by_project.iter())
                .find(|(_, ids)| ids.contains(id))
                .map(|(project, _)| project.clone());
        }
        self.issues.get(id).and_then(|i| i.project_id.clone())
    }

    /// The hard-stop budgets that bind a run of `agent` on an issue of `project` (if any).
    pub fn hard_budgets<'a>(
        &'a self,
        agent: &'a Agent,
        project: Option<&'a str>,
    ) -> impl Iterator<Item = &'a BudgetPolicy> {
        self.budget_policies.values().filter(move |p| {
            p.hard_stop_enabled && p.applies_to(&agent.company_id, &agent.id, project)
        })
    }

    /// The run a run-scoped API key belongs to (live or not: the caller checks).
    pub fn run_by_token_hash(&self, hash: &str) -> Option<&Run> {
        self.run_by_token.get(hash).and_then(|id| self.runs.get(id))
    }

    /// How many issues of `company_id` are neither done nor cancelled.
    pub fn open_issue_count(&self, company_id: &str) -> usize {
        self.open_issues.get(company_id).copied().unwrap_or(0)
    }

    /// How many runs `company_id` created in the clock hour `at` falls in.
    pub fn runs_in_hour(&self, company_id: &str, at: Timestamp) -> u32 {
        self.runs_per_hour
            .get(&(company_id.to_string(), crate::limits::hour_of(at)))
            .copied()
            .unwrap_or(0)
    }

    /// How many comments an issue has.
    pub fn comment_count(&self, issue_id: &str) -> usize {
        self.comments_of_issue
            .get(issue_id)
            .map_or(0, BTreeSet::len)
    }

    /// Runs in `queued`, `assigned` or `running`.
    pub fn live_runs(&self) -> impl Iterator<Item = &Run> {
        self.live_runs.iter().filter_map(|id| self.runs.get(id))
    }

    pub fn credential_by_token_hash(&self, hash: &str) -> Option<&Credential> {
        self.credential_by_hash
            .get(hash)
            .and_then(|id| self.credentials.get(id))
    }

    /// Issues by status (`tally.rs`), counted as they change.
    pub fn issue_status_counts(&self) -> &crate::tally::Tally {
        &self.issue_statuses
    }

    /// Heartbeat runs by status.
    pub fn run_status_counts(&self) -> &crate::tally::Tally {
        &self.run_statuses
    }

    /// Every wake recorded, by status and by reason.
    pub fn wake_counts(&self) -> (&crate::tally::Tally, &crate::tally::Tally) {
        (&self.wake_statuses, &self.wake_reasons)
    }

    pub fn company_by_prefix(&self, prefix: &str) -> Option<&Company> {
        self.company_by_prefix
            .get(prefix)
            .and_then(|id| self.companies.get(id))
    }
}
