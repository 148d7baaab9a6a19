//! Runs as the API shows them, their logs' pages and the audit chain's verdict.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::entity::{Run, WakeReason};

/// A run as the API shows it: without the hashes of its run-scoped keys (the entity's serde is
/// also the storage and Raft format, so the field is dropped here rather than in `Run`), and
/// with Paperclip's `invocationSource` and `triggerDetail`. Who may see its log tail is the
/// server's call (`roost-server/src/api/views.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunView(Run);

impl RunView {
    /// Strips what no API shows to anyone.
    pub fn new(mut run: Run) -> RunView {
        run.token_hashes = Vec::new();
        RunView(run)
    }

    pub fn into_run(self) -> Run {
        self.0
    }
}

impl std::ops::Deref for RunView {
    type Target = Run;

    fn deref(&self) -> &Run {
        &self.0
    }
}

impl Serialize for RunView {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut value = serde_json::to_value(&self.0).map_err(S::Error::custom)?;
        if let Some(fields) = value.as_object_mut() {
            fields.remove("tokenHashes");
            let (source, detail) = paperclip_source(&self.0);
            fields.insert("invocationSource".into(), source.into());
            fields.insert("triggerDetail".into(), detail.into());
        }
        value.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RunView {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Run::deserialize(deserializer).map(RunView::new)
    }
}

/// Paperclip's `invocationSource` (`assignment`, `on_demand`, `timer`, `automation`) and
/// `triggerDetail` (`manual`, `system`) of a run, from the wake it answers; the wake's own
/// reason stays in `wakeReason`. A run started by hand keeps its stored source.
fn paperclip_source(run: &Run) -> (String, &'static str) {
    let Some(reason) = run.wake_reason else {
        let detail = if run.invocation_source == "on_demand" {
            "manual"
        } else {
            "system"
        };
        return (run.invocation_source.clone(), detail);
    };
    match reason {
        WakeReason::OnDemand => ("on_demand".into(), "manual"),
        WakeReason::IssueAssigned => ("assignment".into(), "system"),
        WakeReason::HeartbeatTimer => ("timer".into(), "system"),
        _ => ("automation".into(), "system"),
    }
}

/// One page of a run's log (`GET /api/heartbeat-runs/{id}/log`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    pub run_id: String,
    /// Where the page was read from: `cluster` (Paperclip names its log stores).
    #[serde(default)]
    pub store: String,
    /// Where `content` starts in the log (later than asked when the cluster no longer has the
    /// bytes asked for: the worker keeps the whole log).
    pub offset: u64,
    pub content: String,
    pub next_offset: u64,
    /// The run has ended and this is the last of its log.
    pub ended: bool,
}

/// The verdict of `GET /api/audit/verify` (`roost audit verify`) on the activity hash chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    pub ok: bool,
    pub entries: u64,
    pub head_hash: Option<String>,
    pub broken_at_seq: Option<u64>,
    pub message: String,
}
