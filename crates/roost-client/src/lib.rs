//! A typed async client for Roost's REST API, used by the `roost` CLI and by tests.
//!
//! One method per route, returning the `roost_core` records the server serializes. Every call
//! goes through one request path that sets the bearer token, the run id header and a timeout,
//! and turns error responses into [`Error::Api`] with the server's code and message.

mod agent_revisions;
mod approvals;
mod attachments;
mod budgets;
mod cluster;
mod credentials;
mod documents;
mod error;
mod events;
mod home;
mod interactions;
mod labels;
mod logs;
mod memory;
mod projects;
mod routes;
mod routines;
mod types;
mod wakes;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use agent_revisions::AgentConfigRevision;
pub use approvals::{Approval, ApprovalComment, ApprovalDecision, ApprovalStatus, ApprovalType};
pub use attachments::{AttachmentView, WorkProduct, WorkProductFields};
pub use budgets::{NewBudgetPolicy, NewCostEvent};
pub use cluster::{ClusterStatus, Member, MemberStatus, NodeReport};
pub use credentials::{CreatedAdminToken, CredentialView};
pub use documents::{DocumentPutBody, DocumentRevision, DocumentView};
pub use error::Error;
pub use events::Event;
pub use home::{AgentHome, HomeFile, HomeView};
pub use interactions::{
    InteractionAcceptBody, InteractionCreateBody, InteractionReasonBody, InteractionRespondBody,
    InteractionVerdictsBody, InteractionView,
};
pub use labels::Label;
pub use memory::{
    CompanyLive, CurrentTask, Door, LiveParts, MemoryDocument, MemoryDocumentInfo, MemoryEntry,
    MemoryHitKind, MemoryLive, MemoryScope, MemorySearchHit, MemorySummary, NewMemoryEntry,
    Recovery,
};
pub use projects::{Goal, GoalLevel, GoalPatch, GoalStatus, Project, ProjectPatch, ProjectStatus};
/// The shapes the server answers with, declared once for both sides.
pub use roost_core::views::{
    AgentSpend, AuditReport, BudgetOverview, CommentCursor, CostSummary, CreatedJoinToken,
    CreatedKey, HeartbeatContext, IssueFilter, IssueWithComment, LogPage, PolicyStatus,
    ProjectSpend, RunView, WakeFilter, WakeView, WakeupResult, WorkerView,
};
pub use types::{
    ActivityPage, AgentUpdate, CommentPage, IssueUpdate, NewAgent, NewCompany, NewIssue, RunFilter,
};
pub use wakes::WakeupRequest;

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
    /// Every server this client may use; any node serves any request.
    bases: Vec<Url>,
    /// The server that answered last: tried first next time.
    preferred: Arc<AtomicUsize>,
    authorization: HeaderValue,
    run_id: Option<HeaderValue>,
    timeout: Duration,
}

