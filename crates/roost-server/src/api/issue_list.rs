//! A company's issue list: its filters walked in issue-number order from the indexes, and
//! Paperclip's `q`, which finds an issue by its own text or by its comments (those live in
//! `state.db` and are searched outside the read lock, a chunk of issues at a time).

use std::borrow::Cow;

use roost_core::{Issue, IssueStatus, State};

use roost_core::views::{has_text, IssueFilter};

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// Issues whose comments one query searches (the comments' index by issue answers each).
const COMMENT_SEARCH_CHUNK: usize = 1_000;

/// The issues a search reads the comments of at most, in number order (ten queries). It
/// bounds the comment queries only: the walk itself reads what a list without `q` would.
const MAX_ISSUES_SEARCHED_BY_COMMENT: usize = 10_000;

/// The issues a company's list walks, in number order, with every filter but `q` applied:
/// a project's or a label's from its index (as many as the project or label has, not the
/// company), else by assignee, parent, or the company's (open) issues. Ids first, statuses from the issue map:
/// closed issues may be in `state.db` only, and a board's `cancelled` column reads the
/// cancelled rows, not every done one.
fn walk<'a>(
    s: &'a State,
    company_id: &'a str,
    filter: &'a IssueFilter,
    only_open: bool,
) -> Box<dyn Iterator<Item = Cow<'a, Issue>> + 'a> {
    let keep = move |i: &Issue| kept(i, company_id, filter, only_open);
    // By the status the issue map keeps, before an issue is read (a closed one may be a row
    // of state.db only).
    let any_status = filter.statuses.is_empty() && !only_open;
    let status_kept = move |id: &str| {
        any_status
            || s.issues
                .status(id)
                .is_some_and(|status| status_passes(status, filter, only_open))
    };
    if filter.assignee_agent_id.is_none() && filter.parent_id.is_none() {
        let indexed: Option<Box<dyn Iterator<Item = Cow<'a, Issue>>>> =
            match (&filter.project_id, &filter.label_id) {
                (Some(project), _) => Some(Box::new(s.issues_of_project(project))),
                (None, Some(label)) => Some(Box::new(
                    s.issue_ids_with_label(label)
                        .filter(move |id| status_kept(id))
                        .filter_map(|id| s.issues.get(id)),
                )),
                (None, None) => None,
            };
        if let Some(issues) = indexed {
            let mut issues: Vec<Cow<Issue>> = issues.filter(|i| keep(i)).collect();
            issues.sort_by_key(|i| i.issue_number);
            return Box::new(issues.into_iter());
        }
    }
    let ids: Box<dyn Iterator<Item = &str>> =
        match (&filter.assignee_agent_id, &filter.parent_id, only_open) {
            (Some(agent), _, true) => Box::new(s.open_issue_ids_assigned_to(agent)),
            (Some(agent), _, false) => Box::new(s.issue_ids_assigned_to(agent)),
            (None, Some(parent), _) => Box::new(s.child_ids_of(parent)),
            (None, None, true) => Box::new(s.open_issue_ids_of_company(company_id)),
            (None, None, false) => Box::new(s.issue_ids_of_company(company_id)),
        };
    Box::new(
        ids.filter(move |id| status_kept(id))
            .filter_map(|id| s.issues.get(id))
            .filter(move |i| keep(i)),
    )
}

/// Whether an issue of `status` passes the list's status filters.
fn status_passes(status: IssueStatus, filter: &IssueFilter, only_open: bool) -> bool {
    (filter.statuses.is_empty() || filter.statuses.contains(&status))
        && (!only_open || !status.is_terminal())
}

/// Whether `issue` passes every filter of the list but `q`.
fn kept(issue: &Issue, company_id: &str, filter: &IssueFilter, only_open: bool) -> bool {
    issue.company_id == company_id
        && status_passes(issue.status, filter, only_open)
        && filter
            .assignee_agent_id
            .as_ref()
            .is_none_or(|a| issue.assignee_agent_id.as_ref() == Some(a))
        && filter
            .parent_id
            .as_ref()
            .is_none_or(|p| issue.parent_id.as_ref() == Some(p))
        && filter
            .project_id
            .as_ref()
            .is_none_or(|p| issue.project_id.as_ref() == Some(p))
        && filter
            .label_id
            .as_deref()
            .is_none_or(|l| roost_core::label::label_ids(&issue.paperclip).any(|id| id == l))
}

