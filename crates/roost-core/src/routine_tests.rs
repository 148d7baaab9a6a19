//! Schedule math, stagger and webhook signatures (`routine.rs`), on a fixed clock.

use super::*;

fn t(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).expect("a test time")
}

fn cron(expr: &str, tz: &str) -> Schedule {
    Schedule::parse(expr, Some(tz), Timestamp(0)).expect("a valid schedule")
}

/// America/New_York, "30 2 * * *". Spring forward (2026-03-08: 02:00 EST jumps to 03:00
/// EDT): 02:30 does not exist that day, and Roost (croner's rule for a fixed-time job) fires
/// once at the first instant after the gap, 03:00 EDT = 07:00Z; the days around fire at 02:30
/// local (07:30Z before, 06:30Z after). Fall back (2026-11-01: 02:00 EDT goes back to 01:00
/// EST): 02:30 happens once, at EST (07:30Z); "30 1 * * *", whose 01:30 happens twice that
/// day, fires once, at the earlier instant (01:30 EDT = 05:30Z).
#[test]
fn cron_in_new_york_across_both_dst_changes() {
    let s = cron("30 2 * * *", "America/New_York");
    let mut at = t("2026-03-06T12:00:00Z");
    let mut spring = Vec::new();
    for _ in 0..4 {
        at = s.next_after(at).expect("a next instant");
        spring.push(at.to_rfc3339());
    }
    assert_eq!(
        spring,
        [
            "2026-03-07T07:30:00.000Z", // 02:30 EST
            "2026-03-08T07:00:00.000Z", // 02:30 skipped: 03:00 EDT, the end of the gap
            "2026-03-09T06:30:00.000Z", // 02:30 EDT
            "2026-03-10T06:30:00.000Z",
        ]
    );
    let mut at = t("2026-10-30T12:00:00Z");
    let mut fall = Vec::new();
    for _ in 0..3 {
        at = s.next_after(at).expect("a next instant");
        fall.push(at.to_rfc3339());
    }
    assert_eq!(
        fall,
        [
            "2026-10-31T06:30:00.000Z", // 02:30 EDT
            "2026-11-01T07:30:00.000Z", // 02:30 EST, once
            "2026-11-02T07:30:00.000Z",
        ]
    );
    let one_thirty = cron("30 1 * * *", "America/New_York");
    let mut at = t("2026-10-31T12:00:00Z");
    let mut twice = Vec::new();
    for _ in 0..2 {
        at = one_thirty.next_after(at).expect("a next instant");
        twice.push(at.to_rfc3339());
    }
    assert_eq!(
        twice,
        ["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"],
        "the repeated 01:30 fires once, at its first (EDT) instant"
    );
}

#[test]
fn cron_defaults_to_utc_and_refuses_bad_input_with_a_sentence() {
    let s = Schedule::parse("0 9 * * 1-5", None, Timestamp(0)).expect("valid");
    // Friday 2026-11-27 10:00Z → Monday 09:00Z.
    assert_eq!(
        s.next_after(t("2026-11-27T10:00:00Z")),
        Some(t("2026-11-30T09:00:00Z"))
    );
    let six = Schedule::parse("0 0 9 * * 1", None, Timestamp(0)).unwrap_err();
    assert!(six.contains("has 6 fields"), "{six}");
    let zone = Schedule::parse("0 9 * * *", Some("Mars/Olympus"), Timestamp(0)).unwrap_err();
    assert!(zone.contains("IANA time zone"), "{zone}");
    let bad = Schedule::parse("61 9 * * *", None, Timestamp(0)).unwrap_err();
    assert!(bad.contains("not a valid cron expression"), "{bad}");
}

