//! `roost worker list|revoke|credentials|token create|list|revoke`: the machines that run
//! agents, their credentials, and the tokens they join with (administrators only).

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{CreatedJoinToken, WorkerView};

use super::output::{fields, or_dash, print_only, table, when};
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
    /// Revoke a worker: its credential is refused on every node, its session ends, and its
    /// runs are handled as a lost worker's (lost, each retried once)
    Revoke {
        /// The worker's id
        id: String,
    },
    /// List the workers' credentials (no secrets): the worker each is bound to, revoked or not
    Credentials,
    /// Manage worker join tokens
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Mint a join token for a new worker (exchanged once, at its first start, for the
    /// worker's own credential); its secret is shown once
    Create {
        /// A label for the token [default: worker]
        #[arg(long)]
        name: Option<String>,
        /// Stop admitting workers after this long (seconds, or 90s, 30m, 24h, 7d)
        #[arg(long, value_parser = super::token::parse_ttl)]
        ttl: Option<u64>,
        /// Admit at most N workers, each worker id bound to the token for good (default:
        /// any number); `--uses 1` makes a token for exactly one worker
        #[arg(long)]
        uses: Option<u32>,
        /// Print only the token
        #[arg(short, long)]
        quiet: bool,
    },
    /// List the join tokens (no secrets): expiry, uses, bound workers
    List,
    /// Revoke a join token: no worker registers with it any more
    Revoke {
        /// The token's id (from `roost worker token list`)
        id: String,
    },
}

pub async fn run(session: &Session, args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        WorkerCommand::List => out.show(&client.list_workers().await?, |w| worker_table(w))?,
        WorkerCommand::Revoke { id } => {
            let view = client.revoke_worker(&id).await?;
            out.show(&view, super::token::revoked_text)?;
        }
        WorkerCommand::Credentials => out.show(&client.list_worker_credentials().await?, |l| {
            super::token::credential_table(l)
        })?,
        WorkerCommand::Token(TokenCommand::Create {
            name,
            ttl,
            uses,
            quiet,
        }) => {
            let token = client.create_join_token(name.as_deref(), ttl, uses).await?;
            if quiet {
                print_only(&token.token)?;
            } else {
                out.show(&token, token_text)?;
            }
        }
        WorkerCommand::Token(TokenCommand::List) => out
            .show(&client.list_join_tokens().await?, |l| {
                super::token::credential_table(l)
            })?,
        WorkerCommand::Token(TokenCommand::Revoke { id }) => {
            let view = client.revoke_join_token(&id).await?;
            out.show(&view, super::token::revoked_text)?;
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
        ("expires", or_dash(t.expires_at.map(when))),
        (
            "workers",
            t.max_uses.map_or("any number".into(), |n| {
                format!("at most {n}, each bound to it")
            }),
        ),
        ("token", t.token.clone()),
    ]);
    format!("{block}\nThe token is shown only now; give it to the worker to register with. It cannot call the API.\n")
}
