//! Resolving an interaction step (`Op::IssueInteraction`) into a command against the world's
//! state: creates of every kind (well-formed, bound to the issue's plan, or malformed, some
//! addressed to an agent) and answers, withdrawals, skips and cancels of the issue's pending
//! cards.

use roost_core::interaction::*;
use roost_core::*;
use serde_json::{json, Value};

use super::super::ops::Text;
use super::World;

impl World {
    pub(super) fn interaction(&self, issue_id: String, n: u8, new: String, body: &Text) -> Command {
        let text = body.render();
        let pending: Vec<&Interaction> = self
            .state
            .interactions
            .pending_of_issue(&issue_id)
            .collect();
        // One of the issue's pending cards, else a made-up id.
        let card = pending
            .get(usize::from(n) % pending.len().max(1))
            .map_or_else(|| format!("ix-{new}"), |c| c.id.clone());
        let plan = self
            .state
            .documents
            .get(&issue_id, "plan")
            .map(|d| d.latest_revision_id.clone());
        let op = match n % 10 {
            0..=3 => {
                let (kind, payload) = match (n / 10) % 5 {
                    0 => (
                        InteractionKind::RequestConfirmation,
                        json!({ "version": 1, "prompt": text,
                                "target": plan.map(|r| json!({"type": "issue_document", "key": "plan", "revisionId": r})) }),
                    ),
                    1 => (
                        InteractionKind::RequestCheckboxConfirmation,
                        json!({ "version": 1, "prompt": "pick", "minSelected": 1,
                                "defaultSelectedOptionIds": ["a"],
                                "options": [{"id": "a", "label": "A"}, {"id": "b", "label": text}] }),
                    ),
                    2 => (
                        InteractionKind::AskUserQuestions,
                        json!({ "version": 1, "questions": [{"id": "q", "prompt": text,
                                "selectionMode": "single", "required": true,
                                "options": [{"id": "o", "label": "O"}]}] }),
                    ),
                    3 => (
                        InteractionKind::RequestItemVerdicts,
                        json!({ "version": 1, "prompt": "review",
                                "items": [{"id": "1", "label": "one"}, {"id": "2", "label": "two"}] }),
                    ),
                    _ => (InteractionKind::RequestConfirmation, Value::String(text)),
                };
                InteractionOp::Create {
                    interaction: NewInteraction {
                        id: format!("ix-{new}"),
                        kind,
                        payload,
                        continuation_policy: None,
                        resolver_policy: n.is_multiple_of(4).then_some(ResolverPolicy::NotCreator),
                        // Sometimes one of the world's agents, of this company or another.
                        addressee_agent_id: n
                            .is_multiple_of(7)
                            .then(|| self.state.agents.keys().nth(usize::from(n) % 3))
                            .flatten()
                            .cloned(),
                        idempotency_key: new
                            .len()
                            .is_multiple_of(3)
                            .then(|| "same-key".to_string()),
                        source_comment_id: None,
                        title: None,
                        summary: None,
                    },
                }
            }
            4 | 5 => InteractionOp::Accept {
                interaction_id: card,
                selected_option_ids: n.is_multiple_of(2).then(|| vec!["b".into()]),
            },
            6 => InteractionOp::Reject {
                interaction_id: card,
                reason: Some(text),
            },
            7 => InteractionOp::Respond {
                interaction_id: card,
                answers: vec![QuestionAnswer {
                    question_id: "q".into(),
                    option_ids: vec!["o".into()],
                    other_text: None,
                }],
                summary_markdown: Some(text),
            },
            8 => InteractionOp::Verdicts {
                interaction_id: card,
                verdicts: vec![ItemVerdictInput {
                    id: "1".into(),
                    verdict: ItemVerdict::Approve,
                    reason: None,
                }],
            },
            _ => match (n / 10) % 3 {
                0 => InteractionOp::Withdraw {
                    interaction_id: card,
                    reason: None,
                },
                1 => InteractionOp::Skip {
                    interaction_id: card,
                    reason: Some(text),
                },
                _ => InteractionOp::Cancel {
                    interaction_id: card,
                    reason: None,
                },
            },
        };
        Command::IssueInteraction { issue_id, op }
    }
}
