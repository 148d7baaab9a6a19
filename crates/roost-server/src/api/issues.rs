//! Issues, comments, checkout and release, and the agent's views of its work.

use std::borrow::Cow;
use std::sync::Arc;

use roost_core::command::{IssuePatch, NewComment};
use roost_core::views::{IssueDetail, IssueSummary, LabeledIssue};
use roost_core::{Command, Comment, Issue, IssueStatus, Outcome};
use roost_store::CommentQuery;

pub use roost_core::views::{CommentCursor, HeartbeatContext, IssueFilter};

use super::views::{run_view, RunView};
use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    /// Resolves an issue id or `PREFIX-N` identifier visible to the caller.
    fn resolve_issue(&self, caller: &Caller, id_or_identifier: &str) -> Result<Issue, ApiError> {
        let issue = self
            .reader()
            .read(|s| s.issue_by_ref(id_or_identifier).map(Cow::into_owned))
            .ok_or_else(|| ApiError::not_found("issue", id_or_identifier))?;
        caller.check_company(&issue.company_id, "issue", id_or_identifier)?;
        Ok(issue)
    }

    pub(super) fn resolve_issue_id(
        &self,
        caller: &Caller,
        id_or_identifier: &str,
    ) -> Result<String, ApiError> {
        self.resolve_issue(caller, id_or_identifier).map(|i| i.id)
    }

    /// Lets request bodies name parents and blockers by `PREFIX-N` as well as by id. A reference
    /// that resolves to nothing is passed on for the state machine to refuse.
    fn resolve_patch_refs(&self, caller: &Caller, patch: &mut IssuePatch) {
        let resolve = |r: &mut String| {
            if let Ok(id) = self.resolve_issue_id(caller, r) {
                *r = id;
            }
        };
        if let Some(Some(parent)) = patch.parent_id.as_mut() {
            resolve(parent);
        }
        if let Some(blockers) = patch.blocked_by_issue_ids.as_mut() {
            blockers.iter_mut().for_each(resolve);
        }
    }

    /// Takes the monitor out of the `executionPolicy` REST sent (`roost_core::monitor`), so the
    /// command carries it typed, as gRPC sends it.
    fn take_monitor(patch: &mut IssuePatch) -> Result<(), ApiError> {
        if patch.monitor.is_none() {
            patch.monitor = roost_core::monitor::take_from_policy(&mut patch.paperclip)?;
        }
        Ok(())
    }

    pub async fn create_issue(
        &self,
        caller: &Caller,
        company_id: &str,
        mut fields: IssuePatch,
    ) -> Result<Issue, ApiError> {
        self.resolve_patch_refs(caller, &mut fields);
        Self::take_monitor(&mut fields)?;
        let command = Command::CreateIssue {
            id: new_id(),
            company_id: company_id.into(),
            fields,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Issue { issue, .. } => Arc::unwrap_or_clone(issue))
    }

    /// A subtask: a new issue in the parent's company with `parent_id` set.
    pub async fn create_child(
        &self,
        caller: &Caller,
        parent: &str,
        mut fields: IssuePatch,
    ) -> Result<Issue, ApiError> {
        let parent = self.resolve_issue(caller, parent)?;
        fields.parent_id = Some(Some(parent.id.clone()));
        self.create_issue(caller, &parent.company_id, fields).await
    }

    pub async fn get_issue(&self, caller: &Caller, id: &str) -> Result<Issue, ApiError> {
        self.barrier().await?;
        self.resolve_issue(caller, id)
    }

    /// The issue with its ancestors and the issues it is blocked by and blocks, as Paperclip's
    /// `GET /api/issues/{id}` answers.
    pub async fn issue_detail(&self, caller: &Caller, id: &str) -> Result<IssueDetail, ApiError> {
        let issue = self.get_issue(caller, id).await?;
        let (document_summaries, plan_document) = self.issue_documents(&issue.id).await?;
        Ok(self.reader().read(|s| {
            let labels = super::labels::labels_of(s, &issue);
            let LabeledIssue { issue, labels } = LabeledIssue::new(issue, labels);
            let summaries = |ids: &mut dyn Iterator<Item = &str>| -> Vec<IssueSummary> {
                ids.filter_map(|i| s.issues.get(i))
                    .map(|i| IssueSummary::from(i.as_ref()))
                    .collect()
            };
            let blocked_by = summaries(&mut issue.blocked_by_issue_ids.iter().map(String::as_str));
            let blocks = summaries(&mut s.issue_ids_blocked_by(&issue.id));
            IssueDetail {
                ancestors: ancestors_of(s, &issue)
                    .iter()
                    .map(IssueSummary::from)
                    .collect(),
                blocked_by,
                blocks,
                legacy_plan_document: if plan_document.is_some() {
                    None
                } else {
                    roost_core::document::legacy_plan(issue.description.as_deref())
                },
                document_summaries,
                plan_document,
                work_products: s
                    .work_products
                    .of_issue(&issue.id)
                    .into_iter()
                    .cloned()
                    .collect(),
                labels,
                issue,
            }
        }))
    }

    pub async fn update_issue(
        &self,
        caller: &Caller,
        id: &str,
        patch: IssuePatch,
        comment: Option<String>,
    ) -> Result<(Issue, Option<Comment>), ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        let mut patch = patch;
        self.resolve_patch_refs(caller, &mut patch);
        Self::take_monitor(&mut patch)?;
        let comment = comment.map(|body| NewComment { id: new_id(), body });
        let command = Command::UpdateIssue {
            issue_id,
            patch,
            comment,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Issue { issue, comment } => (Arc::unwrap_or_clone(issue), comment))
    }

    /// Fires the issue's scheduled monitor now (Paperclip's `monitor/check-now`): its assignee
    /// is woken with `issue_monitor_due` (`roost-core/src/rules/monitor.rs`).
    pub async fn check_issue_monitor(&self, caller: &Caller, id: &str) -> Result<Issue, ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        let command = Command::TriggerIssueMonitor {
            issue_id,
            id: new_id(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Issue { issue, .. } => Arc::unwrap_or_clone(issue))
    }

    /// Deletes an issue (by id or identifier) with its comments; answers the issue as it was.
    pub async fn delete_issue(&self, caller: &Caller, id: &str) -> Result<Issue, ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        let command = Command::DeleteIssue { issue_id };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Issue { issue, .. } => Arc::unwrap_or_clone(issue))
    }

    pub async fn add_comment(
        &self,
        caller: &Caller,
        id: &str,
        body: String,
    ) -> Result<Comment, ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        let command = Command::AddComment {
            issue_id,
            comment: NewComment { id: new_id(), body },
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Comment(c) => c)
    }

    pub async fn list_comments(
        &self,
        caller: &Caller,
        id: &str,
        query: &CommentQuery,
    ) -> Result<Vec<Comment>, ApiError> {
        let issue = self.get_issue(caller, id).await?;
        Ok(self.reader().comments(&issue.id, query).await?)
    }

    pub async fn get_comment(
        &self,
        caller: &Caller,
        id: &str,
        comment_id: &str,
    ) -> Result<Comment, ApiError> {
        let issue = self.get_issue(caller, id).await?;
        self.reader()
            .comment(comment_id)
            .await?
            .filter(|c| c.issue_id == issue.id)
            .ok_or_else(|| ApiError::not_found("comment", comment_id))
    }

    /// Deletes a comment its caller wrote (Paperclip's tombstone: the body emptied, who and
    /// when recorded, `roost-core/src/rules/comment.rs`) and answers it as it is now. The
    /// author is checked here, on the row: memory keeps no authors, and a comment's author
    /// never changes. A comment already deleted is answered as it is, as Paperclip does.
    /// `cancel` is Paperclip's `mode=cancel`, which takes back a comment still queued for a
    /// run: Roost queues none, so its author is told to delete it instead.
    pub async fn delete_comment(
        &self,
        caller: &Caller,
        id: &str,
        comment_id: &str,
        cancel: bool,
    ) -> Result<Comment, ApiError> {
        let comment = self.get_comment(caller, id, comment_id).await?;
        let verb = if cancel { "cancel" } else { "delete" };
        let wrote_it = caller.actor.wrote(
            comment.author_agent_id.as_deref(),
            comment.author_user_id.as_deref(),
        );
        if !wrote_it {
            let author = match (&comment.author_agent_id, &comment.author_user_id) {
                (Some(agent), _) => format!("agent {agent}"),
                (None, Some(user)) => format!("user {user}"),
                (None, None) => "the system".to_string(),
            };
            return Err(ApiError::forbidden(format!(
                "Only the comment author can {verb} comments: comment {comment_id} was written \
                 by {author}; ask its author to {verb} it"
            )));
        }
        if cancel {
            return Err(ApiError::Domain(roost_core::DomainError::conflict(
                "Queued comment can no longer be canceled: Roost hands every comment to its \
                 wake at once and queues none; delete it instead (leave out mode=cancel)",
            )));
        }
        if comment.deleted_at.is_some() {
            return Ok(comment);
        }
        let command = Command::DeleteComment {
            issue_id: comment.issue_id.clone(),
            comment_id: comment.id.clone(),
        };
        self.submit(caller, command).await?;
        self.reader()
            .comment(comment_id)
            .await?
            .ok_or_else(|| ApiError::not_found("comment", comment_id))
    }

    pub async fn checkout(
        &self,
        caller: &Caller,
        id: &str,
        agent_id: &str,
        expected_statuses: Vec<IssueStatus>,
    ) -> Result<Issue, ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        // Paperclip answers an agent's checkout without a run 401 (its clients then mint the
        // run's token); the state machine's own refusal is for everyone else.
        if caller.agent_id().is_some() && caller.actor.run_id.is_none() {
            return Err(ApiError::unauthorized(
                "Agent run id required: a checkout is made for a run; send its id in the \
                 X-Paperclip-Run-Id (or X-Roost-Run-Id) header",
            ));
        }
        let command = Command::Checkout {
            issue_id,
            agent_id: agent_id.into(),
            expected_statuses,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Issue { issue, .. } => Arc::unwrap_or_clone(issue))
    }

    pub async fn release(&self, caller: &Caller, id: &str) -> Result<Issue, ApiError> {
        let issue_id = self.resolve_issue_id(caller, id)?;
        expect_outcome!(self.submit(caller, Command::Release { issue_id }).await?, Outcome::Issue { issue, .. } => Arc::unwrap_or_clone(issue))
    }

    /// The calling agent's open work: assigned issues in `todo`, `in_progress` or `blocked`.
    pub async fn inbox(&self, caller: &Caller) -> Result<Vec<Issue>, ApiError> {
        let agent = self.me(caller).await?;
        let open = [
            IssueStatus::Todo,
            IssueStatus::InProgress,
            IssueStatus::Blocked,
        ];
        Ok(self.reader().read(|s| {
            let mut issues: Vec<Issue> = s
                .open_issues_assigned_to(&agent.id)
                .filter(|i| open.contains(&i.status))
                .map(Cow::into_owned)
                .collect();
            issues.sort_by_key(|i| (i.priority, i.issue_number));
            issues
        }))
    }

    pub async fn active_run(&self, caller: &Caller, id: &str) -> Result<Option<RunView>, ApiError> {
        let issue = self.get_issue(caller, id).await?;
        // The run holding the checkout; before the checkout, the newest live run working the
        // issue (its wake claimed, the agent not yet started or not yet checked out).
        Ok(self.reader().read(|s| {
            let holder = issue
                .checkout
                .as_ref()
                .and_then(|c| s.runs.get(&c.run_id))
                .filter(|r| r.status.is_live());
            holder
                .or_else(|| {
                    s.live_runs()
                        .filter(|r| r.issue_id.as_deref() == Some(issue.id.as_str()))
                        .max_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)))
                })
                .map(|r| run_view(caller, s, r.clone()))
        }))
    }

    pub async fn heartbeat_context(
        &self,
        caller: &Caller,
        id: &str,
        wake_comment_id: Option<&str>,
    ) -> Result<HeartbeatContext, ApiError> {
        let issue = self.get_issue(caller, id).await?;
        let wake_comment = match wake_comment_id {
            Some(c) => Some(self.get_comment(caller, &issue.id, c).await?),
            None => None,
        };
        let latest = self
            .reader()
            .comments(
                &issue.id,
                &CommentQuery {
                    after: None,
                    descending: true,
                    limit: 1,
                },
            )
            .await?
            .into_iter()
            .next();
        Ok(self.reader().read(|s| {
            let ancestors = ancestors_of(s, &issue);
            let blocked_by = issue
                .blocked_by_issue_ids
                .iter()
                .filter_map(|b| s.issues.get(b).map(Cow::into_owned))
                .collect();
            let children = s.children_of(&issue.id).map(Cow::into_owned).collect();
            let total_comments = s.comment_count(&issue.id);
            let active_run = issue
                .checkout
                .as_ref()
                .and_then(|c| s.runs.get(&c.run_id))
                .filter(|r| r.status.is_live())
                .map(|r| run_view(caller, s, r.clone()));
            let project = issue
                .project_id
                .as_ref()
                .and_then(|p| s.projects.get(p))
                .cloned();
            let goal = issue
                .goal_id
                .as_ref()
                .or(project.as_ref().and_then(|p| p.goal_id.as_ref()))
                .and_then(|g| s.goals.get(g))
                .cloned();
            HeartbeatContext {
                project,
                goal,
                issue: issue.clone(),
                ancestors,
                blocked_by,
                children,
                comment_cursor: CommentCursor {
                    total_comments,
                    latest_comment_id: latest.map(|c| c.id),
                },
                wake_comment,
                active_run,
                attachments: s
                    .attachments
                    .of_issue(&issue.id)
                    .into_iter()
                    .map(|a| a.reference())
                    .collect(),
            }
        }))
    }
}

/// The issue's ancestors, parent first, at most 32 (a guard: the rules refuse parent cycles).
fn ancestors_of(s: &roost_core::State, issue: &Issue) -> Vec<Issue> {
    let mut ancestors = Vec::new();
    let mut cursor = issue.parent_id.clone();
    while let Some(parent) = cursor.and_then(|p| s.issues.get(&p)) {
        if ancestors.len() >= 32 {
            break;
        }
        cursor = parent.parent_id.clone();
        ancestors.push(parent.into_owned());
    }
    ancestors
}
