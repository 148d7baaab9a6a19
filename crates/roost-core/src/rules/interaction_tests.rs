//! Issue-thread interactions: who may answer, what an answer wakes, and the cards that expire
//! when their issue closes, a person comments or their document moves on.

use serde_json::{json, Value};

use super::test_world::*;
use crate::command::*;
use crate::document::{DocumentOp, DocumentText, MARKDOWN};
use crate::entity::*;
use crate::interaction::*;
use crate::DomainError;

fn new_card(id: &str, kind: InteractionKind, payload: Value) -> NewInteraction {
    NewInteraction {
        id: id.into(),
        kind,
        payload,
        continuation_policy: None,
        resolver_policy: None,
        addressee_agent_id: None,
        idempotency_key: None,
        source_comment_id: None,
        title: None,
        summary: None,
    }
}

fn confirm(id: &str) -> NewInteraction {
    new_card(
        id,
        InteractionKind::RequestConfirmation,
        json!({ "version": 1, "prompt": "Ship the plan?" }),
    )
}

fn on(issue: &str, op: InteractionOp) -> Command {
    Command::IssueInteraction {
        issue_id: issue.into(),
        op,
    }
}

fn create(card: NewInteraction) -> InteractionOp {
    InteractionOp::Create { interaction: card }
}

fn accept(id: &str) -> InteractionOp {
    InteractionOp::Accept {
        interaction_id: id.into(),
        selected_option_ids: None,
    }
}

/// The cards `applied` wrote, each with its result's outcome.
fn outcomes(applied: crate::state::Applied) -> Vec<(String, Value)> {
    assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
    applied
        .changes
        .into_iter()
        .filter_map(|c| match c {
            crate::state::Change::Interaction(InteractionChange::Interaction(i)) => {
                let outcome = i
                    .result
                    .as_ref()
                    .map_or(Value::Null, |r| r["outcome"].clone());
                Some((i.id, outcome))
            }
            _ => None,
        })
        .collect()
}

fn card_of(outcome: Outcome) -> (Interaction, bool) {
    match outcome {
        Outcome::Interaction {
            interaction,
            created,
        } => (interaction, created),
        other => panic!("unexpected {other:?}"),
    }
}

/// A world whose issue `i1` is assigned to a1, with a1's run `r1` live (a1 checked it out)
/// and a2's run `r2` live.
fn working() -> World {
    let mut w = world();
    assigned_issue(&mut w, "i1", "a1");
    let r = claim(&mut w, "a1", "r1").expect("a1 claims");
    assert_eq!(r.id, "r1");
    w.checkout("i1", "a1", "r1").expect("a1 checks out");
    w.start_run("r2", "a2");
    w
}

fn a1() -> Actor {
    agent_actor("a1", "c1", Some("r1"))
}

fn a2() -> Actor {
    agent_actor("a2", "c1", Some("r2"))
}

fn issue_wakes(w: &World, agent: &str, reason: WakeReason) -> Vec<Wake> {
    wakes_of(w, agent)
        .into_iter()
        .filter(|x| x.reason == reason && x.status.is_pending())
        .cloned()
        .collect()
}

#[test]
fn an_accepted_confirmation_wakes_the_assignee_when_it_asks_to_and_leaves_memory() {
    let mut w = working();
    let mut card = confirm("x1");
    card.continuation_policy = Some(ContinuationPolicy::WakeAssigneeOnAccept);
    let (made, created) = card_of(w.ok(a1(), on("i1", create(card))));
    assert!(created);
    assert_eq!(made.status, InteractionStatus::Pending);
    assert_eq!(made.source_run_id.as_deref(), Some("r1"));
    assert_eq!(made.payload["supersedeOnUserComment"], json!(true));
    assert!(w.state.interactions.pending.contains_key("x1"));

    // The board accepts: answered, out of memory, and a1 is woken with the card named.
    let (done, _) = card_of(w.ok(admin(), on("i1", accept("x1"))));
    assert_eq!(done.status, InteractionStatus::Accepted);
    assert_eq!(
        done.result,
        Some(json!({ "version": 1, "outcome": "accepted" }))
    );
    assert_eq!(done.resolved_by_user_id.as_deref(), Some("admin"));
    assert!(!w.state.interactions.pending.contains_key("x1"));
    let wakes = issue_wakes(&w, "a1", WakeReason::IssueCommented);
    assert_eq!(wakes.len(), 1, "{wakes:?}");
    assert_eq!(wakes[0].payload["interactionId"], json!("x1"));
    assert_eq!(wakes[0].payload["interactionStatus"], json!("accepted"));

    // Answered once: a second answer is refused and changes nothing.
    let before = w.fingerprint();
    let err = w.run(admin(), on("i1", accept("x1"))).unwrap_err();
    assert!(matches!(&err, DomainError::Conflict { message } if message.contains("not pending")));
    assert_eq!(w.fingerprint(), before);
}

