//! Runs in their minimal form: started by hand, finished, read and listed.

use roost_core::{Command, Outcome, Run, RunStatus};

use super::views::{run_view, RunView};
use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    pub async fn start_run(
        &self,
        caller: &Caller,
        agent_id: &str,
        issue: Option<&str>,
    ) -> Result<RunView, ApiError> {
        let issue_id = match issue {
            Some(i) => Some(self.get_issue(caller, i).await?.id),
            None => None,
        };
        let command = Command::StartRun {
            id: new_id(),
            agent_id: agent_id.into(),
            issue_id,
            invocation_source: "on_demand".into(),
        };
        self.run_outcome(caller, command).await
    }

    /// Proposes a command answered by a run, shown as `caller` may see it.
    async fn run_outcome(&self, caller: &Caller, command: Command) -> Result<RunView, ApiError> {
        let run = expect_outcome!(self.submit(caller, command).await?, Outcome::Run(r) => r)?;
        Ok(self.reader().read(|s| run_view(caller, s, run)))
    }

    pub async fn finish_run(
        &self,
        caller: &Caller,
        run_id: &str,
        status: RunStatus,
        error: Option<String>,
    ) -> Result<RunView, ApiError> {
        let command = Command::FinishRun {
            run_id: run_id.into(),
            status,
            error,
            report: Default::default(),
        };
        self.run_outcome(caller, command).await
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &str) -> Result<RunView, ApiError> {
        let run = self.visible_run(caller, run_id).await?;
        Ok(self.reader().read(|s| run_view(caller, s, run)))
    }

    /// The whole run, after a read barrier, if it is in the caller's company.
    pub(crate) async fn visible_run(&self, caller: &Caller, run_id: &str) -> Result<Run, ApiError> {
        self.barrier().await?;
        let run = self
            .reader()
            .read(|s| s.runs.get(run_id).cloned())
            .ok_or_else(|| ApiError::not_found("run", run_id))?;
        caller.check_company(&run.company_id, "run", run_id)?;
        Ok(run)
    }

    pub async fn list_runs(
        &self,
        caller: &Caller,
        company_id: &str,
        agent_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RunView>, ApiError> {
        self.get_company(caller, company_id).await?;
        Ok(self.reader().read(|s| {
            let mut runs: Vec<Run> = s
                .runs
                .values()
                .filter(|r| r.company_id == company_id && agent_id.is_none_or(|a| r.agent_id == a))
                .cloned()
                .collect();
            runs.sort_by(|a, b| {
                b.created_at
                    .cmp(&a.created_at)
                    .then_with(|| b.id.cmp(&a.id))
            });
            runs.truncate(limit.clamp(1, 1000));
            // Listings leave the log tails out; `GET /api/heartbeat-runs/{id}/log` has them.
            runs.into_iter()
                .map(|mut run| {
                    run.log_tail.clear();
                    run_view(caller, s, run)
                })
                .collect()
        }))
    }
}
