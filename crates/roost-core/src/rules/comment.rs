//! Deleting an issue comment (Paperclip's `DELETE /api/issues/{id}/comments/{commentId}`).
//!
//! - The comment keeps its place in the thread: its body is emptied and the row records who
//!   deleted it and when (Paperclip's tombstone), so a run that already names it still finds
//!   it, and its text leaves search and recall.
//! - Only its author deletes it, and only that check is not made here: memory keeps no comment
//!   authors (every comment of every issue would carry one), so the API checks the author on
//!   the row before it proposes (`roost-server/src/api/issues.rs`). A comment's author never
//!   changes, so the check cannot go stale between the read and the apply.
//! - A comment already deleted is not found (Paperclip: 404 when its tombstone loses a race);
//!   the API answers a deletion of a deleted comment with the comment, as Paperclip does,
//!   without proposing.
//! - A run's deletion is fenced like every write of a run.
//! - A pending wake lets go of the comment's id (and still runs); a run already claimed keeps
//!   it, and its prompt leaves the deleted comment out (`roost-server/src/workers/mod.rs`).
//! - An agent deletes its own comment on any issue of its company: Paperclip also refuses an
//!   agent one on an issue assigned to another agent, and bumps the issue's `updatedAt`;
//!   neither is done here.

use std::sync::Arc;

use serde_json::json;

use super::issue::visible_issue;
use super::Ctx;
use crate::command::Outcome;
use crate::entity::CommentTombstone;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn delete(
    ctx: &Ctx<'_>,
    issue_id: &str,
    comment_id: &str,
) -> Result<Decision, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    ctx.fence()?;
    ctx.state
        .comments
        .get(comment_id)
        .filter(|c| c.issue_id == issue.id && !c.deleted)
        .ok_or_else(|| DomainError::not_found("comment", comment_id))?;
    let tombstone = CommentTombstone {
        comment_id: comment_id.to_string(),
        issue_id: issue.id.clone(),
        deleted_at: ctx.now(),
        deleted_by_type: ctx.actor.kind,
        deleted_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        deleted_by_user_id: ctx.actor.user_id(),
        deleted_by_run_id: ctx.actor.run_id.clone(),
    };
    let note = ActivityNote {
        company_id: Some(issue.company_id.clone()),
        entity_type: "issue",
        entity_id: issue.id.clone(),
        details: json!({
            "commentId": comment_id,
            "identifier": issue.identifier,
            "issueTitle": issue.title,
            "source": "author_delete",
            "deletedByType": ctx.actor.kind,
        }),
    };
    let mut changes = vec![Change::CommentTombstoned(tombstone)];
    // A pending wake lets go of it, as Paperclip takes a queued comment back out of its wake:
    // the run that wake starts is not pointed at an empty comment (a run's last comment is
    // the one `PAPERCLIP_WAKE_COMMENT_ID` names). The wake itself still runs.
    for wake in ctx.state.pending_wakes_for_issue(&issue.id) {
        if wake.comment_ids.iter().any(|c| c == comment_id) {
            let mut w = wake.clone();
            w.comment_ids.retain(|c| c != comment_id);
            w.updated_at = ctx.now();
            changes.push(Change::Wake(w));
        }
    }
    Ok(Decision {
        outcome: Outcome::Issue {
            issue: Arc::new(issue.into_owned()),
            comment: None,
        },
        changes,
        note,
    })
}
