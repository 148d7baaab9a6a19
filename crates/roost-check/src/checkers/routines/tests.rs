use super::*;
use crate::snapshot::RoutineSnapshot;

const FIRST: i64 = 1_764_000_000_000;
const PERIOD: i64 = 2_000;
const LATENESS: i64 = 12_000;

/// `every 2s` from `FIRST`, stopped just after instant `stopped_after` was due.
fn schedule(stopped_after: i64) -> RoutineSchedule {
    RoutineSchedule {
        routine_id: "ro1".into(),
        period_ms: PERIOD,
        first_due_ms: FIRST,
        stopped_at_ms: FIRST + stopped_after * PERIOD + 500,
        allowed_lateness_ms: LATENESS,
    }
}

/// The firing of instant `k`, applied 300 ms after it (within the stagger).
fn fired(k: i64) -> RoutineRunSnapshot {
    RoutineRunSnapshot {
        id: format!("run-{k}"),
        source: "schedule".into(),
        status: "completed".into(),
        scheduled_for_ms: Some(FIRST + k * PERIOD),
        triggered_at_ms: Some(FIRST + k * PERIOD + 300),
        linked: true,
    }
}

/// The drop record the catch-up cap makes at instant `k`, by a command at `at_ms`.
fn dropped(k: i64, at_ms: i64) -> RoutineRunSnapshot {
    RoutineRunSnapshot {
        id: format!("drop-{k}"),
        status: "skipped".into(),
        triggered_at_ms: Some(at_ms),
        linked: false,
        ..fired(k)
    }
}

fn replica(node: &str, runs: Vec<RoutineRunSnapshot>, complete: bool) -> ReplicaSnapshot {
    let mut snapshot = ReplicaSnapshot {
        node: node.into(),
        ..ReplicaSnapshot::default()
    };
    // The API lists runs newest first.
    let runs = runs.into_iter().rev().collect();
    snapshot
        .routines
        .insert("ro1".into(), RoutineSnapshot { runs, complete });
    snapshot
}

fn clean(n: i64) -> Vec<RoutineRunSnapshot> {
    (0..n).map(fired).collect()
}

fn check(runs: Vec<RoutineRunSnapshot>, complete: bool, stopped_after: i64) -> Verdict {
    check_routine_firings(&[replica("n2", runs, complete)], &schedule(stopped_after))
}

fn only_violation(verdict: &Verdict) -> &str {
    assert_eq!(verdict.violations.len(), 1, "{verdict}");
    assert_eq!(verdict.violations[0].subject, "replica n2 routine ro1");
    &verdict.violations[0].message
}

#[test]
fn a_clean_sequence_passes() {
    // Stopped right after instant 20 was due: instants 0..=15 must have fired (lateness 12 s),
    // the last ones may still be in their stagger.
    let verdict = check(clean(16), true, 20);
    assert!(verdict.is_ok(), "{verdict}");
    let verdict = check(clean(21), true, 20);
    assert!(verdict.is_ok(), "{verdict}");
}

#[test]
fn runs_of_other_sources_are_not_schedule_firings() {
    let mut runs = clean(21);
    runs.push(RoutineRunSnapshot {
        id: "manual-1".into(),
        source: "manual".into(),
        scheduled_for_ms: None,
        ..fired(3)
    });
    let verdict = check(runs, true, 20);
    assert!(verdict.is_ok(), "{verdict}");
}

#[test]
fn a_doubled_instant_fails() {
    let mut runs = clean(21);
    runs.insert(
        8,
        RoutineRunSnapshot {
            id: "run-7-again".into(),
            ..fired(7)
        },
    );
    let verdict = check(runs, true, 20);
    let message = only_violation(&verdict);
    assert!(message.contains("fired 2 times"), "{message}");
    assert!(message.contains("run-7, run-7-again"), "{message}");
    assert!(message.contains("first+14.0s"), "{message}");
}

#[test]
fn a_gap_fails() {
    let runs: Vec<_> = clean(21)
        .into_iter()
        .filter(|r| !["run-5", "run-6"].contains(&r.id.as_str()))
        .collect();
    let verdict = check(runs, true, 20);
    let message = only_violation(&verdict);
    assert!(message.starts_with("2 firing(s) lost"), "{message}");
    assert!(
        message.contains("first+10.0s") && message.contains("first+12.0s"),
        "{message}"
    );
}

#[test]
fn a_first_firing_lost_fails_unless_the_list_is_partial() {
    let runs: Vec<_> = clean(21).into_iter().skip(1).collect();
    let message = only_violation(&check(runs.clone(), true, 20)).to_string();
    assert!(message.contains("1 firing(s) lost"), "{message}");
    // A full page of the API: older runs are not listed, so the list starts anywhere.
    let verdict = check(runs, false, 20);
    assert!(verdict.is_ok(), "{verdict}");
}