#[test]
fn every_counts_from_its_anchor_and_at_fires_once() {
    let anchor = t("2026-01-01T00:00:00Z");
    let s = Schedule::parse("every 2s", None, anchor).expect("valid");
    assert_eq!(s.first(anchor), Some(Timestamp(anchor.0 + 2_000)));
    assert_eq!(
        s.next_after(Timestamp(anchor.0 + 2_000)),
        Some(Timestamp(anchor.0 + 4_000))
    );
    assert_eq!(
        s.next_after(Timestamp(anchor.0 + 4_001)),
        Some(Timestamp(anchor.0 + 6_000))
    );
    assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
    assert_eq!(parse_duration_ms("250ms"), Ok(250));
    assert!(Schedule::parse("every 10", None, anchor).is_err());
    assert!(
        Schedule::parse("every 500ms", None, anchor).is_err(),
        "under 1s"
    );
    let at = Schedule::parse("at 2026-01-02T09:00:00Z", None, anchor).expect("valid");
    assert_eq!(at.first(anchor), Some(t("2026-01-02T09:00:00Z")));
    assert_eq!(at.next_after(t("2026-01-02T09:00:00Z")), None, "once only");
    assert!(Schedule::parse("at tomorrow", None, anchor).is_err());
}

#[test]
fn stagger_is_deterministic_and_within_its_window() {
    let window = 5_000;
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..1000 {
        let id = format!("routine-{i}");
        let s = stagger_ms(&id, window);
        assert!((0..window as i64).contains(&s), "{s} outside the window");
        assert_eq!(
            s,
            stagger_ms(&id, window),
            "the same routine, the same delay"
        );
        seen.insert(s / 500);
    }
    assert_eq!(
        seen.len(),
        10,
        "a thousand routines spread over every tenth of the window"
    );
    assert_eq!(stagger_ms("r", 0), 0, "a zero window: no stagger");
}

fn webhook(mode: SigningMode) -> RoutineTrigger {
    RoutineTrigger {
        id: "t".into(),
        company_id: "c".into(),
        routine_id: "r".into(),
        kind: TriggerKind::Webhook,
        label: None,
        enabled: true,
        cron_expression: None,
        timezone: None,
        next_run_at: None,
        last_fired_at: None,
        last_result: None,
        late_firings: 0,
        public_id: Some("pub".into()),
        signing_mode: Some(mode),
        replay_window_sec: Some(300),
        secret: Some("s3cret".into()),
        last_rotated_at: None,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
    }
}

