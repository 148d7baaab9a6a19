//! The client commands: `roost company|agent|issue|run|wake|worker|budget|cost|activity|audit|watch|memory|approval|goal|project|label|routine ...`,
//! each a REST call
//! (or a few) against a running cluster, with human output or `--json`.

mod activity;
mod agent;
mod agent_revision;
mod approval;
mod attachment;
mod budget;
mod cluster;
mod company;
mod document;
mod interaction;
mod issue;
mod label;
mod memory;
mod monitor;
mod org;
mod output;
mod project;
mod routine;
mod run;
mod token;
mod wake;
mod watch;
mod worker;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use roost_client::RoostClient;
use roost_core::{Agent, Company, Issue};

use output::Output;

#[derive(Subcommand)]
pub enum ClientCommand {
    /// Companies: the tenants that own agents, issues and runs
    Company(company::CompanyArgs),
    /// Agents: list, create, pause, resume, terminate, wake, and mint API keys
    Agent(agent::AgentArgs),
    /// Issues: the task board, comments, checkout and release
    Issue(issue::IssueArgs),
    /// Heartbeat runs: start, finish, cancel, inspect
    Run(run::RunArgs),
    /// Wakes: requests for a run, what became of them, and why an agent did not run
    Wake(wake::WakeArgs),
    /// Workers: the machines that run agents, and their join tokens
    Worker(worker::WorkerArgs),
    /// Admin tokens: create named ones, list them, revoke them
    Token(token::TokenArgs),
    /// A company's activity log, newest first
    Activity(activity::ActivityArgs),
    /// Check the tamper-evident activity chain
    Audit(activity::AuditArgs),
    /// Follow a company's events as they happen (resumes across a server's loss)
    Watch(watch::WatchArgs),
    /// The cluster: status, formation, adding and removing nodes
    Cluster(cluster::ClusterArgs),
    /// Budgets: limits per company or agent, where they stand, incident decisions
    Budget(budget::BudgetArgs),
    /// Costs: money spent, per agent
    Cost(budget::CostArgs),
    /// Agent memory: the recovery door, the rolling log, MEMORY.md and STATE.md
    Memory(memory::MemoryArgs),
    /// Goals: why work exists, in a hierarchy
    Goal(project::GoalArgs),
    /// Projects: a lead, goals, and a pause that holds their issues' runs
    Project(project::ProjectArgs),
    /// Labels: a company's named colours for issues
    Label(label::LabelArgs),
    /// Approvals: ask, decide (the requester is woken with the decision), comment
    Approval(approval::ApprovalArgs),
    /// Routines: schedules (cron in a time zone, every, at) that open issues for an agent
    Routine(routine::RoutineArgs),
}

/// How to reach the cluster; accepted by every client command, before or after its verb.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Client options")]
pub struct ClientOpts {
    /// Base URL of any server node; several, comma-separated, to fail over between them
    #[arg(
        long,
        global = true,
        env = "ROOST_SERVER",
        default_value = "http://127.0.0.1:7480"
    )]
    server: String,
    /// Bearer token: an admin token or an agent key [default: the token in ./.roost/admin-token]
    #[arg(long, global = true, env = "ROOST_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Act for this run (sent as X-Roost-Run-Id); a checkout needs one
    #[arg(long, global = true, env = "ROOST_RUN_ID")]
    run_id: Option<String>,
    /// Print the result as JSON, for scripts
    #[arg(long, global = true)]
    json: bool,
    /// CA certificate (PEM) that https:// servers are checked against (the cluster CA of
    /// `roost cert init`) [default: the public web roots]
    #[arg(long, global = true, env = "ROOST_CA_FILE")]
    ca_file: Option<std::path::PathBuf>,
    /// Client certificate to present (PEM, `roost cert issue client`); needs --key-file
    #[arg(long, global = true, env = "ROOST_CERT_FILE")]
    cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM)
    #[arg(long, global = true, env = "ROOST_KEY_FILE")]
    key_file: Option<std::path::PathBuf>,
}

impl ClientCommand {
    fn client_opts(&self) -> &ClientOpts {
        match self {
            ClientCommand::Company(a) => &a.client,
            ClientCommand::Agent(a) => &a.client,
            ClientCommand::Issue(a) => &a.client,
            ClientCommand::Run(a) => &a.client,
            ClientCommand::Wake(a) => &a.client,
            ClientCommand::Worker(a) => &a.client,
            ClientCommand::Token(a) => &a.client,
            ClientCommand::Activity(a) => &a.client,
            ClientCommand::Audit(a) => &a.client,
            ClientCommand::Watch(a) => &a.client,
            ClientCommand::Cluster(a) => &a.client,
            ClientCommand::Budget(a) => &a.client,
            ClientCommand::Cost(a) => &a.client,
            ClientCommand::Memory(a) => &a.client,
            ClientCommand::Routine(a) => &a.client,
            ClientCommand::Approval(a) => &a.client,
            ClientCommand::Goal(a) => &a.client,
            ClientCommand::Project(a) => &a.client,
            ClientCommand::Label(a) => &a.client,
        }
    }
}

