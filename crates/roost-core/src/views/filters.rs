//! The filters of the list routes, as the server reads them and the client sends them.

use crate::entity::{IssueStatus, WakeStatus};

/// Which issues of a company to list (`GET /api/companies/{cid}/issues`); an empty `statuses`
/// means every status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueFilter {
    pub statuses: Vec<IssueStatus>,
    pub assignee_agent_id: Option<String>,
    pub parent_id: Option<String>,
    pub limit: Option<usize>,
}

/// Which wakes of a company to list (`GET /api/companies/{cid}/wakes`, newest first); an empty
/// `statuses` means every status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WakeFilter {
    pub agent_id: Option<String>,
    pub statuses: Vec<WakeStatus>,
    /// An issue id or `PREFIX-N` identifier.
    pub issue_id: Option<String>,
    pub limit: Option<usize>,
}
