//! The loop breaker's settings, the details a wake-loop incident carries, and the window of
//! recent wakes the rules count in (`rules/loop_breaker.rs` decides; this file only holds data).
//!
//! The window is derived from the wakes (rebuilt on load by `State::from_rows`, which puts every
//! wake row), never persisted on its own and bounded by time: only wakes of the last
//! [`MAX_LOOP_WINDOW_MINUTES`] before the newest one are kept.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::entity::{Wake, WakeStatus};
use crate::error::DomainError;
use crate::limits::{MAX_LOOP_WAKES, MAX_LOOP_WINDOW_MINUTES};
use crate::time::Timestamp;

/// A company's or an agent's loop-breaker settings, each absent field inherited (agent, then
/// company, then [`LoopPolicy::DEFAULT`]). `0` turns the check that uses the field off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LoopBreaker {
    /// `false` turns every check off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The window of `issueWakes` and `pingPongWakes`, in minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_minutes: Option<u32>,
    /// Wakes of one issue with no status change of it that trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_wakes: Option<u32>,
    /// Alternations between two agents (A's write wakes B, B's wakes A, ...) that trip;
    /// consecutive wakes in one direction count once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_pong_wakes: Option<u32>,
    /// The window of `runWakes`, in minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_window_minutes: Option<u32>,
    /// Wakes of one agent that would start a run (not merged into a pending one) that trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_wakes: Option<u32>,
}

impl LoopBreaker {
    pub fn is_unset(&self) -> bool {
        *self == LoopBreaker::default()
    }

    /// Bounds of every field (`limits.rs`): windows up to a day, counts up to 10,000.
    pub fn check(&self, field: &str) -> Result<(), DomainError> {
        let windows = [
            ("windowMinutes", self.window_minutes),
            ("runWindowMinutes", self.run_window_minutes),
        ];
        for (name, value) in windows {
            if value.is_some_and(|v| v > MAX_LOOP_WINDOW_MINUTES) {
                return Err(DomainError::invalid(
                    format!("{field}.{name}"),
                    format!("must be 0 (off) to {MAX_LOOP_WINDOW_MINUTES} minutes"),
                ));
            }
        }
        let counts = [
            ("issueWakes", self.issue_wakes),
            ("pingPongWakes", self.ping_pong_wakes),
            ("runWakes", self.run_wakes),
        ];
        for (name, value) in counts {
            if value.is_some_and(|v| v > MAX_LOOP_WAKES) {
                return Err(DomainError::invalid(
                    format!("{field}.{name}"),
                    format!("must be 0 (off) to {MAX_LOOP_WAKES} wakes"),
                ));
            }
        }
        Ok(())
    }
}

/// The thresholds in force for one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopPolicy {
    pub enabled: bool,
    pub window_minutes: u32,
    pub issue_wakes: u32,
    pub ping_pong_wakes: u32,
    pub run_window_minutes: u32,
    pub run_wakes: u32,
}

impl LoopPolicy {
    /// Defaults: an issue woken 20 times in 30 minutes without its status moving, or 10
    /// alternations of two agents in 30 minutes, is churn no real hand-off needs (a review
    /// round trip is a few wakes); 60 run-starting wakes in an hour is one a minute. Only
    /// wakes caused by agents count ([`RecentWake::of`]): timer ticks are bounded by the
    /// agent's interval, and an operator's or a script's wakes are meant.
    pub const DEFAULT: LoopPolicy = LoopPolicy {
        enabled: true,
        window_minutes: 30,
        issue_wakes: 20,
        ping_pong_wakes: 10,
        run_window_minutes: 60,
        run_wakes: 60,
    };

    /// The agent's settings over the company's over the defaults.
    pub fn effective(company: Option<&LoopBreaker>, agent: &LoopBreaker) -> LoopPolicy {
        let d = LoopPolicy::DEFAULT;
        let c = company.copied().unwrap_or_default();
        let pick = |a: Option<u32>, c: Option<u32>, d: u32| a.or(c).unwrap_or(d);
        LoopPolicy {
            enabled: agent.enabled.or(c.enabled).unwrap_or(d.enabled),
            window_minutes: pick(agent.window_minutes, c.window_minutes, d.window_minutes),
            issue_wakes: pick(agent.issue_wakes, c.issue_wakes, d.issue_wakes),
            ping_pong_wakes: pick(agent.ping_pong_wakes, c.ping_pong_wakes, d.ping_pong_wakes),
            run_window_minutes: pick(
                agent.run_window_minutes,
                c.run_window_minutes,
                d.run_window_minutes,
            ),
            run_wakes: pick(agent.run_wakes, c.run_wakes, d.run_wakes),
        }
    }
}

/// Which pattern tripped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopKind {
    /// One issue woken `issueWakes` times with no status change of it.
    IssueChurn,
    /// Two agents waking each other `pingPongWakes` times.
    PingPong,
    /// One agent's run-starting wakes reached `runWakes`.
    RunCap,
}

impl LoopKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LoopKind::IssueChurn => "issue_churn",
            LoopKind::PingPong => "ping_pong",
            LoopKind::RunCap => "run_cap",
        }
    }
}

impl std::fmt::Display for LoopKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a wake-loop incident names: the pattern, its agents, issues and wakes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeLoop {
    pub loop_kind: LoopKind,
    pub agent_ids: Vec<String>,
    pub issue_ids: Vec<String>,
    /// The wakes counted, oldest first (the newest [`MAX_INCIDENT_WAKE_IDS`]).
    pub wake_ids: Vec<String>,
    pub count: u32,
    pub threshold: u32,
    pub window_minutes: u32,
}

