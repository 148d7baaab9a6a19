//! A client of OpenClaw's gateway protocol (version 4): JSON text frames over a WebSocket,
//! `req` {id, method, params} answered by `res` {id, ok, payload | error}, and `event` frames
//! between them. The server opens with a `connect.challenge`; the client's `connect` request
//! answers it with its token and, unless disabled, this worker's signed device identity.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::device::{Device, Hello};

const PROTOCOL: u64 = 4;
/// An operator's backend client: the identity the gateway grants operator scopes to.
const CLIENT_ID: &str = "gateway-client";
const CLIENT_MODE: &str = "backend";
const ROLE: &str = "operator";
const SCOPES: &[&str] = &["operator.read", "operator.write", "operator.admin"];
/// How long the server may take to send its challenge, and to answer `connect`.
const HANDSHAKE: Duration = Duration::from_secs(15);

/// Why a connection did not come up.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// Worth another try shortly: nothing listens yet, or the gateway says it is starting.
    Retry { why: String, after: Duration },
    /// The gateway refused: a wrong token, an unpaired device, a bad URL.
    Refused(String),
}

/// One frame from the gateway.
#[derive(Debug)]
pub(crate) enum Frame {
    Res {
        id: String,
        ok: bool,
        payload: Value,
        error: Value,
    },
    Event {
        event: String,
        payload: Value,
    },
}

pub(crate) struct Gateway {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

/// An error frame's text: its message and, when given, its code and detail code.
pub(crate) fn error_text(error: &Value) -> String {
    let message = error["message"].as_str().unwrap_or("no message");
    let code = error["code"].as_str().unwrap_or("");
    match error["details"]["code"].as_str() {
        Some(detail) => format!("{message} ({code}, {detail})"),
        None if !code.is_empty() => format!("{message} ({code})"),
        None => message.to_string(),
    }
}

impl Gateway {
    /// Connects to `url` and completes the handshake as an operator backend client.
    pub(crate) async fn connect(
        url: &str,
        token: &str,
        device: Option<&Device>,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Gateway, ConnectError> {
        let connector = if url.starts_with("wss://") {
            Connector::Rustls(tls)
        } else {
            Connector::Plain
        };
        let opened = tokio::time::timeout(
            HANDSHAKE,
            tokio_tungstenite::connect_async_tls_with_config(url, None, true, Some(connector)),
        )
        .await
        .map_err(|_| ConnectError::Retry {
            why: format!("{url} did not open a WebSocket within {HANDSHAKE:?}"),
            after: Duration::from_millis(500),
        })?;
        let (ws, _) = opened.map_err(|e| {
            use tokio_tungstenite::tungstenite::Error;
            match e {
                Error::Io(e) => ConnectError::Retry {
                    why: format!("{url}: {e}"),
                    after: Duration::from_millis(500),
                },
                other => ConnectError::Refused(format!("{url}: {other}")),
            }
        })?;
        let mut gateway = Gateway { ws, next_id: 0 };
        let challenge = tokio::time::timeout(HANDSHAKE, gateway.event("connect.challenge"))
            .await
            .map_err(|_| ConnectError::Retry {
                why: format!("{url} sent no connect.challenge"),
                after: Duration::from_millis(500),
            })?
            .map_err(|why| ConnectError::Retry {
                why,
                after: Duration::from_millis(500),
            })?;
        let nonce = challenge["nonce"].as_str().unwrap_or_default();
        let signed_at = challenge["ts"].as_i64().unwrap_or_default();
        let hello = Hello {
            client_id: CLIENT_ID,
            client_mode: CLIENT_MODE,
            role: ROLE,
            scopes: SCOPES,
            token,
            platform: std::env::consts::OS,
        };
        let mut params = json!({
            "minProtocol": PROTOCOL,
            "maxProtocol": PROTOCOL,
            "client": {
                "id": CLIENT_ID,
                "version": env!("CARGO_PKG_VERSION"),
                "platform": std::env::consts::OS,
                "mode": CLIENT_MODE,
            },
            "role": ROLE,
            "scopes": SCOPES,
            "caps": ["tool-events"],
            "auth": { "token": token },
            "userAgent": concat!("roost-worker/", env!("CARGO_PKG_VERSION")),
        });
        if let Some(device) = device {
            params["device"] = device.sign(&hello, nonce, signed_at);
        }
        let answer = tokio::time::timeout(HANDSHAKE, gateway.call("connect", params))
            .await
            .map_err(|_| ConnectError::Retry {
                why: format!("{url} did not answer connect"),
                after: Duration::from_millis(500),
            })?;
        match answer {
            Ok(_) => Ok(gateway),
            Err(Failure::Error(error)) if error["code"] == "UNAVAILABLE" => {
                let after = error["retryAfterMs"]
                    .as_u64()
                    .unwrap_or(500)
                    .clamp(100, 5000);
                Err(ConnectError::Retry {
                    why: format!("the gateway is not ready: {}", error_text(&error)),
                    after: Duration::from_millis(after),
                })
            }
            Err(Failure::Error(error)) => Err(ConnectError::Refused(format!(
                "the gateway refused the connection: {}",
                error_text(&error)
            ))),
            Err(Failure::Closed(why)) => Err(ConnectError::Retry {
                why,
                after: Duration::from_millis(500),
            }),
        }
    }

    /// Sends a request; returns its id. Its answer comes through [`Gateway::next`].
    pub(crate) async fn send(&mut self, method: &str, params: Value) -> Result<String, String> {
        self.next_id += 1;
        let id = format!("roost-{}", self.next_id);
        let frame = json!({ "type": "req", "id": id, "method": method, "params": params });
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|e| format!("the gateway connection broke sending {method}: {e}"))?;
        Ok(id)
    }

