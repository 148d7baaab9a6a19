//! `roost worker --config roost-worker.toml`: run agent heartbeats for a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use roost_worker::WorkerConfig;

#[derive(Args)]
pub struct WorkerArgs {
    /// TOML config file (see deploy/roost-worker.toml)
    #[arg(long)]
    config: PathBuf,
}

pub async fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read {}", args.config.display()))?;
    let mut config: WorkerConfig = toml::from_str(&text)
        .with_context(|| format!("invalid config {}", args.config.display()))?;
    if let Ok(token) = std::env::var("ROOST_JOIN_TOKEN") {
        config.join_token = token;
    }
    roost_worker::run(config, crate::shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
