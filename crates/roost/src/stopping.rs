//! How `roost dev`, `roost server` and `roost run-worker` stop. The first SIGTERM or SIGINT
//! starts a clean stop bounded by `shutdown_grace_secs`; a second one, or the grace running out
//! by more than [`HARD_MARGIN`], ends the process at once with a non-zero status.
//!
//! Once tokio has a handler for a signal, the signal no longer kills the process: a stop that
//! stalled after the first signal (`roost dev`, held by its worker's connection and then
//! by whatever the runtime waited on, commit 8a69939) ignored every later SIGTERM and SIGINT.
//! So the handlers stay installed for the whole run and every later signal is acted on, and a
//! watchdog thread, outside the runtime, ends a stop that overruns.

use std::time::Duration;

/// How far past its grace a stopping process may run before the watchdog ends it.
pub(crate) const HARD_MARGIN: Duration = Duration::from_secs(2);

/// The stop signals, listened to from the start to the end of the process.
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn install() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use anyhow::Context;
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
                int: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next SIGTERM or SIGINT; its name.
    pub(crate) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Ends the process once `within` has passed, unless it has exited by then: a clean stop that
/// overruns (a task that ignores cancellation, a blocking call) must still end. The thread is
/// outside the async runtime, so nothing in it can hold the watchdog up.
pub(crate) fn watchdog(what: &'static str, within: Duration) {
    let spawned = std::thread::Builder::new()
        .name("roost-stop-watchdog".into())
        .spawn(move || {
            std::thread::sleep(within);
            eprintln!("error: {what} did not stop within {within:?}; exiting now");
            std::process::exit(1);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the stop watchdog");
    }
}

/// A second signal during a stop: exits now, non-zero. Acknowledged writes are already
/// fsynced in the Raft log (ARCHITECTURE.md, "Invariants"); nothing else is waited for.
pub(crate) fn exit_now(what: &str, signal: &str) -> ! {
    eprintln!("{signal} again: {what} exits now");
    std::process::exit(1);
}
