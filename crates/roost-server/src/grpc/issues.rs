//! The issue and comment calls of `roost.v1.Control`, checkout and release included: each
//! calls the [`Api`] function its REST twin calls (`rest/issues.rs`).

use roost_proto::v1 as pb;

use super::convert;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

pub(super) async fn create(
    api: Api,
    caller: Caller,
    r: pb::CreateIssueRequest,
) -> Answer<pb::Issue> {
    let (company_id, fields) = convert::new_issue(r)?;
    let issue = api.create_issue(&caller, &company_id, fields).await?;
    Ok(convert::issue_to_proto(issue))
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListIssuesRequest,
) -> Answer<pb::ListIssuesResponse> {
    let filter = convert::issue_filter(&r)?;
    let issues = api.list_issues(&caller, &r.company_id, &filter).await?;
    Ok(pb::ListIssuesResponse {
        issues: issues.into_iter().map(convert::issue_to_proto).collect(),
    })
}

pub(super) async fn get(api: Api, caller: Caller, r: pb::GetIssueRequest) -> Answer<pb::Issue> {
    let issue = api.get_issue(&caller, &r.issue_id).await?;
    Ok(convert::issue_to_proto(issue))
}

pub(super) async fn update(
    api: Api,
    caller: Caller,
    r: pb::UpdateIssueRequest,
) -> Answer<pb::UpdateIssueResponse> {
    let (issue_id, patch, comment) = convert::issue_patch(r)?;
    let (issue, comment) = api.update_issue(&caller, &issue_id, patch, comment).await?;
    Ok(pb::UpdateIssueResponse {
        issue: Some(convert::issue_to_proto(issue)),
        comment: comment.map(convert::comment_to_proto),
    })
}

pub(super) async fn add_comment(
    api: Api,
    caller: Caller,
    r: pb::AddCommentRequest,
) -> Answer<pb::Comment> {
    let comment = api.add_comment(&caller, &r.issue_id, r.body).await?;
    Ok(convert::comment_to_proto(comment))
}

pub(super) async fn list_comments(
    api: Api,
    caller: Caller,
    r: pb::ListCommentsRequest,
) -> Answer<pb::ListCommentsResponse> {
    let query = convert::comment_query(&r);
    let comments = api.list_comments(&caller, &r.issue_id, &query).await?;
    Ok(pb::ListCommentsResponse {
        comments: comments
            .into_iter()
            .map(convert::comment_to_proto)
            .collect(),
    })
}

pub(super) async fn get_comment(
    api: Api,
    caller: Caller,
    r: pb::GetCommentRequest,
) -> Answer<pb::Comment> {
    let comment = api.get_comment(&caller, &r.issue_id, &r.comment_id).await?;
    Ok(convert::comment_to_proto(comment))
}

pub(super) async fn delete_comment(
    api: Api,
    caller: Caller,
    r: pb::DeleteCommentRequest,
) -> Answer<pb::Comment> {
    let comment = api
        .delete_comment(&caller, &r.issue_id, &r.comment_id, false)
        .await?;
    Ok(convert::comment_to_proto(comment))
}

pub(super) async fn checkout(
    api: Api,
    caller: Caller,
    r: pb::CheckoutRequest,
) -> Answer<pb::Issue> {
    let expected = convert::expected_statuses(&r.expected_statuses)?;
    let issue = api
        .checkout(&caller, &r.issue_id, &r.agent_id, expected)
        .await?;
    Ok(convert::issue_to_proto(issue))
}

pub(super) async fn release(api: Api, caller: Caller, r: pb::ReleaseRequest) -> Answer<pb::Issue> {
    let issue = api.release(&caller, &r.issue_id).await?;
    Ok(convert::issue_to_proto(issue))
}
