//! Issue attachments and work products (`/api/companies/{cid}/issues/{id}/attachments`,
//! `/api/attachments/{id}`, `/api/issues/{id}/work-products`, `/api/work-products/{id}`), in
//! the server's own types (`roost_core::attachment`, `roost_core::work_product`).

use reqwest::Method;
pub use roost_core::attachment::AttachmentView;
pub use roost_core::work_product::{WorkProduct, WorkProductFields};
use serde_json::Value;

use crate::{expect_success, Payload, Result, RoostClient, API};

impl RoostClient {
    /// An issue's attachments, newest first.
    pub async fn list_attachments(&self, issue: &str) -> Result<Vec<AttachmentView>> {
        self.get(&[API, "issues", issue, "attachments"], &[]).await
    }

    /// Uploads `bytes` as the file `name` to an issue of company `company_id`.
    pub async fn upload_attachment(
        &self,
        company_id: &str,
        issue: &str,
        name: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<AttachmentView> {
        let path = [API, "companies", company_id, "issues", issue, "attachments"];
        let body = Payload::file(name, content_type, bytes);
        let answer = self.send_raw(Method::POST, &path, &[], Some(&body)).await?;
        self.decode(&path, expect_success(answer)?)
    }

    /// An attachment's bytes.
    pub async fn attachment_content(&self, id: &str) -> Result<Vec<u8>> {
        let path = [API, "attachments", id, "content"];
        let answer = self.send_raw(Method::GET, &path, &[], None).await?;
        Ok(expect_success(answer)?.1)
    }

    pub async fn delete_attachment(&self, id: &str) -> Result<Value> {
        self.delete(&[API, "attachments", id]).await
    }

    /// An issue's work products, primary ones first.
    pub async fn list_work_products(&self, issue: &str) -> Result<Vec<WorkProduct>> {
        self.get(&[API, "issues", issue, "work-products"], &[])
            .await
    }

    pub async fn create_work_product(
        &self,
        issue: &str,
        fields: &WorkProductFields,
    ) -> Result<WorkProduct> {
        self.post(&[API, "issues", issue, "work-products"], fields)
            .await
    }

    pub async fn update_work_product(
        &self,
        id: &str,
        fields: &WorkProductFields,
    ) -> Result<WorkProduct> {
        let path = [API, "work-products", id];
        self.send(Method::PATCH, &path, &[], Some(fields)).await
    }

    /// Removes a work product; the server answers it as it was.
    pub async fn delete_work_product(&self, id: &str) -> Result<WorkProduct> {
        self.delete(&[API, "work-products", id]).await
    }
}
