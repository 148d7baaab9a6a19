//! Issue-thread interactions (Paperclip's cards: `/api/issues/{id}/interactions`): a typed
//! question an agent leaves on its issue, answered by the board or another agent, which wakes
//! the assignee when answered. Memory keeps the pending ones, with their payloads, for the
//! rules (`rules/interaction.rs`); every interaction, answered or not, is a row of `state.db`,
//! so an issue's old cards cost no memory.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entity::string_enum;
use crate::error::DomainError;
use crate::time::Timestamp;

/// A payload's JSON at most: Roost's own bound (Paperclip's schemas allow a little more for
/// the largest forms), so that pending cards stay small in every node's memory.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Pending interactions on one issue at most: Roost's own bound.
pub const MAX_PENDING_PER_ISSUE: usize = 20;
/// Paperclip's bounds.
pub const MAX_TITLE_CHARS: usize = 240;
pub const MAX_SUMMARY_CHARS: usize = 1000;
pub const MAX_REASON_CHARS: usize = 4000;
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
pub const MAX_CHECKBOX_OPTIONS: usize = 200;
pub const MAX_QUESTIONS: usize = 64;
pub const MAX_QUESTION_OPTIONS: usize = 129;
pub const MAX_VERDICT_ITEMS: usize = 200;
pub const MAX_ANSWERS: usize = 20;
pub const MAX_SUMMARY_MARKDOWN_BYTES: usize = 20_000;

string_enum!(
    /// What a card asks. Paperclip's `suggest_tasks` (tasks that become sub-issues when
    /// accepted) is not served yet: agents create the issues themselves.
    InteractionKind {
        RequestConfirmation => "request_confirmation",
        RequestCheckboxConfirmation => "request_checkbox_confirmation",
        AskUserQuestions => "ask_user_questions",
        RequestItemVerdicts => "request_item_verdicts",
    }
);

string_enum!(
    /// Where a card is: `pending` until answered, withdrawn or expired.
    InteractionStatus {
        Pending => "pending",
        Accepted => "accepted",
        Rejected => "rejected",
        Answered => "answered",
        Withdrawn => "withdrawn",
        Expired => "expired",
    }
);

string_enum!(
    /// Who may answer: anyone of the company (the default), anyone but its creator, or a
    /// person only. Paperclip's older names are read as the new ones.
    ResolverPolicy {
        Anyone => "anyone" | "board_or_agents",
        NotCreator => "not_creator",
        HumanOnly => "human_only" | "board_only",
    }
);

string_enum!(
    /// Whom an answer wakes: nobody, the issue's assignee, or the assignee on an acceptance only.
    ContinuationPolicy {
        None => "none",
        WakeAssignee => "wake_assignee",
        WakeAssigneeOnAccept => "wake_assignee_on_accept",
    }
);

impl InteractionKind {
    /// Paperclip's defaults: a yes/no question wakes nobody unless asked to.
    pub fn default_continuation(self) -> ContinuationPolicy {
        match self {
            InteractionKind::RequestConfirmation => ContinuationPolicy::None,
            _ => ContinuationPolicy::WakeAssignee,
        }
    }
}

/// One card, as memory (while pending) and `state.db`'s `issue_interactions` hold it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interaction {
    pub id: String,
    pub company_id: String,
    pub issue_id: String,
    pub kind: InteractionKind,
    pub status: InteractionStatus,
    pub continuation_policy: ContinuationPolicy,
    pub resolver_policy: ResolverPolicy,
    /// Whether the creator named the resolver policy (Paperclip's `explicit`) or took the
    /// default (`inherited`).
    pub resolver_policy_explicit: bool,
    pub addressee_agent_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub source_comment_id: Option<String>,
    pub source_run_id: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
    /// The kind's payload as sent, checked by [`check_payload`], with
    /// `supersedeOnUserComment` filled in.
    pub payload: Value,
    /// The answer, or why there is none (`outcome`): set when it leaves `pending`, and by
    /// item verdicts as they arrive.
    pub result: Option<Value>,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub resolved_by_agent_id: Option<String>,
    pub resolved_by_user_id: Option<String>,
    pub resolved_by_run_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub resolved_at: Option<Timestamp>,
}

