//! `roost routine list|create|show|pause|resume|run|runs`: routines, Paperclip's
//! schedules that open work for an agent, and the history of their firings.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::{fields, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct RoutineArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: RoutineCommand,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum RoutineCommand {
    /// The company's routines, with their triggers and last run
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
    },
    /// Create a routine, and a schedule for it when --schedule is given
    Create {
        #[arg(long)]
        company: Option<String>,
        /// The title of the issue each firing opens (`{{name}}` takes a variable's value)
        #[arg(long)]
        title: String,
        #[arg(long)]
        description: Option<String>,
        /// The agent (id or name) its issues are assigned to
        #[arg(long)]
        agent: String,
        /// `0 9 * * 1-5` (with --timezone), `every 15m` or `at 2030-01-01T09:00:00Z`
        #[arg(long)]
        schedule: Option<String>,
        /// An IANA time zone for a cron schedule [default: UTC]
        #[arg(long)]
        timezone: Option<String>,
        /// critical, high, medium or low
        #[arg(long, default_value = "medium")]
        priority: String,
        /// coalesce_if_active, always_enqueue or skip_if_active
        #[arg(long, default_value = "coalesce_if_active")]
        concurrency: String,
        /// skip_missed or enqueue_missed_with_cap
        #[arg(long, default_value = "skip_missed")]
        catch_up: String,
        /// `issue` opens an issue per firing; `wake` only wakes the agent (reason `routine`)
        #[arg(long, default_value = "issue")]
        action: String,
    },
    /// One routine: its fields, triggers and recent runs
    Show { routine: String },
    /// Stop firing (schedules pause; a manual run still works)
    Pause { routine: String },
    /// Fire again; missed instants are not made up
    Resume { routine: String },
    /// Run it now
    Run { routine: String },
    /// Its runs, newest first
    Runs {
        routine: String,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

fn text(v: &Value, field: &str) -> String {
    match &v[field] {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn schedules(r: &Value) -> String {
    let all: Vec<String> = r["triggers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| match t["kind"].as_str() {
            Some("schedule") => format!("{} ({})", text(t, "cronExpression"), text(t, "timezone")),
            _ => text(t, "kind"),
        })
        .collect();
    if all.is_empty() {
        "-".into()
    } else {
        all.join(", ")
    }
}

fn runs_table(runs: &Value) -> String {
    let rows: Vec<Vec<String>> = runs
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                text(r, "id"),
                text(r, "source"),
                text(r, "status"),
                text(r, "scheduledFor"),
                text(r, "triggeredAt"),
                r["linkedIssue"]["identifier"]
                    .as_str()
                    .unwrap_or("-")
                    .to_string(),
                text(r, "failureReason"),
            ]
        })
        .collect();
    table(
        &[
            "RUN",
            "SOURCE",
            "STATUS",
            "SCHEDULED FOR",
            "TRIGGERED",
            "ISSUE",
            "REASON",
        ],
        &rows,
    )
}

fn routine_text(r: &Value) -> String {
    fields(&[
        ("routine", text(r, "id")),
        ("title", text(r, "title")),
        ("status", text(r, "status")),
        ("agent", text(r, "assigneeAgentId")),
        ("schedules", schedules(r)),
        ("concurrency", text(r, "concurrencyPolicy")),
        ("catch-up", text(r, "catchUpPolicy")),
        ("failures in a row", text(r, "consecutiveFailures")),
    ])
}

pub async fn run(session: &Session, args: RoutineArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        RoutineCommand::List { company } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let list = client.list_routines(&company_id).await?;
            out.show(&list, |l| {
                let rows: Vec<Vec<String>> = l
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        vec![
                            text(r, "id"),
                            text(r, "title"),
                            text(r, "status"),
                            schedules(r),
                            r["lastRun"]["status"].as_str().unwrap_or("-").to_string(),
                        ]
                    })
                    .collect();
                table(
                    &["ROUTINE", "TITLE", "STATUS", "SCHEDULES", "LAST RUN"],
                    &rows,
                )
            })?;
        }
        RoutineCommand::Create {
            company,
            title,
            description,
            agent,
            schedule,
            timezone,
            priority,
            concurrency,
            catch_up,
            action,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let agent_id = session.agent_id(&agent, Some(&company_id)).await?;
            let body = json!({
                "title": title, "description": description, "assigneeAgentId": agent_id,
                "priority": priority, "concurrencyPolicy": concurrency,
                "catchUpPolicy": catch_up, "action": action,
            });
            let created = client.create_routine(&company_id, &body).await?;
            let id = text(&created, "id");
            let shown = match schedule {
                Some(expr) => {
                    let trigger =
                        json!({ "kind": "schedule", "cronExpression": expr, "timezone": timezone });
                    client.add_routine_trigger(&id, &trigger).await?;
                    client.get_routine(&id).await?
                }
                None => created,
            };
            out.show(&shown, routine_text)?;
        }
        RoutineCommand::Show { routine } => {
            let r = client.get_routine(&routine).await?;
            out.show(&r, |r| {
                format!("{}\n{}", routine_text(r), runs_table(&r["recentRuns"]))
            })?;
        }
        RoutineCommand::Pause { routine } => {
            let r = client
                .update_routine(&routine, &json!({ "status": "paused" }))
                .await?;
            out.show(&r, routine_text)?;
        }
        RoutineCommand::Resume { routine } => {
            let r = client
                .update_routine(&routine, &json!({ "status": "active" }))
                .await?;
            out.show(&r, routine_text)?;
        }
        RoutineCommand::Run { routine } => {
            let run = client
                .run_routine(&routine, &json!({ "source": "manual" }))
                .await?;
            out.show(&run, |r| {
                fields(&[
                    ("run", text(r, "id")),
                    ("status", text(r, "status")),
                    (
                        "issue",
                        r["linkedIssue"]["identifier"]
                            .as_str()
                            .unwrap_or("-")
                            .to_string(),
                    ),
                    ("reason", text(r, "failureReason")),
                ])
            })?;
        }
        RoutineCommand::Runs { routine, limit } => {
            let runs = client.routine_runs(&routine, limit).await?;
            out.show(&runs, runs_table)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
