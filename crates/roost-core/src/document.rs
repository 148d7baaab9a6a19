//! Issue documents: named, versioned markdown on an issue (Paperclip's `plan` and others,
//! `/api/issues/{id}/documents/{key}`). Memory keeps each document's summary (its latest
//! revision's id and number); the revisions, with their bodies, live only in `state.db`, as a
//! comment's body does, so a document's history costs no memory. The rules are in
//! `rules/document.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::DomainError;
use crate::time::Timestamp;

/// The one format Paperclip has.
pub const MARKDOWN: &str = "markdown";
/// Paperclip's bounds: a body of 512 KiB, a title of 200 characters, a summary of 500, a key
/// of 64.
pub const MAX_DOCUMENT_BODY_BYTES: usize = 512 * 1024;
pub const MAX_DOCUMENT_TITLE_CHARS: usize = 200;
pub const MAX_CHANGE_SUMMARY_CHARS: usize = 500;
pub const MAX_DOCUMENT_KEY_CHARS: usize = 64;
/// Documents on one issue: Roost's own bound, so that one issue's summaries cannot grow
/// without end in every node's memory.
pub const MAX_DOCUMENTS_PER_ISSUE: usize = 100;

/// A document's summary: what memory keeps and `state.db`'s `issue_documents` row holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueDocument {
    pub id: String,
    pub company_id: String,
    pub issue_id: String,
    /// Unique on its issue: lowercase letters, digits, `_` and `-` ([`key_problem`]).
    pub key: String,
    pub title: Option<String>,
    pub format: String,
    pub latest_revision_id: String,
    pub latest_revision_number: u64,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub updated_by_agent_id: Option<String>,
    pub updated_by_user_id: Option<String>,
    /// A locked document is changed only by an administrator, after unlocking it; an agent's
    /// write goes to a new document beside it (as Paperclip does).
    pub locked_at: Option<Timestamp>,
    pub locked_by_agent_id: Option<String>,
    pub locked_by_user_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One saved version of a document, with its body: only in `state.db`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentRevision {
    pub id: String,
    pub company_id: String,
    pub document_id: String,
    pub issue_id: String,
    pub key: String,
    pub revision_number: u64,
    pub title: Option<String>,
    pub format: String,
    pub body: String,
    pub change_summary: Option<String>,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub created_by_run_id: Option<String>,
    pub created_at: Timestamp,
}

/// A document's text as written: by a put, or copied from an earlier revision by a restore.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentText {
    pub title: Option<String>,
    pub format: String,
    pub body: String,
}

/// A put's request body, Paperclip's `upsertIssueDocumentSchema` (REST's and the client's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DocumentPutBody {
    #[serde(default)]
    pub title: Option<String>,
    /// Paperclip requires it; its one value, `markdown`, is the default here.
    #[serde(default)]
    pub format: Option<String>,
    pub body: String,
    #[serde(default)]
    pub change_summary: Option<String>,
    /// The latest revision's id the change was made from; absent to create the document.
    #[serde(default)]
    pub base_revision_id: Option<String>,
}

/// What a command does to the document `key` of an issue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DocumentOp {
    /// Creates the document (no `base_revision_id`) or saves a new revision of it (the
    /// latest revision's id as `base_revision_id`, so a concurrent edit is refused, not lost).
    /// `document_id` names the document if one is created; `revision_id` the new revision.
    Put {
        document_id: String,
        revision_id: String,
        text: DocumentText,
        change_summary: Option<String>,
        base_revision_id: Option<String>,
    },
    /// Saves a copy of the earlier revision `from_revision_id` (number `from_revision_number`)
    /// as the newest. The node that proposes it reads that revision from its `state.db`, after
    /// a read barrier, and checks it is the document's (a revision never changes); apply
    /// checks it is older than the latest.
    Restore {
        /// The document the revision was read from: a document deleted and made again under
        /// the same key is another document, whose history this revision is not part of.
        document_id: String,
        from_revision_id: String,
        from_revision_number: u64,
        revision_id: String,
        text: DocumentText,
    },
    Lock,
    Unlock,
    Delete,
}

impl DocumentOp {
    /// The activity log's action.
    pub fn name(&self) -> &'static str {
        match self {
            DocumentOp::Put { .. } => "issue.document_saved",
            DocumentOp::Restore { .. } => "issue.document_restored",
            DocumentOp::Lock => "issue.document_locked",
            DocumentOp::Unlock => "issue.document_unlocked",
            DocumentOp::Delete => "issue.document_deleted",
        }
    }

    /// Bounds checked before a command is proposed (`limits.rs`).
    pub fn check(&self) -> Result<(), DomainError> {
        match self {
            DocumentOp::Put {
                text,
                change_summary,
                ..
            } => {
                text.check()?;
                if change_summary
                    .as_ref()
                    .is_some_and(|s| s.trim().chars().count() > MAX_CHANGE_SUMMARY_CHARS)
                {
                    return Err(DomainError::too_large(
                        "changeSummary",
                        MAX_CHANGE_SUMMARY_CHARS as u64,
                        "characters",
                    ));
                }
                Ok(())
            }
            DocumentOp::Restore { text, .. } => text.check(),
            DocumentOp::Lock | DocumentOp::Unlock | DocumentOp::Delete => Ok(()),
        }
    }
}

