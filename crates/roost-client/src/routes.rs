//! One method per route of the REST API (`crates/roost-server/src/rest/mod.rs`), grouped by resource.

use reqwest::{Method, StatusCode};
use roost_core::activity::ActivityEntry;
use roost_core::command::CompanyPatch;
use roost_core::{Agent, Comment, Company, Issue, IssueStatus, PauseReason, Run, RunStatus};
use serde_json::json;

use crate::types::{CheckoutBody, PauseBody, ToQuery};
use crate::{
    expect_success, ActivityPage, AgentUpdate, AuditReport, CommentPage, CreatedKey,
    HeartbeatContext, IssueFilter, IssueUpdate, IssueWithComment, NewAgent, NewCompany, NewIssue,
    Result, RoostClient, RunFilter, API,
};

impl RoostClient {
    // ---- companies ----

    pub async fn list_companies(&self) -> Result<Vec<Company>> {
        self.get(&[API, "companies"], &[]).await
    }

    pub async fn create_company(&self, company: &NewCompany) -> Result<Company> {
        self.post(&[API, "companies"], company).await
    }

    pub async fn get_company(&self, company_id: &str) -> Result<Company> {
        self.get(&[API, "companies", company_id], &[]).await
    }

    /// Renames, describes, pauses, archives or reactivates a company.
    pub async fn update_company(&self, company_id: &str, patch: &CompanyPatch) -> Result<Company> {
        self.send(
            Method::PATCH,
            &[API, "companies", company_id],
            &[],
            Some(patch),
        )
        .await
    }

    // ---- agents ----

    pub async fn list_agents(&self, company_id: &str) -> Result<Vec<Agent>> {
        self.get(&[API, "companies", company_id, "agents"], &[])
            .await
    }

    pub async fn create_agent(&self, company_id: &str, agent: &NewAgent) -> Result<Agent> {
        self.post(&[API, "companies", company_id, "agents"], agent)
            .await
    }

    pub async fn get_agent(&self, agent_id: &str) -> Result<Agent> {
        self.get(&[API, "agents", agent_id], &[]).await
    }

    pub async fn update_agent(&self, agent_id: &str, update: &AgentUpdate) -> Result<Agent> {
        self.send(Method::PATCH, &[API, "agents", agent_id], &[], Some(update))
            .await
    }

    /// The agent that owns the token (agent keys only).
    pub async fn me(&self) -> Result<Agent> {
        self.get(&[API, "agents", "me"], &[]).await
    }

    /// The calling agent's open assigned issues.
    pub async fn inbox(&self) -> Result<Vec<Issue>> {
        self.get(&[API, "agents", "me", "inbox-lite"], &[]).await
    }

    /// Pauses an agent; without a reason the server records `manual`.
    pub async fn pause_agent(&self, agent_id: &str, reason: Option<PauseReason>) -> Result<Agent> {
        self.post(&[API, "agents", agent_id, "pause"], &PauseBody { reason })
            .await
    }

    pub async fn resume_agent(&self, agent_id: &str) -> Result<Agent> {
        self.post(&[API, "agents", agent_id, "resume"], &json!({}))
            .await
    }

    pub async fn terminate_agent(&self, agent_id: &str) -> Result<Agent> {
        self.post(&[API, "agents", agent_id, "terminate"], &json!({}))
            .await
    }

    /// Terminates the agent and lets go of its work (Paperclip's delete).
    pub async fn delete_agent(&self, agent_id: &str) -> Result<Agent> {
        self.delete(&[API, "agents", agent_id]).await
    }

    /// Mints an API key for an agent; the secret is in the answer and nowhere else.
    pub async fn create_agent_key(&self, agent_id: &str, name: Option<&str>) -> Result<CreatedKey> {
        let body = match name {
            Some(n) => json!({ "name": n }),
            None => json!({}),
        };
        self.post(&[API, "agents", agent_id, "keys"], &body).await
    }

    // ---- issues ----

    pub async fn list_issues(&self, company_id: &str, filter: &IssueFilter) -> Result<Vec<Issue>> {
        self.get(&[API, "companies", company_id, "issues"], &filter.query())
            .await
    }

    pub async fn create_issue(&self, company_id: &str, issue: &NewIssue) -> Result<Issue> {
        self.post(&[API, "companies", company_id, "issues"], issue)
            .await
    }

    /// A subtask of `parent` (an id or `PREFIX-N`); `issue.parent_id` must be left unset.
    pub async fn create_child(&self, parent: &str, issue: &NewIssue) -> Result<Issue> {
        self.post(&[API, "issues", parent, "children"], issue).await
    }

    /// An issue by id or by identifier (`PREFIX-N`), as every `issues/{id}` route accepts.
    pub async fn get_issue(&self, issue: &str) -> Result<Issue> {
        Ok(self.issue_detail(issue).await?.issue)
    }

    /// An issue with its ancestors, the issues blocking it and those it blocks.
    pub async fn issue_detail(&self, issue: &str) -> Result<roost_core::views::IssueDetail> {
        self.get(&[API, "issues", issue], &[]).await
    }

    /// Deletes an issue (by id or identifier) with its comments; returns it as it was.
    pub async fn delete_issue(&self, issue: &str) -> Result<Issue> {
        self.delete(&[API, "issues", issue]).await
    }

