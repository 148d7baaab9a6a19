//! `roost issue document list|show|put|history|restore|lock|unlock|delete`: an issue's named,
//! versioned markdown (Paperclip's plan documents).

use anyhow::bail;
use clap::Subcommand;
use roost_client::{DocumentPutBody, DocumentRevision, DocumentView, RoostClient};

use super::output::{fields, indented, or_dash, print_only, table, when, Output};

#[derive(Subcommand)]
pub(super) enum DocumentCommand {
    /// List an issue's documents
    List {
        issue: String,
    },
    /// Show a document with its latest text
    Show {
        issue: String,
        key: String,
    },
    /// Create a document, or save a new revision of it
    Put {
        issue: String,
        /// 1-64 lowercase letters, digits, _ or -
        key: String,
        /// The text, or `-` to read it from standard input
        #[arg(long, conflicts_with = "body_file")]
        body: Option<String>,
        /// Read the text from this file
        #[arg(long)]
        body_file: Option<std::path::PathBuf>,
        #[arg(long)]
        title: Option<String>,
        /// The latest revision's id you edited (`roost issue document show`); required to
        /// change an existing document, so that nobody's edit is lost
        #[arg(long)]
        base_revision: Option<String>,
        /// A line saying what changed
        #[arg(long)]
        summary: Option<String>,
        /// Print only the new revision's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// List a document's revisions, newest first
    History {
        issue: String,
        key: String,
    },
    /// Save an earlier revision as the newest
    Restore {
        issue: String,
        key: String,
        revision: String,
    },
    /// Lock a document: agents' writes then go to a new document beside it
    Lock {
        issue: String,
        key: String,
    },
    Unlock {
        issue: String,
        key: String,
    },
    /// Delete a document with its revisions
    Delete {
        issue: String,
        key: String,
        /// Confirm: a deleted document cannot be brought back
        #[arg(long)]
        yes: bool,
    },
}

pub(super) async fn run(
    client: &RoostClient,
    out: Output,
    command: DocumentCommand,
) -> anyhow::Result<()> {
    match command {
        DocumentCommand::List { issue } => {
            let docs = client.list_documents(&issue).await?;
            out.show(&docs, |d| documents_text(d))?;
        }
        DocumentCommand::Show { issue, key } => {
            let doc = client.get_document(&issue, &key).await?;
            out.show(&doc, document_text)?;
        }
        DocumentCommand::Put {
            issue,
            key,
            body,
            body_file,
            title,
            base_revision,
            summary,
            quiet,
        } => {
            let text = match (body, body_file) {
                (Some(b), _) if b == "-" => std::io::read_to_string(std::io::stdin())?,
                (Some(b), _) => b,
                (None, Some(path)) => std::fs::read_to_string(&path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?,
                (None, None) => bail!("give the document's text with --body TEXT, --body - (standard input) or --body-file FILE"),
            };
            let put = DocumentPutBody {
                title,
                format: None,
                body: text,
                change_summary: summary,
                base_revision_id: base_revision,
            };
            let doc = client.put_document(&issue, &key, &put).await?;
            if quiet {
                print_only(&doc.document.latest_revision_id)?;
            } else {
                out.show(&doc, |d| {
                    format!(
                        "saved {} revision {} ({})\n",
                        d.document.key,
                        d.document.latest_revision_number,
                        d.document.latest_revision_id
                    )
                })?;
            }
        }
        DocumentCommand::History { issue, key } => {
            let revisions = client.document_revisions(&issue, &key).await?;
            out.show(&revisions, |r| revisions_text(r))?;
        }
        DocumentCommand::Restore {
            issue,
            key,
            revision,
        } => {
            let doc = client.restore_document(&issue, &key, &revision).await?;
            out.show(&doc, |d| {
                format!(
                    "restored {} as revision {} ({})\n",
                    d.document.key,
                    d.document.latest_revision_number,
                    d.document.latest_revision_id
                )
            })?;
        }
        DocumentCommand::Lock { issue, key } => {
            let doc = client.lock_document(&issue, &key, true).await?;
            out.show(&doc, |d| format!("locked {}\n", d.document.key))?;
        }
        DocumentCommand::Unlock { issue, key } => {
            let doc = client.lock_document(&issue, &key, false).await?;
            out.show(&doc, |d| format!("unlocked {}\n", d.document.key))?;
        }
        DocumentCommand::Delete { issue, key, yes } => {
            if !yes {
                bail!("refusing to delete document {key} without --yes: its revisions go with it and cannot be brought back");
            }
            client.delete_document(&issue, &key).await?;
            out.show(&serde_json::json!({ "ok": true }), |_| {
                format!("deleted {key}\n")
            })?;
        }
    }
    Ok(())
}

fn documents_text(docs: &[DocumentView]) -> String {
    if docs.is_empty() {
        return "no documents\n".into();
    }
    let rows: Vec<Vec<String>> = docs
        .iter()
        .map(|d| {
            vec![
                d.document.key.clone(),
                d.document.latest_revision_number.to_string(),
                when(d.document.updated_at),
                if d.document.locked_at.is_some() {
                    "locked"
                } else {
                    "-"
                }
                .into(),
                or_dash(d.document.title.as_deref()),
            ]
        })
        .collect();
    table(&["KEY", "REV", "UPDATED", "LOCK", "TITLE"], &rows)
}

fn document_text(d: &DocumentView) -> String {
    let by = author(
        d.document.updated_by_agent_id.as_deref(),
        d.document.updated_by_user_id.as_deref(),
    );
    let mut text = fields(&[
        ("document", d.document.key.clone()),
        ("title", or_dash(d.document.title.as_deref())),
        (
            "revision",
            format!(
                "{} ({})",
                d.document.latest_revision_number, d.document.latest_revision_id
            ),
        ),
        (
            "updated",
            format!("{} by {}", when(d.document.updated_at), or_dash(by)),
        ),
        ("locked", or_dash(d.document.locked_at.map(when))),
    ]);
    text.push('\n');
    text.push_str(&indented(d.body.as_deref().unwrap_or(""), 2));
    text
}

fn revisions_text(revisions: &[DocumentRevision]) -> String {
    let rows: Vec<Vec<String>> = revisions
        .iter()
        .map(|r| {
            let by = author(
                r.created_by_agent_id.as_deref(),
                r.created_by_user_id.as_deref(),
            );
            vec![
                r.revision_number.to_string(),
                r.id.clone(),
                when(r.created_at),
                or_dash(by),
                or_dash(r.change_summary.as_deref()),
            ]
        })
        .collect();
    table(&["REV", "ID", "AT", "BY", "SUMMARY"], &rows)
}

/// Who wrote a revision: `agent <id>` or `user <id>`.
fn author(agent: Option<&str>, user: Option<&str>) -> Option<String> {
    agent
        .map(|a| format!("agent {a}"))
        .or_else(|| user.map(|u| format!("user {u}")))
}
