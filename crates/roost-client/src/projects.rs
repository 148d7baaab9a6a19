//! Goals and projects (`/api/companies/{cid}/goals|projects`, `/api/goals|projects/{id}`), in
//! the server's own types (`roost_core::project`).

use reqwest::Method;
pub use roost_core::project::{
    Goal, GoalLevel, GoalPatch, GoalStatus, Project, ProjectPatch, ProjectStatus,
};

use crate::{Result, RoostClient, API};

impl RoostClient {
    pub async fn list_goals(&self, company_id: &str) -> Result<Vec<Goal>> {
        self.get(&[API, "companies", company_id, "goals"], &[])
            .await
    }

    pub async fn create_goal(&self, company_id: &str, fields: &GoalPatch) -> Result<Goal> {
        let path = [API, "companies", company_id, "goals"];
        self.send(Method::POST, &path, &[], Some(fields)).await
    }

    pub async fn list_projects(&self, company_id: &str) -> Result<Vec<Project>> {
        self.get(&[API, "companies", company_id, "projects"], &[])
            .await
    }

    pub async fn create_project(&self, company_id: &str, fields: &ProjectPatch) -> Result<Project> {
        let path = [API, "companies", company_id, "projects"];
        self.send(Method::POST, &path, &[], Some(fields)).await
    }

    pub async fn update_project(&self, id: &str, patch: &ProjectPatch) -> Result<Project> {
        self.send(Method::PATCH, &[API, "projects", id], &[], Some(patch))
            .await
    }
}
