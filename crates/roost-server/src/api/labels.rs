//! Issue labels: read by every member of the company, written and deleted by its agents and
//! administrators (`roost-core/src/rules/label.rs`), shown on issues by name.

use roost_core::label::{label_ids, Label};
use roost_core::views::LabeledIssue;
use roost_core::{Command, Issue, Outcome, State};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    /// A company's labels by name, then id (Paperclip's order).
    pub async fn list_labels(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Label>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut labels: Vec<Label> = self.reader().read(|s| {
            s.labels
                .values()
                .filter(|l| l.company_id == company_id)
                .cloned()
                .collect()
        });
        by_name(&mut labels);
        Ok(labels)
    }

    pub async fn create_label(
        &self,
        caller: &Caller,
        company_id: &str,
        name: String,
        color: String,
    ) -> Result<Label, ApiError> {
        let command = Command::CreateLabel {
            id: new_id(),
            company_id: company_id.into(),
            name,
            color,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Label(l) => l)
    }

    pub async fn delete_label(&self, caller: &Caller, id: &str) -> Result<Label, ApiError> {
        let command = Command::DeleteLabel {
            label_id: id.into(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Label(l) => l)
    }

    /// `issue` as the REST routes answer it, with the labels it carries. An issue without
    /// labels (most, and every checkout an agent makes with Paperclip's skill) takes no read
    /// lock.
    pub fn with_label(&self, issue: Issue) -> LabeledIssue {
        let labels = if label_ids(&issue.paperclip).next().is_none() {
            Vec::new()
        } else {
            self.reader().read(|s| labels_of(s, &issue))
        };
        LabeledIssue::new(issue, labels)
    }

    /// `issues` with the labels each carries, read at once.
    pub fn with_labels(&self, issues: Vec<Issue>) -> Vec<LabeledIssue> {
        self.reader().read(|s| {
            issues
                .into_iter()
                .map(|issue| {
                    let labels = labels_of(s, &issue);
                    LabeledIssue::new(issue, labels)
                })
                .collect()
        })
    }
}

/// The labels `issue` carries, by name then id, as Paperclip shows them.
pub(crate) fn labels_of(s: &State, issue: &Issue) -> Vec<Label> {
    let mut labels: Vec<Label> = label_ids(&issue.paperclip)
        .filter_map(|id| s.labels.get(id))
        .filter(|l| l.company_id == issue.company_id)
        .cloned()
        .collect();
    by_name(&mut labels);
    labels
}

/// Paperclip's order of labels: by name, then id.
fn by_name(labels: &mut [Label]) {
    labels.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
}
