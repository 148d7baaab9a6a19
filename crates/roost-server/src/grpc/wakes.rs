//! The wake and worker calls of `roost.v1.Control`: each calls the [`Api`] function
//! its REST twin calls (`rest/wakes.rs`, `rest/credentials.rs`), so authorization, validation
//! and errors are the same. A handler takes the service's `Api` and the caller by value so
//! `ControlService::serve` (`service.rs`) can hand it any of them.

use roost_core::views::{WakeView, WakeupResult, WorkerView};
use roost_core::{Timestamp, WakeReason};
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

use super::convert::{enum_values, non_empty, optional_enum, parse_json, run_to_proto};
use super::credentials::info;
use crate::api::{Api, JoinTokenLimits, WakeFilter, WakeupRequest};
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

/// The name a join token gets when the request names none, as over REST.
const DEFAULT_JOIN_TOKEN_NAME: &str = "worker";

fn wake_to_proto(v: WakeView) -> pb::Wake {
    let w = v.wake;
    pb::Wake {
        id: w.id,
        company_id: w.company_id,
        agent_id: w.agent_id,
        issue_id: w.issue_id,
        reason: w.reason.to_proto(),
        status: w.status.to_proto(),
        status_reason: w.status_reason,
        count: w.count,
        comment_ids: w.comment_ids,
        payload_json: w.payload.to_string(),
        idempotency_key: w.idempotency_key,
        requested_by_type: w.requested_by_type,
        requested_by_id: w.requested_by_id,
        coalesced_into: w.coalesced_into,
        run_id: w.run_id,
        retry_of_run_id: w.retry_of_run_id,
        waiting_on_run: w.waiting_on_run,
        seq: w.seq,
        created_at_ms: w.created_at.millis(),
        updated_at_ms: w.updated_at.millis(),
        blocked_by: v.blocked_by,
    }
}

fn worker_to_proto(v: WorkerView) -> pb::WorkerInfo {
    let w = v.worker;
    pb::WorkerInfo {
        id: w.id,
        name: w.name,
        adapters: w.adapters.iter().map(|a| a.to_proto()).collect(),
        labels: w.labels.into_iter().collect(),
        slots: w.slots,
        version: w.version,
        status: w.status.to_proto(),
        registered_at_ms: w.registered_at.millis(),
        lost_at_ms: w.lost_at.map(Timestamp::millis),
        live_runs: v.live_runs as u64,
        lease_expires_in_ms: v.lease_expires_in_ms,
    }
}

/// An API wakeup is `on_demand` or `routine`; the other reasons are the rules' own.
fn wake_reason(value: Option<i32>) -> Answer<WakeReason> {
    match optional_enum("reason", value)? {
        None | Some(WakeReason::OnDemand) => Ok(WakeReason::OnDemand),
        Some(WakeReason::Routine) => Ok(WakeReason::Routine),
        Some(other) => Err(ApiError::bad_request(format!(
            "reason: {other} wakes are made by Roost; ask for ON_DEMAND or ROUTINE"
        ))),
    }
}

pub(super) async fn wakeup(
    api: Api,
    caller: Caller,
    r: pb::WakeupRequest,
) -> Answer<pb::WakeupResponse> {
    let payload = if r.payload_json.trim().is_empty() {
        None
    } else {
        Some(parse_json("payload_json", &r.payload_json)?)
    };
    let request = WakeupRequest {
        issue_id: non_empty(r.issue_id),
        reason: Some(wake_reason(r.reason)?),
        payload,
        idempotency_key: non_empty(r.idempotency_key),
    };
    let WakeupResult { wake, run } = api.wakeup(&caller, &r.agent_id, request).await?;
    Ok(pb::WakeupResponse {
        wake: Some(wake_to_proto(wake)),
        run: run.map(|r| run_to_proto(r.into_run())),
    })
}

pub(super) async fn list_wakes(
    api: Api,
    caller: Caller,
    r: pb::ListWakesRequest,
) -> Answer<pb::ListWakesResponse> {
    let filter = WakeFilter {
        agent_id: non_empty(r.agent_id),
        statuses: enum_values("status", &r.status)?,
        issue_id: non_empty(r.issue_id),
        limit: (r.limit > 0).then_some(r.limit as usize),
    };
    let wakes = api.list_wakes(&caller, &r.company_id, &filter).await?;
    Ok(pb::ListWakesResponse {
        wakes: wakes.into_iter().map(wake_to_proto).collect(),
    })
}

pub(super) async fn get_wake(api: Api, caller: Caller, r: pb::GetWakeRequest) -> Answer<pb::Wake> {
    Ok(wake_to_proto(api.get_wake(&caller, &r.wake_id).await?))
}

pub(super) async fn list_workers(
    api: Api,
    caller: Caller,
    _: pb::ListWorkersRequest,
) -> Answer<pb::ListWorkersResponse> {
    let workers = api.list_workers(&caller).await?;
    Ok(pb::ListWorkersResponse {
        workers: workers.into_iter().map(worker_to_proto).collect(),
    })
}

pub(super) async fn create_join_token(
    api: Api,
    caller: Caller,
    r: pb::CreateWorkerJoinTokenRequest,
) -> Answer<pb::CreateWorkerJoinTokenResponse> {
    let name = if r.name.is_empty() {
        DEFAULT_JOIN_TOKEN_NAME.to_string()
    } else {
        r.name
    };
    let limits = JoinTokenLimits {
        ttl_secs: r.ttl_secs,
        max_uses: r.max_uses,
    };
    let (credential, token) = api.create_join_token(&caller, &name, limits).await?;
    Ok(pb::CreateWorkerJoinTokenResponse {
        credential: Some(info(credential.into())),
        token,
    })
}

pub(super) async fn revoke_worker(
    api: Api,
    caller: Caller,
    r: pb::RevokeWorkerRequest,
) -> Answer<pb::CredentialInfo> {
    Ok(info(api.revoke_worker(&caller, &r.worker_id).await?))
}

#[cfg(test)]
mod tests {
    use super::wake_reason;
    use roost_core::WakeReason;
    use roost_proto::ProtoEnum;

    #[test]
    fn a_wakeup_asks_on_demand_or_routine_and_nothing_else() {
        assert_eq!(wake_reason(None).expect("default"), WakeReason::OnDemand);
        assert_eq!(
            wake_reason(Some(WakeReason::Routine.to_proto())).expect("routine"),
            WakeReason::Routine
        );
        let refused =
            wake_reason(Some(WakeReason::IssueAssigned.to_proto())).expect_err("a rule's reason");
        assert_eq!(
            tonic::Status::from(refused).code(),
            tonic::Code::InvalidArgument
        );
        assert!(wake_reason(Some(99)).is_err());
    }
}
