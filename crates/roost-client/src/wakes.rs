//! Wakes and workers (`/api/agents/{id}/wakeup`, `/api/companies/{cid}/wakes`, `/api/wakes/*`,
//! `/api/workers/*`) and their answers.

use roost_core::views::WakeFilter;
use roost_core::WakeReason;
use serde::Serialize;

use crate::types::{Query, ToQuery};
use crate::{CreatedJoinToken, Result, RoostClient, WakeView, WakeupResult, WorkerView, API};

/// Body of `POST /api/agents/{id}/wakeup`; absent fields are left out (the server refuses
/// unknown ones and fills in `on_demand` for the reason).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeupRequest {
    /// An issue id or `PREFIX-N` identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<WakeReason>,
    /// A JSON object handed to the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// A repeat with the same key returns the first wake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

impl ToQuery for WakeFilter {
    fn query(&self) -> Query {
        let mut q = Query::new();
        if let Some(agent) = &self.agent_id {
            q.push(("agentId", agent.clone()));
        }
        if !self.statuses.is_empty() {
            let csv: Vec<&str> = self.statuses.iter().map(|s| s.as_str()).collect();
            q.push(("status", csv.join(",")));
        }
        if let Some(issue) = &self.issue_id {
            q.push(("issueId", issue.clone()));
        }
        if let Some(limit) = self.limit {
            q.push(("limit", limit.to_string()));
        }
        q
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JoinTokenBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_secs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_uses: Option<u32>,
}

impl RoostClient {
    /// Asks for a run of the agent. An agent key may wake only its own agent.
    pub async fn wakeup(&self, agent_id: &str, request: &WakeupRequest) -> Result<WakeupResult> {
        self.post(&[API, "agents", agent_id, "wakeup"], request)
            .await
    }

    pub async fn list_wakes(&self, company_id: &str, filter: &WakeFilter) -> Result<Vec<WakeView>> {
        self.get(&[API, "companies", company_id, "wakes"], &filter.query())
            .await
    }

    pub async fn get_wake(&self, wake_id: &str) -> Result<WakeView> {
        self.get(&[API, "wakes", wake_id], &[]).await
    }

    /// Every registered worker (administrators only).
    pub async fn list_workers(&self) -> Result<Vec<WorkerView>> {
        self.get(&[API, "workers"], &[]).await
    }

    /// Mints a worker join token; its secret is shown once (administrators only).
    pub async fn create_worker_join_token(&self, name: Option<&str>) -> Result<CreatedJoinToken> {
        self.create_join_token(name, None, None).await
    }

    /// Mints a worker join token that expires after `ttl_secs` and admits at most `max_uses`
    /// distinct worker ids, each bound to it (`None`: no limit).
    pub async fn create_join_token(
        &self,
        name: Option<&str>,
        ttl_secs: Option<u64>,
        max_uses: Option<u32>,
    ) -> Result<CreatedJoinToken> {
        let body = JoinTokenBody {
            name,
            ttl_secs,
            max_uses,
        };
        self.post(&[API, "workers", "join-tokens"], &body).await
    }
}

#[cfg(test)]
mod tests {
    use roost_core::WakeStatus;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_wakeup_body_leaves_out_what_is_unset() {
        let body = serde_json::to_value(WakeupRequest {
            reason: Some(WakeReason::Routine),
            idempotency_key: Some("k1".into()),
            ..WakeupRequest::default()
        })
        .expect("serializable");
        assert_eq!(body, json!({ "reason": "routine", "idempotencyKey": "k1" }));
    }

    #[test]
    fn wake_filters_become_query_pairs() {
        let filter = WakeFilter {
            agent_id: Some("a1".into()),
            statuses: vec![WakeStatus::Queued, WakeStatus::Deferred],
            limit: Some(5),
            ..WakeFilter::default()
        };
        let expected: Query = vec![
            ("agentId", "a1".into()),
            ("status", "queued,deferred".into()),
            ("limit", "5".into()),
        ];
        assert_eq!(filter.query(), expected);
        assert!(WakeFilter::default().query().is_empty());
    }

    #[test]
    fn a_wake_view_reads_the_flattened_wake_and_says_why() {
        let view: WakeView = serde_json::from_value(json!({
            "id": "w1", "companyId": "c1", "agentId": "a1", "issueId": null,
            "reason": "on_demand", "status": "queued", "statusReason": "promoted: run r1 ended",
            "count": 1, "commentIds": [], "payload": null, "idempotencyKey": null,
            "requestedByType": "user", "requestedById": "admin", "coalescedInto": null,
            "runId": null, "retryOfRunId": null, "waitingOnRun": null, "seq": 7,
            "createdAt": 0, "updatedAt": 0, "blockedBy": "waiting for a worker"
        }))
        .expect("wake view JSON");
        assert_eq!(view.wake.seq, 7);
        assert_eq!(view.why(), Some("waiting for a worker"));
        let ended = WakeView {
            blocked_by: None,
            ..view
        };
        assert_eq!(ended.why(), Some("promoted: run r1 ended"));
    }
}
