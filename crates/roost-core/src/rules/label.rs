//! Issue labels (types in `label.rs`).
//!
//! - Administrators and the company's agents create and delete labels, as Paperclip lets any
//!   caller with access to the company.
//! - A label's name is trimmed, 1-48 characters, and unique in its company; its colour is
//!   `#RRGGBB`.
//! - An issue's `labelIds` name labels of its own company only (422 otherwise, Paperclip's
//!   sentence), kept once each in the order sent.
//! - Deleting a label takes it off every issue that carries it, in the same command (through
//!   the label index: most of those issues may live in `state.db` only).

use serde_json::json;

use super::project::require_member;
use super::{require_id, require_text, Ctx};
use crate::command::Outcome;
use crate::error::DomainError;
use crate::label::*;
use crate::state::{ActivityNote, Change, Decision};

fn note(label: &Label) -> ActivityNote {
    ActivityNote {
        company_id: Some(label.company_id.clone()),
        entity_type: "label",
        entity_id: label.id.clone(),
        details: json!({ "name": label.name, "color": label.color }),
    }
}

pub(crate) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    name: &str,
    color: &str,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    require_member(ctx, company_id, "label", id)?;
    if ctx.state.labels.contains_key(id) {
        return Err(DomainError::conflict(format!("label {id} already exists")));
    }
    let name = require_text("name", name, MAX_LABEL_NAME_CHARS)?;
    if !is_color(color) {
        return Err(DomainError::invalid(
            "color",
            "Color must be a 6-digit hex value",
        ));
    }
    let mut count = 0usize;
    for l in ctx.state.labels.values() {
        if l.company_id != company_id {
            continue;
        }
        if l.name == name {
            return Err(DomainError::conflict(format!(
                "this company already has a label named {name}"
            )));
        }
        count += 1;
    }
    if count >= MAX_LABELS_PER_COMPANY {
        return Err(DomainError::quota(
            "labels",
            MAX_LABELS_PER_COMPANY as u64,
            format!(
                "this company has {MAX_LABELS_PER_COMPANY} labels, the most it may keep; delete one first"
            ),
        ));
    }
    let label = Label {
        id: id.into(),
        company_id: company_id.into(),
        name,
        color: color.into(),
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    Ok(Decision {
        note: note(&label),
        outcome: Outcome::Label(label.clone()),
        changes: vec![Change::Label(label)],
    })
}

pub(crate) fn delete(ctx: &Ctx<'_>, id: &str) -> Result<Decision, DomainError> {
    let label = ctx
        .state
        .labels
        .get(id)
        .ok_or_else(|| DomainError::not_found("label", id))?;
    require_member(ctx, &label.company_id, "label", id)?;
    // Not `updated_at`: as in Paperclip, whose issues lose the label by a cascade, no issue
    // moves (a stranded issue's recovery counts from it). The cost follows the writes that
    // put the label on those issues, each paid before.
    let mut changes = Vec::new();
    for issue in ctx.state.issues_with_label(id) {
        // Only an issue row from before labels were checked can name another company's
        // label; it keeps the id, which names nothing from now on (label ids are never reused).
        if issue.company_id != label.company_id {
            continue;
        }
        let mut i = issue.into_owned();
        let kept: Vec<serde_json::Value> = label_ids(&i.paperclip)
            .filter(|l| *l != id)
            .map(|l| json!(l))
            .collect();
        i.paperclip.insert(LABEL_IDS.into(), json!(kept));
        changes.push(Change::Issue(i.into()));
    }
    changes.push(Change::LabelDeleted(id.into()));
    Ok(Decision {
        note: note(label),
        outcome: Outcome::Label(label.clone()),
        changes,
    })
}

/// `labelIds` as an issue of `company_id` keeps it: an array of its company's label ids, each
/// once, in the order sent.
pub(crate) fn checked_label_ids(
    ctx: &Ctx<'_>,
    company_id: &str,
    value: &serde_json::Value,
) -> Result<serde_json::Value, DomainError> {
    let Some(sent) = value.as_array() else {
        return Err(DomainError::invalid(
            LABEL_IDS,
            "must be an array of label ids",
        ));
    };
    let mut ids: Vec<&str> = Vec::with_capacity(sent.len());
    for v in sent {
        let Some(id) = v.as_str() else {
            return Err(DomainError::invalid(
                LABEL_IDS,
                "must be an array of label ids",
            ));
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
        if ids.len() > MAX_LABELS_PER_ISSUE {
            return Err(DomainError::too_large(
                LABEL_IDS,
                MAX_LABELS_PER_ISSUE as u64,
                "labels",
            ));
        }
    }
    let all_of_company = ids.iter().all(|id| {
        ctx.state
            .labels
            .get(*id)
            .is_some_and(|l| l.company_id == company_id)
    });
    if !all_of_company {
        return Err(DomainError::invariant(
            "label_of_company",
            "One or more labels are invalid for this company",
        ));
    }
    Ok(json!(ids))
}