/// An issue the search walked: found by its own text, or to be looked for in its comments.
struct Walked {
    id: String,
    by_text: bool,
}

impl Api {
    /// The page of `filter` over company `company_id`'s issues, in issue-number order.
    pub async fn list_issues(
        &self,
        caller: &Caller,
        company_id: &str,
        filter: &IssueFilter,
    ) -> Result<Vec<Issue>, ApiError> {
        self.get_company(caller, company_id).await?;
        let limit = filter.limit.unwrap_or(500).clamp(1, 5000);
        let text = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
        if let Some(text) = text {
            roost_store::check_query_len(text)
                .map_err(|why| ApiError::bad_request(format!("q: {why}")))?;
        }
        // A filter on open statuses only walks the open issues, however many the company has
        // closed. A text search without a status reads the open issues only: closed ones may
        // live in state.db alone, and a search matching none would read every one of them
        // under the lock (a status filter naming done or cancelled searches those too).
        let only_open = (!filter.statuses.is_empty()
            && filter.statuses.iter().all(|s| !s.is_terminal()))
            || (filter.statuses.is_empty() && text.is_some());
        let Some(text) = text else {
            // The indexes are in issue-number order: a page stops at `limit` matches and
            // clones only those (the read lock holds off apply meanwhile).
            return Ok(self.reader().read(|s| {
                walk(s, company_id, filter, only_open)
                    .skip(filter.offset)
                    .take(limit)
                    .map(Cow::into_owned)
                    .collect()
            }));
        };
        self.search_issues(company_id, filter, only_open, text, limit)
            .await
    }

    /// A page of the issues `text` is found in, by their own text or their comments: the
    /// walk under the lock stops where the page must end (its last issue found by its own
    /// text), then comments are searched a chunk of issues at a time until the page is full.
    async fn search_issues(
        &self,
        company_id: &str,
        filter: &IssueFilter,
        only_open: bool,
        text: &str,
        limit: usize,
    ) -> Result<Vec<Issue>, ApiError> {
        let wanted = filter.offset.saturating_add(limit);
        let lowered = text.to_lowercase();
        let walked: Vec<Walked> = self.reader().read(|s| {
            let (mut walked, mut by_text, mut by_comment) = (Vec::new(), 0, 0);
            for issue in walk(s, company_id, filter, only_open) {
                let found = has_text(&issue, &lowered);
                if !found {
                    if by_comment == MAX_ISSUES_SEARCHED_BY_COMMENT {
                        continue;
                    }
                    by_comment += 1;
                }
                walked.push(Walked {
                    id: issue.id.clone(),
                    by_text: found,
                });
                by_text += usize::from(found);
                if by_text == wanted {
                    break;
                }
            }
            walked
        });
        let comments = self.reader().comment_search()?;
        let mut found = Vec::new();
        for chunk in walked.chunks(COMMENT_SEARCH_CHUNK) {
            let unmatched: Vec<String> = chunk
                .iter()
                .filter(|w| !w.by_text)
                .map(|w| w.id.clone())
                .collect();
            let by_comment = comments.issues_with_text(&unmatched, text).await?;
            found.extend(
                chunk
                    .iter()
                    .filter(|w| w.by_text || by_comment.contains(&w.id)),
            );
            if found.len() >= wanted {
                break;
            }
        }
        // The issues as they are now, still passing the filters and, those found by their own
        // text, still holding it (one deleted or changed since the walk is left out rather
        // than shown stale; the page may then be short).
        Ok(self.reader().read(|s| {
            found
                .iter()
                .filter_map(|w| Some((s.issues.get(&w.id)?, w.by_text)))
                .filter(|(i, by_text)| !by_text || has_text(i, &lowered))
                .map(|(i, _)| i)
                .filter(|i| kept(i, company_id, filter, only_open))
                .skip(filter.offset)
                .take(limit)
                .map(Cow::into_owned)
                .collect()
        }))
    }
}
