//! Issue-thread interactions, Paperclip's `/api/issues/{id}/interactions[/{iid}/{action}]`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use roost_core::interaction::{
    InteractionAcceptBody, InteractionCreateBody, InteractionOp, InteractionReasonBody,
    InteractionRespondBody, InteractionVerdictsBody, InteractionView,
};

use super::dto::multiline;
use super::extract::JsonBody;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<InteractionView>>> {
    Ok(Json(api.list_interactions(&caller, &id).await?))
}

/// Makes the card (201), or answers the card its `idempotencyKey` made first (200).
pub async fn create(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<InteractionCreateBody>,
) -> Result<(StatusCode, Json<InteractionView>)> {
    let asked = api.create_interaction(&caller, &id, body).await?;
    let status = if asked.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(asked.interaction)))
}

pub async fn accept(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionAcceptBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Accept {
        interaction_id,
        selected_option_ids: body.selected_option_ids,
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

pub async fn reject(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionReasonBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Reject {
        interaction_id,
        reason: body.reason.map(multiline),
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

pub async fn respond(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionRespondBody>,
) -> Result<Json<InteractionView>> {
    let mut answers = body.answers;
    for answer in &mut answers {
        answer.other_text = answer.other_text.take().map(multiline);
    }
    let op = InteractionOp::Respond {
        interaction_id,
        answers,
        summary_markdown: body.summary_markdown.map(multiline),
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

pub async fn verdicts(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionVerdictsBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Verdicts {
        interaction_id,
        verdicts: body.verdicts,
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

pub async fn withdraw(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionReasonBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Withdraw {
        interaction_id,
        reason: body.reason.map(multiline),
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

/// The board sets a card aside unanswered.
pub async fn skip(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionReasonBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Skip {
        interaction_id,
        reason: body.reason.map(multiline),
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}

/// The board cancels an `ask_user_questions` card.
pub async fn cancel(
    State(api): State<Api>,
    caller: Caller,
    Path((id, interaction_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<InteractionReasonBody>,
) -> Result<Json<InteractionView>> {
    let op = InteractionOp::Cancel {
        interaction_id,
        reason: body.reason.map(multiline),
    };
    Ok(Json(api.answer_interaction(&caller, &id, op).await?))
}
