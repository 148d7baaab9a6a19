//! `roost budget set|show|resolve` and `roost cost summary|record`: spending limits, where they
//! stand, the operator's decisions on incidents, and the money spent.

use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use roost_client::{BudgetOverview, CostSummary, NewBudgetPolicy};

use super::output::{fields, or_dash, table, when};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct BudgetArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: BudgetCommand,
}

#[derive(Subcommand)]
enum BudgetCommand {
    /// Set the budget of the company or of one agent (replaces the scope's current one)
    Set {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Budget this agent (id or name) instead of the whole company
        #[arg(long)]
        agent: Option<String>,
        /// The limit in US dollars, e.g. 25 or 0.50
        #[arg(long)]
        usd: String,
        /// calendar_month_utc or lifetime
        #[arg(long, default_value = "calendar_month_utc")]
        window: String,
        /// Open a warning incident at this percent of the limit
        #[arg(long, default_value_t = 80)]
        warn_percent: u8,
        /// Only warn at the limit; do not stop runs or pause
        #[arg(long)]
        no_hard_stop: bool,
    },
    /// Budgets with spend and reservations, and incidents, open first
    Show {
        #[arg(long)]
        company: Option<String>,
    },
    /// Decide an open incident: raise_and_resume (with --usd), keep_paused or dismiss; a
    /// wake_loop incident: resume (its paused agents), keep_paused or dismiss
    Resolve {
        incident: String,
        #[arg(long)]
        action: String,
        /// The new limit in US dollars, for raise_and_resume
        #[arg(long)]
        usd: Option<String>,
        #[arg(long)]
        company: Option<String>,
    },
}

#[derive(Args)]
pub struct CostArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: CostCommand,
}

#[derive(Subcommand)]
enum CostCommand {
    /// Spend this month and in all, per agent
    Summary {
        #[arg(long)]
        company: Option<String>,
    },
}

/// Dollars as typed ("25", "0.50", "$3.2") in cents; refuses negatives, fractions of a cent
/// and anything else.
pub(super) fn parse_usd(text: &str) -> anyhow::Result<u64> {
    let t = text.trim().trim_start_matches('$');
    let (whole, frac) = t.split_once('.').unwrap_or((t, "0"));
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if !digits(whole) || !digits(frac) || frac.len() > 2 {
        bail!("`{text}` is not an amount in dollars (e.g. 25 or 0.50)");
    }
    let cents = format!("{frac:0<2}").parse::<u64>()?;
    Ok(whole
        .parse::<u64>()?
        .saturating_mul(100)
        .saturating_add(cents))
}

fn usd(cents: u64) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

pub async fn run(session: &Session, args: BudgetArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        BudgetCommand::Set {
            company,
            agent,
            usd: amount,
            window,
            warn_percent,
            no_hard_stop,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let (scope_type, scope_id) = match agent {
                Some(a) => (
                    "agent",
                    Some(session.agent_id(&a, Some(&company_id)).await?),
                ),
                None => ("company", None),
            };
            let policy = NewBudgetPolicy {
                scope_type: scope_type.into(),
                scope_id,
                window_kind: window,
                amount: parse_usd(&amount)?,
                warn_percent,
                hard_stop_enabled: !no_hard_stop,
            };
            let set = client.set_budget(&company_id, &policy).await?;
            out.show(&set, |p| {
                fields(&[
                    ("budget", p.id.clone()),
                    ("scope", format!("{} {}", p.scope_type, p.scope_id)),
                    ("limit", usd(p.amount)),
                    ("window", p.window_kind.to_string()),
                    ("warn at", format!("{}%", p.warn_percent)),
                    ("hard stop", p.hard_stop_enabled.to_string()),
                ])
            })?;
        }
        BudgetCommand::Show { company } => {
            let company_id = session.company_id(company.as_deref()).await?;
            out.show(&client.budget_overview(&company_id).await?, overview_text)?;
        }
        BudgetCommand::Resolve {
            incident,
            action,
            usd: amount,
            company,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let amount = amount.as_deref().map(parse_usd).transpose()?;
            let resolved = client
                .resolve_incident(&company_id, &incident, &action, amount)
                .await?;
            out.show(&resolved, |i| {
                fields(&[
                    ("incident", i.id.clone()),
                    ("status", i.status.to_string()),
                    ("resolution", or_dash(i.resolution)),
                ])
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn overview_text(o: &BudgetOverview) -> String {
    let policies: Vec<Vec<String>> = o
        .policies
        .iter()
        .map(|p| {
            vec![
                p.policy.id.clone(),
                format!("{} {}", p.policy.scope_type, p.policy.scope_id),
                p.policy.window_kind.to_string(),
                usd(p.policy.amount),
                usd(p.spent),
                usd(p.reserved),
                usd(p.remaining),
                if p.policy.hard_stop_enabled {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            ]
        })
        .collect();
    let incidents: Vec<Vec<String>> = o
        .incidents
        .iter()
        .map(|i| {
            vec![
                i.id.clone(),
                // A wake-loop incident names its loop and agents where a budget's names its policy.
                match &i.wake_loop {
                    Some(l) => format!("{}:{}", i.kind, l.loop_kind),
                    None => i.kind.to_string(),
                },
                i.status.to_string(),
                match &i.wake_loop {
                    Some(l) => format!("agents {}", l.agent_ids.join(",")),
                    None => i.policy_id.clone(),
                },
                i.message.clone(),
                when(i.created_at),
            ]
        })
        .collect();
    format!(
        "{}\n{}",
        table(
            &[
                "BUDGET",
                "SCOPE",
                "WINDOW",
                "LIMIT",
                "SPENT",
                "RESERVED",
                "LEFT",
                "HARD STOP"
            ],
            &policies
        ),
        if incidents.is_empty() {
            "no incidents\n".to_string()
        } else {
            table(
                &["INCIDENT", "KIND", "STATUS", "BUDGET", "WHY", "OPENED"],
                &incidents,
            )
        }
    )
}

pub async fn run_cost(session: &Session, args: CostArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        CostCommand::Summary { company } => {
            let company_id = session.company_id(company.as_deref()).await?;
            out.show(&client.cost_summary(&company_id).await?, summary_text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn summary_text(s: &CostSummary) -> String {
    let rows: Vec<Vec<String>> = s
        .by_agent
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                usd(a.month_cents),
                usd(a.lifetime_cents),
                a.input_tokens.to_string(),
                a.output_tokens.to_string(),
            ]
        })
        .collect();
    format!(
        "{}\n{}",
        fields(&[
            ("this month", usd(s.month_cents)),
            ("all time", usd(s.lifetime_cents)),
            ("reserved now", usd(s.reserved_cents)),
        ]),
        table(
            &["AGENT", "MONTH", "ALL TIME", "TOKENS IN", "TOKENS OUT"],
            &rows
        )
    )
}

#[cfg(test)]
mod tests {
    use super::parse_usd;

    #[test]
    fn dollars_parse_to_cents_and_nonsense_is_refused() {
        assert_eq!(parse_usd("25").unwrap(), 2500);
        assert_eq!(parse_usd("0.5").unwrap(), 50);
        assert_eq!(parse_usd("$1.05").unwrap(), 105);
        for bad in ["-1", "1.005", "abc", "", "1.", ".5", "1e3"] {
            assert!(parse_usd(bad).is_err(), "{bad} was accepted");
        }
    }
}
