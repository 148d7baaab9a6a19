//! `roost issue interaction list|ask|accept|reject|answer|verdict|withdraw|skip|cancel`: typed
//! questions on an issue (Paperclip's issue-thread interactions), answered by the board or
//! another agent.

use anyhow::{bail, Context};
use clap::Subcommand;
use roost_client::{
    InteractionAcceptBody, InteractionCreateBody, InteractionReasonBody, InteractionRespondBody,
    InteractionVerdictsBody, InteractionView, RoostClient,
};
use serde_json::json;

use super::output::{fields, or_dash, table, when, Output};

#[derive(Subcommand)]
pub(super) enum InteractionCommand {
    /// List an issue's cards, oldest first
    List { issue: String },
    /// Leave a card on an issue: a yes/no question with --prompt, any kind with --payload
    Ask {
        issue: String,
        /// request_confirmation, request_checkbox_confirmation, ask_user_questions or
        /// request_item_verdicts
        #[arg(long, default_value = "request_confirmation")]
        kind: String,
        /// The question of a request_confirmation
        #[arg(long, conflicts_with = "payload")]
        prompt: Option<String>,
        /// The kind's payload as JSON (Paperclip's schema for the kind)
        #[arg(long)]
        payload: Option<String>,
        /// Who answers: anyone (default), not_creator or human_only
        #[arg(long)]
        resolver: Option<String>,
        /// Whom the answer wakes: none, wake_assignee or wake_assignee_on_accept
        #[arg(long)]
        continuation: Option<String>,
        /// A retry with the same key answers the card made first
        #[arg(long)]
        key: Option<String>,
    },
    /// Accept a confirmation (a checkbox card with the options chosen)
    Accept {
        issue: String,
        interaction: String,
        /// Option ids, comma-separated (default: the card's defaults)
        #[arg(long, value_delimiter = ',')]
        options: Option<Vec<String>>,
    },
    Reject {
        issue: String,
        interaction: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Answer an ask_user_questions card: `--choose QUESTION=OPTION[,OPTION]`, repeated
    Answer {
        issue: String,
        interaction: String,
        #[arg(long = "choose", value_name = "QUESTION=OPTIONS", required = true)]
        choices: Vec<String>,
        /// A summary of the answers, in markdown
        #[arg(long)]
        summary: Option<String>,
    },
    /// Give verdicts on items of a request_item_verdicts card: `--item ID=approve|reject|defer`
    Verdict {
        issue: String,
        interaction: String,
        #[arg(long = "item", value_name = "ID=VERDICT", required = true)]
        items: Vec<String>,
        /// The reason given with each verdict
        #[arg(long)]
        reason: Option<String>,
    },
    /// Take a pending card back (its creator, the issue's assignee or an administrator)
    Withdraw {
        issue: String,
        interaction: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Set a pending card aside unanswered (administrators)
    Skip {
        issue: String,
        interaction: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Cancel an ask_user_questions card (administrators)
    Cancel {
        issue: String,
        interaction: String,
        #[arg(long)]
        reason: Option<String>,
    },
}

pub(super) async fn run(
    client: &RoostClient,
    out: Output,
    command: InteractionCommand,
) -> anyhow::Result<()> {
    let card = match command {
        InteractionCommand::List { issue } => {
            let cards = client.list_interactions(&issue).await?;
            return out.show(&cards, |c| cards_text(c));
        }
        InteractionCommand::Ask {
            issue,
            kind,
            prompt,
            payload,
            resolver,
            continuation,
            key,
        } => {
            let payload = match (prompt, payload) {
                (Some(prompt), _) => json!({ "version": 1, "prompt": prompt }),
                (None, Some(text)) => {
                    serde_json::from_str(&text).context("--payload is not valid JSON")?
                }
                (None, None) => bail!("give the question with --prompt TEXT, or the card's payload with --payload JSON"),
            };
            let body = InteractionCreateBody {
                kind,
                payload,
                idempotency_key: key,
                resolver_policy: resolver
                    .map(|r| r.parse())
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                continuation_policy: continuation
                    .map(|c| c.parse())
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                ..Default::default()
            };
            client.create_interaction(&issue, &body).await?
        }
        InteractionCommand::Accept {
            issue,
            interaction,
            options,
        } => {
            let body = InteractionAcceptBody {
                selected_option_ids: options,
                ..Default::default()
            };
            client
                .answer_interaction(&issue, &interaction, "accept", &body)
                .await?
        }
        InteractionCommand::Reject {
            issue,
            interaction,
            reason,
        } => with_reason(client, &issue, &interaction, "reject", reason).await?,
        InteractionCommand::Answer {
            issue,
            interaction,
            choices,
            summary,
        } => {
            let answers = pairs(
                &choices,
                "--choose QUESTION=OPTION[,OPTION]",
                |q, options| {
                    let options: Vec<&str> = options.split(',').filter(|o| !o.is_empty()).collect();
                    json!({ "questionId": q, "optionIds": options })
                },
            )?;
            let body = InteractionRespondBody {
                answers,
                summary_markdown: summary,
            };
            client
                .answer_interaction(&issue, &interaction, "respond", &body)
                .await?
        }
        InteractionCommand::Verdict {
            issue,
            interaction,
            items,
            reason,
        } => {
            let verdicts = pairs(
                &items,
                "--item ID=approve|reject|defer",
                |id, verdict| json!({ "id": id, "verdict": verdict, "reason": reason }),
            )?;
            let body = InteractionVerdictsBody { verdicts };
            client
                .answer_interaction(&issue, &interaction, "verdicts", &body)
                .await?
        }
        InteractionCommand::Withdraw {
            issue,
            interaction,
            reason,
        } => with_reason(client, &issue, &interaction, "withdraw", reason).await?,
        InteractionCommand::Skip {
            issue,
            interaction,
            reason,
        } => with_reason(client, &issue, &interaction, "skip", reason).await?,
        InteractionCommand::Cancel {
            issue,
            interaction,
            reason,
        } => with_reason(client, &issue, &interaction, "cancel", reason).await?,
    };
    out.show(&card, card_text)
}

/// `action` on a card, with an optional reason (reject, withdraw, skip, cancel).
async fn with_reason(
    client: &RoostClient,
    issue: &str,
    interaction: &str,
    action: &str,
    reason: Option<String>,
) -> anyhow::Result<InteractionView> {
    let body = InteractionReasonBody { reason };
    Ok(client
        .answer_interaction(issue, interaction, action, &body)
        .await?)
}

/// Each `NAME=VALUE` of `items` made into a `T` through `build`'s JSON, or a message showing
/// the form.
fn pairs<T: serde::de::DeserializeOwned>(
    items: &[String],
    form: &str,
    build: impl Fn(&str, &str) -> serde_json::Value,
) -> anyhow::Result<Vec<T>> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((name, value)) if !name.is_empty() => serde_json::from_value(build(name, value))
                .with_context(|| format!("{item:?} is not of the form {form}")),
            _ => bail!("{item:?} is not of the form {form}"),
        })
        .collect()
}