#[test]
fn a_rejection_wakes_nobody_under_wake_on_accept_and_needs_the_reason_it_asks_for() {
    let mut w = working();
    let mut card = new_card(
        "x1",
        InteractionKind::RequestConfirmation,
        json!({ "version": 1, "prompt": "Ship?", "rejectRequiresReason": true }),
    );
    card.continuation_policy = Some(ContinuationPolicy::WakeAssigneeOnAccept);
    w.ok(a1(), on("i1", create(card)));
    let reject = |reason: Option<&str>| InteractionOp::Reject {
        interaction_id: "x1".into(),
        reason: reason.map(str::to_string),
    };
    let err = w.run(admin(), on("i1", reject(Some("  ")))).unwrap_err();
    assert!(matches!(err, DomainError::Invalid { ref field, .. } if field == "reason"));
    let (done, _) = card_of(w.ok(admin(), on("i1", reject(Some("too risky")))));
    assert_eq!(done.status, InteractionStatus::Rejected);
    assert_eq!(
        done.result.as_ref().map(|r| r["reason"].clone()),
        Some(json!("too risky"))
    );
    assert!(issue_wakes(&w, "a1", WakeReason::IssueCommented).is_empty());
}

#[test]
fn who_may_answer_follows_the_cards_policy_and_addressee() {
    let mut w = working();
    let mut human = confirm("h1");
    human.resolver_policy = Some(ResolverPolicy::HumanOnly);
    let mut not_creator = confirm("n1");
    not_creator.resolver_policy = Some(ResolverPolicy::NotCreator);
    let mut addressed = confirm("d1");
    addressed.addressee_agent_id = Some("a2".into());
    for card in [human, not_creator, addressed] {
        w.ok(a1(), on("i1", create(card)));
    }
    // The addressee is woken about the card.
    let woken = issue_wakes(&w, "a2", WakeReason::InteractionPending);
    assert_eq!(woken.len(), 1);
    assert_eq!(woken[0].payload["interactionId"], json!("d1"));

    let before = w.fingerprint();
    for (actor, id) in [(a2(), "h1"), (a1(), "n1"), (a1(), "d1")] {
        let err = w.run(actor, on("i1", accept(id))).unwrap_err();
        assert!(
            matches!(err, DomainError::Forbidden { .. }),
            "{id}: {err:?}"
        );
    }
    assert_eq!(w.fingerprint(), before, "refusals change nothing");
    // An agent without a run may not answer at all; one of another company does not see it.
    let err = w
        .run(agent_actor("a2", "c1", None), on("i1", accept("n1")))
        .unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }));
    w.start_run("rb", "b1");
    let err = w
        .run(agent_actor("b1", "c2", Some("rb")), on("i1", accept("n1")))
        .unwrap_err();
    assert!(matches!(err, DomainError::NotFound { .. }));

    w.ok(admin(), on("i1", accept("h1")));
    w.ok(a2(), on("i1", accept("n1")));
    w.ok(a2(), on("i1", accept("d1")));
    assert_eq!(w.state.interactions.pending_of_issue("i1").count(), 0);
}

