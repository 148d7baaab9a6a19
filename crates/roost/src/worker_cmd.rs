//! `roost run-worker --config roost-worker.toml`: run agents' runs for a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use roost_worker::{Stop, WorkerConfig};
use tokio::time::Instant;

use crate::stopping::{exit_now, watchdog, Signals, HARD_MARGIN};

#[derive(Args)]
pub struct WorkerArgs {
    /// TOML config file (see deploy/roost-worker.toml)
    #[arg(long)]
    config: PathBuf,
    /// Seconds a stopping worker (SIGTERM, SIGINT) lets its agents finish and reports their
    /// results (default 10); config `shutdown_grace_secs`, env `ROOST_SHUTDOWN_GRACE_SECS`
    #[arg(long)]
    shutdown_grace_secs: Option<u64>,
    /// Load and check the configuration as a start would (TLS files included), print a
    /// summary and exit: 0 if a start would accept it, 1 with the start's error if not. Opens
    /// no connection and writes nothing (no credential, no CA bundle)
    #[arg(long)]
    pub check: bool,
    /// With --check: print the summary as JSON
    #[arg(long, requires = "check")]
    pub json: bool,
}

/// The config file, then `ROOST_JOIN_TOKEN` and `ROOST_SHUTDOWN_GRACE_SECS`, then flags.
fn load(args: &WorkerArgs) -> anyhow::Result<WorkerConfig> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read {}", args.config.display()))?;
    let mut config: WorkerConfig = toml::from_str(&text)
        .with_context(|| format!("invalid config {}", args.config.display()))?;
    if let Ok(token) = std::env::var("ROOST_JOIN_TOKEN") {
        config.join_token = token;
    }
    if let Ok(v) = std::env::var("ROOST_SHUTDOWN_GRACE_SECS") {
        config.shutdown_grace_secs = crate::config::parse_grace_secs(&v)?;
    }
    if let Some(v) = args.shutdown_grace_secs {
        config.shutdown_grace_secs = v;
    }
    roost_worker::check_shutdown_grace("shutdown_grace_secs", config.shutdown_grace_secs)
        .map_err(anyhow::Error::msg)?;
    Ok(config)
}

/// `roost run-worker --check`: [`load`] and the checks `roost_worker::run_until` starts with
/// (`WorkerConfig::validate`, which reads the TLS files), then the summary. The error of a
/// refused config is the one a start prints.
pub fn check(args: &WorkerArgs) -> anyhow::Result<ExitCode> {
    let config = load(args)?;
    config.validate()?;
    crate::check::print(
        &crate::check::worker_report(&config),
        &crate::check::worker_text(&config),
        args.json,
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs the worker; on SIGTERM or SIGINT its agents get `shutdown_grace_secs` to finish, then
/// are stopped and reported. Exits non-zero when a run was cut off or a result not delivered.
pub async fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args)?;
    let grace = config.shutdown_grace();
    let mut signals = Signals::install()?;
    let (stop, stop_rx) = tokio::sync::watch::channel(Stop::Running);
    let worker = roost_worker::run_until(config, stop_rx);
    tokio::pin!(worker);
    let signal = tokio::select! {
        result = &mut worker => {
            result?;
            return Ok(ExitCode::SUCCESS);
        }
        signal = signals.recv() => signal,
    };
    tracing::info!(
        signal,
        grace_secs = grace.as_secs(),
        "stopping (a second signal stops the agents at once)"
    );
    let _ = stop.send(Stop::Drain {
        by: Instant::now() + grace,
    });
    watchdog("roost run-worker", grace + HARD_MARGIN);
    let stopped = tokio::select! {
        result = &mut worker => result?,
        signal = signals.recv() => {
            // The agents are stopped (SIGTERM, then SIGKILL) and what can be reported is.
            tracing::warn!(signal, "stopping the agents now");
            let _ = stop.send(Stop::Now);
            tokio::select! {
                result = &mut worker => result?,
                signal = signals.recv() => exit_now("roost run-worker", signal),
            }
        }
    };
    Ok(if stopped.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
