//! Issue-thread interactions: an agent's card answered by the board wakes the agent with the
//! card named; Paperclip's own CLI asks and answers cards; gRPC does what REST does.

use roost_proto::v1::{
    CreateIssueInteractionRequest, InteractionKind, InteractionStatus,
    ListIssueInteractionsRequest, QuestionAnswer, RespondIssueInteractionRequest,
};
use serde_json::{json, Value};
use tonic::Code;

use roost_testkit::{Http, TestNode};

use crate::grpc_wakes::refused;
use crate::processes::{cli, stdout_json};
use crate::support::*;

fn confirmation(prompt: &str) -> Value {
    json!({
        "kind": "request_confirmation",
        "continuationPolicy": "wake_assignee",
        "idempotencyKey": format!("confirmation:{prompt}"),
        "payload": { "version": 1, "prompt": prompt },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_card_answered_by_the_board_wakes_it_with_the_card_named() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let agent = agent_session(&node, "asker").await?;
    let issue = node
        .issue(json!({ "title": "ship it?", "status": "in_review",
                       "assigneeAgentId": agent.agent_id }))
        .await?;
    let issue_id = str_field(&issue, "id");
    let path = format!("/api/issues/{issue_id}/interactions");

    let made = agent.http.post(&path, confirmation("Ship v2?")).await?;
    assert_eq!(made.status, 201, "{}", made.body);
    let card = made.body;
    assert_eq!(card["status"], "pending", "{card}");
    assert_eq!(card["sourceRunId"], json!(agent.run_id), "{card}");
    assert_eq!(card["effectiveResolverPolicy"], "anyone", "{card}");
    // A retry with its key answers the same card, made once.
    let again = agent.http.post(&path, confirmation("Ship v2?")).await?;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["id"], card["id"]);

    // Without a run, an agent is refused as Paperclip refuses it; another company's agent does
    // not see the issue at all.
    let (_, key) = node.agent("runless").await?;
    let runless = node.http().with_token(&key);
    let refused_401 = runless.post(&path, confirmation("x")).await?;
    assert_eq!(refused_401.status, 401, "{}", refused_401.body);
    let other = node
        .admin
        .post("/api/companies", json!({ "name": "Elsewhere" }))
        .await?
        .ok()?;
    let (_, foreign_key) = agent_with_key(&node.admin, &str_field(&other, "id"), "spy").await?;
    let foreign = node.http().with_token(&foreign_key).get(&path).await?;
    assert_eq!(foreign.status, 404, "{}", foreign.body);

    let before = wakes_of(&node, &agent.agent_id).await?.len();
    let card_id = str_field(&card, "id");
    let accepted = node
        .admin
        .post(&format!("{path}/{card_id}/accept"), json!({}))
        .await?
        .ok()?;
    assert_eq!(accepted["status"], "accepted", "{accepted}");
    assert_eq!(accepted["result"]["outcome"], "accepted", "{accepted}");
    let wakes = wakes_of(&node, &agent.agent_id).await?;
    let woken = wakes
        .iter()
        .find(|w| w["payload"]["interactionId"] == json!(card_id))
        .unwrap_or_else(|| panic!("no wake names the card ({before} before): {wakes:?}"));
    assert_eq!(woken["payload"]["interactionStatus"], "accepted", "{woken}");
    assert_eq!(woken["issueId"], json!(issue_id), "{woken}");

    // Answered once: a second answer is refused with a sentence, and the list shows the card.
    let twice = node
        .admin
        .post(
            &format!("{path}/{card_id}/reject"),
            json!({ "reason": "late" }),
        )
        .await?;
    assert_eq!(twice.status, 409, "{}", twice.body);
    assert!(
        twice.body["error"]
            .as_str()
            .unwrap_or("")
            .contains("already accepted"),
        "{}",
        twice.body
    );
    let listed = agent.http.get(&path).await?.ok()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["status"], "accepted", "{listed}");
    let activity = node
        .admin
        .get(&format!("/api/issues/{issue_id}/activity"))
        .await?
        .ok()?;
    let actions = strs(&activity, "action");
    assert!(
        actions.contains(&"issue.thread_interaction_accepted"),
        "{actions:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_issue_or_replacing_the_plan_expires_its_cards() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let agent = agent_session(&node, "planner").await?;
    let issue = node
        .issue(json!({ "title": "plan", "status": "todo" }))
        .await?;
    let issue_id = str_field(&issue, "id");
    let path = format!("/api/issues/{issue_id}/interactions");
    let doc = node
        .admin
        .put(
            &format!("/api/issues/{issue_id}/documents/plan"),
            json!({ "format": "markdown", "body": "# v1" }),
        )
        .await?
        .ok()?;
    let rev1 = str_field(&doc, "latestRevisionId");
    let about_plan = |rev: &str| {
        json!({ "kind": "request_confirmation",
                "payload": { "version": 1, "prompt": "Plan ok?",
                             "target": { "type": "issue_document", "key": "plan", "revisionId": rev } } })
    };
    let stale = agent.http.post(&path, about_plan("not-the-latest")).await?;
    assert_eq!(stale.status, 409, "{}", stale.body);
    let plan_card = agent.http.post(&path, about_plan(&rev1)).await?.ok()?;
    let open_card = agent
        .http
        .post(
            &path,
            json!({ "kind": "ask_user_questions",
                    "payload": { "version": 1, "supersedeOnUserComment": false, "questions": [
                        { "id": "db", "prompt": "Which database?", "selectionMode": "single",
                          "options": [{ "id": "pg", "label": "Postgres" }] }] } }),
        )
        .await?
        .ok()?;

    node.admin
        .put(
            &format!("/api/issues/{issue_id}/documents/plan"),
            json!({ "format": "markdown", "body": "# v2", "baseRevisionId": rev1 }),
        )
        .await?
        .ok()?;
    let status_of = |list: &Value, card: &Value| -> (Value, Value) {
        let found = list
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["id"] == card["id"])
            .cloned()
            .unwrap_or(Value::Null);
        (found["status"].clone(), found["result"]["outcome"].clone())
    };
    let listed = node.admin.get(&path).await?.ok()?;
    assert_eq!(
        status_of(&listed, &plan_card),
        (json!("expired"), json!("stale_target")),
        "{listed}"
    );
    assert_eq!(status_of(&listed, &open_card).0, json!("pending"));

    node.admin
        .patch(
            &format!("/api/issues/{issue_id}"),
            json!({ "status": "done" }),
        )
        .await?
        .ok()?;
    let listed = node.admin.get(&path).await?.ok()?;
    assert_eq!(
        status_of(&listed, &open_card),
        (json!("expired"), json!("issue_closed")),
        "{listed}"
    );
    let late = agent.http.post(&path, confirmation("late")).await?;
    assert_eq!(
        late.status, 409,
        "a closed issue took a card: {}",
        late.body
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_asks_and_answers_questions_with_rests_rules() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let mut grpc = control(&node).await?;
    let agent = agent_session(&node, "grpc-asker").await?;
    let issue = node
        .issue(json!({ "title": "questions", "status": "todo" }))
        .await?;
    let issue_id = str_field(&issue, "identifier");
    // A key of its own: the session's client holds its key inside.
    let agent_key = new_key(&node.admin, &agent.agent_id).await?;
    let questions = json!({ "version": 1, "questions": [
        { "id": "db", "prompt": "Which database?", "selectionMode": "single", "required": true,
          "options": [{ "id": "pg", "label": "Postgres" }, { "id": "lite", "label": "SQLite" }] }] });
    let made = grpc
        .create_issue_interaction(authed(
            &agent_key,
            Some(&agent.run_id),
            CreateIssueInteractionRequest {
                issue_id: issue_id.clone(),
                kind: InteractionKind::AskUserQuestions as i32,
                payload_json: questions.to_string(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert!(made.created);
    let card = made.interaction.expect("the card");
    assert_eq!(card.status, InteractionStatus::Pending as i32);

    // A bad answer is refused as REST refuses it.
    let answer = |option: &str| RespondIssueInteractionRequest {
        issue_id: issue_id.clone(),
        interaction_id: card.id.clone(),
        answers: vec![QuestionAnswer {
            question_id: "db".into(),
            option_ids: vec![option.into()],
            other_text: None,
        }],
        summary_markdown: None,
    };
    let (code, text) = refused(
        grpc.respond_issue_interaction(authed(&node.admin_token, None, answer("mysql"))?)
            .await
            .expect_err("an answer naming no option was taken"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    assert!(text.contains("mysql"), "{text}");
    let answered = grpc
        .respond_issue_interaction(authed(&node.admin_token, None, answer("lite"))?)
        .await?
        .into_inner();
    assert_eq!(answered.status, InteractionStatus::Answered as i32);
    let result: Value = serde_json::from_str(answered.result_json.as_deref().unwrap_or("null"))?;
    assert_eq!(
        result["answers"][0]["optionIds"],
        json!(["lite"]),
        "{result}"
    );

    let listed = grpc
        .list_issue_interactions(authed(
            &agent_key,
            None,
            ListIssueInteractionsRequest {
                issue_id: issue_id.clone(),
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(listed.interactions.len(), 1);
    Ok(())
}

/// Paperclip's `issue interaction:*` commands, as the board uses them: a checkbox card accepted
/// with a choice, a confirmation rejected with a reason, questions answered, and the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_asks_answers_and_lists_issue_thread_interactions() -> anyhow::Result<()> {
    let (cli, _dir, roost) = crate::paperclip_cli::start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let http = Http::new(&base).with_token(&admin);
    let issue_id =
        crate::paperclip_cli::todo_issue(&http, &roost.company_id, "choose a stack").await?;
    let issue = |args: &[&str]| {
        let mut all = vec!["issue"];
        all.extend_from_slice(args);
        cli.run(&base, &admin, &all)
    };
    let create = |card: Value| {
        issue(&[
            "interaction:create",
            &issue_id,
            "--payload-json",
            &card.to_string(),
        ])
    };

    let boxes = create(json!({ "kind": "request_checkbox_confirmation",
        "payload": { "version": 1, "prompt": "Which services?", "minSelected": 1,
                     "maxSelected": 2, "defaultSelectedOptionIds": ["api"],
                     "options": [{ "id": "api", "label": "API" }, { "id": "ui", "label": "UI" },
                                 { "id": "db", "label": "DB" }] } }))?
    .json()?;
    assert_eq!(boxes["status"], "pending", "{boxes}");
    let boxes_id = str_field(&boxes, "id");
    let too_many = issue(&[
        "interaction:accept",
        &issue_id,
        &boxes_id,
        "--selected-option-ids",
        "api,ui,db",
    ])?;
    assert!(
        !too_many.ok,
        "accepted past maxSelected: {}",
        too_many.stdout
    );
    assert!(
        too_many.stderr.contains("choose between"),
        "{}",
        too_many.stderr
    );
    let accepted = issue(&[
        "interaction:accept",
        &issue_id,
        &boxes_id,
        "--selected-option-ids",
        "api,db",
    ])?
    .json()?;
    assert_eq!(
        accepted["result"]["selectedOptionIds"],
        json!(["api", "db"]),
        "{accepted}"
    );

    let ship = create(json!({ "kind": "request_confirmation",
        "payload": { "version": 1, "prompt": "Ship on Friday?" } }))?
    .json()?;
    let rejected = issue(&[
        "interaction:reject",
        &issue_id,
        &str_field(&ship, "id"),
        "--reason",
        "not before the freeze",
    ])?
    .json()?;
    assert_eq!(rejected["status"], "rejected", "{rejected}");
    assert_eq!(
        rejected["result"]["reason"], "not before the freeze",
        "{rejected}"
    );

    let asked = create(json!({ "kind": "ask_user_questions",
        "payload": { "version": 1, "questions": [
            { "id": "lang", "prompt": "Which language?", "selectionMode": "single", "required": true,
              "options": [{ "id": "rust", "label": "Rust" }, { "id": "go", "label": "Go" }] }] } }))?
    .json()?;
    let answers = json!([{ "questionId": "lang", "optionIds": ["rust"] }]).to_string();
    let answered = issue(&[
        "interaction:respond",
        &issue_id,
        &str_field(&asked, "id"),
        "--answers-json",
        &answers,
        "--summary-markdown",
        "Rust, for the borrow checker",
    ])?
    .json()?;
    assert_eq!(answered["status"], "answered", "{answered}");
    assert_eq!(
        answered["result"]["summaryMarkdown"],
        "Rust, for the borrow checker"
    );

    let later = create(json!({ "kind": "ask_user_questions",
        "payload": { "version": 1, "questions": [
            { "id": "when", "prompt": "When?", "selectionMode": "single",
              "options": [{ "id": "now", "label": "Now" }] }] } }))?
    .json()?;
    let cancelled = issue(&[
        "interaction:cancel",
        &issue_id,
        &str_field(&later, "id"),
        "--reason",
        "asked in the meeting",
    ])?
    .json()?;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        cancelled["result"]["cancellationReason"],
        "asked in the meeting"
    );

    let listed = issue(&["interactions", &issue_id])?.json()?;
    let statuses = strs(&listed, "status");
    assert_eq!(
        statuses,
        vec!["accepted", "rejected", "answered", "cancelled"],
        "{listed}"
    );

    // A kind Roost does not serve is refused with a sentence that says what to do instead.
    let tasks = create(json!({ "kind": "suggest_tasks",
        "payload": { "version": 1, "tasks": [{ "clientKey": "a", "title": "Write the API" }] } }))?;
    assert!(!tasks.ok, "suggest_tasks was taken: {}", tasks.stdout);
    assert!(tasks.stderr.contains("suggest_tasks"), "{}", tasks.stderr);
    Ok(())
}

/// `roost issue interaction`: the board asks, answers with a choice and lists, in text and
/// `--json`; a malformed choice is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roosts_cli_asks_answers_and_lists_cards() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let issue = node
        .issue(json!({ "title": "pick a name", "status": "todo" }))
        .await?;
    let ident = str_field(&issue, "identifier");
    let run = |args: &[&str]| cli(&base, &admin, args);

    let questions = json!({ "version": 1, "questions": [
        { "id": "name", "prompt": "Which name?", "selectionMode": "single", "required": true,
          "options": [{ "id": "roost", "label": "Roost" }, { "id": "perch", "label": "Perch" }] }] });
    let asked = stdout_json(&run(&[
        "issue",
        "interaction",
        "ask",
        &ident,
        "--kind",
        "ask_user_questions",
        "--payload",
        &questions.to_string(),
        "--json",
    ])?)?;
    let id = str_field(&asked, "id");
    let bad = run(&[
        "issue",
        "interaction",
        "answer",
        &ident,
        &id,
        "--choose",
        "roost",
    ])?;
    assert!(!bad.status.success(), "a choice without QUESTION= was sent");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("QUESTION=OPTION"), "{err}");
    let answered = stdout_json(&run(&[
        "issue",
        "interaction",
        "answer",
        &ident,
        &id,
        "--choose",
        "name=roost",
        "--json",
    ])?)?;
    assert_eq!(answered["status"], "answered", "{answered}");
    assert_eq!(
        answered["result"]["answers"][0]["optionIds"],
        json!(["roost"])
    );

    let confirm = stdout_json(&run(&[
        "issue",
        "interaction",
        "ask",
        &ident,
        "--prompt",
        "Ship it?",
        "--json",
    ])?)?;
    let listed = run(&["issue", "interaction", "list", &ident])?;
    let text = String::from_utf8(listed.stdout)?;
    assert!(
        text.contains("answered") && text.contains("pending") && text.contains("Ship it?"),
        "{text}"
    );
    let withdrawn = stdout_json(&run(&[
        "issue",
        "interaction",
        "withdraw",
        &ident,
        &str_field(&confirm, "id"),
        "--json",
    ])?)?;
    assert_eq!(withdrawn["status"], "withdrawn", "{withdrawn}");
    Ok(())
}
