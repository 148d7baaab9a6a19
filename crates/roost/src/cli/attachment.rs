//! `roost issue attachment list|upload|download|delete` and `roost issue work-product
//! list|create|update|delete`: the files uploaded to an issue and what work on it produced
//! (Paperclip's attachments and work products).

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use roost_client::{AttachmentView, RoostClient, WorkProduct, WorkProductFields};
use roost_core::attachment::content_type_for;

use super::output::{fields, or_dash, print_only, table, when, Output};

#[derive(Subcommand)]
pub(super) enum AttachmentCommand {
    /// List an issue's attachments, newest first
    List { issue: String },
    /// Upload a file to an issue (at most 10 MiB)
    Upload {
        issue: String,
        file: PathBuf,
        /// The file's type; by default guessed from its extension
        #[arg(long)]
        content_type: Option<String>,
        /// Print only the attachment's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Write an attachment's bytes to a file, or to standard output
    Download {
        id: String,
        #[arg(long, short)]
        out: Option<PathBuf>,
    },
    /// Delete an attachment with its bytes
    Delete {
        id: String,
        /// Confirm: a deleted attachment cannot be brought back
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand)]
pub(super) enum WorkProductCommand {
    /// List an issue's work products, primary ones first
    List { issue: String },
    /// Record a work product of an issue
    Create {
        issue: String,
        #[command(flatten)]
        fields: FieldArgs,
        /// Print only the work product's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Change a work product's fields
    Update {
        id: String,
        #[command(flatten)]
        fields: FieldArgs,
    },
    /// Delete a work product
    Delete { id: String },
}

#[derive(Args)]
pub(super) struct FieldArgs {
    /// preview_url, runtime_service, pull_request, branch, commit, artifact or document
    #[arg(long = "type")]
    kind: Option<String>,
    /// Where it lives: github, git, paperclip (an uploaded file), ...
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    title: Option<String>,
    #[arg(long)]
    url: Option<String>,
    /// active, ready_for_review, approved, changes_requested, merged, closed, failed,
    /// archived or draft
    #[arg(long)]
    status: Option<String>,
    /// none, needs_board_review, approved or changes_requested
    #[arg(long)]
    review_state: Option<String>,
    /// Make it the issue's primary work product of its type
    #[arg(long)]
    primary: bool,
    #[arg(long)]
    summary: Option<String>,
    /// A JSON object; an uploaded file's artifact names it: '{"attachmentId": "..."}'
    #[arg(long)]
    metadata: Option<String>,
}

impl FieldArgs {
    fn into_fields(self) -> anyhow::Result<WorkProductFields> {
        let metadata = match self.metadata {
            Some(text) => Some(Some(
                serde_json::from_str(&text).context("--metadata is not JSON")?,
            )),
            None => None,
        };
        Ok(WorkProductFields {
            kind: self.kind,
            provider: self.provider,
            title: self.title,
            url: self.url.map(Some),
            status: self.status,
            review_state: self.review_state,
            is_primary: self.primary.then_some(true),
            summary: self.summary.map(Some),
            metadata,
            ..Default::default()
        })
    }
}

pub(super) async fn run(
    client: &RoostClient,
    out: Output,
    command: AttachmentCommand,
) -> anyhow::Result<()> {
    match command {
        AttachmentCommand::List { issue } => {
            let list = client.list_attachments(&issue).await?;
            out.show(&list, |l| attachments_text(l))?;
        }
        AttachmentCommand::Upload {
            issue,
            file,
            content_type,
            quiet,
        } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "attachment".into());
            let content_type = content_type.unwrap_or_else(|| content_type_for(&name).into());
            let company = client.get_issue(&issue).await?.company_id;
            let attachment = client
                .upload_attachment(&company, &issue, &name, &content_type, &bytes)
                .await?;
            if quiet {
                print_only(&attachment.attachment.id)?;
            } else {
                out.show(&attachment, attachment_text)?;
            }
        }
        AttachmentCommand::Download { id, out: path } => {
            let bytes = client.attachment_content(&id).await?;
            match path {
                Some(path) => {
                    std::fs::write(&path, &bytes)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    let done = serde_json::json!({ "out": path, "bytes": bytes.len() });
                    out.show(&done, |_| {
                        format!("wrote {} bytes to {}\n", bytes.len(), path.display())
                    })?;
                }
                None => {
                    use std::io::Write;
                    std::io::stdout().write_all(&bytes)?;
                }
            }
        }
        AttachmentCommand::Delete { id, yes } => {
            if !yes {
                bail!("refusing to delete attachment {id} without --yes: its bytes go with it and cannot be brought back");
            }
            let answer = client.delete_attachment(&id).await?;
            out.show(&answer, |_| format!("deleted {id}\n"))?;
        }
    }
    Ok(())
}

pub(super) async fn run_work_product(
    client: &RoostClient,
    out: Output,
    command: WorkProductCommand,
) -> anyhow::Result<()> {
    match command {
        WorkProductCommand::List { issue } => {
            let list = client.list_work_products(&issue).await?;
            out.show(&list, |l| products_text(l))?;
        }
        WorkProductCommand::Create {
            issue,
            fields,
            quiet,
        } => {
            let product = client
                .create_work_product(&issue, &fields.into_fields()?)
                .await?;
            if quiet {
                print_only(&product.id)?;
            } else {
                out.show(&product, product_text)?;
            }
        }
        WorkProductCommand::Update { id, fields } => {
            let product = client
                .update_work_product(&id, &fields.into_fields()?)
                .await?;
            out.show(&product, product_text)?;
        }
        WorkProductCommand::Delete { id } => {
            let product = client.delete_work_product(&id).await?;
            out.show(&product, |p| format!("deleted {} ({})\n", p.id, p.title))?;
        }
    }
    Ok(())
}

fn attachments_text(list: &[AttachmentView]) -> String {
    if list.is_empty() {
        return "no attachments\n".into();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|v| {
            let a = &v.attachment;
            vec![
                a.id.clone(),
                or_dash(a.original_filename.as_deref()),
                a.content_type.clone(),
                a.byte_size.to_string(),
                when(a.created_at),
            ]
        })
        .collect();
    table(&["ID", "NAME", "TYPE", "BYTES", "UPLOADED"], &rows)
}

fn attachment_text(v: &AttachmentView) -> String {
    let a = &v.attachment;
    fields(&[
        ("attachment", a.id.clone()),
        ("name", or_dash(a.original_filename.as_deref())),
        ("type", a.content_type.clone()),
        ("bytes", a.byte_size.to_string()),
        ("sha256", a.sha256.clone()),
        ("content", v.content_path.clone()),
    ])
}

fn products_text(list: &[WorkProduct]) -> String {
    if list.is_empty() {
        return "no work products\n".into();
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            vec![
                p.id.clone(),
                p.kind.clone(),
                p.status.clone(),
                if p.is_primary { "yes" } else { "-" }.into(),
                p.title.clone(),
                or_dash(p.url.as_deref()),
            ]
        })
        .collect();
    table(&["ID", "TYPE", "STATUS", "PRIMARY", "TITLE", "URL"], &rows)
}

fn product_text(p: &WorkProduct) -> String {
    fields(&[
        ("work product", p.id.clone()),
        ("type", format!("{} ({})", p.kind, p.provider)),
        ("title", p.title.clone()),
        ("status", format!("{}, review {}", p.status, p.review_state)),
        ("primary", if p.is_primary { "yes" } else { "no" }.into()),
        ("url", or_dash(p.url.as_deref())),
        ("updated", when(p.updated_at)),
    ])
}
