//! `roost label list|create|delete`: a company's issue labels. An issue carries labels in its
//! `labelIds` (`roost issue list --label <id>` filters by one); deleting a label takes it off
//! every issue.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::Label;

use super::output::{one_line, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct LabelArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: LabelCommand,
}

#[derive(Subcommand)]
enum LabelCommand {
    /// A company's labels, by name
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
    },
    /// Add a label
    Create {
        /// 1-48 characters, unique in the company
        name: String,
        /// #RRGGBB, e.g. #d73a4a
        #[arg(long)]
        color: String,
        #[arg(long)]
        company: Option<String>,
    },
    /// Delete a label; it leaves every issue that carried it
    Delete { label: String },
}

pub async fn run(session: &Session, args: LabelArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        LabelCommand::List { company } => {
            let cid = session.company_id(company.as_deref()).await?;
            out.show(&client.list_labels(&cid).await?, |l| labels_text(l))?;
        }
        LabelCommand::Create {
            name,
            color,
            company,
        } => {
            let cid = session.company_id(company.as_deref()).await?;
            let l = client.create_label(&cid, &name, &color).await?;
            out.show(&l, |l| {
                format!("created label {} ({})\n", l.id, one_line(&l.name))
            })?;
        }
        LabelCommand::Delete { label } => {
            let l = client.delete_label(&label).await?;
            out.show(&l, |l| {
                format!("deleted label {} ({})\n", l.id, one_line(&l.name))
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn labels_text(labels: &[Label]) -> String {
    if labels.is_empty() {
        return "no labels\n".into();
    }
    let rows: Vec<Vec<String>> = labels
        .iter()
        .map(|l| vec![l.id.clone(), l.name.clone(), l.color.clone()])
        .collect();
    table(&["ID", "NAME", "COLOR"], &rows)
}
