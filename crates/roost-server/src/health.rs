//! `/readyz`: whether this node can serve, check by check, so an operator (or a load
//! balancer's log) sees which one failed.
//!
//! Knowing a leader is not enough: a node whose Raft core has stopped still remembers the
//! leader it last saw, and one whose leader duties were given up on (`supervise.rs`) answers
//! reads but dispatches nothing. Nor is a running core: a node restarted behind the others, or
//! cut off from its quorum, would serve reads it cannot make linearizable. `caught_up` passes a
//! read barrier (ReadIndex through the leader, then apply up to it) within
//! [`CAUGHT_UP_WITHIN`].

use std::time::Duration;

use roost_raft::RaftNode;
use serde::Serialize;

use crate::supervise::Supervisor;

/// The answer of `/readyz` (`200` when `ready`, else `503`).
#[derive(Clone, Debug, Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// The names of the checks that failed.
    pub failed: Vec<&'static str>,
    pub checks: Vec<Check>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// `raft_core`, `leader`, `caught_up` or `tasks`.
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

fn check(name: &'static str, result: Result<String, String>) -> Check {
    match result {
        Ok(detail) => Check {
            name,
            ok: true,
            detail,
        },
        Err(detail) => Check {
            name,
            ok: false,
            detail,
        },
    }
}

/// How long a ready node may take to pass the read barrier.
pub const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(1);

/// Whether this node has applied everything committed when the check began.
async fn caught_up(node: &RaftNode) -> Result<String, String> {
    match tokio::time::timeout(CAUGHT_UP_WITHIN, node.linearizable_read()).await {
        Ok(Ok(())) => Ok(format!(
            "applied index {} reflects every committed write",
            node.reader().applied_index()
        )),
        Ok(Err(e)) => Err(format!("cannot confirm it has every committed write: {e}")),
        Err(_) => Err(format!(
            "has not applied every committed write within {CAUGHT_UP_WITHIN:?} (catching up, \
             or cut off from the leader's quorum)"
        )),
    }
}

pub(crate) async fn readiness(node: &RaftNode, tasks: &Supervisor) -> Readiness {
    let metrics = node.raft().metrics();
    // The core owns the metrics' sender: a core that ended without reporting (it panicked)
    // shows as a closed channel.
    let core_gone = metrics.has_changed().is_err();
    let (core, leader) = {
        let m = metrics.borrow();
        let core = match &m.running_state {
            Err(fatal) => Err(format!("the Raft core has stopped: {fatal}")),
            Ok(()) if core_gone => Err("the Raft core has stopped".to_string()),
            Ok(()) => Ok("running".to_string()),
        };
        let leader = match m.current_leader {
            Some(id) => Ok(format!("node {id}")),
            None => Err("no leader is known".to_string()),
        };
        (core, leader)
    };
    let tasks = match tasks.failure() {
        Some(failure) => Err(format!("given up on {failure}")),
        None => Ok("running".to_string()),
    };
    // Only asked of a running core that knows a leader: otherwise it would wait for nothing.
    let caught_up = match (&core, &leader) {
        (Ok(_), Ok(_)) => caught_up(node).await,
        _ => Err("not checked: no running core with a leader".to_string()),
    };
    let checks = vec![
        check("raft_core", core),
        check("leader", leader),
        check("caught_up", caught_up),
        check("tasks", tasks),
    ];
    let failed: Vec<&'static str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
    Readiness {
        ready: failed.is_empty(),
        failed,
        checks,
    }
}
