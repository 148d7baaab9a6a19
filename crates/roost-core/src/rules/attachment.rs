//! Issue attachments (types in `attachment.rs`), with Paperclip's rules:
//!
//! - Whoever may change the issue may upload to it and remove its attachments: an agent not
//!   while another live run holds the issue, and from a run only while that run is live.
//! - A file arrives in chunks (`put_chunk`), each decoded here so every replica stores the same
//!   bytes, then `add` makes the attachment of them once every chunk is there. Only the
//!   uploader adds to or finishes its upload; one left unfinished for an hour is dropped by the
//!   company's next chunk, and a company has a bounded number of uploads in progress.
//! - An agent run's upload is also recorded as an artifact work product of that run, as
//!   Paperclip's is; the run's own `POST .../work-products` for the same file then updates it
//!   (`rules/work_product.rs`).

use base64::Engine;
use serde_json::json;

use super::issue::{require_not_held_by_other, visible_issue};
use super::{require_id, work_product, Ctx};
use crate::attachment::*;
use crate::command::Outcome;
use crate::entity::Issue;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

/// The issue an upload goes to, with the writer's right to change it checked.
fn writable_issue<'a>(
    ctx: &Ctx<'a>,
    issue_id: &str,
) -> Result<std::borrow::Cow<'a, Issue>, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    ctx.fence()?;
    require_not_held_by_other(ctx, &issue)?;
    Ok(issue)
}

/// The upload `id`, refused to anyone but its uploader, on another issue, or when it is a
/// finished attachment already.
fn own_upload<'a>(
    ctx: &Ctx<'a>,
    issue: &Issue,
    id: &str,
) -> Result<Option<&'a Upload>, DomainError> {
    if ctx.state.attachments.attachments.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "attachment".into(),
            id: id.into(),
        });
    }
    match ctx.state.attachments.uploads.get(id) {
        Some(u) if u.issue_id != issue.id || u.uploader != ctx.actor.id => Err(
            DomainError::conflict(format!("upload {id} is another upload's: start a new one")),
        ),
        other => Ok(other),
    }
}

pub(crate) fn put_chunk(
    ctx: &Ctx<'_>,
    issue_id: &str,
    attachment_id: &str,
    index: u32,
    content: &str,
) -> Result<Decision, DomainError> {
    require_id("attachmentId", attachment_id)?;
    let issue = writable_issue(ctx, issue_id)?;
    let upload = own_upload(ctx, &issue, attachment_id)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content.as_bytes())
        .map_err(|e| DomainError::invalid("content", format!("is not base64: {e}")))?;
    if bytes.is_empty() {
        return Err(DomainError::invariant(
            "attachment_empty",
            "Attachment is empty",
        ));
    }
    if bytes.len() as u64 > CHUNK_BYTES {
        return Err(DomainError::too_large(
            "content",
            CHUNK_BYTES,
            "bytes a chunk",
        ));
    }
    if upload.is_some_and(|u| u.sizes.contains_key(&index)) {
        return Err(DomainError::conflict(format!(
            "chunk {index} of upload {attachment_id} is already there"
        )));
    }
    let mut changes = abandoned(ctx, &issue.company_id, attachment_id);
    let dropped: Vec<&str> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Attachment(AttachmentChange::Removed(id)) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let live = ctx
        .state
        .attachments
        .uploads_of(&issue.company_id)
        .filter(|(id, _)| !dropped.contains(&id.as_str()));
    let (count, bytes_in_progress) = live.fold((0usize, 0u64), |(n, b), (id, u)| {
        (n + usize::from(*id != attachment_id), b + u.bytes())
    });
    if upload.is_none() && count >= MAX_UPLOADS_IN_PROGRESS {
        return Err(DomainError::quota(
            "uploads_in_progress",
            MAX_UPLOADS_IN_PROGRESS as u64,
            format!(
                "the company has {MAX_UPLOADS_IN_PROGRESS} uploads in progress, the most it may \
                 have; finish one, or retry when one is done"
            ),
        ));
    }
    if bytes_in_progress.saturating_add(bytes.len() as u64) > MAX_UPLOADING_BYTES {
        return Err(DomainError::quota(
            "uploading_bytes",
            MAX_UPLOADING_BYTES,
            format!(
                "the company's uploads in progress hold {bytes_in_progress} bytes, the most they \
                 may; retry when one is done"
            ),
        ));
    }
    // An upload that could never be made an attachment is refused at its first chunks, not
    // after its last.
    let so_far = upload.map_or(0, Upload::bytes) + bytes.len() as u64;
    ctx.state.attachments.room_for(&issue, so_far)?;
    let chunk = AttachmentChunk {
        attachment_id: attachment_id.to_string(),
        company_id: issue.company_id.clone(),
        issue_id: issue.id.clone(),
        index,
        size: bytes.len() as u64,
        uploader: ctx.actor.id.clone(),
        at: ctx.now(),
    };
    let details = json!({ "attachmentId": attachment_id, "index": index, "size": chunk.size });
    changes.push(Change::Attachment(AttachmentChange::Chunk {
        chunk: chunk.clone(),
        content: bytes,
    }));
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(issue.company_id.clone()),
            entity_type: "issue",
            entity_id: issue.id.clone(),
            details,
        },
        outcome: Outcome::AttachmentChunk(chunk),
        changes,
    })
}

