//! Issue documents (types in `document.rs`), with Paperclip's rules:
//!
//! - Whoever may change the issue may write its documents: an agent not while another live
//!   run holds the issue, and only from a live run of its own (fenced like every write).
//! - An update names the revision it was made from (`baseRevisionId`): a write over a revision
//!   the writer never saw is refused, so concurrent edits are never lost.
//! - A locked document is left as it is: an agent's write goes to a new document beside it
//!   (`plan` → `plan-2`), anyone else's is refused. Only an administrator locks, unlocks or
//!   deletes.
//! - A restore saves a copy of an earlier revision as the newest: history only grows. The
//!   proposing node reads the earlier revision (`DocumentOp::Restore`).

use serde_json::json;

use super::interaction::{self, Expiry};
use super::issue::{require_not_held_by_other, visible_issue};
use super::{require_id, Ctx};
use crate::command::Outcome;
use crate::document::*;
use crate::entity::Issue;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn decide(
    ctx: &Ctx<'_>,
    issue_id: &str,
    key: &str,
    op: &DocumentOp,
) -> Result<Decision, DomainError> {
    if let Some(problem) = key_problem(key) {
        return Err(DomainError::invalid("key", problem));
    }
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    let existing = ctx.state.documents.get(&issue.id, key);
    match op {
        DocumentOp::Put {
            document_id,
            revision_id,
            text,
            change_summary,
            base_revision_id,
        } => {
            ctx.fence()?;
            require_not_held_by_other(ctx, issue)?;
            let write = Write {
                revision_id,
                text,
                change_summary: change_summary.clone(),
            };
            match existing {
                Some(doc) if doc.locked_at.is_some() && ctx.actor.agent_id().is_some() => {
                    let key = free_key(ctx, &issue.id, key)?;
                    let mut decision = create(ctx, issue, &key, document_id, write)?;
                    if let Outcome::IssueDocument {
                        redirected_from, ..
                    } = &mut decision.outcome
                    {
                        *redirected_from = Some(doc.key.clone());
                    }
                    Ok(decision)
                }
                Some(doc) => {
                    require_unlocked(doc)?;
                    let Some(base) = base_revision_id else {
                        return Err(DomainError::conflict(format!(
                            "document {} already exists, so an update needs baseRevisionId: GET it, \
                             read its body and latestRevisionId ({}), and send that as baseRevisionId",
                            doc.key, doc.latest_revision_id
                        )));
                    };
                    if *base != doc.latest_revision_id {
                        return Err(DomainError::conflict(format!(
                            "document {} was updated by someone else: its latest revision is {} \
                             (number {}); GET it, merge your change and send that as baseRevisionId",
                            doc.key, doc.latest_revision_id, doc.latest_revision_number
                        )));
                    }
                    revise(ctx, doc, write)
                }
                None => {
                    if base_revision_id.is_some() {
                        return Err(DomainError::conflict(format!(
                            "document {key} does not exist yet; send no baseRevisionId to create it"
                        )));
                    }
                    create(ctx, issue, key, document_id, write)
                }
            }
        }
        DocumentOp::Restore {
            document_id,
            from_revision_id,
            from_revision_number,
            revision_id,
            text,
        } => {
            ctx.fence()?;
            require_not_held_by_other(ctx, issue)?;
            let doc = existing.ok_or_else(|| DomainError::not_found("document", key))?;
            if doc.id != *document_id {
                return Err(DomainError::not_found(
                    "document revision",
                    from_revision_id,
                ));
            }
            require_unlocked(doc)?;
            if *from_revision_id == doc.latest_revision_id
                || *from_revision_number >= doc.latest_revision_number
            {
                return Err(DomainError::conflict(format!(
                    "revision {from_revision_id} is not older than the latest revision ({}) of \
                     document {}: only an earlier revision can be restored",
                    doc.latest_revision_number, doc.key
                )));
            }
            if *from_revision_number == 0 {
                return Err(DomainError::not_found(
                    "document revision",
                    from_revision_id,
                ));
            }
            let write = Write {
                revision_id,
                text,
                change_summary: Some(format!("Restored from revision {from_revision_number}")),
            };
            revise(ctx, doc, write)
        }
        DocumentOp::Lock | DocumentOp::Unlock | DocumentOp::Delete => {
            ctx.require_admin("lock, unlock or delete an issue document")?;
            let doc = existing.ok_or_else(|| DomainError::not_found("document", key))?;
            let mut doc = doc.clone();
            let change = match op {
                DocumentOp::Delete => {
                    require_unlocked(&doc)?;
                    let mut changes =
                        vec![Change::Document(DocumentChange::Deleted(doc.id.clone()))];
                    // No revision is the latest now: every card about one expires.
                    let gone = IssueDocument {
                        latest_revision_id: String::new(),
                        ..doc.clone()
                    };
                    expire_cards(ctx, &gone, &mut changes);
                    return Ok(decision(doc, None, changes, false));
                }
                DocumentOp::Lock if doc.locked_at.is_none() => {
                    doc.locked_at = Some(ctx.now());
                    doc.locked_by_user_id = Some(ctx.actor.id.clone());
                    doc.updated_at = ctx.now();
                    DocumentChange::Document(doc.clone())
                }
                DocumentOp::Unlock if doc.locked_at.is_some() => {
                    doc.locked_at = None;
                    doc.locked_by_agent_id = None;
                    doc.locked_by_user_id = None;
                    doc.updated_at = ctx.now();
                    DocumentChange::Document(doc.clone())
                }
                // Already as asked: nothing to write (Paperclip answers the document).
                _ => return Ok(decision(doc, None, Vec::new(), false)),
            };
            Ok(decision(doc, None, vec![Change::Document(change)], false))
        }
    }
}

