//! Issue attachments and work products, Paperclip's routes:
//! `POST /api/companies/{cid}/issues/{id}/attachments` (multipart, one file in `file`),
//! `GET /api/issues/{id}/attachments`, `GET|DELETE /api/attachments/{id}[/content]`, and
//! `GET|POST /api/issues/{id}/work-products`, `PATCH|DELETE /api/work-products/{id}`.

use axum::body::Body;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use roost_core::attachment::{is_inline, served_content_type, AttachmentView, IssueAttachment};
use roost_core::work_product::{WorkProduct, WorkProductFields};
use serde::Deserialize;
use serde_json::{json, Value};

use super::extract::{JsonBody, QueryParams};
use crate::api::{Api, NewAttachment};
use crate::auth::Caller;
use crate::error::ApiError;

type Result<T> = std::result::Result<T, ApiError>;

/// The upload route's body limit: the largest file and room for the form around it.
pub const UPLOAD_BODY_BYTES: usize =
    roost_core::attachment::MAX_ATTACHMENT_BYTES as usize + 1024 * 1024;

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge {
            limit: UPLOAD_BODY_BYTES,
        }
    } else {
        ApiError::bad_request(format!(
            "could not read the multipart upload: {}",
            e.body_text()
        ))
    }
}

pub async fn upload(
    State(api): State<Api>,
    caller: Caller,
    Path((cid, issue)): Path<(String, String)>,
    form: std::result::Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Json<AttachmentView>)> {
    // Who may upload is settled before the body is read, and the node has room to read it.
    let issue = api.attachment_issue(&caller, &cid, &issue).await?;
    let slot = api.upload_permit(&caller)?;
    let mut form = form.map_err(|e| {
        ApiError::bad_request(format!(
            "an upload is multipart/form-data with the file in the field `file`: {}",
            e.body_text()
        ))
    })?;
    let mut file: Option<NewAttachment> = None;
    let mut comment_id = None;
    while let Some(field) = form.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file") if file.is_none() => {
                let original_filename = field.file_name().map(str::to_string);
                let content_type = field.content_type().map(str::to_string);
                let bytes = field.bytes().await.map_err(multipart_error)?;
                file = Some(NewAttachment {
                    original_filename,
                    content_type,
                    issue_comment_id: None,
                    bytes: bytes.into(),
                });
            }
            Some("file") => {
                return Err(ApiError::bad_request(
                    "send one file per upload, in the field `file`",
                ))
            }
            Some("issueCommentId") => {
                comment_id = Some(field.text().await.map_err(multipart_error)?);
            }
            // Paperclip's upload takes one file and ignores other text fields.
            other if field.file_name().is_some() => {
                return Err(ApiError::bad_request(format!(
                    "unexpected file field {:?}: send the file in the field `file`",
                    other.unwrap_or("")
                )))
            }
            _ => {
                field.bytes().await.map_err(multipart_error)?;
            }
        }
    }
    let mut file = file.ok_or_else(|| ApiError::bad_request("Missing file field 'file'"))?;
    file.issue_comment_id = comment_id;
    let attachment = api.upload_attachment(&caller, issue, file, slot).await?;
    Ok((StatusCode::CREATED, Json(attachment)))
}

pub async fn list(
    State(api): State<Api>,
    caller: Caller,
    Path(issue): Path<String>,
) -> Result<Json<Vec<AttachmentView>>> {
    Ok(Json(api.list_attachments(&caller, &issue).await?))
}

/// `?download=1` (or `true`) serves the file as a download whatever its type.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentQuery {
    #[serde(default)]
    pub download: Option<String>,
}

/// A `Range` header as Paperclip reads it: one range of bytes.
#[derive(Debug, PartialEq, Eq)]
enum Range {
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

fn parse_range(header: Option<&str>, total: u64) -> Range {
    let Some(spec) = header.map(str::trim) else {
        return Range::Whole;
    };
    // The unit is case-insensitive (RFC 9110).
    let Some(spec) = spec
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case("bytes="))
        .and_then(|_| spec.get(6..))
    else {
        return Range::Unsatisfiable;
    };
    if spec.contains(',') || total == 0 {
        return Range::Unsatisfiable;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Range::Unsatisfiable;
    };
    let number = |s: &str| s.trim().parse::<u64>().ok();
    let (start, end) = match (first.trim().is_empty(), last.trim().is_empty()) {
        // `bytes=-N`: the last N bytes.
        (true, false) => match number(last) {
            Some(n) if n > 0 => (total.saturating_sub(n), total - 1),
            _ => return Range::Unsatisfiable,
        },
        (false, true) => match number(first) {
            Some(s) => (s, total - 1),
            None => return Range::Unsatisfiable,
        },
        (false, false) => match (number(first), number(last)) {
            (Some(s), Some(e)) if s <= e => (s, e.min(total - 1)),
            _ => return Range::Unsatisfiable,
        },
        (true, true) => return Range::Unsatisfiable,
    };
    if start >= total {
        return Range::Unsatisfiable;
    }
    Range::Part(start, end)
}

