//! Resolving a deliverable step (`Op::Deliverable`) into a command against the world's state:
//! chunks of uploads (some empty or not base64), attachments made of them (their figures right
//! or wrong), removals of the issue's attachments (or of a made-up
//! one), and creates, updates and deletions of work products, artifacts naming the issue's
//! attachments or another issue's.

use base64::Engine;
use roost_core::attachment::AttachmentUpload;
use roost_core::work_product::WorkProductFields;
use roost_core::*;
use serde_json::json;

use super::super::ops::Text;
use super::World;

impl World {
    pub(super) fn deliverable(
        &self,
        issue_id: String,
        n: u8,
        new: String,
        body: &Text,
        actor: &Actor,
    ) -> Command {
        let uploader = actor.id.as_str();
        let text = body.render();
        let attachments = self.state.attachments.of_issue(&issue_id);
        let attachment = attachments
            .get(usize::from(n / 8) % attachments.len().max(1))
            .map_or_else(|| format!("at-{new}"), |a| a.id.clone());
        // An attachment or work product of any issue: this one's, another's, another
        // company's.
        let all = &self.state.attachments.attachments;
        let any_attachment = all
            .keys()
            .nth(usize::from(n / 8) % all.len().max(1))
            .cloned()
            .unwrap_or_else(|| attachment.clone());
        // Mostly the sender's own upload in progress on this issue, else any, else a new one.
        let uploads = &self.state.attachments.uploads;
        let upload = uploads
            .iter()
            .filter(|(_, u)| {
                u.issue_id == issue_id && ((n / 8).is_multiple_of(5) || u.uploader == uploader)
            })
            .map(|(id, _)| id.clone())
            .next()
            .unwrap_or_else(|| format!("up-{new}"));
        let next_index = uploads.get(&upload).map_or(0, |u| u.sizes.len() as u32);
        let products = &self.state.work_products.products;
        let product = products
            .keys()
            .nth(usize::from(n / 8) % products.len().max(1))
            .cloned()
            .unwrap_or_else(|| format!("wp-{new}"));
        let fields = |v: serde_json::Value| -> WorkProductFields {
            serde_json::from_value(v).unwrap_or_default()
        };
        match n % 8 {
            // A chunk of a new upload, or of one of the issue's uploads in progress (or one
            // not well-formed); then making the attachment of one, its figures right or wrong.
            0 => Command::PutAttachmentChunk {
                issue_id,
                attachment_id: upload.clone(),
                // Mostly the next chunk; sometimes one already there or past a gap.
                index: match n / 8 % 4 {
                    0 => next_index + 1,
                    1 => next_index.saturating_sub(1),
                    _ => next_index,
                },
                content: match n / 32 {
                    0 => "@@ not base64 @@".into(),
                    1 => String::new(),
                    _ => base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
                },
            },
            1 => {
                let make = |id: &str, chunks: u32, bytes: u64| Command::AddIssueAttachment {
                    issue_id: issue_id.clone(),
                    attachment_id: id.to_string(),
                    work_product_id: format!("wp-{new}"),
                    upload: AttachmentUpload {
                        original_filename: Some(text.clone()),
                        content_type: "text/plain".into(),
                        issue_comment_id: None,
                        chunks,
                        // Sometimes a size the chunks do not add up to.
                        byte_size: if n % 16 == 1 { bytes + 1 } else { bytes },
                        sha256: "ab".repeat(32),
                    },
                };
                match uploads.get(&upload) {
                    Some(u) => make(&upload, u.sizes.len() as u32, u.bytes()),
                    // None in progress: a one-chunk file and its attachment in one entry, as
                    // one sender's two writes.
                    None => {
                        let envelope = |command| Envelope {
                            request_id: None,
                            at: Timestamp(self.clock),
                            actor: actor.clone(),
                            command,
                            idempotency_key: None,
                        };
                        let content = base64::engine::general_purpose::STANDARD.encode(b"one");
                        Command::Batch {
                            envelopes: vec![
                                envelope(Command::PutAttachmentChunk {
                                    issue_id: issue_id.clone(),
                                    attachment_id: upload.clone(),
                                    index: 0,
                                    content,
                                }),
                                envelope(make(&upload, 1, 3)),
                            ],
                        }
                    }
                }
            }
            2 => Command::RemoveIssueAttachment {
                attachment_id: attachment,
            },
            3 => Command::RemoveIssueAttachment {
                attachment_id: any_attachment.clone(),
            },
            4 | 5 => Command::CreateWorkProduct {
                issue_id,
                work_product_id: format!("wp-{new}"),
                fields: if n.is_multiple_of(2) {
                    fields(
                        json!({"type": "artifact", "provider": "paperclip", "title": text,
                                  "isPrimary": true,
                                  "metadata": {"attachmentId": any_attachment}}),
                    )
                } else {
                    fields(
                        json!({"type": "pull_request", "provider": "github", "title": "pr",
                                  "isPrimary": n.is_multiple_of(3), "url": "https://example.com/pr"}),
                    )
                },
            },
            6 => Command::UpdateWorkProduct {
                work_product_id: product,
                fields: fields(json!({"isPrimary": true, "status": "merged", "summary": "done"})),
            },
            _ => Command::DeleteWorkProduct {
                work_product_id: product,
            },
        }
    }
}
