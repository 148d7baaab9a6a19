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

/// Past this many remembered workers, the ones older than [`REMEMBERED`] are forgotten.
const PRUNE_PAST: usize = 1024;

/// The leader's count of workers connected to it directly, and the workers it sent away: a
/// cheap `Clone` handle.
#[derive(Clone, Default)]
pub(super) struct Spread {
    direct: Arc<AtomicUsize>,
    sent_away: Arc<Mutex<HashMap<String, Instant>>>,
    /// Turns over the followers, so the workers sent away are spread evenly.
    next: Arc<AtomicUsize>,
}

/// A worker's connection to the leader, counted while this lives.
pub(super) struct Direct(Arc<AtomicUsize>);

impl Drop for Direct {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Spread {
    /// Counts a worker's own connection to the leader until the guard is dropped.
    pub(super) fn direct(&self) -> Direct {
        self.direct.fetch_add(1, Ordering::Relaxed);
        Direct(self.direct.clone())
    }

    /// The follower to send `worker_id` to, of those `in_reach` (id and gRPC address), when the
    /// leader holds `max` direct connections or more (0: no bound); `None` to serve it here.
    pub(super) fn elsewhere(
        &self,
        worker_id: &str,
        max: usize,
        in_reach: impl FnOnce() -> Vec<(u64, String)>,
        now: Instant,
    ) -> Option<(u64, String)> {
        if max == 0 || self.direct.load(Ordering::Relaxed) < max {
            return None;
        }
        let mut sent_away = self.sent_away.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = sent_away.remove(worker_id) {
            if now.saturating_duration_since(at) < REMEMBERED {
                return None;
            }
        }
        let followers = in_reach();
        if followers.is_empty() {
            return None;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % followers.len();
        if sent_away.len() >= PRUNE_PAST {
            sent_away.retain(|_, at| now.saturating_duration_since(*at) < REMEMBERED);
        }
        sent_away.insert(worker_id.to_string(), now);
        followers.into_iter().nth(turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<(u64, String)> {
        vec![(2, "10.0.0.2:7443".into()), (3, "10.0.0.3:7443".into())]
    }

    #[test]
    fn past_the_bound_workers_are_sent_to_followers_in_turn() {
        let spread = Spread::default();
        let now = Instant::now();
        let held = spread.direct();
        assert_eq!(spread.elsewhere("w1", 2, two, now), None, "under the bound");
        assert_eq!(spread.elsewhere("w1", 0, two, now), None, "no bound");
        let _second = spread.direct();
        let sent: Vec<u64> = ["w1", "w2", "w3"]
            .iter()
            .filter_map(|w| spread.elsewhere(w, 2, two, now).map(|(id, _)| id))
            .collect();
        assert_eq!(sent, vec![2, 3, 2], "turn by turn over the followers");
        assert_eq!(
            spread.elsewhere("w4", 2, Vec::new, now),
            None,
            "none in reach"
        );
        // A connection closes: under the bound again.
        drop(held);
        assert_eq!(spread.elsewhere("w5", 2, two, now), None);
    }

    #[test]
    fn a_worker_sent_away_that_comes_back_soon_is_served_by_the_leader() {
        let spread = Spread::default();
        let now = Instant::now();
        let _held = spread.direct();
        assert!(spread.elsewhere("w1", 1, two, now).is_some());
        let soon = now + Duration::from_secs(2);
        assert_eq!(
            spread.elsewhere("w1", 1, two, soon),
            None,
            "it could not reach it"
        );
        // Served here once; sent away again on a later dial, and long after.
        assert!(spread.elsewhere("w1", 1, two, soon).is_some());
        let later = soon + REMEMBERED;
        assert!(spread.elsewhere("w1", 1, two, later).is_some());
    }
}
