//! A typed async client for Roost's REST API, used by the `roost` CLI and by tests.
//!
//! One method per route, returning the `roost_core` records the server serializes. Every call
//! goes through one request path that sets the bearer token, the run id header and a timeout,
//! and turns error responses into [`Error::Api`] with the server's code and message.

mod error;
mod routes;
mod types;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::Error;
pub use types::{
    ActivityPage, AgentUpdate, AuditReport, CommentCursor, CommentPage, CreatedKey,
    HeartbeatContext, IssueFilter, IssueUpdate, IssueWithComment, NewAgent, NewCompany, NewIssue,
    RunFilter,
};

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The header that says which run a request acts for; Paperclip's `X-Paperclip-Run-Id` is an
/// alias on the server.
pub const RUN_ID_HEADER: &str = "X-Roost-Run-Id";

const API: &str = "api";

/// A handle on one Roost server. Cloning is cheap: clones share the connection pool.
#[derive(Clone)]
pub struct RoostClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: Url,
    authorization: HeaderValue,
    run_id: Option<HeaderValue>,
    timeout: Duration,
}

impl std::fmt::Debug for RoostClient {
    // By hand, so the token never lands in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoostClient")
            .field("base", &self.inner.base.as_str())
            .field("run_id", &self.inner.run_id)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl RoostClient {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7480`), authenticating
    /// with `token`.
    pub fn new(base_url: &str, token: &str) -> Result<Self> {
        if !base_url.contains("://") {
            // Without this, `localhost:7480` would parse as a URL with the scheme `localhost`.
            return Err(Error::InvalidArgument(format!(
                "server URL `{base_url}` must start with http:// or https:// (e.g. http://127.0.0.1:7480)"
            )));
        }
        let base = Url::parse(base_url)
            .map_err(|e| Error::InvalidArgument(format!("server URL `{base_url}`: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(Error::InvalidArgument(format!(
                "server URL `{base_url}` must start with http:// or https://"
            )));
        }
        let mut authorization = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| {
                Error::InvalidArgument(
                    "the token holds characters not allowed in an HTTP header".into(),
                )
            })?;
        authorization.set_sensitive(true);
        let http = reqwest::Client::builder()
            .build()
            .map_err(Error::Transport)?;
        Ok(RoostClient {
            inner: Arc::new(Inner {
                http,
                base,
                authorization,
                run_id: None,
                timeout: DEFAULT_TIMEOUT,
            }),
        })
    }

    /// The same client acting for run `run_id` (sent as [`RUN_ID_HEADER`]), as a checkout and
    /// every write made during a run must.
    pub fn with_run_id(&self, run_id: &str) -> Result<Self> {
        let value = HeaderValue::from_str(run_id.trim()).map_err(|_| {
            Error::InvalidArgument(
                "the run id holds characters not allowed in an HTTP header".into(),
            )
        })?;
        Ok(self.derive(|inner| inner.run_id = Some(value)))
    }

    /// The same client with another per-request timeout.
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        self.derive(|inner| inner.timeout = timeout)
    }

    pub fn base_url(&self) -> &str {
        self.inner.base.as_str()
    }

    fn derive(&self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner {
            http: self.inner.http.clone(),
            base: self.inner.base.clone(),
            authorization: self.inner.authorization.clone(),
            run_id: self.inner.run_id.clone(),
            timeout: self.inner.timeout,
        };
        change(&mut inner);
        RoostClient {
            inner: Arc::new(inner),
        }
    }

    // The one request path: `get` and `post` are shorthands for `send`, which is `send_raw`
    // plus the status check and JSON decoding.

    async fn get<T: DeserializeOwned>(&self, path: &[&str], query: &[(&str, String)]) -> Result<T> {
        self.send(Method::GET, path, query, None::<&()>).await
    }

    async fn post<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        path: &[&str],
        body: &B,
    ) -> Result<T> {
        self.send(Method::POST, path, &[], Some(body)).await
    }

    async fn send<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<T> {
        let (status, bytes) = expect_success(self.send_raw(method, path, query, body).await?)?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            url: self.url(path).map(String::from).unwrap_or_default(),
            reason: format!("{e} (HTTP {})", status.as_u16()),
        })
    }

    /// Sends one request and returns the status and body, whatever the status.
    async fn send_raw<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let mut request = self
            .inner
            .http
            .request(method, self.url(path)?)
            .timeout(self.inner.timeout)
            .header(AUTHORIZATION, self.inner.authorization.clone());
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(run_id) = &self.inner.run_id {
            request = request.header(RUN_ID_HEADER, run_id.clone());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(Error::Transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(Error::Transport)?;
        Ok((status, bytes.to_vec()))
    }

    /// The base URL with `path` appended, each segment percent-encoded, so an id can never
    /// reach another route (`../`, `?`, `#`).
    fn url(&self, path: &[&str]) -> Result<Url> {
        // The URL parser drops `.` and `..` segments, which would silently call another route.
        if let Some(bad) = path.iter().find(|s| matches!(s.trim(), "" | "." | "..")) {
            return Err(Error::InvalidArgument(format!("`{bad}` is not a valid id")));
        }
        let mut url = self.inner.base.clone();
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|()| Error::InvalidArgument("the server URL cannot take a path".into()))?;
            segments.pop_if_empty().extend(path);
        }
        Ok(url)
    }
}

fn expect_success((status, body): (StatusCode, Vec<u8>)) -> Result<(StatusCode, Vec<u8>)> {
    if status.is_success() {
        Ok((status, body))
    } else {
        Err(Error::from_response(status.as_u16(), &body))
    }
}

#[cfg(test)]
mod tests;
