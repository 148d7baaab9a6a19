//! `/readyz`: whether this node can serve, check by check, so an operator (or a load
//! balancer's log) sees which one failed.
//!
//! Knowing a leader is not enough: a node whose Raft core has stopped still remembers the
//! leader it last saw, and one whose leader duties were given up on (`supervise.rs`) answers
//! reads but dispatches nothing.

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
    /// `raft_core`, `leader` or `tasks`.
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

pub(crate) fn readiness(node: &RaftNode, tasks: &Supervisor) -> Readiness {
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
    let checks = vec![
        check("raft_core", core),
        check("leader", leader),
        check("tasks", tasks),
    ];
    let failed: Vec<&'static str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
    Readiness {
        ready: failed.is_empty(),
        failed,
        checks,
    }
}
