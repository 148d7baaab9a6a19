//! What the API shows of agents and runs, and who may read a run's log: the one place every
//! REST route and gRPC method goes through, so no front end can show more than another.
//!
//! - An agent's `adapterConfig` is shown with every secret `env` value redacted, to everyone,
//!   the agent itself and administrators included; another agent sees no configuration at all.
//! - A run never shows `tokenHashes`, the hashes of its run-scoped keys. The entity's serde is
//!   also the storage and Raft format, so the field is dropped here rather than in `Run`.
//! - A run's log, and the log tail a run's details carry, are for administrators, the run's own
//!   agent, and agents an operator granted `permissions.readCompanyRunLogs`.

pub use roost_core::views::RunView;
use roost_core::{Agent, Run, State};

use crate::auth::Caller;
use crate::error::ApiError;

/// `run` as `caller` may see it.
pub(crate) fn run_view(caller: &Caller, state: &State, mut run: Run) -> RunView {
    if !may_read_run_log(caller, state, &run) {
        run.log_tail = String::new();
    }
    RunView::new(run)
}

/// Whether `caller` may read `run`'s log. Company scoping is checked before this.
fn may_read_run_log(caller: &Caller, state: &State, run: &Run) -> bool {
    match caller.agent_id() {
        None => caller.is_admin(),
        Some(me) => {
            me == run.agent_id
                || state
                    .agents
                    .get(me)
                    .is_some_and(|a| a.permissions.read_company_run_logs)
        }
    }
}

/// Refuses another agent's run log with what to ask the operator for. A run of another company
/// never gets here: it is "not found" (`Caller::check_company`).
pub(crate) fn check_run_log_access(
    caller: &Caller,
    state: &State,
    run: &Run,
) -> Result<(), ApiError> {
    if may_read_run_log(caller, state, run) {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "run {} belongs to another agent, and an agent reads only its own runs' logs; \
         ask an operator to grant this agent permissions.readCompanyRunLogs",
        run.id
    )))
}

/// `agent` as `caller` may see it: secrets redacted for everyone, and a peer's configuration
/// left out entirely (it may hold credentials in fields not marked secret).
pub(crate) fn agent_view(caller: &Caller, mut agent: Agent) -> Agent {
    agent.adapter_config = if caller.agent_id().is_some_and(|me| me != agent.id) {
        serde_json::json!({})
    } else {
        roost_core::adapter_config::redact(&agent.adapter_config)
    };
    agent
}
