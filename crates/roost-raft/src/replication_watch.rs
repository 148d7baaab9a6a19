//! A leader's check that it still reaches every member that reaches it.
//!
//! A follower stands for election only when it has heard nothing from its leader for an
//! election timeout. openraft 0.9 protects a leader from such a candidate: while the leader's
//! heartbeats reach a majority, the others refuse the candidate (the leader lease), and so does
//! the leader when the candidate's log is behind, without stepping down. That is right for a
//! node that was cut off and rejoins: the leader's next AppendEntries reaches it, is answered
//! with the higher term, and the two settle. But when the leader's messages to that member do
//! not arrive, or openraft's replication task for it has ended (it runs one per member and
//! starts them again only on a new term or membership), nothing settles it: the member stands
//! again and again with a log that never grows, and the cluster runs one replica short for as
//! long as that leader leads. The fault suite saw it once (`mixed_faults`, seed 998950: a
//! follower 80 s without an AppendEntries while its vote requests reached the leader).
//!
//! So the leader notes when each member last answered one of its requests (AppendEntries,
//! snapshots, [`PeerClock::answered`], in `network.rs`) and when each last asked it for a vote
//! ([`PeerClock::asked`], in the Raft service). A member that asks while it has answered
//! nothing for [`STALL_AFTER`] reaches the leader but does not hear it; the leader then hands
//! its leadership to a caught-up voter (`handover.rs`), whose new term has its own connections
//! and a replication task for every member, and holds its own elections off for a moment so
//! that it does not win the term back at once. A member that no leader reaches (its inbound
//! traffic cut, a wrong advertised address) must not keep the cluster changing leaders: each
//! node hands over for a member again only after a wait that doubles, from
//! [`FIRST_WAIT`] up to [`MAX_WAIT`], until that member is reached.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use openraft::ServerState;
use tokio::time::Instant;

use crate::node::RaftNode;

/// How long a member that asks for votes may have answered nothing before the leader counts
/// its replication to it as broken: 100 heartbeat intervals at the defaults, far longer than a
/// member that was cut off and rejoins takes to answer (the leader tries an unreachable member
/// again every 500 ms, `network.rs`).
pub(crate) const STALL_AFTER: Duration = Duration::from_secs(3);

/// A vote request this recent shows that the member reaches this node now.
const ASKED_WITHIN: Duration = Duration::from_secs(1);

/// How long a member must stay unreached before the leader acts: after a partition heals, the
/// member's first vote request may arrive before the leader's next try reaches it (the next
/// heartbeat, or 500 ms after an unreachable one; up to a second more while the connection
/// that lost packets is replaced, `network.rs`). 1 s was not always enough in the fault suite
/// (`follower_isolation`: reached 2 s after the heal).
const PERSIST_FOR: Duration = Duration::from_secs(2);

/// The wait before this node hands over again for the same member, doubled each time up to
/// [`MAX_WAIT`], and forgotten once the member is reached.
const FIRST_WAIT: Duration = Duration::from_secs(10);
const MAX_WAIT: Duration = Duration::from_secs(300);

/// How often the leader looks.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// How long a hand-over may take before the leader gives up and looks again.
const HANDOVER_WITHIN: Duration = Duration::from_secs(5);

/// Per member, when it last did something.
#[derive(Default)]
struct Times(Mutex<HashMap<u64, Instant>>);

impl Times {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, member: u64) {
        self.lock().insert(member, Instant::now());
    }

    fn last(&self, member: u64) -> Option<Instant> {
        self.lock().get(&member).copied()
    }
}

/// When each member last answered this node's requests, and last asked it for a vote.
#[derive(Default)]
pub(crate) struct PeerClock {
    answered: Times,
    asked: Times,
}

impl PeerClock {
    /// `member` answered one of this node's requests (with a result or an error of its own).
    pub(crate) fn answered(&self, member: u64) {
        self.answered.note(member);
    }

    /// When `member` last answered one of this node's replication requests.
    pub(crate) fn last_answer(&self, member: u64) -> Option<Instant> {
        self.answered.last(member)
    }

    /// `member` asked this node for its vote.
    pub(crate) fn asked(&self, member: u64) {
        self.asked.note(member);
    }

    /// The members of `members` that this leader does not reach ([`unreached`]).
    fn unreached(&self, members: &[u64], leading_since: Instant, now: Instant) -> Vec<u64> {
        members
            .iter()
            .copied()
            .filter(|m| {
                unreached(
                    self.asked.last(*m),
                    self.answered.last(*m),
                    leading_since,
                    now,
                )
            })
            .collect()
    }
}

