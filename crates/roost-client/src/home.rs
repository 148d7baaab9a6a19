//! The agent's home files: its manifest, its chunks' bytes, and a run's
//! upload and save (`roost-server/src/rest/home.rs`).

use std::collections::BTreeMap;

use base64::Engine;
use reqwest::Method;
pub use roost_core::home::{AgentHome, HomeFile};
pub use roost_core::views::{HomeChunksStored, HomeView};
use serde::Serialize;

use crate::{expect_success, Result, RoostClient, API};

#[derive(Serialize)]
struct ChunksBody {
    chunks: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SaveBody<'a> {
    base_version: u64,
    files: &'a BTreeMap<String, HomeFile>,
    deleted: &'a [String],
}

impl RoostClient {
    /// The agent's home manifest (`me`: the calling agent).
    pub async fn agent_home(&self, agent_id: &str) -> Result<HomeView> {
        self.get(&[API, "agents", agent_id, "home"], &[]).await
    }

    /// One chunk's bytes.
    pub async fn home_chunk(&self, agent_id: &str, hash: &str) -> Result<Vec<u8>> {
        let path = [API, "agents", agent_id, "home", "chunks", hash];
        let answer = self.send_raw(Method::GET, &path, &[], None).await?;
        Ok(expect_success(answer)?.1)
    }

    /// Uploads chunks for the client's run; their hashes, in order.
    pub async fn put_home_chunks(&self, chunks: &[&[u8]]) -> Result<Vec<String>> {
        let engine = base64::engine::general_purpose::STANDARD;
        let body = ChunksBody {
            chunks: chunks.iter().map(|c| engine.encode(c)).collect(),
        };
        let stored: HomeChunksStored = self
            .send(
                Method::POST,
                &[API, "agents", "me", "home", "chunks"],
                &[],
                Some(&body),
            )
            .await?;
        Ok(stored.hashes)
    }

    /// Saves the client's agent's home for its run, if it is still at `base_version`.
    pub async fn save_agent_home(
        &self,
        base_version: u64,
        files: &BTreeMap<String, HomeFile>,
        deleted: &[String],
    ) -> Result<HomeView> {
        let body = SaveBody {
            base_version,
            files,
            deleted,
        };
        self.send(
            Method::PUT,
            &[API, "agents", "me", "home"],
            &[],
            Some(&body),
        )
        .await
    }
}
