//! `roost agent list|create|show|chain|pause|resume|terminate|wake|key create|list|revoke|me`,
//! and its configuration's history: `revisions`, `revision`, `rollback`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{CreatedKey, NewAgent, WakeupRequest};
use roost_core::{AdapterType, Agent, WakeReason};

use super::output::{fields, or_dash, print_only, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: AgentCommand,
}

#[derive(Subcommand)]
enum AgentCommand {
    /// List a company's agents
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
    },
    /// Create an agent
    Create {
        #[arg(long)]
        name: String,
        /// What it does, e.g. engineer [default: general]
        #[arg(long)]
        role: Option<String>,
        /// How it runs: process, claude, codex or http [default: process]
        #[arg(long)]
        adapter: Option<AdapterType>,
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
        /// Print only the new agent's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Show one agent
    Show {
        /// Agent id or name
        agent: String,
        /// Print only the agent's id
        #[arg(short, long)]
        quiet: bool,
    },
    /// Show an agent's chain of command: its manager, that one's manager, up to the top
    Chain {
        /// Agent id or name
        agent: String,
    },
    /// Pause an agent: it gets no new runs until resumed
    Pause {
        /// Agent id or name
        agent: String,
    },
    /// Resume a paused agent
    Resume {
        /// Agent id or name
        agent: String,
    },
    /// Terminate an agent for good; its keys stop working
    Terminate {
        /// Agent id or name
        agent: String,
    },
    /// Terminate an agent and let go of its work: its wakes cancelled, its open issues
    /// unassigned, its reports without a manager (its history is kept)
    Delete {
        /// Agent id or name
        agent: String,
        /// Confirm the deletion
        #[arg(long)]
        yes: bool,
    },
    /// Ask for a run of an agent; prints the wake (the run is assigned asynchronously)
    Wake {
        /// Agent id or name
        agent: String,
        /// The issue the run is about (id or identifier)
        #[arg(long)]
        issue: Option<String>,
        /// on_demand or routine [default: on_demand]
        #[arg(long, value_parser = parse_wakeup_reason)]
        reason: Option<WakeReason>,
        /// An idempotency key: a repeat with the same key returns the first wake
        #[arg(long)]
        key: Option<String>,
        /// Print only the wake id
        #[arg(short, long)]
        quiet: bool,
    },
    /// List the changes of an agent's configuration, newest first (secrets redacted)
    Revisions {
        /// Agent id or name
        agent: String,
    },
    /// Show one change of an agent's configuration, before and after
    Revision {
        /// Agent id or name
        agent: String,
        /// The revision's id (from `roost agent revisions`)
        revision: String,
    },
    /// Put back the configuration a revision recorded after its change (secrets stay as now)
    Rollback {
        /// Agent id or name
        agent: String,
        /// The revision's id (from `roost agent revisions`)
        revision: String,
    },
    /// Manage an agent's API keys
    #[command(subcommand)]
    Key(KeyCommand),
    /// Show the agent that owns the token (agent keys only)
    Me,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Mint an API key; its secret is shown once
    Create {
        /// Agent id or name
        agent: String,
        /// A label for the key [default: default]
        #[arg(long)]
        name: Option<String>,
        /// Print only the token
        #[arg(short, long)]
        quiet: bool,
    },
    /// List an agent's API keys (no secrets)
    List {
        /// Agent id or name
        agent: String,
    },
    /// Revoke one of an agent's API keys
    Revoke {
        /// Agent id or name
        agent: String,
        /// The key's id (from `roost agent key list`)
        key_id: String,
    },
}

