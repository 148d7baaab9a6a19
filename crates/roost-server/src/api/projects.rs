//! Goals and projects: read by every member of the company, written by its
//! agents and administrators, deleted by administrators (`roost-core/src/rules/project.rs`).

use roost_core::project::{Goal, GoalPatch, Project, ProjectPatch};
use roost_core::{Command, Outcome};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    pub async fn list_goals(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Goal>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut goals: Vec<Goal> = self.reader().read(|s| {
            s.goals
                .values()
                .filter(|g| g.company_id == company_id)
                .cloned()
                .collect()
        });
        goals.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(goals)
    }

    pub async fn get_goal(&self, caller: &Caller, id: &str) -> Result<Goal, ApiError> {
        self.barrier().await?;
        let g = self
            .reader()
            .read(|s| s.goals.get(id).cloned())
            .ok_or_else(|| ApiError::not_found("goal", id))?;
        caller.check_company(&g.company_id, "goal", id)?;
        Ok(g)
    }

    pub async fn create_goal(
        &self,
        caller: &Caller,
        company_id: &str,
        fields: GoalPatch,
    ) -> Result<Goal, ApiError> {
        let command = Command::CreateGoal {
            id: new_id(),
            company_id: company_id.into(),
            fields,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Goal(g) => g)
    }

    pub async fn update_goal(
        &self,
        caller: &Caller,
        id: &str,
        patch: GoalPatch,
    ) -> Result<Goal, ApiError> {
        let command = Command::UpdateGoal {
            goal_id: id.into(),
            patch,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Goal(g) => g)
    }

    pub async fn delete_goal(&self, caller: &Caller, id: &str) -> Result<Goal, ApiError> {
        caller.require_admin()?;
        let command = Command::DeleteGoal { goal_id: id.into() };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Goal(g) => g)
    }

    pub async fn list_projects(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Project>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut projects: Vec<Project> = self.reader().read(|s| {
            s.projects
                .values()
                .filter(|p| p.company_id == company_id)
                .cloned()
                .collect()
        });
        projects.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(projects)
    }

    pub async fn get_project(&self, caller: &Caller, id: &str) -> Result<Project, ApiError> {
        self.barrier().await?;
        let p = self
            .reader()
            .read(|s| s.projects.get(id).cloned())
            .ok_or_else(|| ApiError::not_found("project", id))?;
        caller.check_company(&p.company_id, "project", id)?;
        Ok(p)
    }

    pub async fn create_project(
        &self,
        caller: &Caller,
        company_id: &str,
        fields: ProjectPatch,
    ) -> Result<Project, ApiError> {
        let command = Command::CreateProject {
            id: new_id(),
            company_id: company_id.into(),
            fields,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Project(p) => p)
    }

    pub async fn update_project(
        &self,
        caller: &Caller,
        id: &str,
        patch: ProjectPatch,
    ) -> Result<Project, ApiError> {
        let command = Command::UpdateProject {
            project_id: id.into(),
            patch,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Project(p) => p)
    }

    pub async fn delete_project(&self, caller: &Caller, id: &str) -> Result<Project, ApiError> {
        caller.require_admin()?;
        let command = Command::DeleteProject {
            project_id: id.into(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Project(p) => p)
    }
}
