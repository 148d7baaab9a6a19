//! For unit tests: commands applied to a bare `State` as the system, as the leader's duties
//! propose them.

use roost_core::{Actor, Command, Envelope, Outcome, State, Timestamp};

/// Applies `command` at `at` as log entry `index + 1`; panics on a refusal.
pub(crate) fn apply(
    state: &mut State,
    index: &mut u64,
    at: Timestamp,
    command: Command,
) -> Outcome {
    *index += 1;
    let env = Envelope {
        request_id: None,
        at,
        actor: Actor::system(),
        command,
        idempotency_key: None,
    };
    match state.apply(*index, &env).outcome {
        Ok(o) => o,
        Err(e) => panic!("refused: {e}"),
    }
}