/// A put's or a restore's new revision.
struct Write<'a> {
    revision_id: &'a str,
    text: &'a DocumentText,
    change_summary: Option<String>,
}

fn require_unlocked(doc: &IssueDocument) -> Result<(), DomainError> {
    if doc.locked_at.is_some() {
        return Err(DomainError::conflict(format!(
            "document {} is locked; an administrator must unlock it \
             (POST /api/issues/{}/documents/{}/unlock) before it changes",
            doc.key, doc.issue_id, doc.key
        )));
    }
    Ok(())
}

/// `key` with the first free `-N` suffix (Paperclip's `nextAvailableDocumentKey`).
fn free_key(ctx: &Ctx<'_>, issue_id: &str, key: &str) -> Result<String, DomainError> {
    (2..1000)
        .map(|n| {
            let suffix = format!("-{n}");
            let base: String = key.chars().take(MAX_DOCUMENT_KEY_CHARS - suffix.len()).collect();
            let base = base.trim_end_matches(['-', '_']);
            let base = if base.is_empty() { "document" } else { base };
            format!("{base}{suffix}")
        })
        .find(|k| key_problem(k).is_none() && ctx.state.documents.get(issue_id, k).is_none())
        .ok_or_else(|| {
            DomainError::conflict(format!(
                "document {key} is locked and no free key is left beside it; ask an administrator to unlock it"
            ))
        })
}

fn revision(ctx: &Ctx<'_>, doc: &IssueDocument, number: u64, write: Write<'_>) -> DocumentRevision {
    DocumentRevision {
        id: write.revision_id.to_string(),
        company_id: doc.company_id.clone(),
        document_id: doc.id.clone(),
        issue_id: doc.issue_id.clone(),
        key: doc.key.clone(),
        revision_number: number,
        title: doc.title.clone(),
        format: doc.format.clone(),
        body: write.text.body.clone(),
        change_summary: write.change_summary.filter(|s| !s.trim().is_empty()),
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        created_by_run_id: ctx.actor.run_id.clone(),
        created_at: ctx.now(),
    }
}

