//! Issue attachments: files uploaded to an issue (Paperclip's
//! `/api/companies/{cid}/issues/{id}/attachments`), the way an agent hands over a deliverable.
//!
//! A file travels through the log in chunks of at most [`CHUNK_BYTES`], one command each
//! (`PutAttachmentChunk`), then one command makes the attachment of them (`AddIssueAttachment`):
//! openraft 0.9 gives an AppendEntries one heartbeat interval (30 ms) to be answered, and an
//! entry of a few hundred KiB already misses it on a busy node, so the leader loses its
//! followers (`tests/e2e/attachments/` saw it at 512 KiB). Memory keeps each attachment's
//! summary and each upload in progress; the bytes live only in `state.db`
//! (`attachment_chunks`). The rules are in `rules/attachment.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::DomainError;
use crate::time::Timestamp;

/// Paperclip's one ceiling for a file: 10 MiB (its `PAPERCLIP_ATTACHMENT_MAX_BYTES` default).
pub const MAX_ATTACHMENT_BYTES: u64 = 10 * 1024 * 1024;
/// The bytes one chunk command carries at most (171 KiB of base64).
pub const CHUNK_BYTES: u64 = 128 * 1024;
/// The chunks of the largest file.
pub const MAX_CHUNKS: u32 = (MAX_ATTACHMENT_BYTES / CHUNK_BYTES) as u32;
/// Uploads in progress per company, and their bytes together: an upload whose last chunk is
/// older than [`ABANDONED_AFTER_MS`] is dropped by the company's next chunk.
pub const MAX_UPLOADS_IN_PROGRESS: usize = 32;
pub const MAX_UPLOADING_BYTES: u64 = 128 * 1024 * 1024;
pub const ABANDONED_AFTER_MS: i64 = 60 * 60 * 1000;
/// Roost's bounds, so one issue or company cannot grow every node's memory and disk without
/// end: attachments on one issue, and the bytes of a company's attachments together.
pub const MAX_ATTACHMENTS_PER_ISSUE: usize = 200;
pub const MAX_COMPANY_ATTACHMENT_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// A file name, a content type and a comment's id, as kept.
pub const MAX_FILENAME_CHARS: usize = 255;
pub const MAX_CONTENT_TYPE_CHARS: usize = 255;
pub const MAX_COMMENT_ID_CHARS: usize = 200;

/// What an unnamed or generic upload is stored as.
pub const OCTET_STREAM: &str = "application/octet-stream";
const GENERIC_TYPES: [&str; 3] = [
    "application/octet-stream",
    "binary/octet-stream",
    "application/x-binary",
];

/// An attachment's summary: what memory keeps and `state.db`'s `issue_attachments` row holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueAttachment {
    pub id: String,
    pub company_id: String,
    pub issue_id: String,
    pub issue_comment_id: Option<String>,
    /// The agent run that uploaded it, if a run did.
    pub originating_run_id: Option<String>,
    pub content_type: String,
    pub byte_size: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
    pub original_filename: Option<String>,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An attachment as Paperclip's routes answer it: its summary and where its bytes are served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentView {
    #[serde(flatten)]
    pub attachment: IssueAttachment,
    pub content_path: String,
    pub open_path: String,
    pub download_path: String,
}

/// An attachment as a run's heartbeat context lists it (Paperclip's shape).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRef {
    pub id: String,
    pub filename: Option<String>,
    pub content_type: String,
    pub byte_size: u64,
    pub content_path: String,
    pub created_at: Timestamp,
}

impl IssueAttachment {
    pub fn reference(&self) -> AttachmentRef {
        AttachmentRef {
            id: self.id.clone(),
            filename: self.original_filename.clone(),
            content_type: self.content_type.clone(),
            byte_size: self.byte_size,
            content_path: content_path(&self.id),
            created_at: self.created_at,
        }
    }

    pub fn view(self) -> AttachmentView {
        let path = content_path(&self.id);
        AttachmentView {
            attachment: self,
            open_path: path.clone(),
            download_path: format!("{path}?download=1"),
            content_path: path,
        }
    }
}

/// `/api/attachments/{id}/content`.
pub fn content_path(id: &str) -> String {
    format!("/api/attachments/{id}/content")
}

/// What makes an attachment of an upload's chunks: the file's name and type, and what the
/// proposing node saw of its bytes (their count in chunks, size and SHA-256).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentUpload {
    pub original_filename: Option<String>,
    pub content_type: String,
    pub issue_comment_id: Option<String>,
    pub chunks: u32,
    pub byte_size: u64,
    pub sha256: String,
}

