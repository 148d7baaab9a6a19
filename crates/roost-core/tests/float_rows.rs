//! Bug: a float a client sent in an issue's Paperclip fields came back from JSON one unit off
//! for about a third of doubles (serde_json's default float parsing). Rows and log entries are
//! JSON: a node that read an issue back from `state.db` (a closed issue, `issue_map.rs`, or any
//! row after a restart) or from the log held another value than the node that parsed it first,
//! and their state hashes differed.

use roost_core::Issue;

#[test]
fn floats_in_an_issues_row_changed_on_a_json_round_trip_and_now_read_back_bit_for_bit() {
    let mut off = Vec::new();
    // Bit patterns spread over the whole range of finite doubles.
    let mut bits: u64 = 0x3ff0_0000_0000_0001;
    for _ in 0..20_000 {
        bits = bits
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = f64::from_bits(bits);
        if !x.is_finite() {
            continue;
        }
        let issue: Issue = serde_json::from_value(serde_json::json!({
            "id": "i1", "companyId": "c1", "identifier": "ACM-1", "issueNumber": 1,
            "title": "t", "status": "done", "priority": "medium", "blockedByIssueIds": [],
            "createdAt": 0, "updatedAt": 0, "executionPolicy": {"maxCostUsd": x},
        }))
        .unwrap_or_else(|e| panic!("an issue: {e}"));
        let row = serde_json::to_string(&issue).unwrap_or_else(|e| panic!("a row: {e}"));
        let read: Issue = serde_json::from_str(&row).unwrap_or_else(|e| panic!("read: {e}"));
        let back = read.paperclip["executionPolicy"]["maxCostUsd"].as_f64();
        if back.map(f64::to_bits) != Some(x.to_bits()) {
            off.push((x, back));
        }
    }
    assert!(
        off.is_empty(),
        "{} floats read back changed, e.g. {:?}",
        off.len(),
        &off[..off.len().min(3)]
    );
}
