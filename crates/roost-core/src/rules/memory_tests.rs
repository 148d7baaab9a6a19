//! Agent memory: fencing of a run's writes, document versions and lost updates, caps, scopes.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::error::DomainError;
use crate::limits::*;
use crate::memory::*;
use crate::state::{State, StateRows};

fn entry(what: &str) -> NewMemoryEntry {
    NewMemoryEntry {
        what: what.into(),
        did: "did things".into(),
        next: "next things".into(),
        errors: vec!["error: E0308 mismatched types\n  --> src/x.rs:1:1".into()],
        ..Default::default()
    }
}

fn append(w: &mut World, actor: Actor, id: &str, agent: &str) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::AppendMemoryEntry {
            id: id.into(),
            agent_id: agent.into(),
            entry: entry(&format!("entry {id}")),
            shared: false,
        },
    )
}

fn put_doc(
    w: &mut World,
    actor: Actor,
    agent: Option<&str>,
    name: &str,
    content: &str,
    expected: u64,
) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::PutMemoryDocument {
            company_id: "c1".into(),
            agent_id: agent.map(str::to_string),
            name: name.into(),
            content: content.into(),
            expected_version: expected,
        },
    )
}

fn version_of(outcome: Outcome) -> u64 {
    match outcome {
        Outcome::MemoryDocument(d) => d.version,
        other => panic!("unexpected {other:?}"),
    }
}

/// `state` as a restarted node loads it from its rows (no idempotency keys in these tests).
pub(super) fn reloaded(state: &State) -> State {
    let m = &state.memory;
    State::from_rows(StateRows {
        companies: state.companies.values().cloned().collect(),
        agents: state.agents.values().cloned().collect(),
        issues: state.issues.values().map(|i| i.into_owned()).collect(),
        runs: state.runs.values().cloned().collect(),
        credentials: state.credentials.values().cloned().collect(),
        comments: state
            .comments
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        remembered: Vec::new(),
        wakes: state.wakes.values().cloned().collect(),
        workers: state.workers.values().cloned().collect(),
        budget_policies: state.budget_policies.values().cloned().collect(),
        cost_events: state.cost_events.values().cloned().collect(),
        budget_incidents: state.budget_incidents.values().cloned().collect(),
        memory_entries: m.entries.values().cloned().collect(),
        memory_documents: m.documents.values().cloned().collect(),
        memory_live: m.live.values().cloned().collect(),
        memory_company_live: m.company_live.values().cloned().collect(),
        home_chunks: state.home.chunks.values().cloned().collect(),
        agent_homes: state.home.homes.values().cloned().collect(),
        approvals: state.approvals.approvals.values().cloned().collect(),
        goals: state.goals.values().cloned().collect(),
        projects: state.projects.values().cloned().collect(),
        skills: state.skills.values().cloned().collect(),
        labels: state.labels.values().cloned().collect(),
        issue_documents: state.documents.documents.values().cloned().collect(),
        issue_attachments: state.attachments.attachments.values().cloned().collect(),
        attachment_chunks: state
            .attachments
            .uploads
            .iter()
            .flat_map(|(id, u)| {
                u.sizes
                    .iter()
                    .map(|(index, size)| crate::attachment::AttachmentChunk {
                        attachment_id: id.clone(),
                        company_id: u.company_id.clone(),
                        issue_id: u.issue_id.clone(),
                        index: *index,
                        size: *size,
                        uploader: u.uploader.clone(),
                        at: u.last_at,
                    })
            })
            .collect(),
        work_products: state.work_products.products.values().cloned().collect(),
        pending_interactions: state.interactions.pending.values().cloned().collect(),
        activity_seq: state.activity_seq,
        activity_head: Some(state.activity_head.clone()),
    })
}

/// A world where agent a1 has a live run `r1` woken by an assignment of issue `i1`.
fn with_live_run() -> World {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    w
}

