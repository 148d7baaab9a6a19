//! Issue-thread interactions (types in `interaction.rs`), with Paperclip's rules:
//!
//! - Whoever may see the issue may leave a card on it or answer one: agents of its company
//!   from a live run of their own, and administrators (the board). A closed issue takes none.
//! - Who answers is the card's to say: anyone (the default), anyone but its creator, a person
//!   only, or one named agent (and the board). Its creator, the issue's assignee or the board
//!   may withdraw it; only the board skips it or cancels a question card.
//! - An answer (or another's withdrawal) wakes the issue's assignee when the card asks for
//!   that (`continuationPolicy`), with the card named in the wake's payload; a card addressed
//!   to an agent wakes that agent.
//! - A card leaves `pending` for good: answered, withdrawn, skipped or cancelled, or expired
//!   when its issue closes
//!   (`issue_closed`), when a person comments (`superseded_by_comment`), or when the document
//!   revision it asks about is replaced (`stale_target`).
//! - A retry with the card's `idempotencyKey` answers the card made first.

use serde_json::{json, Value};

use super::issue::visible_issue;
use super::{require_id, wake, Ctx};
use crate::command::Outcome;
use crate::entity::{AgentStatus, Issue, WakeReason};
use crate::error::DomainError;
use crate::interaction::*;
use crate::state::{ActivityNote, Change, Decision};

pub(crate) fn decide(
    ctx: &Ctx<'_>,
    issue_id: &str,
    op: &InteractionOp,
) -> Result<Decision, DomainError> {
    let issue = visible_issue(ctx, issue_id)?;
    let issue: &Issue = &issue;
    if ctx.actor.agent_id().is_some() && ctx.actor.run_id.is_none() {
        return Err(DomainError::forbidden(
            "an agent works with interactions from one of its runs: send the run's id \
             (X-Paperclip-Run-Id)",
        ));
    }
    ctx.fence()?;
    match op {
        InteractionOp::Create { interaction } => create(ctx, issue, interaction),
        InteractionOp::Withdraw {
            interaction_id,
            reason,
        } => {
            let current = pending(ctx, issue, interaction_id)?;
            let own = ctx.actor.agent_id().is_some_and(|a| {
                current.created_by_agent_id.as_deref() == Some(a)
                    || issue.assignee_agent_id.as_deref() == Some(a)
            });
            if !own && !ctx.is_admin() {
                return Err(DomainError::forbidden(format!(
                    "only the card's creator, the issue's assignee or an administrator may \
                     withdraw interaction {interaction_id}"
                )));
            }
            let mut card = current.clone();
            finish(ctx, &mut card, InteractionStatus::Withdrawn);
            card.result =
                Some(card.unanswered_result("withdrawn", json!({ "reason": trimmed(reason) })));
            // The assignee waiting on it learns it is gone (its own withdrawal wakes nobody).
            let wakes = continuation(ctx, issue, &card)?;
            Ok(decision(card, true, wakes, false))
        }
        // The board's ways to set a card aside; neither wakes anyone (Paperclip's `skip` and
        // `cancel`).
        InteractionOp::Skip {
            interaction_id,
            reason,
        } => {
            ctx.require_admin("skip an interaction")?;
            let mut card = pending(ctx, issue, interaction_id)?.clone();
            finish(ctx, &mut card, InteractionStatus::Cancelled);
            card.result =
                Some(card.unanswered_result("skipped", json!({ "reason": trimmed(reason) })));
            Ok(decision(card, true, Vec::new(), false))
        }
        InteractionOp::Cancel {
            interaction_id,
            reason,
        } => {
            ctx.require_admin("cancel an interaction")?;
            let mut card = pending(ctx, issue, interaction_id)?.clone();
            if card.kind != InteractionKind::AskUserQuestions {
                return Err(DomainError::invalid(
                    "action",
                    format!(
                        "only ask_user_questions cards are cancelled; a {} card is skipped \
                         (POST .../interactions/{interaction_id}/skip)",
                        card.kind
                    ),
                ));
            }
            finish(ctx, &mut card, InteractionStatus::Cancelled);
            card.result = Some(json!({
                "version": 1,
                "answers": [],
                "cancelled": true,
                "cancellationReason": trimmed(reason),
                "summaryMarkdown": null,
            }));
            Ok(decision(card, true, Vec::new(), false))
        }
        _ => answer(ctx, issue, op),
    }
}

