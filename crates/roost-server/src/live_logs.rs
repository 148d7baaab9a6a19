//! The live output of running runs, held by the leader in memory as workers send it, so any
//! node can stream a run's log while it runs. Not replicated: a new leader starts empty and
//! fills from the workers' next chunks; the run's committed tail covers the rest once it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The most of one run's output kept in memory; older bytes are dropped from the front.
const KEEP_BYTES: usize = 1024 * 1024;
/// How long an ended run's buffer stays for late readers.
const KEEP_ENDED: Duration = Duration::from_secs(60);

struct Buffer {
    /// Log offset of `data[0]`.
    start: u64,
    data: Vec<u8>,
    ended_at: Option<Instant>,
}

impl Buffer {
    fn end(&self) -> u64 {
        self.start + self.data.len() as u64
    }
}

/// A cheap `Clone` handle to the buffers.
#[derive(Clone)]
pub(crate) struct LiveLogs {
    buffers: Arc<Mutex<HashMap<String, Buffer>>>,
    /// Bumped on every append, so readers wait without polling.
    version: Arc<watch::Sender<u64>>,
}

impl Default for LiveLogs {
    fn default() -> Self {
        LiveLogs {
            buffers: Arc::default(),
            version: Arc::new(watch::channel(0).0),
        }
    }
}

impl LiveLogs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Buffer>> {
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `data`, which starts at `offset` in the run's log. Bytes already held are skipped;
    /// a gap (chunks lost on the way, or a new leader) restarts the buffer at `offset`.
    pub(crate) fn append(&self, run_id: &str, offset: u64, data: &[u8]) {
        {
            let mut buffers = self.lock();
            buffers.retain(|_, b| b.ended_at.is_none_or(|t| t.elapsed() < KEEP_ENDED));
            let buffer = buffers.entry(run_id.to_string()).or_insert(Buffer {
                start: offset,
                data: Vec::new(),
                ended_at: None,
            });
            let end = buffer.end();
            let chunk_end = offset + data.len() as u64;
            if offset > end || chunk_end < buffer.start {
                buffer.start = offset;
                buffer.data.clear();
                buffer.data.extend_from_slice(data);
            } else if chunk_end > end {
                let skip = (end - offset) as usize;
                buffer.data.extend_from_slice(&data[skip..]);
            }
            if buffer.data.len() > KEEP_BYTES {
                let drop = buffer.data.len() - KEEP_BYTES;
                buffer.data.drain(..drop);
                buffer.start += drop as u64;
            }
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// The run has ended: readers stop waiting for more.
    pub(crate) fn end(&self, run_id: &str) {
        if let Some(b) = self.lock().get_mut(run_id) {
            b.ended_at = Some(Instant::now());
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// The bytes held from `offset` on (or from the oldest held byte, if `offset` is older),
    /// with the offset they start at; `None` when nothing from `offset` on is held.
    pub(crate) fn read(&self, run_id: &str, offset: u64, max: usize) -> Option<(u64, Vec<u8>)> {
        let buffers = self.lock();
        let b = buffers.get(run_id)?;
        let from = offset.max(b.start);
        if from >= b.end() {
            return None;
        }
        let skip = (from - b.start) as usize;
        let take = (b.data.len() - skip).min(max);
        Some((from, b.data[skip..skip + take].to_vec()))
    }

    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_sent_again_are_not_duplicated_and_a_gap_restarts_the_buffer() {
        let logs = LiveLogs::default();
        logs.append("r", 0, b"hello ");
        logs.append("r", 0, b"hello ");
        logs.append("r", 3, b"lo world");
        assert_eq!(logs.read("r", 0, 100), Some((0, b"hello world".to_vec())));
        assert_eq!(logs.read("r", 6, 3), Some((6, b"wor".to_vec())));
        assert_eq!(logs.read("r", 11, 100), None);
        logs.append("r", 20, b"later");
        assert_eq!(logs.read("r", 0, 100), Some((20, b"later".to_vec())));
        assert_eq!(logs.read("other", 0, 100), None);
    }

    #[test]
    fn a_long_log_keeps_its_last_megabyte() {
        let logs = LiveLogs::default();
        let chunk = vec![b'x'; 64 * 1024];
        for i in 0..20u64 {
            logs.append("r", i * chunk.len() as u64, &chunk);
        }
        let (from, data) = logs.read("r", 0, usize::MAX).expect("held");
        assert_eq!(from, 20 * 64 * 1024 - KEEP_BYTES as u64);
        assert_eq!(data.len(), KEEP_BYTES);
    }
}
