//! Group commit of client writes. openraft 0.9 appends and fsyncs each proposal on its own and
//! waits for that fsync before it takes the next one (`RaftCore::append_to_log`), so a leader
//! proposing every write separately makes one serial fsync per write. Writes go through this
//! queue instead: at most [`MAX_IN_FLIGHT`] proposals are in flight, and whatever arrives
//! meanwhile goes out together as one `Command::Batch` entry: one append, one fsync, one
//! replication message and one apply transaction for all of them. A lone write is proposed as
//! it is, so an idle cluster answers as fast as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::Raft;
use roost_core::{Actor, Command, DomainError, Envelope, Outcome};
use roost_store::{SharedEnvelope, TypeConfig};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::error::Error;
use crate::node::WriteOutcome;
use crate::write_stats::WriteStats;

/// Proposals in flight at once. Two let one batch's leader fsync overlap the previous batch's
/// replication; more would only queue inside openraft, one fsync each.
const MAX_IN_FLIGHT: usize = 2;
/// Writes per entry at most (well below `roost_core::state::SLOTS_PER_ENTRY`). With
/// `crate::config::MAX_ENTRIES_PER_APPEND` it bounds an AppendEntries message, which must cross
/// the network and be fsynced within openraft's RPC timeout (one heartbeat interval). 256, not
/// 64: at 256 clients entries of 64 left writes queued behind two full entries (3100 → 3400-3570
/// checkouts/s, CPU per cycle 0.45 → 0.40 ms, BENCHMARKS.md).
pub(crate) const MAX_BATCH: usize = 256;

struct Queued {
    envelope: Envelope,
    /// The envelope's JSON bytes, as [`json_len`] measured them.
    bytes: usize,
    reply: oneshot::Sender<Result<WriteOutcome, Error>>,
}

/// The queue in front of `Raft::client_write`; a cheap handle.
#[derive(Clone)]
pub(crate) struct Proposer {
    queue: mpsc::UnboundedSender<Queued>,
    stats: WriteStats,
    /// Proposals not yet answered: a stopping leader waits for none before it hands over
    /// (`handover.rs`), so its log stops growing.
    pending: Arc<AtomicUsize>,
}

/// Counts a proposal as pending for as long as it lives, whichever way it ends.
struct Pending(Arc<AtomicUsize>);

impl Pending {
    fn new(count: &Arc<AtomicUsize>) -> Pending {
        count.fetch_add(1, Ordering::SeqCst);
        Pending(count.clone())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Proposer {
    /// Starts the proposing task; it ends when every handle is dropped.
    pub(crate) fn spawn(raft: Raft<TypeConfig>, timeout: Duration, stats: WriteStats) -> Proposer {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx, timeout, stats.clone()));
        Proposer {
            queue,
            stats,
            pending: Arc::default(),
        }
    }

    /// Proposals not yet answered.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Proposes `envelope` (`bytes` of JSON) on this node and waits until it is committed and
    /// applied here; `NotLeader` on a follower.
    pub(crate) async fn propose(
        &self,
        envelope: Envelope,
        bytes: usize,
        timeout: Duration,
    ) -> Result<WriteOutcome, Error> {
        let _pending = Pending::new(&self.pending);
        let (reply, wait) = oneshot::channel();
        let started = std::time::Instant::now();
        self.queue
            .send(Queued {
                envelope,
                bytes,
                reply,
            })
            .map_err(|_| stopped())?;
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(result)) => {
                if result.is_ok() {
                    self.stats.observe_latency(started.elapsed());
                }
                result
            }
            Ok(Err(_)) => Err(stopped()),
            Err(_) => Err(not_committed_in(timeout)),
        }
    }
}

/// JSON bytes per entry at most (a lone bigger write is its own entry). openraft 0.9 gives an
/// AppendEntries one heartbeat interval (30 ms) to be answered: an entry of a few hundred KiB
/// already misses it on a busy node, and the leader then loses its followers
/// (`tests/e2e/attachments/` saw it from 512 KiB). Concurrent writes of big commands (an
/// attachment's chunks, `roost_core::attachment::CHUNK_BYTES`) are therefore not batched past
/// this; small writes (about 1 KiB each) still fill a batch of [`MAX_BATCH`].
const MAX_BATCH_BYTES: usize = 256 * 1024;

// Whatever the bound, a message of `MAX_ENTRIES_PER_APPEND` entries stays well under
// `network::MAX_MESSAGE_BYTES`, which a follower refuses to read past.
const _: () = assert!(
    MAX_BATCH_BYTES * crate::config::MAX_ENTRIES_PER_APPEND as usize
        <= crate::network::MAX_MESSAGE_BYTES / 2
);

/// The JSON bytes one write may take in the log: a node refuses a bigger one before it
/// proposes it (`node.rs`, `write_local`: `Error::TooLarge`), so that no entry is big (above).
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

