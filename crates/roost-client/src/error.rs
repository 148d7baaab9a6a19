//! The one error type of the client, and how an HTTP error response becomes one.

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status. `code` and `details` come from Roost's JSON
    /// error body, or are derived from the status when the body is not one (a proxy's page,
    /// the plain-text `/readyz`).
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        status: u16,
        code: String,
        message: String,
        details: Value,
    },
    /// The request did not complete: connection refused, timeout, broken connection.
    /// The message carries reqwest's whole cause chain, since its top line alone
    /// ("error sending request") does not say what went wrong.
    #[error("{}", describe_transport(.0))]
    Transport(reqwest::Error),
    /// The server answered with success but a body this client cannot read.
    #[error("unexpected response from {url}: {reason}")]
    Decode { url: String, reason: String },
    /// Refused before sending: an unusable base URL, token or run id, or an id that is not
    /// a path segment (empty, `.`, `..`).
    #[error("{0}")]
    InvalidArgument(String),
}

impl Error {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The machine-readable code of an API error (`not_found`, `checkout_conflict`, ...).
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Builds the error for a non-success response from its status and raw body.
    pub fn from_response(status: u16, body: &[u8]) -> Error {
        /// Roost's error body: `{"error": sentence, "code": code, "details": ...}`.
        #[derive(Deserialize)]
        struct ErrorBody {
            error: String,
            code: Option<String>,
            #[serde(default)]
            details: Value,
        }
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(parsed) => Error::Api {
                status,
                code: parsed
                    .code
                    .filter(|c| !c.is_empty())
                    .unwrap_or_else(|| status_reason(status).to_string()),
                message: parsed.error,
                details: parsed.details,
            },
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                let message = if text.is_empty() {
                    status_reason(status).replace('_', " ")
                } else {
                    truncate(text, 200)
                };
                Error::Api {
                    status,
                    code: status_reason(status).to_string(),
                    message,
                    details: Value::Null,
                }
            }
        }
    }
}

/// A code for a status whose body did not carry one, named like the server's own codes.
fn status_reason(status: u16) -> &'static str {
    match status {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        405 => "method_not_allowed",
        409 => "conflict",
        413 => "payload_too_large",
        422 => "unprocessable",
        429 => "too_many_requests",
        500 => "internal",
        502 => "bad_gateway",
        503 => "unavailable",
        504 => "gateway_timeout",
        _ => "http_error",
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// Whether a transport error is TLS refusing the connection (an alert, a certificate not
/// trusted) or a plaintext client meeting a TLS server: retrying cannot help.
pub(crate) fn is_tls_mismatch(e: &reqwest::Error) -> bool {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        // rustls reports through io::Error, whose `source` skips the error it wraps.
        let inner = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map_or(c, |inner| inner as &(dyn std::error::Error + 'static));
        if inner.is::<roost_tls::rustls::Error>() || c.to_string().contains("invalid HTTP version")
        {
            return true;
        }
        cause = c.source();
    }
    false
}

fn describe_transport(e: &reqwest::Error) -> String {
    let url = e.url().map(|u| u.as_str()).unwrap_or("the server");
    let mut chain = Vec::new();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        chain.push(c.to_string());
        cause = c.source();
    }
    if e.is_timeout() {
        return format!("no answer from {url} in time (request timed out)");
    }
    if e.is_connect() {
        // The innermost cause is the one that says why: "Connection refused", a DNS failure.
        let why = chain
            .last()
            .map(String::as_str)
            .unwrap_or("connection failed");
        return format!("cannot connect to {url}: {why}");
    }
    let mut text = e.to_string();
    for line in &chain {
        // hyper and reqwest repeat an inner message in the outer one now and then.
        if !text.contains(line.as_str()) {
            text.push_str(": ");
            text.push_str(line);
        }
    }
    // A TLS server answers a plaintext request with a handshake alert, which hyper reads as a
    // malformed response.
    if url.starts_with("http://") && text.contains("invalid HTTP version") {
        text.push_str(
            " (does the server serve HTTPS? use an https:// URL and --ca-file with its CA)",
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn roost_error_bodies_keep_code_message_and_details() {
        let body = br#"{"error":"issue X is checked out","code":"checkout_conflict","details":{"checkoutRunId":"r1"}}"#;
        let e = Error::from_response(409, body);
        match &e {
            Error::Api {
                status,
                code,
                message,
                details,
            } => {
                assert_eq!(
                    (*status, code.as_str(), message.as_str()),
                    (409, "checkout_conflict", "issue X is checked out")
                );
                assert_eq!(details, &json!({ "checkoutRunId": "r1" }));
            }
            other => panic!("expected an API error, got {other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "issue X is checked out (checkout_conflict, HTTP 409)"
        );
        assert_eq!(
            (e.status(), e.code()),
            (Some(409), Some("checkout_conflict"))
        );
    }

    #[test]
    fn missing_details_and_message_are_filled_in() {
        let e = Error::from_response(401, br#"{"error":"unauthorized"}"#);
        assert_eq!(e.to_string(), "unauthorized (unauthorized, HTTP 401)");
        assert!(matches!(
            e,
            Error::Api {
                details: Value::Null,
                ..
            }
        ));
    }

    #[test]
    fn plain_text_bodies_become_the_message() {
        let e = Error::from_response(503, b"no leader\n");
        assert_eq!(e.to_string(), "no leader (unavailable, HTTP 503)");
    }

    #[test]
    fn empty_or_foreign_bodies_fall_back_to_the_status() {
        assert_eq!(
            Error::from_response(502, b"").to_string(),
            "bad gateway (bad_gateway, HTTP 502)"
        );
        assert_eq!(
            Error::from_response(418, b"  ").to_string(),
            "http error (http_error, HTTP 418)"
        );
        // JSON that is not Roost's error shape is shown as text rather than lost.
        let e = Error::from_response(500, br#"{"oops":true}"#);
        assert_eq!(e.to_string(), r#"{"oops":true} (internal, HTTP 500)"#);
    }

    #[test]
    fn long_bodies_are_cut() {
        let page = "é".repeat(500);
        let Error::Api { message, .. } = Error::from_response(502, page.as_bytes()) else {
            panic!("expected an API error")
        };
        assert_eq!(message.chars().count(), 203);
        assert!(message.ends_with("..."));
    }
}