impl AttachmentUpload {
    /// Bounds checked before the command is proposed (`limits.rs`) and by apply.
    pub fn check(&self) -> Result<(), DomainError> {
        if self
            .original_filename
            .as_ref()
            .is_some_and(|n| n.chars().count() > MAX_FILENAME_CHARS)
        {
            return Err(DomainError::too_large(
                "originalFilename",
                MAX_FILENAME_CHARS as u64,
                "characters",
            ));
        }
        if self.content_type.chars().count() > MAX_CONTENT_TYPE_CHARS {
            return Err(DomainError::too_large(
                "contentType",
                MAX_CONTENT_TYPE_CHARS as u64,
                "characters",
            ));
        }
        if self
            .issue_comment_id
            .as_ref()
            .is_some_and(|c| c.chars().count() > MAX_COMMENT_ID_CHARS)
        {
            return Err(DomainError::too_large(
                "issueCommentId",
                MAX_COMMENT_ID_CHARS as u64,
                "characters",
            ));
        }
        if self.byte_size > MAX_ATTACHMENT_BYTES || self.chunks > MAX_CHUNKS {
            return Err(too_big());
        }
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(DomainError::invalid(
                "sha256",
                "must be 64 hexadecimal digits",
            ));
        }
        Ok(())
    }
}

/// One chunk command's bytes, in base64 (the log is JSON), bounded before it is proposed.
pub fn check_chunk(index: u32, content: &str) -> Result<(), DomainError> {
    if index >= MAX_CHUNKS {
        return Err(too_big());
    }
    if content.len() as u64 > CHUNK_BYTES.div_ceil(3) * 4 {
        return Err(DomainError::too_large(
            "content",
            CHUNK_BYTES,
            "bytes a chunk",
        ));
    }
    Ok(())
}

/// A stored chunk of an attachment or of an upload in progress: its row in `state.db`
/// (`attachment_chunks`, beside its bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentChunk {
    pub attachment_id: String,
    pub company_id: String,
    pub issue_id: String,
    pub index: u32,
    pub size: u64,
    /// Who uploads (an agent's id or a person's name): only they may add to or finish it.
    pub uploader: String,
    pub at: Timestamp,
}

impl AttachmentChunk {
    /// Its row's key.
    pub fn key(&self) -> String {
        chunk_key(&self.attachment_id, self.index)
    }
}

pub fn chunk_key(attachment_id: &str, index: u32) -> String {
    format!("{attachment_id}/{index:05}")
}

/// An upload in progress, as memory keeps it: its chunks by index and their sizes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Upload {
    pub company_id: String,
    pub issue_id: String,
    pub uploader: String,
    pub sizes: BTreeMap<u32, u64>,
    pub last_at: Timestamp,
}

impl Upload {
    pub fn bytes(&self) -> u64 {
        self.sizes.values().sum()
    }
}

/// Paperclip's refusal of a file over the limit (422, as its upload route answers).
pub fn too_big() -> DomainError {
    DomainError::invariant(
        "attachment_size",
        format!(
            "Attachment is larger than the {} MB limit",
            MAX_ATTACHMENT_BYTES / (1024 * 1024)
        ),
    )
}

/// A content type as Paperclip keeps it: the MIME essence (parameters dropped, lowercase),
/// `application/octet-stream` when empty or not `type/subtype` of token characters (so no
/// header it is served in can be bent), and an office document's type inferred from its file
/// name when the client sent a generic one.
pub fn normalize_content_type(sent: Option<&str>, filename: Option<&str>) -> String {
    let essence = sent
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let well_formed = essence
        .split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub));
    let essence = if well_formed {
        essence
    } else {
        OCTET_STREAM.to_string()
    };
    if !GENERIC_TYPES.contains(&essence.as_str()) {
        return essence;
    }
    office_type(filename.unwrap_or("")).map_or(essence, str::to_string)
}

/// The type of a file named `filename`, from its extension, for a client that does not know
/// it: common documents, images and media, else `application/octet-stream`.
pub fn content_type_for(filename: &str) -> &'static str {
    let lower = filename.trim().to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map_or("", |(_, e)| e);
    let known = match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "md" | "markdown" => "text/markdown",
        "txt" | "log" => "text/plain",
        "json" => "application/json",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "zip" => "application/zip",
        _ => "",
    };
    if known.is_empty() {
        video_type(filename)
            .or_else(|| office_type(filename))
            .unwrap_or(OCTET_STREAM)
    } else {
        known
    }
}

/// The type a file is served as: the kept one, or for a file kept as a generic type whose
/// name says it is a video, that video type, so that a player opens it inline (Paperclip
/// serves it so; the kept type stays as sent).
pub fn served_content_type<'a>(kept: &'a str, filename: Option<&str>) -> &'a str {
    if !GENERIC_TYPES.contains(&kept) {
        return kept;
    }
    filename.and_then(video_type).unwrap_or(kept)
}

