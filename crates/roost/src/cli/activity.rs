//! `roost activity` and `roost audit verify`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{ActivityPage, AuditReport};
use roost_core::activity::ActivityEntry;

use super::output::{or_dash, table, when};
use super::{AgentNames, ClientOpts, Session};

/// Exit code of `roost audit verify` when the chain is broken, so scripts can tell tampering
/// (3) from an unreachable server or a bad token (1).
pub const EXIT_CHAIN_BROKEN: u8 = 3;

#[derive(Args)]
pub struct ActivityArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    /// Company id, issue prefix or name [default: the only or oldest company]
    #[arg(long)]
    company: Option<String>,
    /// At most this many entries [default: the server's, 100]
    #[arg(long)]
    limit: Option<u32>,
}

#[derive(Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Re-hash the whole activity chain on the server (administrators); exits 3 if broken
    Verify,
}

pub async fn run_activity(session: &Session, args: ActivityArgs) -> anyhow::Result<ExitCode> {
    let company_id = session.company_id(args.company.as_deref()).await?;
    let entries = session
        .client
        .list_activity(
            &company_id,
            &ActivityPage {
                before: None,
                limit: args.limit,
            },
        )
        .await?;
    let names = if session.out.is_json() {
        AgentNames::default()
    } else {
        session.agent_names(&company_id).await
    };
    session.out.show(&entries, |e| activity_table(e, &names))?;
    Ok(ExitCode::SUCCESS)
}

pub async fn run_audit(session: &Session, args: AuditArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Verify => {
            let report = session.client.verify_audit().await?;
            session.out.show(&report, audit_text)?;
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_CHAIN_BROKEN)
            })
        }
    }
}

fn activity_table(entries: &[ActivityEntry], names: &AgentNames) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            vec![
                e.seq.to_string(),
                when(e.at),
                actor(e, names),
                e.action.clone(),
                format!("{} {}", e.entity_type, e.entity_id),
                or_dash(e.run_id.as_deref()),
            ]
        })
        .collect();
    table(&["SEQ", "AT", "ACTOR", "ACTION", "ENTITY", "RUN"], &rows)
}

/// `agent:coder` rather than `agent:<id>` when the agent is known.
fn actor(e: &ActivityEntry, names: &AgentNames) -> String {
    let id = if e.actor_type == "agent" {
        names.label(Some(&e.actor_id))
    } else {
        e.actor_id.clone()
    };
    format!("{}:{id}", e.actor_type)
}

fn audit_text(report: &AuditReport) -> String {
    if report.ok {
        let head = report.head_hash.as_deref().unwrap_or("-");
        return format!(
            "activity chain intact: {} entries, head {head}",
            report.entries
        );
    }
    match report.broken_at_seq {
        Some(seq) => {
            // The server's message starts with "entry N: " itself; say it once.
            let reason = report
                .message
                .strip_prefix(&format!("entry {seq}: "))
                .unwrap_or(&report.message);
            format!("activity chain BROKEN at entry {seq}: {reason}")
        }
        None => format!("activity chain BROKEN: {}", report.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ok: bool, broken_at_seq: Option<u64>, message: &str) -> AuditReport {
        AuditReport {
            ok,
            entries: if ok { 12 } else { 2 },
            head_hash: ok.then(|| "ab12".to_string()),
            broken_at_seq,
            message: message.into(),
        }
    }

    #[test]
    fn audit_verdicts_read_as_one_line() {
        assert_eq!(
            audit_text(&report(true, None, "")),
            "activity chain intact: 12 entries, head ab12"
        );
        let broken = report(
            false,
            Some(3),
            "entry 3: stored hash does not match its contents",
        );
        assert_eq!(
            audit_text(&broken),
            "activity chain BROKEN at entry 3: stored hash does not match its contents"
        );
        let gap = report(
            false,
            Some(5),
            "entry 5 follows entry 3: the sequence has a gap",
        );
        assert_eq!(
            audit_text(&gap),
            "activity chain BROKEN at entry 5: entry 5 follows entry 3: the sequence has a gap"
        );
    }
}
