//! The issue document calls of `roost.v1.Control` (`documents.proto`): each calls the [`Api`]
//! function its REST twin calls (`rest/documents.rs`), so authorization, validation and errors
//! are the same.

use roost_core::document::{DocumentOp, DocumentRevision, DocumentText, DocumentView, MARKDOWN};
use roost_proto::v1 as pb;

use crate::api::{Api, DocumentPut};
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

fn document_to_proto(view: DocumentView) -> pb::IssueDocument {
    let DocumentView { document: d, body } = view;
    pb::IssueDocument {
        id: d.id,
        company_id: d.company_id,
        issue_id: d.issue_id,
        key: d.key,
        title: d.title,
        format: d.format,
        body: body.unwrap_or_default(),
        latest_revision_id: d.latest_revision_id,
        latest_revision_number: d.latest_revision_number,
        created_by_agent_id: d.created_by_agent_id,
        created_by_user_id: d.created_by_user_id,
        updated_by_agent_id: d.updated_by_agent_id,
        updated_by_user_id: d.updated_by_user_id,
        locked_at_ms: d.locked_at.map(|t| t.millis()),
        locked_by_agent_id: d.locked_by_agent_id,
        locked_by_user_id: d.locked_by_user_id,
        created_at_ms: d.created_at.millis(),
        updated_at_ms: d.updated_at.millis(),
    }
}

fn revision_to_proto(r: DocumentRevision) -> pb::DocumentRevision {
    pb::DocumentRevision {
        id: r.id,
        company_id: r.company_id,
        document_id: r.document_id,
        issue_id: r.issue_id,
        key: r.key,
        revision_number: r.revision_number,
        title: r.title,
        format: r.format,
        body: r.body,
        change_summary: r.change_summary,
        created_by_agent_id: r.created_by_agent_id,
        created_by_user_id: r.created_by_user_id,
        created_by_run_id: r.created_by_run_id,
        created_at_ms: r.created_at.millis(),
    }
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListIssueDocumentsRequest,
) -> Answer<pb::ListIssueDocumentsResponse> {
    let documents = api.list_documents(&caller, &r.issue_id).await?;
    Ok(pb::ListIssueDocumentsResponse {
        documents: documents.into_iter().map(document_to_proto).collect(),
    })
}

pub(super) async fn get(
    api: Api,
    caller: Caller,
    r: pb::GetIssueDocumentRequest,
) -> Answer<pb::IssueDocument> {
    let doc = api.get_document(&caller, &r.issue_id, &r.key).await?;
    Ok(document_to_proto(doc))
}

pub(super) async fn put(
    api: Api,
    caller: Caller,
    r: pb::PutIssueDocumentRequest,
) -> Answer<pb::PutIssueDocumentResponse> {
    let format = if r.format.is_empty() {
        MARKDOWN.to_string()
    } else {
        r.format
    };
    let put = DocumentPut {
        text: DocumentText {
            title: r.title,
            format,
            body: r.body,
        },
        change_summary: r.change_summary,
        base_revision_id: r.base_revision_id,
    };
    let saved = api.put_document(&caller, &r.issue_id, &r.key, put).await?;
    Ok(pb::PutIssueDocumentResponse {
        document: Some(document_to_proto(saved.document)),
        created: saved.created,
    })
}

pub(super) async fn revisions(
    api: Api,
    caller: Caller,
    r: pb::ListDocumentRevisionsRequest,
) -> Answer<pb::ListDocumentRevisionsResponse> {
    let revisions = api.document_revisions(&caller, &r.issue_id, &r.key).await?;
    Ok(pb::ListDocumentRevisionsResponse {
        revisions: revisions.into_iter().map(revision_to_proto).collect(),
    })
}

pub(super) async fn restore(
    api: Api,
    caller: Caller,
    r: pb::RestoreIssueDocumentRequest,
) -> Answer<pb::IssueDocument> {
    let doc = api
        .restore_document(&caller, &r.issue_id, &r.key, &r.revision_id)
        .await?;
    Ok(document_to_proto(doc))
}

pub(super) async fn lock(
    api: Api,
    caller: Caller,
    r: pb::LockIssueDocumentRequest,
) -> Answer<pb::IssueDocument> {
    let doc = api
        .document_admin(&caller, &r.issue_id, &r.key, DocumentOp::Lock)
        .await?;
    Ok(document_to_proto(doc))
}

pub(super) async fn unlock(
    api: Api,
    caller: Caller,
    r: pb::UnlockIssueDocumentRequest,
) -> Answer<pb::IssueDocument> {
    let doc = api
        .document_admin(&caller, &r.issue_id, &r.key, DocumentOp::Unlock)
        .await?;
    Ok(document_to_proto(doc))
}

pub(super) async fn delete(
    api: Api,
    caller: Caller,
    r: pb::DeleteIssueDocumentRequest,
) -> Answer<pb::IssueDocument> {
    let doc = api
        .document_admin(&caller, &r.issue_id, &r.key, DocumentOp::Delete)
        .await?;
    Ok(document_to_proto(doc))
}