/// The video type a file's name says, as Paperclip reads names (`.m4v` as MP4).
fn video_type(filename: &str) -> Option<&'static str> {
    let lower = filename.trim().to_ascii_lowercase();
    Some(match lower.rsplit_once('.')?.1 {
        "mp4" | "m4v" => "video/mp4",
        "webm" => "video/webm",
        "mov" | "qt" | "quicktime" => "video/quicktime",
        _ => return None,
    })
}

fn office_type(filename: &str) -> Option<&'static str> {
    let lower = filename.trim().to_ascii_lowercase();
    let ext = lower.rsplit_once('.')?.1;
    Some(match ext {
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "doc" => "application/msword",
        "xls" => "application/vnd.ms-excel",
        "ppt" => "application/vnd.ms-powerpoint",
        _ => return None,
    })
}

/// Types a browser may show in place (Paperclip's `INLINE_ATTACHMENT_TYPES`); others are
/// served as downloads.
pub fn is_inline(content_type: &str) -> bool {
    const INLINE: [&str; 9] = [
        "application/pdf",
        "text/plain",
        "text/markdown",
        "application/json",
        "text/csv",
        "video/mp4",
        "video/webm",
        "video/quicktime",
        "video/x-m4v",
    ];
    let t = content_type.to_ascii_lowercase();
    t.starts_with("image/") || INLINE.contains(&t.as_str())
}

/// What apply writes for attachments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttachmentChange {
    /// A chunk of an upload and its bytes (the bytes go to `state.db` only).
    Chunk {
        chunk: AttachmentChunk,
        content: Vec<u8>,
    },
    /// The attachment an upload's chunks make.
    Added(IssueAttachment),
    /// An attachment removed with its chunks, or an upload given up (its id).
    Removed(String),
}

/// Every attachment's summary, by id and by issue, each company's bytes in use, and the
/// uploads in progress.
#[derive(Clone, Debug, Default)]
pub struct AttachmentState {
    pub attachments: BTreeMap<String, IssueAttachment>,
    by_issue: BTreeSet<(String, String)>,
    company_bytes: BTreeMap<String, u64>,
    /// Uploads in progress by attachment id.
    pub uploads: BTreeMap<String, Upload>,
}

impl AttachmentState {
    pub(crate) fn put(&mut self, change: &AttachmentChange) {
        match change {
            AttachmentChange::Chunk { chunk, .. } => self.chunk(chunk),
            AttachmentChange::Added(a) => {
                self.uploads.remove(&a.id);
                self.insert(a.clone());
            }
            AttachmentChange::Removed(id) => {
                self.uploads.remove(id);
                if let Some(a) = self.attachments.remove(id) {
                    self.by_issue.remove(&(a.issue_id, a.id));
                    if let Some(bytes) = self.company_bytes.get_mut(&a.company_id) {
                        *bytes = bytes.saturating_sub(a.byte_size);
                    }
                }
            }
        }
    }

    /// A chunk of an upload in progress (also as loaded from `state.db`).
    pub(crate) fn chunk(&mut self, c: &AttachmentChunk) {
        let upload = self
            .uploads
            .entry(c.attachment_id.clone())
            .or_insert_with(|| Upload {
                company_id: c.company_id.clone(),
                issue_id: c.issue_id.clone(),
                uploader: c.uploader.clone(),
                sizes: BTreeMap::new(),
                last_at: c.at,
            });
        upload.sizes.insert(c.index, c.size);
        upload.last_at = upload.last_at.max(c.at);
    }

    /// A summary loaded from `state.db`.
    pub(crate) fn insert(&mut self, a: IssueAttachment) {
        self.by_issue.insert((a.issue_id.clone(), a.id.clone()));
        *self.company_bytes.entry(a.company_id.clone()).or_default() += a.byte_size;
        if let Some(old) = self.attachments.insert(a.id.clone(), a) {
            // A row written twice (a replay) counts once.
            if let Some(bytes) = self.company_bytes.get_mut(&old.company_id) {
                *bytes = bytes.saturating_sub(old.byte_size);
            }
        }
    }

    /// An issue's attachments, newest first (Paperclip's order).
    pub fn of_issue(&self, issue_id: &str) -> Vec<&IssueAttachment> {
        let mut list: Vec<&IssueAttachment> = self
            .by_issue
            .range((issue_id.to_string(), String::new())..)
            .take_while(|(i, _)| i == issue_id)
            .filter_map(|(_, id)| self.attachments.get(id))
            .collect();
        list.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        list
    }