fn pending<'a>(ctx: &Ctx<'a>, issue: &Issue, id: &str) -> Result<&'a Interaction, DomainError> {
    ctx.state
        .interactions
        .pending
        .get(id)
        .filter(|i| i.issue_id == issue.id)
        .ok_or_else(|| {
            DomainError::conflict(format!(
                "interaction {id} is not pending on issue {}: it was answered, withdrawn, \
                 cancelled or expired (GET /api/issues/{}/interactions shows it)",
                issue.identifier, issue.id
            ))
        })
}

fn create(ctx: &Ctx<'_>, issue: &Issue, new: &NewInteraction) -> Result<Decision, DomainError> {
    require_id("id", &new.id)?;
    if issue.status.is_terminal() {
        return Err(DomainError::conflict(format!(
            "issue {} is {}: a closed issue takes no interaction; reopen it first",
            issue.identifier, issue.status
        )));
    }
    // The payload was checked as kept by `limits::check` (`decide` runs it first).
    let card = new.card(&issue.company_id, &issue.id, ctx.actor, ctx.now());
    if let Some(key) = &card.idempotency_key {
        let same_key = ctx
            .state
            .interactions
            .pending_of_issue(&issue.id)
            .find(|i| i.idempotency_key.as_ref() == Some(key));
        if let Some(first) = same_key {
            if !first.same_request(&card) {
                return Err(DomainError::conflict(format!(
                    "idempotencyKey {key} already names interaction {} on this issue, with \
                     another request; send a new key for a new card",
                    first.id
                )));
            }
            return Ok(decision(first.clone(), false, Vec::new(), false));
        }
    }
    if ctx.state.interactions.pending.contains_key(&card.id) {
        return Err(DomainError::AlreadyExists {
            entity: "interaction".into(),
            id: card.id.clone(),
        });
    }
    DomainError::room_on_issue(
        "pending_interactions_per_issue",
        "pending interactions",
        (
            ctx.state.interactions.pending_of_issue(&issue.id).count(),
            MAX_PENDING_PER_ISSUE,
        ),
        &issue.identifier,
        "withdraw one or wait for answers",
    )?;
    check_target(ctx, issue, &card)?;
    let mut changes = Vec::new();
    if let Some(agent_id) = &card.addressee_agent_id {
        let addressee = ctx
            .state
            .agents
            .get(agent_id)
            .filter(|a| a.company_id == issue.company_id && a.status != AgentStatus::Terminated)
            .ok_or_else(|| {
                DomainError::invariant(
                    "addresseeAgentId",
                    format!(
                        "addresseeAgentId {agent_id} is not an active agent of this issue's \
                         company; address the card to one of its agents, or to nobody"
                    ),
                )
            })?;
        wake::wake_for_interaction(
            ctx,
            &mut changes,
            &addressee.id,
            issue,
            WakeReason::InteractionPending,
            wake_payload(&card),
        )?;
    }
    Ok(decision(card, true, changes, true))
}

/// A card about an issue document's revision must ask about its latest one (Paperclip's
/// `assertRequestConfirmationTargetIsCurrent`).
fn check_target(ctx: &Ctx<'_>, issue: &Issue, card: &Interaction) -> Result<(), DomainError> {
    let Some(target) = card.target().filter(|t| t.target_type == "issue_document") else {
        return Ok(());
    };
    let doc = ctx
        .state
        .documents
        .get(&issue.id, &target.key)
        .ok_or_else(|| {
            DomainError::invalid(
                "payload.target.key",
                format!(
                    "issue {} has no document {}; save it first (PUT /api/issues/{}/documents/{})",
                    issue.identifier, target.key, issue.id, target.key
                ),
            )
        })?;
    if target.revision_id.as_deref() != Some(doc.latest_revision_id.as_str()) {
        return Err(DomainError::conflict(format!(
            "the card asks about revision {} of document {}, whose latest revision is {} \
             (number {}): ask about the latest",
            target.revision_id.as_deref().unwrap_or("(none)"),
            doc.key,
            doc.latest_revision_id,
            doc.latest_revision_number
        )));
    }
    Ok(())
}

