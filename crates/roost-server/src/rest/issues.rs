//! Issues, comments, checkout and release: the agent loop.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::{Comment, Issue, IssueStatus};
use roost_store::CommentQuery;

use super::created;
use roost_core::views::{IssueWithComment, LabeledIssue};

use super::dto;
use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, HeartbeatContext, IssueFilter, RunView};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

fn parse_statuses(csv: &str) -> Result<Vec<IssueStatus>> {
    super::extract::parse_csv(csv)
}

/// The largest `offset` an issue list takes: the issues passed over are walked under the
/// state's read lock.
const MAX_ISSUE_LIST_OFFSET: usize = 100_000;

pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    JsonBody(body): JsonBody<dto::CreateIssue>,
) -> Result<(StatusCode, Json<LabeledIssue>)> {
    let caller = with_body_key(caller, body.idempotency_key.as_deref())?;
    let issue = api.create_issue(&caller, &cid, body.into()).await?;
    Ok(created(api.with_label(issue)))
}

/// The caller with the body's `idempotencyKey` (Paperclip's) when no header gave one.
fn with_body_key(mut caller: Caller, key: Option<&str>) -> Result<Caller> {
    if let (None, Some(key)) = (&caller.idempotency_key, key) {
        caller.idempotency_key = Some(crate::auth::idempotency_key(
            key.as_bytes(),
            "idempotencyKey",
        )?);
    }
    Ok(caller)
}

pub async fn create_child(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::CreateIssue>,
) -> Result<(StatusCode, Json<LabeledIssue>)> {
    if body.parent_id.is_some() {
        return Err(ApiError::bad_request("parentId is implied by the path"));
    }
    let caller = with_body_key(caller, body.idempotency_key.as_deref())?;
    let issue = api.create_child(&caller, &id, body.into()).await?;
    Ok(created(api.with_label(issue)))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(cid): Path<String>,
    QueryParams(q): QueryParams<dto::IssueListQuery>,
) -> Result<Json<Vec<LabeledIssue>>> {
    let filter = IssueFilter {
        statuses: q
            .status
            .as_deref()
            .map(parse_statuses)
            .transpose()?
            .unwrap_or_default(),
        assignee_agent_id: q.assignee_agent_id,
        parent_id: q.parent_id.or(q.parent_issue_id),
        project_id: q.project_id,
        label_id: q.label_id,
        q: q.q,
        offset: q.offset.unwrap_or(0).min(MAX_ISSUE_LIST_OFFSET),
        limit: q.limit,
    };
    let issues = api.list_issues(&caller, &cid, &filter).await?;
    Ok(Json(api.with_labels(issues)))
}

