//! Test harnesses for Roost: in-process nodes on pre-bound loopback ports, a raw HTTP client
//! that keeps status codes, real `roost` processes (one launcher of server clusters,
//! [`ProcessCluster`]), a TCP proxy that can be cut, and waiting
//! on observable state.

mod cluster;
mod http;
pub mod model;
mod netns;
mod node;
pub mod ports;
mod process;
mod process_cluster;
mod proxy;
mod worker;

pub use cluster::{test_timing, TestCluster};
pub use http::{client_trusting, Http, Reply};
pub use netns::{NetCluster, Signal};
pub use node::TestNode;
pub use process::RoostProcess;
pub use process_cluster::{
    die_with_harness, server_command, Layout, NodeAddrs, ProcessCluster, ProcessClusterBuilder,
    ServerNode,
};
pub use proxy::CutProxy;
pub use worker::{worker_credential, TestWorker};

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or fails after `deadline`. Never a bare sleep: the
/// wait ends as soon as the state is observed.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if start.elapsed() > deadline {
            anyhow::bail!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
