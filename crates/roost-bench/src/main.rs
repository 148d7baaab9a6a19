//! `roost-bench`: measures Roost from a client's side, on in-process nodes (one process, real
//! Raft over loopback gRPC, SQLite with fsync).
//!
//! - `checkout`: checkout/release cycles at several client counts, over REST and gRPC, on a
//!   single node or a 3-node cluster; throughput and checkout latency percentiles.
//! - `failover`: a 3-node cluster; the leader is killed while a writer runs; the time from the
//!   kill to the first acknowledged write, over many trials.
//! - `wake`: a 3-node cluster and a worker; wake request to assignment received.
//! - `lost-worker`: a worker holding a checked-out run dies (killed, or silent); the time until
//!   the issue is free again and until the retry reaches another worker.
//! - `etcd-checkout`: the checkout workload and leader failover on 3 etcd processes and 3
//!   `roost server` processes, side by side (bench/etcd-vs-roost.sh); `--tls` runs both with
//!   TLS everywhere.
//! - `workers`: a 3-node cluster of real `roost server` processes and many simulated workers;
//!   the leader's CPU and memory per worker, and wake-to-assignment latency under that load.
//! - `scale`: a 3-node cluster of real `roost server` processes whose issues grow step by step
//!   (10^3 to 10^6, all but the first 1000 created done); at each step creation rate,
//!   checkout throughput and latency on random open issues, close latency, leader and
//!   follower memory (per closed issue too), database sizes, list latency, follower catch-up.
//! - `apply`: the checkout workload's log entries encoded, decoded and applied through one
//!   node's state machine in this process, on one thread: CPU time per write, and under
//!   callgrind the instruction counts that show a change of a few percent (BENCHMARKS.md,
//!   "Apply on one thread").
//! - `big-writes`: a 3-node cluster; writers save documents of about 500 KB at once; failed
//!   writes, new terms (elections), throughput and latency.
//! - `memory`: agent memory log entries (10^4 to 10^6) in a `state.db` written through the
//!   store's own rows; search latency, bytes per entry on disk and in memory, and the time to
//!   render the prompt's recent entries.

mod apply;
mod big_writes;
mod checkout;
mod etcd;
mod etcd_cluster;
mod etcd_failover;
mod etcd_pb;
mod etcd_points;
mod etcd_table;
mod failover;
mod lost_worker;
mod memory;
mod procs;
mod scale;
mod scale_load;
mod scale_pair;
mod stats;
mod tls_setup;
mod wake;
mod workers;

use clap::{Parser, Subcommand};

/// The servers' allocator (`roost/src/main.rs`), so that `apply` measures what a node pays;
/// the simulated clients of the other benchmarks run on it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "Roost benchmarks (prints numbers; not a test)")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Checkout throughput and latency
    Checkout(checkout::CheckoutArgs),
    /// Leader failover time: kill of the leader to the first acknowledged write
    Failover(failover::FailoverArgs),
    /// Wake request to assignment received by a worker
    Wake(wake::WakeArgs),
    /// Lost-worker release time: a worker holding a checked-out run dies; until the issue is
    /// free, and until the retry reaches another worker
    LostWorker(lost_worker::LostWorkerArgs),
    /// The checkout workload and failover on a 3-member etcd cluster and a 3-node Roost
    /// cluster (processes on loopback), side by side
    EtcdCheckout(etcd::EtcdArgs),
    /// Leader CPU and memory per connected worker, and assignment latency, on `roost server`
    /// processes with many simulated workers
    Workers(workers::WorkersArgs),
    /// Throughput, latency, memory and storage as the number of issues grows (10^3 to 10^6),
    /// on `roost server` processes
    Scale(scale::ScaleArgs),
    /// CPU time per write of decoding and applying the checkout workload's entries through
    /// one node's state machine (in-process store, no server, one thread)
    Apply(apply::ApplyArgs),
    /// Agent memory at 10^4 to 10^6 log entries: search latency, bytes per entry on disk and
    /// in memory, prompt rendering time (in-process store, no server)
    Memory(memory::MemoryArgs),
    /// Concurrent writes of documents of about 500 KB on a 3-node cluster: failed writes,
    /// new terms (elections), throughput and latency
    BigWrites(big_writes::BigWritesArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::Checkout(a) => checkout::run(a).await,
        Command::Failover(a) => failover::run(a).await,
        Command::Wake(a) => wake::run(a).await,
        Command::LostWorker(a) => lost_worker::run(a).await,
        Command::EtcdCheckout(a) => etcd::run(a).await,
        Command::Workers(a) => workers::run(a).await,
        Command::Scale(a) => scale::run(a).await,
        Command::Apply(a) => apply::run(a).await,
        Command::Memory(a) => memory::run(a).await,
        Command::BigWrites(a) => big_writes::run(a).await,
    }
}
