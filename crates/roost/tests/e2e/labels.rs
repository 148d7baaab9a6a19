//! Issue labels as Paperclip's CLI and clients use them: `issue label:create|list|delete` from
//! the real `paperclipai`, an issue's `labelIds` checked against its company and shown with
//! `labels`, the list's `labelId` filter, a deleted label taken off its issues, and gRPC's
//! twins of the routes.

use roost_proto::v1::{CreateLabelRequest, DeleteLabelRequest, ListLabelsRequest};
use roost_testkit::{Http, TestNode};
use serde_json::{json, Value};

use crate::paperclip_cli::{start, todo_issue};
use crate::processes::{cli, stdout_json};
use crate::support::*;

fn names(labels: &Value) -> Vec<&str> {
    strs(labels, "name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_creates_lists_and_deletes_issue_labels() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let cid = roost.company_id.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let http = Http::new(&base).with_token(&admin);

    let bug = op(&[
        "issue",
        "label:create",
        "-C",
        &cid,
        "--name",
        "bug",
        "--color",
        "#d73a4a",
    ])?
    .json()?;
    assert_eq!(bug["name"], "bug", "{bug}");
    assert_eq!(bug["color"], "#d73a4a", "{bug}");
    assert_eq!(bug["companyId"], cid.as_str(), "{bug}");
    let ui = op(&[
        "issue",
        "label:create",
        "-C",
        &cid,
        "--name",
        "  ui  ",
        "--color",
        "#0E8A16",
    ])?
    .json()?;
    assert_eq!(ui["name"], "ui", "a name is trimmed: {ui}");
    // Listed by name.
    let listed = op(&["issue", "label:list", "-C", &cid])?.json()?;
    assert_eq!(names(&listed), ["bug", "ui"], "{listed}");
    // The same name again is refused, with a sentence, and nothing is added.
    let again = op(&[
        "issue",
        "label:create",
        "-C",
        &cid,
        "--name",
        "bug",
        "--color",
        "#000000",
    ])?;
    assert!(!again.ok, "a second label named bug: {}", again.stdout);
    let reply = http
        .post(
            &format!("/api/companies/{cid}/labels"),
            json!({ "name": "bug", "color": "#000000" }),
        )
        .await?;
    assert_eq!(reply.status, 409, "{}", reply.body);
    assert!(
        reply.body["error"]
            .as_str()
            .is_some_and(|e| e.contains("bug")),
        "{}",
        reply.body
    );
    for body in [
        json!({ "name": "x", "color": "red" }),
        json!({ "name": "   ", "color": "#000000" }),
        json!({ "name": "x".repeat(49), "color": "#000000" }),
        json!({ "name": "x" }),
    ] {
        let reply = http
            .post(&format!("/api/companies/{cid}/labels"), body.clone())
            .await?;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        assert!(
            reply.body["error"]
                .as_str()
                .is_some_and(|e| e.contains(' ')),
            "{}",
            reply.body
        );
    }
    let listed = http
        .get(&format!("/api/companies/{cid}/labels"))
        .await?
        .ok()?;
    assert_eq!(
        names(&listed),
        ["bug", "ui"],
        "refusals added nothing: {listed}"
    );

    // An issue carries labels of its company, shown by name; a list filters by one.
    let (bug_id, ui_id) = (str_field(&bug, "id"), str_field(&ui, "id"));
    let labelled = http
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "broken button", "labelIds": [ui_id, bug_id, ui_id] }),
        )
        .await?
        .ok()?;
    let issue_id = str_field(&labelled, "id");
    // Answered as Paperclip answers: labelIds once each, in the order of the labels by name.
    assert_eq!(labelled["labelIds"], json!([bug_id, ui_id]), "{labelled}");
    assert_eq!(names(&labelled["labels"]), ["bug", "ui"], "{labelled}");
    let plain = todo_issue(&http, &cid, "unlabelled").await?;
    let bare = http
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({ "title": "no labels" }),
        )
        .await?
        .ok()?;
    assert_eq!(
        (&bare["labelIds"], &bare["labels"]),
        (&json!([]), &json!([])),
        "an issue without labels shows none, as Paperclip's: {bare}"
    );
    let shown = http.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(names(&shown["labels"]), ["bug", "ui"], "{shown}");
    assert_eq!(shown["labelIds"], json!([bug_id, ui_id]), "{shown}");
    let of_bug = http
        .get(&format!("/api/companies/{cid}/issues?labelId={bug_id}"))
        .await?
        .ok()?;
    assert_eq!(strs(&of_bug, "id"), [issue_id.as_str()], "{of_bug}");
    assert_eq!(names(&of_bug[0]["labels"]), ["bug", "ui"], "{of_bug}");
    for (status, expected) in [("done", 0), ("backlog,todo", 1)] {
        let listed = http
            .get(&format!(
                "/api/companies/{cid}/issues?labelId={bug_id}&status={status}"
            ))
            .await?
            .ok()?;
        assert_eq!(
            listed.as_array().map(Vec::len),
            Some(expected),
            "{status}: {listed}"
        );
    }
    let child = http
        .post(
            &format!("/api/issues/{issue_id}/children"),
            json!({ "title": "the button's tooltip", "labelIds": [ui_id, bug_id] }),
        )
        .await?
        .ok()?;
    assert_eq!(child["labelIds"], json!([bug_id, ui_id]), "{child}");
    assert_eq!(names(&child["labels"]), ["bug", "ui"], "{child}");

    // Another company's label, or none at all: Paperclip's 422 and sentence, nothing changed.
    let other = http
        .post("/api/companies", json!({ "name": "Elsewhere" }))
        .await?
        .ok()?;
    let theirs = http
        .post(
            &format!("/api/companies/{}/labels", str_field(&other, "id")),
            json!({ "name": "theirs", "color": "#123456" }),
        )
        .await?
        .ok()?;
    for ids in [json!([str_field(&theirs, "id")]), json!(["no-such-label"])] {
        let reply = http
            .patch(&format!("/api/issues/{plain}"), json!({ "labelIds": ids }))
            .await?;
        assert_eq!(reply.status, 422, "{}", reply.body);
        assert_eq!(
            reply.body["error"], "One or more labels are invalid for this company",
            "{}",
            reply.body
        );
    }
    let unchanged = http.get(&format!("/api/issues/{plain}")).await?.ok()?;
    assert_eq!(unchanged["labels"], json!([]), "{unchanged}");
    assert_eq!(unchanged["labelIds"], json!([]), "none is [] {unchanged}");

    // Deleted through the CLI: the label answers as it was, and leaves its issue.
    let deleted = op(&["issue", "label:delete", &bug_id])?.json()?;
    assert_eq!(deleted["name"], "bug", "{deleted}");
    let shown = http.get(&format!("/api/issues/{issue_id}")).await?.ok()?;
    assert_eq!(shown["labelIds"], json!([ui_id]), "{shown}");
    assert_eq!(names(&shown["labels"]), ["ui"], "{shown}");
    let renamed = http
        .patch(
            &format!("/api/issues/{issue_id}"),
            json!({ "title": "broken button, still" }),
        )
        .await?
        .ok()?;
    assert_eq!(
        names(&renamed["labels"]),
        ["ui"],
        "an update's answer: {renamed}"
    );
    assert_eq!(renamed["labelIds"], json!([ui_id]), "{renamed}");
    let listed = op(&["issue", "label:list", "-C", &cid])?.json()?;
    assert_eq!(names(&listed), ["ui"], "{listed}");
    let gone = http.delete(&format!("/api/labels/{bug_id}")).await?;
    assert_eq!(gone.status, 404, "{}", gone.body);
    let activity = http
        .get(&format!("/api/companies/{cid}/activity"))
        .await?
        .ok()?;
    let actions = strs(&activity, "action");
    assert!(
        actions.contains(&"label.created") && actions.contains(&"label.deleted"),
        "{actions:?}"
    );
    Ok(())
}

