//! `roost wake list|show`: what became of each request to run an agent, and for a queued one,
//! what it is waiting for ("why didn't my agent run?").

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{WakeFilter, WakeView, WakeupResult};
use roost_core::{Run, Timestamp, WakeStatus};

use super::output::{age, fields, one_line, or_dash, table};
use super::{AgentNames, ClientOpts, IssueLabels, Session};

#[derive(Args)]
pub struct WakeArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: WakeCommand,
}

#[derive(Subcommand)]
enum WakeCommand {
    /// List a company's wakes, newest first
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Only this agent's wakes (id or name)
        #[arg(long)]
        agent: Option<String>,
        /// Only these statuses, comma-separated (queued, deferred, claimed, coalesced, skipped, suppressed, cancelled)
        #[arg(long, value_delimiter = ',')]
        status: Vec<WakeStatus>,
        /// Only wakes about this issue (id or identifier)
        #[arg(long)]
        issue: Option<String>,
        /// At most this many wakes
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Show one wake, with why it has not run if it has not
    Show { id: String },
}

pub async fn run(session: &Session, args: WakeArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        WakeCommand::List {
            company,
            agent,
            status,
            issue,
            limit,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let agent_id = match agent {
                Some(agent) => Some(session.agent_id(&agent, Some(&company_id)).await?),
                None => None,
            };
            let filter = WakeFilter {
                agent_id,
                statuses: status,
                issue_id: issue,
                limit,
            };
            let wakes = client.list_wakes(&company_id, &filter).await?;
            let (names, issues) = if out.is_json() {
                (AgentNames::default(), IssueLabels::default())
            } else {
                (
                    session.agent_names(&company_id).await,
                    session.issue_labels(&company_id).await,
                )
            };
            let now = Timestamp(chrono::Utc::now().timestamp_millis());
            out.show(&wakes, |w| wake_table(w, &names, &issues, now))?;
        }
        WakeCommand::Show { id } => {
            let view = client.get_wake(&id).await?;
            let labels = labels_for(session, &view).await;
            out.show(&view, |v| wake_fields(v, &labels))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How one wake's agent and issue are shown: a name and an identifier where they can be
/// looked up, the ids otherwise.
pub(super) struct WakeLabels {
    pub agent: String,
    pub issue: String,
}

/// Names for one wake; a failed look-up falls back to ids, since names are a convenience.
pub(super) async fn labels_for(session: &Session, view: &WakeView) -> WakeLabels {
    let wake = &view.wake;
    let agent = match session.client.get_agent(&wake.agent_id).await {
        Ok(agent) => format!("{} ({})", agent.name, agent.id),
        Err(_) => wake.agent_id.clone(),
    };
    let issue = match wake.issue_id.as_deref() {
        None => "-".to_string(),
        Some(id) => match session.client.get_issue(id).await {
            Ok(issue) => format!("{} ({})", issue.identifier, issue.id),
            Err(_) => id.to_string(),
        },
    };
    WakeLabels { agent, issue }
}

pub(super) fn wake_table(
    wakes: &[WakeView],
    names: &AgentNames,
    issues: &IssueLabels,
    now: Timestamp,
) -> String {
    let rows: Vec<Vec<String>> = wakes
        .iter()
        .map(|v| {
            let w = &v.wake;
            vec![
                w.id.clone(),
                names.label(Some(&w.agent_id)),
                issues.label(w.issue_id.as_deref()),
                w.reason.to_string(),
                w.status.to_string(),
                or_dash(v.why()),
                w.count.to_string(),
                age(now, w.created_at),
            ]
        })
        .collect();
    table(
        &[
            "WAKE", "AGENT", "ISSUE", "REASON", "STATUS", "WHY", "COUNT", "AGE",
        ],
        &rows,
    )
}

pub(super) fn wake_fields(v: &WakeView, labels: &WakeLabels) -> String {
    let w = &v.wake;
    let payload = match &w.payload {
        serde_json::Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    let comments = if w.comment_ids.is_empty() {
        "-".to_string()
    } else {
        w.comment_ids.join(",")
    };
    fields(&[
        ("wake", w.id.clone()),
        ("status", w.status.to_string()),
        ("why", or_dash(v.why())),
        ("agent", labels.agent.clone()),
        ("issue", labels.issue.clone()),
        ("reason", w.reason.to_string()),
        ("count", w.count.to_string()),
        ("comments", comments),
        ("run", or_dash(w.run_id.as_deref())),
        ("merged into", or_dash(w.coalesced_into.as_deref())),
        ("waiting on", or_dash(w.waiting_on_run.as_deref())),
        ("retry of", or_dash(w.retry_of_run_id.as_deref())),
        (
            "requested by",
            format!("{} {}", w.requested_by_type, w.requested_by_id),
        ),
        ("key", or_dash(w.idempotency_key.as_deref())),
        ("payload", payload),
        ("created", w.created_at.to_string()),
        ("updated", w.updated_at.to_string()),
    ])
}

/// `roost agent wake`: the wake, and the run if one answers it already; usually none yet, so
/// say how to follow it.
pub(super) fn wakeup_text(result: &WakeupResult, labels: &WakeLabels) -> String {
    let mut text = wake_fields(&result.wake, labels);
    match &result.run {
        Some(run) => text.push_str(&run_line(run)),
        None if result.wake.wake.status.is_pending() => text.push_str(&format!(
            "\nNo run yet: a dispatcher assigns one to a worker. Follow it with `roost wake show {}`.\n",
            one_line(&result.wake.wake.id)
        )),
        // Merged into a pending wake of the same agent and issue: that one gets the run.
        None => {
            if let Some(into) = &result.wake.wake.coalesced_into {
                text.push_str(&format!(
                    "\nMerged into a waiting wake; follow it with `roost wake show {}`.\n",
                    one_line(into)
                ));
            }
        }
    }
    text
}

fn run_line(run: &Run) -> String {
    format!(
        "\nAnswered by run {} ({}, worker {}).\n",
        run.id,
        run.status,
        or_dash(run.worker_id.as_deref())
    )
}
