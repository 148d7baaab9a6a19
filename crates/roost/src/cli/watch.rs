//! `roost watch`: a company's event stream as it happens, one line per event (`--json`: one
//! JSON object per line, for scripts). Survives the loss of a server: it resumes on the next
//! one from the last event shown (`roost_client::RoostClient::follow_events`).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use roost_client::Event;

use super::output::when;
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    /// Company id, issue prefix or name [default: the only or oldest company]
    #[arg(long)]
    company: Option<String>,
    /// Start after this event's seq (0: from the company's first event)
    #[arg(long, default_value_t = 0)]
    after: u64,
    /// Print the events there are now and exit, instead of following new ones
    #[arg(long)]
    no_follow: bool,
}

fn line(e: &Event) -> String {
    format!(
        "{:>8}  {}  {:<28} {:<12} {}  by {} {}",
        e.seq,
        when(e.at),
        e.action,
        e.entity_type,
        e.entity_id,
        e.actor_type,
        e.actor_id
    )
}

pub async fn run(session: &Session, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let company_id = session.company_id(args.company.as_deref()).await?;
    let json = session.out.is_json();
    let mut stdout = std::io::stdout();
    let mut failed = None;
    let mut sink = |event: Event| {
        let text = if json {
            serde_json::to_string(&event).unwrap_or_default()
        } else {
            line(&event)
        };
        // A closed pipe (`roost watch | head`) ends the watch quietly.
        if failed.is_none() {
            if let Err(e) = writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
                failed = Some(e);
            }
        }
    };
    session
        .client
        .follow_events(&company_id, args.after, !args.no_follow, &mut sink)
        .await?;
    Ok(ExitCode::SUCCESS)
}
