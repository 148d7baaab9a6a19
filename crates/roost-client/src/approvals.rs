//! Approvals (`/api/companies/{cid}/approvals`, `/api/approvals/{id}/...`), in the server's own
//! types (`roost_core::approval`).

use reqwest::Method;
pub use roost_core::approval::{
    Approval, ApprovalComment, ApprovalDecision, ApprovalStatus, ApprovalType,
};
use serde::Serialize;

use crate::{Result, RoostClient, API};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody<'a> {
    #[serde(rename = "type")]
    approval_type: ApprovalType,
    payload: &'a serde_json::Value,
    issue_ids: &'a [String],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    decision_note: Option<&'a str>,
}

#[derive(Serialize)]
struct CommentBody<'a> {
    body: &'a str,
}

impl RoostClient {
    pub async fn list_approvals(
        &self,
        company_id: &str,
        status: Option<ApprovalStatus>,
    ) -> Result<Vec<Approval>> {
        let query: Vec<(&str, String)> = status
            .map(|s| ("status", s.as_str().to_string()))
            .into_iter()
            .collect();
        self.get(&[API, "companies", company_id, "approvals"], &query)
            .await
    }

    pub async fn get_approval(&self, id: &str) -> Result<Approval> {
        self.get(&[API, "approvals", id], &[]).await
    }

    pub async fn create_approval(
        &self,
        company_id: &str,
        approval_type: ApprovalType,
        payload: &serde_json::Value,
        issue_ids: &[String],
    ) -> Result<Approval> {
        let body = CreateBody {
            approval_type,
            payload,
            issue_ids,
        };
        let path = [API, "companies", company_id, "approvals"];
        self.send(Method::POST, &path, &[], Some(&body)).await
    }

    pub async fn decide_approval(
        &self,
        id: &str,
        decision: ApprovalDecision,
        decision_note: Option<&str>,
    ) -> Result<Approval> {
        let action = match decision {
            ApprovalDecision::Approve => "approve",
            ApprovalDecision::Reject => "reject",
            ApprovalDecision::RequestRevision => "request-revision",
        };
        let body = DecisionBody { decision_note };
        self.send(
            Method::POST,
            &[API, "approvals", id, action],
            &[],
            Some(&body),
        )
        .await
    }

    pub async fn comment_approval(&self, id: &str, body: &str) -> Result<ApprovalComment> {
        let body = CommentBody { body };
        let path = [API, "approvals", id, "comments"];
        self.send(Method::POST, &path, &[], Some(&body)).await
    }
}
