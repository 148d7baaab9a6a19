//! `roost-faults`: runs one fault-injection scenario by name and seed outside `cargo test`,
//! prints the verdict and where the history is, and exits non-zero when a checker failed.
//! Ctrl-C (or SIGTERM) stops the run and drops its cluster: the nodes and the worker are
//! killed and the network namespaces removed before the command exits.
//!
//! ```text
//! roost-faults list
//! roost-faults run leader_partition --seed 7 --secs 60
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use roost_faults::{clock_seed, run, RunOptions, Scenario};

#[derive(Parser)]
#[command(
    name = "roost-faults",
    about = "Roost's fault-injection scenarios (needs root and network namespaces)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lists the scenarios.
    List,
    /// Runs one scenario and checks its history.
    Run {
        /// A scenario name from `roost-faults list`.
        scenario: String,
        /// The seed of the fault schedule and the workload (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        /// How long the faults and the workload last, in seconds.
        #[arg(long, default_value_t = 60)]
        secs: u64,
        /// The `roost` binary to run (default: `roost` next to this executable).
        #[arg(long)]
        roost_bin: Option<PathBuf>,
        /// Where the scenario's directory goes (default: `../tmp/faults` from this executable,
        /// i.e. `target/tmp/faults`).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// The directory of this executable (`target/debug` when built by cargo).
fn own_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this executable's path")?;
    exe.parent()
        .map(PathBuf::from)
        .context("this executable has no directory")
}

fn default_roost_bin() -> anyhow::Result<PathBuf> {
    let bin = own_dir()?.join("roost");
    anyhow::ensure!(
        bin.is_file(),
        "no roost binary at {}: build it first with `cargo build -p roost` (same profile as \
         roost-faults), or pass --roost-bin PATH",
        bin.display()
    );
    Ok(bin)
}

fn default_root() -> anyhow::Result<PathBuf> {
    let dir = own_dir()?;
    Ok(dir.parent().unwrap_or(&dir).join("tmp/faults"))
}

async fn run_one(
    name: &str,
    seed: Option<u64>,
    secs: u64,
    roost_bin: Option<PathBuf>,
    dir: Option<PathBuf>,
) -> anyhow::Result<()> {
    let scenario = Scenario::from_name(name).with_context(|| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        format!("no scenario `{name}`; one of: {}", names.join(", "))
    })?;
    let roost_bin = match roost_bin {
        Some(b) => b,
        None => default_roost_bin()?,
    };
    let root = match dir {
        Some(d) => d,
        None => default_root()?,
    };
    let options = RunOptions {
        scenario,
        seed: seed.unwrap_or_else(clock_seed),
        secs,
        roost_bin,
        root,
    };
    let report = run(&options).await?;
    println!(
        "PASSED {} seed {} in {:.0?}: {} faults; history in {}",
        scenario.name(),
        options.seed,
        report.elapsed,
        report.faults,
        report.dir.join("history.jsonl").display()
    );
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM. If neither can be listened for, says so and never resolves
/// (the run then goes on without that cleanup).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("cannot listen for SIGTERM: {e}");
            None
        }
    };
    let term = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            eprintln!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = ctrl_c => "Ctrl-C",
        () = term => "SIGTERM",
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => {
            for s in Scenario::ALL {
                println!("{:<20} {}", s.name(), s.description());
            }
            Ok(())
        }
        Command::Run {
            scenario,
            seed,
            secs,
            roost_bin,
            dir,
        } => {
            // On a signal the run's future is dropped here, and with it the cluster (its
            // processes killed, its namespaces removed).
            tokio::select! {
                r = run_one(&scenario, seed, secs, roost_bin, dir) => r,
                why = interrupted() => Err(anyhow::anyhow!(
                    "interrupted ({why}): the cluster was stopped and its namespaces removed"
                )),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e:#}");
            ExitCode::FAILURE
        }
    }
}
