//! The attachment and work product calls of `roost.v1.Control` (`attachments.proto`): each
//! calls the [`Api`] function its REST twin calls (`rest/attachments.rs`), so authorization,
//! validation and errors are the same.

use roost_core::attachment::{AttachmentRef, IssueAttachment, MAX_ATTACHMENT_BYTES};
use roost_core::work_product::{WorkProduct, WorkProductFields};
use roost_proto::v1 as pb;

use crate::api::{Api, NewAttachment};
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

fn attachment_to_proto(a: IssueAttachment) -> pb::IssueAttachment {
    pb::IssueAttachment {
        content_path: roost_core::attachment::content_path(&a.id),
        id: a.id,
        company_id: a.company_id,
        issue_id: a.issue_id,
        issue_comment_id: a.issue_comment_id,
        originating_run_id: a.originating_run_id,
        content_type: a.content_type,
        byte_size: a.byte_size,
        sha256: a.sha256,
        original_filename: a.original_filename,
        created_by_agent_id: a.created_by_agent_id,
        created_by_user_id: a.created_by_user_id,
        created_at_ms: a.created_at.millis(),
    }
}

/// A heartbeat context's attachments (`records.rs`).
pub(super) fn refs_to_proto(list: Vec<AttachmentRef>) -> Vec<pb::IssueAttachmentRef> {
    list.into_iter()
        .map(|a| pb::IssueAttachmentRef {
            id: a.id,
            filename: a.filename,
            content_type: a.content_type,
            byte_size: a.byte_size,
            content_path: a.content_path,
            created_at_ms: a.created_at.millis(),
        })
        .collect()
}

fn product_to_proto(w: WorkProduct) -> pb::WorkProduct {
    pb::WorkProduct {
        id: w.id,
        company_id: w.company_id,
        project_id: w.project_id,
        issue_id: w.issue_id,
        execution_workspace_id: w.execution_workspace_id,
        runtime_service_id: w.runtime_service_id,
        r#type: w.kind,
        provider: w.provider,
        external_id: w.external_id,
        title: w.title,
        url: w.url,
        status: w.status,
        review_state: w.review_state,
        is_primary: w.is_primary,
        health_status: w.health_status,
        summary: w.summary,
        metadata_json: w.metadata.map(|m| m.to_string()),
        created_by_run_id: w.created_by_run_id,
        created_at_ms: w.created_at.millis(),
        updated_at_ms: w.updated_at.millis(),
    }
}

/// The fields as REST's body would carry them: set ones as sent, `clear` ones as `null`.
fn fields_from_proto(f: Option<pb::WorkProductFields>) -> Answer<WorkProductFields> {
    let f = f.unwrap_or_default();
    let metadata = match f.metadata_json {
        Some(text) => Some(Some(serde_json::from_str(&text).map_err(|e| {
            ApiError::bad_request(format!("metadata_json is not JSON: {e}"))
        })?)),
        None => None,
    };
    let mut fields = WorkProductFields {
        project_id: f.project_id.map(Some),
        execution_workspace_id: f.execution_workspace_id.map(Some),
        runtime_service_id: f.runtime_service_id.map(Some),
        kind: f.r#type,
        provider: f.provider,
        external_id: f.external_id.map(Some),
        title: f.title,
        url: f.url.map(Some),
        status: f.status,
        review_state: f.review_state,
        is_primary: f.is_primary,
        health_status: f.health_status,
        summary: f.summary.map(Some),
        metadata,
        created_by_run_id: f.created_by_run_id.map(Some),
    };
    for name in &f.clear {
        let slot = match name.as_str() {
            "projectId" => &mut fields.project_id,
            "executionWorkspaceId" => &mut fields.execution_workspace_id,
            "runtimeServiceId" => &mut fields.runtime_service_id,
            "externalId" => &mut fields.external_id,
            "url" => &mut fields.url,
            "summary" => &mut fields.summary,
            "createdByRunId" => &mut fields.created_by_run_id,
            "metadata" => {
                fields.metadata = Some(None);
                continue;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "clear names {other:?}, no optional work product field: projectId, \
                     executionWorkspaceId, runtimeServiceId, externalId, url, summary, metadata \
                     or createdByRunId"
                )))
            }
        };
        *slot = Some(None);
    }
    Ok(fields)
}

