//! Issue documents (`roost_core::document`): summaries from memory, bodies and revisions from
//! `state.db`.

use roost_core::document::{
    key_problem, DocumentOp, DocumentRevision, DocumentText, DocumentView, IssueDocument,
};
use std::time::Duration;

use roost_core::{Command, Outcome};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// A put as Paperclip's `PUT /api/issues/{id}/documents/{key}` sends it.
#[derive(Clone, Debug)]
pub struct DocumentPut {
    pub text: DocumentText,
    pub change_summary: Option<String>,
    pub base_revision_id: Option<String>,
}

/// A write's answer: the document, and whether the write created it.
pub struct Saved {
    pub document: DocumentView,
    pub created: bool,
}

/// Paperclip reads a key trimmed and lowercased before checking it.
fn document_key(raw: &str) -> Result<String, ApiError> {
    let key = raw.trim().to_lowercase();
    match key_problem(&key) {
        Some(problem) => Err(ApiError::bad_request(format!(
            "invalid document key {raw:?}: {problem}"
        ))),
        None => Ok(key),
    }
}

/// How long a read waits for the rows of what memory showed (below).
const ROWS_WAIT: Duration = Duration::from_secs(5);

impl Api {
    /// The document `key` of a visible issue, from memory, with the applied index memory was
    /// at.
    async fn document(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
    ) -> Result<(String, IssueDocument, u64), ApiError> {
        let issue = self.get_issue(caller, issue).await?;
        let key = document_key(key)?;
        let (doc, seen_at) = self
            .reader()
            .read(|s| (s.documents.get(&issue.id, &key).cloned(), s.applied_index));
        let doc = doc.ok_or_else(|| {
            ApiError::not_found("document", &format!("{key} of issue {}", issue.identifier))
        })?;
        Ok((issue.id, doc, seen_at))
    }

    /// Waits until `state.db` holds the rows of the entries memory had applied at `seen_at`:
    /// apply changes memory before it writes the batch's rows.
    pub(super) async fn rows_written(&self, seen_at: u64) -> Result<(), ApiError> {
        if self.reader().wait_applied(seen_at, ROWS_WAIT).await {
            return Ok(());
        }
        Err(ApiError::Unavailable {
            message: "this node is still writing the rows of the latest writes; retry in a moment"
                .into(),
            retry_after_ms: 500,
            leader: None,
        })
    }

    /// The latest body of `doc`, as memory showed it at index `seen_at`; `None` if the
    /// document was deleted since.
    pub(super) async fn body_of(
        &self,
        doc: &IssueDocument,
        seen_at: u64,
    ) -> Result<Option<String>, ApiError> {
        self.rows_written(seen_at).await?;
        let revision = self
            .reader()
            .document_revision(&doc.latest_revision_id)
            .await?;
        Ok(revision.filter(|r| r.document_id == doc.id).map(|r| r.body))
    }

    /// An issue's documents in key order, each with its latest body.
    pub async fn list_documents(
        &self,
        caller: &Caller,
        issue: &str,
    ) -> Result<Vec<DocumentView>, ApiError> {
        let issue = self.get_issue(caller, issue).await?;
        let (docs, seen_at): (Vec<IssueDocument>, u64) = self.reader().read(|s| {
            (
                s.documents.of_issue(&issue.id).cloned().collect(),
                s.applied_index,
            )
        });
        let mut views = Vec::with_capacity(docs.len());
        for doc in docs {
            // One deleted since memory was read is left out.
            if let Some(body) = self.body_of(&doc, seen_at).await? {
                views.push(doc.view(Some(body)));
            }
        }
        Ok(views)
    }

