//! The routine timer, a leader duty: proposes each schedule trigger's due instant
//! (`roost_core::scheduling::due_firings`, delayed by the routine's stagger) as a `Fire`
//! command, and the alert of a routine that failed too often in a row. Apply decides: a firing
//! is accepted only while it is still the trigger's `nextRunAt`, so two leaders across a
//! failover cannot double one, and a new leader's first round finds whatever is still due.

use std::sync::Arc;
use std::time::Duration;

use roost_core::routine_command::RoutineCommand;
use roost_core::scheduling::{alerts_due, due_firings};
use roost_core::{Actor, Command, Envelope, Outcome};
use tracing::debug;

use super::Clock;
use crate::api::{new_id, Api};

#[derive(Clone)]
pub struct RoutineTimer {
    clock: Arc<Clock>,
    period: Duration,
    stagger_window_ms: u64,
}

impl RoutineTimer {
    pub fn new(clock: Clock, stagger_window_ms: u64) -> Self {
        RoutineTimer {
            clock: Arc::new(clock),
            period: Duration::from_millis(200),
            stagger_window_ms,
        }
    }

    /// The commands due at the clock's now (pure over the state).
    fn due(&self, api: &Api) -> Vec<Command> {
        let now = self.clock.now();
        let window = self.stagger_window_ms;
        let (firings, alerts) = api
            .reader()
            .read(|s| (due_firings(s, now, window), alerts_due(s)));
        let fires = firings.into_iter().map(|f| RoutineCommand::Fire {
            trigger_id: f.trigger_id,
            scheduled_for: f.scheduled_for,
            run_id: new_id(),
            issue_id: new_id(),
            stagger_ms: f.stagger_ms,
        });
        let alerts = alerts.into_iter().map(|routine_id| RoutineCommand::Alert {
            routine_id,
            issue_id: new_id(),
        });
        fires
            .chain(alerts)
            .map(|routine| Command::Routine { routine })
            .collect()
    }

    pub(crate) async fn run(&self, api: Api) {
        loop {
            let mut applied = false;
            for command in self.due(&api) {
                let envelope = Envelope {
                    request_id: None,
                    at: self.clock.now(),
                    actor: Actor::system(),
                    command,
                    idempotency_key: None,
                };
                match api.node().write(envelope).await {
                    Ok(w) => match w.result {
                        Ok(Outcome::Routine(_)) => applied = true,
                        Ok(_) => {}
                        Err(e) => debug!(error = %e, "routine firing refused"),
                    },
                    Err(e @ roost_raft::Error::TooLarge { .. }) => {
                        tracing::warn!(error = %e, "routine firing too large to propose")
                    }
                    Err(e) => debug!(error = %e, "routine firing not proposed"),
                }
            }
            // After a firing, look again at once: catch-up firings of one trigger follow one
            // another, each proposed after the last moved its `nextRunAt`.
            if !applied {
                tokio::time::sleep(self.period).await;
            }
        }
    }
}
