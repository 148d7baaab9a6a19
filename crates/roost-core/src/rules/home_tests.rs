//! The agent's home: fenced uploads and saves, lost updates, the cap, chunk sharing and
//! collection, and a reload that rebuilds the derived counts.

use std::collections::BTreeMap;

use base64::Engine;

use super::memory_tests::reloaded;
use super::test_world::*;
use crate::command::*;
use crate::error::DomainError;
use crate::home::*;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn upload(w: &mut World, run: &str, parts: &[&[u8]]) -> Result<Vec<String>, DomainError> {
    let out = w.run(
        agent_actor("a1", "c1", Some(run)),
        Command::PutHomeChunks {
            agent_id: "a1".into(),
            chunks: parts.iter().map(|p| b64(p)).collect(),
        },
    )?;
    match out {
        Outcome::HomeChunks(h) => Ok(h),
        other => panic!("unexpected {other:?}"),
    }
}

/// A file of one chunk holding `content` (which must be uploaded).
fn file(content: &[u8]) -> HomeFile {
    HomeFile {
        size: content.len() as u64,
        chunks: vec![chunk_hash(content)],
        executable: false,
    }
}

fn save(
    w: &mut World,
    run: &str,
    base: u64,
    files: &[(&str, HomeFile)],
    deleted: &[&str],
) -> Result<AgentHome, DomainError> {
    let out = w.run(
        agent_actor("a1", "c1", Some(run)),
        Command::SaveAgentHome {
            agent_id: "a1".into(),
            base_version: base,
            files: files
                .iter()
                .map(|(p, f)| (p.to_string(), f.clone()))
                .collect::<BTreeMap<_, _>>(),
            deleted: deleted.iter().map(|p| p.to_string()).collect(),
        },
    )?;
    match out {
        Outcome::AgentHome(h) => Ok(h),
        other => panic!("unexpected {other:?}"),
    }
}

fn with_live_run() -> World {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    claim(&mut w, "a1", "r1").expect("claimed");
    w
}

#[test]
fn a_saved_home_lists_its_files_and_its_chunks_are_stored_once() {
    let mut w = with_live_run();
    let hashes = upload(&mut w, "r1", &[b"# Projects\n", b"# Projects\n"]).expect("uploaded");
    assert_eq!(hashes[0], hashes[1]);
    assert_eq!(
        w.state.home.chunks.len(),
        1,
        "the same bytes are stored once"
    );
    let home = save(
        &mut w,
        "r1",
        0,
        &[
            ("life/projects/README.md", file(b"# Projects\n")),
            ("life/areas/README.md", file(b"# Projects\n")),
        ],
        &[],
    )
    .expect("saved");
    assert_eq!(home.version, 1);
    assert_eq!(home.bytes, 22);
    assert_eq!(home.run_id.as_deref(), Some("r1"));
    let key = chunk_key("c1", &hashes[0]);
    assert_eq!(w.state.home.refs(&key), 2);
    assert!(w.state.home.pending_of("a1").next().is_none());
    assert!(w.state.home.readable_by("c1", "a1", &hashes[0]));
    assert!(!w.state.home.readable_by("c2", "a1", &hashes[0]));
}

#[test]
fn a_save_that_names_a_chunk_not_uploaded_or_with_a_wrong_size_changes_nothing() {
    let mut w = with_live_run();
    let before = w.state.hash();
    let err = save(&mut w, "r1", 0, &[("notes.md", file(b"never sent"))], &[]).unwrap_err();
    assert!(err.to_string().contains("upload it first"), "{err}");
    upload(&mut w, "r1", &[b"twelve bytes"]).expect("uploaded");
    let mut wrong = file(b"twelve bytes");
    wrong.size = 13;
    let err = save(&mut w, "r1", 0, &[("notes.md", wrong)], &[]).unwrap_err();
    assert!(err.to_string().contains("13 bytes"), "{err}");
    assert!(w.state.home.homes.is_empty());
    assert_ne!(w.state.hash(), before, "the upload itself is stored");
}

