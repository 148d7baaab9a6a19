//! Issue attachments (`roost_core::attachment`) and work products
//! (`roost_core::work_product`): summaries and work products from memory, an attachment's
//! bytes from `state.db`.

use base64::Engine;
use roost_core::attachment::{
    normalize_content_type, too_big, AttachmentUpload, AttachmentView, IssueAttachment,
    CHUNK_BYTES, MAX_ATTACHMENT_BYTES,
};
use roost_core::work_product::{WorkProduct, WorkProductFields};
use roost_core::{Command, DomainError, Issue, Outcome};
use sha2::{Digest, Sha256};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

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

    /// Uploads a file to `issue` (from [`Api::attachment_issue`]).
    pub async fn upload_attachment(
        &self,
        caller: &Caller,
        issue: Issue,
        file: NewAttachment,
    ) -> Result<AttachmentView, ApiError> {
        // Refused here as apply would refuse them, before any chunk goes through the log.
        if file.bytes.is_empty() {
            return Err(DomainError::invariant("attachment_empty", "Attachment is empty").into());
        }
        if file.bytes.len() as u64 > MAX_ATTACHMENT_BYTES {
            return Err(too_big().into());
        }
        let attachment_id = new_id();
        // The chunks are not keyed: a retry of the request uploads its own, and only the last
        // write, keyed, makes the attachment once (`roost_core::idempotency`).
        let uploader = Caller {
            idempotency_key: None,
            ..caller.clone()
        };
        let chunks = file.bytes.chunks(CHUNK_BYTES as usize);
        let count = chunks.len();
        for (index, chunk) in chunks.enumerate() {
            let command = Command::PutAttachmentChunk {
                issue_id: issue.id.clone(),
                attachment_id: attachment_id.clone(),
                index: u32::try_from(index).map_err(ApiError::internal)?,
                content: base64::engine::general_purpose::STANDARD.encode(chunk),
            };
            self.submit(&uploader, command).await?;
        }
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
        let command = Command::AddIssueAttachment {
            issue_id: issue.id,
            attachment_id,
            work_product_id: new_id(),
            upload,
        };
        expect_outcome!(
            self.submit(caller, command).await?,
            Outcome::Attachment(a) => a.view()
        )
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
        let command = Command::DeleteWorkProduct {
            work_product_id: id.to_string(),
        };
        self.work_product_command(caller, command).await
    }

    async fn work_product_command(
        &self,
        caller: &Caller,
        command: Command,
    ) -> Result<WorkProduct, ApiError> {
        expect_outcome!(self.submit(caller, command).await?, Outcome::WorkProduct(w) => w)
    }
}