#[test]
fn firings_lost_at_the_end_fail() {
    // Instants 0..=9 only, though the routine was active 40 s after the first.
    let verdict = check(clean(10), true, 20);
    let message = only_violation(&verdict);
    assert!(message.contains("lost at the end"), "{message}");
    assert!(message.contains("first+20.0s"), "{message}");
    // Nothing at all fired.
    let message = only_violation(&check(Vec::new(), true, 20)).to_string();
    assert!(message.contains("first+0.0s"), "{message}");
}

#[test]
fn instants_a_drop_record_names_may_be_missing() {
    // Instant 4 is the drop record of a command at instant 9's time + 1 s: 4..=9 dropped, the
    // schedule resumes at 10.
    let mut runs = clean(4);
    runs.push(dropped(4, FIRST + 9 * PERIOD + 1_000));
    runs.extend((10..21).map(fired));
    let verdict = check(runs, true, 20);
    assert!(verdict.is_ok(), "{verdict}");
}

#[test]
fn a_drop_record_does_not_excuse_instants_after_its_command() {
    // Dropped at instant 9's time + 1 s, but the next firing is 12: 10 and 11 were lost.
    let mut runs = clean(4);
    runs.push(dropped(4, FIRST + 9 * PERIOD + 1_000));
    runs.extend((12..21).map(fired));
    let message = only_violation(&check(runs, true, 20)).to_string();
    assert!(message.starts_with("2 firing(s) lost"), "{message}");
    // And an instant it dropped may not fire after all.
    let mut runs = clean(4);
    runs.push(dropped(4, FIRST + 9 * PERIOD + 1_000));
    runs.push(fired(7));
    runs.extend((10..21).map(fired));
    let message = only_violation(&check(runs, true, 20)).to_string();
    assert!(message.contains("had moved on"), "{message}");
}

#[test]
fn a_skipped_firing_that_links_its_wake_is_no_drop_record() {
    // Its wake was skipped: the instant fired; the next must follow one period later.
    let mut runs = clean(5);
    runs.push(RoutineRunSnapshot {
        status: "skipped".into(),
        triggered_at_ms: Some(FIRST + 12 * PERIOD),
        ..fired(5)
    });
    runs.extend((9..21).map(fired));
    let message = only_violation(&check(runs, true, 20)).to_string();
    assert!(message.starts_with("3 firing(s) lost"), "{message}");
}

#[test]
fn an_instant_off_the_period_fails() {
    let mut runs = clean(21);
    runs.insert(
        3,
        RoutineRunSnapshot {
            id: "odd".into(),
            scheduled_for_ms: Some(FIRST + 2 * PERIOD + 700),
            ..fired(2)
        },
    );
    let verdict = check(runs, true, 20);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.message.contains("not one of the schedule's")),
        "{verdict}"
    );
}

#[test]
fn only_the_replica_that_differs_is_named() {
    let mut runs = clean(21);
    runs.remove(9);
    let replicas = vec![replica("n1", clean(21), true), replica("n2", runs, true)];
    let verdict = check_routine_firings(&replicas, &schedule(20));
    only_violation(&verdict);
}

#[test]
fn a_missing_routine_or_no_replicas_fail() {
    let verdict = check_routine_firings(&[ReplicaSnapshot::default()], &schedule(20));
    assert!(
        verdict.violations[0].message.contains("missing"),
        "{verdict}"
    );
    assert!(!check_routine_firings(&[], &schedule(20)).is_ok());
}

#[test]
fn a_snapshot_without_routines_parses() {
    let json = r#"{"node":"n1","applied_index":1,"state_hash":"",
                  "routines":{"ro1":{"runs":[{"id":"r","source":"schedule","status":"skipped"}]}}}"#;
    let snapshot = ReplicaSnapshot::from_json(json).unwrap();
    let routine = &snapshot.routines["ro1"];
    assert!(!routine.complete && routine.runs[0].is_drop_record());
    let none = ReplicaSnapshot::from_json(r#"{"node":"n1","applied_index":1,"state_hash":""}"#);
    assert!(none.unwrap().routines.is_empty());
}

/// As seen in mixed_faults seed 11 (2026-11-27): a routine staggered by 2.8 s, more than its
/// 2 s period, so each firing found the next instant due already; the 26th was dropped as if
/// after downtime and instant 26 never fired.
#[test]
fn a_drop_record_without_downtime_fails() {
    let late = |r: RoutineRunSnapshot| RoutineRunSnapshot {
        triggered_at_ms: r.scheduled_for_ms.map(|t| t + 2_800),
        ..r
    };
    let mut runs: Vec<_> = (0..25).map(fired).map(late).collect();
    runs.push(dropped(25, FIRST + 25 * PERIOD + 2_895));
    runs.extend((27..36).map(fired).map(late));
    let message = only_violation(&check(runs, true, 35)).to_string();
    assert!(message.contains("without downtime"), "{message}");
    assert!(message.contains("first+50.0s"), "{message}");
}