    /// An issue's documents without bodies, in key order, and its `plan` with its body (an
    /// issue's detail shows these, as Paperclip's does).
    pub(super) async fn issue_documents(
        &self,
        issue_id: &str,
    ) -> Result<(Vec<DocumentView>, Option<DocumentView>), ApiError> {
        let (summaries, plan, seen_at) = self.reader().read(|s| {
            (
                s.documents
                    .of_issue(issue_id)
                    .map(|d| d.clone().view(None))
                    .collect(),
                s.documents.get(issue_id, "plan").cloned(),
                s.applied_index,
            )
        });
        let plan = match plan {
            Some(plan) => self
                .body_of(&plan, seen_at)
                .await?
                .map(|body| plan.view(Some(body))),
            None => None,
        };
        Ok((summaries, plan))
    }

    pub async fn get_document(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
    ) -> Result<DocumentView, ApiError> {
        let (_, doc, seen_at) = self.document(caller, issue, key).await?;
        let body = self
            .body_of(&doc, seen_at)
            .await?
            .ok_or_else(|| ApiError::not_found("document", &doc.key))?;
        Ok(doc.view(Some(body)))
    }

    pub async fn document_revisions(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
    ) -> Result<Vec<DocumentRevision>, ApiError> {
        let (_, doc, seen_at) = self.document(caller, issue, key).await?;
        self.rows_written(seen_at).await?;
        Ok(self.reader().document_revisions(&doc.id).await?)
    }

    pub async fn put_document(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
        put: DocumentPut,
    ) -> Result<Saved, ApiError> {
        let issue_id = self.resolve_issue_id(caller, issue)?;
        let op = DocumentOp::Put {
            document_id: new_id(),
            revision_id: new_id(),
            text: put.text,
            change_summary: put.change_summary,
            base_revision_id: put.base_revision_id,
        };
        self.document_command(caller, issue_id, document_key(key)?, op)
            .await
    }

    /// Saves a copy of revision `revision_id` as the document's newest. Its text is read
    /// here, after a read barrier, and carried in the command (a revision never changes).
    pub async fn restore_document(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
        revision_id: &str,
    ) -> Result<DocumentView, ApiError> {
        let (issue_id, doc, seen_at) = self.document(caller, issue, key).await?;
        self.rows_written(seen_at).await?;
        let revision = self
            .reader()
            .document_revision(revision_id)
            .await?
            .filter(|r| r.document_id == doc.id)
            .ok_or_else(|| ApiError::not_found("document revision", revision_id))?;
        let op = DocumentOp::Restore {
            document_id: doc.id.clone(),
            from_revision_id: revision.id,
            from_revision_number: revision.revision_number,
            revision_id: new_id(),
            text: DocumentText {
                title: revision.title,
                format: revision.format,
                body: revision.body,
            },
        };
        let saved = self.document_command(caller, issue_id, doc.key, op).await?;
        Ok(saved.document)
    }

    /// Locks, unlocks or deletes a document (administrators only); answers it as the command
    /// left it, with its body.
    pub async fn document_admin(
        &self,
        caller: &Caller,
        issue: &str,
        key: &str,
        op: DocumentOp,
    ) -> Result<DocumentView, ApiError> {
        let issue_id = self.resolve_issue_id(caller, issue)?;
        let saved = self
            .document_command(caller, issue_id, document_key(key)?, op)
            .await?;
        Ok(saved.document)
    }

    async fn document_command(
        &self,
        caller: &Caller,
        issue_id: String,
        key: String,
        op: DocumentOp,
    ) -> Result<Saved, ApiError> {
        let deleting = matches!(op, DocumentOp::Delete);
        let command = Command::IssueDocument { issue_id, key, op };
        let (doc, body, created) = expect_outcome!(
            self.submit(caller, command).await?,
            Outcome::IssueDocument { document, body, created, .. } => (document, body, created)
        )?;
        let body = match body {
            Some(body) => Some(body),
            // A deleted document's revisions are gone: it is answered without its body.
            None if deleting => None,
            None => {
                let seen_at = self.reader().read(|s| s.applied_index);
                self.body_of(&doc, seen_at).await?
            }
        };
        Ok(Saved {
            document: doc.view(body),
            created,
        })
    }
}
