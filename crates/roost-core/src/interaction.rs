//! Issue-thread interactions (Paperclip's cards: `/api/issues/{id}/interactions`): a typed
//! question an agent leaves on its issue, answered by the board or another agent, which wakes
//! the assignee when answered. Memory keeps the pending ones, with their payloads, for the
//! rules (`rules/interaction.rs`); every interaction, answered or not, is a row of `state.db`,
//! so an issue's old cards cost no memory.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod payload;
mod wire;

pub use payload::Target;
pub(crate) use payload::*;
pub use wire::*;

use crate::command::Actor;
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
    /// Where a card is: `pending` until answered, withdrawn, set aside by the board
    /// (`cancelled`) or expired.
    InteractionStatus {
        Pending => "pending",
        Accepted => "accepted",
        Rejected => "rejected",
        Answered => "answered",
        Withdrawn => "withdrawn",
        Cancelled => "cancelled",
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
    /// Whom an answer wakes: nobody, the issue's assignee, or the assignee on an acceptance or
    /// an answer only.
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
    /// The kind's payload as sent, checked by `check_payload`, with
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
    /// The board sets a pending card aside unanswered (`cancelled`, outcome `skipped`).
    Skip {
        interaction_id: String,
        #[serde(default)]
        reason: Option<String>,
    },
    /// The board cancels an `ask_user_questions` card (`cancelled`, no answers).
    Cancel {
        interaction_id: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

impl InteractionOp {
    /// The card an answer, a withdrawal, a skip or a cancel is about; `None` for a create.
    pub fn interaction_id(&self) -> Option<&str> {
        match self {
            InteractionOp::Create { .. } => None,
            InteractionOp::Accept { interaction_id, .. }
            | InteractionOp::Reject { interaction_id, .. }
            | InteractionOp::Respond { interaction_id, .. }
            | InteractionOp::Verdicts { interaction_id, .. }
            | InteractionOp::Withdraw { interaction_id, .. }
            | InteractionOp::Skip { interaction_id, .. }
            | InteractionOp::Cancel { interaction_id, .. } => Some(interaction_id),
        }
    }

    /// The activity log's action.
    pub fn name(&self) -> &'static str {
        match self {
            InteractionOp::Create { .. } => "issue.thread_interaction_created",
            InteractionOp::Accept { .. } => "issue.thread_interaction_accepted",
            InteractionOp::Reject { .. } => "issue.thread_interaction_rejected",
            InteractionOp::Respond { .. } => "issue.thread_interaction_answered",
            InteractionOp::Verdicts { .. } => "issue.thread_interaction_verdicts_submitted",
            InteractionOp::Withdraw { .. } => "issue.thread_interaction_withdrawn",
            InteractionOp::Skip { .. } => "issue.thread_interaction_skipped",
            InteractionOp::Cancel { .. } => "issue.thread_interaction_cancelled",
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
                check_payload(i.kind, &i.kept_payload()).map(|_| ())
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
            InteractionOp::Reject { reason, .. }
            | InteractionOp::Withdraw { reason, .. }
            | InteractionOp::Skip { reason, .. }
            | InteractionOp::Cancel { reason, .. } => {
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

    /// The pending card this request makes on issue `issue_id` of `company_id`, asked by
    /// `actor` at `at`.
    pub fn card(
        &self,
        company_id: &str,
        issue_id: &str,
        actor: &Actor,
        at: Timestamp,
    ) -> Interaction {
        Interaction {
            id: self.id.clone(),
            company_id: company_id.to_string(),
            issue_id: issue_id.to_string(),
            kind: self.kind,
            status: InteractionStatus::Pending,
            continuation_policy: self
                .continuation_policy
                .unwrap_or_else(|| self.kind.default_continuation()),
            resolver_policy: self.resolver_policy.unwrap_or(ResolverPolicy::Anyone),
            resolver_policy_explicit: self.resolver_policy.is_some(),
            addressee_agent_id: self.addressee_agent_id.clone(),
            idempotency_key: trimmed(&self.idempotency_key),
            source_comment_id: self.source_comment_id.clone(),
            source_run_id: actor.run_id.clone(),
            title: trimmed(&self.title),
            summary: trimmed(&self.summary),
            payload: self.kept_payload(),
            result: None,
            created_by_agent_id: actor.agent_id().map(str::to_string),
            created_by_user_id: actor.user_id(),
            resolved_by_agent_id: None,
            resolved_by_user_id: None,
            resolved_by_run_id: None,
            created_at: at,
            updated_at: at,
            resolved_at: None,
        }
    }
}

/// `text` trimmed, `None` if nothing is left.
pub(crate) fn trimmed(text: &Option<String>) -> Option<String> {
    text.as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

impl Interaction {
    /// Whether `retry` (the card a create with this card's idempotency key would make) asks
    /// what this card asks, of the same creator: Paperclip's `isEquivalentCreateRequest`.
    pub fn same_request(&self, retry: &Interaction) -> bool {
        self.kind == retry.kind
            && self.payload == retry.payload
            && self.continuation_policy == retry.continuation_policy
            && self.resolver_policy == retry.resolver_policy
            && self.addressee_agent_id == retry.addressee_agent_id
            && self.title == retry.title
            && self.summary == retry.summary
            && self.source_comment_id == retry.source_comment_id
            && self.created_by_agent_id == retry.created_by_agent_id
            && self.created_by_user_id == retry.created_by_user_id
    }

    /// The result of a card leaving `pending` unanswered (`outcome`, with `extra`'s fields),
    /// keeping what it recorded so far as Paperclip's results do: an item-verdict card's
    /// verdicts, a question card's (empty) answers.
    pub(crate) fn unanswered_result(&self, outcome: &str, extra: Value) -> Value {
        let mut result = serde_json::Map::new();
        result.insert("version".into(), Value::from(1));
        result.insert("outcome".into(), Value::from(outcome));
        if let Value::Object(extra) = extra {
            result.extend(extra);
        }
        match self.kind {
            InteractionKind::RequestItemVerdicts => {
                let items = self
                    .result
                    .as_ref()
                    .and_then(|r| r.get("items"))
                    .cloned()
                    .unwrap_or_else(|| Value::Array(Vec::new()));
                result.insert("complete".into(), Value::Bool(false));
                result.insert("items".into(), items);
            }
            InteractionKind::AskUserQuestions => {
                result.insert("answers".into(), Value::Array(Vec::new()));
            }
            _ => {}
        }
        Value::Object(result)
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
