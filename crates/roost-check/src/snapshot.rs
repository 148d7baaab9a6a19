//! A replica's final state, reduced to what the checkers read. The harness fills one per node
//! from the REST API after the heal (or builds it directly); every map field may be omitted in
//! JSON and defaults to empty.
//!
//! ```json
//! {"node":"n1","applied_index":812,"state_hash":"9f2c...",
//!  "issues":{"i1":{"checkout":{"agent_id":"a1","run_id":"r7","token":790},"comment_ids":["c1"]}},
//!  "wakes":{"w1":{"status":"claimed","run_id":"r7"}},
//!  "runs":{"r7":{"agent_id":"a1","company_id":"co","status":"running","reserved_cents":40}},
//!  "budget_policies":{"p1":{"scope":"agent:a1","amount_cents":500,"hard_stop":true}},
//!  "spent_cents":{"agent:a1":120},
//!  "cost_event_ids":["ce1"]}
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// One replica's state at `applied_index`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSnapshot {
    /// The node's id or name, as the harness calls it.
    pub node: String,
    /// The last log index the node applied; `state_hash` belongs to it.
    pub applied_index: u64,
    /// `State::hash()` at `applied_index`.
    pub state_hash: String,
    /// Issue id → its checkout and comments.
    #[serde(default)]
    pub issues: BTreeMap<String, IssueSnapshot>,
    /// Wake id → where it ended up.
    #[serde(default)]
    pub wakes: BTreeMap<String, WakeSnapshot>,
    /// Run id → its status and reservation.
    #[serde(default)]
    pub runs: BTreeMap<String, RunSnapshot>,
    /// Budget policy id → its scope and limit.
    #[serde(default)]
    pub budget_policies: BTreeMap<String, PolicySnapshot>,
    /// Scope key (`agent:<id>`, `company:<id>`) → cents spent in the policy's current window.
    #[serde(default)]
    pub spent_cents: BTreeMap<String, u64>,
    /// Ids of every cost event recorded.
    #[serde(default)]
    pub cost_event_ids: BTreeSet<String>,
    /// Agent id → its memory log entries as the replica keeps them.
    #[serde(default)]
    pub memory: BTreeMap<String, MemorySnapshot>,
    /// Routine id → the runs the replica lists for it.
    #[serde(default)]
    pub routines: BTreeMap<String, RoutineSnapshot>,
}

/// A routine's runs on one replica, as its API lists them (newest first, at most a page).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineSnapshot {
    pub runs: Vec<RoutineRunSnapshot>,
    /// The list holds every run the routine made: false when it filled the API's page, so
    /// older runs may be missing from it.
    #[serde(default)]
    pub complete: bool,
}

/// One run of a routine (Paperclip's `routine_runs` row, the fields the checker reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineRunSnapshot {
    pub id: String,
    /// `schedule`, `manual`, `api` or `webhook`.
    pub source: String,
    /// `received`, `coalesced`, `skipped`, `issue_created`, `completed` or `failed`.
    pub status: String,
    /// A schedule firing's nominal instant, Unix milliseconds.
    #[serde(default)]
    pub scheduled_for_ms: Option<i64>,
    /// When the firing was applied (its command's time), Unix milliseconds.
    #[serde(default)]
    pub triggered_at_ms: Option<i64>,
    /// Whether the firing led anywhere: an issue, a wake, or the run it was coalesced into.
    #[serde(default)]
    pub linked: bool,
}

impl RoutineRunSnapshot {
    /// A schedule run that fired nothing: the record of missed instants dropped past the
    /// catch-up cap, from its `scheduled_for_ms` up to the next instant fired
    /// (roost-core/src/rules/routine.rs, `fire`). A firing skipped for another reason (its
    /// wake skipped, the routine busy) links what it skipped for.
    pub fn is_drop_record(&self) -> bool {
        self.source == "schedule" && self.status == "skipped" && !self.linked
    }
}

/// An agent's memory log on one replica: the entries kept, and below which sequence number
/// entries may have been dropped for newer ones (0: the agent is under its cap, none dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    pub entry_ids: BTreeSet<String>,
    #[serde(default)]
    pub kept_from_seq: u64,
}

