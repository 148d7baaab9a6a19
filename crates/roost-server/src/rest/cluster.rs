//! Cluster administration over REST (`roost cluster ...` uses these).

use axum::extract::{Path, State};
use axum::Json;
use roost_raft::{ClusterStatus, NodeReport};
use serde::Deserialize;

use super::extract::JsonBody;
use crate::api::{Api, NewMember};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Member {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    pub peer_addr: String,
    /// Sent by clients that reuse the member shape of `cluster status`; every initial member
    /// is a voter.
    #[serde(default = "yes")]
    pub voter: bool,
}

fn yes() -> bool {
    true
}

impl From<Member> for NewMember {
    fn from(m: Member) -> Self {
        NewMember {
            id: m.id,
            grpc_addr: m.grpc_addr,
            http_addr: m.http_addr,
            peer_addr: m.peer_addr,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Init {
    pub members: Vec<Member>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddNode {
    pub id: u64,
    pub grpc_addr: String,
    pub http_addr: String,
    pub peer_addr: String,
    #[serde(default)]
    pub learner_only: bool,
}

pub async fn status(State(api): State<Api>, caller: Caller) -> Result<Json<ClusterStatus>> {
    Ok(Json(api.cluster_status(&caller).await?))
}

pub async fn node(State(api): State<Api>, caller: Caller) -> Json<NodeReport> {
    Json(api.node_report(&caller))
}

pub async fn init(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<Init>,
) -> Result<Json<ClusterStatus>> {
    if let Some(m) = body.members.iter().find(|m| !m.voter) {
        return Err(ApiError::bad_request(format!(
            "node {} is named as a learner: every member of a new cluster is a voter (add \
             learners later with add-node --learner)",
            m.id
        )));
    }
    let members: Vec<NewMember> = body.members.into_iter().map(NewMember::from).collect();
    Ok(Json(api.init_cluster(&caller, &members).await?))
}

pub async fn add_node(
    State(api): State<Api>,
    caller: Caller,
    JsonBody(body): JsonBody<AddNode>,
) -> Result<Json<ClusterStatus>> {
    let member = NewMember {
        id: body.id,
        grpc_addr: body.grpc_addr,
        http_addr: body.http_addr,
        peer_addr: body.peer_addr,
    };
    Ok(Json(
        api.add_node(&caller, &member, !body.learner_only).await?,
    ))
}

pub async fn remove_node(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<u64>,
) -> Result<Json<ClusterStatus>> {
    Ok(Json(api.remove_node(&caller, id).await?))
}
