//! Issue labels: names unique per company, colours checked, `labelIds` of the issue's own
//! company only, and a deleted label taken off every issue that carried it.

use serde_json::json;

use super::test_world::*;
use crate::command::*;
use crate::label::*;

fn create(
    w: &mut World,
    actor: Actor,
    id: &str,
    company: &str,
    name: &str,
) -> Result<Label, crate::DomainError> {
    match w.run(
        actor,
        Command::CreateLabel {
            id: id.into(),
            company_id: company.into(),
            name: name.into(),
            color: "#4f46e5".into(),
        },
    )? {
        Outcome::Label(l) => Ok(l),
        other => panic!("unexpected {other:?}"),
    }
}

fn with_labels(ids: serde_json::Value) -> IssuePatch {
    IssuePatch {
        paperclip: Some([(LABEL_IDS.to_string(), ids)].into_iter().collect()),
        ..Default::default()
    }
}

/// Sets issue `issue`'s `labelIds` to `ids`, as an administrator.
fn relabel(
    w: &mut World,
    issue: &str,
    ids: serde_json::Value,
) -> Result<Outcome, crate::DomainError> {
    w.run(
        admin(),
        Command::UpdateIssue {
            issue_id: issue.into(),
            patch: with_labels(ids),
            comment: None,
        },
    )
}

fn labels_of(w: &World, issue: &str) -> Vec<String> {
    let i = w.state.issues.get(issue).expect("issue").into_owned();
    label_ids(&i.paperclip).map(str::to_string).collect()
}