/// A member that asked for a vote within [`ASKED_WITHIN`] and has answered nothing for
/// [`STALL_AFTER`], counted from its last answer or, if that came before this term began (or
/// never), from the term's start. One that has not asked may simply be down.
fn unreached(
    asked: Option<Instant>,
    answered: Option<Instant>,
    leading_since: Instant,
    now: Instant,
) -> bool {
    let asks_now = asked.is_some_and(|a| now.saturating_duration_since(a) <= ASKED_WITHIN);
    let heard = answered.map_or(leading_since, |a| a.max(leading_since));
    asks_now && now.saturating_duration_since(heard) >= STALL_AFTER
}

/// Members unreached at every look for [`PERSIST_FOR`]: `since` keeps when each of `now_unreached`
/// was first seen so, and forgets one as soon as it is reached.
fn persistently(
    since: &mut BTreeMap<u64, Instant>,
    now_unreached: &[u64],
    now: Instant,
) -> Vec<u64> {
    since.retain(|m, _| now_unreached.contains(m));
    now_unreached
        .iter()
        .copied()
        .filter(|m| now.saturating_duration_since(*since.entry(*m).or_insert(now)) >= PERSIST_FOR)
        .collect()
}

/// What the watch remembers between looks.
#[derive(Default)]
struct Watch {
    /// The term this node leads in, and since when.
    leading: Option<(u64, Instant)>,
    /// When each member was first seen unreached, at every look since.
    unreached_since: BTreeMap<u64, Instant>,
    /// Per member: when this node may hand over for it again, and the wait that set it.
    backoff: BTreeMap<u64, (Instant, Duration)>,
}

impl Watch {
    /// One look: the members to hand over for now, given this node's term if it leads and the
    /// members `unreached` finds (called with the start of this term). Records the hand-over's
    /// wait for each member returned.
    fn look(
        &mut self,
        leading_term: Option<u64>,
        now: Instant,
        unreached: impl FnOnce(Instant) -> Vec<u64>,
    ) -> Vec<u64> {
        let Some(term) = leading_term else {
            self.leading = None;
            self.unreached_since.clear();
            return Vec::new();
        };
        let since = match self.leading {
            Some((t, at)) if t == term => at,
            _ => {
                self.leading = Some((term, now));
                self.unreached_since.clear();
                now
            }
        };
        let now_unreached = unreached(since);
        // Reached again: its next hand-over waits no longer.
        self.backoff.retain(|m, _| now_unreached.contains(m));
        let mut act = persistently(&mut self.unreached_since, &now_unreached, now);
        act.retain(|m| self.backoff.get(m).is_none_or(|(at, _)| now >= *at));
        for m in &act {
            let wait = self
                .backoff
                .get(m)
                .map_or(FIRST_WAIT, |(_, w)| w.saturating_mul(2).min(MAX_WAIT));
            self.backoff.insert(*m, (now + wait, wait));
            self.unreached_since.remove(m);
        }
        act
    }
}

