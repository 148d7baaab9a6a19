//! The `openclaw_gateway` adapter against a stand-in gateway that follows OpenClaw's protocol
//! (challenge, `connect`, `sessions.describe`, `agent` acknowledged and then held open): what
//! the real gateway in `crates/roost/tests/e2e/runtimes/openclaw.rs` cannot show on demand, a
//! refused token and a stop in the middle of a turn.

use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use roost_core::RunStatus;
use serde_json::{json, Value};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;

use super::{assignment, run_in, run_to_end, wait_until};

const TOKEN: &str = "gateway-token";

/// Every request method the stand-in received, in order, with its params.
type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// Serves one connection: refuses any token but [`TOKEN`], answers `agent` with an ack and
/// then nothing until `chat.abort`.
async fn gateway() -> (String, Calls) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("ws://{}", listener.local_addr().expect("addr"));
    let calls = Calls::default();
    let seen = calls.clone();
    tokio::spawn(async move {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
            return;
        };
        let challenge = json!({ "type": "event", "event": "connect.challenge",
                                "payload": { "nonce": "n-1", "ts": 1000 } });
        let _ = ws.send(Message::text(challenge.to_string())).await;
        while let Some(Ok(Message::Text(text))) = ws.next().await {
            let Ok(req) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            let method = req["method"].as_str().unwrap_or_default().to_string();
            seen.lock()
                .expect("calls")
                .push((method.clone(), req["params"].clone()));
            let id = req["id"].clone();
            let answer = match method.as_str() {
                "connect" if req["params"]["auth"]["token"] != TOKEN => json!({
                    "type": "res", "id": id, "ok": false,
                    "error": { "code": "INVALID_REQUEST",
                               "message": "unauthorized: gateway token mismatch",
                               "details": { "code": "AUTH_TOKEN_MISMATCH" } } }),
                "connect" => json!({ "type": "res", "id": id, "ok": true,
                                     "payload": { "type": "hello-ok", "protocol": 4 } }),
                "sessions.describe" => json!({ "type": "res", "id": id, "ok": true,
                                               "payload": { "session": null } }),
                "agent" => json!({ "type": "res", "id": id, "ok": true,
                                   "payload": { "status": "accepted" } }),
                _ => json!({ "type": "res", "id": id, "ok": true, "payload": {} }),
            };
            let _ = ws.send(Message::text(answer.to_string())).await;
        }
    });
    (url, calls)
}

fn methods(calls: &Calls) -> Vec<String> {
    calls
        .lock()
        .expect("calls")
        .iter()
        .map(|(m, _)| m.clone())
        .collect()
}

#[tokio::test]
async fn a_wrong_gateway_token_fails_the_run_with_the_gateways_reason() {
    let (url, calls) = gateway().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment(
        "openclaw_gateway",
        json!({ "url": url, "authToken": "not-the-token" }),
        "",
    );
    let out = run_to_end(dir.path(), &a).await;
    assert_eq!(out.ended.status, RunStatus::Failed, "{:?}", out.ended);
    assert!(
        out.ended.error.contains("gateway token mismatch")
            && out.ended.error.contains("AUTH_TOKEN_MISMATCH"),
        "{}",
        out.ended.error
    );
    assert_eq!(methods(&calls), ["connect"], "no turn without a connection");
}

#[tokio::test]
async fn a_stop_mid_turn_aborts_the_gateways_turn() {
    let (url, calls) = gateway().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let a = assignment(
        "openclaw_gateway",
        json!({ "url": url, "authToken": TOKEN, "sessionKeyStrategy": "run" }),
        "",
    );
    let (stop, stopped) = oneshot::channel();
    let running = tokio::spawn({
        let dir = dir.path().to_path_buf();
        async move { run_in(&dir, &a, stopped).await }
    });
    wait_until("turn at the gateway", || {
        methods(&calls).contains(&"agent".to_string())
    })
    .await;
    let _ = stop.send("cancelled by an operator");
    let out = running.await.expect("run task");
    assert_eq!(
        (out.ended.status, out.ended.error.as_str()),
        (RunStatus::Cancelled, "cancelled by an operator")
    );
    let calls = calls.lock().expect("calls").clone();
    let abort = calls
        .iter()
        .find(|(m, _)| m == "chat.abort")
        .unwrap_or_else(|| panic!("no chat.abort in {calls:?}"));
    assert_eq!(abort.1["sessionKey"], "paperclip:run:run-1");
    // The connect carried this worker's signed device, and the turn its run context.
    let connect = &calls[0].1;
    assert_eq!(connect["device"]["nonce"], "n-1");
    assert_eq!(connect["device"]["signedAt"], 1000);
    let agent = &calls.iter().find(|(m, _)| m == "agent").expect("agent").1;
    assert_eq!(agent["idempotencyKey"], "run-1");
    assert!(
        agent["message"]
            .as_str()
            .is_some_and(|m| m.contains("PAPERCLIP_RUN_ID=run-1")),
        "{agent}"
    );
}