#[tokio::test]
async fn grpc_labels_follow_rests_rules() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let mut grpc = control(&node).await?;
    let (_, key) = node.agent("labeller").await?;
    let create = |color: &str| CreateLabelRequest {
        company_id: cid.clone(),
        name: "infra".into(),
        color: color.into(),
    };
    let delete = |id: &str| DeleteLabelRequest {
        label_id: id.into(),
    };
    let list = || ListLabelsRequest {
        company_id: cid.clone(),
    };
    let made = grpc
        .create_label(authed(&key, None, create("#112233"))?)
        .await?
        .into_inner();
    assert_eq!(
        (made.name.as_str(), made.company_id.as_str()),
        ("infra", cid.as_str())
    );
    let bad = grpc.create_label(authed(&key, None, create("blue"))?).await;
    assert_eq!(
        bad.err().map(|s| s.code()),
        Some(tonic::Code::InvalidArgument)
    );
    // A stranger's company does not see it.
    let stranger = crate::grpc_governance::stranger(&node).await?;
    let refused = grpc
        .delete_label(authed(&stranger, None, delete(&made.id))?)
        .await;
    assert_eq!(refused.err().map(|s| s.code()), Some(tonic::Code::NotFound));
    let listed = grpc
        .list_labels(authed(&key, None, list())?)
        .await?
        .into_inner();
    assert_eq!(listed.labels.len(), 1);
    grpc.delete_label(authed(&key, None, delete(&made.id))?)
        .await?;
    let listed = grpc
        .list_labels(authed(&key, None, list())?)
        .await?
        .into_inner();
    assert!(listed.labels.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roosts_cli_creates_lists_filters_by_and_deletes_labels() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let run = |args: &[&str]| cli(&base, &node.admin_token, args);
    let made = stdout_json(&run(&[
        "label", "create", "docs", "--color", "#0075ca", "--json",
    ])?)?;
    let id = str_field(&made, "id");
    let refused = run(&["label", "create", "docs", "--color", "blue"])?;
    assert!(!refused.status.success(), "a colour that is not #RRGGBB");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("6-digit hex"), "{err}");
    let table = String::from_utf8(run(&["label", "list"])?.stdout)?;
    assert!(
        table.contains("docs") && table.contains("#0075ca"),
        "{table}"
    );
    let issue = node
        .issue(json!({ "title": "write the guide", "labelIds": [id] }))
        .await?;
    let plain = node.issue(json!({ "title": "not this one" })).await?;
    let listed = stdout_json(&run(&["issue", "list", "--label", &id, "--json"])?)?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], issue["id"], "{listed}");

    // Checkout and release answer the issue with its labels, as Paperclip's do; an issue
    // without labels shows none; a deleted issue answers none (Paperclip's deletion takes its
    // labels first).
    let (agent, key) = node.agent("labelled-work").await?;
    let agent_run = node.start_run(&agent).await?;
    let http = node.http().with_token(&key).with_run(&agent_run);
    for (held, labels) in [(&issue, vec![id.as_str()]), (&plain, vec![])] {
        let path = format!("/api/issues/{}", str_field(held, "id"));
        let checkout = json!({ "agentId": agent, "expectedStatuses": [held["status"]] });
        for answer in [
            http.post(&format!("{path}/checkout"), checkout)
                .await?
                .ok()?,
            http.post(&format!("{path}/release"), json!({}))
                .await?
                .ok()?,
        ] {
            assert_eq!(answer["labelIds"], json!(labels), "{answer}");
            assert_eq!(strs(&answer["labels"], "id"), labels, "{answer}");
        }
    }
    let deleted_issue = node
        .admin
        .delete(&format!("/api/issues/{}", str_field(&issue, "id")))
        .await?
        .ok()?;
    assert_eq!(deleted_issue["labelIds"], json!([]), "{deleted_issue}");
    assert_eq!(deleted_issue["labels"], json!([]), "{deleted_issue}");
    let deleted = stdout_json(&run(&["label", "delete", &id, "--json"])?)?;
    assert_eq!(deleted["name"], "docs", "{deleted}");
    let listed = stdout_json(&run(&["issue", "list", "--label", &id, "--json"])?)?;
    assert_eq!(listed, json!([]), "{listed}");
    let table = String::from_utf8(run(&["label", "list"])?.stdout)?;
    assert!(table.contains("no labels"), "{table}");
    Ok(())
}
