//! The issue-thread interaction calls of `roost.v1.Control` (`interactions.proto`): each calls
//! the [`Api`] function its REST twin calls (`rest/interactions.rs`), so authorization,
//! validation and errors are the same.

use roost_core::interaction::{
    InteractionCreateBody, InteractionKind, InteractionOp, InteractionView, ItemVerdictInput,
    QuestionAnswer,
};
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

use super::convert::{enum_value, optional_enum, parse_json};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

fn interaction_to_proto(view: InteractionView) -> pb::IssueInteraction {
    let i = view.interaction;
    pb::IssueInteraction {
        id: i.id,
        company_id: i.company_id,
        issue_id: i.issue_id,
        kind: i.kind.to_proto(),
        status: i.status.to_proto(),
        continuation_policy: i.continuation_policy.to_proto(),
        resolver_policy: i.resolver_policy.to_proto(),
        addressee_agent_id: i.addressee_agent_id,
        idempotency_key: i.idempotency_key,
        source_comment_id: i.source_comment_id,
        source_run_id: i.source_run_id,
        title: i.title,
        summary: i.summary,
        payload_json: i.payload.to_string(),
        result_json: i.result.map(|r| r.to_string()),
        created_by_agent_id: i.created_by_agent_id,
        created_by_user_id: i.created_by_user_id,
        resolved_by_agent_id: i.resolved_by_agent_id,
        resolved_by_user_id: i.resolved_by_user_id,
        resolved_by_run_id: i.resolved_by_run_id,
        created_at_ms: i.created_at.millis(),
        updated_at_ms: i.updated_at.millis(),
        resolved_at_ms: i.resolved_at.map(|t| t.millis()),
    }
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListIssueInteractionsRequest,
) -> Answer<pb::ListIssueInteractionsResponse> {
    let interactions = api.list_interactions(&caller, &r.issue_id).await?;
    Ok(pb::ListIssueInteractionsResponse {
        interactions: interactions.into_iter().map(interaction_to_proto).collect(),
    })
}

pub(super) async fn create(
    api: Api,
    caller: Caller,
    r: pb::CreateIssueInteractionRequest,
) -> Answer<pb::CreateIssueInteractionResponse> {
    let kind: InteractionKind = enum_value("kind", r.kind)?;
    let body = InteractionCreateBody {
        kind: kind.as_str().to_string(),
        payload: parse_json("payload_json", &r.payload_json)?,
        idempotency_key: r.idempotency_key,
        source_comment_id: r.source_comment_id,
        source_run_id: None,
        title: r.title,
        summary: r.summary,
        continuation_policy: optional_enum("continuation_policy", Some(r.continuation_policy))?,
        resolver_policy: optional_enum("resolver_policy", Some(r.resolver_policy))?,
        addressee_agent_id: r.addressee_agent_id,
        addressee_user_id: None,
    };
    let asked = api.create_interaction(&caller, &r.issue_id, body).await?;
    Ok(pb::CreateIssueInteractionResponse {
        interaction: Some(interaction_to_proto(asked.interaction)),
        created: asked.created,
    })
}

async fn answer(
    api: Api,
    caller: Caller,
    issue_id: &str,
    op: InteractionOp,
) -> Answer<pb::IssueInteraction> {
    let view = api.answer_interaction(&caller, issue_id, op).await?;
    Ok(interaction_to_proto(view))
}

pub(super) async fn accept(
    api: Api,
    caller: Caller,
    r: pb::AcceptIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let op = InteractionOp::Accept {
        interaction_id: r.interaction_id,
        selected_option_ids: (!r.selected_option_ids.is_empty()).then_some(r.selected_option_ids),
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn reject(
    api: Api,
    caller: Caller,
    r: pb::RejectIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let op = InteractionOp::Reject {
        interaction_id: r.interaction_id,
        reason: r.reason,
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn respond(
    api: Api,
    caller: Caller,
    r: pb::RespondIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let answers = r
        .answers
        .into_iter()
        .map(|a| QuestionAnswer {
            question_id: a.question_id,
            option_ids: a.option_ids,
            other_text: a.other_text,
        })
        .collect();
    let op = InteractionOp::Respond {
        interaction_id: r.interaction_id,
        answers,
        summary_markdown: r.summary_markdown,
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn verdicts(
    api: Api,
    caller: Caller,
    r: pb::SubmitIssueInteractionVerdictsRequest,
) -> Answer<pb::IssueInteraction> {
    let verdicts = r
        .verdicts
        .into_iter()
        .map(|v| {
            Ok(ItemVerdictInput {
                id: v.id,
                verdict: enum_value("verdicts.verdict", v.verdict)?,
                reason: v.reason,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let op = InteractionOp::Verdicts {
        interaction_id: r.interaction_id,
        verdicts,
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn withdraw(
    api: Api,
    caller: Caller,
    r: pb::WithdrawIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let op = InteractionOp::Withdraw {
        interaction_id: r.interaction_id,
        reason: r.reason,
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn skip(
    api: Api,
    caller: Caller,
    r: pb::SkipIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let op = InteractionOp::Skip {
        interaction_id: r.interaction_id,
        reason: r.reason,
    };
    answer(api, caller, &r.issue_id, op).await
}

pub(super) async fn cancel(
    api: Api,
    caller: Caller,
    r: pb::CancelIssueInteractionRequest,
) -> Answer<pb::IssueInteraction> {
    let op = InteractionOp::Cancel {
        interaction_id: r.interaction_id,
        reason: r.reason,
    };
    answer(api, caller, &r.issue_id, op).await
}
