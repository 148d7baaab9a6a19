//! Issue attachments (`roost_core::attachment`) and work products
//! (`roost_core::work_product`): summaries and work products from memory, an attachment's
//! bytes from `state.db`.

use base64::Engine;
use roost_core::attachment::{
    normalize_content_type, too_big, AttachmentUpload, AttachmentView, IssueAttachment,
    CHUNK_BYTES, MAX_ATTACHMENT_BYTES,
};
use roost_core::idempotency::scoped_key;
use roost_core::work_product::{WorkProduct, WorkProductFields};
use roost_core::{Command, DomainError, Issue, Outcome, Timestamp};
use sha2::{Digest, Sha256};

use super::upload_slots::{NoSlot, UploadSlot};
use super::{expect_outcome, new_id, now, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// Uploads one node reads at once: each holds up to 10 MiB (and its chunks' base64) in memory
/// while its chunks go through the log one by one. More wait for a moment (429).
pub(crate) const UPLOADS_AT_ONCE: usize = 8;

/// Of those, the uploads one caller (`Actor::principal`) sends at once: half, so that one cannot
/// keep the others out (`upload_slots.rs`).
pub(crate) const UPLOADS_AT_ONCE_PER_CALLER: usize = UPLOADS_AT_ONCE / 2;

/// How long before its key expires a keyed retry still counts on it: an upload's chunks and
/// last write commit within this (10 MiB is 80 chunks of a few ms each).
const KEY_MARGIN_MS: i64 = 10 * 60 * 1000;

/// A file as a client uploads it.
#[derive(Clone, Debug)]
pub struct NewAttachment {
    pub original_filename: Option<String>,
    /// As the client sent it; kept as Paperclip keeps it (`normalize_content_type`).
    pub content_type: Option<String>,
    pub issue_comment_id: Option<String>,
    pub bytes: Vec<u8>,
}

/// The bytes of a download: all of them, or the range asked for.
pub struct AttachmentContent {
    pub attachment: IssueAttachment,
    pub bytes: Vec<u8>,
}

impl Api {
    /// The issue an upload to company `company_id`'s issue `issue` goes to (Paperclip's route
    /// names both): checked before the upload's body is read.
    pub async fn attachment_issue(
        &self,
        caller: &Caller,
        company_id: &str,
        issue: &str,
    ) -> Result<Issue, ApiError> {
        caller.check_company(company_id, "company", company_id)?;
        let issue = self.get_issue(caller, issue).await?;
        if issue.company_id != company_id {
            return Err(DomainError::invariant(
                "issue_company",
                "Issue does not belong to company",
            )
            .into());
        }
        Ok(issue)
    }

    /// A place among the uploads this node reads at once, taken before an upload's body is
    /// read and held until the upload ends ([`Api::upload_attachment`] takes it); one caller
    /// (an agent with all its keys, else a credential: `Actor::principal`) takes at most its
    /// share of them.
    pub(crate) fn upload_permit(&self, caller: &Caller) -> Result<UploadSlot, ApiError> {
        let who = caller.actor.principal();
        self.uploads.take(who).map_err(|why| {
            let refusal = match why {
                NoSlot::Node => DomainError::quota(
                    "uploads_at_once",
                    UPLOADS_AT_ONCE as u64,
                    format!(
                        "this node is reading {UPLOADS_AT_ONCE} uploads at once, the most it \
                         does; retry in a moment"
                    ),
                ),
                NoSlot::Caller => DomainError::quota(
                    "uploads_at_once_per_caller",
                    UPLOADS_AT_ONCE_PER_CALLER as u64,
                    format!(
                        "you are sending {UPLOADS_AT_ONCE_PER_CALLER} uploads to this node at \
                         once, the most one caller may; send the next when one is done"
                    ),
                ),
            };
            refusal.into()
        })
    }

    /// Uploads a file to `issue` (from [`Api::attachment_issue`]), in the place `slot` the
    /// caller took before reading it. The upload runs to its end in a task of its own, which
    /// holds the place: a client that goes away part way leaves neither half an upload nor one
    /// it cannot tell was made (a retry with its key finds it), and frees no place early.
    pub(crate) async fn upload_attachment(
        &self,
        caller: &Caller,
        issue: Issue,
        file: NewAttachment,
        slot: UploadSlot,
    ) -> Result<AttachmentView, ApiError> {
        let api = self.clone();
        let caller = caller.clone();
        tokio::spawn(async move {
            let uploaded = api.upload(&caller, issue, file).await;
            drop(slot);
            uploaded
        })
        .await
        .map_err(ApiError::internal)?
    }

    async fn upload(
        &self,
        caller: &Caller,
        issue: Issue,
        file: NewAttachment,
    ) -> Result<AttachmentView, ApiError> {
        if file.bytes.is_empty() {
            return Err(DomainError::invariant("attachment_empty", "Attachment is empty").into());
        }
        if file.bytes.len() as u64 > MAX_ATTACHMENT_BYTES {
            return Err(too_big().into());
        }
        let chunks = file.bytes.chunks(CHUNK_BYTES as usize);
        let count = chunks.len();
        let upload = AttachmentUpload {
            content_type: normalize_content_type(
                file.content_type.as_deref(),
                file.original_filename.as_deref(),
            ),
            original_filename: file.original_filename.filter(|n| !n.is_empty()),
            issue_comment_id: file.issue_comment_id.filter(|c| !c.is_empty()),
            chunks: u32::try_from(count).map_err(ApiError::internal)?,
            byte_size: file.bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(&file.bytes)),
        };
        let attachment_id = new_id();
        let finish = Command::AddIssueAttachment {
            issue_id: issue.id.clone(),
            attachment_id: attachment_id.clone(),
            work_product_id: new_id(),
            upload,
        };
        // The chunks are not keyed: only the last write is, so the attachment is made once
        // whatever a retry sends.
        let uploader = Caller {
            idempotency_key: None,
            ..caller.clone()
        };
        // A retry of a keyed upload that was made (memory is past the caller's barrier,
        // `attachment_issue`): only its last write, which answers the first outcome
        // (`roost_core::idempotency`), with no chunk sent again. Only while the key is sure
        // to outlive the upload: one that expires first would leave the last write no chunks.
        let made = caller.idempotency_key.as_deref().is_some_and(|key| {
            let scoped = scoped_key(&caller.actor, &finish, key);
            let finished_by = Timestamp(now().0.saturating_add(KEY_MARGIN_MS));
            self.reader()
                .read(|s| s.idempotency.live_at(&scoped, finished_by).is_some())
        });
        let mut sent = 0;
        if !made {
            // What apply would refuse once every chunk is in, refused before the first.
            roost_core::limits::check(&finish)?;
            self.upload_fits(&issue, &finish)?;
            for (index, chunk) in chunks.enumerate() {
                let command = Command::PutAttachmentChunk {
                    issue_id: issue.id.clone(),
                    attachment_id: attachment_id.clone(),
                    index: u32::try_from(index).map_err(ApiError::internal)?,
                    content: base64::engine::general_purpose::STANDARD.encode(chunk),
                };
                if let Err(e) = self.submit(&uploader, command).await {
                    self.give_up(&uploader, &attachment_id, index, &e).await;
                    return Err(e);
                }
                sent = index + 1;
            }
        }
        match self.submit(caller, finish).await {
            Ok(outcome) => {
                let made = expect_outcome!(outcome, Outcome::Attachment(a) => a)?;
                // A retry that raced its first attempt (both sent chunks): the key answered
                // the first attachment, so this request's chunks are given up.
                if made.id != attachment_id {
                    let refused = ApiError::Domain(DomainError::conflict("made by the first"));
                    self.give_up(&uploader, &attachment_id, sent, &refused)
                        .await;
                }
                Ok(made.view())
            }
            Err(e) => {
                self.give_up(&uploader, &attachment_id, sent, &e).await;
                Err(e)
            }
        }
    }

    /// Refuses, before any chunk is sent, an upload to `issue` that apply would refuse once
    /// its chunks are in: a comment not of the issue, an issue or company at its bound.
    fn upload_fits(&self, issue: &Issue, finish: &Command) -> Result<(), ApiError> {
        let Command::AddIssueAttachment { upload, .. } = finish else {
            return Ok(());
        };
        self.reader().read(|s| {
            if let Some(comment) = &upload.issue_comment_id {
                // Another company's comment is as unknown as one that is not there.
                match s
                    .comments
                    .get(comment)
                    .filter(|c| c.company_id == issue.company_id)
                {
                    None => return Err(ApiError::not_found("issue comment", comment)),
                    Some(c) if c.issue_id != issue.id => {
                        return Err(DomainError::invariant(
                            "issue_comment",
                            format!(
                                "comment {comment} is not a comment of issue {}",
                                issue.identifier
                            ),
                        )
                        .into())
                    }
                    Some(_) => {}
                }
            }
            s.attachments.room_for(issue, upload.byte_size)?;
            Ok(())
        })
    }

    /// Drops an upload that failed after `sent` chunks, so it holds no quota: only when apply
    /// refused the write (`error` is a refusal), never when its outcome is unknown, as a write
    /// that timed out may still have made the attachment. Best effort: an upload left over is
    /// dropped by its company's next chunk an hour after its last.
    async fn give_up(&self, uploader: &Caller, attachment_id: &str, sent: usize, error: &ApiError) {
        if sent == 0 || !matches!(error, ApiError::Domain(_)) {
            return;
        }
        let command = Command::RemoveIssueAttachment {
            attachment_id: attachment_id.to_string(),
        };
        if let Err(e) = self.submit(uploader, command).await {
            tracing::debug!(attachment_id, error = %e, "an upload given up stays until it is stale");
        }
    }

    /// An issue's attachments, newest first.
    pub async fn list_attachments(
        &self,
        caller: &Caller,
        issue: &str,
    ) -> Result<Vec<AttachmentView>, ApiError> {
        let issue = self.get_issue(caller, issue).await?;
        Ok(self.reader().read(|s| {
            s.attachments
                .of_issue(&issue.id)
                .into_iter()
                .map(|a| a.clone().view())
                .collect()
        }))
    }

    /// An attachment visible to the caller, from memory, with the applied index memory was at.
    async fn attachment(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<(IssueAttachment, u64), ApiError> {
        self.barrier().await?;
        let (attachment, seen_at) = self
            .reader()
            .read(|s| (s.attachments.attachments.get(id).cloned(), s.applied_index));
        let attachment = attachment.ok_or_else(|| ApiError::not_found("attachment", id))?;
        caller.check_company(&attachment.company_id, "attachment", id)?;
        Ok((attachment, seen_at))
    }

    /// An attachment's bytes, or `len` of them from `start`.
    pub async fn attachment_content(
        &self,
        caller: &Caller,
        id: &str,
        range: Option<(u64, u64)>,
    ) -> Result<AttachmentContent, ApiError> {
        let (attachment, seen_at) = self.attachment(caller, id).await?;
        self.rows_written(seen_at).await?;
        let bytes = self
            .reader()
            .attachment_bytes(id, range)
            .await?
            // Removed since memory was read.
            .ok_or_else(|| ApiError::not_found("attachment", id))?;
        Ok(AttachmentContent { attachment, bytes })
    }

    /// The attachment's summary (for a ranged download's total size).
    pub async fn attachment_summary(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<IssueAttachment, ApiError> {
        Ok(self.attachment(caller, id).await?.0)
    }

    pub async fn remove_attachment(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<IssueAttachment, ApiError> {
        // A finished attachment only (an upload in progress is not one).
        self.attachment(caller, id).await?;
        let command = Command::RemoveIssueAttachment {
            attachment_id: id.to_string(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Attachment(a) => a)
    }

    /// An issue's work products, primary first, then the most recently updated.
    pub async fn list_work_products(
        &self,
        caller: &Caller,
        issue: &str,
    ) -> Result<Vec<WorkProduct>, ApiError> {
        let issue = self.get_issue(caller, issue).await?;
        Ok(self.reader().read(|s| {
            s.work_products
                .of_issue(&issue.id)
                .into_iter()
                .cloned()
                .collect()
        }))
    }

    pub async fn create_work_product(
        &self,
        caller: &Caller,
        issue: &str,
        fields: WorkProductFields,
    ) -> Result<WorkProduct, ApiError> {
        let issue_id = self.resolve_issue_id(caller, issue)?;
        let command = Command::CreateWorkProduct {
            issue_id,
            work_product_id: new_id(),
            fields,
        };
        self.work_product_command(caller, command).await
    }

    pub async fn update_work_product(
        &self,
        caller: &Caller,
        id: &str,
        fields: WorkProductFields,
    ) -> Result<WorkProduct, ApiError> {
        self.work_product(caller, id).await?;
        let command = Command::UpdateWorkProduct {
            work_product_id: id.to_string(),
            fields,
        };
        self.work_product_command(caller, command).await
    }

    /// Removes a work product; answers it as it was.
    pub async fn delete_work_product(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<WorkProduct, ApiError> {
        self.work_product(caller, id).await?;
        let command = Command::DeleteWorkProduct {
            work_product_id: id.to_string(),
        };
        self.work_product_command(caller, command).await
    }

    /// A work product visible to the caller, from memory: one that is not is refused before
    /// anything is proposed.
    async fn work_product(&self, caller: &Caller, id: &str) -> Result<WorkProduct, ApiError> {
        self.barrier().await?;
        let product = self
            .reader()
            .read(|s| s.work_products.products.get(id).cloned())
            .ok_or_else(|| ApiError::not_found("work product", id))?;
        caller.check_company(&product.company_id, "work product", id)?;
        Ok(product)
    }

    async fn work_product_command(
        &self,
        caller: &Caller,
        command: Command,
    ) -> Result<WorkProduct, ApiError> {
        expect_outcome!(self.submit(caller, command).await?, Outcome::WorkProduct(w) => w)
    }
}
