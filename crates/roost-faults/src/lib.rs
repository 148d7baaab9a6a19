//! The fault-injection suite: real `roost server` processes,
//! each in its own network namespace, and a `roost run-worker`, under a seeded schedule of
//! faults while clients check out, comment, end runs, wake an agent the worker runs and report
//! its costs against a hard budget through random nodes, and a routine fires every 2 s; then
//! the heal, and the checkers of `roost-check` over the recorded history, budget samples and
//! every replica's final state.
//!
//! Used by the `roost-faults` binary (`roost-faults run <scenario> --seed N`) and by the
//! `faults` test of the `roost` crate. Needs root, iproute2 (network namespaces) and nftables (partitions). The
//! history, the snapshots and every node's config and log are kept in the scenario's
//! directory (`<root>/<scenario>-<seed>/`).

mod membership;
mod observe;
mod routines;
mod scenario;
mod schedule;
mod wakes_costs;
mod worker_cut;
mod workload;

use std::path::PathBuf;

pub use scenario::{run, Report};

/// The scenarios, each a fault schedule over the same workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    LeaderPartition,
    FollowerIsolation,
    LeaderKillLoop,
    LeaderPause,
    WorkerCutOff,
    MixedFaults,
    MembershipChange,
    MinorityKill,
}

impl Scenario {
    pub const ALL: [Scenario; 8] = [
        Scenario::LeaderPartition,
        Scenario::FollowerIsolation,
        Scenario::LeaderKillLoop,
        Scenario::LeaderPause,
        Scenario::WorkerCutOff,
        Scenario::MixedFaults,
        Scenario::MembershipChange,
        Scenario::MinorityKill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::LeaderPartition => "leader_partition",
            Scenario::FollowerIsolation => "follower_isolation",
            Scenario::LeaderKillLoop => "leader_kill_loop",
            Scenario::LeaderPause => "leader_pause",
            Scenario::WorkerCutOff => "worker_cut_off",
            Scenario::MixedFaults => "mixed_faults",
            Scenario::MembershipChange => "membership_change",
            Scenario::MinorityKill => "minority_kill",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Scenario::LeaderPartition => "the leader partitioned from both followers, repeatedly",
            Scenario::FollowerIsolation => "one follower cut off from the others, repeatedly",
            Scenario::LeaderKillLoop => "SIGKILL of the leader, restarted seconds later",
            Scenario::LeaderPause => "SIGSTOP of the leader past the election timeout",
            Scenario::WorkerCutOff => "the worker cut off from every node mid-run",
            Scenario::MixedFaults => "kills, pauses, bridges, flapping links under delay/loss",
            Scenario::MembershipChange => {
                "a node added as learner, promoted, a voter (often the leader) removed"
            }
            Scenario::MinorityKill => "SIGKILL of two of five nodes at once, then restart",
        }
    }

    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Distinct per scenario: the namespaces, bridge and subnet carry it.
    fn tag(self) -> u8 {
        41 + Scenario::ALL.iter().position(|s| *s == self).unwrap_or(0) as u8
    }

    /// The voters the cluster starts with.
    fn nodes(self) -> u64 {
        match self {
            Scenario::MinorityKill => 5,
            _ => 3,
        }
    }
}

/// One run of one scenario.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub scenario: Scenario,
    pub seed: u64,
    /// How long the faults and the workload last.
    pub secs: u64,
    /// The `roost` binary the nodes and the worker run.
    pub roost_bin: PathBuf,
    /// The scenario's directory goes under it: `<root>/<scenario>-<seed>/`.
    pub root: PathBuf,
}

impl RunOptions {
    /// The options of the `faults` test: `ROOST_FAULT_SEED` (default: from the clock),
    /// `ROOST_FAULT_SECS` (default 60) and `ROOST_SOAK=1` (600 s). A variable that is set but
    /// not a number (an empty one counts as unset) is an error, not a silent default.
    pub fn from_env(
        scenario: Scenario,
        roost_bin: PathBuf,
        root: PathBuf,
    ) -> anyhow::Result<RunOptions> {
        let seed = env_number("ROOST_FAULT_SEED")?.unwrap_or_else(clock_seed);
        let secs = env_number("ROOST_FAULT_SECS")?.unwrap_or(60);
        anyhow::ensure!(secs > 0, "ROOST_FAULT_SECS must be at least 1");
        let soak = std::env::var("ROOST_SOAK").is_ok_and(|v| v == "1");
        Ok(RunOptions {
            scenario,
            seed,
            secs: if soak { 600 } else { secs },
            roost_bin,
            root,
        })
    }

    /// The scenario's directory.
    pub fn dir(&self) -> PathBuf {
        self.root
            .join(format!("{}-{}", self.scenario.name(), self.seed))
    }
}

/// The number in environment variable `name`: `None` when unset or empty, an error when it is
/// not a non-negative integer.
fn env_number(name: &str) -> anyhow::Result<Option<u64>> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            anyhow::bail!("{name}={v:?} is not a number")
        }
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v.trim().parse().map(Some).map_err(|e| {
            anyhow::anyhow!(
                "{name}={v:?} is not a non-negative integer ({e}); unset it for the default"
            )
        }),
    }
}

/// Field `field` of a reply, a string; an error naming the reply when it is missing.
pub(crate) fn text(v: &serde_json::Value, field: &str) -> anyhow::Result<String> {
    v[field]
        .as_str()
        .map(String::from)
        .ok_or_else(|| anyhow::anyhow!("no `{field}` in {v}"))
}

/// A seed from the clock, below a million (short enough to type back).
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1_000_000)
        .unwrap_or(1)
}
