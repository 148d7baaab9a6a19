//! Wakes, the answer to a wakeup, and workers as the API shows them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::RunView;
use crate::entity::{Wake, WakeStatus, Worker};

/// A wake, and while it is queued, what keeps it from becoming a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeView {
    #[serde(flatten)]
    pub wake: Wake,
    /// Only for a queued wake: the agent's state, its concurrency limit, a run of its own on the
    /// issue, or the lack of a worker. Other statuses explain themselves in `statusReason`.
    #[serde(default)]
    pub blocked_by: Option<String>,
}

impl WakeView {
    /// The short answer to "why didn't my agent run?": what a queued wake waits for, else why
    /// the wake ended as it did.
    pub fn why(&self) -> Option<&str> {
        self.blocked_by
            .as_deref()
            .or(self.wake.status_reason.as_deref())
    }
}

/// The answer to a wakeup: the wake, and the run answering it if one exists already (runs are
/// assigned by the dispatcher after the wake is committed).
///
/// Shown as Paperclip shows it, with `wake` and `run` beside: the run's fields at the top level
/// (`id` is the run id) when there is a run; `{"status": "skipped", "reason": "wakeup_skipped",
/// ...}` when the wake will not become a run of its own (skipped, suppressed, coalesced,
/// cancelled); otherwise `status` `queued` or `deferred` with the wake standing in for
/// Paperclip's queued run: `id` and `wakeId` are the wake's id. Read back from `wake` and `run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakeupResult {
    pub wake: WakeView,
    pub run: Option<RunView>,
}

impl Serialize for WakeupResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let wake = &self.wake.wake;
        let mut top = match &self.run {
            Some(run) => serde_json::to_value(run).map_err(S::Error::custom)?,
            None => {
                let status = match wake.status {
                    WakeStatus::Queued | WakeStatus::Claimed => "queued",
                    WakeStatus::Deferred => "deferred",
                    _ => "skipped",
                };
                let mut top = serde_json::json!({
                    "status": status,
                    "wakeId": wake.id,
                    "agentId": wake.agent_id,
                    "companyId": wake.company_id,
                    "issueId": wake.issue_id,
                    "wakeReason": wake.reason,
                    "statusReason": wake.status_reason,
                    "executionRunId": wake.waiting_on_run,
                });
                if status == "skipped" {
                    top["reason"] = "wakeup_skipped".into();
                } else {
                    // Paperclip's queued run is Roost's queued wake: until the dispatcher
                    // claims it, the wake stands in for the run (`GET /api/wakes/{id}`).
                    top["id"] = wake.id.clone().into();
                }
                top
            }
        };
        if let Some(fields) = top.as_object_mut() {
            let wake = serde_json::to_value(&self.wake).map_err(S::Error::custom)?;
            let run = serde_json::to_value(&self.run).map_err(S::Error::custom)?;
            fields.insert("wake".into(), wake);
            fields.insert("run".into(), run);
        }
        top.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for WakeupResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The two fields the result is read back from; the top level repeats them.
        #[derive(Deserialize)]
        struct Beside {
            wake: WakeView,
            #[serde(default)]
            run: Option<RunView>,
        }
        let Beside { wake, run } = Beside::deserialize(deserializer)?;
        Ok(WakeupResult { wake, run })
    }
}

/// A worker and how many live runs it holds now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerView {
    #[serde(flatten)]
    pub worker: Worker,
    pub live_runs: usize,
    /// Milliseconds left on its lease, as the leader holds it; `null` from other nodes.
    #[serde(default)]
    pub lease_expires_in_ms: Option<u64>,
}