impl DocumentText {
    fn check(&self) -> Result<(), DomainError> {
        if self.body.len() > MAX_DOCUMENT_BODY_BYTES {
            return Err(DomainError::too_large(
                "body",
                MAX_DOCUMENT_BODY_BYTES as u64,
                "bytes",
            ));
        }
        if self
            .title
            .as_ref()
            .is_some_and(|t| t.trim().chars().count() > MAX_DOCUMENT_TITLE_CHARS)
        {
            return Err(DomainError::too_large(
                "title",
                MAX_DOCUMENT_TITLE_CHARS as u64,
                "characters",
            ));
        }
        if self.format != MARKDOWN {
            return Err(DomainError::invalid(
                "format",
                format!("must be \"{MARKDOWN}\", the one document format"),
            ));
        }
        Ok(())
    }
}

/// Why `key` cannot name a document, if it cannot: Paperclip's rule, 1-64 characters of
/// lowercase letters, digits, `_` and `-`, starting with a letter or digit.
pub fn key_problem(key: &str) -> Option<&'static str> {
    let mut chars = key.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !first_ok || !rest_ok || key.len() > MAX_DOCUMENT_KEY_CHARS {
        Some("a document key is 1-64 lowercase letters, digits, _ or -, starting with a letter or digit")
    } else {
        None
    }
}

/// A document as Paperclip's routes answer it: its summary, and its latest body where the
/// route shows one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentView {
    #[serde(flatten)]
    pub document: IssueDocument,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl IssueDocument {
    pub fn view(self, body: Option<String>) -> DocumentView {
        DocumentView {
            document: self,
            body,
        }
    }
}

/// A plan written the way Paperclip's agents wrote one before plan documents: between
/// `<plan>` and `</plan>` in the issue's description (Paperclip's `legacyPlanDocument`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyPlanDocument {
    pub key: String,
    pub body: String,
    /// Always `issue_description`.
    pub source: String,
}

/// The legacy plan in `description`, if it holds a non-empty `<plan>...</plan>` (tags in any
/// case, the first pair).
pub fn legacy_plan(description: Option<&str>) -> Option<LegacyPlanDocument> {
    let text = description?;
    // ASCII lowercasing keeps every byte offset, so the tags' offsets index `text`.
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<plan>")? + "<plan>".len();
    let end = start + lower[start..].find("</plan>")?;
    let body = text[start..end].trim();
    (!body.is_empty()).then(|| LegacyPlanDocument {
        key: "plan".into(),
        body: body.to_string(),
        source: "issue_description".into(),
    })
}

/// What apply writes for documents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DocumentChange {
    Document(IssueDocument),
    Revision(DocumentRevision),
    /// A document removed with its revisions (its id).
    Deleted(String),
}

/// Every document's summary, by id, and by (issue, key).
#[derive(Clone, Debug, Default)]
pub struct DocumentState {
    pub documents: BTreeMap<String, IssueDocument>,
    by_issue: BTreeMap<(String, String), String>,
}

impl DocumentState {
    /// Memory keeps summaries; a revision is written to `state.db` only.
    pub(crate) fn put(&mut self, change: DocumentChange) {
        match change {
            DocumentChange::Document(d) => {
                self.by_issue
                    .insert((d.issue_id.clone(), d.key.clone()), d.id.clone());
                self.documents.insert(d.id.clone(), d);
            }
            DocumentChange::Revision(_) => {}
            DocumentChange::Deleted(id) => {
                if let Some(d) = self.documents.remove(&id) {
                    self.by_issue.remove(&(d.issue_id, d.key));
                }
            }
        }
    }

    /// The document `key` of `issue_id`.
    pub fn get(&self, issue_id: &str, key: &str) -> Option<&IssueDocument> {
        self.by_issue
            .get(&(issue_id.to_string(), key.to_string()))
            .and_then(|id| self.documents.get(id))
    }

    /// An issue's documents in key order.
    pub fn of_issue<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = &'a IssueDocument> {
        let from = (issue_id.to_string(), String::new());
        let issue = issue_id.to_string();
        self.by_issue
            .range(from..)
            .take_while(move |((i, _), _)| *i == issue)
            .filter_map(|(_, id)| self.documents.get(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_plan_is_the_first_tagged_text_of_a_description() {
        let plan = legacy_plan(Some(
            "Intro\n<PLAN>\n  1. build\n2. ship\n</Plan> after <plan>x</plan>",
        ));
        assert_eq!(plan.map(|p| p.body), Some("1. build\n2. ship".to_string()));
        for none in [
            None,
            Some("no tags"),
            Some("<plan>  </plan>"),
            Some("<plan>open"),
        ] {
            assert_eq!(legacy_plan(none), None, "{none:?}");
        }
        // Text around multi-byte characters keeps its offsets.
        let plan = legacy_plan(Some("ÄÖ <plan>é ü</plan>"));
        assert_eq!(plan.map(|p| p.body), Some("é ü".to_string()));
    }

    #[test]
    fn keys_follow_paperclips_rule() {
        for ok in ["plan", "a", "0-notes", "design_v2", &"k".repeat(64)] {
            assert_eq!(key_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "Plan",
            "-plan",
            "_plan",
            "plan doc",
            "plan/x",
            &"k".repeat(65),
        ] {
            assert!(key_problem(bad).is_some(), "{bad}");
        }
    }
}
