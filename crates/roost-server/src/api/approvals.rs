//! Approvals: every member of a company reads its approvals; agents and
//! administrators ask; administrators decide. The state machine checks each write
//! (`roost-core/src/rules/approval.rs`).

use roost_core::approval::{
    Approval, ApprovalComment, ApprovalDecision, ApprovalStatus, ApprovalType,
};
use roost_core::{Agent, Command, Issue, Outcome};

use super::views::agent_view;
use super::{expect_outcome, new_id, Api, NewAgent};
use crate::auth::Caller;
use crate::error::ApiError;

/// `POST /api/companies/{cid}/approvals`, as Paperclip sends it.
pub struct NewApproval {
    pub approval_type: ApprovalType,
    pub payload: serde_json::Value,
    pub requested_by_agent_id: Option<String>,
    pub issue_ids: Vec<String>,
}

impl Api {
    pub async fn list_approvals(
        &self,
        caller: &Caller,
        company_id: &str,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<Approval>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut list: Vec<Approval> = self.reader().read(|s| {
            s.approvals
                .approvals
                .values()
                .filter(|a| a.company_id == company_id && status.is_none_or(|st| a.status == st))
                .cloned()
                .collect()
        });
        list.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        Ok(list)
    }

    pub async fn get_approval(&self, caller: &Caller, id: &str) -> Result<Approval, ApiError> {
        self.barrier().await?;
        let a = self
            .reader()
            .read(|s| s.approvals.approvals.get(id).cloned())
            .ok_or_else(|| ApiError::not_found("approval", id))?;
        caller.check_company(&a.company_id, "approval", id)?;
        Ok(a)
    }

    /// The issues an approval links (those still present).
    pub async fn approval_issues(&self, caller: &Caller, id: &str) -> Result<Vec<Issue>, ApiError> {
        let a = self.get_approval(caller, id).await?;
        Ok(self.reader().read(|s| {
            a.issue_ids
                .iter()
                .filter_map(|i| s.issues.get(i).map(std::borrow::Cow::into_owned))
                .collect()
        }))
    }

    /// The approvals linked to an issue (`GET /api/issues/{id}/approvals`).
    pub async fn issue_approvals(
        &self,
        caller: &Caller,
        issue_ref: &str,
    ) -> Result<Vec<Approval>, ApiError> {
        let issue = self.get_issue(caller, issue_ref).await?;
        Ok(self.reader().read(|s| {
            s.approvals
                .approvals
                .values()
                .filter(|a| a.issue_ids.contains(&issue.id))
                .cloned()
                .collect()
        }))
    }

    pub async fn create_approval(
        &self,
        caller: &Caller,
        company_id: &str,
        new: NewApproval,
    ) -> Result<Approval, ApiError> {
        let command = Command::CreateApproval {
            id: new_id(),
            company_id: company_id.into(),
            approval_type: new.approval_type,
            payload: new.payload,
            requested_by_agent_id: new.requested_by_agent_id,
            issue_ids: new.issue_ids,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Approval(a) => a)
    }

    pub async fn decide_approval(
        &self,
        caller: &Caller,
        id: &str,
        decision: ApprovalDecision,
        decision_note: Option<String>,
    ) -> Result<Approval, ApiError> {
        let command = Command::DecideApproval {
            approval_id: id.into(),
            decision,
            decision_note,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Approval(a) => a)
    }

    /// Paperclip's `POST /api/agents/{id}/approve`: approves the open `hire_agent` approval of
    /// an agent hired pending approval, which activates it (`rules/approval.rs`). An agent in
    /// any other status is a 409, as in Paperclip. Between the read and the decision another
    /// administrator may decide: approving again changes nothing, a rejection is refused.
    pub async fn approve_agent(&self, caller: &Caller, agent_id: &str) -> Result<Agent, ApiError> {
        caller.require_admin()?;
        let agent = self.get_agent(caller, agent_id).await?;
        let not_pending = |why: String| ApiError::Domain(roost_core::DomainError::conflict(why));
        if agent.status != roost_core::AgentStatus::PendingApproval {
            return Err(not_pending(format!(
                "agent {agent_id} is {}: only an agent pending approval can be approved",
                agent.status
            )));
        }
        let approval_id = self
            .reader()
            .read(|s| {
                s.approvals
                    .approvals
                    .values()
                    .find(|a| a.agent_id.as_deref() == Some(agent_id) && a.status.is_open())
                    .map(|a| a.id.clone())
            })
            .ok_or_else(|| {
                not_pending(format!(
                    "agent {agent_id} has no open hire approval left to approve"
                ))
            })?;
        self.decide_approval(caller, &approval_id, ApprovalDecision::Approve, None)
            .await?;
        self.get_agent(caller, agent_id).await
    }

    pub async fn resubmit_approval(
        &self,
        caller: &Caller,
        id: &str,
        payload: Option<serde_json::Value>,
    ) -> Result<Approval, ApiError> {
        let command = Command::ResubmitApproval {
            approval_id: id.into(),
            payload,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Approval(a) => a)
    }

    pub async fn comment_approval(
        &self,
        caller: &Caller,
        id: &str,
        body: String,
    ) -> Result<ApprovalComment, ApiError> {
        let command = Command::AddApprovalComment {
            approval_id: id.into(),
            comment_id: new_id(),
            body,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::ApprovalComment(c) => c)
    }

    /// Links (`linked`) or unlinks an approval and an issue (`POST /api/issues/{id}/approvals`,
    /// `DELETE /api/issues/{id}/approvals/{approvalId}`); answers the approval.
    pub async fn link_issue_approval(
        &self,
        caller: &Caller,
        issue_ref: &str,
        approval_id: &str,
        linked: bool,
    ) -> Result<Approval, ApiError> {
        let command = Command::LinkApprovalIssue {
            approval_id: approval_id.into(),
            issue_id: self.resolve_issue_id(caller, issue_ref)?,
            linked,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Approval(a) => a)
    }

    /// `POST /api/companies/{cid}/agent-hires`: the agent, and its `hire_agent` approval when
    /// the company requires one.
    pub async fn hire_agent(
        &self,
        caller: &Caller,
        company_id: &str,
        new: NewAgent,
        payload: serde_json::Value,
    ) -> Result<(Agent, Option<Approval>), ApiError> {
        let agent = Command::CreateAgent {
            id: new_id(),
            company_id: company_id.into(),
            name: new.name,
            role: new.role,
            title: new.title,
            adapter_type: new.adapter_type,
            adapter_config: new.adapter_config,
            heartbeat: new.heartbeat,
            placement_labels: new.placement_labels,
        };
        let command = Command::HireAgent {
            approval_id: new_id(),
            agent: Box::new(agent),
            payload,
        };
        let (agent, approval) = expect_outcome!(
            self.submit(caller, command).await?,
            Outcome::Hire { agent, approval } => (agent, approval)
        )?;
        Ok((agent_view(caller, agent), approval))
    }
}