#[test]
fn a_label_name_is_trimmed_unique_in_its_company_and_its_colour_is_hex() {
    let mut w = world();
    let l = create(&mut w, agent_actor("a1", "c1", None), "l1", "c1", "  bug  ")
        .expect("agent creates");
    assert_eq!(l.name, "bug");
    let err = create(&mut w, admin(), "l2", "c1", "bug").unwrap_err();
    assert_eq!(err.code(), "conflict", "{err}");
    // Another company may use the name.
    create(&mut w, admin(), "l3", "c2", "bug").expect("another company");
    for (name, color) in [
        ("", "#000000"),
        (&"x".repeat(49)[..], "#000000"),
        ("ok", "red"),
        ("ok", "#12345g"),
        ("ok", "#1234567"),
    ] {
        let before = w.fingerprint();
        let err = w
            .run(
                admin(),
                Command::CreateLabel {
                    id: "l9".into(),
                    company_id: "c1".into(),
                    name: name.into(),
                    color: color.into(),
                },
            )
            .unwrap_err();
        assert_eq!(err.code(), "bad_request", "{name:?} {color:?}: {err}");
        assert_eq!(w.fingerprint(), before);
        assert!(!w.state.labels.contains_key("l9"));
    }
    // An agent of another company cannot write into this one.
    let err = create(&mut w, agent_actor("b1", "c2", None), "l4", "c1", "x").unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[test]
fn an_issue_carries_only_labels_of_its_own_company_each_once() {
    let mut w = world();
    create(&mut w, admin(), "l1", "c1", "bug").expect("label");
    create(&mut w, admin(), "l2", "c1", "ui").expect("label");
    create(&mut w, admin(), "x1", "c2", "theirs").expect("label");
    let i = w.issue("i1", "c1", with_labels(json!(["l2", "l1", "l2"])));
    assert_eq!(i.paperclip.get(LABEL_IDS), Some(&json!(["l2", "l1"])));
    for bad in [json!(["x1"]), json!(["nope"]), json!(["l1", "x1"])] {
        let before = w.fingerprint();
        let err = relabel(&mut w, "i1", bad.clone()).unwrap_err();
        assert_eq!(
            err.class(),
            crate::error::ErrorClass::Unprocessable,
            "{bad}: {err}"
        );
        assert_eq!(
            err.to_string(),
            "One or more labels are invalid for this company"
        );
        assert_eq!(w.fingerprint(), before);
    }
    for bad in [json!("l1"), json!([1]), json!({"l1": true})] {
        let err = relabel(&mut w, "i1", bad.clone()).unwrap_err();
        assert_eq!(err.code(), "bad_request", "{bad}: {err}");
    }
    let many: Vec<String> = (0..=MAX_LABELS_PER_ISSUE)
        .map(|n| format!("l{n}"))
        .collect();
    let err = relabel(&mut w, "i1", json!(many)).unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
    assert_eq!(labels_of(&w, "i1"), ["l2", "l1"]);
    assert_eq!(
        w.state.issue_ids_with_label("l1").collect::<Vec<_>>(),
        ["i1"]
    );
}

#[test]
fn deleting_a_label_takes_it_off_every_issue_and_out_of_the_index() {
    let mut w = world();
    create(&mut w, admin(), "l1", "c1", "bug").expect("label");
    create(&mut w, admin(), "l2", "c1", "ui").expect("label");
    w.issue("i1", "c1", with_labels(json!(["l1", "l2"])));
    w.issue("i2", "c1", with_labels(json!(["l1"])));
    w.issue("i3", "c1", with_labels(json!(["l2"])));
    // An update that drops a label leaves the index.
    relabel(&mut w, "i3", json!([])).expect("relabelled");
    assert_eq!(
        w.state.issue_ids_with_label("l2").collect::<Vec<_>>(),
        ["i1"]
    );
    let err = w
        .run(
            agent_actor("b1", "c2", None),
            Command::DeleteLabel {
                label_id: "l1".into(),
            },
        )
        .unwrap_err();
    assert_eq!(
        err.code(),
        "not_found",
        "another company's label is unknown"
    );
    match w.ok(
        agent_actor("a1", "c1", None),
        Command::DeleteLabel {
            label_id: "l1".into(),
        },
    ) {
        Outcome::Label(l) => assert_eq!(l.name, "bug"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(!w.state.labels.contains_key("l1"));
    assert_eq!(labels_of(&w, "i1"), ["l2"]);
    assert!(labels_of(&w, "i2").is_empty());
    assert_eq!(w.state.issue_ids_with_label("l1").count(), 0);
    // The issue deleted leaves the index too.
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert_eq!(w.state.issue_ids_with_label("l2").count(), 0);
    let err = w
        .run(
            admin(),
            Command::DeleteLabel {
                label_id: "l1".into(),
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[test]
fn a_company_keeps_at_most_its_labels() {
    let mut w = world();
    for n in 0..MAX_LABELS_PER_COMPANY {
        create(
            &mut w,
            admin(),
            &format!("l{n}"),
            "c1",
            &format!("label {n}"),
        )
        .expect("under the bound");
    }
    let err = create(&mut w, admin(), "one-more", "c1", "one more").unwrap_err();
    assert_eq!(err.code(), "quota_exceeded", "{err}");
    create(&mut w, admin(), "theirs", "c2", "one more").expect("another company's own bound");
}

/// Rows written before labels were checked hold `labelIds` as sent: anything. They load without
/// a panic, index the strings of an array (a string that names no label included), and a
/// label's deletion takes it off those of its company, leaving any other value as it was.
#[test]
fn issue_rows_from_before_labels_were_checked_load_and_lose_a_deleted_label() {
    let mut w = world();
    create(&mut w, admin(), "l1", "c1", "bug").expect("label");
    create(&mut w, admin(), "x1", "c2", "theirs").expect("label");
    let mut rows: Vec<crate::Issue> = Vec::new();
    for (id, ids) in [
        ("old1", json!("l1")),
        ("old2", json!([1, "l1", null])),
        ("old3", json!(["x1", "l1", "gone"])),
        ("old4", json!({ "l1": true })),
    ] {
        let mut i = w.todo_issue(id);
        i.paperclip.insert(LABEL_IDS.into(), ids);
        rows.push(i);
    }
    let mut state = w.state.clone();
    for i in &rows {
        state.load_issue(i.clone());
    }
    let carriers = |s: &crate::State, l: &str| {
        s.issue_ids_with_label(l)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(carriers(&state, "l1"), ["old2", "old3"]);
    assert_eq!(
        carriers(&state, "x1"),
        ["old3"],
        "indexed as written; shown only in its company"
    );
    w.state = state;
    w.ok(
        admin(),
        Command::DeleteLabel {
            label_id: "l1".into(),
        },
    );
    assert_eq!(labels_of(&w, "old3"), ["x1", "gone"]);
    assert!(labels_of(&w, "old2").is_empty());
    assert_eq!(
        w.state
            .issues
            .get("old1")
            .map(|i| i.paperclip[LABEL_IDS].clone()),
        Some(json!("l1")),
        "a value that names no label list is left as it was"
    );
    assert_eq!(carriers(&w.state, "l1").len(), 0);
}
