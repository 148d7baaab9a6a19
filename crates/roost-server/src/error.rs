//! API errors and their single mapping to HTTP statuses and gRPC codes.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use roost_core::error::ErrorClass;
use roost_core::DomainError;
use serde_json::{json, Value};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("{message}")]
    BadRequest { message: String, details: Value },
    #[error("{message}")]
    Unauthorized { message: String },
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("{message}")]
    Unavailable {
        message: String,
        retry_after_ms: u64,
        leader: Option<String>,
    },
    #[error("internal error: {message}")]
    Internal { message: String },
    /// A path that is no route (Paperclip's sentence, with the call that missed).
    #[error(
        "API route not found: {method} {path} is not a route of this server; check the path, \
         or the client's version against this server's"
    )]
    NoRoute { method: String, path: String },
    /// The credential's request budget is spent (`rate_limit.rs`).
    #[error("too many requests with this credential; retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
}

/// Every way a request can fail, as (HTTP status, gRPC code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codes {
    pub http: StatusCode,
    pub grpc: tonic::Code,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            details: Value::Null,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::Unauthorized {
            message: message.into(),
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        ApiError::Internal {
            message: e.to_string(),
        }
    }

    pub fn not_found(entity: &str, id: &str) -> Self {
        ApiError::Domain(DomainError::not_found(entity, id))
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::Domain(DomainError::forbidden(message))
    }

    /// The one table from error to status codes.
    pub fn codes(&self) -> Codes {
        use tonic::Code;
        let (http, grpc) = match self {
            ApiError::Domain(d) => match d.class() {
                ErrorClass::BadRequest => (StatusCode::BAD_REQUEST, Code::InvalidArgument),
                ErrorClass::Forbidden => (StatusCode::FORBIDDEN, Code::PermissionDenied),
                ErrorClass::NotFound => (StatusCode::NOT_FOUND, Code::NotFound),
                ErrorClass::Conflict => (StatusCode::CONFLICT, Code::Aborted),
                ErrorClass::Unprocessable => {
                    (StatusCode::UNPROCESSABLE_ENTITY, Code::FailedPrecondition)
                }
                ErrorClass::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, Code::InvalidArgument),
                ErrorClass::TooMany => (StatusCode::TOO_MANY_REQUESTS, Code::ResourceExhausted),
            },
            ApiError::BadRequest { .. } => (StatusCode::BAD_REQUEST, Code::InvalidArgument),
            ApiError::Unauthorized { .. } => (StatusCode::UNAUTHORIZED, Code::Unauthenticated),
            ApiError::PayloadTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, Code::ResourceExhausted)
            }
            ApiError::Unavailable { .. } => (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
            ApiError::Internal { .. } => (StatusCode::INTERNAL_SERVER_ERROR, Code::Internal),
            ApiError::NoRoute { .. } => (StatusCode::NOT_FOUND, Code::NotFound),
            ApiError::RateLimited { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, Code::ResourceExhausted)
            }
        };
        Codes { http, grpc }
    }

    /// True if the same request may succeed later (no leader, a timeout, a storage fault);
    /// false if the answer is final.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ApiError::Unavailable { .. } | ApiError::Internal { .. }
        )
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Domain(d) => d.code(),
            ApiError::BadRequest { .. } => "bad_request",
            ApiError::Unauthorized { .. } => "unauthorized",
            ApiError::PayloadTooLarge { .. } => "payload_too_large",
            ApiError::Unavailable { .. } => "unavailable",
            ApiError::Internal { .. } => "internal",
            ApiError::NoRoute { .. } => "not_found",
            ApiError::RateLimited { .. } => "rate_limited",
        }
    }

    /// `{"error": sentence, "code": code, "message": sentence, "details": ...}`, the same on REST
    /// and gRPC.
    pub fn body(&self) -> Value {
        let details = match self {
            ApiError::Domain(d) => d.details(),
            ApiError::BadRequest { details, .. } => details.clone(),
            ApiError::PayloadTooLarge { limit } => json!({ "limitBytes": limit }),
            ApiError::Unavailable {
                retry_after_ms,
                leader,
                ..
            } => {
                json!({ "retryAfterMs": retry_after_ms, "leader": leader })
            }
            ApiError::RateLimited { retry_after_secs } => {
                json!({ "retryAfterSecs": retry_after_secs })
            }
            ApiError::NoRoute { method, path } => {
                json!({ "entity": "route", "method": method, "path": path })
            }
            ApiError::Unauthorized { .. } | ApiError::Internal { .. } => Value::Null,
        };
        // Paperclip's clients print `error`: it is the sentence; `code` is for programs.
        let sentence = self.to_string();
        json!({ "error": sentence, "code": self.code(), "message": sentence, "details": details })
    }
}

impl From<roost_raft::Error> for ApiError {
    fn from(e: roost_raft::Error) -> Self {
        match e {
            roost_raft::Error::NotLeader { leader_addr, .. } => ApiError::Unavailable {
                message: "this node is not the leader".into(),
                retry_after_ms: 200,
                leader: leader_addr,
            },
            roost_raft::Error::Unavailable { message } => ApiError::Unavailable {
                message,
                retry_after_ms: 500,
                leader: None,
            },
            roost_raft::Error::Membership { message } => {
                ApiError::Domain(DomainError::conflict(message))
            }
            roost_raft::Error::TooLarge { .. } => ApiError::Domain(DomainError::too_large(
                "write",
                roost_raft::MAX_WRITE_BYTES as u64,
                "bytes of JSON as it is kept in the log (escapes counted): send less",
            )),
            other => ApiError::internal(other),
        }
    }
}

impl From<roost_store::Error> for ApiError {
    fn from(e: roost_store::Error) -> Self {
        ApiError::internal(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let codes = self.codes();
        if codes.http.is_server_error() {
            tracing::warn!(code = self.code(), error = %self, "request failed");
        }
        let mut response = (codes.http, axum::Json(self.body())).into_response();
        let retry_after = match &self {
            ApiError::Unavailable { retry_after_ms, .. } => Some(retry_after_ms.div_ceil(1000)),
            ApiError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        };
        if let Some(secs) = retry_after.map(|secs| secs.max(1)) {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        response
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        tonic::Status::new(e.codes().grpc, e.body().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write a node refuses as too big for the log is the 413 the API's bounds answer, on
    /// the node that took it and through a forwarding node alike (`RemoteFailure::TooLarge`).
    #[test]
    fn a_write_too_large_for_the_log_is_a_413_naming_the_bound() {
        let e = ApiError::from(roost_raft::Error::TooLarge { bytes: 2 << 20 });
        assert_eq!(e.codes().http, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(e.code(), "too_large");
        assert!(e.to_string().contains("write"), "{e}");
    }
}