#[test]
fn checkbox_and_question_answers_are_checked_against_the_card() {
    let mut w = working();
    let boxes = new_card(
        "cb",
        InteractionKind::RequestCheckboxConfirmation,
        json!({ "version": 1, "prompt": "Which?", "minSelected": 1, "maxSelected": 2,
                "defaultSelectedOptionIds": ["a"],
                "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}] }),
    );
    let questions = new_card(
        "q",
        InteractionKind::AskUserQuestions,
        json!({ "version": 1, "questions": [
            {"id": "db", "prompt": "Which database?", "selectionMode": "single", "required": true,
             "options": [{"id": "pg", "label": "Postgres"}, {"id": "lite", "label": "SQLite"}]},
            {"id": "notes", "prompt": "Anything else?", "selectionMode": "multi",
             "options": [{"id": "other", "label": "Other", "freeText": true}]}
        ] }),
    );
    w.ok(a1(), on("i1", create(boxes)));
    w.ok(a1(), on("i1", create(questions)));

    let pick = |ids: &[&str]| InteractionOp::Accept {
        interaction_id: "cb".into(),
        selected_option_ids: Some(ids.iter().map(|s| s.to_string()).collect()),
    };
    for bad in [&["a", "b", "c"][..], &["z"][..], &[][..]] {
        assert!(w.run(a2(), on("i1", pick(bad))).is_err(), "{bad:?}");
    }
    let (done, _) = card_of(w.ok(a2(), on("i1", pick(&["b", "c"]))));
    assert_eq!(done.result.unwrap()["selectedOptionIds"], json!(["b", "c"]));

    let respond = |answers: Value| InteractionOp::Respond {
        interaction_id: "q".into(),
        answers: serde_json::from_value(answers).unwrap(),
        summary_markdown: None,
    };
    for bad in [
        json!([]),                                                            // required unanswered
        json!([{"questionId": "db", "optionIds": ["pg", "lite"]}]),           // single takes one
        json!([{"questionId": "db", "optionIds": ["mysql"]}]),                // no such option
        json!([{"questionId": "db", "optionIds": ["pg"], "otherText": "x"}]), // no free text
        json!([{"questionId": "zz", "optionIds": []}]),                       // no such question
    ] {
        assert!(
            w.run(admin(), on("i1", respond(bad.clone()))).is_err(),
            "{bad}"
        );
    }
    let answers = json!([{"questionId": "db", "optionIds": ["lite"]},
                         {"questionId": "notes", "optionIds": ["other"], "otherText": "keep it small"}]);
    let (done, _) = card_of(w.ok(admin(), on("i1", respond(answers.clone()))));
    assert_eq!(done.status, InteractionStatus::Answered);
    assert_eq!(
        done.result.unwrap()["answers"][1]["otherText"],
        json!("keep it small")
    );
    // ask_user_questions wakes the assignee by default.
    assert_eq!(issue_wakes(&w, "a1", WakeReason::IssueCommented).len(), 1);
}

#[test]
fn item_verdicts_arrive_in_parts_and_answer_the_card_when_every_item_has_one() {
    let mut w = working();
    let card = new_card(
        "v",
        InteractionKind::RequestItemVerdicts,
        json!({ "version": 1, "prompt": "Review", "items": [{"id": "1", "label": "one"}, {"id": "2", "label": "two"}] }),
    );
    w.ok(a1(), on("i1", create(card)));
    let verdicts = |v: Value| InteractionOp::Verdicts {
        interaction_id: "v".into(),
        verdicts: serde_json::from_value(v).unwrap(),
    };
    // A rejection needs a reason (the default requireReasonOn); defer is not enabled.
    assert!(w
        .run(
            admin(),
            on("i1", verdicts(json!([{"id": "1", "verdict": "reject"}])))
        )
        .is_err());
    assert!(w
        .run(
            admin(),
            on("i1", verdicts(json!([{"id": "1", "verdict": "defer"}])))
        )
        .is_err());
    let (part, _) = card_of(w.ok(
        admin(),
        on("i1", verdicts(json!([{"id": "1", "verdict": "approve"}]))),
    ));
    assert_eq!(part.status, InteractionStatus::Pending);
    assert_eq!(part.result.as_ref().unwrap()["complete"], json!(false));
    assert!(
        w.run(
            admin(),
            on("i1", verdicts(json!([{"id": "1", "verdict": "approve"}])))
        )
        .is_err(),
        "an item has one verdict"
    );
    let (done, _) = card_of(w.ok(
        a2(),
        on(
            "i1",
            verdicts(json!([{"id": "2", "verdict": "reject", "reason": "no"}])),
        ),
    ));
    assert_eq!(done.status, InteractionStatus::Answered);
    let items = done.result.unwrap()["items"].clone();
    assert_eq!(items[1]["resolvedByAgentId"], json!("a2"));
    assert_eq!(items[1]["resolvedByRunId"], json!("r2"));
}

#[test]
fn a_key_answers_the_first_card_and_the_issue_holds_twenty_pending() {
    let mut w = working();
    let mut card = confirm("k1");
    card.idempotency_key = Some("confirmation:i1:plan".into());
    w.ok(a1(), on("i1", create(card.clone())));
    let before = w.fingerprint();
    let mut again = card.clone();
    again.id = "k2".into();
    let (first, created) = card_of(w.ok(a1(), on("i1", create(again.clone()))));
    assert_eq!((first.id.as_str(), created), ("k1", false));
    assert_eq!(w.fingerprint(), before, "a repeat writes nothing");
    again.payload = json!({ "version": 1, "prompt": "Something else?" });
    let err = w.run(a1(), on("i1", create(again))).unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }));

    for n in 1..MAX_PENDING_PER_ISSUE {
        w.ok(a1(), on("i1", create(confirm(&format!("p{n}")))));
    }
    let err = w.run(a1(), on("i1", create(confirm("over")))).unwrap_err();
    assert!(matches!(err, DomainError::QuotaExceeded { .. }), "{err:?}");
}

