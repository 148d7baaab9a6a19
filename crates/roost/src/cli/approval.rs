//! `roost approval list|show|request|approve|reject|revise|comment`: approvals.
//! An agent or an operator asks (`request`), an operator decides, and the requesting agent
//! is woken with the decision.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use roost_client::{Approval, ApprovalDecision, ApprovalStatus, ApprovalType};

use super::output::{fields, indented, or_dash, table, when};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct ApprovalArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: ApprovalCommand,
}

#[derive(Subcommand)]
enum ApprovalCommand {
    /// A company's approvals, newest first
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// pending, revision_requested, approved, rejected or cancelled
        #[arg(long)]
        status: Option<ApprovalStatus>,
    },
    /// One approval with its payload, decision and comments
    Show { approval: String },
    /// Ask for an approval: approve_ceo_strategy, budget_override_required or
    /// request_board_approval (hires are asked for with the agent)
    Request {
        #[arg(long = "type")]
        approval_type: ApprovalType,
        /// The payload, a JSON object
        #[arg(long, default_value = "{}")]
        payload: String,
        /// Issues (id or PREFIX-N) that wait on the decision
        #[arg(long = "issue")]
        issues: Vec<String>,
        #[arg(long)]
        company: Option<String>,
    },
    /// Approve: the requester is woken with the decision
    Approve {
        approval: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Reject: the requester is woken with the decision
    Reject {
        approval: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Send back for revision: the requester is woken to change and resubmit it
    Revise {
        approval: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Comment on an approval
    Comment { approval: String, body: String },
}

pub async fn run(session: &Session, args: ApprovalArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    let decide = |id: String, decision, note: Option<String>| async move {
        let a = client
            .decide_approval(&id, decision, note.as_deref())
            .await?;
        out.show(&a, |a| format!("approval {} is {}\n", a.id, a.status))
    };
    match args.command {
        ApprovalCommand::List { company, status } => {
            let cid = session.company_id(company.as_deref()).await?;
            out.show(&client.list_approvals(&cid, status).await?, |l| {
                list_text(l)
            })?;
        }
        ApprovalCommand::Show { approval } => {
            out.show(&client.get_approval(&approval).await?, show_text)?;
        }
        ApprovalCommand::Request {
            approval_type,
            payload,
            issues,
            company,
        } => {
            let payload: serde_json::Value = serde_json::from_str(&payload)
                .context("--payload must be a JSON object, e.g. '{\"plan\": \"...\"}'")?;
            let cid = session.company_id(company.as_deref()).await?;
            let a = client
                .create_approval(&cid, approval_type, &payload, &issues)
                .await?;
            out.show(&a, |a| format!("asked: approval {} ({})\n", a.id, a.status))?;
        }
        ApprovalCommand::Approve { approval, note } => {
            decide(approval, ApprovalDecision::Approve, note).await?
        }
        ApprovalCommand::Reject { approval, note } => {
            decide(approval, ApprovalDecision::Reject, note).await?
        }
        ApprovalCommand::Revise { approval, note } => {
            decide(approval, ApprovalDecision::RequestRevision, note).await?
        }
        ApprovalCommand::Comment { approval, body } => {
            let c = client.comment_approval(&approval, &body).await?;
            out.show(&c, |c| format!("commented ({})\n", c.id))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn list_text(list: &[Approval]) -> String {
    if list.is_empty() {
        return "no approvals\n".into();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|a| {
            vec![
                a.id.clone(),
                a.approval_type.to_string(),
                a.status.to_string(),
                or_dash(a.requested_by_agent_id.clone()),
                a.issue_ids.len().to_string(),
                when(a.created_at),
            ]
        })
        .collect();
    table(
        &["ID", "TYPE", "STATUS", "REQUESTED BY", "ISSUES", "CREATED"],
        &rows,
    )
}

fn show_text(a: &Approval) -> String {
    let mut text = fields(&[
        ("id", a.id.clone()),
        ("type", a.approval_type.to_string()),
        ("status", a.status.to_string()),
        (
            "requested by",
            or_dash(
                a.requested_by_agent_id
                    .clone()
                    .or(a.requested_by_user_id.clone()),
            ),
        ),
        (
            "issues",
            or_dash((!a.issue_ids.is_empty()).then(|| a.issue_ids.join(", "))),
        ),
        ("decided by", or_dash(a.decided_by_user_id.clone())),
        ("decided at", or_dash(a.decided_at.map(when))),
        ("note", or_dash(a.decision_note.clone())),
    ]);
    text.push_str("payload:\n");
    text.push_str(&indented(
        &serde_json::to_string_pretty(&a.payload).unwrap_or_default(),
        2,
    ));
    for c in &a.comments {
        let who = c
            .author_agent_id
            .clone()
            .or(c.author_user_id.clone())
            .unwrap_or_default();
        text.push_str(&format!("\n{} {who}:\n", when(c.created_at)));
        text.push_str(&indented(&c.body, 2));
    }
    text
}