/// A new card, as the proposing node made it (its id) from the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewInteraction {
    pub id: String,
    pub kind: InteractionKind,
    pub payload: Value,
    #[serde(default)]
    pub continuation_policy: Option<ContinuationPolicy>,
    #[serde(default)]
    pub resolver_policy: Option<ResolverPolicy>,
    #[serde(default)]
    pub addressee_agent_id: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub source_comment_id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
}

/// One answer to an `ask_user_questions` card (Paperclip's `askUserQuestionsAnswerSchema`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionAnswer {
    pub question_id: String,
    #[serde(default)]
    pub option_ids: Vec<String>,
    #[serde(default)]
    pub other_text: Option<String>,
}

string_enum!(ItemVerdict { Approve => "approve", Reject => "reject", Defer => "defer" });

/// A verdict on one item of a `request_item_verdicts` card.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemVerdictInput {
    pub id: String,
    pub verdict: ItemVerdict,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a command does to an issue's cards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum InteractionOp {
    Create {
        interaction: NewInteraction,
    },
    /// Accepts a confirmation; a checkbox confirmation with the options chosen (its
    /// `defaultSelectedOptionIds` when none are sent).
    Accept {
        interaction_id: String,
        #[serde(default)]
        selected_option_ids: Option<Vec<String>>,
    },
    Reject {
        interaction_id: String,
        #[serde(default)]
        reason: Option<String>,
    },
    /// Answers an `ask_user_questions` card.
    Respond {
        interaction_id: String,
        answers: Vec<QuestionAnswer>,
        #[serde(default)]
        summary_markdown: Option<String>,
    },
    /// Verdicts on some items of a `request_item_verdicts` card: it is answered once every
    /// item has one.
    Verdicts {
        interaction_id: String,
        verdicts: Vec<ItemVerdictInput>,
    },
    /// Its creator, the issue's assignee or an administrator takes a pending card back.
    Withdraw {
        interaction_id: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

impl InteractionOp {
    /// The activity log's action.
    pub fn name(&self) -> &'static str {
        match self {
            InteractionOp::Create { .. } => "issue.thread_interaction_created",
            InteractionOp::Accept { .. } => "issue.thread_interaction_accepted",
            InteractionOp::Reject { .. } => "issue.thread_interaction_rejected",
            InteractionOp::Respond { .. } => "issue.thread_interaction_answered",
            InteractionOp::Verdicts { .. } => "issue.thread_interaction_verdicts_submitted",
            InteractionOp::Withdraw { .. } => "issue.thread_interaction_withdrawn",
        }
    }

    /// Bounds checked before a command is proposed (`limits.rs`) and again in apply.
    pub fn check(&self) -> Result<(), DomainError> {
        match self {
            InteractionOp::Create { interaction: i } => {
                opt_chars("title", i.title.as_deref(), MAX_TITLE_CHARS)?;
                opt_chars("summary", i.summary.as_deref(), MAX_SUMMARY_CHARS)?;
                opt_chars(
                    "idempotencyKey",
                    i.idempotency_key.as_deref(),
                    MAX_IDEMPOTENCY_KEY_CHARS,
                )?;
                check_payload(i.kind, &i.payload).map(|_| ())
            }
            InteractionOp::Accept {
                selected_option_ids,
                ..
            } => {
                if let Some(ids) = selected_option_ids {
                    unique("selectedOptionIds", ids.iter().map(String::as_str))?;
                    if ids.len() > MAX_CHECKBOX_OPTIONS {
                        return Err(DomainError::too_large(
                            "selectedOptionIds",
                            MAX_CHECKBOX_OPTIONS as u64,
                            "ids",
                        ));
                    }
                }
                Ok(())
            }
            InteractionOp::Reject { reason, .. } | InteractionOp::Withdraw { reason, .. } => {
                opt_chars("reason", reason.as_deref(), MAX_REASON_CHARS)
            }
            InteractionOp::Respond {
                answers,
                summary_markdown,
                ..
            } => {
                if answers.len() > MAX_ANSWERS {
                    return Err(DomainError::too_large(
                        "answers",
                        MAX_ANSWERS as u64,
                        "answers",
                    ));
                }
                unique("answers", answers.iter().map(|a| a.question_id.as_str()))?;
                for a in answers {
                    if a.option_ids.len() > MAX_QUESTION_OPTIONS {
                        return Err(DomainError::too_large(
                            "answers.optionIds",
                            MAX_QUESTION_OPTIONS as u64,
                            "ids",
                        ));
                    }
                    opt_chars("answers.otherText", a.other_text.as_deref(), 100_000)?;
                }
                if summary_markdown
                    .as_ref()
                    .is_some_and(|s| s.len() > MAX_SUMMARY_MARKDOWN_BYTES)
                {
                    return Err(DomainError::too_large(
                        "summaryMarkdown",
                        MAX_SUMMARY_MARKDOWN_BYTES as u64,
                        "bytes",
                    ));
                }
                Ok(())
            }
            InteractionOp::Verdicts { verdicts, .. } => {
                if verdicts.is_empty() || verdicts.len() > MAX_VERDICT_ITEMS {
                    return Err(DomainError::invalid(
                        "verdicts",
                        format!("send 1-{MAX_VERDICT_ITEMS} verdicts"),
                    ));
                }
                unique("verdicts", verdicts.iter().map(|v| v.id.as_str()))?;
                for v in verdicts {
                    opt_chars("verdicts.reason", v.reason.as_deref(), MAX_REASON_CHARS)?;
                }
                Ok(())
            }
        }
    }
}

