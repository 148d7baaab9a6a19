//! `roost run start|show|finish|cancel|list`.

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
        ("created", r.created_at.to_string()),
        ("assigned", or_dash(r.assigned_at)),
        ("started", or_dash(r.started_at)),
        ("finished", or_dash(r.finished_at)),
    ])
}
