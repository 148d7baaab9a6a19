//! Issue-thread interactions (`/api/issues/{id}/interactions[/{iid}/{action}]`), in the
//! server's own types (`roost_core::interaction`).

pub use roost_core::interaction::{
    InteractionAcceptBody, InteractionCreateBody, InteractionReasonBody, InteractionRespondBody,
    InteractionVerdictsBody, InteractionView,
};
use serde::Serialize;

use crate::{Result, RoostClient, API};

impl RoostClient {
    /// An issue's cards, oldest first.
    pub async fn list_interactions(&self, issue: &str) -> Result<Vec<InteractionView>> {
        self.get(&[API, "issues", issue, "interactions"], &[]).await
    }

    /// Leaves a card on an issue (or answers the card its idempotency key made first).
    pub async fn create_interaction(
        &self,
        issue: &str,
        body: &InteractionCreateBody,
    ) -> Result<InteractionView> {
        self.post(&[API, "issues", issue, "interactions"], body)
            .await
    }

    /// `action` (`accept`, `reject`, `respond`, `verdicts`, `withdraw`) on a card, with its body.
    pub async fn answer_interaction<B: Serialize + Sync>(
        &self,
        issue: &str,
        interaction: &str,
        action: &str,
        body: &B,
    ) -> Result<InteractionView> {
        let path = [API, "issues", issue, "interactions", interaction, action];
        self.post(&path, body).await
    }
}
