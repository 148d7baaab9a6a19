//! Supervision of a node's background tasks: the leader's duties (dispatcher, lease keeper,
//! agent timer) and the listeners.
//!
//! A duty that panics or returns is restarted after a short backoff; one that keeps failing
//! ([`Policy`]) trips the supervisor, which the node reports as not ready and acts on (it stops
//! Raft, so another node leads, and `roost server` exits non-zero so its supervisor restarts
//! it). Before this, a panic in the agent timer (an interval of `i64::MAX` seconds) ended
//! the leader's duties for good while the node looked healthy: nothing was dispatched again.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tracing::error;

/// When a failing task is restarted, and when it is given up on.
#[derive(Clone, Debug)]
pub struct Policy {
    /// This many failures of one task within `window` trip the supervisor.
    pub max_failures: usize,
    pub window: Duration,
    /// The wait before the first restart, doubled for each further failure in the window.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_failures: 5,
            window: Duration::from_secs(60),
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// A task the supervisor gave up on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskFailure {
    pub task: String,
    pub reason: String,
}

impl fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.task, self.reason)
    }
}

/// A cheap `Clone` handle: every clone reports to the same tripped state.
#[derive(Clone)]
pub struct Supervisor {
    policy: Arc<Policy>,
    tripped: Arc<watch::Sender<Option<TaskFailure>>>,
}

impl Supervisor {
    pub fn new(policy: Policy) -> Self {
        Supervisor {
            policy: Arc::new(policy),
            tripped: Arc::new(watch::channel(None).0),
        }
    }

    /// The first task given up on, if any.
    pub fn failure(&self) -> Option<TaskFailure> {
        self.tripped.borrow().clone()
    }

    /// Resolves once some task has been given up on.
    pub async fn tripped(&self) -> TaskFailure {
        let mut rx = self.tripped.subscribe();
        loop {
            if let Some(failure) = rx.borrow_and_update().clone() {
                return failure;
            }
            // The sender lives in `self`, so the channel never closes while we wait.
            if rx.changed().await.is_err() {
                return TaskFailure {
                    task: "supervisor".into(),
                    reason: "dropped".into(),
                };
            }
        }
    }

    /// Records `failure`; the first one recorded is the one reported.
    pub fn trip(&self, failure: TaskFailure) {
        self.tripped.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(failure);
            true
        });
    }

    /// Runs the future `start` makes in its own task, and a new one after each panic or
    /// return, until it has failed too often; then trips and returns the failure. Dropping
    /// the returned future aborts the running task.
    pub async fn supervise<F, Fut>(&self, name: &'static str, mut start: F) -> TaskFailure
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let policy = &self.policy;
        let mut failures: VecDeque<Instant> = VecDeque::new();
        loop {
            let reason = match AbortOnDrop(tokio::spawn(start())).await {
                Ok(()) => "returned".to_string(),
                Err(e) => describe(e),
            };
            let now = Instant::now();
            while failures
                .front()
                .is_some_and(|at| now.duration_since(*at) > policy.window)
            {
                failures.pop_front();
            }
            failures.push_back(now);
            if failures.len() >= policy.max_failures {
                error!(
                    task = name,
                    %reason,
                    failures = failures.len(),
                    window_s = policy.window.as_secs(),
                    "a background task keeps failing; giving up on it"
                );
                let failure = TaskFailure {
                    task: name.into(),
                    reason: format!(
                        "failed {} times within {:?}, last: {reason}",
                        failures.len(),
                        policy.window
                    ),
                };
                self.trip(failure.clone());
                return failure;
            }
            let doublings = u32::try_from(failures.len() - 1)
                .unwrap_or(u32::MAX)
                .min(16);
            let backoff = policy
                .backoff
                .saturating_mul(1 << doublings)
                .min(policy.max_backoff);
            error!(
                task = name,
                %reason,
                restart_in_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
                "a background task failed; restarting it"
            );
            tokio::time::sleep(backoff).await;
        }
    }

    /// Spawns `task`, which must run as long as the node does (a listener: its socket is gone
    /// once it ends, so it cannot be restarted). If it panics, or ends before `stop` flips, the
    /// supervisor trips at once. Aborting the returned handle aborts `task`.
    pub fn spawn_critical<E>(
        &self,
        name: &'static str,
        stop: watch::Receiver<bool>,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) -> JoinHandle<Result<(), E>>
    where
        E: From<TaskFailure> + fmt::Display + Send + 'static,
    {
        let supervisor = self.clone();
        tokio::spawn(async move {
            let (result, reason) = match AbortOnDrop(tokio::spawn(task)).await {
                Ok(Ok(())) => (Ok(()), "returned".to_string()),
                Ok(Err(e)) => {
                    let reason = format!("failed: {e}");
                    (Err(e), reason)
                }
                Err(e) => {
                    let failure = TaskFailure {
                        task: name.into(),
                        reason: describe(e),
                    };
                    (Err(E::from(failure.clone())), failure.reason)
                }
            };
            // A task that ends because another was given up on is no news.
            if !*stop.borrow() && supervisor.failure().is_none() {
                error!(task = name, %reason, "a task the node needs ended");
                supervisor.trip(TaskFailure {
                    task: name.into(),
                    reason,
                });
            }
            result
        })
    }
}

/// Why a task ended: its panic message, or that it was cancelled.
fn describe(e: JoinError) -> String {
    if !e.is_panic() {
        return "cancelled".into();
    }
    let payload = e.into_panic();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    format!("panicked: {message}")
}

/// A spawned task that is aborted when this handle is dropped, so a supervised task never
/// outlives its supervisor (a killed node's duties must stop with it).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
#[path = "supervise_tests.rs"]
mod tests;
