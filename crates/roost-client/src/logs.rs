//! Run logs (`/api/heartbeat-runs/{id}/log`) and agents' saved sessions.

use std::time::Duration;

use roost_core::TaskSession;

use crate::{Error, LogPage, Result, RoostClient, API};

impl RoostClient {
    pub async fn run_log(&self, run_id: &str, offset: u64) -> Result<LogPage> {
        self.get(
            &[API, "heartbeat-runs", run_id, "log"],
            &[("offset", offset.to_string())],
        )
        .await
    }

    /// Writes a run's log to `sink` from `offset` as it grows, until the run ends: a page of
    /// what is there, then the server's live stream; when a stream breaks (the leader moved),
    /// it goes on from the last byte received on any server.
    pub async fn follow_run_log(
        &self,
        run_id: &str,
        mut offset: u64,
        sink: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<()> {
        loop {
            let page = self.run_log(run_id, offset).await?;
            sink(page.content.as_bytes());
            offset = page.next_offset;
            if page.ended {
                return Ok(());
            }
            match self.stream_log(run_id, offset, sink).await {
                Ok(received) => offset += received,
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// One `follow=true` stream from the preferred server; returns the bytes received.
    async fn stream_log(
        &self,
        run_id: &str,
        offset: u64,
        sink: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<u64> {
        let url = self.url(&[API, "heartbeat-runs", run_id, "log"])?;
        let mut response = self
            .open_stream(
                url,
                &[("offset", offset.to_string()), ("follow", "true".into())],
            )
            .await?;
        let mut received = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(Error::Transport)? {
            sink(&chunk);
            received += chunk.len() as u64;
        }
        Ok(received)
    }

    /// An agent's saved adapter sessions, one per task.
    pub async fn task_sessions(&self, agent_id: &str) -> Result<Vec<TaskSession>> {
        self.get(&[API, "agents", agent_id, "task-sessions"], &[])
            .await
    }
}
