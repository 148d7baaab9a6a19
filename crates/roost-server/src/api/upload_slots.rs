//! The uploads one node reads at once, and each caller's share of them. An upload holds its
//! file in memory while its chunks go through the log (`attachments.rs`), so a node reads a
//! few at once; without a share per caller, one credential sending slow uploads could hold
//! every place and keep everyone else's uploads out (429) for as long as its bodies trickle in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why no place was free.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoSlot {
    /// The node reads as many uploads as it does.
    Node,
    /// This caller sends as many as one caller may.
    Caller,
}

#[derive(Clone)]
pub(crate) struct UploadSlots {
    node: Arc<Semaphore>,
    per_caller: usize,
    /// Places held by each caller; a caller with none has no entry.
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// A place among the uploads read at once, given back when dropped.
pub(crate) struct UploadSlot {
    _node: OwnedSemaphorePermit,
    held: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl UploadSlots {
    pub(crate) fn new(at_once: usize, per_caller: usize) -> Self {
        UploadSlots {
            node: Arc::new(Semaphore::new(at_once)),
            per_caller,
            held: Arc::default(),
        }
    }

    /// A place for an upload by `caller` (`Actor::principal`), if the node
    /// and the caller's share both have room.
    pub(crate) fn take(&self, caller: &str) -> Result<UploadSlot, NoSlot> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let mine = held.get(caller).copied().unwrap_or(0);
        if mine >= self.per_caller {
            return Err(NoSlot::Caller);
        }
        let permit = self
            .node
            .clone()
            .try_acquire_owned()
            .map_err(|_| NoSlot::Node)?;
        held.insert(caller.to_string(), mine + 1);
        Ok(UploadSlot {
            _node: permit,
            held: self.held.clone(),
            caller: caller.to_string(),
        })
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: one credential could hold every place a node reads uploads in, and every
    /// other caller's upload was refused while its own trickled in.
    #[test]
    fn one_caller_cannot_hold_every_place() {
        let slots = UploadSlots::new(3, 2);
        let a1 = slots.take("key-a").expect("a first place");
        let _a2 = slots.take("key-a").expect("a second place");
        assert_eq!(slots.take("key-a").err(), Some(NoSlot::Caller));
        let _b1 = slots.take("key-b").expect("another caller still gets in");
        assert_eq!(slots.take("key-c").err(), Some(NoSlot::Node));
        drop(a1);
        let _a3 = slots
            .take("key-a")
            .expect("a place given back is free again");
        assert_eq!(slots.take("key-b").err(), Some(NoSlot::Node));
    }

    #[test]
    fn a_caller_with_no_upload_left_holds_no_entry() {
        let slots = UploadSlots::new(2, 1);
        drop(slots.take("key-a").expect("a place"));
        assert!(slots.held.lock().expect("lock").is_empty());
    }
}