    /// The next frame; `Err` when the connection ends.
    pub(crate) async fn next(&mut self) -> Result<Frame, String> {
        loop {
            let message = match self.ws.next().await {
                Some(Ok(m)) => m,
                Some(Err(e)) => return Err(format!("the gateway connection broke: {e}")),
                None => return Err("the gateway closed the connection".into()),
            };
            let text = match message {
                Message::Text(t) => t,
                Message::Close(frame) => {
                    return Err(format!(
                        "the gateway closed the connection{}",
                        frame.map(|f| format!(": {}", f.reason)).unwrap_or_default()
                    ))
                }
                // Pings are answered by the library; binary frames are not part of the protocol.
                _ => continue,
            };
            let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            match frame["type"].as_str() {
                Some("res") => {
                    return Ok(Frame::Res {
                        id: frame["id"].as_str().unwrap_or_default().to_string(),
                        ok: frame["ok"].as_bool().unwrap_or(false),
                        payload: frame["payload"].clone(),
                        error: frame["error"].clone(),
                    })
                }
                Some("event") => {
                    return Ok(Frame::Event {
                        event: frame["event"].as_str().unwrap_or_default().to_string(),
                        payload: frame["payload"].clone(),
                    })
                }
                _ => continue,
            }
        }
    }

    /// Sends a request and waits for its first answer, passing over events.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let id = self.send(method, params).await.map_err(Failure::Closed)?;
        loop {
            match self.next().await.map_err(Failure::Closed)? {
                Frame::Res {
                    id: answered,
                    ok,
                    payload,
                    error,
                } if answered == id => {
                    return if ok {
                        Ok(payload)
                    } else {
                        Err(Failure::Error(error))
                    }
                }
                _ => continue,
            }
        }
    }

    /// Waits for the event `name`; returns its payload.
    async fn event(&mut self, name: &str) -> Result<Value, String> {
        loop {
            if let Frame::Event { event, payload } = self.next().await? {
                if event == name {
                    return Ok(payload);
                }
            }
        }
    }
}

/// Why a request got no answer it asked for.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The gateway answered with an error.
    Error(Value),
    /// The connection ended.
    Closed(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Error(error) => f.write_str(&error_text(error)),
            Failure::Closed(why) => f.write_str(why),
        }
    }
}
