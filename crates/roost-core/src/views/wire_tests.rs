//! What the server writes, the client reads back: the wire types round-trip through JSON, and
//! what no API shows stays out of it.

use serde_json::Value;

use super::{RunView, WakeView, WakeupResult};
use crate::rules::test_world::{admin, World};
use crate::{Command, Outcome, WakeReason};

fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> (Value, T) {
    let json = serde_json::to_value(value).expect("serializable");
    let back = serde_json::from_value(json.clone()).expect("readable by the client");
    (json, back)
}

fn a_run_with_a_key() -> RunView {
    let mut w = World::new();
    w.start_run("r1", "a1");
    let mut run = w.state.runs.get("r1").expect("run r1").clone();
    run.token_hashes = vec!["deadbeef".into()];
    RunView::new(run)
}

#[test]
fn a_run_shows_paperclips_source_and_never_its_key_hashes() {
    let view = a_run_with_a_key();
    let (json, back) = round_trip(&view);
    assert!(json.get("tokenHashes").is_none(), "{json}");
    assert_eq!(json["invocationSource"], "on_demand");
    assert_eq!(json["triggerDetail"], "manual");
    assert_eq!(back, view);
    assert!(back.token_hashes.is_empty());
}

#[test]
fn a_wakeup_answer_reads_back_with_or_without_its_run() {
    let mut w = World::new();
    let outcome = w.ok(
        admin(),
        Command::Wakeup {
            id: "w1".into(),
            agent_id: "a1".into(),
            issue_id: None,
            reason: WakeReason::OnDemand,
            payload: Value::Null,
            wake_key: None,
        },
    );
    let Outcome::Wake(wake) = outcome else {
        panic!("unexpected {outcome:?}")
    };
    let queued = WakeupResult {
        wake: WakeView {
            wake,
            blocked_by: Some("no online worker".into()),
        },
        run: None,
    };
    let (json, back) = round_trip(&queued);
    // Paperclip's shape at the top: the wake stands in for the queued run.
    assert_eq!(json["status"], "queued");
    assert_eq!(json["id"], "w1");
    assert_eq!(back, queued);

    let started = WakeupResult {
        run: Some(a_run_with_a_key()),
        ..queued
    };
    let (json, back) = round_trip(&started);
    assert_eq!(json["id"], "r1", "the run's fields at the top: {json}");
    assert_eq!(back, started);
}