/// Whether the caller may answer `card`.
fn may_answer(ctx: &Ctx<'_>, card: &Interaction) -> Result<(), DomainError> {
    let agent = ctx.actor.agent_id();
    let refuse = |why: String| Err(DomainError::forbidden(why));
    if card.resolver_policy == ResolverPolicy::HumanOnly && agent.is_some() {
        return refuse(format!(
            "interaction {} is for a person to answer (resolverPolicy human_only)",
            card.id
        ));
    }
    if let (Some(addressee), Some(agent)) = (&card.addressee_agent_id, agent) {
        if addressee != agent {
            return refuse(format!(
                "interaction {} is addressed to agent {addressee}",
                card.id
            ));
        }
    }
    let is_creator = match agent {
        Some(a) => card.created_by_agent_id.as_deref() == Some(a),
        None => ctx.actor.user_id().is_some() && card.created_by_user_id == ctx.actor.user_id(),
    };
    if card.resolver_policy == ResolverPolicy::NotCreator && is_creator {
        return refuse(format!(
            "interaction {} must be answered by someone other than its creator \
             (resolverPolicy not_creator)",
            card.id
        ));
    }
    Ok(())
}

fn answer(ctx: &Ctx<'_>, issue: &Issue, op: &InteractionOp) -> Result<Decision, DomainError> {
    let Some(id) = op.interaction_id() else {
        return Err(DomainError::invariant("interaction", "not an answer"));
    };
    let current = pending(ctx, issue, id)?;
    may_answer(ctx, current)?;
    let asked = parts(current.kind, &current.payload)?;
    let mut card = current.clone();
    let kind = card.kind;
    let wrong = || {
        let how = match kind {
            InteractionKind::RequestConfirmation | InteractionKind::RequestCheckboxConfirmation => {
                "accept or reject"
            }
            InteractionKind::AskUserQuestions => "respond",
            InteractionKind::RequestItemVerdicts => "verdicts",
        };
        Err(DomainError::invalid(
            "action",
            format!("a {kind} card is answered with {how}"),
        ))
    };
    match (op, &asked) {
        (InteractionOp::Accept { .. }, Payload::Confirmation(_)) => {
            finish(ctx, &mut card, InteractionStatus::Accepted);
            card.result = Some(json!({ "version": 1, "outcome": "accepted" }));
        }
        (
            InteractionOp::Accept {
                selected_option_ids,
                ..
            },
            Payload::Checkbox(p),
        ) => {
            let chosen = selected_option_ids
                .clone()
                .unwrap_or_else(|| p.default_selected_option_ids.clone());
            if let Some(bad) = chosen
                .iter()
                .find(|c| !p.options.iter().any(|o| &o.id == *c))
            {
                return Err(DomainError::invalid(
                    "selectedOptionIds",
                    format!("`{bad}` is not one of the card's options"),
                ));
            }
            let max = p.max_selected.unwrap_or(p.options.len());
            if chosen.len() < p.min_selected || chosen.len() > max {
                return Err(DomainError::invalid(
                    "selectedOptionIds",
                    format!("choose between {} and {max} options", p.min_selected),
                ));
            }
            finish(ctx, &mut card, InteractionStatus::Accepted);
            card.result =
                Some(json!({ "version": 1, "outcome": "accepted", "selectedOptionIds": chosen }));
        }
        (InteractionOp::Reject { reason, .. }, Payload::Confirmation(_) | Payload::Checkbox(_)) => {
            let needs_reason = match &asked {
                Payload::Confirmation(p) => p.reject_requires_reason,
                Payload::Checkbox(p) => p.reject_requires_reason,
                _ => false,
            };
            let reason = trimmed(reason);
            if needs_reason && reason.is_none() {
                return Err(DomainError::invalid(
                    "reason",
                    "this card asks for a reason with a rejection",
                ));
            }
            finish(ctx, &mut card, InteractionStatus::Rejected);
            card.result = Some(json!({ "version": 1, "outcome": "rejected", "reason": reason }));
        }
        (
            InteractionOp::Respond {
                answers,
                summary_markdown,
                ..
            },
            Payload::Questions(p),
        ) => {
            check_answers(p, answers)?;
            finish(ctx, &mut card, InteractionStatus::Answered);
            card.result = Some(json!({
                "version": 1,
                "answers": answers,
                "summaryMarkdown": summary_markdown,
            }));
        }
        (InteractionOp::Verdicts { verdicts, .. }, Payload::Items(p)) => {
            let complete = merge_verdicts(ctx, &mut card, p, verdicts)?;
            if complete {
                finish(ctx, &mut card, InteractionStatus::Answered);
            } else {
                card.updated_at = ctx.now();
            }
        }
        _ => return wrong(),
    }
    let changes = continuation(ctx, issue, &card)?;
    Ok(decision(card, true, changes, false))
}

