//! Companies: the tenant root.

use serde_json::json;

use super::{require_id, require_text, Ctx};
use crate::command::{CompanyPatch, Outcome};
use crate::entity::Company;
use crate::error::DomainError;
use crate::limits::MAX_DESCRIPTION_CHARS;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    name: &str,
    prefix: &str,
) -> Result<Decision, DomainError> {
    ctx.require_admin("create a company")?;
    if ctx.actor.company_id.is_some() {
        return Err(DomainError::forbidden(
            "a company-scoped token cannot create companies",
        ));
    }
    require_id("id", id)?;
    let name = require_text("name", name, 200)?;
    let prefix = prefix.trim().to_ascii_uppercase();
    if prefix.is_empty() || prefix.len() > 10 || !prefix.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(DomainError::invalid(
            "issuePrefix",
            "must be 1-10 letters or digits",
        ));
    }
    if !prefix.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(DomainError::invalid(
            "issuePrefix",
            "must start with a letter",
        ));
    }
    if ctx.state.companies.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "company".into(),
            id: id.into(),
        });
    }
    if ctx.state.company_by_prefix(&prefix).is_some() {
        return Err(DomainError::AlreadyExists {
            entity: "issuePrefix".into(),
            id: prefix,
        });
    }
    let company = Company {
        id: id.into(),
        name: name.clone(),
        description: None,
        status: Default::default(),
        require_board_approval_for_new_agents: false,
        loop_breaker: Default::default(),
        escalate_blocked_after_secs: super::org::default_escalate_secs(),
        recover_stranded_after_secs: super::recovery::DEFAULT_RECOVER_SECS,
        issue_prefix: prefix.clone(),
        issue_counter: 0,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    Ok(Decision {
        outcome: Outcome::Company(company.clone()),
        changes: vec![Change::Company(company)],
        note: ActivityNote {
            company_id: Some(id.into()),
            entity_type: "company",
            entity_id: id.into(),
            details: json!({ "name": name, "issuePrefix": prefix }),
        },
    })
}

/// An administrator renames, describes, pauses, archives or reactivates a company.
pub(crate) fn update(
    ctx: &Ctx<'_>,
    company_id: &str,
    patch: &CompanyPatch,
) -> Result<Decision, DomainError> {
    ctx.require_admin("change a company")?;
    ctx.require_company(company_id, "company", company_id)?;
    let current = ctx
        .state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    let mut company = current.clone();
    if let Some(name) = &patch.name {
        company.name = require_text("name", name, 200)?;
    }
    if let Some(description) = &patch.description {
        company.description = match description {
            Some(d) => Some(require_text("description", d, MAX_DESCRIPTION_CHARS)?),
            None => None,
        };
    }
    if let Some(status) = patch.status {
        company.status = status;
    }
    if let Some(required) = patch.require_board_approval_for_new_agents {
        company.require_board_approval_for_new_agents = required;
    }
    if let Some(lb) = patch.loop_breaker {
        company.loop_breaker = lb;
    }
    if let Some(secs) = patch.escalate_blocked_after_secs {
        company.escalate_blocked_after_secs = timer_secs(
            "escalateBlockedAfterSecs",
            secs,
            super::org::MAX_ESCALATE_SECS,
            "escalation",
        )?;
    }
    if let Some(secs) = patch.recover_stranded_after_secs {
        company.recover_stranded_after_secs = timer_secs(
            "recoverStrandedAfterSecs",
            secs,
            super::recovery::MAX_RECOVER_SECS,
            "recovery",
        )?;
    }
    company.updated_at = ctx.now();
    let mut details = serde_json::to_value(patch).unwrap_or(serde_json::Value::Null);
    if current.status != company.status {
        if let Some(obj) = details.as_object_mut() {
            obj.insert("previousStatus".into(), json!(current.status));
        }
    }
    Ok(Decision {
        outcome: Outcome::Company(company.clone()),
        changes: vec![Change::Company(company)],
        note: ActivityNote {
            company_id: Some(company_id.into()),
            entity_type: "company",
            entity_id: company_id.into(),
            details,
        },
    })
}

/// A company's timer setting in seconds (escalation, recovery): at most `max`; 0 turns `what`
/// off.
fn timer_secs(field: &str, secs: u32, max: u32, what: &str) -> Result<u32, DomainError> {
    if secs > max {
        let days = f64::from(max) / 86_400.0;
        return Err(DomainError::invalid(
            field,
            format!("must be at most {max} ({days} days); 0 turns {what} off"),
        ));
    }
    Ok(secs)
}
