//! Issue labels (`/api/companies/{cid}/labels`, `/api/labels/{id}`), in the server's own type
//! (`roost_core::label`).

use reqwest::Method;
pub use roost_core::label::Label;
use serde_json::json;

use crate::{Result, RoostClient, API};

impl RoostClient {
    /// A company's labels, by name.
    pub async fn list_labels(&self, company_id: &str) -> Result<Vec<Label>> {
        self.get(&[API, "companies", company_id, "labels"], &[])
            .await
    }

    /// Adds a label: `name` (1-48 characters, unique in the company), `color` `#RRGGBB`.
    pub async fn create_label(&self, company_id: &str, name: &str, color: &str) -> Result<Label> {
        let path = [API, "companies", company_id, "labels"];
        let body = json!({ "name": name, "color": color });
        self.send(Method::POST, &path, &[], Some(&body)).await
    }

    /// Deletes a label and takes it off every issue; answers it as it was.
    pub async fn delete_label(&self, id: &str) -> Result<Label> {
        self.delete(&[API, "labels", id]).await
    }
}
