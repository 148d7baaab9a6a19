//! An in-process single-node cluster with an admin token and a company, for API tests.

use std::time::Duration;

use roost_server::auth::{generate_token, ADMIN_TOKEN_PREFIX};
use roost_server::{Listeners, Server, ServerConfig};
use serde_json::{json, Value};

use crate::http::Http;

pub struct TestNode {
    server: Option<Server>,
    config: ServerConfig,
    pub dir: tempfile::TempDir,
    pub admin_token: String,
    pub company_id: String,
    pub admin: Http,
}

impl TestNode {
    /// Starts a node on loopback ports bound before it starts.
    pub async fn start() -> anyhow::Result<TestNode> {
        Self::start_with(|_| {}).await
    }

    /// As [`TestNode::start`], with `configure` applied to the node's config last.
    pub async fn start_with(configure: impl FnOnce(&mut ServerConfig)) -> anyhow::Result<TestNode> {
        let dir = tempfile::tempdir()?;
        let mut config = ServerConfig {
            data_dir: dir.path().join("data"),
            http_listen: "127.0.0.1:0".into(),
            grpc_listen: "127.0.0.1:0".into(),
            peer_listen: "127.0.0.1:0".into(),
            ..ServerConfig::default()
        };
        // A single node elects itself at once; the timeouts matter only to its start.
        config.raft.election_timeout_min_ms = 150;
        config.raft.election_timeout_max_ms = 300;
        config.raft.heartbeat_interval_ms = 50;
        configure(&mut config);
        let server = Self::boot(&config).await?;
        let admin_token = generate_token(ADMIN_TOKEN_PREFIX);
        server
            .api()
            .ensure_admin_token(&admin_token, "test-admin")
            .await?;
        let company = server
            .api()
            .ensure_default_company("Test Company", "TST")
            .await?;
        let admin = Http::new(format!("http://{}", server.http_addr())).with_token(&admin_token);
        Ok(TestNode {
            server: Some(server),
            config,
            dir,
            admin_token,
            company_id: company.id,
            admin,
        })
    }

    async fn boot(config: &ServerConfig) -> anyhow::Result<Server> {
        let listeners = Listeners::bind(config).await?;
        Ok(Server::start(config, listeners).await?)
    }

    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("node is running")
    }

    pub fn http(&self) -> Http {
        Http::new(format!("http://{}", self.server().http_addr()))
    }

    /// Stops the node and starts it again on the same data directory (new ports).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(s) = self.server.take() {
            s.shutdown().await?;
        }
        let server = Self::boot(&self.config).await?;
        self.admin =
            Http::new(format!("http://{}", server.http_addr())).with_token(&self.admin_token);
        self.server = Some(server);
        Ok(())
    }

    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        if let Some(s) = self.server.take() {
            s.shutdown().await?;
        }
        Ok(())
    }

    /// Creates an agent and an API key for it; returns (agent id, key).
    pub async fn agent(&self, name: &str) -> anyhow::Result<(String, String)> {
        let agent = self
            .admin
            .post(
                &format!("/api/companies/{}/agents", self.company_id),
                json!({"name": name}),
            )
            .await?
            .ok()?;
        let id = agent["id"].as_str().unwrap_or_default().to_string();
        let key = self
            .admin
            .post(&format!("/api/agents/{id}/keys"), json!({}))
            .await?
            .ok()?;
        Ok((id, key["token"].as_str().unwrap_or_default().to_string()))
    }

    /// Starts a run for `agent_id` and returns its id.
    pub async fn start_run(&self, agent_id: &str) -> anyhow::Result<String> {
        let run = self
            .admin
            .post(&format!("/api/agents/{agent_id}/runs"), json!({}))
            .await?
            .ok()?;
        Ok(run["id"].as_str().unwrap_or_default().to_string())
    }

    pub async fn issue(&self, body: Value) -> anyhow::Result<Value> {
        self.admin
            .post(&format!("/api/companies/{}/issues", self.company_id), body)
            .await?
            .ok()
    }

    pub fn default_timeout() -> Duration {
        Duration::from_secs(20)
    }
}
