//! What the API shows of agents and runs, and who may read a run's log: the one place every
//! REST route and gRPC method goes through, so no front end can show more than another.
//!
//! - An agent's `adapterConfig` is shown with every secret `env` value redacted, to everyone,
//!   the agent itself and administrators included; another agent sees no configuration at all.
//! - A run never shows `tokenHashes`, the hashes of its run-scoped keys. The entity's serde is
//!   also the storage and Raft format, so the field is dropped here rather than in `Run`.
//! - A run's log, and the log tail a run's details carry, are for administrators, the run's own
//!   agent, and agents an operator granted `permissions.readCompanyRunLogs`.

use roost_core::{Agent, Run, State};
use serde::{Serialize, Serializer};

use crate::auth::Caller;
use crate::error::ApiError;

/// A run as the API shows it: without its key hashes (and without its log tail for a reader
/// who may not read its log).
#[derive(Clone, Debug)]
pub struct RunView(Run);

impl RunView {
    /// Strips what no API shows to anyone.
    fn new(mut run: Run) -> RunView {
        run.token_hashes = Vec::new();
        RunView(run)
    }

    pub fn into_run(self) -> Run {
        self.0
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

/// Paperclip's `invocationSource` (`assignment`, `on_demand`, `timer`, `automation`) and
/// `triggerDetail` (`manual`, `system`) of a run, from the wake it answers; the wake's own
/// reason stays in `wakeReason`. A run started by hand keeps its stored source.
fn paperclip_source(run: &Run) -> (String, &'static str) {
    use roost_core::WakeReason;
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
