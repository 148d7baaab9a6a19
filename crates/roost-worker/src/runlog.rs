//! A run's log: every byte of the agent's output in a file on the worker, a bounded tail for
//! the cluster, and live chunks for readers of `roost run log --follow`.

use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;

/// The tail the cluster keeps (`roost_core::LOG_TAIL_MAX_BYTES`).
pub(crate) const TAIL_BYTES: usize = 16 * 1024;
/// Live output is sent in chunks of at most this size.
const CHUNK_BYTES: usize = 8 * 1024;

/// Receives live chunks: (offset in the log, bytes). Best effort.
pub(crate) type LiveSink = Box<dyn FnMut(u64, Vec<u8>) + Send>;

pub(crate) struct RunLog {
    file: Option<std::fs::File>,
    written: u64,
    tail: VecDeque<u8>,
    /// Bytes not yet sent live, starting at `written - pending.len()`.
    pending: Vec<u8>,
    live: LiveSink,
}

impl RunLog {
    /// Opens `dir/<run_id>.log`; a log that cannot be opened is kept in memory only (the tail
    /// and live chunks still work) and says so in its first line. A log holds whatever the
    /// agent printed, secrets included, so a directory this creates is 0700 and a file 0600.
    pub(crate) fn open(dir: &Path, run_id: &str, live: LiveSink) -> RunLog {
        let opened = private_dir(dir).and_then(|()| {
            let mut options = std::fs::OpenOptions::new();
            options.create(true).append(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options.open(dir.join(format!("{run_id}.log")))
        });
        let mut log = RunLog {
            file: None,
            written: 0,
            tail: VecDeque::with_capacity(TAIL_BYTES),
            pending: Vec::new(),
            live,
        };
        match opened {
            Ok(f) => log.file = Some(f),
            Err(e) => log.note(&format!("the log file could not be opened: {e}")),
        }
        log
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if let Some(f) = &mut self.file {
            if f.write_all(bytes).is_err() {
                self.file = None;
            }
        }
        self.written += bytes.len() as u64;
        self.tail.extend(bytes);
        if self.tail.len() > TAIL_BYTES {
            let drop = self.tail.len() - TAIL_BYTES;
            self.tail.drain(..drop);
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= CHUNK_BYTES {
            self.flush();
        }
    }

    /// A line from the worker itself (not the agent), marked as such.
    pub(crate) fn note(&mut self, text: &str) {
        self.write(format!("[roost] {text}\n").as_bytes());
    }

    /// Sends what is pending to live readers.
    pub(crate) fn flush(&mut self) {
        let mut offset = self.written - self.pending.len() as u64;
        for chunk in std::mem::take(&mut self.pending).chunks(CHUNK_BYTES) {
            (self.live)(offset, chunk.to_vec());
            offset += chunk.len() as u64;
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.written
    }

    /// The tail as text, starting at a character boundary, at most [`TAIL_BYTES`] long.
    pub(crate) fn tail(&self) -> String {
        let bytes: Vec<u8> = self.tail.iter().copied().collect();
        let start = bytes
            .iter()
            .position(|b| (*b as i8) >= -0x40)
            .unwrap_or(bytes.len());
        let mut text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        while text.len() > TAIL_BYTES {
            // Replacement characters can make lossy text longer than its bytes.
            let mut cut = text.len() - TAIL_BYTES;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text.drain(..cut);
        }
        text
    }

    /// The last non-empty line, a summary for adapters that give none.
    pub(crate) fn last_line(&self) -> Option<String> {
        let tail = self.tail();
        tail.lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("[roost]"))
            .map(|l| l.chars().take(1000).collect())
    }
}

/// Creates `dir` and its missing parents 0700; an existing directory is left as it is (an
/// operator may have chosen its mode).
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[cfg(unix)]
    #[test]
    fn run_logs_are_created_0600_in_a_0700_directory() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().expect("tempdir");
        let dir = base.path().join("work").join(".roost-logs");
        let mut log = RunLog::open(&dir, "r1", Box::new(|_, _| {}));
        log.write(b"OPENAI_API_KEY=sk-...\n");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&base.path().join("work")), 0o700);
        assert_eq!(mode(&dir.join("r1.log")), 0o600);
    }

    #[test]
    fn the_file_has_everything_the_tail_the_end_and_live_chunks_the_offsets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sent = Arc::new(Mutex::new(Vec::new()));
        let sink = sent.clone();
        let mut log = RunLog::open(
            dir.path(),
            "r1",
            Box::new(move |off, data| sink.lock().expect("lock").push((off, data.len()))),
        );
        let line = "é".repeat(1000) + "\n"; // 2001 bytes, multi-byte characters
        for _ in 0..20 {
            log.write(line.as_bytes());
        }
        log.write(b"done\n");
        log.flush();
        let file = std::fs::read(dir.path().join("r1.log")).expect("log file");
        assert_eq!(file.len() as u64, log.bytes());
        assert_eq!(log.bytes(), 20 * 2001 + 5);
        let tail = log.tail();
        assert!(tail.len() <= TAIL_BYTES && tail.len() > TAIL_BYTES - 4);
        assert!(tail.ends_with("done\n"));
        assert_eq!(log.last_line().as_deref(), Some("done"));
        let sent = sent.lock().expect("lock");
        let mut next = 0;
        for (off, len) in sent.iter() {
            assert_eq!(*off, next, "chunks are contiguous");
            next += *len as u64;
        }
        assert_eq!(next, log.bytes());
    }
}