/// The length of `envelope` as JSON, as it travels in a log entry.
pub(crate) fn json_len(envelope: &Envelope) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // An envelope that cannot be encoded cannot be proposed either; it counts as empty here.
    let _ = serde_json::to_writer(&mut count, envelope);
    count.0
}

async fn run(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    timeout: Duration,
    stats: WriteStats,
) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // A write that did not fit the last batch's bytes: it opens the next one.
    let mut held: Option<Queued> = None;
    loop {
        let first = match held.take() {
            Some(q) => q,
            None => match rx.recv().await {
                Some(q) => q,
                None => return,
            },
        };
        // Wait for a slot first: what queues up meanwhile joins this batch.
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = first.bytes;
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(q) => {
                    if bytes + q.bytes > MAX_BATCH_BYTES {
                        held = Some(q);
                        break;
                    }
                    bytes += q.bytes;
                    batch.push(q);
                }
                Err(_) => break,
            }
        }
        stats.observe_batch(batch.len());
        let raft = raft.clone();
        tokio::spawn(async move {
            propose_batch(&raft, batch, timeout).await;
            drop(permit);
        });
    }
}

async fn propose_batch(raft: &Raft<TypeConfig>, mut batch: Vec<Queued>, timeout: Duration) {
    if batch.len() == 1 {
        if let Some(one) = batch.pop() {
            let result = write(raft, one.envelope, timeout).await.and_then(|r| {
                let index = r.index;
                r.single
                    .map(|result| WriteOutcome { index, result })
                    .ok_or_else(|| Error::Fatal {
                        message: "a command entry produced no result".into(),
                    })
            });
            let _ = one.reply.send(result);
        }
        return;
    }
    let (envelopes, replies): (Vec<Envelope>, Vec<_>) =
        batch.into_iter().map(|q| (q.envelope, q.reply)).unzip();
    let at = envelopes.iter().map(|e| e.at).max().unwrap_or_default();
    let entry = Envelope {
        request_id: None,
        at,
        actor: Actor::system(),
        command: Command::Batch { envelopes },
        idempotency_key: None,
    };
    match write(raft, entry, timeout).await {
        Ok(written) if written.batch.len() == replies.len() => {
            for (reply, result) in replies.into_iter().zip(written.batch) {
                let _ = reply.send(Ok(WriteOutcome {
                    index: written.index,
                    result,
                }));
            }
        }
        Ok(written) => {
            for reply in replies {
                let _ = reply.send(Err(Error::Fatal {
                    message: format!(
                        "a batch entry at {} produced {} results",
                        written.index,
                        written.batch.len()
                    ),
                }));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(same_error(&e)));
            }
        }
    }
}

/// One committed entry's results.
struct Written {
    index: u64,
    /// A lone envelope's result (`None` for a batch).
    single: Option<Result<Outcome, DomainError>>,
    batch: Vec<Result<Outcome, DomainError>>,
}

async fn write(
    raft: &Raft<TypeConfig>,
    entry: Envelope,
    timeout: Duration,
) -> Result<Written, Error> {
    let written =
        match tokio::time::timeout(timeout, raft.client_write(SharedEnvelope::from(entry))).await {
            Ok(w) => w,
            Err(_) => return Err(not_committed_in(timeout)),
        };
    match written {
        Ok(resp) => Ok(Written {
            index: resp.log_id.index,
            single: resp.data.result,
            batch: resp.data.batch,
        }),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(Error::NotLeader {
            leader_id: f.leader_id,
            leader_addr: f.leader_node.map(|n| n.grpc_addr),
        }),
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
            tracing::warn!(error = %e, "a write met a membership change");
            Err(Error::Unavailable {
                message: "a membership change is in progress; retry shortly".into(),
            })
        }
        Err(RaftError::Fatal(f)) => Err(Error::core_stopped(f)),
    }
}

fn not_committed_in(timeout: Duration) -> Error {
    Error::Unavailable {
        message: format!(
            "the write was not committed within {timeout:?} (no quorum?); its outcome is unknown: \
             retry with the same idempotency key"
        ),
    }
}

fn stopped() -> Error {
    Error::Fatal {
        message: "raft stopped".into(),
    }
}

/// The batch's failure, for each of its writers.
fn same_error(e: &Error) -> Error {
    match e {
        Error::NotLeader {
            leader_id,
            leader_addr,
        } => Error::NotLeader {
            leader_id: *leader_id,
            leader_addr: leader_addr.clone(),
        },
        Error::Unavailable { message } => Error::Unavailable {
            message: message.clone(),
        },
        Error::Membership { message } => Error::Membership {
            message: message.clone(),
        },
        other => Error::Fatal {
            message: other.to_string(),
        },
    }
}
