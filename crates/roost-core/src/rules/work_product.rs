//! Issue work products (types in `work_product.rs`), with Paperclip's rules:
//!
//! - Whoever may change the issue may record, change and remove its work products (an agent
//!   not while another live run holds the issue).
//! - One primary work product per issue and type: making one primary clears the others.
//! - An artifact of provider `paperclip` is backed by an attachment of the same issue; its
//!   metadata is rewritten from that attachment (its paths, type, size and name), so a client
//!   cannot point it elsewhere. A run recording one for a file it uploaded updates the work
//!   product its upload made (`rules/attachment.rs`) instead of adding a second.
//! - `createdByRunId` is the agent's own run; the board may name a run of the company.

use serde_json::{json, Value};

use super::issue::{require_not_held_by_other, visible_issue};
use super::{require_id, Ctx};
use crate::attachment::{content_path, IssueAttachment};
use crate::command::Outcome;
use crate::entity::{Issue, Run};
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};
use crate::work_product::*;

pub(crate) fn create(
    ctx: &Ctx<'_>,
    issue_id: &str,
    id: &str,
    fields: &WorkProductFields,
) -> Result<Decision, DomainError> {
    require_id("workProductId", id)?;
    let issue = visible_issue(ctx, issue_id)?;
    ctx.fence()?;
    require_not_held_by_other(ctx, &issue)?;
    if ctx.state.work_products.products.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "work product".into(),
            id: id.into(),
        });
    }
    let mut fields = with_defaults(fields);
    fields.created_by_run_id = Some(created_by_run(ctx, &issue.company_id, &fields)?);
    let kind = fields.kind.clone().unwrap_or_default();
    let provider = fields.provider.clone().unwrap_or_default();
    if kind == ARTIFACT && provider == PAPERCLIP {
        fields.metadata = Some(Some(canonical_metadata(
            ctx,
            &issue,
            fields.metadata.as_ref(),
        )?));
    }
    // The same run's artifact for the same file: the one its upload recorded.
    let attachment = fields.metadata.clone().flatten().and_then(|m| {
        m.get("attachmentId")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let run = fields.created_by_run_id.clone().flatten();
    let earlier = ctx
        .state
        .work_products
        .of_issue(&issue.id)
        .into_iter()
        .find(|w| {
            kind == ARTIFACT
                && provider == PAPERCLIP
                && w.is_paperclip_artifact()
                && run.is_some()
                && w.created_by_run_id == run
                && attachment.is_some()
                && w.external_id == attachment
        })
        .cloned();
    let product = match earlier {
        Some(mut earlier) => {
            apply(&mut earlier, &fields);
            earlier.updated_at = ctx.now();
            earlier
        }
        None => {
            DomainError::room_on_issue(
                "work_products_per_issue",
                "work products",
                (
                    ctx.state.work_products.of_issue(&issue.id).len(),
                    MAX_WORK_PRODUCTS_PER_ISSUE,
                ),
                &issue.identifier,
                "update or delete one",
            )?;
            let mut product = blank(ctx, &issue, id, kind, provider);
            apply(&mut product, &fields);
            product
        }
    };
    let details = json!({
        "workProductId": product.id,
        "type": product.kind,
        "provider": product.provider,
    });
    Ok(decide(
        ctx,
        product,
        fields.is_primary == Some(true),
        details,
    ))
}

pub(crate) fn update(
    ctx: &Ctx<'_>,
    id: &str,
    fields: &WorkProductFields,
) -> Result<Decision, DomainError> {
    let existing = existing(ctx, id)?;
    let issue = visible_issue(ctx, &existing.issue_id)?;
    ctx.fence()?;
    require_not_held_by_other(ctx, &issue)?;
    let mut fields = fields.clone();
    if fields.created_by_run_id.is_some() {
        fields.created_by_run_id = Some(created_by_run(ctx, &existing.company_id, &fields)?);
    }
    let kind = fields.kind.as_deref().unwrap_or(&existing.kind);
    let provider = fields.provider.as_deref().unwrap_or(&existing.provider);
    if kind == ARTIFACT && provider == PAPERCLIP {
        if let Some(metadata) = &fields.metadata {
            fields.metadata = Some(Some(canonical_metadata(ctx, &issue, Some(metadata))?));
        } else if !existing.is_paperclip_artifact() {
            return Err(DomainError::invariant(
                "invalid_attachment_artifact_metadata",
                "Attachment-backed artifact metadata is required: send metadata.attachmentId, \
                 an attachment of this issue",
            ));
        }
    }
    let mut product = existing.clone();
    apply(&mut product, &fields);
    product.updated_at = ctx.now();
    let mut changed: Vec<&str> = changed_keys(&fields);
    changed.sort_unstable();
    let details = json!({ "workProductId": product.id, "changedKeys": changed });
    Ok(decide(
        ctx,
        product,
        fields.is_primary == Some(true),
        details,
    ))
}

pub(crate) fn delete(ctx: &Ctx<'_>, id: &str) -> Result<Decision, DomainError> {
    let existing = existing(ctx, id)?;
    let issue = visible_issue(ctx, &existing.issue_id)?;
    ctx.fence()?;
    require_not_held_by_other(ctx, &issue)?;
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(existing.company_id.clone()),
            entity_type: "issue",
            entity_id: existing.issue_id.clone(),
            details: json!({ "workProductId": existing.id, "type": existing.kind }),
        },
        changes: vec![Change::WorkProduct(WorkProductChange::Removed(
            existing.id.clone(),
        ))],
        outcome: Outcome::WorkProduct(existing.clone()),
    })
}

