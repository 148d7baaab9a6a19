//! The leader's memory of its workers: open connections and lease deadlines on a monotonic clock.
//! Nothing here is replicated; only a lease's expiry is, as a `WorkerLost` command.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use roost_proto::v1::server_message;
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant};

use super::{LeaseTerms, WorkerConfig};

/// Boxed: a channel allocates its first block of 32 slots when it is made, and a slot the size
/// of a `ServerMessage` (424 bytes) made that 14 KiB for every connected worker.
pub(crate) type Outbox = mpsc::Sender<Box<server_message::Body>>;

struct Connection {
    outbox: Outbox,
    generation: u64,
}

/// `ttl` from now; a term too long for the clock (a config stretched past reason) is a year.
fn deadline_after(ttl: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(ttl)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// Extends the worker's lease to `ttl` from now, or to its longest earlier term (see
/// [`Registry::renew`]); returns the term given.
fn extend(inner: &mut Inner, worker_id: &str, ttl: Duration) -> Duration {
    let ttl = match inner.leases.get(worker_id) {
        Some(old) => old.ttl.max(ttl),
        None => ttl,
    };
    let lease = Lease {
        deadline: deadline_after(ttl),
        ttl,
    };
    inner.leases.insert(worker_id.to_string(), lease);
    ttl
}

/// A worker's lease on this leader: when it runs out, and the longest term it was granted.
#[derive(Clone, Copy)]
struct Lease {
    deadline: Instant,
    ttl: Duration,
}

#[derive(Default)]
struct Inner {
    connections: HashMap<String, Connection>,
    /// The connected workers' ids in id order, made again only after a connection opens or
    /// closes: the dispatcher reads it on every applied entry, and copying and sorting 10,000
    /// ids there each time cost a wake about 2.5 ms.
    sorted: Option<Arc<[String]>>,
    leases: HashMap<String, Lease>,
    generation: u64,
}

/// A cheap `Clone` handle on the registry.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    inner: Arc<Mutex<Inner>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the worker's open connection; returns its generation, so that a stale connection
    /// ending later does not detach a newer one.
    pub fn attach(&self, worker_id: &str, outbox: Outbox) -> u64 {
        let mut inner = self.lock();
        inner.generation += 1;
        let generation = inner.generation;
        inner
            .connections
            .insert(worker_id.to_string(), Connection { outbox, generation });
        inner.sorted = None;
        generation
    }

    pub fn detach(&self, worker_id: &str, generation: u64) {
        let mut inner = self.lock();
        if inner
            .connections
            .get(worker_id)
            .is_some_and(|s| s.generation == generation)
        {
            inner.connections.remove(worker_id);
            inner.sorted = None;
        }
    }

    /// The connected workers' ids, in id order.
    pub fn connected(&self) -> Arc<[String]> {
        let mut inner = self.lock();
        if let Some(sorted) = &inner.sorted {
            return sorted.clone();
        }
        let mut ids: Vec<String> = inner.connections.keys().cloned().collect();
        ids.sort_unstable();
        let sorted: Arc<[String]> = ids.into();
        inner.sorted = Some(sorted.clone());
        sorted
    }

    /// How many workers have a connection open (`/metrics`).
    pub fn connected_count(&self) -> usize {
        self.lock().connections.len()
    }

    /// How long the worker's lease still runs, if this node holds one for it.
    pub fn lease_left(&self, worker_id: &str) -> Option<Duration> {
        let lease = *self.lock().leases.get(worker_id)?;
        Some(lease.deadline.saturating_duration_since(Instant::now()))
    }

    /// Extends the worker's lease to `ttl` from now, or to the longest term it was granted
    /// before if that is longer, and returns the term given. A lease never shortens: an ack
    /// naming a shorter one could be lost, and the worker would then count on the longer one
    /// (it fences itself by the lease it was last told of) while this node counted the shorter.
    pub fn renew(&self, worker_id: &str, ttl: Duration) -> Duration {
        extend(&mut self.lock(), worker_id, ttl)
    }

    /// Renews the worker's lease on `config`'s terms for the workers connected now, under one
    /// lock; returns the terms to name to the worker (its lease as [`Registry::renew`] gave it).
    pub fn renew_on_terms(&self, worker_id: &str, config: &WorkerConfig) -> LeaseTerms {
        let mut inner = self.lock();
        let terms = config.lease_terms(inner.connections.len());
        let ttl = extend(&mut inner, worker_id, terms.ttl());
        LeaseTerms {
            renew_interval_ms: terms.renew_interval_ms,
            lease_ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// A new leader gives every worker it knows a full lease, whatever the old leader saw.
    pub fn grant_full_leases(&self, workers: impl IntoIterator<Item = String>, ttl: Duration) {
        let lease = Lease {
            deadline: deadline_after(ttl),
            ttl,
        };
        let mut inner = self.lock();
        inner.leases.clear();
        for w in workers {
            inner.leases.insert(w, lease);
        }
    }

    /// Workers whose lease has run out; their leases are forgotten.
    pub fn take_expired(&self) -> Vec<String> {
        let now = Instant::now();
        let mut inner = self.lock();
        let expired: Vec<String> = inner
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(w, _)| w.clone())
            .collect();
        for w in &expired {
            inner.leases.remove(w);
        }
        expired
    }

    /// Queues a message for the worker's connection; false if it has none (or it is full).
    pub fn send(&self, worker_id: &str, message: server_message::Body) -> bool {
        let outbox = self
            .lock()
            .connections
            .get(worker_id)
            .map(|s| s.outbox.clone());
        match outbox {
            Some(o) => o.try_send(Box::new(message)).is_ok(),
            None => false,
        }
    }

    /// Leadership moved: tell every worker where to go and close the connections.
    pub fn redirect_all(&self, leader_grpc_addr: &str) {
        let connections: Vec<(String, Connection)> = {
            let mut inner = self.lock();
            inner.sorted = None;
            inner.connections.drain().collect()
        };
        for (_, s) in connections {
            let redirect = server_message::Body::Redirect(roost_proto::v1::Redirect {
                leader_grpc_addr: leader_grpc_addr.to_string(),
                message: "this node no longer leads".into(),
            });
            let _ = s.outbox.try_send(Box::new(redirect));
        }
        self.lock().leases.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_terms_stretch_with_the_fleet_past_the_renewal_budget_and_only_then() {
        let config = WorkerConfig::default();
        let configured = config.lease_terms(0);
        assert_eq!(
            (configured.renew_interval_ms, configured.lease_ttl_ms),
            (1000, 5000)
        );
        // 1000 workers renewing every second is the default budget exactly.
        assert_eq!(config.lease_terms(1000), configured);
        let at = |n| {
            let t = config.lease_terms(n);
            (t.renew_interval_ms, t.lease_ttl_ms)
        };
        assert_eq!(at(1001), (1001, 5005));
        assert_eq!(at(10_000), (10_000, 50_000));
        let unbounded = WorkerConfig {
            max_renewals_per_sec: 0,
            ..WorkerConfig::default()
        };
        assert_eq!(unbounded.lease_terms(1_000_000), configured);
    }

    #[test]
    fn the_connected_list_is_in_id_order_and_follows_every_attach_and_detach() {
        let registry = Registry::default();
        let outbox = || mpsc::channel(1).0;
        let b = registry.attach("b", outbox());
        registry.attach("a", outbox());
        registry.attach("c", outbox());
        assert_eq!(&*registry.connected(), ["a", "b", "c"]);
        registry.detach("b", b);
        assert_eq!(&*registry.connected(), ["a", "c"]);
        let b = registry.attach("b", outbox());
        registry.detach("b", b - 1); // a stale connection's end detaches nothing
        assert_eq!(&*registry.connected(), ["a", "b", "c"]);
        registry.redirect_all("");
        assert!(registry.connected().is_empty());
    }

    #[test]
    fn a_renewal_names_the_terms_for_the_workers_connected_then_and_never_shorter() {
        let registry = Registry::default();
        let config = WorkerConfig {
            max_renewals_per_sec: 1,
            ..WorkerConfig::default()
        };
        let outbox = || mpsc::channel(1).0;
        for w in ["a", "b"] {
            registry.attach(w, outbox());
        }
        let two = registry.renew_on_terms("a", &config);
        assert_eq!((two.renew_interval_ms, two.lease_ttl_ms), (2000, 10_000));
        let gen = registry.attach("c", outbox());
        let three = registry.renew_on_terms("a", &config);
        assert_eq!(
            (three.renew_interval_ms, three.lease_ttl_ms),
            (3000, 15_000)
        );
        registry.detach("c", gen);
        let back = registry.renew_on_terms("a", &config);
        assert_eq!(
            (back.renew_interval_ms, back.lease_ttl_ms),
            (2000, 15_000),
            "the interval follows the fleet down; the lease it held does not shorten"
        );
    }

    #[test]
    fn a_renewal_never_shortens_a_lease_it_granted() {
        let registry = Registry::default();
        let (long, short) = (Duration::from_secs(50), Duration::from_secs(5));
        assert_eq!(registry.renew("w", long), long);
        assert_eq!(registry.renew("w", short), long, "still the longer term");
        assert!(registry.lease_left("w").is_some_and(|left| left > short));
        // A lease forgotten (expired, or leadership moved) starts again from the terms given.
        registry.grant_full_leases(["w".to_string()], short);
        assert_eq!(registry.renew("w", short), short);
    }
}
