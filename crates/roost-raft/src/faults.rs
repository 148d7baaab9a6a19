//! Injected network faults for tests: links this node cannot use and a delay on every message
//! it sends. Production nodes carry an empty set that nothing can change: the switches, and
//! the network's checks of them, exist only with the `test-util` feature (the in-process test
//! harness, `roost-testkit`).

#[cfg(feature = "test-util")]
use std::collections::BTreeSet;
#[cfg(feature = "test-util")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "test-util")]
use std::sync::{Arc, RwLock};
#[cfg(feature = "test-util")]
use std::time::Duration;

/// A cheap `Clone` handle shared by a node's network client and the harness that drives it.
#[derive(Clone, Default)]
pub struct NetworkFaults {
    #[cfg(feature = "test-util")]
    inner: Arc<Inner>,
}

#[cfg(feature = "test-util")]
#[derive(Default)]
struct Inner {
    blocked: RwLock<BTreeSet<u64>>,
    delay_ms: AtomicU64,
}

#[cfg(feature = "test-util")]
impl NetworkFaults {
    /// Messages from this node to `target` fail as if the peer were unreachable.
    pub fn block(&self, target: u64) {
        self.inner
            .blocked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(target);
    }

    pub fn unblock(&self, target: u64) {
        self.inner
            .blocked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&target);
    }

    pub fn unblock_all(&self) {
        self.inner
            .blocked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.inner.delay_ms.store(0, Ordering::Relaxed);
    }

    pub fn is_blocked(&self, target: u64) -> bool {
        self.inner
            .blocked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&target)
    }

    /// Every message this node sends waits `delay` first.
    pub fn set_delay(&self, delay: Duration) {
        self.inner
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.inner.delay_ms.load(Ordering::Relaxed))
    }
}