impl ReplicaSnapshot {
    /// Parses one snapshot from JSON.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        serde_json::from_str(text).map_err(Error::Snapshot)
    }

    /// Cents held by live runs in a scope (`agent:<id>` or `company:<id>`; other scopes hold
    /// none).
    pub fn reserved_cents(&self, scope: &str) -> u64 {
        let Some((kind, id)) = scope.split_once(':') else {
            return 0;
        };
        self.runs
            .values()
            .filter(|run| run.status.is_live())
            .filter(|run| match kind {
                "agent" => run.agent_id == id,
                "company" => run.company_id == id,
                _ => false,
            })
            .map(|run| run.reserved_cents)
            .sum()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueSnapshot {
    /// The current holder, if checked out.
    #[serde(default)]
    pub checkout: Option<CheckoutSnapshot>,
    /// Every comment on the issue, in order.
    #[serde(default)]
    pub comment_ids: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutSnapshot {
    pub agent_id: String,
    pub run_id: String,
    pub token: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeSnapshot {
    pub status: WakeStatus,
    /// The run that answered it (status `claimed`).
    #[serde(default)]
    pub run_id: Option<String>,
    /// The wake it was merged into (status `coalesced`).
    #[serde(default)]
    pub coalesced_into: Option<String>,
}

/// Where a wake is (the strings of roost-core's `WakeStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeStatus {
    Queued,
    Deferred,
    Claimed,
    Coalesced,
    Skipped,
    Suppressed,
    Cancelled,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSnapshot {
    pub agent_id: String,
    pub company_id: String,
    pub status: RunStatus,
    /// Cents held against budgets while live.
    #[serde(default)]
    pub reserved_cents: u64,
}

/// Lifecycle of a run (the strings of roost-core's `RunStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Assigned,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Lost,
}

impl RunStatus {
    /// Queued, assigned or running: it may hold checkouts and reservations.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            RunStatus::Queued | RunStatus::Assigned | RunStatus::Running
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySnapshot {
    /// Scope key: `agent:<id>` or `company:<id>`.
    pub scope: String,
    /// The limit, in cents.
    pub amount_cents: u64,
    /// A hard limit (claims refused, scope paused) rather than a warning only.
    pub hard_stop: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"node":"n1","applied_index":812,"state_hash":"9f2c",
     "issues":{"i1":{"checkout":{"agent_id":"a1","run_id":"r7","token":790},"comment_ids":["c1"]}},
     "wakes":{"w1":{"status":"claimed","run_id":"r7"}},
     "runs":{"r7":{"agent_id":"a1","company_id":"co","status":"running","reserved_cents":40},
             "r8":{"agent_id":"a2","company_id":"co","status":"assigned","reserved_cents":15},
             "r6":{"agent_id":"a1","company_id":"co","status":"succeeded","reserved_cents":99}},
     "budget_policies":{"p1":{"scope":"agent:a1","amount_cents":500,"hard_stop":true}},
     "spent_cents":{"agent:a1":120},
     "cost_event_ids":["ce1"]}"#;

    #[test]
    fn parses_the_documented_example() {
        let snapshot = ReplicaSnapshot::from_json(EXAMPLE).unwrap();
        assert_eq!(snapshot.applied_index, 812);
        assert_eq!(snapshot.issues["i1"].checkout.as_ref().unwrap().token, 790);
        assert_eq!(snapshot.wakes["w1"].status, WakeStatus::Claimed);
        assert_eq!(snapshot.runs["r7"].status, RunStatus::Running);
        assert!(snapshot.cost_event_ids.contains("ce1"));
    }

    #[test]
    fn maps_default_to_empty() {
        let snapshot =
            ReplicaSnapshot::from_json(r#"{"node":"n2","applied_index":0,"state_hash":""}"#)
                .unwrap();
        assert!(snapshot.issues.is_empty() && snapshot.wakes.is_empty());
    }

    #[test]
    fn rejects_an_unknown_status() {
        let bad = EXAMPLE.replace("\"claimed\"", "\"exploded\"");
        assert!(matches!(
            ReplicaSnapshot::from_json(&bad),
            Err(Error::Snapshot(_))
        ));
    }

    #[test]
    fn reserved_sums_live_runs_in_the_scope() {
        let snapshot = ReplicaSnapshot::from_json(EXAMPLE).unwrap();
        assert_eq!(
            snapshot.reserved_cents("agent:a1"),
            40,
            "ended r6 holds none"
        );
        assert_eq!(snapshot.reserved_cents("company:co"), 55);
        assert_eq!(snapshot.reserved_cents("project:x"), 0);
        assert_eq!(snapshot.reserved_cents("nonsense"), 0);
    }
}
