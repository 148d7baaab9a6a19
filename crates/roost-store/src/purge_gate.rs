//! The way into the log writer: once the node receives snapshots, a purge beyond what
//! `state.db` holds on disk waits until it does, and every write after that purge waits behind it.
//!
//! openraft 0.9 asks the log to purge up to an installed snapshot as soon as it hands the
//! snapshot to the state machine, without waiting for the install. Written at once, that purge
//! could reach the disk first; a node killed before the install finished then held a log purged
//! past its state, and every later start failed (the fault suite's `minority_kill` found it).
//! Every other purge openraft asks for is within `state.db` already: up to a snapshot built from
//! it, or up to what it held at start. openraft answers the install only once it is done and
//! runs nothing after it before, so what waits behind a purge is at most what it queues between
//! the install's record and the release below.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::LogId;
use tokio::sync::{mpsc, watch};

use crate::error::Error;
use crate::log_writer::{Riding, WriteOp};

type NodeId = u64;

/// What `state.db` holds on disk, as the state machine last said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OnDisk {
    /// The highest log id `state.db` (or the snapshot copy recorded with it) is known to hold
    /// on disk: what it held when opened, then each snapshot recorded or installed.
    pub(crate) applied: Option<LogId<NodeId>>,
    /// A snapshot has begun to arrive since the node started: from then on a purge past
    /// `applied` is an install's, and waits for it. Never cleared: a new leader's snapshot may
    /// begin to arrive before an older one is installed. Before the first, purges go straight
    /// through, as openraft's storage suite expects of a log alone.
    pub(crate) receives_snapshots: bool,
}

/// Whether a write went to the writer or waits behind a purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    Now,
    Held,
}

#[derive(Clone)]
pub(crate) struct PurgeGate {
    writer: mpsc::UnboundedSender<WriteOp>,
    riding: Riding,
    /// What `state.db` holds on disk (`SnapshotDir::on_disk`).
    on_disk: watch::Receiver<OnDisk>,
    /// Writes in openraft's order, the first of them a purge `on_disk` does not cover yet.
    held: Arc<Mutex<VecDeque<WriteOp>>>,
}

impl PurgeGate {
    pub(crate) fn new(
        (writer, riding): (mpsc::UnboundedSender<WriteOp>, Riding),
        on_disk: watch::Receiver<OnDisk>,
    ) -> Self {
        PurgeGate {
            writer,
            riding,
            on_disk,
            held: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<WriteOp>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `op` to the writer, or holds it if a purge waits or `op` is one that must.
    pub(crate) fn send(&self, op: WriteOp) -> Result<Sent, Error> {
        let mut held = self.lock();
        if held.is_empty() && !self.must_wait(&op) {
            self.writer.send(op).map_err(|_| writer_gone())?;
            return Ok(Sent::Now);
        }
        if held.is_empty() {
            tracing::info!(
                upto = purge_bound(&op),
                on_disk = ?*self.on_disk.borrow(),
                "log purge held until state.db holds the entries it removes"
            );
            tokio::spawn(self.clone().release());
        }
        held.push_back(op);
        Ok(Sent::Held)
    }

    /// A meta row nobody waits for (see [`Riding`]), to go in with a later transaction of the
    /// writer's. While writes wait behind a purge it waits behind them, as any write: it may
    /// name an entry held there.
    pub(crate) fn ride_along(&self, key: &'static str, value: String) {
        let mut held = self.lock();
        if held.is_empty() {
            self.riding.set(key, value);
        } else {
            held.push_back(WriteOp::Meta {
                key,
                value,
                done: None,
            });
        }
    }

    /// A purge past what `state.db` holds on disk, once snapshots arrive.
    fn must_wait(&self, op: &WriteOp) -> bool {
        let Some(upto) = purge_bound(op) else {
            return false;
        };
        let on_disk = self.on_disk.borrow();
        on_disk.receives_snapshots && on_disk.applied.is_none_or(|d| d.index < upto)
    }

    /// Sends the held writes in order as `state.db` comes to hold each held purge.
    async fn release(mut self) {
        loop {
            self.on_disk.borrow_and_update();
            {
                let mut held = self.lock();
                while let Some(op) = held.front() {
                    if self.must_wait(op) {
                        break;
                    }
                    let Some(op) = held.pop_front() else { break };
                    if self.writer.send(op).is_err() {
                        // Their waiters see the writer gone when the ops are dropped.
                        held.clear();
                    }
                }
                if held.is_empty() {
                    return;
                }
            }
            if self.on_disk.changed().await.is_err() {
                // The state machine is gone (the node is stopping): the purge is never written,
                // which loses nothing; the writes behind it are dropped and their waiters told.
                self.lock().clear();
                return;
            }
        }
    }
}

fn purge_bound(op: &WriteOp) -> Option<u64> {
    match op {
        WriteOp::Purge { upto, .. } => Some(*upto),
        _ => None,
    }
}

pub(crate) fn writer_gone() -> Error {
    Error::LogWrite {
        message: "the log writer has stopped".into(),
    }
}
