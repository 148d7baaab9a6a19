//! The activity log (the hash-chained audit of every accepted write) and its verification.

use roost_core::activity::{ActivityEntry, ChainBreak};
pub use roost_core::views::AuditReport;

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    pub async fn list_activity(
        &self,
        caller: &Caller,
        company_id: &str,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, ApiError> {
        self.get_company(caller, company_id).await?;
        Ok(self
            .reader()
            .activity(Some(company_id), before_seq, limit)
            .await?)
    }

    /// A company's activity matching `filter` (Paperclip's `agentId`, `entityType`,
    /// `entityId`), newest first.
    pub async fn list_activity_matching(
        &self,
        caller: &Caller,
        company_id: &str,
        filter: &roost_store::ActivityFilter,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        Ok(self
            .reader()
            .activity_matching(&company.id, filter, before_seq, limit)
            .await?)
    }

    /// An issue's activity (entries whose entity is the issue), newest first.
    pub async fn issue_activity(
        &self,
        caller: &Caller,
        issue_id: &str,
        before_seq: Option<u64>,
        limit: u32,
    ) -> Result<Vec<ActivityEntry>, ApiError> {
        let issue = self.get_issue(caller, issue_id).await?;
        let filter = roost_store::ActivityFilter {
            entity_type: Some("issue".into()),
            entity_id: Some(issue.id),
            ..Default::default()
        };
        Ok(self
            .reader()
            .activity_matching(&issue.company_id, &filter, before_seq, limit)
            .await?)
    }

    /// Re-hashes the whole activity chain as stored in this node's SQLite file.
    pub async fn verify_audit(&self, caller: &Caller) -> Result<AuditReport, ApiError> {
        caller.require_admin()?;
        self.barrier().await?;
        Ok(match self.reader().verify_activity().await? {
            Ok(summary) => AuditReport {
                ok: true,
                entries: summary.entries,
                message: format!("activity chain intact: {} entries", summary.entries),
                head_hash: Some(summary.head_hash),
                broken_at_seq: None,
            },
            Err(b) => {
                let seq = match &b {
                    ChainBreak::HashMismatch { seq }
                    | ChainBreak::LinkMismatch { seq, .. }
                    | ChainBreak::Gap { seq, .. } => *seq,
                };
                AuditReport {
                    ok: false,
                    entries: seq.saturating_sub(1),
                    head_hash: None,
                    broken_at_seq: Some(seq),
                    message: b.to_string(),
                }
            }
        })
    }
}