fn opt_chars(field: &str, value: Option<&str>, max: usize) -> Result<(), DomainError> {
    if value.is_some_and(|v| v.trim().chars().count() > max) {
        return Err(DomainError::too_large(field, max as u64, "characters"));
    }
    Ok(())
}

fn unique<'a>(field: &str, ids: impl Iterator<Item = &'a str>) -> Result<(), DomainError> {
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

/// Checks `payload` as Paperclip's schema for `kind` does (the parts Roost reads, and their
/// bounds; other fields are kept as sent), and returns those parts.
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

impl NewInteraction {
    /// The payload as a card keeps it: `supersedeOnUserComment` filled in with Paperclip's
    /// default.
    pub fn kept_payload(&self) -> Value {
        let mut payload = self.payload.clone();
        if let Some(obj) = payload.as_object_mut() {
            obj.entry("supersedeOnUserComment")
                .or_insert(Value::Bool(true));
        }
        payload
    }
}

impl Interaction {
    /// Whether `new`, sent with this card's idempotency key, asks what this card asks (a
    /// retry), rather than something else under a reused key.
    pub fn asks_as(&self, new: &NewInteraction) -> bool {
        self.kind == new.kind && self.payload == new.kept_payload()
    }

    /// The target a card is bound to, if any.
    pub fn target(&self) -> Option<Target> {
        Target::deserialize(self.payload.get("target")?).ok()
    }

    /// Whether a person's comment on the issue expires it (Paperclip's default for every kind
    /// Roost serves).
    pub fn supersede_on_user_comment(&self) -> bool {
        self.payload
            .get("supersedeOnUserComment")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }
}

/// What apply writes for cards: every change of one is its whole row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// Changes live only between apply and the SQLite write (as `Change` does): boxing the row
// would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum InteractionChange {
    Interaction(Interaction),
    /// A pending card removed with its issue (its id). The rows of an issue's answered cards
    /// go with the issue's own row (`Change::IssueDeleted`).
    Deleted(String),
}

/// The pending cards, by id, and by issue.
#[derive(Clone, Debug, Default)]
pub struct InteractionState {
    pub pending: BTreeMap<String, Interaction>,
    by_issue: BTreeMap<String, BTreeSet<String>>,
}

impl InteractionState {
    /// Memory keeps a card while it is pending.
    pub(crate) fn put(&mut self, change: InteractionChange) {
        let id = match &change {
            InteractionChange::Interaction(i) => i.id.clone(),
            InteractionChange::Deleted(id) => id.clone(),
        };
        if let Some(old) = self.pending.remove(&id) {
            crate::set_index::unlink(&mut self.by_issue, &old.issue_id, &id);
        }
        if let InteractionChange::Interaction(i) = change {
            if i.status == InteractionStatus::Pending {
                crate::set_index::link(&mut self.by_issue, &i.issue_id, &i.id);
                self.pending.insert(i.id.clone(), i);
            }
        }
    }

