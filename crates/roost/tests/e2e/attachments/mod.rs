//! Issue attachments and work products on Paperclip's routes: uploads over multipart (curl,
//! Paperclip's CLI, and Paperclip's own artifact helper script run by an agent of a `roost dev`),
//! downloads with their headers and ranges, who may touch them, the artifact work product a
//! run's upload makes, Paperclip's work product rules, and the same bytes on every node.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use roost_core::Timestamp;
use roost_testkit::{wait_for, Http, Reply, TestCluster, TestNode};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::support::{str_field, strs, todo_issue};

const WAIT: Duration = Duration::from_secs(60);
/// Paperclip's ceiling for one file: 10 MiB.
const LIMIT: usize = 10 * 1024 * 1024;
/// The Paperclip release whose skill ships the artifact helper (the CLI of `paperclip_cli.rs`
/// is the same release).
const PAPERCLIP_SERVER: &str = "@paperclipai/server@2026.916.1";
const UPLOAD_HELPER: &str = "skills/paperclip/scripts/paperclip-upload-artifact.sh";
const NO_SUCH_ID: &str = "00000000-0000-0000-0000-000000000000";
const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// Uploads with `curl -F` (each of `fields` one `-F` argument) to `base` + `path` as `token`,
/// with `run` as `X-Paperclip-Run-Id` (the header Paperclip's helper sends): the reply's status
/// and body. curl, as agents upload (the suite's reqwest is built without multipart).
async fn upload(
    base: &str,
    path: &str,
    token: &str,
    run: Option<&str>,
    fields: &[String],
) -> anyhow::Result<Reply> {
    let mut curl = tokio::process::Command::new("curl");
    curl.args(["-sS", "-w", "\n%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"));
    if let Some(run) = run {
        curl.arg("-H").arg(format!("X-Paperclip-Run-Id: {run}"));
    }
    for field in fields {
        curl.arg("-F").arg(field);
    }
    let out = curl
        .arg(format!("{base}{path}"))
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run curl ({e}): install curl, as .ci/run does"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", stdout.as_str()));
    // A refusal sent before the whole file was read may end curl's sending with an error; the
    // status it printed is still the answer. No status (000) is no answer.
    let status: u16 = code.trim().parse().unwrap_or(0);
    anyhow::ensure!(
        status >= 100,
        "curl got no answer from {base}{path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = if body.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()))
    };
    Ok(Reply {
        status: reqwest::StatusCode::from_u16(status)?,
        body,
    })
}

/// A `curl -F` argument sending the file at `path` as the part `file`, typed `content_type`.
fn file_part(path: &Path, content_type: &str) -> String {
    format!("file=@{};type={content_type}", path.display())
}

fn file_with(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, bytes)?;
    Ok(path)
}

/// A download as it arrived: status, headers and the raw bytes.
struct Download {
    status: u16,
    headers: reqwest::header::HeaderMap,
    bytes: Vec<u8>,
}

impl Download {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The MIME type of `Content-Type`, without parameters (a charset).
    fn content_type(&self) -> &str {
        self.header("content-type")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
    }
}