fn title(text: &DocumentText) -> Option<String> {
    text.title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn create(
    ctx: &Ctx<'_>,
    issue: &Issue,
    key: &str,
    document_id: &str,
    write: Write<'_>,
) -> Result<Decision, DomainError> {
    require_id("documentId", document_id)?;
    require_id("revisionId", write.revision_id)?;
    if ctx.state.documents.documents.contains_key(document_id) {
        return Err(DomainError::AlreadyExists {
            entity: "document".into(),
            id: document_id.into(),
        });
    }
    DomainError::room_on_issue(
        "documents_per_issue",
        "documents",
        (
            ctx.state.documents.of_issue(&issue.id).count(),
            MAX_DOCUMENTS_PER_ISSUE,
        ),
        &issue.identifier,
        "update one of them or ask an administrator to delete one",
    )?;
    let doc = IssueDocument {
        id: document_id.to_string(),
        company_id: issue.company_id.clone(),
        issue_id: issue.id.clone(),
        key: key.to_string(),
        title: title(write.text),
        format: write.text.format.clone(),
        latest_revision_id: write.revision_id.to_string(),
        latest_revision_number: 1,
        created_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        created_by_user_id: ctx.actor.user_id(),
        updated_by_agent_id: ctx.actor.agent_id().map(str::to_string),
        updated_by_user_id: ctx.actor.user_id(),
        locked_at: None,
        locked_by_agent_id: None,
        locked_by_user_id: None,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    let body = write.text.body.clone();
    let rev = revision(ctx, &doc, 1, write);
    let mut changes = vec![
        Change::Document(DocumentChange::Document(doc.clone())),
        Change::Document(DocumentChange::Revision(rev)),
    ];
    expire_cards(ctx, &doc, &mut changes);
    Ok(decision(doc, Some(body), changes, true))
}

fn revise(ctx: &Ctx<'_>, doc: &IssueDocument, write: Write<'_>) -> Result<Decision, DomainError> {
    require_id("revisionId", write.revision_id)?;
    if write.revision_id == doc.latest_revision_id {
        return Err(DomainError::AlreadyExists {
            entity: "document revision".into(),
            id: write.revision_id.into(),
        });
    }
    let mut doc = doc.clone();
    let number = doc.latest_revision_number.saturating_add(1);
    doc.title = title(write.text);
    doc.format = write.text.format.clone();
    doc.latest_revision_id = write.revision_id.to_string();
    doc.latest_revision_number = number;
    doc.updated_by_agent_id = ctx.actor.agent_id().map(str::to_string);
    doc.updated_by_user_id = ctx.actor.user_id();
    doc.updated_at = ctx.now();
    let body = write.text.body.clone();
    let rev = revision(ctx, &doc, number, write);
    let mut changes = vec![
        Change::Document(DocumentChange::Document(doc.clone())),
        Change::Document(DocumentChange::Revision(rev)),
    ];
    expire_cards(ctx, &doc, &mut changes);
    Ok(decision(doc, Some(body), changes, false))
}

/// Cards about an earlier revision of `doc` than its latest expire (`rules/interaction.rs`).
fn expire_cards(ctx: &Ctx<'_>, doc: &IssueDocument, changes: &mut Vec<Change>) {
    let event = Expiry::NewRevision {
        key: &doc.key,
        revision_id: &doc.latest_revision_id,
    };
    interaction::expire_on(ctx, changes, &doc.issue_id, event);
}

fn decision(
    doc: IssueDocument,
    body: Option<String>,
    changes: Vec<Change>,
    created: bool,
) -> Decision {
    let note = ActivityNote {
        company_id: Some(doc.company_id.clone()),
        entity_type: "issue",
        entity_id: doc.issue_id.clone(),
        details: json!({
            "key": doc.key,
            "documentId": doc.id,
            "title": doc.title,
            "revisionNumber": doc.latest_revision_number,
            "created": created,
            "lockedAt": doc.locked_at,
        }),
    };
    Decision {
        outcome: Outcome::IssueDocument {
            document: doc,
            body,
            created,
            redirected_from: None,
        },
        changes,
        note,
    }
}
