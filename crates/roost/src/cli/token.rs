//! `roost token create|list|revoke` (named admin tokens), and the list and revoke verbs that
//! `roost agent key` and `roost worker token` share with it. Lists show what a credential is,
//! never any part of its secret.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{CreatedAdminToken, CredentialView};

use super::output::{fields, or_dash, print_only, table, when};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct TokenArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Mint a named admin token; its secret is shown once
    Create {
        /// Who or what the token is for (shown in lists and as the actor in the activity log)
        #[arg(long)]
        name: String,
        /// Print only the token
        #[arg(short, long)]
        quiet: bool,
    },
    /// List the admin tokens (no secrets)
    List,
    /// Revoke an admin token; the last one that is not revoked cannot be
    Revoke {
        /// The token's id (from `roost token list`)
        id: String,
    },
}

pub async fn run(session: &Session, args: TokenArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        TokenCommand::Create { name, quiet } => {
            let token = client.create_admin_token(&name).await?;
            if quiet {
                print_only(&token.token)?;
            } else {
                out.show(&token, admin_token_text)?;
            }
        }
        TokenCommand::List => {
            out.show(&client.list_admin_tokens().await?, |l| credential_table(l))?
        }
        TokenCommand::Revoke { id } => {
            let view = client.revoke_admin_token(&id).await?;
            out.show(&view, revoked_text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn admin_token_text(t: &CreatedAdminToken) -> String {
    let block = fields(&[
        ("token id", t.id.clone()),
        ("name", t.name.clone()),
        ("token", t.token.clone()),
    ]);
    format!("{block}\nThe token is shown only now; keep it where an administrator's secrets go.\n")
}

/// What `revoke` prints for a person.
pub(super) fn revoked_text(c: &CredentialView) -> String {
    format!("revoked {} {} ({})\n", kind_label(c), c.id, c.name)
}

fn kind_label(c: &CredentialView) -> &'static str {
    match c.kind {
        roost_core::CredentialKind::Admin => "admin token",
        roost_core::CredentialKind::AgentKey => "agent key",
        roost_core::CredentialKind::WorkerJoin => "join token",
        roost_core::CredentialKind::Worker => "worker credential",
    }
}

/// One row per credential. Join tokens add their expiry, use count and bound workers.
pub(super) fn credential_table(list: &[CredentialView]) -> String {
    let join = list
        .iter()
        .any(|c| c.kind == roost_core::CredentialKind::WorkerJoin);
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|c| {
            let status = match (c.revoked, c.revoked_at) {
                (true, Some(at)) => format!("revoked {}", when(at)),
                (true, None) => "revoked".into(),
                (false, _) => "valid".into(),
            };
            let mut row = vec![c.id.clone(), c.name.clone(), when(c.created_at), status];
            if join {
                row.push(or_dash(c.expires_at.map(when)));
                row.push(match c.max_uses {
                    Some(max) => format!("{}/{max}", c.worker_ids.len()),
                    None => "unlimited".into(),
                });
                row.push(if c.worker_ids.is_empty() {
                    "-".into()
                } else {
                    c.worker_ids.join(",")
                });
            }
            row
        })
        .collect();
    let mut headers = vec!["ID", "NAME", "CREATED", "STATUS"];
    if join {
        headers.extend(["EXPIRES", "USES", "WORKERS"]);
    }
    table(&headers, &rows)
}

/// `--ttl`: seconds, or a number with `s`, `m`, `h` or `d` (`90s`, `30m`, `24h`, `7d`).
pub(super) fn parse_ttl(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => {
            return Err(format!(
                "unknown unit {unit:?}: use s, m, h or d (e.g. 24h)"
            ))
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: use e.g. 3600, 90s, 30m, 24h or 7d"))?;
    match n.checked_mul(scale) {
        Some(0) | None => {
            Err("the duration must be at least 1 second and not absurdly long".into())
        }
        Some(secs) => Ok(secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_take_units() {
        assert_eq!(parse_ttl("3600"), Ok(3600));
        assert_eq!(parse_ttl("90s"), Ok(90));
        assert_eq!(parse_ttl("30m"), Ok(1800));
        assert_eq!(parse_ttl("24h"), Ok(86_400));
        assert_eq!(parse_ttl("7d"), Ok(604_800));
        for bad in ["", "0", "h", "5w", "-3m", "1.5h", "99999999999999999999d"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lists_show_no_secret_and_join_token_limits() {
        let view = CredentialView {
            id: "t1".into(),
            kind: roost_core::CredentialKind::WorkerJoin,
            name: "rack-1".into(),
            agent_id: None,
            created_at: roost_core::Timestamp(0),
            revoked: false,
            revoked_at: None,
            expires_at: None,
            max_uses: Some(1),
            worker_ids: vec!["wk1".into()],
            worker_id: None,
            join_token_id: None,
        };
        let text = credential_table(&[view]);
        assert!(text.contains("USES"), "{text}");
        assert!(text.contains("1/1"), "{text}");
        assert!(text.contains("wk1"), "{text}");
    }
}