pub async fn run(command: ClientCommand) -> anyhow::Result<ExitCode> {
    let session = Session::connect(command.client_opts())?;
    match command {
        ClientCommand::Company(a) => company::run(&session, a).await,
        ClientCommand::Agent(a) => agent::run(&session, a).await,
        ClientCommand::Issue(a) => issue::run(&session, a).await,
        ClientCommand::Run(a) => run::run(&session, a).await,
        ClientCommand::Wake(a) => wake::run(&session, a).await,
        ClientCommand::Budget(a) => budget::run(&session, a).await,
        ClientCommand::Cost(a) => budget::run_cost(&session, a).await,
        ClientCommand::Worker(a) => worker::run(&session, a).await,
        ClientCommand::Token(a) => token::run(&session, a).await,
        ClientCommand::Activity(a) => activity::run_activity(&session, a).await,
        ClientCommand::Audit(a) => activity::run_audit(&session, a).await,
        ClientCommand::Watch(a) => watch::run(&session, a).await,
        ClientCommand::Cluster(a) => cluster::run(&session, a).await,
        ClientCommand::Memory(a) => memory::run(&session, a).await,
        ClientCommand::Routine(a) => routine::run(&session, a).await,
        ClientCommand::Approval(a) => approval::run(&session, a).await,
        ClientCommand::Goal(a) => project::run_goal(&session, a).await,
        ClientCommand::Project(a) => project::run_project(&session, a).await,
        ClientCommand::Label(a) => label::run(&session, a).await,
    }
}

/// A connected client and where its results go.
pub(crate) struct Session {
    pub client: RoostClient,
    pub out: Output,
    pub run_id: Option<String>,
}

impl Session {
    pub fn connect(opts: &ClientOpts) -> anyhow::Result<Session> {
        let token = resolve_token(opts.token.as_deref(), &dev_dir())?;
        let run_id = opts
            .run_id
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        let tls = roost_client::ClientTls {
            ca_file: opts.ca_file.clone(),
            cert_file: opts.cert_file.clone(),
            key_file: opts.key_file.clone(),
        };
        let mut client = RoostClient::with_tls(&opts.server, &token, &tls)?;
        if let Some(run) = &run_id {
            client = client.with_run_id(run)?;
        }
        Ok(Session {
            client,
            out: Output::new(opts.json),
            run_id,
        })
    }

    /// The id of the company `wanted` names (id, issue prefix or name), or of the default one.
    pub async fn company_id(&self, wanted: Option<&str>) -> anyhow::Result<String> {
        let companies = self.client.list_companies().await?;
        let choice = pick_company(&companies, wanted)?;
        if let Some(note) = choice.note {
            eprintln!("note: {note}");
        }
        Ok(choice.id)
    }

    /// The agent `wanted` names: an agent id, or an agent name (names are unique per company,
    /// case-insensitive). It is looked up among the agents of `company_id`, or without one
    /// among the agents of every company the token can see; an unknown value is an error here
    /// rather than a 404 (or an empty list) from the server.
    pub async fn agent(&self, wanted: &str, company_id: Option<&str>) -> anyhow::Result<Agent> {
        let agents = match company_id {
            Some(company_id) => self.client.list_agents(company_id).await?,
            None => {
                let mut all = Vec::new();
                for company in self.client.list_companies().await? {
                    all.extend(self.client.list_agents(&company.id).await?);
                }
                all
            }
        };
        pick_agent(&agents, wanted).cloned()
    }

    /// The id of the agent `wanted` names; see [`Session::agent`].
    pub async fn agent_id(&self, wanted: &str, company_id: Option<&str>) -> anyhow::Result<String> {
        Ok(self.agent(wanted, company_id).await?.id)
    }

    /// Agent names by id for display; on failure the tables show ids instead, since names are
    /// a convenience and must not make a listing fail.
    pub async fn agent_names(&self, company_id: &str) -> AgentNames {
        AgentNames(
            self.client
                .list_agents(company_id)
                .await
                .unwrap_or_default(),
        )
    }

    /// Issue identifiers by id for display, from one listing of the company's issues; on
    /// failure the tables show ids, as with [`Session::agent_names`].
    pub async fn issue_labels(&self, company_id: &str) -> IssueLabels {
        let filter = roost_client::IssueFilter {
            limit: Some(ISSUE_LABEL_LIMIT),
            ..Default::default()
        };
        IssueLabels(
            self.client
                .list_issues(company_id, &filter)
                .await
                .unwrap_or_default(),
        )
    }
}

/// How many issues one look-up of identifiers fetches: the server's maximum page.
const ISSUE_LABEL_LIMIT: usize = 5000;

