//! A panic in apply ends the process.
//!
//! A panic halfway through an apply leaves the in-memory state, the open `state.db` transaction
//! and openraft's idea of what was applied out of step; openraft then stops its core while the
//! process goes on answering (writes failed with 500 while `/readyz` said ready).
//! Aborting instead lets a supervisor restart the node, which reloads `state.db` (the rows and
//! `last_applied` of one committed prefix) and replays the log from there.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, which keeps in its argument the log index it has reached. If `f` panics, logs the
/// panic with that index and aborts the process; it never unwinds into the caller.
pub(crate) fn or_abort<R>(what: &str, f: impl FnOnce(&mut u64) -> R) -> R {
    let mut index = 0;
    // Unwind safety does not matter: nothing touched by `f` is used again, the process ends.
    match catch_unwind(AssertUnwindSafe(|| f(&mut index))) {
        Ok(r) => r,
        Err(payload) => {
            tracing::error!(
                index,
                panic = panic_message(payload.as_ref()),
                "{what} panicked at this log index; aborting so the node restarts and replays \
                 the log from the state it last committed"
            );
            std::process::abort()
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic without a message)"
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    use super::*;

    /// Set in the child process this test starts; the child then panics inside the guard.
    const CHILD: &str = "ROOST_STORE_TEST_ABORT_CHILD";

    #[test]
    fn a_value_passes_through_when_nothing_panics() {
        assert_eq!(
            or_abort("apply", |at| {
                *at = 3;
                7
            }),
            7
        );
    }

    /// Regression: a panic in apply stopped openraft's core and left the node up,
    /// answering 500 to writes while it said it was ready. The test runs itself again in a
    /// child process, whose guarded closure panics at index 42: the child must die by SIGABRT
    /// (not exit, not unwind) and say where it stopped.
    #[test]
    fn a_panic_in_apply_aborts_the_process_instead_of_serving_on() {
        if std::env::var_os(CHILD).is_some() {
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .init();
            or_abort("apply", |at| {
                *at = 42;
                panic!("apply exploded");
            });
            // Unreachable when the guard works; the parent sees a clean exit and fails.
            return;
        }
        let name = concat!(
            module_path!(),
            "::a_panic_in_apply_aborts_the_process_instead_of_serving_on"
        );
        let name = name.split_once("::").map_or(name, |(_, rest)| rest);
        let exe = std::env::current_exe().expect("the test binary's path");
        let child = Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("run the test binary again");
        let stderr = String::from_utf8_lossy(&child.stderr);
        assert_eq!(
            child.status.signal(),
            Some(libc::SIGABRT),
            "the child was not aborted: {:?}\n{stderr}",
            child.status
        );
        assert!(
            stderr.contains("index=42") && stderr.contains("apply exploded"),
            "the abort is not logged with the index and the panic: {stderr}"
        );
    }
}