#[test]
fn cards_expire_when_the_issue_closes_a_person_comments_or_their_revision_is_replaced() {
    let mut w = working();
    let put = |rev: &str, base: Option<&str>| Command::IssueDocument {
        issue_id: "i1".into(),
        key: "plan".into(),
        op: DocumentOp::Put {
            document_id: "d1".into(),
            revision_id: rev.into(),
            text: DocumentText {
                title: None,
                format: MARKDOWN.into(),
                body: rev.into(),
            },
            change_summary: None,
            base_revision_id: base.map(str::to_string),
        },
    };
    w.ok(a1(), put("rev1", None));
    let about = |id: &str, rev: &str| {
        new_card(
            id,
            InteractionKind::RequestConfirmation,
            json!({ "version": 1, "prompt": "Plan ok?", "target": {"type": "issue_document", "key": "plan", "revisionId": rev} }),
        )
    };
    // Only the latest revision can be asked about.
    let err = w
        .run(a1(), on("i1", create(about("old", "rev0"))))
        .unwrap_err();
    assert!(matches!(err, DomainError::Conflict { .. }));
    w.ok(a1(), on("i1", create(about("t1", "rev1"))));
    let mut keep = confirm("keep");
    keep.payload["supersedeOnUserComment"] = json!(false);
    w.ok(a1(), on("i1", create(keep)));
    w.ok(a1(), on("i1", create(confirm("talk"))));

    let expired = |w: &World, id: &str| !w.state.interactions.pending.contains_key(id);
    assert_eq!(
        outcomes(w.applied(a1(), put("rev2", Some("rev1")))),
        [("t1".to_string(), json!("stale_target"))],
        "a new revision expires the card about the old one"
    );
    assert!(!expired(&w, "talk"));

    // An agent's comment supersedes nothing; a person's supersedes what asks for that.
    comment(&mut w, a1(), "i1", "c-agent", "still working");
    assert!(!expired(&w, "talk"));
    let by_person = Command::AddComment {
        issue_id: "i1".into(),
        comment: NewComment {
            id: "c-board".into(),
            body: "let me look".into(),
        },
    };
    assert_eq!(
        outcomes(w.applied(admin(), by_person)),
        [("talk".to_string(), json!("superseded_by_comment"))]
    );
    assert!(!expired(&w, "keep"));

    // Closing the issue expires the rest, each recording why.
    assert_eq!(
        outcomes(w.applied(a1(), status_update("i1", IssueStatus::Done))),
        [("keep".to_string(), json!("issue_closed"))]
    );
    assert_eq!(w.state.interactions.pending_of_issue("i1").count(), 0);
    let err = w.run(a1(), on("i1", create(confirm("late")))).unwrap_err();
    assert!(
        matches!(err, DomainError::Conflict { .. }),
        "a closed issue takes no card"
    );
}