#[test]
fn a_save_of_a_run_that_ended_is_refused_stale_run() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"x"]).expect("uploaded");
    finish(&mut w, "r1");
    let err = save(&mut w, "r1", 0, &[("x.md", file(b"x"))], &[]).unwrap_err();
    assert_eq!(err.code(), "stale_run");
    let err = upload(&mut w, "r1", &[b"y"]).unwrap_err();
    assert_eq!(err.code(), "stale_run");
    assert!(w.state.home.homes.is_empty());
}

#[test]
fn a_save_against_an_older_version_is_a_conflict() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"a", b"b"]).expect("uploaded");
    save(&mut w, "r1", 0, &[("a.md", file(b"a"))], &[]).expect("first save");
    let err = save(&mut w, "r1", 0, &[("b.md", file(b"b"))], &[]).unwrap_err();
    assert_eq!(err.code(), "conflict");
    assert!(err.to_string().contains("version 1"), "{err}");
    // The first save dropped the upload it did not use: a save ends a run's uploads.
    upload(&mut w, "r1", &[b"b"]).expect("uploaded again");
    let home = save(&mut w, "r1", 1, &[("b.md", file(b"b"))], &["a.md"]).expect("second");
    assert_eq!(home.files.keys().collect::<Vec<_>>(), ["b.md"]);
}

#[test]
fn a_home_over_its_cap_is_refused_and_the_previous_version_stays() {
    let mut w = with_live_run();
    w.ok(
        admin(),
        Command::UpdateAgent {
            agent_id: "a1".into(),
            patch: AgentPatch {
                home_max_bytes: Some(10),
                ..Default::default()
            },
        },
    );
    upload(&mut w, "r1", &[b"12345"]).expect("uploaded");
    let kept = save(&mut w, "r1", 0, &[("a.md", file(b"12345"))], &[]).expect("fits");
    upload(&mut w, "r1", &[b"678901"]).expect("uploaded");
    let err = save(&mut w, "r1", 1, &[("b.md", file(b"678901"))], &[]).unwrap_err();
    assert_eq!(err.code(), "too_large");
    assert!(
        err.to_string().contains("11 bytes after this save"),
        "{err}"
    );
    assert!(err.to_string().contains("homeMaxBytes"), "{err}");
    assert_eq!(w.state.home.homes.get("a1"), Some(&kept));
    let err = upload(&mut w, "r1", &[b"this alone is past the cap"]).unwrap_err();
    assert_eq!(err.code(), "too_large");
}

#[test]
fn chunks_no_home_names_are_dropped_and_a_dead_runs_uploads_at_the_next_upload() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"old", b"unused"]).expect("uploaded");
    save(&mut w, "r1", 0, &[("f.md", file(b"old"))], &[]).expect("saved");
    assert_eq!(
        w.state.home.chunks.len(),
        1,
        "the upload the save did not use is gone"
    );
    upload(&mut w, "r1", &[b"new"]).expect("uploaded");
    save(&mut w, "r1", 1, &[("f.md", file(b"new"))], &[]).expect("saved");
    let keys: Vec<_> = w.state.home.chunks.keys().cloned().collect();
    assert_eq!(keys, [chunk_key("c1", &chunk_hash(b"new"))]);
    // A run that uploads and dies without saving leaves chunks the next run's upload drops.
    upload(&mut w, "r1", &[b"orphan"]).expect("uploaded");
    finish(&mut w, "r1");
    assign_and_claim(&mut w, "r2");
    upload(&mut w, "r2", &[b"fresh"]).expect("uploaded");
    assert!(!w
        .state
        .home
        .chunks
        .contains_key(&chunk_key("c1", &chunk_hash(b"orphan"))));
    // An orphan a later run uploads again is that run's, and its save keeps it.
    finish(&mut w, "r2");
    assign_and_claim(&mut w, "r3");
    upload(&mut w, "r3", &[b"fresh"]).expect("uploaded again");
    let home = save(&mut w, "r3", 2, &[("g.md", file(b"fresh"))], &[]).expect("saved");
    assert_eq!(home.files.len(), 2);
    assert_eq!(w.state.home.chunks.len(), 2);
}