pub async fn run(session: &Session, args: AgentArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    let agent = match args.command {
        AgentCommand::List { company } => {
            let company_id = session.company_id(company.as_deref()).await?;
            out.show(&client.list_agents(&company_id).await?, |a| agent_table(a))?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Chain { agent } => {
            let agent = session.agent(&agent, None).await?;
            let colleagues = client.list_agents(&agent.company_id).await?;
            let chain = super::org::chain_of(&agent, &colleagues);
            out.show(&chain, |c| super::org::chain_text(&agent, c))?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Revisions { agent } => {
            let agent_id = session.agent_id(&agent, None).await?;
            let revisions = client.agent_config_revisions(&agent_id).await?;
            out.show(&revisions, |r| super::agent_revision::revision_table(r))?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Revision { agent, revision } => {
            let agent_id = session.agent_id(&agent, None).await?;
            let revision = client.agent_config_revision(&agent_id, &revision).await?;
            out.show(&revision, super::agent_revision::revision_text)?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Key(KeyCommand::Create { agent, name, quiet }) => {
            let agent_id = session.agent_id(&agent, None).await?;
            let key = client.create_agent_key(&agent_id, name.as_deref()).await?;
            if quiet {
                print_only(&key.token)?;
            } else {
                out.show(&key, key_text)?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Key(KeyCommand::List { agent }) => {
            let agent_id = session.agent_id(&agent, None).await?;
            let keys = client.list_agent_keys(&agent_id).await?;
            out.show(&keys, |k| super::token::credential_table(k))?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Key(KeyCommand::Revoke { agent, key_id }) => {
            let agent_id = session.agent_id(&agent, None).await?;
            client.revoke_agent_key(&agent_id, &key_id).await?;
            let done = serde_json::json!({ "ok": true, "id": key_id, "agentId": agent_id });
            out.show(&done, |_| format!("revoked agent key {key_id}\n"))?;
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Wake {
            agent,
            issue,
            reason,
            key,
            quiet,
        } => {
            // With an issue, its company is where the agent is looked for.
            let company_id = match &issue {
                Some(issue) => Some(client.get_issue(issue).await?.company_id),
                None => None,
            };
            let agent_id = session.agent_id(&agent, company_id.as_deref()).await?;
            let request = WakeupRequest {
                issue_id: issue,
                reason,
                payload: None,
                idempotency_key: key,
            };
            let result = client.wakeup(&agent_id, &request).await?;
            if quiet {
                print_only(&result.wake.wake.id)?;
            } else {
                let labels = super::wake::labels_for(session, &result.wake).await;
                out.show(&result, |r| super::wake::wakeup_text(r, &labels))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        AgentCommand::Create {
            name,
            role,
            adapter,
            company,
            quiet,
        } => {
            let company_id = session.company_id(company.as_deref()).await?;
            let new = NewAgent {
                name,
                role,
                adapter_type: adapter,
                ..NewAgent::default()
            };
            let agent = client.create_agent(&company_id, &new).await?;
            if quiet {
                return print_id(&agent);
            }
            agent
        }
        AgentCommand::Show { agent, quiet } => {
            let agent = session.agent(&agent, None).await?;
            if quiet {
                return print_id(&agent);
            }
            agent
        }
        AgentCommand::Pause { agent } => {
            let id = session.agent_id(&agent, None).await?;
            client.pause_agent(&id, None).await?
        }
        AgentCommand::Resume { agent } => {
            let id = session.agent_id(&agent, None).await?;
            client.resume_agent(&id).await?
        }
        AgentCommand::Terminate { agent } => {
            let id = session.agent_id(&agent, None).await?;
            client.terminate_agent(&id).await?
        }
        AgentCommand::Delete { agent, yes } => {
            if !yes {
                anyhow::bail!(
                    "deleting {agent} cancels its wakes and unassigns its open issues: \
                     add --yes to go ahead"
                );
            }
            let id = session.agent_id(&agent, None).await?;
            client.delete_agent(&id).await?
        }
        AgentCommand::Rollback { agent, revision } => {
            let id = session.agent_id(&agent, None).await?;
            client.rollback_agent_config(&id, &revision).await?
        }
        AgentCommand::Me => client.me().await?,
    };
    out.show(&agent, agent_fields)?;
    Ok(ExitCode::SUCCESS)
}

/// The reasons a person may give a wakeup; the others belong to events and timers (the server
/// refuses them too, but a usage error is the clearer answer).
pub(super) fn parse_wakeup_reason(text: &str) -> Result<WakeReason, String> {
    match text.parse::<WakeReason>()? {
        reason @ (WakeReason::OnDemand | WakeReason::Routine) => Ok(reason),
        other => Err(format!("a wakeup is on_demand or routine, not {other}")),
    }
}

fn print_id(agent: &Agent) -> anyhow::Result<ExitCode> {
    print_only(&agent.id)?;
    Ok(ExitCode::SUCCESS)
}

/// The daily caps in force, as `, daily: 10 runs, 500 cents` (empty without any).
fn daily_caps(hb: &roost_core::HeartbeatPolicy) -> String {
    let caps: Vec<String> = [
        hb.max_daily_runs.map(|n| format!("{n} runs")),
        hb.max_daily_cost_cents.map(|c| format!("{c} cents")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if caps.is_empty() {
        String::new()
    } else {
        format!(", daily: {}", caps.join(", "))
    }
}

fn status_text(a: &Agent) -> String {
    match a.pause_reason {
        Some(reason) => format!("{} ({reason})", a.status),
        None => a.status.to_string(),
    }
}

fn agent_table(agents: &[Agent]) -> String {
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|a| {
            vec![
                a.id.clone(),
                a.role.clone(),
                a.adapter_type.to_string(),
                status_text(a),
                a.name.clone(),
            ]
        })
        .collect();
    table(&["ID", "ROLE", "ADAPTER", "STATUS", "NAME"], &rows)
}

fn agent_fields(a: &Agent) -> String {
    let hb = &a.heartbeat;
    let heartbeat = if hb.enabled {
        format!("every {}s", hb.interval_sec)
    } else {
        "off".to_string()
    };
    let labels: Vec<String> = a
        .placement_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    fields(&[
        ("id", a.id.clone()),
        ("name", a.name.clone()),
        ("role", a.role.clone()),
        ("title", or_dash(a.title.as_deref())),
        ("status", status_text(a)),
        ("adapter", a.adapter_type.to_string()),
        (
            "heartbeat",
            format!(
                "{heartbeat}, wake on demand: {}, max runs: {}{}",
                hb.wake_on_demand,
                hb.max_concurrent_runs,
                daily_caps(hb)
            ),
        ),
        (
            "placement",
            if labels.is_empty() {
                "-".into()
            } else {
                labels.join(",")
            },
        ),
        ("company", a.company_id.clone()),
        ("created", a.created_at.to_string()),
    ])
}

fn key_text(k: &CreatedKey) -> String {
    let block = fields(&[
        ("key", k.id.clone()),
        ("name", k.name.clone()),
        ("agent", or_dash(k.agent_id.as_deref())),
        ("token", k.token.clone()),
    ]);
    format!("{block}\nThe token is shown only now; store it where the agent can read it (ROOST_TOKEN).\n")
}