/// The company's uploads whose last chunk is older than [`ABANDONED_AFTER_MS`], dropped; not
/// `continuing`, the upload this chunk belongs to (its rows would go with the new chunk's).
fn abandoned(ctx: &Ctx<'_>, company_id: &str, continuing: &str) -> Vec<Change> {
    let before = ctx.now().millis().saturating_sub(ABANDONED_AFTER_MS);
    ctx.state
        .attachments
        .uploads_of(company_id)
        .filter(|(id, u)| u.last_at.millis() < before && *id != continuing)
        .map(|(id, _)| Change::Attachment(AttachmentChange::Removed(id.clone())))
        .collect()
}

pub(crate) fn add(
    ctx: &Ctx<'_>,
    issue_id: &str,
    attachment_id: &str,
    work_product_id: &str,
    upload: &AttachmentUpload,
) -> Result<Decision, DomainError> {
    require_id("attachmentId", attachment_id)?;
    let issue = writable_issue(ctx, issue_id)?;
    let run = ctx.fence()?;
    let chunks = own_upload(ctx, &issue, attachment_id)?.ok_or_else(|| {
        DomainError::invariant(
            "attachment_empty",
            format!("upload {attachment_id} has no chunks: upload the file's bytes first"),
        )
    })?;
    let complete = chunks.sizes.len() as u64 == u64::from(upload.chunks)
        && chunks.sizes.keys().copied().eq(0..upload.chunks)
        && chunks.bytes() == upload.byte_size;
    if !complete {
        return Err(DomainError::conflict(format!(
            "upload {attachment_id} has {} chunks of {} bytes, not the {} chunks of {} bytes \
             its file has: send the missing chunks first",
            chunks.sizes.len(),
            chunks.bytes(),
            upload.chunks,
            upload.byte_size
        )));
    }
    ctx.state.attachments.room_for(&issue, upload.byte_size)?;
    if let Some(comment_id) = &upload.issue_comment_id {
        let on_issue = ctx
            .state
            .comments
            .get(comment_id)
            .is_some_and(|c| c.issue_id == issue.id);
        if !on_issue {
            return Err(DomainError::invalid(
                "issueCommentId",
                format!("names no comment of issue {}", issue.identifier),
            ));
        }
    }
    let attachment = IssueAttachment {
        id: attachment_id.to_string(),
        company_id: issue.company_id.clone(),
        issue_id: issue.id.clone(),
        issue_comment_id: upload.issue_comment_id.clone(),
        originating_run_id: run.map(|r| r.id.clone()),
        content_type: upload.content_type.clone(),
        byte_size: upload.byte_size,
        sha256: upload.sha256.to_ascii_lowercase(),
        original_filename: upload.original_filename.clone(),
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    let mut changes = vec![Change::Attachment(AttachmentChange::Added(
        attachment.clone(),
    ))];
    let mut details = json!({
        "attachmentId": attachment.id,
        "originalFilename": attachment.original_filename,
        "contentType": attachment.content_type,
        "byteSize": attachment.byte_size,
    });
    if let Some(run) = run {
        if let Some(product) =
            work_product::for_upload(ctx, &issue, &attachment, run, work_product_id)?
        {
            details["workProductId"] = json!(product.id);
            changes.push(Change::WorkProduct(
                crate::work_product::WorkProductChange::Put(product),
            ));
        }
    }
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(attachment.company_id.clone()),
            entity_type: "issue",
            entity_id: attachment.issue_id.clone(),
            details,
        },
        outcome: Outcome::Attachment(attachment),
        changes,
    })
}