#[test]
fn the_creator_the_assignee_or_the_board_withdraws_and_a_deleted_issue_takes_its_cards() {
    let mut w = working();
    w.ok(a2(), on("i1", create(confirm("w1"))));
    w.ok(a2(), on("i1", create(confirm("w2"))));
    w.ok(a2(), on("i1", create(confirm("w3"))));
    let withdraw = |id: &str| InteractionOp::Withdraw {
        interaction_id: id.into(),
        reason: Some("not needed".into()),
    };
    w.start_run("rb", "b1");
    let (done, _) = card_of(w.ok(a2(), on("i1", withdraw("w1"))));
    assert_eq!(done.status, InteractionStatus::Withdrawn);
    w.ok(a1(), on("i1", withdraw("w2")));
    // Neither creator nor assignee: refused.
    w.ok(admin(), create_agent("a3", "c1"));
    w.start_run("r3", "a3");
    let err = w
        .run(
            agent_actor("a3", "c1", Some("r3")),
            on("i1", withdraw("w3")),
        )
        .unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }));
    assert!(w.state.interactions.pending.contains_key("w3"));

    // Deleting the issue (its run released first) drops its pending card from memory.
    finish(&mut w, "r1");
    w.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "i1".into(),
        },
    );
    assert!(w.state.interactions.pending.is_empty());
}

#[test]
fn a_payload_is_checked_as_paperclips_schema_checks_it() {
    for (kind, payload) in [
        (
            InteractionKind::RequestConfirmation,
            json!({ "version": 2, "prompt": "x" }),
        ),
        (
            InteractionKind::RequestConfirmation,
            json!({ "version": 1, "prompt": " " }),
        ),
        (
            InteractionKind::RequestConfirmation,
            json!({ "version": 1, "prompt": "x", "toolAction": {} }),
        ),
        (
            InteractionKind::RequestConfirmation,
            json!({ "version": 1, "prompt": "x", "target": {"type": "issue_document", "key": "Plan", "revisionId": "r"} }),
        ),
        (
            InteractionKind::RequestCheckboxConfirmation,
            json!({ "version": 1, "prompt": "x", "options": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}] }),
        ),
        (
            InteractionKind::RequestCheckboxConfirmation,
            json!({ "version": 1, "prompt": "x", "minSelected": 2, "options": [{"id": "a", "label": "A"}] }),
        ),
        (
            InteractionKind::AskUserQuestions,
            json!({ "version": 1, "questions": [] }),
        ),
        (
            InteractionKind::AskUserQuestions,
            json!({ "version": 1, "questions": [{"id": "q", "prompt": "p", "selectionMode": "some", "options": [{"id": "o", "label": "O"}]}] }),
        ),
        (
            InteractionKind::RequestItemVerdicts,
            json!({ "version": 1, "prompt": "x", "items": [{"id": "1", "label": "one"}], "verdicts": ["approve", "defer"] }),
        ),
        (
            InteractionKind::RequestConfirmation,
            json!({ "version": 1, "prompt": "x", "detailsMarkdown": "y".repeat(MAX_PAYLOAD_BYTES) }),
        ),
    ] {
        let op = InteractionOp::Create {
            interaction: new_card("x", kind, payload.clone()),
        };
        assert!(op.check().is_err(), "{kind}: {payload}");
    }
    let ok = InteractionOp::Create {
        interaction: confirm("x"),
    };
    assert!(ok.check().is_ok());
}