/// Where `roost dev` keeps its admin token: `$ROOST_DEV_DIR`, as `roost dev` reads it, or
/// `./.roost`.
fn dev_dir() -> PathBuf {
    std::env::var_os("ROOST_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".roost"))
}

/// The token from `--token`/`ROOST_TOKEN`, else the one `roost dev` wrote in `dev_dir`.
fn resolve_token(given: Option<&str>, dev_dir: &Path) -> anyhow::Result<String> {
    if let Some(token) = given.map(str::trim).filter(|t| !t.is_empty()) {
        return Ok(token.to_string());
    }
    let path = dev_dir.join(crate::dev::TOKEN_FILE);
    if !path.exists() {
        bail!("no token: set ROOST_TOKEN or pass --token");
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        bail!(
            "{} is empty; set ROOST_TOKEN or pass --token",
            path.display()
        );
    }
    Ok(token.to_string())
}

/// The outcome of choosing a company, with a note for stderr when the choice was a guess.
#[derive(Debug, PartialEq, Eq)]
struct CompanyChoice {
    id: String,
    note: Option<String>,
}

/// Matches `wanted` against ids, then issue prefixes, then names; an unknown value is passed
/// through for the server to answer. Without `wanted`, the oldest company is the default:
/// that is the one `roost dev` created, and the server's own order is by random id.
fn pick_company(companies: &[Company], wanted: Option<&str>) -> anyhow::Result<CompanyChoice> {
    if let Some(wanted) = wanted.map(str::trim).filter(|w| !w.is_empty()) {
        let by_id = companies.iter().find(|c| c.id == wanted);
        let by_prefix = || {
            companies
                .iter()
                .find(|c| c.issue_prefix.eq_ignore_ascii_case(wanted))
        };
        let by_name = || {
            let named: Vec<&Company> = companies
                .iter()
                .filter(|c| c.name.eq_ignore_ascii_case(wanted))
                .collect();
            match named.as_slice() {
                [] => Ok(None),
                [one] => Ok(Some(*one)),
                _ => Err(anyhow!(
                    "{} companies are named `{wanted}`; pass an id or prefix",
                    named.len()
                )),
            }
        };
        let found = match by_id.or_else(by_prefix) {
            Some(c) => Some(c),
            None => by_name()?,
        };
        let id = found
            .map(|c| c.id.clone())
            .unwrap_or_else(|| wanted.to_string());
        return Ok(CompanyChoice { id, note: None });
    }
    let mut sorted: Vec<&Company> = companies.iter().collect();
    sorted.sort_by(|a, b| {
        a.created_at
            .cmp(&b.created_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    match sorted.as_slice() {
        [] => bail!("no company exists yet; create one with `roost company create --name NAME`"),
        [only] => Ok(CompanyChoice {
            id: only.id.clone(),
            note: None,
        }),
        [first, ..] => Ok(CompanyChoice {
            id: first.id.clone(),
            note: Some(format!(
                "using company {} ({}), the oldest of {}; pass --company to choose",
                output::one_line(&first.name),
                first.issue_prefix,
                companies.len()
            )),
        }),
    }
}

/// Matches `wanted` against agent ids, then against names, ignoring ASCII case as the server
/// does when it keeps names unique per company. The same name in two companies is ambiguous.
fn pick_agent<'a>(agents: &'a [Agent], wanted: &str) -> anyhow::Result<&'a Agent> {
    let wanted = wanted.trim();
    if wanted.is_empty() {
        bail!("an agent id or name is needed");
    }
    if let Some(agent) = agents.iter().find(|a| a.id == wanted) {
        return Ok(agent);
    }
    let named: Vec<&Agent> = agents
        .iter()
        .filter(|a| a.name.trim().eq_ignore_ascii_case(wanted))
        .collect();
    match named.as_slice() {
        [] => bail!(
            "no agent has the id or name `{}`; `roost agent list` shows them",
            output::one_line(wanted)
        ),
        [one] => Ok(*one),
        _ => {
            let ids: Vec<&str> = named.iter().map(|a| a.id.as_str()).collect();
            bail!(
                "{} agents in different companies are named `{}` (ids {}); pass an agent id",
                named.len(),
                output::one_line(wanted),
                ids.join(", ")
            )
        }
    }
}

/// Agents of one company, for showing names where the API gives ids.
#[derive(Default)]
pub(crate) struct AgentNames(Vec<Agent>);

impl AgentNames {
    pub fn label(&self, agent_id: Option<&str>) -> String {
        match agent_id {
            None => "-".into(),
            Some(id) => self
                .0
                .iter()
                .find(|a| a.id == id)
                .map(|a| a.name.clone())
                .unwrap_or_else(|| id.to_string()),
        }
    }
}

/// Issues of one company, for showing identifiers (`RST-7`) where the API gives ids.
#[derive(Default)]
pub(crate) struct IssueLabels(Vec<Issue>);

impl IssueLabels {
    pub fn label(&self, issue_id: Option<&str>) -> String {
        match issue_id {
            None => "-".into(),
            Some(id) => self
                .0
                .iter()
                .find(|i| i.id == id)
                .map(|i| i.identifier.clone())
                .unwrap_or_else(|| id.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod wake_tests;