    /// Refuses a file of `bytes` that `issue` or its company has no room for: one more
    /// attachment than an issue may have, or more bytes than a company may keep. Apply checks
    /// it at the first chunk and at the end; the API before it sends any chunk.
    pub fn room_for(&self, issue: &crate::entity::Issue, bytes: u64) -> Result<(), DomainError> {
        DomainError::room_on_issue(
            "attachments_per_issue",
            "attachments",
            (self.of_issue(&issue.id).len(), MAX_ATTACHMENTS_PER_ISSUE),
            &issue.identifier,
            "delete one it no longer needs",
        )?;
        let used = self.company_bytes(&issue.company_id);
        if used.saturating_add(bytes) > MAX_COMPANY_ATTACHMENT_BYTES {
            return Err(DomainError::quota(
                "company_attachment_bytes",
                MAX_COMPANY_ATTACHMENT_BYTES,
                format!(
                    "the company's attachments hold {used} of the {MAX_COMPANY_ATTACHMENT_BYTES} \
                     bytes it may keep; delete attachments it no longer needs"
                ),
            ));
        }
        Ok(())
    }

    /// The bytes of a company's attachments together.
    pub fn company_bytes(&self, company_id: &str) -> u64 {
        self.company_bytes.get(company_id).copied().unwrap_or(0)
    }

    /// A company's uploads in progress.
    pub fn uploads_of<'a>(
        &'a self,
        company_id: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a Upload)> {
        self.uploads
            .iter()
            .filter(move |(_, u)| u.company_id == company_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_kept_as_paperclip_keeps_them() {
        let cases = [
            (Some("text/plain; charset=utf-8"), None, "text/plain"),
            (Some(" IMAGE/PNG "), None, "image/png"),
            (None, Some("a.bin"), OCTET_STREAM),
            (Some(""), None, OCTET_STREAM),
            (
                Some("application/octet-stream"),
                Some("Plan.DOCX"),
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            ),
            (
                Some("binary/octet-stream"),
                Some("t.xls"),
                "application/vnd.ms-excel",
            ),
            // A type the client named is kept whatever the file is called.
            (Some("text/csv"), Some("t.xlsx"), "text/csv"),
            // Not a type: kept as bytes, never as a header to bend.
            (Some("image/svg+xml\u{0}"), None, OCTET_STREAM),
            (Some("text/html\r\nX-Evil: 1"), None, OCTET_STREAM),
            (Some("nonsense"), None, OCTET_STREAM),
        ];
        for (sent, name, want) in cases {
            assert_eq!(
                normalize_content_type(sent, name),
                want,
                "{sent:?} {name:?}"
            );
        }
    }

    #[test]
    fn images_and_documents_show_inline_and_archives_download() {
        assert!(is_inline("image/svg+xml"));
        assert!(is_inline("application/PDF"));
        assert!(!is_inline("application/zip"));
        assert!(!is_inline("text/html"));
    }

    /// Regression: a video kept as a generic type (a browser or curl sends `.mov` files as
    /// application/octet-stream) was served as a download; Paperclip serves it as the video
    /// its name says, inline.
    #[test]
    fn a_video_kept_as_bytes_is_served_as_the_video_its_name_says() {
        let cases = [
            ("application/octet-stream", Some("demo.MP4"), "video/mp4"),
            ("binary/octet-stream", Some("clip.m4v"), "video/mp4"),
            ("application/x-binary", Some("take.webm"), "video/webm"),
            (
                "application/octet-stream",
                Some("screen.mov"),
                "video/quicktime",
            ),
            ("application/octet-stream", Some("a.qt"), "video/quicktime"),
            // A type the client named is served as named; other bytes stay bytes.
            ("text/plain", Some("notes.mp4"), "text/plain"),
            ("application/octet-stream", Some("build.bin"), OCTET_STREAM),
            ("application/octet-stream", None, OCTET_STREAM),
        ];
        for (kept, name, want) in cases {
            assert_eq!(served_content_type(kept, name), want, "{kept} {name:?}");
        }
        assert!(is_inline(served_content_type(
            OCTET_STREAM,
            Some("demo.webm")
        )));
    }

    #[test]
    fn a_chunk_or_an_upload_over_the_limit_is_refused_before_it_is_proposed() {
        assert!(check_chunk(0, &"A".repeat((CHUNK_BYTES.div_ceil(3) * 4) as usize)).is_ok());
        assert!(check_chunk(0, &"A".repeat((CHUNK_BYTES.div_ceil(3) * 4 + 4) as usize)).is_err());
        assert!(check_chunk(MAX_CHUNKS, "AAAA").is_err());
        let upload = |byte_size: u64, sha256: &str| AttachmentUpload {
            original_filename: Some("f".into()),
            content_type: OCTET_STREAM.into(),
            issue_comment_id: None,
            chunks: 1,
            byte_size,
            sha256: sha256.into(),
        };
        let hash = "a".repeat(64);
        assert!(upload(MAX_ATTACHMENT_BYTES, &hash).check().is_ok());
        assert!(upload(MAX_ATTACHMENT_BYTES + 1, &hash).check().is_err());
        assert!(upload(1, "not a hash").check().is_err());
    }
}