/// Removes an attachment, or gives up an upload in progress (its uploader only: the node
/// taking an upload does so when the upload fails part way).
pub(crate) fn remove(ctx: &Ctx<'_>, attachment_id: &str) -> Result<Decision, DomainError> {
    if let Some(upload) = ctx.state.attachments.uploads.get(attachment_id) {
        ctx.require_company(&upload.company_id, "attachment", attachment_id)?;
        if upload.uploader != ctx.actor.id {
            return Err(DomainError::not_found("attachment", attachment_id));
        }
        return Ok(Decision {
            note: ActivityNote {
                company_id: Some(upload.company_id.clone()),
                entity_type: "issue",
                entity_id: upload.issue_id.clone(),
                details: json!({ "attachmentId": attachment_id, "upload": "given up" }),
            },
            changes: vec![Change::Attachment(AttachmentChange::Removed(
                attachment_id.to_string(),
            ))],
            outcome: Outcome::AttachmentChunk(AttachmentChunk {
                attachment_id: attachment_id.to_string(),
                company_id: upload.company_id.clone(),
                issue_id: upload.issue_id.clone(),
                index: upload.sizes.len() as u32,
                size: upload.bytes(),
                uploader: upload.uploader.clone(),
                at: upload.last_at,
            }),
        });
    }
    let attachment = ctx
        .state
        .attachments
        .attachments
        .get(attachment_id)
        .ok_or_else(|| DomainError::not_found("attachment", attachment_id))?;
    ctx.require_company(&attachment.company_id, "attachment", attachment_id)?;
    writable_issue(ctx, &attachment.issue_id)?;
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(attachment.company_id.clone()),
            entity_type: "issue",
            entity_id: attachment.issue_id.clone(),
            details: json!({ "attachmentId": attachment.id }),
        },
        changes: vec![Change::Attachment(AttachmentChange::Removed(
            attachment.id.clone(),
        ))],
        outcome: Outcome::Attachment(attachment.clone()),
    })
}

/// The attachments, uploads in progress and work products of a deleted issue go with it
/// (`rules/issue.rs`).
pub(crate) fn of_deleted_issue(ctx: &Ctx<'_>, issue_id: &str) -> impl Iterator<Item = Change> {
    let state = &ctx.state.attachments;
    let attachments: Vec<Change> = state
        .of_issue(issue_id)
        .into_iter()
        .map(|a| a.id.clone())
        .chain(
            state
                .uploads
                .iter()
                .filter(|(_, u)| u.issue_id == issue_id)
                .map(|(id, _)| id.clone()),
        )
        .map(|id| Change::Attachment(AttachmentChange::Removed(id)))
        .collect();
    let products: Vec<Change> = ctx
        .state
        .work_products
        .of_issue(issue_id)
        .into_iter()
        .map(|w| {
            Change::WorkProduct(crate::work_product::WorkProductChange::Removed(
                w.id.clone(),
            ))
        })
        .collect();
    attachments.into_iter().chain(products)
}
