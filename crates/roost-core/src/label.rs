//! Issue labels: a company's named colours (Paperclip's `labels`). An issue names its labels in
//! `labelIds`, kept among its Paperclip fields as Paperclip shows them; the rules are in
//! `rules/label.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The issue field that names its labels.
pub const LABEL_IDS: &str = "labelIds";

/// The longest label name, in characters after trimming (Paperclip's bound).
pub const MAX_LABEL_NAME_CHARS: usize = 48;

/// Labels one company keeps at most.
pub const MAX_LABELS_PER_COMPANY: usize = 500;

/// Labels one issue carries at most.
pub const MAX_LABELS_PER_ISSUE: usize = 50;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Label {
    pub id: String,
    pub company_id: String,
    pub name: String,
    /// `#RRGGBB`, as sent.
    pub color: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The label ids an issue's Paperclip fields name: the strings of its `labelIds` array. Rows
/// written before labels were checked may hold anything there; what is not a string is no label.
pub fn label_ids(paperclip: &BTreeMap<String, serde_json::Value>) -> impl Iterator<Item = &str> {
    paperclip
        .get(LABEL_IDS)
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
}

/// Sets an issue's `labelIds` to `labels`' ids in their order, `[]` when it carries none: what
/// Paperclip answers, whose `labelIds` follow its `labels` and leave out a deleted one.
pub(crate) fn show_label_ids(
    paperclip: &mut BTreeMap<String, serde_json::Value>,
    labels: &[Label],
) {
    let ids = labels
        .iter()
        .map(|l| serde_json::Value::from(l.id.as_str()));
    paperclip.insert(LABEL_IDS.into(), ids.collect());
}

/// Whether `color` is `#` and six hex digits.
pub fn is_color(color: &str) -> bool {
    color.len() == 7 && color.starts_with('#') && color[1..].chars().all(|c| c.is_ascii_hexdigit())
}
