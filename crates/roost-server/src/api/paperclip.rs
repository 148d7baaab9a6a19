//! Reads that Paperclip's CLI and agents call and Roost answers from what it has: an issue's
//! runs, the live runs of an issue or a company, an issue's spend.

use roost_core::Run;

use super::views::{run_view, RunView};
use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// How many runs an issue's run list shows at most, newest first.
const MAX_ISSUE_RUNS: usize = 1000;

fn newest_first(runs: &mut [Run]) {
    runs.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| b.id.cmp(&a.id))
    });
}

impl Api {
    /// The runs made for an issue (`live_only`: those not ended), newest first.
    pub async fn issue_runs(
        &self,
        caller: &Caller,
        issue_id: &str,
        live_only: bool,
    ) -> Result<Vec<RunView>, ApiError> {
        let issue = self.get_issue(caller, issue_id).await?;
        let of_issue = |r: &&Run| r.issue_id.as_deref() == Some(issue.id.as_str());
        Ok(self.reader().read(|s| {
            let mut runs: Vec<Run> = if live_only {
                s.live_runs().filter(of_issue).cloned().collect()
            } else {
                s.runs.values().filter(of_issue).cloned().collect()
            };
            newest_first(&mut runs);
            runs.truncate(MAX_ISSUE_RUNS);
            runs.into_iter().map(|r| run_view(caller, s, r)).collect()
        }))
    }

    /// A company's runs not ended, newest first.
    pub async fn company_live_runs(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<RunView>, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        Ok(self.reader().read(|s| {
            let mut runs: Vec<Run> = s
                .live_runs()
                .filter(|r| r.company_id == company.id)
                .cloned()
                .collect();
            newest_first(&mut runs);
            runs.into_iter().map(|r| run_view(caller, s, r)).collect()
        }))
    }

    /// What an issue cost: the cost events naming it, in total and this month.
    pub async fn issue_cost_cents(
        &self,
        caller: &Caller,
        issue_id: &str,
    ) -> Result<(String, u64, u64), ApiError> {
        let issue = self.get_issue(caller, issue_id).await?;
        let month = roost_core::BudgetWindow::CalendarMonthUtc.key(super::now());
        Ok(self.reader().read(|s| {
            let (mut total, mut this_month) = (0u64, 0u64);
            for e in s
                .cost_events
                .values()
                .filter(|e| e.company_id == issue.company_id)
                .filter(|e| e.issue_id.as_deref() == Some(issue.id.as_str()))
            {
                total = total.saturating_add(e.cost_cents);
                if roost_core::BudgetWindow::CalendarMonthUtc.key(e.occurred_at) == month {
                    this_month = this_month.saturating_add(e.cost_cents);
                }
            }
            (issue.id.clone(), total, this_month)
        }))
    }
}