    /// An issue's pending cards in id order.
    pub fn pending_of_issue<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = &'a Interaction> {
        self.by_issue
            .get(issue_id)
            .into_iter()
            .flatten()
            .filter_map(|id| self.pending.get(id))
    }
}

/// A card as Paperclip's routes answer it: the row, with the resolver policy under each of
/// Paperclip's names (Roost has no company cap or governed action that narrows one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InteractionView {
    #[serde(flatten)]
    pub interaction: Interaction,
    pub requested_resolver_policy: ResolverPolicy,
    pub effective_resolver_policy: ResolverPolicy,
    /// `explicit` when its creator named the policy, else `inherited`.
    pub resolver_policy_provenance: String,
    /// Always `requested`.
    pub effective_resolver_policy_source: String,
    /// Always null: Roost addresses cards to agents only.
    pub addressee_user_id: Option<String>,
}

impl Interaction {
    pub fn view(self) -> InteractionView {
        let policy = self.resolver_policy;
        let provenance = if self.resolver_policy_explicit {
            "explicit"
        } else {
            "inherited"
        };
        InteractionView {
            interaction: self,
            requested_resolver_policy: policy,
            effective_resolver_policy: policy,
            resolver_policy_provenance: provenance.into(),
            effective_resolver_policy_source: "requested".into(),
            addressee_user_id: None,
        }
    }
}

/// A create's request body, Paperclip's `createIssueThreadInteractionSchema` (REST's and the
/// client's). `kind` is text so that a kind Roost does not serve gets a sentence saying so.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionCreateBody {
    pub kind: String,
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_comment_id: Option<String>,
    /// A run's own id is taken from the request; the board may name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_policy: Option<ContinuationPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver_policy: Option<ResolverPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressee_agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressee_user_id: Option<String>,
}

impl InteractionCreateBody {
    /// The card to propose, under the id `id`.
    pub fn into_new(self, id: String) -> Result<NewInteraction, DomainError> {
        let kind = match self.kind.as_str() {
            "suggest_tasks" | "connection_intent" => {
                return Err(DomainError::invariant(
                    "interaction",
                    format!(
                        "Roost does not serve {} cards yet: create the issues yourself \
                         (POST /api/companies/{{companyId}}/issues with parentId), or ask with \
                         request_checkbox_confirmation",
                        self.kind
                    ),
                ))
            }
            other => other
                .parse::<InteractionKind>()
                .map_err(|e| DomainError::invalid("kind", e))?,
        };
        if self.addressee_user_id.is_some() {
            return Err(DomainError::invalid(
                "addresseeUserId",
                "Roost addresses cards to agents only (addresseeAgentId); the board sees every card",
            ));
        }
        Ok(NewInteraction {
            id,
            kind,
            payload: self.payload,
            continuation_policy: self.continuation_policy,
            resolver_policy: self.resolver_policy,
            addressee_agent_id: self.addressee_agent_id,
            idempotency_key: self.idempotency_key,
            source_comment_id: self.source_comment_id,
            title: self.title,
            summary: self.summary,
        })
    }
}

/// An accept's body (Paperclip's `acceptIssueThreadInteractionSchema`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionAcceptBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_option_ids: Option<Vec<String>>,
    /// For `suggest_tasks`, which Roost does not serve; accepted and unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_client_keys: Option<Vec<String>>,
    /// For tool actions, which Roost does not have; accepted and unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remember_action: Option<bool>,
}

/// A reject's or a withdraw's body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionReasonBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A respond's body (`ask_user_questions`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionRespondBody {
    pub answers: Vec<QuestionAnswer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_markdown: Option<String>,
}

/// A verdicts body (`request_item_verdicts`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionVerdictsBody {
    pub verdicts: Vec<ItemVerdictInput>,
}
