//! The agent timer (Paperclip's heartbeat timer): on the leader, wakes each agent whose
//! interval has passed since its last heartbeat. The base of the interval is committed state, so a new leader continues
//! where the old one stopped, and a tick is applied at most once per interval.

use std::sync::Arc;
use std::time::Duration;

use roost_core::scheduling::next_tick;
use roost_core::{Command, Timestamp};

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
        Clock {
            start_wall,
            start: tokio::time::Instant::now(),
        }
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
pub struct AgentTimer {
    clock: Arc<Clock>,
    period: Duration,
}

impl AgentTimer {
    pub fn new(clock: Clock) -> Self {
        AgentTimer {
            clock: Arc::new(clock),
            period: Duration::from_millis(250),
        }
    }

    /// The ticks due at `now`, as commands (pure: the state decides).
    pub fn due(state: &roost_core::State, now: Timestamp) -> Vec<Command> {
        state
            .agents
            .values()
            .filter(|a| next_tick(a).is_some_and(|due| due <= now))
            .map(|a| Command::TimerTick {
                agent_id: a.id.clone(),
                wake_id: new_id(),
            })
            .collect()
    }

    pub(crate) async fn run(&self, api: Api) {
        loop {
            let now = self.clock.now();
            let due = api.reader().read(|s| Self::due(s, now));
            super::issue_sweep::propose_each(&api, now, due, "timer tick").await;
            tokio::time::sleep(self.period).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use roost_core::{AdapterType, HeartbeatPolicy, State, WakeReason, WakeStatus};

    use super::*;
    use crate::test_state::apply;

    /// On a paused tokio clock: an idle agent with a 60 s timer, for one simulated hour,
    /// starts no run, and each of its 60 ticks is recorded as skipped for being idle.
    #[tokio::test(start_paused = true)]
    async fn an_idle_agent_with_a_60s_timer_for_an_hour_starts_no_run() {
        let start = Timestamp(1_800_000_000_000);
        let clock = Clock::starting_at(start);
        let (mut state, mut index) = (State::new(), 0);
        let company = Command::CreateCompany {
            id: "c".into(),
            name: "C".into(),
            issue_prefix: "C".into(),
        };
        apply(&mut state, &mut index, start, company);
        let policy = HeartbeatPolicy {
            enabled: true,
            interval_sec: 60,
            skip_when_idle: true,
            ..Default::default()
        };
        let agent = Command::CreateAgent {
            id: "a".into(),
            company_id: "c".into(),
            name: "idler".into(),
            role: "engineer".into(),
            title: None,
            adapter_type: AdapterType::Process,
            adapter_config: serde_json::json!({}),
            heartbeat: policy,
            placement_labels: Default::default(),
        };
        apply(&mut state, &mut index, start, agent);
        for _ in 0..3600 {
            tokio::time::advance(Duration::from_secs(1)).await;
            let now = clock.now();
            for command in AgentTimer::due(&state, now) {
                apply(&mut state, &mut index, now, command);
            }
        }
        let ticks: Vec<_> = state
            .wakes
            .values()
            .filter(|w| w.reason == WakeReason::HeartbeatTimer)
            .collect();
        assert_eq!(ticks.len(), 60, "one tick a minute for an hour");
        assert!(
            ticks
                .iter()
                .all(|w| w.status == WakeStatus::Skipped
                    && w.status_reason.as_deref() == Some("idle"))
        );
        assert!(state.runs.is_empty(), "an idle agent costs no run");
    }
}
