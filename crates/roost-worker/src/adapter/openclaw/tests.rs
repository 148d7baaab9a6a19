//! Session keys and the run context, without a gateway (the real one runs in
//! `crates/roost/tests/e2e/runtimes/openclaw.rs`).

use roost_proto::v1::Assignment;

use super::GatewayConfig;

fn config(json: serde_json::Value) -> GatewayConfig {
    serde_json::from_value(json).expect("an adapterConfig")
}

fn assignment(issue: Option<&str>) -> Assignment {
    Assignment {
        run_id: "r1".into(),
        agent_id: "a1".into(),
        issue_id: issue.map(str::to_string),
        ..Default::default()
    }
}

#[test]
fn session_keys_follow_paperclips_strategies() {
    let on_issue = assignment(Some("i1"));
    let no_issue = assignment(None);
    let default = config(serde_json::json!({ "url": "ws://g" }));
    assert_eq!(
        default.session_key(&on_issue),
        "paperclip:issue:i1:agent:a1"
    );
    assert_eq!(default.session_key(&no_issue), "paperclip:agent:a1");
    let per_run = config(serde_json::json!({ "sessionKeyStrategy": "run" }));
    assert_eq!(per_run.session_key(&on_issue), "paperclip:run:r1");
    let fixed = config(serde_json::json!({
        "sessionKeyStrategy": "fixed", "sessionKey": "desk", "agentId": "ops"
    }));
    assert_eq!(fixed.session_key(&on_issue), "agent:ops:desk");
    let prefixed = config(serde_json::json!({ "sessionKey": "agent:x:y", "agentId": "ops" }));
    assert_eq!(prefixed.session_key(&no_issue), "agent:x:y");
}

#[test]
fn the_run_key_is_masked_in_what_the_log_shows() {
    // The agent is told the run's key and writes it into its commands: the log shows `***`.
    let a = Assignment {
        run_token: "rst_run_secret".into(),
        ..assignment(Some("i1"))
    };
    assert_eq!(
        super::mask_key(&a, "export PAPERCLIP_API_KEY='rst_run_secret'; curl"),
        "export PAPERCLIP_API_KEY='***'; curl"
    );
    let keyless = assignment(None);
    assert_eq!(super::mask_key(&keyless, "no key here"), "no key here");
}

#[test]
fn the_token_comes_from_the_config_or_its_secret_env() {
    let direct = config(serde_json::json!({ "authToken": "t1", "token": "t2" }));
    assert_eq!(direct.token(), "t1");
    let from_env = config(serde_json::json!({
        "env": { "OPENCLAW_GATEWAY_TOKEN": { "type": "plain", "value": "t3" } }
    }));
    assert_eq!(from_env.token(), "t3");
}