fn cards_text(cards: &[InteractionView]) -> String {
    if cards.is_empty() {
        return "no interactions\n".into();
    }
    let rows: Vec<Vec<String>> = cards
        .iter()
        .map(|c| {
            let i = &c.interaction;
            vec![
                i.id.clone(),
                i.kind.to_string(),
                i.status.to_string(),
                when(i.created_at),
                or_dash(i.title.as_deref().or_else(|| prompt(c))),
            ]
        })
        .collect();
    table(&["ID", "KIND", "STATUS", "CREATED", "ASKS"], &rows)
}

/// The question a card asks, where its payload has one.
fn prompt(card: &InteractionView) -> Option<&str> {
    card.interaction.payload.get("prompt")?.as_str()
}

fn card_text(c: &InteractionView) -> String {
    let i = &c.interaction;
    // A cancelled question card's result (Paperclip's shape) says `cancelled`, not `outcome`.
    let outcome = i.result.as_ref().and_then(|r| {
        r.get("outcome").and_then(|o| o.as_str()).or_else(|| {
            (r.get("cancelled") == Some(&serde_json::Value::Bool(true))).then_some("cancelled")
        })
    });
    fields(&[
        ("interaction", i.id.clone()),
        ("kind", i.kind.to_string()),
        ("status", i.status.to_string()),
        ("asks", or_dash(i.title.as_deref().or_else(|| prompt(c)))),
        ("outcome", or_dash(outcome)),
        ("answers", i.resolver_policy.to_string()),
        ("wakes", i.continuation_policy.to_string()),
    ])
}
