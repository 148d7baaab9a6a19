//! The heartbeat timer: on the leader, wakes each agent whose interval has passed since its
//! last heartbeat. The base of the interval is committed state, so a new leader continues
//! where the old one stopped, and a tick is applied at most once per interval.

use std::sync::Arc;
use std::time::Duration;

use roost_core::scheduling::next_tick;
use roost_core::{Actor, Command, Envelope, Timestamp};
use tracing::debug;

use crate::api::{new_id, Api};

/// Wall-clock time as the scheduler sees it: a fixed start plus elapsed tokio time, so tests
/// can run it on a paused tokio clock.
#[derive(Clone)]
pub struct Clock {
    start_wall: Timestamp,
    start: tokio::time::Instant,
}

impl Clock {
    pub fn starting_at(start_wall: Timestamp) -> Clock {
        Clock { start_wall, start: tokio::time::Instant::now() }
    }

    pub fn system() -> Clock {
        Clock::starting_at(crate::api::now())
    }

    pub fn now(&self) -> Timestamp {
        Timestamp(self.start_wall.0 + self.start.elapsed().as_millis() as i64)
    }
}

/// Proposes `TimerTick`s for due agents.
#[derive(Clone)]
pub struct Scheduler {
    clock: Arc<Clock>,
    period: Duration,
}

impl Scheduler {
    pub fn new(clock: Clock) -> Self {
        Scheduler { clock: Arc::new(clock), period: Duration::from_millis(250) }
    }

    /// The ticks due at `now`, as commands (pure: the state decides).
    pub fn due(state: &roost_core::State, now: Timestamp) -> Vec<Command> {
        state
            .agents
            .values()
            .filter(|a| next_tick(a).is_some_and(|due| due <= now))
            .map(|a| Command::TimerTick { agent_id: a.id.clone(), wake_id: new_id() })
            .collect()
    }

    pub(crate) async fn run(&self, api: Api) {
        loop {
            let now = self.clock.now();
            let due = api.reader().read(|s| Self::due(s, now));
            for command in due {
                let envelope = Envelope { at: now, actor: Actor::system(), command, idempotency_key: None };
                if let Err(e) = api.node().write(envelope).await {
                    debug!(error = %e, "timer tick not proposed");
                }
            }
            tokio::time::sleep(self.period).await;
        }
    }
}
