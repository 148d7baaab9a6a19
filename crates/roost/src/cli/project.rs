//! `roost goal list|create` and `roost project list|create|pause|resume`: why work exists
//!. A paused project's issues start no runs until it is resumed.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use roost_client::{Goal, GoalLevel, GoalPatch, Project, ProjectPatch};

use super::output::{or_dash, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct GoalArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: GoalCommand,
}

#[derive(Subcommand)]
enum GoalCommand {
    /// A company's goals, oldest first
    List {
        /// Company id, issue prefix or name [default: the only or oldest company]
        #[arg(long)]
        company: Option<String>,
    },
    /// Add a goal
    Create {
        title: String,
        /// company, team, agent or task
        #[arg(long, default_value = "task")]
        level: GoalLevel,
        /// The parent goal's id
        #[arg(long)]
        parent: Option<String>,
        #[arg(long)]
        company: Option<String>,
    },
}

#[derive(Args)]
pub struct ProjectArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: ProjectCommand,
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// A company's projects, oldest first
    List {
        #[arg(long)]
        company: Option<String>,
    },
    /// Add a project
    Create {
        name: String,
        /// Its lead agent's id
        #[arg(long)]
        lead: Option<String>,
        /// Goal ids it serves
        #[arg(long = "goal")]
        goals: Vec<String>,
        #[arg(long)]
        company: Option<String>,
    },
    /// Pause a project: its issues start no new runs
    Pause {
        project: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Resume a paused project
    Resume { project: String },
}

pub async fn run_goal(session: &Session, args: GoalArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        GoalCommand::List { company } => {
            let cid = session.company_id(company.as_deref()).await?;
            out.show(&client.list_goals(&cid).await?, |g| goals_text(g))?;
        }
        GoalCommand::Create {
            title,
            level,
            parent,
            company,
        } => {
            let cid = session.company_id(company.as_deref()).await?;
            let fields = GoalPatch {
                title: Some(title),
                level: Some(level),
                parent_id: parent.map(Some),
                ..Default::default()
            };
            let g = client.create_goal(&cid, &fields).await?;
            out.show(&g, |g| format!("created goal {} ({})\n", g.id, g.title))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn run_project(session: &Session, args: ProjectArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        ProjectCommand::List { company } => {
            let cid = session.company_id(company.as_deref()).await?;
            out.show(&client.list_projects(&cid).await?, |p| projects_text(p))?;
        }
        ProjectCommand::Create {
            name,
            lead,
            goals,
            company,
        } => {
            let cid = session.company_id(company.as_deref()).await?;
            let fields = ProjectPatch {
                name: Some(name),
                lead_agent_id: lead.map(Some),
                goal_ids: (!goals.is_empty()).then_some(goals),
                ..Default::default()
            };
            let p = client.create_project(&cid, &fields).await?;
            out.show(&p, |p| format!("created project {} ({})\n", p.id, p.name))?;
        }
        ProjectCommand::Pause { project, reason } => {
            let patch = ProjectPatch {
                paused: Some(true),
                pause_reason: Some(reason),
                ..Default::default()
            };
            let p = client.update_project(&project, &patch).await?;
            out.show(&p, |p| format!("project {} is paused\n", p.name))?;
        }
        ProjectCommand::Resume { project } => {
            let patch = ProjectPatch {
                paused: Some(false),
                ..Default::default()
            };
            let p = client.update_project(&project, &patch).await?;
            out.show(&p, |p| format!("project {} is running again\n", p.name))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn goals_text(goals: &[Goal]) -> String {
    if goals.is_empty() {
        return "no goals\n".into();
    }
    let rows: Vec<Vec<String>> = goals
        .iter()
        .map(|g| {
            vec![
                g.id.clone(),
                g.title.clone(),
                g.level.to_string(),
                g.status.to_string(),
                or_dash(g.parent_id.clone()),
            ]
        })
        .collect();
    table(&["ID", "TITLE", "LEVEL", "STATUS", "PARENT"], &rows)
}

fn projects_text(projects: &[Project]) -> String {
    if projects.is_empty() {
        return "no projects\n".into();
    }
    let rows: Vec<Vec<String>> = projects
        .iter()
        .map(|p| {
            let state = match (&p.paused_at, &p.pause_reason) {
                (Some(_), Some(r)) => format!("paused: {r}"),
                (Some(_), None) => "paused".into(),
                _ => p.status.to_string(),
            };
            vec![
                p.id.clone(),
                p.name.clone(),
                state,
                or_dash(p.lead_agent_id.clone()),
            ]
        })
        .collect();
    table(&["ID", "NAME", "STATUS", "LEAD"], &rows)
}
