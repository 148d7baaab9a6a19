//! An agent's config revisions over gRPC (`control.proto`): each calls the [`Api`] function its
//! REST twin calls (`rest/compat.rs`), so authorization and errors are the same.

use roost_core::agent_revision::AgentConfigRevision;
use roost_proto::v1 as pb;

use super::convert;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

fn to_proto(r: AgentConfigRevision) -> Answer<pb::AgentConfigRevision> {
    let json = |config| {
        serde_json::to_string(config)
            .map_err(|e| ApiError::internal(format!("encode a config revision: {e}")))
    };
    Ok(pb::AgentConfigRevision {
        before_config_json: json(&r.before_config)?,
        after_config_json: json(&r.after_config)?,
        id: r.id,
        company_id: r.company_id,
        agent_id: r.agent_id,
        created_by_agent_id: r.created_by_agent_id,
        created_by_user_id: r.created_by_user_id,
        source: r.source,
        rolled_back_from_revision_id: r.rolled_back_from_revision_id,
        changed_keys: r.changed_keys,
        created_at_ms: r.created_at.millis(),
    })
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListAgentConfigRevisionsRequest,
) -> Answer<pb::ListAgentConfigRevisionsResponse> {
    let revisions = api.agent_config_revisions(&caller, &r.agent_id).await?;
    Ok(pb::ListAgentConfigRevisionsResponse {
        revisions: revisions.into_iter().map(to_proto).collect::<Answer<_>>()?,
    })
}

pub(super) async fn get(
    api: Api,
    caller: Caller,
    r: pb::GetAgentConfigRevisionRequest,
) -> Answer<pb::AgentConfigRevision> {
    to_proto(
        api.agent_config_revision(&caller, &r.agent_id, &r.revision_id)
            .await?,
    )
}

pub(super) async fn rollback(
    api: Api,
    caller: Caller,
    r: pb::RollbackAgentConfigRequest,
) -> Answer<pb::Agent> {
    let agent = api
        .rollback_agent_config(&caller, &r.agent_id, &r.revision_id)
        .await?;
    Ok(convert::agent_to_proto(agent))
}