#[test]
fn an_entry_of_a_live_run_is_stored_with_its_run_wake_and_issue() {
    let mut w = with_live_run();
    let me = agent_actor("a1", "c1", Some("r1"));
    let out = append(&mut w, me, "e1", "a1").expect("appended");
    let Outcome::MemoryEntry(e) = out else {
        panic!("unexpected {out:?}")
    };
    assert_eq!(e.run_id, "r1");
    assert_eq!(e.wake_reason, Some(WakeReason::IssueAssigned));
    assert_eq!(e.issue_id.as_deref(), Some("i1"));
    assert_eq!(
        e.errors[0],
        "error: E0308 mismatched types\n  --> src/x.rs:1:1"
    );
    assert_eq!(w.state.memory.entry_count("a1"), 1);
}

#[test]
fn an_entry_of_a_run_that_ended_is_refused_stale_run_and_stores_nothing() {
    let mut w = with_live_run();
    finish(&mut w, "r1");
    let before = (w.state.activity_seq, w.state.hash());
    let err = append(&mut w, agent_actor("a1", "c1", Some("r1")), "late", "a1").unwrap_err();
    assert!(matches!(err, DomainError::StaleRun { .. }), "{err:?}");
    assert_eq!(err.code(), "stale_run");
    let live = w.run(
        agent_actor("a1", "c1", Some("r1")),
        Command::SetMemoryLive {
            agent_id: "a1".into(),
            current_task: Some(CurrentTask {
                doing: "late".into(),
                ..Default::default()
            }),
            coordinates: None,
        },
    );
    assert!(
        matches!(live, Err(DomainError::StaleRun { .. })),
        "{live:?}"
    );
    let doc = put_doc(
        &mut w,
        agent_actor("a1", "c1", Some("r1")),
        Some("a1"),
        "MEMORY.md",
        "late",
        0,
    );
    assert!(matches!(doc, Err(DomainError::StaleRun { .. })), "{doc:?}");
    assert_eq!((w.state.activity_seq, w.state.hash()), before);
    assert!(w.state.memory.entries.is_empty());
    assert!(w.state.memory.live.is_empty());
    assert!(w.state.memory.documents.is_empty());
}

#[test]
fn an_entry_needs_a_run_of_its_own_agent() {
    let mut w = with_live_run();
    let err = append(&mut w, agent_actor("a1", "c1", None), "e1", "a1").unwrap_err();
    assert!(
        matches!(&err, DomainError::Invalid { field, .. } if field == "runId"),
        "{err:?}"
    );
    // Another agent of the company: forbidden; of another company: not found.
    let err = append(&mut w, agent_actor("a2", "c1", Some("r1")), "e2", "a1").unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err:?}");
    let err = append(&mut w, agent_actor("b1", "c2", Some("r1")), "e3", "a1").unwrap_err();
    assert_eq!(err.code(), "not_found", "{err:?}");
    // a1's run does not write a2's log, even for an administrator.
    let mut as_admin = admin();
    as_admin.run_id = Some("r1".into());
    let err = append(&mut w, as_admin, "e4", "a2").unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err:?}");
    assert!(w.state.memory.entries.is_empty());
}

#[test]
fn entries_list_newest_first_and_the_oldest_are_dropped_at_the_cap() {
    let mut w = with_live_run();
    // Digests computed now are then kept up to date row by row, drops included.
    let _ = w.state.hash();
    let me = agent_actor("a1", "c1", Some("r1"));
    for i in 0..MAX_MEMORY_ENTRIES_PER_AGENT + 2 {
        append(&mut w, me.clone(), &format!("e{i}"), "a1").expect("appended");
    }
    assert_eq!(
        w.state.memory.entry_count("a1"),
        MAX_MEMORY_ENTRIES_PER_AGENT
    );
    assert!(!w.state.memory.entries.contains_key("e0"));
    assert!(!w.state.memory.entries.contains_key("e1"));
    let newest: Vec<&str> = w
        .state
        .memory
        .entries_of("a1")
        .rev()
        .take(2)
        .map(|e| e.id.as_str())
        .collect();
    let last = MAX_MEMORY_ENTRIES_PER_AGENT + 1;
    assert_eq!(newest, [format!("e{last}"), format!("e{}", last - 1)]);
    assert_eq!(w.state.memory.entry_count("a2"), 0);
    assert_eq!(w.state.hash(), reloaded(&w.state).hash());
}

