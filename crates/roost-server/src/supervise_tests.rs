//! The supervisor on a paused tokio clock: backoffs and windows pass without real waiting.

use std::time::Duration;

use tokio::sync::watch;

use super::*;

/// A task body that counts its starts in `starts` and does what `behave(start number)` says.
fn counted<B, Fut>(
    starts: &watch::Sender<usize>,
    behave: B,
) -> impl FnMut() -> Pin<Box<dyn Future<Output = ()> + Send>>
where
    B: Fn(usize) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let starts = starts.clone();
    move || {
        let n = {
            let mut n = 0;
            starts.send_modify(|s| {
                *s += 1;
                n = *s;
            });
            n
        };
        Box::pin(behave(n))
    }
}

async fn until_started(starts: &mut watch::Receiver<usize>, n: usize) {
    let waited = tokio::time::timeout(Duration::from_secs(3600), starts.wait_for(|s| *s >= n));
    match waited.await {
        Ok(Ok(_)) => {}
        other => panic!("the task was not started {n} times: {other:?}"),
    }
}

/// Regression: the heartbeat timer panicked once and the leader dispatched nothing
/// again. A duty that panics, or returns, is started again; the node stays ready.
#[tokio::test(start_paused = true)]
async fn a_task_that_panics_or_returns_is_restarted() {
    let supervisor = Supervisor::new(Policy::default());
    let (starts, mut started) = watch::channel(0);
    let task = counted(&starts, |n| async move {
        match n {
            1 => panic!("timer overflow"),
            2 => {}
            _ => std::future::pending().await,
        }
    });
    tokio::select! {
        failure = supervisor.supervise("agent timer", task) => {
            panic!("gave up after two failures: {failure}")
        }
        () = until_started(&mut started, 3) => {}
    }
    assert_eq!(supervisor.failure(), None, "two failures must not trip it");
}

/// A duty that fails on every start is given up on after `max_failures` starts: the
/// supervisor trips (the node then reports not ready and steps down), naming the task and
/// its panic.
#[tokio::test(start_paused = true)]
async fn a_task_that_keeps_panicking_trips_the_supervisor() {
    let supervisor = Supervisor::new(Policy::default());
    let (starts, started) = watch::channel(0);
    let task = counted(&starts, |_| async { panic!("timer overflow") });
    let failure = tokio::time::timeout(
        Duration::from_secs(600),
        supervisor.supervise("agent timer", task),
    )
    .await
    .expect("the supervisor gave up within the window");
    assert_eq!(*started.borrow(), 5, "restarted until the fifth failure");
    assert_eq!(failure.task, "agent timer");
    assert!(
        failure.reason.contains("timer overflow"),
        "{}",
        failure.reason
    );
    assert_eq!(supervisor.failure(), Some(failure.clone()));
    assert_eq!(supervisor.tripped().await, failure);
}

/// Failures further apart than the window are each forgiven: a duty that fails once a
/// minute is restarted for ever.
#[tokio::test(start_paused = true)]
async fn failures_spread_wider_than_the_window_never_trip() {
    let supervisor = Supervisor::new(Policy::default());
    let (starts, mut started) = watch::channel(0);
    let task = counted(&starts, |_| async {
        tokio::time::sleep(Duration::from_secs(61)).await;
        panic!("once a minute")
    });
    tokio::select! {
        failure = supervisor.supervise("dispatcher", task) => panic!("tripped: {failure}"),
        () = until_started(&mut started, 12) => {}
    }
    assert_eq!(supervisor.failure(), None);
}

/// Dropping the supervision (the node lost leadership, or was killed) stops the task: a
/// dispatcher must not go on running on a node that no longer leads.
#[tokio::test(start_paused = true)]
async fn dropping_the_supervision_aborts_the_task() {
    let supervisor = Supervisor::new(Policy::default());
    let (starts, mut started) = watch::channel(0);
    let (alive_tx, alive_rx) = watch::channel(());
    let task = counted(&starts, move |_| {
        let alive = alive_rx.clone();
        async move {
            let _alive = alive;
            std::future::pending().await
        }
    });
    tokio::select! {
        _ = supervisor.supervise("lease keeper", task) => panic!("a pending task tripped"),
        () = until_started(&mut started, 1) => {}
    }
    // The task held a receiver; once it is aborted and dropped, only the sender's own side
    // is left. (The closure's own copy went with the dropped supervise future.)
    tokio::time::timeout(Duration::from_secs(5), alive_tx.closed())
        .await
        .expect("the task still runs after its supervision was dropped");
}

#[derive(Debug, PartialEq)]
struct ListenerError(String);

impl From<TaskFailure> for ListenerError {
    fn from(f: TaskFailure) -> Self {
        ListenerError(f.to_string())
    }
}

impl fmt::Display for ListenerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A listener cannot be restarted (its socket is gone): one that ends while the node runs
/// trips the supervisor at once; one that ends because the node stops does not.
#[tokio::test(start_paused = true)]
async fn a_critical_task_that_ends_before_stop_trips_at_once() {
    let supervisor = Supervisor::new(Policy::default());
    let (stop, stop_rx) = watch::channel(false);
    let http = supervisor.spawn_critical("http server", stop_rx.clone(), async {
        Err::<(), _>(ListenerError("accept failed".into()))
    });
    let ended = http.await.expect("join");
    assert_eq!(ended, Err(ListenerError("accept failed".into())));
    let failure = supervisor.failure().expect("tripped");
    assert_eq!(failure.task, "http server");
    assert!(failure.reason.contains("accept failed"), "{failure}");

    let calm = Supervisor::new(Policy::default());
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let grpc = calm.spawn_critical("grpc server", stop_rx, async move {
        let _ = done_rx.await;
        Ok::<(), ListenerError>(())
    });
    let _ = stop.send(true);
    let _ = done_tx.send(());
    assert_eq!(grpc.await.expect("join"), Ok(()));
    assert_eq!(
        calm.failure(),
        None,
        "a listener stopped on request is no failure"
    );
}

/// A panicking listener is reported as the caller's error, and trips the supervisor.
#[tokio::test(start_paused = true)]
async fn a_critical_task_that_panics_trips_and_reports_the_panic() {
    let supervisor = Supervisor::new(Policy::default());
    let (_stop, stop_rx) = watch::channel(false);
    let task = supervisor.spawn_critical("grpc server", stop_rx, async {
        if true {
            panic!("listener exploded");
        }
        Ok::<(), ListenerError>(())
    });
    let ended = task.await.expect("join");
    assert!(
        matches!(&ended, Err(ListenerError(m)) if m.contains("listener exploded")),
        "{ended:?}"
    );
    assert!(supervisor.failure().is_some());
}
