//! Paperclip's payload schemas for each kind of card, the parts Roost reads and their bounds
//! (other fields are kept as sent).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    InteractionKind, ItemVerdict, MAX_CHECKBOX_OPTIONS, MAX_PAYLOAD_BYTES, MAX_QUESTIONS,
    MAX_QUESTION_OPTIONS, MAX_VERDICT_ITEMS,
};
use crate::error::DomainError;

pub(super) fn opt_chars(field: &str, value: Option<&str>, max: usize) -> Result<(), DomainError> {
    if value.is_some_and(|v| v.trim().chars().count() > max) {
        return Err(DomainError::too_large(field, max as u64, "characters"));
    }
    Ok(())
}

pub(super) fn unique<'a>(
    field: &str,
    ids: impl Iterator<Item = &'a str>,
) -> Result<(), DomainError> {
    let mut seen = BTreeSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(DomainError::invalid(
                field,
                format!("`{id}` is named twice; each id may appear once"),
            ));
        }
    }
    Ok(())
}

/// What a card is bound to: a revision of an issue document (it expires when a newer one
/// is saved), or something the agent names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    #[serde(rename = "type")]
    pub target_type: String,
    pub key: String,
    #[serde(default)]
    pub revision_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Common {
    version: u32,
    /// Checked for its type here; read from the payload (`Interaction::supersede_on_user_comment`).
    #[serde(default)]
    #[allow(dead_code)]
    supersede_on_user_comment: Option<bool>,
    #[serde(default)]
    target: Option<Target>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Confirmation {
    prompt: String,
    #[serde(default)]
    pub reject_requires_reason: bool,
    #[serde(default)]
    tool_action: Option<Value>,
    #[serde(default)]
    secret_proposal: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct Labeled {
    pub id: String,
    label: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Checkbox {
    prompt: String,
    pub options: Vec<Labeled>,
    #[serde(default)]
    pub default_selected_option_ids: Vec<String>,
    #[serde(default)]
    pub min_selected: usize,
    #[serde(default)]
    pub max_selected: Option<usize>,
    #[serde(default)]
    pub reject_requires_reason: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QuestionOption {
    pub id: String,
    label: String,
    #[serde(default)]
    pub free_text: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Question {
    pub id: String,
    prompt: String,
    pub selection_mode: String,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub allow_other: bool,
    pub options: Vec<QuestionOption>,
}

#[derive(Deserialize)]
pub(crate) struct Questions {
    pub questions: Vec<Question>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Items {
    prompt: String,
    pub items: Vec<Labeled>,
    #[serde(default)]
    pub verdicts: Option<Vec<ItemVerdict>>,
    #[serde(default)]
    pub require_reason_on: Option<Vec<ItemVerdict>>,
}

impl Items {
    pub fn allowed(&self) -> Vec<ItemVerdict> {
        self.verdicts
            .clone()
            .unwrap_or_else(|| vec![ItemVerdict::Approve, ItemVerdict::Reject])
    }

    pub fn reason_required(&self, verdict: ItemVerdict) -> bool {
        self.require_reason_on
            .as_deref()
            .unwrap_or(&[ItemVerdict::Reject])
            .contains(&verdict)
    }
}

/// A checked payload's parts the rules read.
pub(crate) enum Payload {
    Confirmation(Confirmation),
    Checkbox(Checkbox),
    Questions(Questions),
    Items(Items),
}

fn parse<T: serde::de::DeserializeOwned>(
    kind: InteractionKind,
    payload: &Value,
) -> Result<T, DomainError> {
    T::deserialize(payload)
        .map_err(|e| DomainError::invalid("payload", format!("is not a {kind} payload: {e}")))
}

fn required(field: &str, value: &str, max: usize) -> Result<(), DomainError> {
    let n = value.trim().chars().count();
    if n == 0 || n > max {
        return Err(DomainError::invalid(
            field,
            format!("must be 1-{max} characters"),
        ));
    }
    Ok(())
}

fn count(field: &str, n: usize, max: usize) -> Result<(), DomainError> {
    if n == 0 || n > max {
        return Err(DomainError::invalid(
            field,
            format!("needs 1-{max} entries"),
        ));
    }
    Ok(())
}

/// Checks a new card's `payload` (as the card keeps it) as Paperclip's schema for `kind` does:
/// its size, then [`parts`].
pub(crate) fn check_payload(
    kind: InteractionKind,
    payload: &Value,
) -> Result<Payload, DomainError> {
    let bytes = serde_json::to_vec(payload)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(DomainError::too_large(
            "payload",
            MAX_PAYLOAD_BYTES as u64,
            "bytes",
        ));
    }
    parts(kind, payload)
}

/// The parts of `payload` the rules read, checked as Paperclip's schema for `kind` checks them
/// (other fields are kept as sent). A stored card's payload passed these when it was made.
pub(crate) fn parts(kind: InteractionKind, payload: &Value) -> Result<Payload, DomainError> {
    let common: Common = parse(kind, payload)?;
    if common.version != 1 {
        return Err(DomainError::invalid("payload.version", "must be 1"));
    }
    if let Some(t) = &common.target {
        if kind == InteractionKind::AskUserQuestions {
            return Err(DomainError::invalid(
                "payload.target",
                "ask_user_questions cards are not bound to a target",
            ));
        }
        match t.target_type.as_str() {
            "issue_document" => {
                if let Some(problem) = crate::document::key_problem(&t.key) {
                    return Err(DomainError::invalid("payload.target.key", problem));
                }
                if t.revision_id.as_deref().is_none_or(str::is_empty) {
                    return Err(DomainError::invalid(
                        "payload.target.revisionId",
                        "an issue_document target names the revision asked about",
                    ));
                }
            }
            "custom" => required("payload.target.key", &t.key, 120)?,
            other => {
                return Err(DomainError::invalid(
                    "payload.target.type",
                    format!("`{other}` is not a target type; use issue_document or custom"),
                ))
            }
        }
    }
    Ok(match kind {
        InteractionKind::RequestConfirmation => {
            let p: Confirmation = parse(kind, payload)?;
            required("payload.prompt", &p.prompt, 1000)?;
            if p.tool_action.is_some() || p.secret_proposal.is_some() {
                return Err(DomainError::invalid(
                    "payload",
                    "toolAction and secretProposal are server-owned metadata and cannot be supplied",
                ));
            }
            Payload::Confirmation(p)
        }
        InteractionKind::RequestCheckboxConfirmation => {
            let p: Checkbox = parse(kind, payload)?;
            required("payload.prompt", &p.prompt, 1000)?;
            count("payload.options", p.options.len(), MAX_CHECKBOX_OPTIONS)?;
            labels("payload.options", &p.options)?;
            unique(
                "payload.defaultSelectedOptionIds",
                p.default_selected_option_ids.iter().map(String::as_str),
            )?;
            let ids: BTreeSet<&str> = p.options.iter().map(|o| o.id.as_str()).collect();
            if let Some(bad) = p
                .default_selected_option_ids
                .iter()
                .find(|d| !ids.contains(d.as_str()))
            {
                return Err(DomainError::invalid(
                    "payload.defaultSelectedOptionIds",
                    format!("`{bad}` is not one of the options"),
                ));
            }
            let max = p.max_selected.unwrap_or(p.options.len());
            if p.min_selected > max || max > p.options.len() {
                return Err(DomainError::invalid(
                    "payload.maxSelected",
                    "needs minSelected <= maxSelected <= the number of options",
                ));
            }
            let defaults = p.default_selected_option_ids.len();
            if defaults < p.min_selected || defaults > max {
                return Err(DomainError::invalid(
                    "payload.defaultSelectedOptionIds",
                    "must hold between minSelected and maxSelected options",
                ));
            }
            Payload::Checkbox(p)
        }
        InteractionKind::AskUserQuestions => {
            let p: Questions = parse(kind, payload)?;
            count("payload.questions", p.questions.len(), MAX_QUESTIONS)?;
            unique(
                "payload.questions",
                p.questions.iter().map(|q| q.id.as_str()),
            )?;
            for q in &p.questions {
                required("payload.questions.id", &q.id, 160)?;
                required("payload.questions.prompt", &q.prompt, 4000)?;
                if q.selection_mode != "single" && q.selection_mode != "multi" {
                    return Err(DomainError::invalid(
                        "payload.questions.selectionMode",
                        "must be single or multi",
                    ));
                }
                count(
                    "payload.questions.options",
                    q.options.len(),
                    MAX_QUESTION_OPTIONS,
                )?;
                unique(
                    "payload.questions.options",
                    q.options.iter().map(|o| o.id.as_str()),
                )?;
                for o in &q.options {
                    required("payload.questions.options.id", &o.id, 160)?;
                    required("payload.questions.options.label", &o.label, 1000)?;
                }
                if q.options.iter().filter(|o| o.free_text).count() > 1 {
                    return Err(DomainError::invalid(
                        "payload.questions.options",
                        "a question may declare at most one free-text option",
                    ));
                }
            }
            Payload::Questions(p)
        }
        InteractionKind::RequestItemVerdicts => {
            let p: Items = parse(kind, payload)?;
            required("payload.prompt", &p.prompt, 1000)?;
            count("payload.items", p.items.len(), MAX_VERDICT_ITEMS)?;
            labels("payload.items", &p.items)?;
            let allowed = p.allowed();
            unique("payload.verdicts", allowed.iter().map(|v| v.as_str()))?;
            if !allowed.contains(&ItemVerdict::Approve) || !allowed.contains(&ItemVerdict::Reject) {
                return Err(DomainError::invalid(
                    "payload.verdicts",
                    "must include approve and reject; defer is optional",
                ));
            }
            if let Some(on) = &p.require_reason_on {
                unique("payload.requireReasonOn", on.iter().map(|v| v.as_str()))?;
                if on.iter().any(|v| !allowed.contains(v)) {
                    return Err(DomainError::invalid(
                        "payload.requireReasonOn",
                        "must name enabled verdicts",
                    ));
                }
            }
            Payload::Items(p)
        }
    })
}

fn labels(field: &str, entries: &[Labeled]) -> Result<(), DomainError> {
    unique(field, entries.iter().map(|o| o.id.as_str()))?;
    for e in entries {
        required(&format!("{field}.id"), &e.id, 120)?;
        required(&format!("{field}.label"), &e.label, 120)?;
    }
    Ok(())
}