/// Wake ids an incident lists at most.
pub const MAX_INCIDENT_WAKE_IDS: usize = 100;

/// A wake as the loop breaker counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentWake {
    pub id: String,
    pub agent_id: String,
    pub issue_id: Option<String>,
    /// The agent whose write caused it (`requestedByType` `agent`).
    pub caused_by_agent: Option<String>,
    pub at: Timestamp,
    pub seq: u64,
    /// Whether it would start a run of its own (`runWakes`).
    pub starts_run: bool,
}

impl RecentWake {
    /// `None` for a wake that never counts: one an operator, a script or the system asked
    /// for (a runaway loop is agents waking agents, or themselves), or one skipped or
    /// suppressed when it was made. Every other status is one a counted wake keeps or reaches
    /// (queued, deferred, claimed, cancelled; coalesced from the start), so the answer is the
    /// same at any later time, and on a replica that rebuilt the window from its rows.
    pub fn of(w: &Wake) -> Option<RecentWake> {
        if w.requested_by_type != "agent"
            || matches!(w.status, WakeStatus::Skipped | WakeStatus::Suppressed)
        {
            return None;
        }
        Some(RecentWake {
            id: w.id.clone(),
            agent_id: w.agent_id.clone(),
            issue_id: w.issue_id.clone(),
            caused_by_agent: (w.requested_by_type == "agent").then(|| w.requested_by_id.clone()),
            at: w.created_at,
            seq: w.seq,
            starts_run: w.status != WakeStatus::Coalesced,
        })
    }
}

/// Counted wakes of the last [`MAX_LOOP_WINDOW_MINUTES`] before the newest, by agent and by
/// issue. A query never looks past that horizon, so a replica that rebuilt the window from
/// its rows (pruned in another order) answers exactly as one that applied every entry.
#[derive(Clone, Debug, Default)]
pub struct RecentWakes {
    entries: BTreeMap<String, RecentWake>,
    by_time: BTreeSet<(Timestamp, String)>,
    by_agent: BTreeSet<(String, Timestamp, String)>,
    by_issue: BTreeSet<(String, Timestamp, String)>,
    latest: Option<Timestamp>,
}

fn minutes_ms(minutes: u32) -> i64 {
    i64::from(minutes).saturating_mul(60_000)
}

impl RecentWakes {
    /// Counts `w` if it is a counted wake not seen before, and drops what fell behind the
    /// horizon.
    pub fn insert(&mut self, w: &Wake) {
        if self.entries.contains_key(&w.id) {
            return;
        }
        let Some(e) = RecentWake::of(w) else {
            return;
        };
        let latest = self.latest.map_or(e.at, |l| l.max(e.at));
        self.latest = Some(latest);
        let horizon = self.horizon(latest);
        if e.at < horizon {
            return;
        }
        self.by_time.insert((e.at, e.id.clone()));
        self.by_agent
            .insert((e.agent_id.clone(), e.at, e.id.clone()));
        if let Some(issue) = &e.issue_id {
            self.by_issue.insert((issue.clone(), e.at, e.id.clone()));
        }
        self.entries.insert(e.id.clone(), e);
        while let Some((at, id)) = self.by_time.first().cloned() {
            if at >= horizon {
                break;
            }
            self.by_time.remove(&(at, id.clone()));
            if let Some(old) = self.entries.remove(&id) {
                self.by_agent.remove(&(old.agent_id, at, id.clone()));
                if let Some(issue) = old.issue_id {
                    self.by_issue.remove(&(issue, at, id));
                }
            }
        }
    }

    fn horizon(&self, latest: Timestamp) -> Timestamp {
        Timestamp(latest.0.saturating_sub(minutes_ms(MAX_LOOP_WINDOW_MINUTES)))
    }

    /// The earliest time a window of `minutes` ending at `now` reaches: `(now - minutes, now]`,
    /// never before the horizon.
    pub fn window_start(&self, now: Timestamp, minutes: u32) -> Timestamp {
        let latest = self.latest.map_or(now, |l| l.max(now));
        let start = Timestamp(now.0.saturating_sub(minutes_ms(minutes)).saturating_add(1));
        start.max(self.horizon(latest))
    }

    /// Counted wakes of `agent_id` from `from` on.
    pub fn of_agent<'a>(
        &'a self,
        agent_id: &str,
        from: Timestamp,
    ) -> impl Iterator<Item = &'a RecentWake> + 'a {
        let lo = (agent_id.to_string(), from, String::new());
        let agent = agent_id.to_string();
        self.by_agent
            .range(lo..)
            .take_while(move |(a, _, _)| *a == agent)
            .filter_map(|(_, _, id)| self.entries.get(id))
    }

    /// Counted wakes of `issue_id` from `from` on.
    pub fn of_issue<'a>(
        &'a self,
        issue_id: &str,
        from: Timestamp,
    ) -> impl Iterator<Item = &'a RecentWake> + 'a {
        let lo = (issue_id.to_string(), from, String::new());
        let issue = issue_id.to_string();
        self.by_issue
            .range(lo..)
            .take_while(move |(i, _, _)| *i == issue)
            .filter_map(|(_, _, id)| self.entries.get(id))
    }

    /// How many wakes the window holds (bounded by the horizon).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