/// The artifact work product an agent run's upload records (`rules/attachment.rs`); none when
/// the issue already has as many work products as it may.
pub(crate) fn for_upload(
    ctx: &Ctx<'_>,
    issue: &Issue,
    attachment: &IssueAttachment,
    run: &Run,
    id: &str,
) -> Result<Option<WorkProduct>, DomainError> {
    if ctx.state.work_products.of_issue(&issue.id).len() >= MAX_WORK_PRODUCTS_PER_ISSUE {
        return Ok(None);
    }
    require_id("workProductId", id)?;
    if ctx.state.work_products.products.contains_key(id) {
        return Err(DomainError::AlreadyExists {
            entity: "work product".into(),
            id: id.into(),
        });
    }
    let mut product = blank(ctx, issue, id, ARTIFACT.into(), PAPERCLIP.into());
    product.external_id = Some(attachment.id.clone());
    product.title = attachment
        .original_filename
        .clone()
        .unwrap_or_else(|| "Attachment".into());
    product.metadata = Some(metadata_of(attachment));
    product.created_by_run_id = Some(run.id.clone());
    // As Paperclip records an upload's artifact: no project.
    product.project_id = None;
    Ok(Some(product))
}

fn existing<'a>(ctx: &Ctx<'a>, id: &str) -> Result<&'a WorkProduct, DomainError> {
    let existing = ctx
        .state
        .work_products
        .products
        .get(id)
        .ok_or_else(|| DomainError::not_found("work product", id))?;
    ctx.require_company(&existing.company_id, "work product", id)?;
    Ok(existing)
}

/// A new work product before its fields are applied.
fn blank(ctx: &Ctx<'_>, issue: &Issue, id: &str, kind: String, provider: String) -> WorkProduct {
    WorkProduct {
        id: id.to_string(),
        company_id: issue.company_id.clone(),
        project_id: issue.project_id.clone(),
        issue_id: issue.id.clone(),
        execution_workspace_id: None,
        runtime_service_id: None,
        kind,
        provider,
        external_id: None,
        title: String::new(),
        url: None,
        status: "active".into(),
        review_state: "none".into(),
        is_primary: false,
        health_status: "unknown".into(),
        summary: None,
        metadata: None,
        created_by_run_id: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    }
}

/// A create's fields with Paperclip's schema defaults filled in (they count as sent: a create
/// that updates the run's earlier artifact sets them, as Paperclip's does).
fn with_defaults(fields: &WorkProductFields) -> WorkProductFields {
    let mut f = fields.clone();
    f.status.get_or_insert_with(|| "active".into());
    f.review_state.get_or_insert_with(|| "none".into());
    f.is_primary.get_or_insert(false);
    f.health_status.get_or_insert_with(|| "unknown".into());
    f
}

fn apply(w: &mut WorkProduct, f: &WorkProductFields) {
    fn set<T: Clone>(slot: &mut T, value: &Option<T>) {
        if let Some(v) = value {
            *slot = v.clone();
        }
    }
    set(&mut w.project_id, &f.project_id);
    set(&mut w.execution_workspace_id, &f.execution_workspace_id);
    set(&mut w.runtime_service_id, &f.runtime_service_id);
    set(&mut w.kind, &f.kind);
    set(&mut w.provider, &f.provider);
    set(&mut w.external_id, &f.external_id);
    set(
        &mut w.title,
        &f.title.as_ref().map(|t| t.trim().to_string()),
    );
    set(&mut w.url, &f.url);
    set(&mut w.status, &f.status);
    set(&mut w.review_state, &f.review_state);
    set(&mut w.is_primary, &f.is_primary);
    set(&mut w.health_status, &f.health_status);
    set(&mut w.summary, &f.summary);
    set(&mut w.metadata, &f.metadata);
    set(&mut w.created_by_run_id, &f.created_by_run_id);
}

