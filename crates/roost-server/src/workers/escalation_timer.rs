//! The escalation timer, a leader duty: proposes an `EscalateIssue` for each blocked issue
//! whose escalation is due at the clock's now (`roost_core::org::escalations_due`, which reads
//! only the blocked issues' index). Apply decides again (`roost-core/src/rules/org.rs`): a
//! spell escalates once, so a second tick or a second leader across a failover wakes nobody
//! twice, and a new leader's first round finds whatever is still due.

use std::sync::Arc;
use std::time::Duration;

use roost_core::{Actor, Command, Envelope};
use tracing::debug;

use super::Clock;
use crate::api::Api;

#[derive(Clone)]
pub struct EscalationTimer {
    clock: Arc<Clock>,
    period: Duration,
}

impl EscalationTimer {
    pub fn new(clock: Clock) -> Self {
        EscalationTimer {
            clock: Arc::new(clock),
            period: Duration::from_millis(500),
        }
    }

    pub(crate) async fn run(&self, api: Api) {
        loop {
            let now = self.clock.now();
            let due = api
                .reader()
                .read(|s| roost_core::org::escalations_due(s, now));
            for issue_id in due {
                let envelope = Envelope {
                    request_id: None,
                    at: now,
                    actor: Actor::system(),
                    command: Command::EscalateIssue { issue_id },
                    idempotency_key: None,
                };
                match api.node().write(envelope).await {
                    Ok(w) => {
                        if let Err(e) = w.result {
                            debug!(error = %e, "escalation refused");
                        }
                    }
                    Err(e) => debug!(error = %e, "escalation not proposed"),
                }
            }
            tokio::time::sleep(self.period).await;
        }
    }
}