#[test]
fn only_the_board_skips_a_card_or_cancels_questions_and_neither_wakes_anyone() {
    let mut w = working();
    let questions = new_card(
        "q",
        InteractionKind::AskUserQuestions,
        json!({ "version": 1, "questions": [{"id": "a", "prompt": "A?", "selectionMode": "single",
                "options": [{"id": "y", "label": "yes"}]}] }),
    );
    w.ok(a1(), on("i1", create(questions)));
    w.ok(a1(), on("i1", create(confirm("c"))));
    let skip = |id: &str| InteractionOp::Skip {
        interaction_id: id.into(),
        reason: Some("not now".into()),
    };
    let cancel = |id: &str| InteractionOp::Cancel {
        interaction_id: id.into(),
        reason: None,
    };
    let err = w.run(a2(), on("i1", skip("c"))).unwrap_err();
    assert!(matches!(err, DomainError::Forbidden { .. }));
    let err = w.run(admin(), on("i1", cancel("c"))).unwrap_err();
    assert!(
        matches!(&err, DomainError::Invalid { message, .. } if message.contains("skip")),
        "a confirmation is skipped, not cancelled: {err:?}"
    );
    let before = issue_wakes(&w, "a1", WakeReason::IssueCommented).len();
    let (skipped, _) = card_of(w.ok(admin(), on("i1", skip("c"))));
    assert_eq!(skipped.status, InteractionStatus::Cancelled);
    assert_eq!(skipped.result.unwrap()["outcome"], json!("skipped"));
    let (cancelled, _) = card_of(w.ok(admin(), on("i1", cancel("q"))));
    assert_eq!(cancelled.result.unwrap()["cancelled"], json!(true));
    assert_eq!(
        issue_wakes(&w, "a1", WakeReason::IssueCommented).len(),
        before
    );
    assert_eq!(w.state.interactions.pending_of_issue("i1").count(), 0);
}

#[test]
fn a_withdrawn_verdict_card_keeps_its_verdicts_and_wake_on_accept_wakes_on_an_answer() {
    let mut w = working();
    let mut verdicts = new_card(
        "v",
        InteractionKind::RequestItemVerdicts,
        json!({ "version": 1, "prompt": "Review", "items": [{"id": "1", "label": "one"}, {"id": "2", "label": "two"}] }),
    );
    verdicts.continuation_policy = Some(ContinuationPolicy::WakeAssigneeOnAccept);
    w.ok(a1(), on("i1", create(verdicts)));
    let one = InteractionOp::Verdicts {
        interaction_id: "v".into(),
        verdicts: serde_json::from_value(json!([{"id": "1", "verdict": "approve"}])).unwrap(),
    };
    w.ok(admin(), on("i1", one));
    let withdraw = InteractionOp::Withdraw {
        interaction_id: "v".into(),
        reason: None,
    };
    let (gone, _) = card_of(w.ok(admin(), on("i1", withdraw)));
    let result = gone.result.expect("a result");
    assert_eq!(result["outcome"], json!("withdrawn"));
    assert_eq!(result["complete"], json!(false));
    assert_eq!(
        result["items"][0]["id"],
        json!("1"),
        "the verdict given is kept"
    );
    assert!(issue_wakes(&w, "a1", WakeReason::IssueCommented).is_empty());

    let mut questions = new_card(
        "q",
        InteractionKind::AskUserQuestions,
        json!({ "version": 1, "questions": [{"id": "a", "prompt": "A?", "selectionMode": "single",
                "options": [{"id": "y", "label": "yes"}]}] }),
    );
    questions.continuation_policy = Some(ContinuationPolicy::WakeAssigneeOnAccept);
    w.ok(a1(), on("i1", create(questions)));
    let respond = InteractionOp::Respond {
        interaction_id: "q".into(),
        answers: serde_json::from_value(json!([{"questionId": "a", "optionIds": ["y"]}])).unwrap(),
        summary_markdown: None,
    };
    w.ok(admin(), on("i1", respond));
    assert_eq!(
        issue_wakes(&w, "a1", WakeReason::IssueCommented).len(),
        1,
        "an answer is what wake_assignee_on_accept waits for"
    );
}