/// `inline` or `attachment`, with the file's name: quoted ASCII, and RFC 5987's UTF-8 form
/// when the name has other characters.
fn disposition(kind: &str, name: &str) -> HeaderValue {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut value = format!("{kind}; filename=\"{ascii}\"");
    if ascii != name {
        let encoded: String = name
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        value.push_str(&format!("; filename*=UTF-8''{encoded}"));
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

fn content_headers(attachment: &IssueAttachment, download: bool) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let content_type = served_content_type(
        &attachment.content_type,
        attachment.original_filename.as_deref(),
    );
    let shown = if content_type == "text/markdown" {
        format!("{content_type}; charset=utf-8")
    } else {
        content_type.to_string()
    };
    if let Ok(v) = HeaderValue::from_str(&shown) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    let kind = if !download && is_inline(content_type) {
        "inline"
    } else {
        "attachment"
    };
    let name = attachment
        .original_filename
        .as_deref()
        .unwrap_or("attachment");
    headers.insert(header::CONTENT_DISPOSITION, disposition(kind, name));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=60"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // An SVG opened on its own runs no script.
    if content_type == "image/svg+xml" {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'",
            ),
        );
    }
    headers
}

pub async fn content(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<ContentQuery>,
    request: HeaderMap,
) -> Result<Response> {
    let download = matches!(query.download.as_deref(), Some("1" | "true"));
    let summary = api.attachment_summary(&caller, &id).await?;
    let total = summary.byte_size;
    let asked = request
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap_or("invalid"));
    match parse_range(asked, total) {
        Range::Unsatisfiable => {
            let mut headers = content_headers(&summary, download);
            headers.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{total}")).map_err(ApiError::internal)?,
            );
            Ok((StatusCode::RANGE_NOT_SATISFIABLE, headers).into_response())
        }
        Range::Whole => {
            let content = api.attachment_content(&caller, &id, None).await?;
            let headers = content_headers(&content.attachment, download);
            Ok((StatusCode::OK, headers, Body::from(content.bytes)).into_response())
        }
        Range::Part(start, end) => {
            let len = end - start + 1;
            let content = api
                .attachment_content(&caller, &id, Some((start, len)))
                .await?;
            let mut headers = content_headers(&content.attachment, download);
            headers.insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes {start}-{end}/{total}"))
                    .map_err(ApiError::internal)?,
            );
            Ok((
                StatusCode::PARTIAL_CONTENT,
                headers,
                Body::from(content.bytes),
            )
                .into_response())
        }
    }
}

/// Answers `{"ok": true}`, as Paperclip does.
pub async fn delete(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    api.remove_attachment(&caller, &id).await?;
    Ok(Json(json!({ "ok": true })))
}

pub async fn list_work_products(
    State(api): State<Api>,
    caller: Caller,
    Path(issue): Path<String>,
    QueryParams(_): QueryParams<WorkProductQuery>,
) -> Result<Json<Vec<WorkProduct>>> {
    Ok(Json(api.list_work_products(&caller, &issue).await?))
}

/// `?refreshPullRequests=true`: Paperclip asks GitHub for a pull request's state; Roost keeps
/// what was recorded, so the flag changes nothing.
#[derive(Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkProductQuery {
    #[serde(default)]
    pub refresh_pull_requests: Option<String>,
}

/// 201 whether it recorded a new work product or updated the run's artifact for the same
/// file, as Paperclip answers.
pub async fn create_work_product(
    State(api): State<Api>,
    caller: Caller,
    Path(issue): Path<String>,
    JsonBody(fields): JsonBody<WorkProductFields>,
) -> Result<(StatusCode, Json<WorkProduct>)> {
    let product = api.create_work_product(&caller, &issue, fields).await?;
    Ok((StatusCode::CREATED, Json(product)))
}

pub async fn update_work_product(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(fields): JsonBody<WorkProductFields>,
) -> Result<Json<WorkProduct>> {
    Ok(Json(api.update_work_product(&caller, &id, fields).await?))
}

pub async fn delete_work_product(
    State(api): State<Api>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<WorkProduct>> {
    Ok(Json(api.delete_work_product(&caller, &id).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_as_paperclip_reads_them() {
        assert_eq!(parse_range(None, 10), Range::Whole);
        assert_eq!(parse_range(Some("bytes=0-3"), 10), Range::Part(0, 3));
        assert_eq!(parse_range(Some("Bytes=0-3"), 10), Range::Part(0, 3));
        assert_eq!(parse_range(Some("bytes=4-"), 10), Range::Part(4, 9));
        assert_eq!(parse_range(Some("bytes=-3"), 10), Range::Part(7, 9));
        assert_eq!(parse_range(Some("bytes=5-100"), 10), Range::Part(5, 9));
        for bad in [
            "bytes=10-12",
            "bytes=3-1",
            "bytes=0-1,4-5",
            "items=0-1",
            "bytes=-0",
            "bytes=-",
        ] {
            assert_eq!(parse_range(Some(bad), 10), Range::Unsatisfiable, "{bad}");
        }
    }

    #[test]
    fn a_file_name_is_quoted_safely_and_kept_in_utf8() {
        assert_eq!(
            disposition("inline", "report.md"),
            "inline; filename=\"report.md\""
        );
        assert_eq!(
            disposition("attachment", "a\"b ü.txt"),
            "attachment; filename=\"a_b _.txt\"; filename*=UTF-8''a%22b%20%C3%BC.txt"
        );
    }
}
