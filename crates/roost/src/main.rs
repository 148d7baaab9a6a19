//! `roost`: runs a node (`dev`, `server`) or talks to a running cluster (every other command).

mod cert;
mod check;
mod cli;
mod config;
mod dev;
mod preflight;
mod stopping;
mod telemetry;
mod worker_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// glibc's allocator spent a fifth of the servers' CPU at 64 clients (malloc, free and their
/// consolidation; BENCHMARKS.md, "Profile"): the write path allocates many small short-lived
/// buffers on several threads, which mimalloc's per-thread free lists serve without locks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "roost",
    version,
    about = "A replicated control plane for fleets of AI agents"
)]
struct Args {
    /// How `dev`, `server` and `run-worker` write their logs to stderr
    #[arg(long, global = true, env = "ROOST_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Export `dev`'s, `server`'s and `run-worker`'s spans to this OpenTelemetry collector
    /// (OTLP over HTTP, e.g. http://collector:4318); off when unset
    #[arg(long, global = true, env = "ROOST_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines (coloured on a terminal only)
    Text,
    /// One JSON object per line, for log collectors
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a single-node cluster on this machine, with its data in ./.roost
    Dev(dev::DevArgs),
    /// Run a cluster node from a TOML config file
    Server(config::ServerArgs),
    /// Run agents for a cluster on this machine (the `process` adapter)
    #[command(name = "run-worker")]
    RunWorker(worker_cmd::WorkerArgs),
    /// Make a cluster CA and certificates for nodes, workers and clients
    Cert(cert::CertArgs),
    #[command(flatten)]
    Client(cli::ClientCommand),
}

/// How a process that runs a node or a worker logs and traces.
#[derive(Clone)]
struct Observe {
    format: LogFormat,
    otlp_endpoint: Option<String>,
}

/// Logs go to stderr: `ROOST_LOG` filters them (default `info,openraft=warn,sqlx=warn`);
/// `--log-format json` (`ROOST_LOG_FORMAT=json`) writes one JSON object per line for log
/// collectors. Colours only on a terminal, and never with `NO_COLOR` set: a file or a journal
/// gets plain text. With an OTLP endpoint the same filtered spans are exported too
/// (`telemetry.rs`); the exporter is returned to be shut down last.
fn init_tracing(observe: &Observe) -> anyhow::Result<Option<telemetry::Otlp>> {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let filter = EnvFilter::try_from_env("ROOST_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn,sqlx=warn"));
    let json = observe.format == LogFormat::Json;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour && !json);
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    match observe.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => {
            let (otlp, layer) = telemetry::Otlp::start(endpoint)?;
            registry.with(layer).init();
            Ok(Some(otlp))
        }
        None => {
            registry.init();
            Ok(None)
        }
    }
}

/// Runs `task` with tracing set up, and exports the last spans after it.
async fn observed(
    observe: Observe,
    task: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    let otlp = init_tracing(&observe)?;
    let result = task.await;
    if let Some(otlp) = otlp {
        otlp.shutdown().await;
    }
    result
}

/// A server holds one socket per worker and per client: it raises its soft open-file limit to
/// the hard limit, as nginx and etcd do. At the usual soft limit of 1024 a leader with a thousand
/// workers ran out, and tonic's accept loop retrying at once kept a core busy until the leader
/// lost its leadership.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct we pass.
    let raised = unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && {
            let before = limit.rlim_cur;
            limit.rlim_cur = limit.rlim_max;
            before == limit.rlim_max || libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0
        }
    };
    if raised {
        tracing::info!(open_files = limit.rlim_cur, "open-file limit");
    } else {
        tracing::warn!("could not raise the open-file limit; many workers may exhaust it");
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let observe = Observe {
        format: args.log_format,
        otlp_endpoint: args.otlp_endpoint.clone(),
    };
    match args.command {
        Command::Server(a) => {
            // The config names the runtime's threads: it is read before the runtime starts.
            // `--check` stops here, with what a start would have said.
            let config = match config::load_checked(&a) {
                Ok(c) => c,
                Err(e) => return failure(&e),
            };
            if a.check {
                return config::check(&config, a.json);
            }
            run_on_runtime(
                config.runtime_threads,
                observed(observe, async move {
                    raise_open_file_limit();
                    config::run_server(config).await
                }),
            )
        }
        Command::Dev(a) => run_on_runtime(
            None,
            observed(observe, async move {
                raise_open_file_limit();
                dev::run(a).await
            }),
        ),
        // Loading and checking a worker's config needs no runtime.
        Command::RunWorker(a) if a.check => match worker_cmd::check(&a) {
            Ok(code) => code,
            Err(e) => failure(&e),
        },
        Command::RunWorker(a) => run_on_runtime(None, observed(observe, worker_cmd::run(a))),
        Command::Cert(a) => match cert::run(a) {
            Ok(code) => code,
            Err(e) => failure(&e),
        },
        Command::Client(c) => run_on_runtime(None, cli::run(c)),
    }
}

/// The name of the runtime's threads (its workers and its blocking pool).
const RUNTIME_THREAD_NAME: &str = "roost-runtime";

/// Runs `task` on a multi-threaded runtime with `threads` workers (default: one per CPU; set
/// here, so tokio's own `TOKIO_WORKER_THREADS` plays no part).
fn run_on_runtime(
    threads: Option<usize>,
    task: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(RUNTIME_THREAD_NAME)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(task) {
        Ok(code) => code,
        Err(e) => failure(&e),
    }
}

fn failure(e: &anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    ExitCode::FAILURE
}
