//! `roost worker list|token create`: the machines that run agents, and the tokens they join
//! with (administrators only).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{CreatedJoinToken, WorkerView};

use super::output::{fields, print_only, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: WorkerCommand,
}

#[derive(Subcommand)]
enum WorkerCommand {
    /// List the registered workers and their live runs
    List,
    /// Manage worker join tokens
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Mint a join token for a new worker; its secret is shown once
    Create {
        /// A label for the token [default: worker]
        #[arg(long)]
        name: Option<String>,
        /// Print only the token
        #[arg(short, long)]
        quiet: bool,
    },
}

pub async fn run(session: &Session, args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        WorkerCommand::List => out.show(&client.list_workers().await?, |w| worker_table(w))?,
        WorkerCommand::Token(TokenCommand::Create { name, quiet }) => {
            let token = client.create_worker_join_token(name.as_deref()).await?;
            if quiet {
                print_only(&token.token)?;
            } else {
                out.show(&token, token_text)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `-` for an empty list, else the items comma-separated.
fn csv_or_dash(items: Vec<String>) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

pub(super) fn worker_table(workers: &[WorkerView]) -> String {
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|v| {
            let w = &v.worker;
            vec![
                w.id.clone(),
                w.name.clone(),
                w.status.to_string(),
                csv_or_dash(w.adapters.iter().map(|a| a.to_string()).collect()),
                w.slots.to_string(),
                v.live_runs.to_string(),
                csv_or_dash(w.labels.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                w.version.clone(),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "NAME",
            "STATUS",
            "ADAPTERS",
            "SLOTS",
            "LIVE RUNS",
            "LABELS",
            "VERSION",
        ],
        &rows,
    )
}

fn token_text(t: &CreatedJoinToken) -> String {
    let block = fields(&[
        ("token id", t.id.clone()),
        ("name", t.name.clone()),
        ("token", t.token.clone()),
    ]);
    format!("{block}\nThe token is shown only now; give it to the worker to register with. It cannot call the API.\n")
}
