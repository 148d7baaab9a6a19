//! A raw HTTP client for tests: every reply keeps its status and JSON body.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    run_id: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    /// The body, if the status is a success; otherwise an error naming both.
    pub fn ok(self) -> anyhow::Result<Value> {
        if self.status.is_success() {
            Ok(self.body)
        } else {
            anyhow::bail!("HTTP {}: {}", self.status, self.body)
        }
    }

    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

/// A client for [`Http::with_client`] trusting the CA in `ca_pem` (PEM) for `https://` URLs;
/// one client shares its connections between every `Http` made with it.
pub fn client_trusting(ca_pem: &[u8]) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem)?)
        .build()?)
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Http {
    pub fn new(base: impl Into<String>) -> Http {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("reqwest client");
        Self::with_client(client, base)
    }

    /// A client of `base` over `client` (e.g. one from [`client_trusting`]).
    pub fn with_client(client: reqwest::Client, base: impl Into<String>) -> Http {
        Http {
            client,
            base: base.into(),
            token: None,
            run_id: None,
        }
    }

    /// A client of another `base` sharing this one's connections and trust (no token or run).
    pub fn at(&self, base: impl Into<String>) -> Http {
        Self::with_client(self.client.clone(), base)
    }

    pub fn with_token(&self, token: &str) -> Http {
        Http {
            token: Some(token.to_string()),
            ..self.clone()
        }
    }

    pub fn with_run(&self, run_id: &str) -> Http {
        Http {
            run_id: Some(run_id.to_string()),
            ..self.clone()
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `body` as raw bytes, so tests can send malformed JSON.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<Reply> {
        self.send(method, path, body, None).await
    }

    /// POSTs with an `Idempotency-Key`, as a client that may retry does.
    pub async fn post_with_key(&self, path: &str, body: Value, key: &str) -> anyhow::Result<Reply> {
        self.send(
            Method::POST,
            path,
            Some(serde_json::to_vec(&body)?),
            Some(key),
        )
        .await
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        key: Option<&str>,
    ) -> anyhow::Result<Reply> {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(r) = &self.run_id {
            req = req.header("X-Roost-Run-Id", r);
        }
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Ok(Reply { status, body })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.raw(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.raw(Method::POST, path, Some(serde_json::to_vec(&body)?))
            .await
    }

    pub async fn put(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.raw(Method::PUT, path, Some(serde_json::to_vec(&body)?))
            .await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Reply> {
        self.raw(Method::DELETE, path, None).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.raw(Method::PATCH, path, Some(serde_json::to_vec(&body)?))
            .await
    }
}
