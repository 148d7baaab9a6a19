//! `roost run start|show|finish|cancel|list|log`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::RunFilter;
use roost_core::{Run, RunStatus};

use super::output::{fields, or_dash, print_only, table, when};
use super::{AgentNames, ClientOpts, IssueLabels, Session};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: RunCommand,
}

#[derive(Subcommand)]
enum RunCommand {
    /// Start a run for an agent by hand (administrators)
    Start {
        /// Agent id or name
        #[arg(long)]
        agent: String,
        /// Issue the run is about (id or identifier)
        #[arg(long)]
        issue: Option<String>,
        /// Print only the run id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Show one run
    Show { id: String },
    /// End a run; its checkouts are released in the same change
    Finish {
        id: String,
        /// succeeded, failed or cancelled
        #[arg(long)]
        status: RunStatus,
        /// Why it failed
        #[arg(long)]
        error: Option<String>,
    },
    /// Cancel a live run; its checkouts are released in the same change
    Cancel { id: String },
    /// Print a run's log (the live output while it runs, the kept tail once it ended)
    Log {
        id: String,
        /// Keep printing as the run writes, until it ends
        #[arg(short, long)]
        follow: bool,
        /// Start at this byte of the log
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    /// List a company's runs, newest first
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Only this agent's runs (id or name)
        #[arg(long)]
        agent: Option<String>,
        /// At most this many runs
        #[arg(long)]
        limit: Option<usize>,
    },
}

pub async fn run(session: &Session, args: RunArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        RunCommand::Start {
            agent,
            issue,
            quiet,
        } => {
            // With an issue, its company is where the agent is looked for.
            let company_id = match &issue {
                Some(issue) => Some(client.get_issue(issue).await?.company_id),
                None => None,
            };
            let agent_id = session.agent_id(&agent, company_id.as_deref()).await?;
            let run = client.start_run(&agent_id, issue.as_deref()).await?;
            if quiet {
                print_only(&run.id)?;
                return Ok(ExitCode::SUCCESS);
            }
            out.show(&run, |r| {
                format!(
                    "{}\nAct for this run with --run-id {} or:\n  export ROOST_RUN_ID={}\n",
                    run_fields(r),
                    r.id,
                    r.id
                )
            })?;
        }
        RunCommand::Show { id } => out.show(&client.get_run(&id).await?, run_fields)?,
        RunCommand::Finish { id, status, error } => out.show(
            &client.finish_run(&id, status, error.as_deref()).await?,
            run_fields,
        )?,
        RunCommand::Cancel { id } => out.show(&client.cancel_run(&id).await?, run_fields)?,
        RunCommand::Log { id, follow, offset } => {
            use std::io::Write;
            if out.is_json() {
                // One page; scripts follow by passing nextOffset back.
                out.show(&client.run_log(&id, offset).await?, |p| p.content.clone())?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut stdout = std::io::stdout();
            let mut print = |bytes: &[u8]| {
                let _ = stdout.write_all(bytes);
                let _ = stdout.flush();
            };
            if follow {
                client.follow_run_log(&id, offset, &mut print).await?;
            } else {
                print(client.run_log(&id, offset).await?.content.as_bytes());
            }
        }
        RunCommand::List {
            company,
            agent,
            limit,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let agent_id = match agent {
                Some(agent) => Some(session.agent_id(&agent, Some(&company_id)).await?),
                None => None,
            };
            let runs = client
                .list_runs(&company_id, &RunFilter { agent_id, limit })
                .await?;
            let (names, issues) = if out.is_json() {
                (AgentNames::default(), IssueLabels::default())
            } else {
                (
                    session.agent_names(&company_id).await,
                    session.issue_labels(&company_id).await,
                )
            };
            out.show(&runs, |r| run_table(r, &names, &issues))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Why the run exists: the reason of the wake it answers, or how it was started by hand.
fn reason(r: &Run) -> String {
    r.wake_reason
        .map(|w| w.to_string())
        .unwrap_or_else(|| r.invocation_source.clone())
}

pub(super) fn run_table(runs: &[Run], names: &AgentNames, issues: &IssueLabels) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.status.to_string(),
                names.label(Some(&r.agent_id)),
                issues.label(r.issue_id.as_deref()),
                reason(r),
                or_dash(r.worker_id.as_deref()),
                when(r.created_at),
                or_dash(r.error.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "ID", "STATUS", "AGENT", "ISSUE", "REASON", "WORKER", "CREATED", "ERROR",
        ],
        &rows,
    )
}

fn session(r: &Run) -> String {
    match (&r.session_id_before, &r.session_id_after) {
        (None, None) => "-".into(),
        (Some(b), Some(a)) if b == a => format!("resumed {a}"),
        (Some(b), Some(a)) if r.session_reset => format!("{b} refused; fresh {a}"),
        (before, after) => format!(
            "{} -> {}",
            or_dash(before.as_deref()),
            or_dash(after.as_deref())
        ),
    }
}

pub(super) fn run_fields(r: &Run) -> String {
    let comments = if r.comment_ids.is_empty() {
        "-".to_string()
    } else {
        r.comment_ids.join(",")
    };
    fields(&[
        ("run", r.id.clone()),
        ("status", r.status.to_string()),
        ("agent", r.agent_id.clone()),
        ("issue", or_dash(r.issue_id.as_deref())),
        ("source", r.invocation_source.clone()),
        ("wake", or_dash(r.wake_id.as_deref())),
        ("reason", or_dash(r.wake_reason)),
        ("comments", comments),
        ("worker", or_dash(r.worker_id.as_deref())),
        ("retry of", or_dash(r.retry_of_run_id.as_deref())),
        ("error", or_dash(r.error.as_deref())),
        ("summary", or_dash(r.summary.as_deref())),
        ("session", session(r)),
        (
            "usage",
            format!(
                "{} in ({} cached), {} out, ${:.4}",
                r.usage.input_tokens,
                r.usage.cached_input_tokens,
                r.usage.output_tokens,
                r.usage.cost_micro_usd as f64 / 1e6
            ),
        ),
        (
            "log",
            format!("{} bytes (roost run log {})", r.log_bytes, r.id),
        ),
        ("created", r.created_at.to_string()),
        ("assigned", or_dash(r.assigned_at)),
        ("started", or_dash(r.started_at)),
        ("finished", or_dash(r.finished_at)),
    ])
}
