//! Issue work products: what work on an issue produced, as Paperclip lists them beside it
//! (`/api/issues/{id}/work-products`): a pull request, a branch, a preview URL, a document, or
//! an uploaded file (an `artifact` of provider `paperclip`, backed by an attachment,
//! `attachment.rs`). They are small rows, kept whole in memory; the rules are in
//! `rules/work_product.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::command::nullable;
use crate::error::DomainError;
use crate::time::Timestamp;

/// Paperclip's values (`issueWorkProductTypeSchema` and the others).
pub const TYPES: [&str; 7] = [
    "preview_url",
    "runtime_service",
    "pull_request",
    "branch",
    "commit",
    "artifact",
    "document",
];
pub const STATUSES: [&str; 9] = [
    "active",
    "ready_for_review",
    "approved",
    "changes_requested",
    "merged",
    "closed",
    "failed",
    "archived",
    "draft",
];
pub const REVIEW_STATES: [&str; 4] = [
    "none",
    "needs_board_review",
    "approved",
    "changes_requested",
];
pub const HEALTH_STATUSES: [&str; 3] = ["unknown", "healthy", "unhealthy"];

/// The work product an uploaded file is: Paperclip's attachment-backed artifact.
pub const ARTIFACT: &str = "artifact";
pub const PAPERCLIP: &str = "paperclip";

/// Roost's bounds (Paperclip sets none), so that one issue's work products stay small in
/// every node's memory.
pub const MAX_WORK_PRODUCTS_PER_ISSUE: usize = 100;
pub const MAX_TITLE_CHARS: usize = 500;
pub const MAX_SHORT_CHARS: usize = 200;
pub const MAX_REF_CHARS: usize = 2000;
pub const MAX_SUMMARY_CHARS: usize = 10_000;
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

/// A work product, as memory and `state.db` keep it and Paperclip's routes answer it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkProduct {
    pub id: String,
    pub company_id: String,
    pub project_id: Option<String>,
    pub issue_id: String,
    pub execution_workspace_id: Option<String>,
    pub runtime_service_id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub provider: String,
    pub external_id: Option<String>,
    pub title: String,
    pub url: Option<String>,
    pub status: String,
    pub review_state: String,
    pub is_primary: bool,
    pub health_status: String,
    pub summary: Option<String>,
    pub metadata: Option<Value>,
    pub created_by_run_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl WorkProduct {
    /// An artifact backed by one of Paperclip's attachments: its metadata names it.
    pub fn is_paperclip_artifact(&self) -> bool {
        self.kind == ARTIFACT && self.provider == PAPERCLIP
    }

    /// The attachment an attachment-backed artifact names.
    pub fn attachment_id(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("attachmentId")?.as_str()
    }
}

/// The fields a create sets or an update changes (Paperclip's `createIssueWorkProductSchema`;
/// an update sends any of them). Absent leaves a field as it is (a create takes Paperclip's
/// defaults); `null` clears an optional one. Also REST's and the client's body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkProductFields {
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub project_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub execution_workspace_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub runtime_service_id: Option<Option<String>>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub external_id: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub url: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_primary: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub summary: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub metadata: Option<Option<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nullable")]
    pub created_by_run_id: Option<Option<String>>,
}

fn one_of(field: &str, value: &Option<String>, allowed: &[&str]) -> Result<(), DomainError> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(DomainError::invalid(
            field,
            format!("{v:?} is not one of {}", allowed.join(", ")),
        )),
        _ => Ok(()),
    }
}

fn bounded(field: &str, value: Option<&str>, most: usize) -> Result<(), DomainError> {
    if value.is_some_and(|v| v.chars().count() > most) {
        return Err(DomainError::too_large(field, most as u64, "characters"));
    }
    Ok(())
}

fn non_empty(field: &str, value: &Option<String>) -> Result<(), DomainError> {
    if value.as_ref().is_some_and(|v| v.trim().is_empty()) {
        return Err(DomainError::invalid(field, "must not be empty"));
    }
    Ok(())
}

