//! Leader duties over issues, each a sweep at its own period that proposes one command per
//! issue due at the clock's now: the escalation of blocked issues (`EscalateIssue`, for
//! `roost_core::org::escalations_due`, which reads only the blocked issues' index), the
//! recovery of stranded ones (`RecoverIssue`, for `roost_core::recovery::recoveries_due`) and
//! the firing of due monitors (`TriggerIssueMonitor`, for `roost_core::monitor::monitors_due`,
//! which reads only the scheduled monitors' index).
//! Apply decides again (`roost-core/src/rules/org.rs`, `rules/recovery.rs`, `rules/monitor.rs`):
//! a second tick or a second leader across a failover does nothing twice, and a new leader's
//! first round finds whatever is still due.

use std::sync::Arc;
use std::time::Duration;

use roost_core::{Actor, Command, Envelope, State, Timestamp};
use tracing::debug;

use super::Clock;
use crate::api::{new_id, Api};

#[derive(Clone)]
pub struct IssueSweep {
    clock: Arc<Clock>,
    period: Duration,
    due: fn(&State, Timestamp) -> Vec<Command>,
    what: &'static str,
}

impl IssueSweep {
    /// Blocked issues past their company's `escalateBlockedAfterSecs`.
    pub fn escalations(clock: Clock) -> Self {
        IssueSweep {
            clock: Arc::new(clock),
            period: Duration::from_millis(500),
            due: |s, now| {
                roost_core::org::escalations_due(s, now)
                    .into_iter()
                    .map(|issue_id| Command::EscalateIssue { issue_id })
                    .collect()
            },
            what: "escalation",
        }
    }

    /// Stranded issues: their quiet times are a minute and more, so a few seconds' period
    /// costs nothing in promptness and keeps the scan of open assigned issues rare.
    pub fn recoveries(clock: Clock) -> Self {
        IssueSweep {
            clock: Arc::new(clock),
            period: Duration::from_secs(5),
            due: |s, now| {
                roost_core::recovery::recoveries_due(s, now)
                    .into_iter()
                    .map(|issue_id| Command::RecoverIssue {
                        issue_id,
                        wake_id: new_id(),
                    })
                    .collect()
            },
            what: "recovery",
        }
    }

    /// Scheduled monitors come due at a time an agent chose, often minutes ahead: a second's
    /// period is prompt enough, and the index holds only scheduled ones.
    pub fn monitors(clock: Clock) -> Self {
        IssueSweep {
            clock: Arc::new(clock),
            period: Duration::from_secs(1),
            due: |s, now| {
                roost_core::monitor::monitors_due(s, now)
                    .into_iter()
                    .map(|issue_id| Command::TriggerIssueMonitor {
                        issue_id,
                        id: new_id(),
                    })
                    .collect()
            },
            what: "monitor",
        }
    }

    pub(crate) async fn run(&self, api: Api) {
        loop {
            let now = self.clock.now();
            let due = api.reader().read(|s| (self.due)(s, now));
            propose_each(&api, now, due, self.what).await;
            tokio::time::sleep(self.period).await;
        }
    }
}

/// Proposes each of a leader duty's `commands`, stamped `now`, as the system; a refusal (apply
/// decided again and found nothing due) or a failed write is only logged: the next round
/// finds whatever is still due.
pub(crate) async fn propose_each(api: &Api, now: Timestamp, commands: Vec<Command>, what: &str) {
    for command in commands {
        let envelope = Envelope {
            request_id: None,
            at: now,
            actor: Actor::system(),
            command,
            idempotency_key: None,
        };
        match api.node().write(envelope).await {
            Ok(w) => {
                if let Err(e) = w.result {
                    debug!(what, error = %e, "leader duty refused");
                }
            }
            // A duty too big for the log is retried every sweep and never fits: say so.
            Err(e @ roost_raft::Error::TooLarge { .. }) => {
                tracing::warn!(what, error = %e, "leader duty too large to propose")
            }
            Err(e) => debug!(what, error = %e, "leader duty not proposed"),
        }
    }
}
