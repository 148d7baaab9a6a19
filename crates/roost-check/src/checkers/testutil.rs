//! Builders for hand-made histories in the checkers' tests.

use crate::history::{Action, OkResult, Op, OpId, Outcome};

pub fn op(id: OpId, call_ns: i64, return_ns: i64, action: Action, outcome: Outcome) -> Op {
    Op {
        id,
        process: id,
        call_ns,
        return_ns,
        action,
        outcome,
    }
}

pub fn ok() -> Outcome {
    Outcome::Ok(OkResult::default())
}

pub fn token(token: u64) -> Outcome {
    Outcome::Ok(OkResult {
        token: Some(token),
        ..OkResult::default()
    })
}

pub fn unknown() -> Outcome {
    Outcome::Unknown {
        reason: Some("timeout".into()),
    }
}

pub fn failed() -> Outcome {
    Outcome::Failed {
        status: Some(409),
        error: Some("conflict".into()),
    }
}

/// A checkout of `issue` by run `run` (its agent is `agent-<run>`).
pub fn checkout(id: OpId, issue: &str, run: &str, call: i64, ret: i64, outcome: Outcome) -> Op {
    let action = Action::Checkout {
        issue_id: issue.into(),
        agent_id: format!("agent-{run}"),
        run_id: run.into(),
    };
    op(id, call, ret, action, outcome)
}

pub fn release(id: OpId, issue: &str, run: &str, call: i64, ret: i64, outcome: Outcome) -> Op {
    let action = Action::Release {
        issue_id: issue.into(),
        run_id: Some(run.into()),
    };
    op(id, call, ret, action, outcome)
}

pub fn run_end(id: OpId, run: &str, call: i64, ret: i64, outcome: Outcome) -> Op {
    op(
        id,
        call,
        ret,
        Action::RunEnd { run_id: run.into() },
        outcome,
    )
}
