//! `roost company list|create|show|update`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::NewCompany;
use roost_core::command::CompanyPatch;
use roost_core::{Company, CompanyStatus};

use super::output::{fields, print_only, table, when};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct CompanyArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: CompanyCommand,
}

#[derive(Subcommand)]
enum CompanyCommand {
    /// List the companies this token can see
    List,
    /// Create a company
    Create {
        #[arg(long)]
        name: String,
        /// Prefix of its issue identifiers (RST for RST-1) [default: from the name]
        #[arg(long)]
        prefix: Option<String>,
        /// Print only the new company's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Show one company by id
    Show { id: String },
    /// Rename, describe, pause, archive or reactivate a company (a company that is not active
    /// starts no runs)
    Update {
        id: String,
        #[arg(long)]
        name: Option<String>,
        /// A description; an empty one clears it
        #[arg(long)]
        description: Option<String>,
        /// active, paused or archived
        #[arg(long)]
        status: Option<CompanyStatus>,
        /// Seconds an issue may stay blocked before its assignee's manager is woken
        #[arg(long, value_name = "SECS")]
        escalate_blocked_after: Option<u32>,
        /// Seconds an assigned open issue with nothing left to wake its agent stays quiet
        /// before the agent is woken again (0 turns it off)
        #[arg(long, value_name = "SECS")]
        recover_stranded_after: Option<u32>,
    },
}

pub async fn run(session: &Session, args: CompanyArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        CompanyCommand::List => out.show(&client.list_companies().await?, |c| company_table(c))?,
        CompanyCommand::Create {
            name,
            prefix,
            quiet,
        } => {
            let company = client
                .create_company(&NewCompany {
                    name,
                    issue_prefix: prefix,
                })
                .await?;
            if quiet {
                print_only(&company.id)?
            } else {
                out.show(&company, company_fields)?
            }
        }
        CompanyCommand::Show { id } => out.show(&client.get_company(&id).await?, company_fields)?,
        CompanyCommand::Update {
            id,
            name,
            description,
            status,
            escalate_blocked_after,
            recover_stranded_after,
        } => {
            let patch = CompanyPatch {
                name,
                description: description.map(|d| Some(d).filter(|d| !d.trim().is_empty())),
                status,
                require_board_approval_for_new_agents: None,
                loop_breaker: None,
                escalate_blocked_after_secs: escalate_blocked_after,
                recover_stranded_after_secs: recover_stranded_after,
            };
            if patch == CompanyPatch::default() {
                anyhow::bail!(
                    "nothing to change: give --name, --description, --status, --escalate-blocked-after or \
                     --recover-stranded-after"
                );
            }
            out.show(&client.update_company(&id, &patch).await?, company_fields)?
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn company_table(companies: &[Company]) -> String {
    let rows: Vec<Vec<String>> = companies
        .iter()
        .map(|c| {
            vec![
                c.id.clone(),
                c.issue_prefix.clone(),
                c.issue_counter.to_string(),
                when(c.created_at),
                c.name.clone(),
            ]
        })
        .collect();
    table(&["ID", "PREFIX", "ISSUES", "CREATED", "NAME"], &rows)
}

/// A company's timer setting: `off` for 0.
fn secs_or_off(secs: u32) -> String {
    if secs == 0 {
        "off".into()
    } else {
        format!("{secs}s")
    }
}

fn company_fields(c: &Company) -> String {
    fields(&[
        ("id", c.id.clone()),
        ("name", c.name.clone()),
        ("status", c.status.to_string()),
        ("description", c.description.clone().unwrap_or_default()),
        ("prefix", c.issue_prefix.clone()),
        ("issues", c.issue_counter.to_string()),
        (
            "escalate blocked after",
            secs_or_off(c.escalate_blocked_after_secs),
        ),
        (
            "recover stranded after",
            secs_or_off(c.recover_stranded_after_secs),
        ),
        ("created", c.created_at.to_string()),
        ("updated", c.updated_at.to_string()),
    ])
}