/// RFC 4231 test case 2, to pin the HMAC itself.
#[test]
fn hmac_matches_rfc_4231() {
    let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
    assert_eq!(
        hex::encode(mac),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn hmac_webhook_good_bad_and_outside_the_replay_window() {
    let trig = webhook(SigningMode::HmacSha256);
    let now = Timestamp(1_800_000_000_000);
    let body = br#"{"event":"deploy"}"#;
    let ts = "1800000000";
    let sig = format!(
        "sha256={}",
        hex::encode(hmac_sha256(b"s3cret", &[ts.as_bytes(), b".", body]))
    );
    let req = |sig: &'static str, ts: &'static str| WebhookRequest {
        signature: Some(sig),
        timestamp: Some(ts),
        body,
        ..Default::default()
    };
    let good: &'static str = Box::leak(sig.clone().into_boxed_str());
    assert_eq!(verify_webhook(&trig, &req(good, ts), now), Ok(()));
    // The bare hex form is accepted too, and a timestamp in milliseconds.
    let bare: &'static str = Box::leak(
        sig.trim_start_matches("sha256=")
            .to_string()
            .into_boxed_str(),
    );
    assert_eq!(verify_webhook(&trig, &req(bare, ts), now), Ok(()));
    // A flipped digit, another body, another secret: refused.
    let mut flipped = sig.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    let flipped: &'static str = Box::leak(String::from_utf8(flipped).unwrap().into_boxed_str());
    assert!(verify_webhook(&trig, &req(flipped, ts), now).is_err());
    let other_body = WebhookRequest {
        body: b"{}",
        ..req(good, ts)
    };
    assert!(verify_webhook(&trig, &other_body, now).is_err());
    // Signed 301 s before now (window 300 s): refused even with the right signature.
    let old_ts = "1799999699";
    let old_sig = format!(
        "sha256={}",
        hex::encode(hmac_sha256(b"s3cret", &[old_ts.as_bytes(), b".", body]))
    );
    let old_sig: &'static str = Box::leak(old_sig.into_boxed_str());
    let err = verify_webhook(&trig, &req(old_sig, old_ts), now).unwrap_err();
    assert!(err.contains("replay window"), "{err}");
    // 299 s is inside.
    let ok_ts = "1799999701";
    let ok_sig = hex::encode(hmac_sha256(b"s3cret", &[ok_ts.as_bytes(), b".", body]));
    let ok_sig: &'static str = Box::leak(ok_sig.into_boxed_str());
    assert_eq!(verify_webhook(&trig, &req(ok_sig, ok_ts), now), Ok(()));
    // Missing headers.
    let none = WebhookRequest {
        body,
        ..Default::default()
    };
    assert!(verify_webhook(&trig, &none, now).is_err());
}

#[test]
fn bearer_none_and_github_modes() {
    let now = Timestamp(0);
    let bearer = webhook(SigningMode::Bearer);
    let ok = WebhookRequest {
        authorization: Some("Bearer s3cret"),
        ..Default::default()
    };
    assert_eq!(verify_webhook(&bearer, &ok, now), Ok(()));
    let bad = WebhookRequest {
        authorization: Some("Bearer nope"),
        ..Default::default()
    };
    assert!(verify_webhook(&bearer, &bad, now).is_err());
    assert_eq!(
        verify_webhook(&webhook(SigningMode::None), &WebhookRequest::default(), now),
        Ok(())
    );
    let gh = webhook(SigningMode::GithubHmac);
    let sig = format!("sha256={}", hex::encode(hmac_sha256(b"s3cret", &[b"{}"])));
    let req = WebhookRequest {
        hub_signature: Some(&sig),
        body: b"{}",
        ..Default::default()
    };
    assert_eq!(verify_webhook(&gh, &req, now), Ok(()));
}

#[test]
fn templates_take_run_values_over_defaults() {
    let defs = serde_json::json!([{ "name": "repo", "defaultValue": "roost" }, { "name": "n", "defaultValue": 3 }]);
    let values = variable_values(&defs, &serde_json::json!({ "n": 5 }));
    assert_eq!(
        interpolate("Review {{ repo }} x{{n}} {{unknown}}", &values),
        "Review roost x5 {{unknown}}"
    );
}

#[test]
fn the_secret_is_never_in_a_trigger_view() {
    let v = trigger_view(&webhook(SigningMode::HmacSha256));
    assert!(v.get("secret").is_none());
    assert_eq!(v["hasSecret"], true);
    assert_eq!(v["signingMode"], "hmac_sha256");
}

/// Regression: a cron schedule in a zone east of UTC, asked for its next instant at the end of
/// chrono's range (a batch entry stamped there), panicked inside apply ("Local time out of range
/// for `NaiveDateTime`"), which stops every replica that applies the entry.
#[test]
fn a_cron_schedule_asked_at_the_end_of_time_panicked_in_apply() {
    let kolkata = cron("19 9 * * 1-5", "Asia/Kolkata");
    assert_eq!(kolkata.next_after(Timestamp(8_210_266_876_799_999)), None);
    assert_eq!(kolkata.next_after(Timestamp(i64::MAX)), None);
    let west = cron("0 0 * * *", "America/Los_Angeles");
    assert_eq!(west.next_after(Timestamp(i64::MIN)), None);
    // Inside the range nothing changes.
    assert_eq!(
        kolkata.next_after(t("2026-11-27T00:00:00Z")),
        Some(t("2026-11-27T03:49:00Z"))
    );
    // An `every` schedule anchored far in the past does not overflow either.
    let every = Schedule::parse("every 1m", None, Timestamp(i64::MIN / 2)).expect("every 1m");
    assert_eq!(every.next_after(Timestamp(i64::MAX / 2 + 1)), None);
}