impl WorkProductFields {
    /// Paperclip's schema and Roost's bounds, checked before a command is proposed
    /// (`limits.rs`) and again by apply.
    pub fn check(&self) -> Result<(), DomainError> {
        one_of("type", &self.kind, &TYPES)?;
        one_of("status", &self.status, &STATUSES)?;
        one_of("reviewState", &self.review_state, &REVIEW_STATES)?;
        one_of("healthStatus", &self.health_status, &HEALTH_STATUSES)?;
        non_empty("provider", &self.provider)?;
        non_empty("title", &self.title)?;
        bounded("title", self.title.as_deref(), MAX_TITLE_CHARS)?;
        bounded("provider", self.provider.as_deref(), MAX_SHORT_CHARS)?;
        for (field, value) in [
            ("projectId", &self.project_id),
            ("executionWorkspaceId", &self.execution_workspace_id),
            ("runtimeServiceId", &self.runtime_service_id),
            ("createdByRunId", &self.created_by_run_id),
        ] {
            bounded(field, value.clone().flatten().as_deref(), MAX_SHORT_CHARS)?;
        }
        bounded(
            "externalId",
            self.external_id.clone().flatten().as_deref(),
            MAX_REF_CHARS,
        )?;
        bounded(
            "summary",
            self.summary.clone().flatten().as_deref(),
            MAX_SUMMARY_CHARS,
        )?;
        if let Some(Some(url)) = &self.url {
            bounded("url", Some(url), MAX_REF_CHARS)?;
            if !is_url(url) {
                return Err(DomainError::invalid("url", "must be an absolute URL"));
            }
        }
        if let Some(Some(metadata)) = &self.metadata {
            if !metadata.is_object() {
                return Err(DomainError::invalid("metadata", "must be an object"));
            }
            if serde_json::to_string(metadata).map_or(usize::MAX, |s| s.len()) > MAX_METADATA_BYTES
            {
                return Err(DomainError::too_large(
                    "metadata",
                    MAX_METADATA_BYTES as u64,
                    "bytes of JSON",
                ));
            }
        }
        Ok(())
    }

    /// The fields a create must send (Paperclip's required ones).
    pub fn check_create(&self) -> Result<(), DomainError> {
        for (field, value) in [
            ("type", &self.kind),
            ("provider", &self.provider),
            ("title", &self.title),
        ] {
            if value.is_none() {
                return Err(DomainError::invalid(field, "is required"));
            }
        }
        self.check()
    }
}

/// `scheme:rest`, as a URL parser would accept its start: a letter, then letters, digits,
/// `+`, `-` or `.`, a colon, and no whitespace anywhere.
fn is_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && !url.chars().any(char::is_whitespace)
}

/// What apply writes for work products.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// Changes live only between apply and the SQLite write, as `state::Change` does.
#[allow(clippy::large_enum_variant)]
pub enum WorkProductChange {
    Put(WorkProduct),
    /// A work product removed (its id).
    Removed(String),
}

/// Every work product, by id and by issue.
#[derive(Clone, Debug, Default)]
pub struct WorkProductState {
    pub products: BTreeMap<String, WorkProduct>,
    by_issue: BTreeSet<(String, String)>,
}

impl WorkProductState {
    pub(crate) fn put(&mut self, change: &WorkProductChange) {
        match change {
            WorkProductChange::Put(w) => {
                self.by_issue.insert((w.issue_id.clone(), w.id.clone()));
                self.products.insert(w.id.clone(), w.clone());
            }
            WorkProductChange::Removed(id) => {
                if let Some(w) = self.products.remove(id) {
                    self.by_issue.remove(&(w.issue_id, w.id));
                }
            }
        }
    }

    /// An issue's work products, primary ones first, then the most recently updated first
    /// (Paperclip's order).
    pub fn of_issue(&self, issue_id: &str) -> Vec<&WorkProduct> {
        let mut list: Vec<&WorkProduct> = self
            .by_issue
            .range((issue_id.to_string(), String::new())..)
            .take_while(|(i, _)| i == issue_id)
            .filter_map(|(_, id)| self.products.get(id))
            .collect();
        list.sort_by(|a, b| {
            b.is_primary
                .cmp(&a.is_primary)
                .then(b.updated_at.cmp(&a.updated_at))
                .then(b.id.cmp(&a.id))
        });
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paperclips_schema_is_checked_with_the_field_named() {
        let ok: WorkProductFields = serde_json::from_value(serde_json::json!({
            "type": "pull_request", "provider": "github", "title": "PR #4",
            "url": "https://github.com/o/r/pull/4", "status": "ready_for_review",
            "reviewState": "needs_board_review", "isPrimary": true, "healthStatus": "healthy",
            "summary": null, "metadata": {"number": 4}, "createdByRunId": null
        }))
        .expect("Paperclip's body");
        assert!(ok.check_create().is_ok());
        let bad = |patch: serde_json::Value, field: &str| {
            let fields: WorkProductFields = serde_json::from_value(patch).expect("body");
            match fields.check_create() {
                Err(DomainError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        };
        bad(
            serde_json::json!({"type": "pr", "provider": "g", "title": "t"}),
            "type",
        );
        bad(serde_json::json!({"provider": "g", "title": "t"}), "type");
        bad(
            serde_json::json!({"type": "branch", "provider": "g"}),
            "title",
        );
        bad(
            serde_json::json!({"type": "branch", "provider": " ", "title": "t"}),
            "provider",
        );
        bad(
            serde_json::json!({"type": "branch", "provider": "g", "title": "t", "url": "not a url"}),
            "url",
        );
        bad(
            serde_json::json!({"type": "branch", "provider": "g", "title": "t", "metadata": [1]}),
            "metadata",
        );
        assert!(
            serde_json::from_value::<WorkProductFields>(serde_json::json!({"sourceTrust": 1}))
                .is_err()
        );
    }
}