fn assign_and_claim(w: &mut World, run: &str) {
    let issue = format!("i-{run}");
    assigned_issue(w, &issue, "a1");
    claim(w, "a1", run).expect("claimed");
}

#[test]
fn paths_that_escape_the_home_or_name_memory_files_are_refused() {
    for path in [
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a//b",
        "./a",
        "MEMORY.md",
        "memory/recent.md",
        "memory/conflicts/r1-MEMORY.md",
        "",
    ] {
        assert!(path_problem(path).is_some(), "{path:?} accepted");
    }
    for path in [
        "memory/2026-11-25.md",
        "life/projects/a.md",
        "MEMORY.md.bak",
    ] {
        assert_eq!(path_problem(path), None, "{path:?}");
    }
    let bad = Command::SaveAgentHome {
        agent_id: "a1".into(),
        base_version: 0,
        files: BTreeMap::from([("../escape".to_string(), file(b"x"))]),
        deleted: vec![],
    };
    assert_eq!(
        crate::limits::check(&bad).unwrap_err().code(),
        "bad_request"
    );
}

#[test]
fn a_file_cannot_also_be_a_directory() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"x"]).expect("uploaded");
    let err = save(
        &mut w,
        "r1",
        0,
        &[("a", file(b"x")), ("a/b.md", file(b"x"))],
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("a is a file"), "{err}");
}

#[test]
fn a_reloaded_state_has_the_same_homes_counts_and_hash() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"a", b"b", b"pending"]).expect("uploaded");
    save(
        &mut w,
        "r1",
        0,
        &[("a.md", file(b"a")), ("b.md", file(b"b"))],
        &[],
    )
    .expect("saved");
    upload(&mut w, "r1", &[b"pending"]).expect("uploaded");
    let back = reloaded(&w.state);
    assert_eq!(back.hash(), w.state.hash());
    assert_eq!(back.home.homes, w.state.home.homes);
    for key in w.state.home.chunks.keys() {
        assert_eq!(back.home.refs(key), w.state.home.refs(key), "{key}");
    }
    assert_eq!(
        back.home.pending_of("a1").count(),
        w.state.home.pending_of("a1").count()
    );
}

#[test]
fn another_agent_cannot_write_or_read_a_home() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"secret"]).expect("uploaded");
    let err = w
        .run(
            agent_actor("a2", "c1", None),
            Command::PutHomeChunks {
                agent_id: "a1".into(),
                chunks: vec![b64(b"x")],
            },
        )
        .unwrap_err();
    assert!(matches!(
        err,
        DomainError::Forbidden { .. } | DomainError::NotFound { .. }
    ));
    assert!(!w.state.home.readable_by("c1", "a2", &chunk_hash(b"secret")));
}

/// Regression: `memory/company` became memory's (the company's documents, written before each
/// run). A home saved before with a file there could never be saved again: every save deletes
/// that file (the worker no longer syncs it), and deletes of memory's paths were refused.
#[test]
fn a_home_holding_a_path_memory_took_over_can_still_be_saved_without_it() {
    let mut w = with_live_run();
    upload(&mut w, "r1", &[b"notes"]).expect("uploaded");
    save(&mut w, "r1", 0, &[("notes.md", file(b"notes"))], &[]).expect("saved");
    // As a home saved before the change holds it.
    let home = w.state.home.homes.get_mut("a1").expect("home");
    let moved = home.files.remove("notes.md").expect("file");
    home.files.insert("memory/company/notes.md".into(), moved);
    upload(&mut w, "r1", &[b"other"]).expect("uploaded");
    let err = save(
        &mut w,
        "r1",
        1,
        &[("memory/company/x.md", file(b"other"))],
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("memory"), "{err}");
    let home = save(
        &mut w,
        "r1",
        1,
        &[("other.md", file(b"other"))],
        &["memory/company/notes.md"],
    )
    .expect("the save that drops it");
    assert_eq!(home.files.keys().collect::<Vec<_>>(), ["other.md"]);
}
