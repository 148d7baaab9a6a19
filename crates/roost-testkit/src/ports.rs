//! Ports for test servers that a process binds later or binds again after a restart: taken
//! below the kernel's ephemeral range (32768-60999 by default), from which every `bind(:0)` and
//! every outgoing connection's source port come. A port picked by binding `:0` and released
//! could be taken by an agent's `curl` or another test's listener before the server bound it
//! (seen as "Address already in use" at a node's start, and as a request answered by another
//! test's server after a restart).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};

/// The range ports are handed out from, below the ephemeral range.
const FIRST: u16 = 20_000;
const LAST: u16 = 32_000;

/// The next port to try: each test process starts at its own place in the range, so two test
/// binaries running at once rarely meet, and within a process no port is handed out twice.
static NEXT: AtomicU16 = AtomicU16::new(0);

fn next_candidate() -> u16 {
    let span = LAST - FIRST;
    let start = (std::process::id() % u32::from(span)) as u16;
    let _ = NEXT.compare_exchange(0, start + 1, Ordering::Relaxed, Ordering::Relaxed);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    FIRST + n % span
}

/// A listener on a free port of 127.0.0.1 outside the ephemeral range.
pub fn listener() -> std::io::Result<TcpListener> {
    let mut last = None;
    for _ in 0..(LAST - FIRST) {
        match TcpListener::bind(("127.0.0.1", next_candidate())) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free port")))
}

/// `127.0.0.1:<port>` for a server to bind (the probe's listener is closed on return).
pub fn free_addr() -> std::io::Result<String> {
    Ok(listener()?.local_addr()?.to_string())
}

/// A free port, as [`free_addr`].
pub fn free_port() -> std::io::Result<u16> {
    Ok(listener()?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_not_repeated() {
        let a = free_port().expect("a port");
        let b = free_port().expect("another");
        assert_ne!(a, b);
        for p in [a, b] {
            assert!((FIRST..LAST).contains(&p), "{p}");
        }
    }
}