/// The wake of the issue's assignee a card's continuation policy asks for, now that `card`
/// changed: `wake_assignee` on any change, `wake_assignee_on_accept` when accepted or answered
/// (as Paperclip's continuation does); never on a closed issue.
fn continuation(
    ctx: &Ctx<'_>,
    issue: &Issue,
    card: &Interaction,
) -> Result<Vec<Change>, DomainError> {
    let wakes = match card.continuation_policy {
        ContinuationPolicy::None => false,
        ContinuationPolicy::WakeAssignee => true,
        ContinuationPolicy::WakeAssigneeOnAccept => matches!(
            card.status,
            InteractionStatus::Accepted | InteractionStatus::Answered
        ),
    };
    let mut changes = Vec::new();
    if let (true, Some(assignee), false) =
        (wakes, &issue.assignee_agent_id, issue.status.is_terminal())
    {
        wake::wake_for_interaction(
            ctx,
            &mut changes,
            assignee,
            issue,
            WakeReason::IssueCommented,
            wake_payload(card),
        )?;
    }
    Ok(changes)
}

/// Answers must name the card's questions and options, and answer every required question.
fn check_answers(p: &Questions, answers: &[QuestionAnswer]) -> Result<(), DomainError> {
    for a in answers {
        let Some(q) = p.questions.iter().find(|q| q.id == a.question_id) else {
            return Err(DomainError::invalid(
                "answers",
                format!("`{}` is not one of the card's questions", a.question_id),
            ));
        };
        if let Some(bad) = a
            .option_ids
            .iter()
            .find(|o| !q.options.iter().any(|x| &x.id == *o))
        {
            return Err(DomainError::invalid(
                "answers",
                format!("`{bad}` is not an option of question `{}`", q.id),
            ));
        }
        if q.selection_mode == "single" && a.option_ids.len() > 1 {
            return Err(DomainError::invalid(
                "answers",
                format!("question `{}` takes one option", q.id),
            ));
        }
        let free_text = q.allow_other || q.options.iter().any(|o| o.free_text);
        if a.other_text
            .as_deref()
            .is_some_and(|t| !t.trim().is_empty())
            && !free_text
        {
            return Err(DomainError::invalid(
                "answers",
                format!("question `{}` takes no text of its own (otherText)", q.id),
            ));
        }
    }
    let answered = |q: &Question| {
        answers.iter().any(|a| {
            a.question_id == q.id
                && (!a.option_ids.is_empty()
                    || a.other_text
                        .as_deref()
                        .is_some_and(|t| !t.trim().is_empty()))
        })
    };
    if let Some(q) = p.questions.iter().find(|q| q.required && !answered(q)) {
        return Err(DomainError::invalid(
            "answers",
            format!("question `{}` is required", q.id),
        ));
    }
    Ok(())
}

