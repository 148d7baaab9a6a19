//! `roost memory show|home|log|edit|history|search|company-log|company-live`: an agent's
//! replicated memory, and its company's shared log and live state. `show`
//! is the summary with the recovery door a run starting now would take; `log` the rolling log,
//! newest first; `edit` saves a new version of `MEMORY.md` or `STATE.md` (refused `409` if
//! someone saved since the version it read); `history` the kept versions; `search` full-text
//! recall over entries, documents and the comments of the agent's issues, best first; `home`
//! the files the agent keeps under `$AGENT_HOME`, as its last run saved them. `company-log`
//! is the log the company's agents write to together, `company-live` its live state (shown, or
//! saved by an administrator with `--doing`/`--coordinates`).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use roost_client::{
    CompanyLive, CurrentTask, HomeView, LiveParts, MemoryDocument, MemoryEntry, MemoryScope,
    MemorySearchHit, MemorySummary,
};

use super::output::{fields, indented, or_dash, table, when};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct MemoryArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: MemoryCommand,
}

#[derive(Subcommand)]
enum MemoryCommand {
    /// An agent's memory at a glance: the recovery door and confidence, current task,
    /// documents' versions, entries and bytes used
    Show {
        /// Agent id or name
        agent: String,
        /// The agent's company (id, prefix or name), to look its name up in
        #[arg(long)]
        company: Option<String>,
    },
    /// The files an agent keeps under its $AGENT_HOME, as last saved by a run: they are
    /// restored before its next run on whichever worker runs it
    Home {
        agent: String,
        #[arg(long)]
        company: Option<String>,
    },
    /// An agent's rolling log, newest first
    Log {
        agent: String,
        #[arg(long)]
        company: Option<String>,
        /// Entries to show [default: the server's page, 50]
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Save a new version of an agent's document from a file or stdin
    Edit {
        agent: String,
        /// MEMORY.md or STATE.md
        name: String,
        /// Read the content from this file [default: stdin]
        #[arg(long)]
        file: Option<PathBuf>,
        /// The version the content is based on: refused if someone saved since
        /// [default: the current version, read just before saving]
        #[arg(long)]
        expected_version: Option<u64>,
        #[arg(long)]
        company: Option<String>,
    },
    /// The kept versions of an agent's document, newest first
    History {
        agent: String,
        /// MEMORY.md or STATE.md
        name: String,
        #[arg(long)]
        company: Option<String>,
        /// Print each version's content too
        #[arg(long)]
        content: bool,
    },
    /// Search an agent's log entries, documents and the comments of issues it is assigned to
    /// or commented on, best first (every word required)
    Search {
        agent: String,
        /// The words to search for (`--` before words starting with `-`)
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        #[arg(long)]
        company: Option<String>,
        /// Hits to show [default: the server's, 20; at most 100]
        #[arg(long)]
        limit: Option<u32>,
        /// A hit needs any one of the words, not all of them
        #[arg(long)]
        any: bool,
    },
    /// A company's shared log (what its agents' runs logged for all of them), newest first
    CompanyLog {
        /// Company id, prefix or name [default: the only one]
        company: Option<String>,
        /// Entries to show [default: the server's page, 50]
        #[arg(long)]
        limit: Option<usize>,
    },
    /// A company's live state; with --doing or --coordinates, save it (an administrator)
    CompanyLive {
        /// Company id, prefix or name [default: the only one]
        company: Option<String>,
        /// What the company is doing now, in a sentence
        #[arg(long)]
        doing: Option<String>,
        /// The last things done (repeat, at most 3; with --doing)
        #[arg(long, requires = "doing")]
        last: Vec<String>,
        /// The next steps (repeat, at most 3; with --doing)
        #[arg(long, requires = "doing")]
        next: Vec<String>,
        /// Where things are, as a JSON value
        #[arg(long)]
        coordinates: Option<String>,
    },
}

pub async fn run(session: &Session, args: MemoryArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        MemoryCommand::Show { agent, company } => {
            let id = agent_id(session, &agent, company.as_deref()).await?;
            out.show(&client.memory_summary(&id).await?, summary_text)?;
        }
        MemoryCommand::Home { agent, company } => {
            let id = agent_id(session, &agent, company.as_deref()).await?;
            out.show(&client.agent_home(&id).await?, home_text)?;
        }
        MemoryCommand::Log {
            agent,
            company,
            limit,
        } => {
            let id = agent_id(session, &agent, company.as_deref()).await?;
            let entries = client
                .memory_entries(&MemoryScope::Agent(&id), limit)
                .await?;
            out.show(&entries, |e| log_text(e))?;
        }
        MemoryCommand::Edit {
            agent,
            name,
            file,
            expected_version,
            company,
        } => {
            let content = match &file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
                None => {
                    let mut text = String::new();
                    std::io::stdin()
                        .read_to_string(&mut text)
                        .context("cannot read the content from stdin")?;
                    text
                }
            };
            let id = agent_id(session, &agent, company.as_deref()).await?;
            let scope = MemoryScope::Agent(&id);
            let expected = match expected_version {
                Some(v) => v,
                None => match client.memory_document(&scope, &name).await {
                    Ok(current) => current.version,
                    Err(e) if e.status() == Some(404) => 0,
                    Err(e) => return Err(e.into()),
                },
            };
            let saved = client
                .put_memory_document(&scope, &name, &content, expected)
                .await?;
            out.show(&saved, |d| {
                format!(
                    "saved {} version {} ({} bytes)\n",
                    d.name,
                    d.version,
                    d.content.len()
                )
            })?;
        }
        MemoryCommand::History {
            agent,
            name,
            company,
            content,
        } => {
            let id = agent_id(session, &agent, company.as_deref()).await?;
            let versions = client
                .memory_history(&MemoryScope::Agent(&id), &name)
                .await?;
            out.show(&versions, |v| history_text(v, content))?;
        }
        MemoryCommand::Search {
            agent,
            query,
            company,
            limit,
            any,
        } => {
            let id = agent_id(session, &agent, company.as_deref()).await?;
            let hits = client
                .memory_search(&id, &query.join(" "), limit, any)
                .await?;
            out.show(&hits, |h| search_text(h))?;
        }
        MemoryCommand::CompanyLog { company, limit } => {
            let id = session.company_id(company.as_deref()).await?;
            let entries = client
                .memory_entries(&MemoryScope::Company(&id), limit)
                .await?;
            out.show(&entries, |e| log_text(e))?;
        }
        MemoryCommand::CompanyLive {
            company,
            doing,
            last,
            next,
            coordinates,
        } => {
            let id = session.company_id(company.as_deref()).await?;
            let task = doing.map(|doing| CurrentTask { doing, last, next });
            let coordinates = coordinates
                .map(|c| serde_json::from_str::<serde_json::Value>(&c))
                .transpose()
                .context("--coordinates must be a JSON value, such as '{\"repo\": \"main\"}'")?;
            let live = if task.is_some() || coordinates.is_some() {
                client
                    .set_company_memory_live(&id, task.as_ref(), coordinates.as_ref())
                    .await?
            } else {
                client.company_memory_live(&id).await?
            };
            out.show(&live, company_live_text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn company_live_text(l: &CompanyLive) -> String {
    let task = l.parts.current_task.as_ref();
    let mut pairs = vec![
        ("company", l.company_id.clone()),
        ("doing", or_dash(task.map(|t| t.doing.clone()))),
    ];
    if let Some(t) = task {
        pairs.push(("last", t.last.join("; ")));
        pairs.push(("next", t.next.join("; ")));
        pairs.push(("saved", or_dash(l.parts.current_task_updated_at.map(when))));
    }
    pairs.push(("coordinates", coordinates_text(Some(&l.parts))));
    pairs.push((
        "by",
        format!(
            "{} {}{}",
            l.updated_by_type,
            l.updated_by_id,
            l.run_id
                .as_deref()
                .map(|r| format!(" (run {r})"))
                .unwrap_or_default()
        ),
    ));
    fields(&pairs)
}

/// Saved coordinates and when they were saved, or a dash.
fn coordinates_text(parts: Option<&LiveParts>) -> String {
    let saved = parts.and_then(|p| {
        let c = p.coordinates.as_ref()?;
        Some(format!(
            "{c} (saved {})",
            or_dash(p.coordinates_updated_at.map(when))
        ))
    });
    or_dash(saved)
}

async fn agent_id(session: &Session, agent: &str, company: Option<&str>) -> anyhow::Result<String> {
    let company_id = match company {
        Some(c) => Some(session.company_id(Some(c)).await?),
        None => None,
    };
    session.agent_id(agent, company_id.as_deref()).await
}

fn home_text(h: &HomeView) -> String {
    let home = &h.home;
    let mut text = fields(&[
        ("agent", home.agent_id.clone()),
        ("version", home.version.to_string()),
        (
            "bytes",
            format!("{} of {} (homeMaxBytes)", home.bytes, h.max_bytes),
        ),
        (
            "saved",
            if home.version == 0 {
                "-".into()
            } else {
                when(home.updated_at)
            },
        ),
        ("by run", or_dash(home.run_id.clone())),
    ]);
    if !home.files.is_empty() {
        let rows: Vec<Vec<String>> = home
            .files
            .iter()
            .map(|(path, f)| vec![path.clone(), f.size.to_string(), f.chunks.len().to_string()])
            .collect();
        text.push('\n');
        text.push_str(&table(&["PATH", "BYTES", "CHUNKS"], &rows));
    }
    text
}

fn summary_text(s: &MemorySummary) -> String {
    let r = &s.recovery;
    let parts = s.live.as_ref().map(|l| &l.parts);
    let task = parts.and_then(|p| p.current_task.as_ref());
    let mut pairs = vec![
        ("agent", s.agent_id.clone()),
        (
            "door",
            format!("{} (confidence {:.2})", r.door.as_str(), r.confidence),
        ),
        ("why", r.why.clone()),
        ("doing", or_dash(task.map(|t| t.doing.clone()))),
    ];
    if let Some(t) = task {
        pairs.push(("last", t.last.join("; ")));
        pairs.push(("next", t.next.join("; ")));
    }
    pairs.push(("coordinates", coordinates_text(parts)));
    pairs.push((
        "entries",
        format!(
            "{} (latest {})",
            s.entry_count,
            or_dash(s.latest_entry_at.map(when))
        ),
    ));
    pairs.push((
        "bytes used",
        format!(
            "{} (entries up to {} of {} bytes; documents {} bytes, {} versions kept)",
            s.bytes_used,
            s.limits.max_entries,
            s.limits.max_entry_bytes,
            s.limits.max_document_bytes,
            s.limits.max_document_versions
        ),
    ));
    let mut text = fields(&pairs);
    if s.documents.is_empty() {
        text.push_str("\nNo documents yet (`roost memory edit AGENT MEMORY.md --file F`).\n");
    } else {
        let rows: Vec<Vec<String>> = s
            .documents
            .iter()
            .map(|d| {
                vec![
                    d.name.clone(),
                    d.version.to_string(),
                    d.bytes.to_string(),
                    d.versions_kept.to_string(),
                    when(d.updated_at),
                ]
            })
            .collect();
        text.push('\n');
        text.push_str(&table(
            &["DOCUMENT", "VERSION", "BYTES", "KEPT", "UPDATED"],
            &rows,
        ));
    }
    text
}

fn log_text(entries: &[MemoryEntry]) -> String {
    if entries.is_empty() {
        return "No log entries.\n".into();
    }
    let mut text = String::new();
    for e in entries {
        let wake = e
            .wake_reason
            .map(|w| w.to_string())
            .unwrap_or_else(|| "-".into());
        let by = if e.shared {
            format!("agent {}  ", e.agent_id)
        } else {
            String::new()
        };
        text.push_str(&format!(
            "{}  {by}run {}  wake {}  issue {}\n",
            when(e.created_at),
            e.run_id,
            wake,
            or_dash(e.issue_id.as_deref())
        ));
        for (label, value) in [("what", &e.what), ("did", &e.did), ("next", &e.next)] {
            if !value.is_empty() {
                text.push_str(&format!("  {label}:\n{}", indented(value, 4)));
            }
        }
        for error in &e.errors {
            text.push_str(&format!("  error:\n{}", indented(error, 4)));
        }
        text.push('\n');
    }
    text
}

fn history_text(versions: &[MemoryDocument], content: bool) -> String {
    if versions.is_empty() {
        return "No versions yet.\n".into();
    }
    if !content {
        let rows: Vec<Vec<String>> = versions
            .iter()
            .map(|d| {
                vec![
                    d.version.to_string(),
                    when(d.updated_at),
                    format!("{} {}", d.updated_by_type, d.updated_by_id),
                    or_dash(d.run_id.as_deref()),
                    d.content.len().to_string(),
                ]
            })
            .collect();
        return table(&["VERSION", "SAVED", "BY", "RUN", "BYTES"], &rows);
    }
    let mut text = String::new();
    for d in versions {
        text.push_str(&format!(
            "version {}  saved {} by {} {}\n{}\n",
            d.version,
            when(d.updated_at),
            d.updated_by_type,
            d.updated_by_id,
            indented(&d.content, 2)
        ));
    }
    text
}

fn search_text(hits: &[MemorySearchHit]) -> String {
    if hits.is_empty() {
        return "Nothing found.\n".into();
    }
    let rows: Vec<Vec<String>> = hits
        .iter()
        .map(|h| {
            vec![
                h.kind.as_str().to_string(),
                h.id.clone(),
                or_dash(h.issue_id.as_deref()),
                format!("{:.2}", h.score),
                when(h.created_at),
                h.snippet.split_whitespace().collect::<Vec<_>>().join(" "),
            ]
        })
        .collect();
    table(&["KIND", "ID", "ISSUE", "SCORE", "WHEN", "SNIPPET"], &rows)
}