/// Joins an upload's chunks, refusing one past the size limit as soon as it passes it.
pub(super) async fn upload(
    api: Api,
    caller: Caller,
    mut chunks: tonic::Streaming<pb::UploadIssueAttachmentChunk>,
) -> Answer<pb::IssueAttachment> {
    let first = chunks
        .message()
        .await
        .map_err(|s| ApiError::bad_request(format!("the upload stream failed: {}", s.message())))?
        .ok_or_else(|| ApiError::bad_request("an upload needs at least one message"))?;
    // Who may upload is settled before the rest of the file is read.
    let issue = api.get_issue(&caller, &first.issue_id).await?;
    let issue = api
        .attachment_issue(&caller, &issue.company_id, &issue.id)
        .await?;
    let slot = api.upload_permit(&caller)?;
    let mut bytes = first.data;
    while let Some(chunk) = chunks
        .message()
        .await
        .map_err(|s| ApiError::bad_request(format!("the upload stream failed: {}", s.message())))?
    {
        bytes.extend_from_slice(&chunk.data);
        if bytes.len() as u64 > MAX_ATTACHMENT_BYTES {
            return Err(roost_core::attachment::too_big().into());
        }
    }
    let file = NewAttachment {
        original_filename: first.original_filename,
        content_type: first.content_type,
        issue_comment_id: first.issue_comment_id,
        bytes,
    };
    let view = api.upload_attachment(&caller, issue, file, slot).await?;
    Ok(attachment_to_proto(view.attachment))
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListIssueAttachmentsRequest,
) -> Answer<pb::ListIssueAttachmentsResponse> {
    let list = api.list_attachments(&caller, &r.issue_id).await?;
    Ok(pb::ListIssueAttachmentsResponse {
        attachments: list
            .into_iter()
            .map(|v| attachment_to_proto(v.attachment))
            .collect(),
    })
}

pub(super) async fn content(
    api: Api,
    caller: Caller,
    r: pb::GetIssueAttachmentContentRequest,
) -> Answer<pb::IssueAttachmentContent> {
    let content = api
        .attachment_content(&caller, &r.attachment_id, None)
        .await?;
    Ok(pb::IssueAttachmentContent {
        attachment: Some(attachment_to_proto(content.attachment)),
        content: content.bytes,
    })
}

pub(super) async fn delete(
    api: Api,
    caller: Caller,
    r: pb::DeleteIssueAttachmentRequest,
) -> Answer<pb::IssueAttachment> {
    let removed = api.remove_attachment(&caller, &r.attachment_id).await?;
    Ok(attachment_to_proto(removed))
}

pub(super) async fn list_products(
    api: Api,
    caller: Caller,
    r: pb::ListWorkProductsRequest,
) -> Answer<pb::ListWorkProductsResponse> {
    let list = api.list_work_products(&caller, &r.issue_id).await?;
    Ok(pb::ListWorkProductsResponse {
        work_products: list.into_iter().map(product_to_proto).collect(),
    })
}

pub(super) async fn create_product(
    api: Api,
    caller: Caller,
    r: pb::CreateWorkProductRequest,
) -> Answer<pb::WorkProduct> {
    let fields = fields_from_proto(r.fields)?;
    let product = api
        .create_work_product(&caller, &r.issue_id, fields)
        .await?;
    Ok(product_to_proto(product))
}

pub(super) async fn update_product(
    api: Api,
    caller: Caller,
    r: pb::UpdateWorkProductRequest,
) -> Answer<pb::WorkProduct> {
    let fields = fields_from_proto(r.fields)?;
    let product = api
        .update_work_product(&caller, &r.work_product_id, fields)
        .await?;
    Ok(product_to_proto(product))
}

pub(super) async fn delete_product(
    api: Api,
    caller: Caller,
    r: pb::DeleteWorkProductRequest,
) -> Answer<pb::WorkProduct> {
    let removed = api.delete_work_product(&caller, &r.work_product_id).await?;
    Ok(product_to_proto(removed))
}