/// The issue with its ancestors, blockers and the issues it blocks (Paperclip's shape).
pub async fn get(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<roost_core::views::IssueDetail>> {
    Ok(Json(api.issue_detail(&caller, &id).await?))
}

pub async fn update(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::PatchIssue>,
) -> Result<Json<IssueWithComment>> {
    let reopen = body.reopen == Some(true) || body.resume == Some(true);
    let (mut patch, comment) = body.split();
    if reopen && patch.status.is_none() && is_closed(&api, &caller, &id).await? {
        patch.status = Some(IssueStatus::Todo);
    }
    let (issue, comment) = api.update_issue(&caller, &id, patch, comment).await?;
    Ok(Json(IssueWithComment {
        issue: api.with_label(issue),
        comment,
    }))
}

/// `POST /api/issues/{id}/monitor/check-now`: fires the issue's scheduled monitor now;
/// answers `{"ok": true}` as Paperclip's does.
pub async fn check_monitor(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>> {
    api.check_issue_monitor(&caller, &id).await?;
    Ok(Json(serde_json::json!({ "ok": true })))
}

/// `DELETE /api/issues/{id}`: the issue and its comments are removed; answers the issue as it
/// was (Paperclip's CLI prints it), with no labels: Paperclip's answer is read after its
/// deletion cascaded to the issue's labels.
pub async fn delete(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<LabeledIssue>> {
    let issue = api.delete_issue(&caller, &id).await?;
    Ok(Json(LabeledIssue::new(issue, Vec::new())))
}

pub async fn checkout(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::Checkout>,
) -> Result<Json<LabeledIssue>> {
    let issue = api
        .checkout(&caller, &id, &body.agent_id, body.expected_statuses)
        .await?;
    Ok(Json(api.with_label(issue)))
}

pub async fn release(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(_): JsonBody<dto::Empty>,
) -> Result<Json<LabeledIssue>> {
    Ok(Json(api.with_label(api.release(&caller, &id).await?)))
}

pub async fn add_comment(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<dto::NewComment>,
) -> Result<(StatusCode, Json<Comment>)> {
    let reopens = body.reopens();
    let text = dto::multiline(body.body);
    if reopens && is_closed(&api, &caller, &id).await? {
        // One command: the issue goes back to `todo` (waking its assignee) with the comment.
        let patch = roost_core::command::IssuePatch {
            status: Some(IssueStatus::Todo),
            ..Default::default()
        };
        let (_, comment) = api.update_issue(&caller, &id, patch, Some(text)).await?;
        let comment = comment.ok_or_else(|| ApiError::internal("the comment was not added"))?;
        return Ok(created(comment));
    }
    Ok(created(api.add_comment(&caller, &id, text).await?))
}

/// Whether `reopen` has something to reopen: the issue is `done` or `cancelled`.
async fn is_closed(api: &Api, caller: &Caller, id: &str) -> Result<bool> {
    let issue = api.get_issue(caller, id).await?;
    Ok(matches!(
        issue.status,
        IssueStatus::Done | IssueStatus::Cancelled
    ))
}

pub async fn list_comments(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<dto::CommentListQuery>,
) -> Result<Json<Vec<Comment>>> {
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "order must be asc or desc, not {other}"
            )))
        }
    };
    if q.after.is_some() && q.after_comment_id.is_some() {
        return Err(ApiError::bad_request(
            "give after or afterCommentId, not both",
        ));
    }
    let query = CommentQuery {
        after: q.after.or(q.after_comment_id),
        descending,
        limit: q.limit.unwrap_or(200),
    };
    Ok(Json(api.list_comments(&caller, &id, &query).await?))
}

pub async fn get_comment(
    State(api): State<Api>,
    caller: Caller,
    Path((id, comment_id)): Path<(String, String)>,
) -> Result<Json<Comment>> {
    Ok(Json(api.get_comment(&caller, &id, &comment_id).await?))
}

/// Deletes a comment its caller wrote and answers it emptied, as Paperclip does.
pub async fn delete_comment(
    State(api): State<Api>,
    caller: Caller,
    Path((id, comment_id)): Path<(String, String)>,
    QueryParams(q): QueryParams<dto::CommentDeleteQuery>,
) -> Result<Json<Comment>> {
    let cancel = match q.mode.as_deref() {
        None | Some("delete") => false,
        Some("cancel") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "mode must be delete or cancel, not {other}"
            )))
        }
    };
    Ok(Json(
        api.delete_comment(&caller, &id, &comment_id, cancel)
            .await?,
    ))
}

pub async fn heartbeat_context(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(q): QueryParams<dto::HeartbeatContextQuery>,
) -> Result<Json<HeartbeatContext>> {
    Ok(Json(
        api.heartbeat_context(&caller, &id, q.wake_comment_id.as_deref())
            .await?,
    ))
}

pub async fn active_run(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Option<RunView>>> {
    Ok(Json(api.active_run(&caller, &id).await?))
}

pub async fn inbox(State(api): State<Api>, caller: Caller) -> Result<Json<Vec<Issue>>> {
    Ok(Json(api.inbox(&caller).await?))
}