    pub async fn update_issue(
        &self,
        issue: &str,
        update: &IssueUpdate,
    ) -> Result<IssueWithComment> {
        self.send(Method::PATCH, &[API, "issues", issue], &[], Some(update))
            .await
    }

    /// Fires the issue's scheduled monitor now (`POST /api/issues/{id}/monitor/check-now`).
    pub async fn check_issue_monitor(&self, issue: &str) -> Result<serde_json::Value> {
        self.post(
            &[API, "issues", issue, "monitor", "check-now"],
            &serde_json::json!({}),
        )
        .await
    }

    /// Takes the issue's lease for `agent_id` in the client's run (see [`Self::with_run_id`]),
    /// if the issue's status is one of `expected_statuses`.
    pub async fn checkout(
        &self,
        issue: &str,
        agent_id: &str,
        expected_statuses: &[IssueStatus],
    ) -> Result<Issue> {
        self.post(
            &[API, "issues", issue, "checkout"],
            &CheckoutBody {
                agent_id,
                expected_statuses,
            },
        )
        .await
    }

    pub async fn release(&self, issue: &str) -> Result<Issue> {
        self.post(&[API, "issues", issue, "release"], &json!({}))
            .await
    }

    pub async fn list_comments(&self, issue: &str, page: &CommentPage) -> Result<Vec<Comment>> {
        self.get(&[API, "issues", issue, "comments"], &page.query())
            .await
    }

    pub async fn add_comment(&self, issue: &str, body: &str) -> Result<Comment> {
        self.post(
            &[API, "issues", issue, "comments"],
            &json!({ "body": body }),
        )
        .await
    }

    pub async fn get_comment(&self, issue: &str, comment_id: &str) -> Result<Comment> {
        self.get(&[API, "issues", issue, "comments", comment_id], &[])
            .await
    }

    /// Deletes a comment the caller wrote; answers it emptied, with who deleted it and when.
    pub async fn delete_comment(&self, issue: &str, comment_id: &str) -> Result<Comment> {
        self.delete(&[API, "issues", issue, "comments", comment_id])
            .await
    }

    pub async fn heartbeat_context(
        &self,
        issue: &str,
        wake_comment_id: Option<&str>,
    ) -> Result<HeartbeatContext> {
        let query: Vec<(&str, String)> = wake_comment_id
            .map(|c| ("wakeCommentId", c.to_string()))
            .into_iter()
            .collect();
        self.get(&[API, "issues", issue, "heartbeat-context"], &query)
            .await
    }

    /// The live run holding the issue's checkout, if any.
    pub async fn active_run(&self, issue: &str) -> Result<Option<Run>> {
        self.get(&[API, "issues", issue, "active-run"], &[]).await
    }

    // ---- runs, activity, audit ----

    /// Starts a run for an agent by hand (administrators only), optionally on an issue.
    pub async fn start_run(&self, agent_id: &str, issue: Option<&str>) -> Result<Run> {
        let body = match issue {
            Some(i) => json!({ "issueId": i }),
            None => json!({}),
        };
        self.post(&[API, "agents", agent_id, "runs"], &body).await
    }

    pub async fn get_run(&self, run_id: &str) -> Result<Run> {
        self.get(&[API, "heartbeat-runs", run_id], &[]).await
    }

    pub async fn list_runs(&self, company_id: &str, filter: &RunFilter) -> Result<Vec<Run>> {
        self.get(
            &[API, "companies", company_id, "heartbeat-runs"],
            &filter.query(),
        )
        .await
    }

    /// Ends a run with a terminal status, releasing every checkout it holds.
    pub async fn finish_run(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<Run> {
        let body = match error {
            Some(e) => json!({ "status": status, "error": e }),
            None => json!({ "status": status }),
        };
        self.post(&[API, "heartbeat-runs", run_id, "finish"], &body)
            .await
    }

    pub async fn cancel_run(&self, run_id: &str) -> Result<Run> {
        self.post(&[API, "heartbeat-runs", run_id, "cancel"], &json!({}))
            .await
    }

    /// A company's activity log, newest first.
    pub async fn list_activity(
        &self,
        company_id: &str,
        page: &ActivityPage,
    ) -> Result<Vec<ActivityEntry>> {
        self.get(&[API, "companies", company_id, "activity"], &page.query())
            .await
    }

    /// Re-hashes the activity chain on the server (administrators only).
    pub async fn verify_audit(&self) -> Result<AuditReport> {
        self.get(&[API, "audit", "verify"], &[]).await
    }

    // ---- probes ----

    /// `GET /healthz`: the process answers HTTP.
    pub async fn health(&self) -> Result<()> {
        self.send_raw(Method::GET, &["healthz"], &[], None)
            .await
            .and_then(expect_success)
            .map(drop)
    }

    /// `GET /readyz`: whether the node knows a leader, has every committed write, and can serve.
    pub async fn ready(&self) -> Result<bool> {
        match self.send_raw(Method::GET, &["readyz"], &[], None).await? {
            (StatusCode::OK, _) => Ok(true),
            (StatusCode::SERVICE_UNAVAILABLE, _) => Ok(false),
            other => expect_success(other).map(|_| true),
        }
    }
}
