//! Routines (`/api/companies/{cid}/routines`, `/api/routines/{id}`, its runs, triggers and
//! manual run): the server's Paperclip-shaped JSON, passed through as it is.

use reqwest::Method;
use serde_json::Value;

use crate::{Result, RoostClient, API};

impl RoostClient {
    pub async fn list_routines(&self, company_id: &str) -> Result<Value> {
        self.get(&[API, "companies", company_id, "routines"], &[])
            .await
    }

    /// `body` is Paperclip's `createRoutineSchema`.
    pub async fn create_routine(&self, company_id: &str, body: &Value) -> Result<Value> {
        self.post(&[API, "companies", company_id, "routines"], body)
            .await
    }

    pub async fn get_routine(&self, routine_id: &str) -> Result<Value> {
        self.get(&[API, "routines", routine_id], &[]).await
    }

    pub async fn update_routine(&self, routine_id: &str, body: &Value) -> Result<Value> {
        self.send(
            Method::PATCH,
            &[API, "routines", routine_id],
            &[],
            Some(body),
        )
        .await
    }

    pub async fn add_routine_trigger(&self, routine_id: &str, body: &Value) -> Result<Value> {
        self.post(&[API, "routines", routine_id, "triggers"], body)
            .await
    }

    pub async fn run_routine(&self, routine_id: &str, body: &Value) -> Result<Value> {
        self.post(&[API, "routines", routine_id, "run"], body).await
    }

    pub async fn routine_runs(&self, routine_id: &str, limit: usize) -> Result<Value> {
        self.get(
            &[API, "routines", routine_id, "runs"],
            &[("limit", limit.to_string())],
        )
        .await
    }
}
