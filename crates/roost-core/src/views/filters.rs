//! The filters of the list routes, as the server reads them and the client sends them.

use crate::entity::{IssueStatus, WakeStatus};

/// Which issues of a company to list (`GET /api/companies/{cid}/issues`); an empty `statuses`
/// means every status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueFilter {
    pub statuses: Vec<IssueStatus>,
    pub assignee_agent_id: Option<String>,
    pub parent_id: Option<String>,
    pub project_id: Option<String>,
    /// Only issues that carry this label (Paperclip's `labelId`).
    pub label_id: Option<String>,
    /// Paperclip's `q`: found as written (one phrase, any case) in the title, the identifier,
    /// the description ([`has_text`]) or a comment's body (which lives in
    /// `state.db`: `roost-server/src/api/issue_list.rs`).
    pub q: Option<String>,
    /// Matches to pass over before the page starts.
    pub offset: usize,
    pub limit: Option<usize>,
}

/// Whether `issue` has `lowered` (a list's `q`, trimmed and lower-cased once for the whole
/// list) in its title, identifier or description, in any case.
pub fn has_text(issue: &crate::entity::Issue, lowered: &str) -> bool {
    issue.title.to_lowercase().contains(lowered)
        || issue.identifier.to_lowercase().contains(lowered)
        || issue
            .description
            .as_deref()
            .is_some_and(|d| d.to_lowercase().contains(lowered))
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