#[test]
fn an_entry_or_document_over_its_cap_is_refused_too_large() {
    let mut w = with_live_run();
    let big = NewMemoryEntry {
        what: "x".repeat(MAX_MEMORY_ENTRY_BYTES + 1),
        ..Default::default()
    };
    let err = w
        .run(
            agent_actor("a1", "c1", Some("r1")),
            Command::AppendMemoryEntry {
                id: "big".into(),
                agent_id: "a1".into(),
                entry: big,
                shared: false,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "too_large");
    assert!(err.to_string().contains("8192 bytes"), "{err}");
    let content = "y".repeat(MAX_MEMORY_DOCUMENT_BYTES + 1);
    let err = put_doc(&mut w, admin(), Some("a1"), "MEMORY.md", &content, 0).unwrap_err();
    assert_eq!(err.code(), "too_large");
    let at_cap = "y".repeat(MAX_MEMORY_DOCUMENT_BYTES);
    put_doc(&mut w, admin(), Some("a1"), "MEMORY.md", &at_cap, 0).expect("at the cap");
}

#[test]
fn a_document_saves_versions_and_refuses_a_lost_update() {
    let mut w = with_live_run();
    let v1 = put_doc(&mut w, admin(), Some("a1"), "MEMORY.md", "one", 0).expect("v1");
    assert_eq!(version_of(v1), 1);
    // A second writer that read version 0 too would overwrite "one".
    let err = put_doc(&mut w, admin(), Some("a1"), "MEMORY.md", "other", 0).unwrap_err();
    assert_eq!(err.code(), "conflict");
    assert!(
        err.to_string().contains("version 1, not 0") && err.to_string().contains("lose"),
        "{err}"
    );
    let me = agent_actor("a1", "c1", Some("r1"));
    let v2 = put_doc(&mut w, me.clone(), Some("a1"), "MEMORY.md", "two", 1).expect("v2");
    assert_eq!(version_of(v2), 2);
    // The same content again: no new version, nothing recorded.
    let seq = w.state.activity_seq;
    let same = put_doc(&mut w, me, Some("a1"), "MEMORY.md", "two", 2).expect("same");
    assert_eq!(version_of(same), 2);
    assert_eq!(w.state.activity_seq, seq);
    let current = w
        .state
        .memory
        .document("c1", Some("a1"), "MEMORY.md")
        .unwrap();
    assert_eq!((current.version, current.content.as_str()), (2, "two"));
    assert_eq!(current.updated_by_type, "agent");
    assert_eq!(current.run_id.as_deref(), Some("r1"));
    let history: Vec<u64> = w
        .state
        .memory
        .versions("c1", Some("a1"), "MEMORY.md")
        .map(|d| d.version)
        .collect();
    assert_eq!(history, [1, 2]);
    // STATE.md is its own document; other names are refused.
    assert_eq!(
        version_of(put_doc(&mut w, admin(), Some("a1"), "STATE.md", "s", 0).unwrap()),
        1
    );
    let err = put_doc(&mut w, admin(), Some("a1"), "NOTES.md", "n", 0).unwrap_err();
    assert_eq!(err.code(), "bad_request");
    assert!(err.to_string().contains("MEMORY.md, STATE.md"), "{err}");
}

#[test]
fn a_document_keeps_its_last_versions() {
    let mut w = World::new();
    let _ = w.state.hash();
    for v in 0..MAX_MEMORY_DOCUMENT_VERSIONS as u64 + 3 {
        put_doc(
            &mut w,
            admin(),
            Some("a1"),
            "MEMORY.md",
            &format!("v{}", v + 1),
            v,
        )
        .expect("saved");
    }
    let versions: Vec<u64> = w
        .state
        .memory
        .versions("c1", Some("a1"), "MEMORY.md")
        .map(|d| d.version)
        .collect();
    assert_eq!(versions.len(), MAX_MEMORY_DOCUMENT_VERSIONS);
    assert_eq!(versions[0], 4);
    assert_eq!(
        *versions.last().unwrap(),
        MAX_MEMORY_DOCUMENT_VERSIONS as u64 + 3
    );
    assert_eq!(w.state.hash(), reloaded(&w.state).hash());
}

#[test]
fn documents_are_scoped_to_their_agent_and_company() {
    let mut w = World::new();
    // An agent writes its own documents without a run too; not another agent's.
    put_doc(
        &mut w,
        agent_actor("a1", "c1", None),
        Some("a1"),
        "MEMORY.md",
        "mine",
        0,
    )
    .expect("own");
    let err = put_doc(
        &mut w,
        agent_actor("a2", "c1", None),
        Some("a1"),
        "MEMORY.md",
        "x",
        1,
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    let err = put_doc(
        &mut w,
        agent_actor("b1", "c2", None),
        Some("a1"),
        "MEMORY.md",
        "x",
        1,
    )
    .unwrap_err();
    assert_eq!(err.code(), "not_found");
    // The company's shared scope: administrators write it, agents do not.
    let err = put_doc(
        &mut w,
        agent_actor("a1", "c1", None),
        None,
        "STATE.md",
        "x",
        0,
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden");
    put_doc(&mut w, admin(), None, "STATE.md", "shared", 0).expect("shared");
    assert_eq!(
        w.state
            .memory
            .document("c1", None, "STATE.md")
            .unwrap()
            .content,
        "shared"
    );
    assert!(w
        .state
        .memory
        .document("c1", Some("a1"), "STATE.md")
        .is_none());
    // An agent id of another company under this company's path is not found.
    let err = w
        .run(
            admin(),
            Command::PutMemoryDocument {
                company_id: "c1".into(),
                agent_id: Some("b1".into()),
                name: "MEMORY.md".into(),
                content: "x".into(),
                expected_version: 0,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[test]
fn live_state_keeps_each_part_with_its_own_time() {
    let mut w = with_live_run();
    let me = agent_actor("a1", "c1", Some("r1"));
    let task = CurrentTask {
        doing: "fixing the build".into(),
        last: vec!["read the log".into()],
        next: vec!["run tests".into(), "push".into()],
    };
    w.run_at(
        50_000,
        me.clone(),
        Command::SetMemoryLive {
            agent_id: "a1".into(),
            current_task: Some(task.clone()),
            coordinates: None,
        },
    )
    .expect("task");
    w.run_at(
        60_000,
        me.clone(),
        Command::SetMemoryLive {
            agent_id: "a1".into(),
            current_task: None,
            coordinates: Some(serde_json::json!({ "branch": "fix-build" })),
        },
    )
    .expect("coordinates");
    let live = &w.state.memory.live["a1"];
    assert_eq!(live.parts.current_task.as_ref(), Some(&task));
    assert_eq!(
        live.parts.current_task_updated_at.map(|t| t.0),
        Some(50_000)
    );
    assert_eq!(live.parts.coordinates_updated_at.map(|t| t.0), Some(60_000));
    let err = w
        .run(
            me.clone(),
            Command::SetMemoryLive {
                agent_id: "a1".into(),
                current_task: None,
                coordinates: None,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "bad_request");
    let too_many = CurrentTask {
        doing: "x".into(),
        next: vec!["1".into(), "2".into(), "3".into(), "4".into()],
        ..Default::default()
    };
    let err = w
        .run(
            me,
            Command::SetMemoryLive {
                agent_id: "a1".into(),
                current_task: Some(too_many),
                coordinates: None,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "too_large");
}

#[test]
fn memory_outlives_its_agent_and_reloads_with_the_same_hash() {
    let mut w = with_live_run();
    let me = agent_actor("a1", "c1", Some("r1"));
    append(&mut w, me.clone(), "e1", "a1").expect("entry");
    put_doc(&mut w, me, Some("a1"), "MEMORY.md", "remember", 0).expect("doc");
    w.ok(
        admin(),
        Command::TerminateAgent {
            agent_id: "a1".into(),
        },
    );
    assert_eq!(w.state.memory.entry_count("a1"), 1);
    // An administrator still curates a terminated agent's documents.
    put_doc(&mut w, admin(), Some("a1"), "MEMORY.md", "kept", 1).expect("admin edit");
    let reloaded = reloaded(&w.state);
    assert_eq!(reloaded.hash(), w.state.hash());
    assert_eq!(reloaded.memory.entry_count("a1"), 1);
    assert_eq!(
        reloaded
            .memory
            .document("c1", Some("a1"), "MEMORY.md")
            .unwrap()
            .content,
        "kept"
    );
}

#[test]
fn old_log_entries_without_memory_fields_still_read() {
    // A command of this release read back from JSON, and an agent row written before memory
    // existed: neither needs a field it did not have.
    let json = r#"{"type":"put_memory_document","company_id":"c1","name":"MEMORY.md","content":"x","expected_version":0}"#;
    let back: Command = serde_json::from_str(json).expect("reads");
    assert!(matches!(
        back,
        Command::PutMemoryDocument { agent_id: None, .. }
    ));
    let json = r#"{"type":"set_memory_live","agent_id":"a1"}"#;
    assert!(serde_json::from_str::<Command>(json).is_ok());
}

const DAY: i64 = 24 * 3_600_000;

/// Appends entry `id` for a1's run r1 at `at_ms`.
fn append_at(w: &mut World, at_ms: i64, id: &str, what: &str) -> MemoryEntry {
    let mut e = entry(what);
    e.errors = vec![format!("error of {id}")];
    match w.run_at(
        at_ms,
        agent_actor("a1", "c1", Some("r1")),
        Command::AppendMemoryEntry {
            id: id.into(),
            agent_id: "a1".into(),
            entry: e,
            shared: false,
        },
    ) {
        Ok(Outcome::MemoryEntry(e)) => e,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn whole_days_older_than_a_week_are_compacted_into_one_summary_each_and_stay_searchable_text() {
    let mut w = world();
    w.start_run("r1", "a1");
    let day0 = 20_000 * DAY;
    append_at(&mut w, day0 + 1_000, "d0-a", "fixed the parser");
    append_at(&mut w, day0 + 2_000, "d0-b", "wrote the release notes");
    append_at(&mut w, day0 + DAY + 1_000, "d1-a", "alone on its day");
    append_at(&mut w, day0 + 2 * DAY, "d2-a", "recent enough");
    append_at(&mut w, day0 + 2 * DAY + 5, "d2-b", "recent too");
    // Seven whole days after day 0 ends: day 0 is compacted, day 1 (one entry) and day 2 (not
    // yet old enough) are not.
    append_at(&mut w, day0 + 8 * DAY, "now", "today");
    let ids: Vec<String> = w
        .state
        .memory
        .entries_of("a1")
        .map(|e| e.id.clone())
        .collect();
    assert!(
        !ids.contains(&"d0-a".to_string()) && !ids.contains(&"d0-b".to_string()),
        "{ids:?}"
    );
    for kept in ["d1-a", "d2-a", "d2-b", "now"] {
        assert!(ids.contains(&kept.to_string()), "{kept} in {ids:?}");
    }
    let summary = w
        .state
        .memory
        .entries_of("a1")
        .find(|e| e.summary_of > 0)
        .cloned()
        .expect("a summary");
    assert_eq!(summary.summary_of, 2);
    assert_eq!(
        ids.first(),
        Some(&summary.id),
        "it keeps day 0's place in the log"
    );
    assert!(
        summary.what.contains("2024-10-04") && summary.what.contains("2 runs"),
        "{}",
        summary.what
    );
    assert!(
        summary.did.contains("- fixed the parser")
            && summary.did.contains("- wrote the release notes")
    );
    assert_eq!(summary.errors, ["error of d0-a", "error of d0-b"]);

    // A late straggler of an old day (an entry whose day is past, as a backdated clock would
    // give) joins that day's summary rather than making a second one; the count adds up.
    append_at(&mut w, day0 + 3_000, "d0-c", "late");
    append_at(&mut w, day0 + 9 * DAY, "later", "tomorrow");
    let summaries: Vec<MemoryEntry> = w
        .state
        .memory
        .entries_of("a1")
        .filter(|e| e.summary_of > 0)
        .cloned()
        .collect();
    let day0_summary = summaries
        .iter()
        .find(|e| e.id == summary.id)
        .expect("same id");
    assert_eq!(day0_summary.summary_of, 3, "{summaries:?}");
    assert!(day0_summary.did.contains("- late"));
    // Replay from the rows agrees with the incremental digest.
    let mut fresh = w.state.clone();
    fresh.row_digests = crate::state_hash::RowDigests::default();
    assert_eq!(w.state.hash(), fresh.hash());
}