fn changed_keys(f: &WorkProductFields) -> Vec<&'static str> {
    [
        ("projectId", f.project_id.is_some()),
        ("executionWorkspaceId", f.execution_workspace_id.is_some()),
        ("runtimeServiceId", f.runtime_service_id.is_some()),
        ("type", f.kind.is_some()),
        ("provider", f.provider.is_some()),
        ("externalId", f.external_id.is_some()),
        ("title", f.title.is_some()),
        ("url", f.url.is_some()),
        ("status", f.status.is_some()),
        ("reviewState", f.review_state.is_some()),
        ("isPrimary", f.is_primary.is_some()),
        ("healthStatus", f.health_status.is_some()),
        ("summary", f.summary.is_some()),
        ("metadata", f.metadata.is_some()),
        ("createdByRunId", f.created_by_run_id.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, sent)| sent.then_some(key))
    .collect()
}

/// The run a write records as its work product's maker (Paperclip's
/// `resolveWorkProductCreatedByRunId`): an agent's own run (naming another is refused); for
/// the board, the run it names, which must be of the company.
fn created_by_run(
    ctx: &Ctx<'_>,
    company_id: &str,
    fields: &WorkProductFields,
) -> Result<Option<String>, DomainError> {
    let requested = fields.created_by_run_id.clone().flatten();
    if ctx.actor.agent_id().is_some() {
        let own = ctx.actor.run_id.clone();
        if requested.is_some() && requested != own {
            return Err(DomainError::forbidden(
                "createdByRunId must match the authenticated agent run",
            ));
        }
        return Ok(own);
    }
    match requested {
        Some(run_id) => match ctx.state.runs.get(&run_id) {
            Some(run) if run.company_id == company_id => Ok(Some(run_id)),
            _ => Err(DomainError::forbidden(
                "createdByRunId is not valid for this company",
            )),
        },
        None => Ok(None),
    }
}

/// An attachment-backed artifact's metadata, from the attachment it names (Paperclip's
/// `canonicalizePaperclipArtifactMetadata`).
fn canonical_metadata(
    ctx: &Ctx<'_>,
    issue: &Issue,
    sent: Option<&Option<Value>>,
) -> Result<Value, DomainError> {
    let attachment_id = sent
        .and_then(Option::as_ref)
        .and_then(|m| m.get("attachmentId"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            DomainError::invariant(
                "invalid_attachment_artifact_metadata",
                "Invalid attachment artifact metadata: metadata.attachmentId must name an \
                 attachment of this issue",
            )
        })?;
    let attachment = ctx
        .state
        .attachments
        .attachments
        .get(attachment_id)
        .filter(|a| a.issue_id == issue.id && a.company_id == issue.company_id)
        .ok_or_else(|| {
            DomainError::invariant(
                "invalid_attachment_artifact_metadata",
                format!(
                    "Attachment artifact must reference an attachment on the same issue: \
                     {attachment_id} is not an attachment of issue {}",
                    issue.identifier
                ),
            )
        })?;
    Ok(metadata_of(attachment))
}

fn metadata_of(a: &IssueAttachment) -> Value {
    let path = content_path(&a.id);
    json!({
        "attachmentId": a.id,
        "contentType": a.content_type,
        "byteSize": a.byte_size,
        "contentPath": path,
        "openPath": path,
        "downloadPath": format!("{path}?download=1"),
        "originalFilename": a.original_filename,
    })
}

/// The product's row, and the other primary work products of its issue and type made
/// not primary when this one became primary.
fn decide(ctx: &Ctx<'_>, product: WorkProduct, made_primary: bool, details: Value) -> Decision {
    let mut changes = Vec::new();
    if made_primary && product.is_primary {
        for other in ctx.state.work_products.of_issue(&product.issue_id) {
            if other.id != product.id && other.kind == product.kind && other.is_primary {
                let mut other = other.clone();
                other.is_primary = false;
                other.updated_at = ctx.now();
                changes.push(Change::WorkProduct(WorkProductChange::Put(other)));
            }
        }
    }
    changes.push(Change::WorkProduct(WorkProductChange::Put(product.clone())));
    Decision {
        note: ActivityNote {
            company_id: Some(product.company_id.clone()),
            entity_type: "issue",
            entity_id: product.issue_id.clone(),
            details,
        },
        outcome: Outcome::WorkProduct(product),
        changes,
    }
}
