//! The REST bodies and answers of interactions, shared by the server and the client.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ContinuationPolicy, Interaction, InteractionKind, ItemVerdictInput, NewInteraction,
    QuestionAnswer, ResolverPolicy,
};
use crate::error::DomainError;

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
    /// Accepted and not used: a card's run is the run of the request that made it.
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
