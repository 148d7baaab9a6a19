//! The `roost.v1.Cluster` service: cluster administration over gRPC, on the same service layer
//! as `/api/cluster/*`.

use roost_proto::v1 as pb;
use roost_proto::v1::cluster_server::Cluster;
use roost_proto::ProtoEnum;
use tonic::{Request, Response, Status};

use super::metadata::authenticate_request;
use crate::api::{Api, NewMember};

type Reply<T> = Result<Response<T>, Status>;

pub(crate) struct ClusterService {
    api: Api,
}

impl ClusterService {
    pub(crate) fn new(api: Api) -> Self {
        ClusterService { api }
    }
}

fn report_to_proto(r: roost_raft::NodeReport) -> pb::NodeReport {
    pb::NodeReport {
        id: r.id,
        grpc_addr: r.grpc_addr,
        http_addr: r.http_addr,
        peer_addr: r.peer_addr,
        role: r.role.to_proto(),
        term: r.term,
        leader_id: r.leader_id,
        last_log_index: r.last_log_index,
        applied_index: r.applied_index,
        state_hash: r.state_hash,
        state_index: r.state_index,
        snapshot_index: r.snapshot_index,
        purged_index: r.purged_index,
    }
}

fn status_to_proto(s: roost_raft::ClusterStatus) -> pb::ClusterStatus {
    pb::ClusterStatus {
        leader_id: s.leader_id,
        term: s.term,
        last_log_index: s.last_log_index,
        members: s
            .members
            .into_iter()
            .map(|m| pb::MemberStatus {
                member: Some(pb::Member {
                    id: m.member.id,
                    grpc_addr: m.member.grpc_addr,
                    http_addr: m.member.http_addr,
                    peer_addr: m.member.peer_addr,
                    voter: m.member.voter,
                }),
                matched_index: m.matched_index,
                lag: m.lag,
                health: m.health.to_proto(),
                report: m.report.map(report_to_proto),
                error: m.error.unwrap_or_default(),
            })
            .collect(),
    }
}

fn member_from_proto(m: pb::Member) -> NewMember {
    NewMember {
        id: m.id,
        grpc_addr: m.grpc_addr,
        http_addr: m.http_addr,
        peer_addr: m.peer_addr,
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn status(&self, request: Request<pb::ClusterStatusRequest>) -> Reply<pb::ClusterStatus> {
        let caller = authenticate_request(&self.api, &request).await?;
        Ok(Response::new(status_to_proto(
            self.api.cluster_status(&caller).await?,
        )))
    }

    async fn node_status(&self, request: Request<pb::NodeStatusRequest>) -> Reply<pb::NodeReport> {
        let caller = authenticate_request(&self.api, &request).await?;
        Ok(Response::new(report_to_proto(
            self.api.node_report(&caller),
        )))
    }

    async fn init(&self, request: Request<pb::InitRequest>) -> Reply<pb::ClusterStatus> {
        let caller = authenticate_request(&self.api, &request).await?;
        let members: Vec<NewMember> = request
            .into_inner()
            .members
            .into_iter()
            .map(member_from_proto)
            .collect();
        Ok(Response::new(status_to_proto(
            self.api.init_cluster(&caller, &members).await?,
        )))
    }

    async fn add_node(&self, request: Request<pb::AddNodeRequest>) -> Reply<pb::ClusterStatus> {
        let caller = authenticate_request(&self.api, &request).await?;
        let body = request.into_inner();
        let member = body.member.ok_or_else(|| {
            Status::from(crate::error::ApiError::bad_request("member is required"))
        })?;
        let status = self
            .api
            .add_node(&caller, &member_from_proto(member), !body.as_learner_only)
            .await?;
        Ok(Response::new(status_to_proto(status)))
    }

    async fn remove_node(
        &self,
        request: Request<pb::RemoveNodeRequest>,
    ) -> Reply<pb::ClusterStatus> {
        let caller = authenticate_request(&self.api, &request).await?;
        let id = request.into_inner().id;
        Ok(Response::new(status_to_proto(
            self.api.remove_node(&caller, id).await?,
        )))
    }
}