/// Adds `verdicts` to the card's result; true once every item has one.
fn merge_verdicts(
    ctx: &Ctx<'_>,
    card: &mut Interaction,
    p: &Items,
    verdicts: &[ItemVerdictInput],
) -> Result<bool, DomainError> {
    let mut items: Vec<Value> = card
        .result
        .as_ref()
        .and_then(|r| r.get("items"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let decided = |items: &[Value], id: &str| {
        items
            .iter()
            .any(|i| i.get("id").and_then(Value::as_str) == Some(id))
    };
    let allowed = p.allowed();
    for v in verdicts {
        if !p.items.iter().any(|i| i.id == v.id) {
            return Err(DomainError::invalid(
                "verdicts",
                format!("`{}` is not one of the card's items", v.id),
            ));
        }
        if !allowed.contains(&v.verdict) {
            return Err(DomainError::invalid(
                "verdicts",
                format!("this card does not take the verdict {}", v.verdict),
            ));
        }
        let reason = trimmed(&v.reason);
        if p.reason_required(v.verdict) && reason.is_none() {
            return Err(DomainError::invalid(
                "verdicts",
                format!("a {} verdict on `{}` needs a reason", v.verdict, v.id),
            ));
        }
        if decided(&items, &v.id) {
            return Err(DomainError::conflict(format!(
                "item `{}` of interaction {} already has a verdict",
                v.id, card.id
            )));
        }
        items.push(json!({
            "id": v.id,
            "verdict": v.verdict,
            "reason": reason,
            "resolvedByAgentId": ctx.actor.agent_id(),
            "resolvedByUserId": ctx.actor.user_id(),
            "resolvedByRunId": ctx.actor.run_id,
            "resolvedAt": ctx.now(),
        }));
    }
    let complete = p.items.iter().all(|i| decided(&items, &i.id));
    let result = json!({
        "version": 1,
        "outcome": "resolved",
        "complete": complete,
        "items": items,
    });
    // A pending card's verdicts stay in every node's memory: bounded as its payload is.
    if serde_json::to_vec(&result).map_or(usize::MAX, |b| b.len()) > MAX_PAYLOAD_BYTES {
        return Err(DomainError::too_large(
            "verdicts",
            MAX_PAYLOAD_BYTES as u64,
            "bytes of verdicts and reasons on one card; give shorter reasons",
        ));
    }
    card.result = Some(result);
    Ok(complete)
}

/// Marks `card` as having left `pending` now, by the caller.
fn finish(ctx: &Ctx<'_>, card: &mut Interaction, status: InteractionStatus) {
    card.status = status;
    card.resolved_by_agent_id = ctx.actor.agent_id().map(str::to_string);
    card.resolved_by_user_id = ctx.actor.user_id();
    card.resolved_by_run_id = ctx.actor.run_id.clone();
    card.resolved_at = Some(ctx.now());
    card.updated_at = ctx.now();
}

/// What a wake about a card carries, as Paperclip's does.
fn wake_payload(card: &Interaction) -> Value {
    json!({
        "issueId": card.issue_id,
        "interactionId": card.id,
        "interactionKind": card.kind,
        "interactionStatus": card.status,
        "mutation": "interaction",
    })
}

fn decision(card: Interaction, write: bool, mut wakes: Vec<Change>, created: bool) -> Decision {
    let note = ActivityNote {
        company_id: Some(card.company_id.clone()),
        entity_type: "issue",
        entity_id: card.issue_id.clone(),
        details: json!({
            "interactionId": card.id,
            "interactionKind": card.kind,
            "interactionStatus": card.status,
            "continuationPolicy": card.continuation_policy,
            "addresseeAgentId": card.addressee_agent_id,
        }),
    };
    let mut changes = Vec::new();
    if write {
        changes.push(Change::Interaction(InteractionChange::Interaction(
            card.clone(),
        )));
    }
    changes.append(&mut wakes);
    Decision {
        outcome: Outcome::Interaction {
            interaction: card,
            created,
        },
        changes,
        note,
    }
}

/// Expires an issue's pending cards where something else happened to it: the issue closed
/// (every card), a person commented (`comment_id`: the cards that ask for that), or a document
/// got a new revision (`document`: the cards about an older revision of it). Wakes nobody:
/// the comment or the close does what it does.
pub(crate) fn expire_on(
    ctx: &Ctx<'_>,
    changes: &mut Vec<Change>,
    issue_id: &str,
    event: Expiry<'_>,
) {
    for card in ctx.state.interactions.pending_of_issue(issue_id) {
        let result = match event {
            Expiry::IssueClosed => card.unanswered_result("issue_closed", json!({})),
            Expiry::PersonCommented { comment_id } if card.supersede_on_user_comment() => {
                card.unanswered_result("superseded_by_comment", json!({ "commentId": comment_id }))
            }
            Expiry::NewRevision { key, revision_id } => match card.target() {
                Some(t)
                    if t.target_type == "issue_document"
                        && t.key == key
                        && t.revision_id.as_deref() != Some(revision_id) =>
                {
                    let target = card.payload.get("target").cloned();
                    card.unanswered_result("stale_target", json!({ "staleTarget": target }))
                }
                _ => continue,
            },
            Expiry::PersonCommented { .. } => continue,
        };
        let mut card = card.clone();
        card.status = InteractionStatus::Expired;
        card.result = Some(result);
        card.resolved_at = Some(ctx.now());
        card.updated_at = ctx.now();
        changes.push(Change::Interaction(InteractionChange::Interaction(card)));
    }
}

/// Why [`expire_on`] looks at an issue's cards.
#[derive(Clone, Copy)]
pub(crate) enum Expiry<'a> {
    IssueClosed,
    PersonCommented { comment_id: &'a str },
    NewRevision { key: &'a str, revision_id: &'a str },
}

/// An issue's deleted pending cards (their rows go with the issue's).
pub(crate) fn delete_with_issue(ctx: &Ctx<'_>, changes: &mut Vec<Change>, issue_id: &str) {
    changes.extend(
        ctx.state
            .interactions
            .pending_of_issue(issue_id)
            .map(|c| Change::Interaction(InteractionChange::Deleted(c.id.clone()))),
    );
}