/// GETs `base` + `path` as `token`, with `range` as its `Range` header if given.
async fn download(
    base: &str,
    token: &str,
    path: &str,
    range: Option<&str>,
) -> anyhow::Result<Download> {
    let mut request = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(range) = range {
        request = request.header("Range", range);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await?.to_vec();
    Ok(Download {
        status,
        headers,
        bytes,
    })
}

/// `Content-Disposition` is `kind` (`inline` or `attachment`) and names the file.
#[track_caller]
fn assert_disposition(got: &Download, kind: &str, name: &str) {
    let disposition = got.header("content-disposition");
    assert!(
        disposition.starts_with(&format!("{kind};")) && disposition.contains(name),
        "Content-Disposition {disposition:?}: expected {kind}, naming {name}"
    );
}

/// The body of `reply`, which must have `status`.
#[track_caller]
fn answered(reply: Reply, status: u16) -> Value {
    assert_eq!(reply.status.as_u16(), status, "{}", reply.body);
    reply.body
}

fn error_of(body: &Value) -> &str {
    body["error"].as_str().unwrap_or("")
}

/// SHA-256 of `bytes` in lowercase hex, by coreutils' `sha256sum` (what Paperclip's helper
/// script hashes with).
async fn sha256_hex(bytes: &[u8]) -> anyhow::Result<String> {
    let mut child = tokio::process::Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| anyhow::anyhow!("sha256sum has no stdin"))?;
    stdin.write_all(bytes).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    anyhow::ensure!(out.status.success(), "sha256sum failed");
    String::from_utf8(out.stdout)?
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("sha256sum printed nothing"))
}

/// Checks what an attachment shows against the file that was sent; returns its id.
async fn check_attachment(
    a: &Value,
    issue: &str,
    company: &str,
    name: &str,
    content_type: &str,
    bytes: &[u8],
) -> anyhow::Result<String> {
    let id = str_field(a, "id");
    assert!(!id.is_empty(), "{a}");
    assert_eq!(a["companyId"], company, "{a}");
    assert_eq!(a["issueId"], issue, "{a}");
    assert!(a["issueCommentId"].is_null(), "{a}");
    assert_eq!(a["contentType"], content_type, "{a}");
    assert_eq!(a["byteSize"], bytes.len() as u64, "{a}");
    assert_eq!(a["sha256"], sha256_hex(bytes).await?, "{a}");
    assert_eq!(a["originalFilename"], name, "{a}");
    let content = format!("/api/attachments/{id}/content");
    assert_eq!(a["contentPath"], content, "{a}");
    assert_eq!(a["openPath"], content, "{a}");
    assert_eq!(a["downloadPath"], format!("{content}?download=1"), "{a}");
    assert!(
        a["createdAt"].is_string() && a["updatedAt"].is_string(),
        "{a}"
    );
    Ok(id)
}

/// The metadata of the artifact work product backed by attachment `a`: what Paperclip writes,
/// whatever the client sent.
fn artifact_metadata(a: &Value) -> Value {
    let content = a["contentPath"].as_str().unwrap_or_default();
    json!({
        "attachmentId": a["id"],
        "contentType": a["contentType"],
        "byteSize": a["byteSize"],
        "contentPath": content,
        "openPath": content,
        "downloadPath": format!("{content}?download=1"),
        "originalFilename": a["originalFilename"],
    })
}

/// Waits until the clock has passed `stamp` (a time the node wrote), so that the next write is
/// stamped later: "newest first" and "most recently updated first" compare milliseconds.
async fn clock_past(stamp: &Value) -> anyhow::Result<()> {
    let ms = stamp
        .as_str()
        .and_then(Timestamp::parse_rfc3339)
        .ok_or_else(|| anyhow::anyhow!("not a time: {stamp}"))?
        .millis();
    wait_for(
        "the clock to pass the last write",
        Duration::from_secs(5),
        move || async move { (chrono::Utc::now().timestamp_millis() > ms).then_some(()) },
    )
    .await
}

async fn work_products(http: &Http, issue: &str) -> anyhow::Result<Value> {
    http.get(&format!("/api/issues/{issue}/work-products"))
        .await?
        .ok()
}

/// The `isPrimary` of each work product in `list`, in order.
fn primaries(list: &Value) -> Vec<bool> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|p| p["isPrimary"] == true)
        .collect()
}

/// `len` bytes of a xorshift sequence from `seed`: incompressible, and the same every run.
pub(crate) fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Where two byte strings first differ, for failure messages.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(at) => format!("they differ first at byte {at}"),
        None => format!("{} bytes against {}", a.len(), b.len()),
    }
}
mod cluster;
mod helper;
mod rest;
mod work_products;
