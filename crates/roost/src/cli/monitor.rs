//! `roost issue monitor show|set|clear|check`: an issue's monitor (Paperclip's
//! `executionPolicy.monitor`), the time its assignee is woken to look again at something
//! outside. Set and clear go through the issue's `executionPolicy`, as Paperclip's agents do.

use anyhow::{bail, Context};
use clap::Subcommand;
use roost_client::{IssueUpdate, RoostClient};
use roost_core::monitor::MonitorState;
use roost_core::routine::parse_duration_ms;
use roost_core::{Issue, Timestamp};
use serde_json::{json, Value};

use super::output::{fields, or_dash, when, Output};

#[derive(Subcommand)]
pub(super) enum MonitorCommand {
    /// Show an issue's monitor: scheduled, or how it last fired or was cleared
    Show { issue: String },
    /// Schedule (or replace) the monitor of an agent's issue in progress or in review
    Set {
        issue: String,
        /// When to wake the assignee, from now: 30s, 10m, 2h, 1d
        #[arg(long = "in", value_name = "DURATION", conflicts_with = "at")]
        after: Option<String>,
        /// When to wake the assignee, as an RFC 3339 time
        #[arg(long)]
        at: Option<String>,
        /// What to look at, shown to the agent when it is woken
        #[arg(long)]
        notes: Option<String>,
        /// The external service watched (e.g. "GitHub Actions")
        #[arg(long)]
        service: Option<String>,
        /// Clear the monitor instead of firing once this long from now has passed
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Clear the monitor instead of firing once it has fired this many times (1-100)
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Past its bounds: wake_owner (default), create_recovery_issue or escalate_to_board
        #[arg(long)]
        recovery: Option<String>,
    },
    /// Clear the issue's scheduled monitor
    Clear { issue: String },
    /// Fire the issue's scheduled monitor now: its assignee is woken
    Check { issue: String },
}

pub(super) async fn run(
    client: &RoostClient,
    out: Output,
    command: MonitorCommand,
) -> anyhow::Result<()> {
    let issue = match command {
        MonitorCommand::Show { issue } => client.get_issue(&issue).await?,
        MonitorCommand::Set {
            issue,
            after,
            at,
            notes,
            service,
            timeout,
            max_attempts,
            recovery,
        } => {
            let now = Timestamp(chrono::Utc::now().timestamp_millis());
            let from_now = |d: &str| -> anyhow::Result<String> {
                let ms = parse_duration_ms(d).map_err(anyhow::Error::msg)?;
                Ok(Timestamp(now.0.saturating_add(ms)).to_rfc3339())
            };
            let next = match (after, at) {
                (Some(d), _) => from_now(&d)?,
                (None, Some(at)) => at,
                (None, None) => bail!("give when to look again with --in DURATION or --at TIME"),
            };
            let mut monitor = json!({ "nextCheckAt": next });
            let optional = [
                ("notes", notes.map(Value::from)),
                ("serviceName", service.clone().map(Value::from)),
                ("kind", service.map(|_| Value::from("external_service"))),
                (
                    "timeoutAt",
                    timeout
                        .as_deref()
                        .map(from_now)
                        .transpose()?
                        .map(Value::from),
                ),
                ("maxAttempts", max_attempts.map(Value::from)),
                ("recoveryPolicy", recovery.map(Value::from)),
            ];
            for (key, value) in optional {
                if let Some(value) = value {
                    monitor[key] = value;
                }
            }
            with_policy(client, &issue, Some(monitor)).await?
        }
        MonitorCommand::Clear { issue } => with_policy(client, &issue, None).await?,
        MonitorCommand::Check { issue } => {
            client.check_issue_monitor(&issue).await?;
            client.get_issue(&issue).await?
        }
    };
    let state = issue.monitor.state().cloned();
    if out.is_json() {
        return out.show(
            &json!({ "issue": issue.identifier, "monitor": state }),
            |_| String::new(),
        );
    }
    println!("{}", monitor_text(&issue, state.as_ref()));
    Ok(())
}

/// Sends the issue's `executionPolicy` as it is, with `monitor` set or taken out.
async fn with_policy(
    client: &RoostClient,
    issue: &str,
    monitor: Option<Value>,
) -> anyhow::Result<Issue> {
    let current = client.get_issue(issue).await?;
    let mut policy = current
        .paperclip
        .get("executionPolicy")
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    match monitor {
        Some(m) => policy["monitor"] = m,
        None => {
            if current.monitor.due_at().is_none() {
                bail!("{} has no scheduled monitor", current.identifier);
            }
            if let Some(p) = policy.as_object_mut() {
                p.remove("monitor");
            }
        }
    }
    let update = IssueUpdate {
        execution_policy: Some(policy),
        ..Default::default()
    };
    let updated = client
        .update_issue(issue, &update)
        .await
        .with_context(|| format!("updating the monitor of {issue}"))?;
    Ok(updated.issue.issue)
}

fn monitor_text(issue: &Issue, state: Option<&MonitorState>) -> String {
    let Some(m) = state else {
        return format!("{} has no monitor", issue.identifier);
    };
    fields(&[
        ("issue", issue.identifier.clone()),
        ("status", m.status.to_string()),
        ("next check", or_dash(m.next_check_at.map(when))),
        ("attempts", m.attempt_count.to_string()),
        ("last fired", or_dash(m.last_triggered_at.map(when))),
        ("notes", or_dash(m.notes.clone())),
        ("service", or_dash(m.service_name.clone())),
        ("timeout", or_dash(m.timeout_at.map(when))),
        ("max attempts", or_dash(m.max_attempts)),
        ("recovery", or_dash(m.recovery_policy)),
        ("scheduled by", or_dash(m.scheduled_by)),
        ("cleared", or_dash(m.clear_reason)),
    ])
}
