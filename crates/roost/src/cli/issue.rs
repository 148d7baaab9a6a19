//! `roost issue list|create|show|update|comment|comments|checkout|release|delete`, and
//! `roost issue document ...` (`document.rs`), `roost issue interaction ...` (`interaction.rs`)
//! and `roost issue monitor ...` (`monitor.rs`).
//!
//! Issues are named by id or by identifier (`RST-7`) wherever the server allows it.

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use roost_client::{CommentPage, IssueFilter, IssueUpdate, IssueWithComment, NewIssue};
use roost_core::{Comment, Issue, IssueStatus, Priority};

use super::output::{fields, indented, one_line, or_dash, print_only, table, when};
use super::{AgentNames, ClientOpts, Session};

#[derive(Args)]
pub struct IssueArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    pub(super) command: IssueCommand,
}

#[derive(Subcommand)]
pub(super) enum IssueCommand {
    /// List a company's issues
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Only these statuses, comma-separated (backlog, todo, in_progress, in_review, blocked, done, cancelled)
        #[arg(long, value_delimiter = ',')]
        status: Vec<IssueStatus>,
        /// Only issues assigned to this agent (id or name)
        #[arg(long)]
        assignee: Option<String>,
        /// Only issues of this project (its id)
        #[arg(long)]
        project: Option<String>,
        /// Only issues that carry this label (its id; `roost label list` shows them)
        #[arg(long)]
        label: Option<String>,
        /// Only issues with this text in the title, identifier or description
        #[arg(long)]
        search: Option<String>,
        /// Skip this many matching issues first (with --limit, to page)
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// At most this many issues
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Create an issue, or a subtask with --parent
    Create {
        #[arg(long)]
        title: String,
        #[arg(long)]
        description: Option<String>,
        /// critical, high, medium or low
        #[arg(long)]
        priority: Option<Priority>,
        /// Initial status [default: the server's]
        #[arg(long)]
        status: Option<IssueStatus>,
        /// Agent to assign (id or name)
        #[arg(long)]
        assignee: Option<String>,
        /// Parent issue (id or identifier); the subtask goes in the parent's company
        #[arg(long, conflicts_with = "company")]
        parent: Option<String>,
        /// Issues that block this one (ids or identifiers), comma-separated
        #[arg(long, value_delimiter = ',')]
        blocked_by: Vec<String>,
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Print only the new issue's identifier (RST-1)
        #[arg(short, long)]
        quiet: bool,
    },
    /// Show one issue (id or identifier such as RST-7)
    Show { id: String },
    /// Change an issue's fields, optionally adding a comment in the same change
    Update {
        id: String,
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        status: Option<IssueStatus>,
        #[arg(long)]
        priority: Option<Priority>,
        /// Agent to assign (id or name)
        #[arg(long, conflicts_with = "unassign")]
        assignee: Option<String>,
        /// Remove the assignee
        #[arg(long)]
        unassign: bool,
        /// A comment added with the change
        #[arg(long)]
        comment: Option<String>,
    },
    /// Add a comment
    Comment {
        id: String,
        #[arg(long)]
        body: String,
        /// Print only the new comment's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// List an issue's comments, oldest first
    Comments { id: String },
    /// Delete a comment you wrote: it stays in the thread with an empty body
    DeleteComment {
        /// The issue (id or identifier)
        id: String,
        /// The comment's id
        comment: String,
    },
    /// Check the issue out for an agent in the current run (--run-id / ROOST_RUN_ID)
    Checkout {
        id: String,
        /// Agent taking the issue (id or name); must own the run
        #[arg(long)]
        agent: String,
        /// Statuses the issue may be in, comma-separated
        #[arg(long, value_delimiter = ',', default_values_t = [IssueStatus::Todo, IssueStatus::Backlog, IssueStatus::Blocked])]
        expect: Vec<IssueStatus>,
    },
    /// Release the issue's checkout
    Release { id: String },
    /// An issue's attachments: files uploaded to it
    Attachment {
        #[command(subcommand)]
        command: super::attachment::AttachmentCommand,
    },
    /// An issue's work products: pull requests, branches, previews, uploaded deliverables
    WorkProduct {
        #[command(subcommand)]
        command: super::attachment::WorkProductCommand,
    },
    /// An issue's documents: named, versioned markdown such as its plan
    Document {
        #[command(subcommand)]
        command: super::document::DocumentCommand,
    },
    /// An issue's interactions: typed questions answered by the board or another agent
    Interaction {
        #[command(subcommand)]
        command: super::interaction::InteractionCommand,
    },
    /// An issue's monitor: when its assignee is woken to look again at something outside
    Monitor {
        #[command(subcommand)]
        command: super::monitor::MonitorCommand,
    },
    /// Delete an issue and its comments (refused while a run works on it)
    Delete {
        id: String,
        /// Confirm: a deleted issue cannot be brought back
        #[arg(long)]
        yes: bool,
    },
}

pub async fn run(session: &Session, args: IssueArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        IssueCommand::List {
            company,
            status,
            assignee,
            project,
            label,
            search,
            offset,
            limit,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let assignee_agent_id = match assignee {
                Some(agent) => Some(session.agent_id(&agent, Some(&company_id)).await?),
                None => None,
            };
            let filter = IssueFilter {
                statuses: status,
                assignee_agent_id,
                parent_id: None,
                project_id: project,
                label_id: label,
                q: search,
                offset,
                limit,
            };
            let issues = client.list_issues(&company_id, &filter).await?;
            let names = if out.is_json() {
                AgentNames::default()
            } else {
                session.agent_names(&company_id).await
            };
            out.show(&issues, |i| issue_table(i, &names))?;
        }
        IssueCommand::Create {
            title,
            description,
            priority,
            status,
            assignee,
            parent,
            blocked_by,
            company,
            quiet,
        } => {
            // A subtask goes in its parent's company, which is also where its assignee is.
            let company_id = match &parent {
                Some(parent) => client.get_issue(parent).await?.company_id,
                None => session.company_id(company.as_deref()).await?,
            };
            let assignee_agent_id = match assignee {
                Some(agent) => Some(session.agent_id(&agent, Some(&company_id)).await?),
                None => None,
            };
            let mut blocked_by_ids = Vec::new();
            for blocker in blocked_by
                .iter()
                .map(|b| b.trim())
                .filter(|b| !b.is_empty())
            {
                // The body takes ids only, while every path takes identifiers too.
                blocked_by_ids.push(client.get_issue(blocker).await?.id);
            }
            let new = NewIssue {
                title,
                description,
                status,
                priority,
                assignee_agent_id,
                blocked_by_issue_ids: Some(blocked_by_ids).filter(|ids| !ids.is_empty()),
                ..NewIssue::default()
            };
            let issue = match &parent {
                Some(parent) => client.create_child(parent, &new).await?,
                None => client.create_issue(&company_id, &new).await?,
            };
            if quiet {
                print_only(&issue.identifier)?;
            } else {
                out.show(&issue, issue_fields)?;
            }
        }
        IssueCommand::Show { id } => out.show(&client.get_issue(&id).await?, issue_fields)?,
        IssueCommand::Attachment { command } => {
            super::attachment::run(client, out, command).await?;
        }
        IssueCommand::WorkProduct { command } => {
            super::attachment::run_work_product(client, out, command).await?;
        }
        IssueCommand::Document { command } => {
            super::document::run(client, out, command).await?;
        }
        IssueCommand::Interaction { command } => {
            super::interaction::run(client, out, command).await?;
        }
        IssueCommand::Monitor { command } => {
            super::monitor::run(client, out, command).await?;
        }
        IssueCommand::Delete { id, yes } => {
            if !yes {
                anyhow::bail!("refusing to delete issue {id} without --yes: a deleted issue and its comments cannot be brought back");
            }
            let issue = client.delete_issue(&id).await?;
            if out.is_json() {
                out.show(&issue, issue_fields)?
            } else {
                println!("deleted {} ({})", issue.identifier, issue.title);
            }
        }
        IssueCommand::Update {
            id,
            title,
            description,
            status,
            priority,
            assignee,
            unassign,
            comment,
        } => {
            let mut update = IssueUpdate {
                title,
                status,
                priority,
                comment,
                ..IssueUpdate::default()
            };
            update.description = description.map(Some);
            if let Some(agent) = assignee {
                let company_id = client.get_issue(&id).await?.company_id;
                let agent_id = session.agent_id(&agent, Some(&company_id)).await?;
                update.assignee_agent_id = Some(Some(agent_id));
            } else if unassign {
                // One assignee at most: clearing means neither an agent nor a user.
                update.assignee_agent_id = Some(None);
                update.assignee_user_id = Some(None);
            }
            if is_empty_update(&update) {
                bail!("nothing to change: pass --title, --description, --status, --priority, --assignee, --unassign or --comment");
            }
            out.show(&client.update_issue(&id, &update).await?, updated_text)?;
        }
        IssueCommand::Comment { id, body, quiet } => {
            let comment = client.add_comment(&id, &body).await?;
            if quiet {
                print_only(&comment.id)?;
            } else {
                out.show(&comment, |c| format!("added comment {} to {id}", c.id))?;
            }
        }
        IssueCommand::Comments { id } => {
            let comments = client.list_comments(&id, &CommentPage::default()).await?;
            let names = match comments.first() {
                Some(c) if !out.is_json() => session.agent_names(&c.company_id).await,
                _ => AgentNames::default(),
            };
            out.show(&comments, |c| comments_text(c, &names))?;
        }
        IssueCommand::DeleteComment { id, comment } => {
            let deleted = client.delete_comment(&id, &comment).await?;
            out.show(&deleted, |c| format!("deleted comment {} of {id}", c.id))?;
        }
        IssueCommand::Checkout { id, agent, expect } => {
            if session.run_id.is_none() {
                bail!("a checkout needs a run: pass --run-id or set ROOST_RUN_ID (start one with `roost run start`)");
            }
            let company_id = client.get_issue(&id).await?.company_id;
            let agent_id = session.agent_id(&agent, Some(&company_id)).await?;
            let issue = match client.checkout(&id, &agent_id, &expect).await {
                Ok(issue) => issue,
                Err(roost_client::Error::Api {
                    status,
                    code,
                    details,
                    ..
                }) if code == "checkout_conflict" => {
                    // The server names the holder by id; say who it is.
                    let names = session.agent_names(&company_id).await;
                    let holder = names.label(details["assigneeAgentId"].as_str());
                    let run = details["checkoutRunId"].as_str().unwrap_or("-");
                    bail!(
                        "{} is checked out by {} in run {run} ({code}, HTTP {status})",
                        one_line(&id),
                        one_line(&holder)
                    );
                }
                Err(e) => return Err(e.into()),
            };
            out.show(&issue, checkout_text)?;
        }
        IssueCommand::Release { id } => {
            let issue = client.release(&id).await?;
            out.show(&issue, |i| {
                format!("released {} (status {})", i.identifier, i.status)
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn is_empty_update(u: &IssueUpdate) -> bool {
    serde_json::to_value(u)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.is_empty()))
        .unwrap_or(false)
}

fn assignee(i: &Issue, names: &AgentNames) -> String {
    match (&i.assignee_agent_id, &i.assignee_user_id) {
        (Some(agent), _) => names.label(Some(agent)),
        (None, Some(user)) => format!("user:{user}"),
        (None, None) => "-".into(),
    }
}

pub(super) fn issue_table(issues: &[Issue], names: &AgentNames) -> String {
    let rows: Vec<Vec<String>> = issues
        .iter()
        .map(|i| {
            vec![
                i.identifier.clone(),
                i.status.to_string(),
                i.priority.to_string(),
                assignee(i, names),
                i.title.clone(),
            ]
        })
        .collect();
    table(&["IDENT", "STATUS", "PRIORITY", "ASSIGNEE", "TITLE"], &rows)
}

fn issue_fields(i: &Issue) -> String {
    let checkout = i.checkout.as_ref().map(|c| {
        format!(
            "agent {} in run {}, fencing token {}, since {}",
            c.agent_id,
            c.run_id,
            c.token,
            when(c.at)
        )
    });
    let mut text = fields(&[
        ("issue", i.identifier.clone()),
        ("id", i.id.clone()),
        ("title", i.title.clone()),
        ("status", i.status.to_string()),
        ("priority", i.priority.to_string()),
        ("assignee", assignee(i, &AgentNames::default())),
        ("parent", or_dash(i.parent_id.as_deref())),
        (
            "blocked by",
            if i.blocked_by_issue_ids.is_empty() {
                "-".into()
            } else {
                i.blocked_by_issue_ids.join(", ")
            },
        ),
        ("checkout", or_dash(checkout)),
        ("created", i.created_at.to_string()),
        ("updated", i.updated_at.to_string()),
    ]);
    if let Some(description) = i.description.as_deref().filter(|d| !d.trim().is_empty()) {
        text.push_str("\ndescription:\n");
        text.push_str(&indented(description, 2));
    }
    text
}

fn updated_text(u: &IssueWithComment) -> String {
    let mut text = issue_fields(&u.issue.issue);
    if let Some(c) = &u.comment {
        text.push_str(&format!("\nadded comment {}\n", c.id));
    }
    text
}

fn comments_text(comments: &[Comment], names: &AgentNames) -> String {
    if comments.is_empty() {
        return "no comments\n".into();
    }
    let mut text = String::new();
    for c in comments {
        let author = match (&c.author_agent_id, &c.author_user_id) {
            (Some(agent), _) => names.label(Some(agent)),
            (None, Some(user)) => format!("user:{user}"),
            (None, None) => "system".into(),
        };
        let run = c
            .created_by_run_id
            .as_deref()
            .map(|r| format!(", run {r}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "{} at {} ({}{run})\n",
            one_line(&author),
            when(c.created_at),
            c.id
        ));
        match c.deleted_at {
            Some(at) => text.push_str(&indented(&format!("(deleted at {})", when(at)), 2)),
            None => text.push_str(&indented(&c.body, 2)),
        }
        text.push('\n');
    }
    text
}

fn checkout_text(i: &Issue) -> String {
    match &i.checkout {
        Some(c) => format!(
            "checked out {} ({}) for agent {} in run {}, fencing token {}",
            i.identifier, i.status, c.agent_id, c.run_id, c.token
        ),
        None => format!("{} ({}) has no checkout", i.identifier, i.status),
    }
}