/// Watches this node's replication while it leads (see the module's comment), until `stop`
/// turns true or the Raft core stops. The server runs it beside its other tasks.
pub async fn watch_replication(node: RaftNode, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut metrics = node.raft.metrics();
    let mut watch = Watch::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(CHECK_EVERY) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        if metrics.has_changed().is_err() {
            return;
        }
        if node.stepping_down.load(Ordering::SeqCst) {
            // Stopping: its own hand-over is under way (`handover.rs`).
            return;
        }
        let (term, members) = {
            let m = metrics.borrow_and_update();
            let leads = m.state == ServerState::Leader;
            let members: Vec<u64> = m
                .membership_config
                .nodes()
                .map(|(id, _)| *id)
                .filter(|id| *id != node.id)
                .collect();
            (leads.then_some(m.current_term), members)
        };
        let now = Instant::now();
        let unreached = watch.look(term, now, |since| {
            node.network.peers.unreached(&members, since, now)
        });
        if unreached.is_empty() {
            continue;
        }
        tracing::error!(
            node_id = node.id,
            term,
            members = ?unreached,
            "these members ask this leader for votes but have answered none of its \
             AppendEntries for {STALL_AFTER:?}: its replication to them is broken; handing \
             leadership over so that a new term replicates to them"
        );
        node.paused.store(true, Ordering::SeqCst);
        let to = node.hand_over(Instant::now() + HANDOVER_WITHIN).await;
        node.paused.store(false, Ordering::SeqCst);
        let Some(leader) = to else {
            tracing::warn!(node_id = node.id, "could not hand leadership over");
            continue;
        };
        tracing::info!(node_id = node.id, leader, "leadership handed over");
        // This node holds the longest log: standing at once, it could take the term back
        // before the new leader reaches the member.
        node.raft.runtime_config().elect(false);
        tokio::select! {
            _ = tokio::time::sleep(node.timing.election_window() * 2) => {}
            _ = stop.wait_for(|stop| *stop) => {}
        }
        node.raft.runtime_config().elect(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_member_that_asks_but_answers_nothing_for_the_limit_is_unreached() {
        let t0 = Instant::now();
        let now = t0 + STALL_AFTER + ms(10);
        // Asked just now, last answered at the term's start: unreached.
        assert!(unreached(Some(now - ms(5)), Some(t0), t0, now));
        // Never answered in this term: counted from the term's start.
        assert!(unreached(Some(now), None, t0, now));
        // Answered within the limit: reached.
        assert!(!unreached(
            Some(now),
            Some(now - STALL_AFTER + ms(1)),
            t0,
            now
        ));
        // Has not asked lately: perhaps down, not unreached.
        assert!(!unreached(
            Some(now - ASKED_WITHIN - ms(1)),
            Some(t0),
            t0,
            now
        ));
        assert!(!unreached(None, None, t0, now));
        // A term that began within the limit: its start counts, not an older answer.
        let new_term = now - ms(100);
        assert!(!unreached(Some(now), Some(t0), new_term, now));
    }

    /// After a heal, a member's first vote request can come before the leader's next try: it
    /// counts only once the member stays unreached at every look for the limit.
    #[test]
    fn only_a_member_unreached_at_every_look_for_a_while_counts() {
        let t0 = Instant::now();
        let mut since = BTreeMap::new();
        assert!(persistently(&mut since, &[2, 3], t0).is_empty());
        // Member 3 was reached in between: its count starts again.
        assert!(persistently(&mut since, &[2], t0 + ms(500)).is_empty());
        assert!(persistently(&mut since, &[2, 3], t0 + ms(900)).is_empty());
        assert_eq!(persistently(&mut since, &[2, 3], t0 + PERSIST_FOR), vec![2]);
        assert_eq!(
            persistently(&mut since, &[2, 3], t0 + ms(900) + PERSIST_FOR),
            vec![2, 3]
        );
        assert!(persistently(&mut since, &[], t0 + ms(5000)).is_empty());
        assert!(since.is_empty());
    }

    /// The watch acts for a member once it stays unreached for the persistence limit, then
    /// waits 10 s, 20 s, ... before acting for it again, forgets that wait once the member is
    /// reached, and starts again with each new term and whenever this node stops leading.
    #[test]
    fn the_watch_acts_once_then_backs_off_until_the_member_is_reached() {
        let t0 = Instant::now();
        let mut w = Watch::default();
        let two = |_: Instant| vec![2];
        assert!(w.look(Some(5), t0, two).is_empty());
        assert_eq!(w.look(Some(5), t0 + PERSIST_FOR, two), vec![2]);
        // Still unreached: nothing until the wait is over, then the wait doubles.
        let first = t0 + PERSIST_FOR;
        assert!(w.look(Some(5), first + PERSIST_FOR, two).is_empty());
        assert!(w.look(Some(5), first + FIRST_WAIT - ms(1), two).is_empty());
        assert_eq!(w.look(Some(5), first + FIRST_WAIT, two), vec![2]);
        let second = first + FIRST_WAIT;
        assert!(w.look(Some(5), second + FIRST_WAIT, two).is_empty());
        // Reached once: the next time it is unreached long enough, it is acted for at once.
        assert!(w.look(Some(5), second + ms(100), |_| vec![]).is_empty());
        let again = second + ms(200);
        assert!(w.look(Some(5), again, two).is_empty());
        assert_eq!(w.look(Some(5), again + PERSIST_FOR, two), vec![2]);
        // Not leading: nothing, and a new term counts from its own start.
        assert!(w.look(None, again + ms(1), two).is_empty());
        let mut starts = Vec::new();
        assert!(w
            .look(Some(6), again + ms(2), |since| {
                starts.push(since);
                vec![]
            })
            .is_empty());
        assert_eq!(starts, vec![again + ms(2)]);
    }

    #[test]
    fn the_clock_keeps_each_members_last_answer_and_request() {
        let clock = PeerClock::default();
        assert_eq!(clock.answered.last(2), None);
        let before = Instant::now();
        clock.answered(2);
        clock.asked(3);
        let after = Instant::now();
        let answered = clock.answered.last(2).expect("answered");
        let asked = clock.asked.last(3).expect("asked");
        // Noted during the call, each under its own member.
        assert!(before <= answered && answered <= after);
        assert!(before <= asked && asked <= after);
        assert_eq!(clock.asked.last(2), None);
    }
}
