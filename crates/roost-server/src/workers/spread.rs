//! How many workers the leader serves over connections of their own. Past
//! `[workers] max_leader_connections`, a worker that dials the leader is sent to a follower that
//! the leader hears from, which relays it (`relay.rs`). A large fleet's connections, with their
//! buffers and the work of their TLS and HTTP/2, are then the followers', and the leader keeps
//! its memory and CPU for the log. A worker sent away that dials the leader again soon after
//! (it could not reach that follower) is served by the leader, so none is sent in circles.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the leader remembers a worker it sent away: coming back within it, the worker is
/// served by the leader. A sent-away worker dials the follower at once, so a worker that comes
/// back this soon could not reach it.
const REMEMBERED: Duration = Duration::from_secs(60);

/// The remembered workers past which the ones older than [`REMEMBERED`] are forgotten, at
/// first; then twice as many as were left, so that a large fleet's arrival costs no pass over
/// all of them for each.
const PRUNE_PAST: usize = 1024;

/// The leader's count of workers connected to it directly, and the workers it sent away: a
/// cheap `Clone` handle.
#[derive(Clone, Default)]
pub(super) struct Spread {
    direct: Arc<AtomicUsize>,
    sent_away: Arc<Mutex<SentAway>>,
    /// Turns over the followers, so the workers sent away are spread evenly.
    next: Arc<AtomicUsize>,
}

#[derive(Default)]
struct SentAway {
    at: HashMap<String, Instant>,
    prune_at: usize,
}

/// A worker's connection to the leader, counted while this lives: from before its registration
/// commits, so that workers registering at once cannot pass the bound together.
pub(super) struct Direct(Arc<AtomicUsize>);

impl Drop for Direct {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where a worker that dials the leader is served.
pub(super) enum Placement {
    Here(Direct),
    /// Sent to this follower (id, gRPC address), which relays it.
    Elsewhere(u64, String),
}

impl Spread {
    fn sent_away(&self) -> std::sync::MutexGuard<'_, SentAway> {
        self.sent_away.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where `worker_id`, dialing the leader, is served: here while the leader holds fewer
    /// than `max` direct connections (0: no bound), else at one of the followers `in_reach`
    /// (id and gRPC address), in turn, unless it was sent away within [`REMEMBERED`] or no
    /// follower is in reach.
    pub(super) fn place(
        &self,
        worker_id: &str,
        max: usize,
        in_reach: impl FnOnce() -> Vec<(u64, String)>,
        now: Instant,
    ) -> Placement {
        let held = self.direct.fetch_add(1, Ordering::Relaxed);
        let here = Direct(self.direct.clone());
        if max == 0 || held < max {
            return Placement::Here(here);
        }
        let mut sent_away = self.sent_away();
        if let Some(at) = sent_away.at.remove(worker_id) {
            if now.saturating_duration_since(at) < REMEMBERED {
                return Placement::Here(here);
            }
        }
        let followers = in_reach();
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % followers.len().max(1);
        let Some((id, addr)) = followers.into_iter().nth(turn) else {
            return Placement::Here(here);
        };
        if sent_away.at.len() >= sent_away.prune_at.max(PRUNE_PAST) {
            sent_away
                .at
                .retain(|_, at| now.saturating_duration_since(*at) < REMEMBERED);
            sent_away.prune_at = sent_away.at.len() * 2;
        }
        sent_away.at.insert(worker_id.to_string(), now);
        Placement::Elsewhere(id, addr)
    }

    /// A worker reached the leader through a follower: it need not be remembered.
    pub(super) fn relayed(&self, worker_id: &str) {
        self.sent_away().at.remove(worker_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<(u64, String)> {
        vec![(2, "10.0.0.2:7443".into()), (3, "10.0.0.3:7443".into())]
    }

    /// The follower a worker is sent to, if it is sent away; the leader's count of direct
    /// connections goes up for one that is served here, for as long as `held` keeps it.
    fn sent(
        spread: &Spread,
        worker_id: &str,
        max: usize,
        in_reach: impl FnOnce() -> Vec<(u64, String)>,
        now: Instant,
        held: &mut Vec<Direct>,
    ) -> Option<u64> {
        match spread.place(worker_id, max, in_reach, now) {
            Placement::Here(direct) => {
                held.push(direct);
                None
            }
            Placement::Elsewhere(id, _) => Some(id),
        }
    }

    #[test]
    fn past_the_bound_workers_are_sent_to_followers_in_turn() {
        let (spread, now, mut held) = (Spread::default(), Instant::now(), Vec::new());
        assert_eq!(
            sent(&spread, "w1", 0, two, now, &mut held),
            None,
            "no bound"
        );
        held.clear();
        assert_eq!(
            sent(&spread, "w1", 2, two, now, &mut held),
            None,
            "under the bound"
        );
        assert_eq!(
            sent(&spread, "w2", 2, two, now, &mut held),
            None,
            "under the bound"
        );
        let followers: Vec<Option<u64>> = ["w3", "w4", "w5"]
            .iter()
            .map(|w| sent(&spread, w, 2, two, now, &mut held))
            .collect();
        assert_eq!(followers, vec![Some(2), Some(3), Some(2)], "in turn");
        assert_eq!(held.len(), 2, "the workers sent away hold no place here");
        assert_eq!(
            sent(&spread, "w6", 2, Vec::new, now, &mut held),
            None,
            "none in reach"
        );
        // Connections close: under the bound again.
        held.clear();
        assert_eq!(sent(&spread, "w7", 2, two, now, &mut held), None);
    }

    #[test]
    fn workers_registering_at_once_cannot_pass_the_bound_together() {
        let (spread, now) = (Spread::default(), Instant::now());
        // Both placed before either registration finished: the second is counted already.
        let first = spread.place("w1", 1, two, now);
        let second = spread.place("w2", 1, two, now);
        assert!(matches!(first, Placement::Here(_)));
        assert!(matches!(second, Placement::Elsewhere(2, _)));
    }

    #[test]
    fn a_worker_sent_away_that_comes_back_soon_is_served_by_the_leader() {
        let (spread, now, mut held) = (Spread::default(), Instant::now(), Vec::new());
        assert_eq!(sent(&spread, "w0", 1, two, now, &mut held), None);
        assert!(sent(&spread, "w1", 1, two, now, &mut held).is_some());
        let soon = now + Duration::from_secs(2);
        assert_eq!(
            sent(&spread, "w1", 1, two, soon, &mut held),
            None,
            "it could not reach it"
        );
        // Served here once; sent away again on a later dial, and long after.
        assert!(sent(&spread, "w1", 1, two, soon, &mut held).is_some());
        let later = soon + REMEMBERED;
        assert!(sent(&spread, "w1", 1, two, later, &mut held).is_some());
        // Once it reached the leader through a follower, it is forgotten.
        spread.relayed("w1");
        assert!(sent(&spread, "w1", 1, two, later, &mut held).is_some());
    }
}
