//! Issue documents (`/api/issues/{id}/documents[/{key}[/...]]`), in the server's own types
//! (`roost_core::document`).

use reqwest::Method;
pub use roost_core::document::{DocumentPutBody, DocumentRevision, DocumentView};
use serde_json::{json, Value};

use crate::{Result, RoostClient, API};

impl RoostClient {
    /// An issue's documents in key order, each with its latest body.
    pub async fn list_documents(&self, issue: &str) -> Result<Vec<DocumentView>> {
        self.get(&[API, "issues", issue, "documents"], &[]).await
    }

    pub async fn get_document(&self, issue: &str, key: &str) -> Result<DocumentView> {
        self.get(&[API, "issues", issue, "documents", key], &[])
            .await
    }

    /// Creates the document, or saves a new revision of it from `base_revision_id`.
    pub async fn put_document(
        &self,
        issue: &str,
        key: &str,
        body: &DocumentPutBody,
    ) -> Result<DocumentView> {
        let path = [API, "issues", issue, "documents", key];
        self.send(Method::PUT, &path, &[], Some(body)).await
    }

    /// Every revision, newest first.
    pub async fn document_revisions(
        &self,
        issue: &str,
        key: &str,
    ) -> Result<Vec<DocumentRevision>> {
        self.get(&[API, "issues", issue, "documents", key, "revisions"], &[])
            .await
    }

    pub async fn restore_document(
        &self,
        issue: &str,
        key: &str,
        revision_id: &str,
    ) -> Result<DocumentView> {
        let path = [
            API,
            "issues",
            issue,
            "documents",
            key,
            "revisions",
            revision_id,
            "restore",
        ];
        self.post(&path, &json!({})).await
    }

    /// Locks (`true`) or unlocks the document (administrators only).
    pub async fn lock_document(
        &self,
        issue: &str,
        key: &str,
        locked: bool,
    ) -> Result<DocumentView> {
        let action = if locked { "lock" } else { "unlock" };
        self.post(
            &[API, "issues", issue, "documents", key, action],
            &json!({}),
        )
        .await
    }

    /// Deletes the document with its revisions (administrators only).
    pub async fn delete_document(&self, issue: &str, key: &str) -> Result<()> {
        let _: Value = self
            .delete(&[API, "issues", issue, "documents", key])
            .await?;
        Ok(())
    }
}
