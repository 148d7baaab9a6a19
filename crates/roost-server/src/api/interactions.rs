//! Issue-thread interactions (`roost_core::interaction`): pending cards are in memory, every
//! card is a row of `state.db`, and reads come from the rows.

use roost_core::interaction::{
    Interaction, InteractionCreateBody, InteractionOp, InteractionStatus, InteractionView,
};
use roost_core::{Command, Outcome};
use roost_store::InteractionLookup;

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// A create's answer: the card, and whether this request made it (a retry with its
/// `idempotencyKey` answers the first).
pub struct Asked {
    pub interaction: InteractionView,
    pub created: bool,
}

impl Api {
    /// The rows of an issue's cards, as this node's memory stood after a read barrier.
    async fn interaction_rows_ready(
        &self,
        caller: &Caller,
        issue: &str,
    ) -> Result<String, ApiError> {
        let issue = self.get_issue(caller, issue).await?;
        let seen_at = self.reader().read(|s| s.applied_index);
        self.rows_written(seen_at).await?;
        Ok(issue.id)
    }

    /// An issue's cards, oldest first.
    pub async fn list_interactions(
        &self,
        caller: &Caller,
        issue: &str,
    ) -> Result<Vec<InteractionView>, ApiError> {
        let issue_id = self.interaction_rows_ready(caller, issue).await?;
        let rows = self.reader().interactions_of_issue(&issue_id).await?;
        Ok(rows.into_iter().map(Interaction::view).collect())
    }

    /// The card `interaction_id` of the issue `issue_id` (whose rows are ready).
    async fn interaction_of(
        &self,
        issue_id: &str,
        interaction_id: &str,
    ) -> Result<Interaction, ApiError> {
        self.reader()
            .interaction(InteractionLookup::Id(interaction_id))
            .await?
            .filter(|i| i.issue_id == issue_id)
            .ok_or_else(|| ApiError::not_found("interaction", interaction_id))
    }

    pub async fn create_interaction(
        &self,
        caller: &Caller,
        issue: &str,
        body: InteractionCreateBody,
    ) -> Result<Asked, ApiError> {
        let issue_id = self.interaction_rows_ready(caller, issue).await?;
        require_run(caller)?;
        let new = body.into_new(new_id())?;
        // A card answered since its first create is not in memory: its key is looked up here.
        // (A pending one is the state machine's to find, so that two racing creates make one.)
        let retry = new.card("", &issue_id, &caller.actor, super::now());
        if let Some(key) = &retry.idempotency_key {
            let lookup = InteractionLookup::Key {
                issue_id: &issue_id,
                key,
            };
            let answered = self
                .reader()
                .interaction(lookup)
                .await?
                .filter(|first| first.status != InteractionStatus::Pending);
            if let Some(first) = answered {
                if !first.same_request(&retry) {
                    return Err(ApiError::Domain(roost_core::DomainError::conflict(
                        format!(
                        "idempotencyKey {key} already names interaction {} on this issue, with \
                         another request; send a new key for a new card",
                        first.id
                    ),
                    )));
                }
                return Ok(Asked {
                    interaction: first.view(),
                    created: false,
                });
            }
        }
        let op = InteractionOp::Create { interaction: new };
        let (interaction, created) = self.interaction_command(caller, issue_id, op).await?;
        Ok(Asked {
            interaction: interaction.view(),
            created,
        })
    }

    /// Accepts, rejects, answers, gives verdicts on, withdraws, skips or cancels a card.
    pub async fn answer_interaction(
        &self,
        caller: &Caller,
        issue: &str,
        op: InteractionOp,
    ) -> Result<InteractionView, ApiError> {
        let issue_id = self.interaction_rows_ready(caller, issue).await?;
        if matches!(
            op,
            InteractionOp::Skip { .. } | InteractionOp::Cancel { .. }
        ) && caller.agent_id().is_some()
        {
            return Err(ApiError::forbidden(
                "only an administrator (the board) skips or cancels an interaction; an agent \
                 withdraws its own card (POST .../withdraw)",
            ));
        }
        require_run(caller)?;
        let Some(id) = op.interaction_id().map(str::to_string) else {
            return Err(ApiError::internal("a create is not an answer"));
        };
        let current = self.interaction_of(&issue_id, &id).await?;
        if current.status != InteractionStatus::Pending {
            return Err(ApiError::Domain(roost_core::DomainError::conflict(
                format!(
                    "interaction {id} is already {}: a card is answered once",
                    current.status
                ),
            )));
        }
        let (interaction, _) = self.interaction_command(caller, issue_id, op).await?;
        Ok(interaction.view())
    }

    async fn interaction_command(
        &self,
        caller: &Caller,
        issue_id: String,
        op: InteractionOp,
    ) -> Result<(Interaction, bool), ApiError> {
        let command = Command::IssueInteraction { issue_id, op };
        expect_outcome!(
            self.submit(caller, command).await?,
            Outcome::Interaction { interaction, created } => (interaction, created)
        )
    }
}

/// Paperclip attributes every card an agent makes or answers to its run: without one, `401`,
/// as its checkout answers (the state machine refuses it too).
fn require_run(caller: &Caller) -> Result<(), ApiError> {
    if caller.agent_id().is_some() && caller.actor.run_id.is_none() {
        return Err(ApiError::unauthorized(
            "Agent run id required: an agent makes and answers interactions from a run; send \
             its id in the X-Paperclip-Run-Id (or X-Roost-Run-Id) header",
        ));
    }
    Ok(())
}
