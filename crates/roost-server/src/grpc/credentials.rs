//! The credential calls of `roost.v1.Control` (`CreateAdminToken`, `ListCredentials`,
//! `RevokeCredential`) over the same service layer as REST's `rest/credentials.rs`.

use roost_core::CredentialKind;
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

use super::convert::enum_value;

use crate::api::{Api, CredentialView};
use crate::auth::Caller;
use crate::error::ApiError;

fn kind(value: i32) -> Result<CredentialKind, ApiError> {
    enum_value("kind", value)
}

/// An agent key's agent: required for `agent_key`, refused for the other kinds.
fn agent_of(kind: CredentialKind, agent_id: &str) -> Result<Option<&str>, ApiError> {
    match (kind, agent_id.is_empty()) {
        (CredentialKind::AgentKey, false) => Ok(Some(agent_id)),
        (CredentialKind::AgentKey, true) => {
            Err(ApiError::bad_request("agent_id is required for agent keys"))
        }
        (_, true) => Ok(None),
        (_, false) => Err(ApiError::bad_request("agent_id is only for agent keys")),
    }
}

pub(super) fn info(c: CredentialView) -> pb::CredentialInfo {
    pb::CredentialInfo {
        id: c.id,
        kind: c.kind.to_proto(),
        name: c.name,
        agent_id: c.agent_id.unwrap_or_default(),
        created_at_ms: c.created_at.millis(),
        revoked: c.revoked,
        revoked_at_ms: c.revoked_at.map(|t| t.millis()),
        expires_at_ms: c.expires_at.map(|t| t.millis()),
        max_uses: c.max_uses,
        // A worker credential's one worker (CredentialInfo has no field of its own for it).
        worker_ids: c.worker_id.map_or(c.worker_ids, |w| vec![w]),
    }
}

pub(super) async fn create_admin_token(
    api: Api,
    caller: Caller,
    request: pb::CreateAdminTokenRequest,
) -> Result<pb::CreateAdminTokenResponse, ApiError> {
    let (credential, token) = api.create_admin_token(&caller, &request.name).await?;
    Ok(pb::CreateAdminTokenResponse {
        credential: Some(info(credential.into())),
        token,
    })
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    request: pb::ListCredentialsRequest,
) -> Result<pb::ListCredentialsResponse, ApiError> {
    let kind = kind(request.kind)?;
    let agent_id = agent_of(kind, &request.agent_id)?;
    let list = api.list_credentials(&caller, kind, agent_id).await?;
    Ok(pb::ListCredentialsResponse {
        credentials: list.into_iter().map(info).collect(),
    })
}

pub(super) async fn revoke(
    api: Api,
    caller: Caller,
    request: pb::RevokeCredentialRequest,
) -> Result<pb::CredentialInfo, ApiError> {
    let kind = kind(request.kind)?;
    let agent_id = agent_of(kind, &request.agent_id)?;
    let view = api
        .revoke_credential(&caller, kind, &request.id, agent_id)
        .await?;
    Ok(info(view))
}