impl std::fmt::Debug for RoostClient {
    // By hand, so the token never lands in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoostClient")
            .field(
                "servers",
                &self.inner.bases.iter().map(Url::as_str).collect::<Vec<_>>(),
            )
            .field("run_id", &self.inner.run_id)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl RoostClient {
    /// A client for the servers in `base_urls`, comma-separated (e.g.
    /// `http://10.0.0.1:7480,http://10.0.0.2:7480`), authenticating with `token`. A request
    /// that cannot reach a server, or that a server answers 503 (no leader yet, no quorum), is
    /// retried on the next one until the timeout; writes carry an idempotency key so a retry is
    /// applied once.
    pub fn new(base_urls: &str, token: &str) -> Result<Self> {
        Self::with_tls(base_urls, token, &ClientTls::default())
    }

    /// As [`RoostClient::new`], with what `https://` servers are checked against (and the
    /// certificate this client presents, if any).
    pub fn with_tls(base_urls: &str, token: &str, tls: &ClientTls) -> Result<Self> {
        let bases = base_urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(parse_base)
            .collect::<Result<Vec<Url>>>()?;
        if bases.is_empty() {
            return Err(Error::InvalidArgument("no server URL given".into()));
        }
        let mut authorization = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| {
                Error::InvalidArgument(
                    "the token holds characters not allowed in an HTTP header".into(),
                )
            })?;
        authorization.set_sensitive(true);
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(2));
        if bases.iter().any(|b| b.scheme() == "https") || tls.ca_file.is_some() {
            builder = builder.use_preconfigured_tls(tls.rustls_config()?);
        }
        let http = builder.build().map_err(Error::Transport)?;
        Ok(RoostClient {
            inner: Arc::new(Inner {
                http,
                bases,
                preferred: Arc::default(),
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

    /// The first server this client was given.
    pub fn base_url(&self) -> &str {
        self.inner.bases[0].as_str()
    }

    fn derive(&self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner {
            http: self.inner.http.clone(),
            bases: self.inner.bases.clone(),
            preferred: self.inner.preferred.clone(),
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

    async fn delete<T: DeserializeOwned>(&self, path: &[&str]) -> Result<T> {
        self.send(Method::DELETE, path, &[], None::<&()>).await
    }

    async fn send<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
    ) -> Result<T> {
        let body = body.map(Payload::json).transpose()?;
        let answer = self.send_raw(method, path, query, body.as_ref()).await?;
        self.decode(path, expect_success(answer)?)
    }

    /// A success's JSON body.
    fn decode<T: DeserializeOwned>(
        &self,
        path: &[&str],
        (status, bytes): (StatusCode, Vec<u8>),
    ) -> Result<T> {
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            url: self.url(path).map(String::from).unwrap_or_default(),
            reason: format!("{e} (HTTP {})", status.as_u16()),
        })
    }

    /// Sends one logical request and returns the status and body, whatever the status. A
    /// server that cannot be reached or answers 503 makes it move on to the next server, until
    /// the timeout; a write keeps one idempotency key across those attempts.
    async fn send_raw(
        &self,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Payload>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let key = (method != Method::GET).then(idempotency_key);
        let deadline = Instant::now() + self.inner.timeout;
        let servers = self.inner.bases.len();
        let mut attempt = 0usize;
        // While every server refuses connections, give up after a few rounds; once one has
        // answered (a 503 during an election), keep trying until the deadline.
        let mut only_refused = true;
        loop {
            let index = (self.inner.preferred.load(Ordering::Relaxed) + attempt) % servers;
            let left = deadline.saturating_duration_since(Instant::now());
            let result = self
                .attempt(
                    index,
                    method.clone(),
                    path,
                    query,
                    body,
                    key.as_deref(),
                    left,
                )
                .await;
            let retry = match &result {
                // No leader yet, or no quorum: an election may fix it before the deadline.
                Ok((status, _)) => *status == StatusCode::SERVICE_UNAVAILABLE,
                // Nobody listening: a few rounds cover a restarting node without making a CLI
                // wait the whole timeout when no server runs at all.
                Err(Error::Transport(e)) if e.is_connect() => {
                    !only_refused || attempt < servers * CONNECT_ROUNDS
                }
                // A TLS refusal or a plaintext/TLS mismatch fails the same way every time.
                Err(Error::Transport(e)) if error::is_tls_mismatch(e) => false,
                // Safe for reads, and for writes because they carry an idempotency key.
                Err(Error::Transport(_)) => true,
                Err(_) => false,
            };
            if !matches!(&result, Err(Error::Transport(e)) if e.is_connect()) {
                only_refused = false;
            }
            if !retry || Instant::now() + RETRY_PAUSE >= deadline {
                if result.is_ok() {
                    self.inner.preferred.store(index, Ordering::Relaxed);
                }
                return result;
            }
            attempt += 1;
            // A full round of servers refused: give an election time to finish.
            if attempt.is_multiple_of(servers) {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }

    /// A streamed GET of `url` with `query` (no timeout): the response, once its status says
    /// success; else the server's error.
    async fn open_stream(&self, url: Url, query: &[(&str, String)]) -> Result<reqwest::Response> {
        let response = self
            .request_to(url)
            .query(query)
            .send()
            .await
            .map_err(Error::Transport)?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let body = response.bytes().await.map_err(Error::Transport)?;
            return Err(Error::from_response(status, &body));
        }
        Ok(response)
    }

    /// Makes the next server the preferred one (a stream broke on the current one).
    fn prefer_next_server(&self) {
        self.inner.preferred.fetch_add(1, Ordering::Relaxed);
    }

    /// A request to `url` with this client's credentials and no timeout (for streams).
    fn request_to(&self, url: Url) -> reqwest::RequestBuilder {
        let mut request = self
            .inner
            .http
            .get(url)
            .header(AUTHORIZATION, self.inner.authorization.clone());
        if let Some(run_id) = &self.inner.run_id {
            request = request.header(RUN_ID_HEADER, run_id.clone());
        }
        request
    }

    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        server: usize,
        method: Method,
        path: &[&str],
        query: &[(&str, String)],
        body: Option<&Payload>,
        idempotency_key: Option<&str>,
        timeout: Duration,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let mut request = self
            .inner
            .http
            .request(method, self.url_on(server, path)?)
            .timeout(timeout.max(Duration::from_millis(1)))
            .header(AUTHORIZATION, self.inner.authorization.clone());
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(run_id) = &self.inner.run_id {
            request = request.header(RUN_ID_HEADER, run_id.clone());
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, body.content_type.clone())
                .body(body.bytes.clone());
        }
        let response = request.send().await.map_err(Error::Transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(Error::Transport)?;
        Ok((status, bytes.to_vec()))
    }

    /// The base URL with `path` appended, each segment percent-encoded, so an id can never
    /// reach another route (`../`, `?`, `#`).
    fn url(&self, path: &[&str]) -> Result<Url> {
        self.url_on(
            self.inner.preferred.load(Ordering::Relaxed) % self.inner.bases.len(),
            path,
        )
    }

    fn url_on(&self, server: usize, path: &[&str]) -> Result<Url> {
        // The URL parser drops `.` and `..` segments, which would silently call another route.
        if let Some(bad) = path.iter().find(|s| matches!(s.trim(), "" | "." | "..")) {
            return Err(Error::InvalidArgument(format!("`{bad}` is not a valid id")));
        }
        let mut url = self.inner.bases[server].clone();
        {
            let mut segments = url
                .path_segments_mut()
                .map_err(|()| Error::InvalidArgument("the server URL cannot take a path".into()))?;
            segments.pop_if_empty().extend(path);
        }
        Ok(url)
    }
}

/// Pause before another round of servers when every one refused or answered 503: about one
/// election (250-300 ms of silence at the default Raft timing, docs/cluster.md).
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Rounds over the servers while every one refuses connections.
const CONNECT_ROUNDS: usize = 3;

/// How a client checks `https://` servers: against the CA in `ca_file` (the cluster CA of
/// `roost cert init`), or, without one, against the public web roots (a server behind a proxy
/// with a public certificate). `cert_file` and `key_file` are a client certificate to present.
#[derive(Clone, Debug, Default)]
pub struct ClientTls {
    pub ca_file: Option<std::path::PathBuf>,
    pub cert_file: Option<std::path::PathBuf>,
    pub key_file: Option<std::path::PathBuf>,
}

impl ClientTls {
    fn rustls_config(&self) -> Result<roost_tls::rustls::ClientConfig> {
        let identity = match (&self.cert_file, &self.key_file) {
            (Some(cert_file), Some(key_file)) => Some(roost_tls::Identity {
                cert_file,
                cert_setting: "--cert-file",
                key_file,
                key_setting: "--key-file",
            }),
            (None, None) => None,
            _ => {
                return Err(Error::InvalidArgument(
                    "a client certificate needs both --cert-file and --key-file".into(),
                ))
            }
        };
        let ca = self.ca_file.as_deref().map(|p| (p, "--ca-file"));
        roost_tls::client_config(ca, identity.as_ref())
            .map_err(|e| Error::InvalidArgument(e.to_string()))
    }
}

fn parse_base(base_url: &str) -> Result<Url> {
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
    Ok(base)
}

/// A key unique to this logical write: 128 random bits, so no other client (or tenant) can
/// predict or collide with it.
fn idempotency_key() -> String {
    let mut bytes = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut bytes);
    format!("rc-{}", hex::encode(bytes))
}

/// A request's body: its bytes and their type.
pub(crate) struct Payload {
    content_type: String,
    bytes: Vec<u8>,
}

impl Payload {
    fn json<B: Serialize + ?Sized>(body: &B) -> Result<Payload> {
        Ok(Payload {
            content_type: "application/json".into(),
            bytes: serde_json::to_vec(body)
                .map_err(|e| Error::InvalidArgument(format!("cannot encode the request: {e}")))?,
        })
    }

    /// A multipart/form-data body holding one file in the field `file`, as Paperclip's
    /// upload routes read it.
    pub(crate) fn file(name: &str, content_type: &str, bytes: &[u8]) -> Payload {
        let boundary = format!("roost-{}", idempotency_key());
        // A quote or line break would end the header's value early.
        let name: String = name
            .chars()
            .map(|c| {
                if matches!(c, '"' | '\\' | '\r' | '\n') {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        Payload {
            content_type: format!("multipart/form-data; boundary={boundary}"),
            bytes: body,
        }
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
