//! Extractors that turn every kind of bad input into a JSON 400/401/413, never a panic and
//! never axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// Run id headers: Roost's name and Paperclip's, so Paperclip agents work unchanged.
const RUN_HEADERS: [&str; 2] = ["x-roost-run-id", "x-paperclip-run-id"];

fn bearer_token(parts: &Parts) -> Result<Option<String>, ApiError> {
    let Some(v) = parts.headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let v = v
        .to_str()
        .map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    let token = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .ok_or_else(|| ApiError::unauthorized("Authorization must be `Bearer <token>`"))?;
    Ok(Some(token.trim().to_string()))
}

/// The run a request is made for: the first run id header present.
pub(super) fn run_id_header(parts: &Parts) -> Result<Option<String>, ApiError> {
    for name in RUN_HEADERS {
        if let Some(v) = parts.headers.get(name) {
            let run_id = v
                .to_str()
                .map_err(|_| ApiError::bad_request(format!("malformed {name} header")))?;
            return Ok(Some(run_id.to_string()));
        }
    }
    Ok(None)
}

/// The request's bearer token itself, for a node that must present it to the leader.
pub struct Bearer(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for Bearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        bearer_token(parts).map(Bearer)
    }
}

impl FromRequestParts<Api> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, Self::Rejection> {
        let token = bearer_token(parts)?;
        let run_id = run_id_header(parts)?;
        let mut caller = api
            .authenticate(token.as_deref(), run_id.as_deref())
            .await?;
        api.rate_limit(&caller)?;
        if let Some(v) = parts.headers.get("idempotency-key") {
            caller.idempotency_key = Some(crate::auth::idempotency_key(
                v.as_bytes(),
                "the Idempotency-Key header",
            )?);
        }
        Ok(caller)
    }
}

/// A JSON body with strict parsing: malformed JSON, unknown fields and wrong types are 400s
/// with the parser's message; a body over the limit is 413. An empty body reads as `{}`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map(|l| l.0)
            .unwrap_or(0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge { limit }
            } else {
                ApiError::bad_request(format!("could not read request body: {rejection}"))
            }
        })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text).map(JsonBody).map_err(|e| {
            use serde_json::error::Category;
            let message = match e.classify() {
                Category::Syntax | Category::Eof => format!("malformed JSON: {e}"),
                Category::Data => format!("invalid request body: {e}"),
                Category::Io => format!("could not read request body: {e}"),
            };
            ApiError::BadRequest {
                message,
                details: json!({ "line": e.line(), "column": e.column() }),
            }
        })
    }
}

/// The configured body limit, made visible to [`JsonBody`] for its error message.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Parses a comma-separated list of enum values (`?status=todo,in_progress`).
pub fn parse_csv<T: std::str::FromStr<Err = String>>(csv: &str) -> Result<Vec<T>, ApiError> {
    csv.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<T>().map_err(ApiError::bad_request))
        .collect()
}

/// Query parameters with JSON errors.
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| QueryParams(q))
            .map_err(|e| {
                ApiError::bad_request(format!("invalid query parameters: {}", e.body_text()))
            })
    }
}
