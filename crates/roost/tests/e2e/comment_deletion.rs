//! Deleting a comment (`DELETE /api/issues/{id}/comments/{commentId}`, gRPC `DeleteComment`,
//! Paperclip's `issue comment:delete`): only its author deletes it; the comment keeps its place
//! in the thread with an empty body and who deleted it when; its text leaves the issue search;
//! a second deletion answers the same tombstone; all of it survives a restart.

use roost_proto::v1::DeleteCommentRequest;
use roost_testkit::{Http, TestNode};
use serde_json::{json, Value};
use tonic::Code;

use crate::grpc_wakes::{call, refused};
use crate::paperclip_cli::{start, todo_issue};
use crate::processes::{cli, stdout_json};
use crate::support::*;
use crate::worker_process::{cluster_with_worker_leases, create_agent, finished_run, start_worker};

fn comment_ids(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|c| str_field(c, "id"))
        .collect()
}

async fn found_by(http: &Http, cid: &str, q: &str) -> anyhow::Result<usize> {
    let list = http
        .get(&format!("/api/companies/{cid}/issues?q={q}"))
        .await?
        .ok()?;
    Ok(list.as_array().map(Vec::len).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_comment_keeps_its_place_leaves_search_and_survives_a_restart(
) -> anyhow::Result<()> {
    let mut node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let (agent, key) = node.agent("retractor").await?;
    let as_agent = node.http().with_token(&key);
    let issue = node.issue(json!({ "title": "rotate the keys" })).await?;
    let issue_id = str_field(&issue, "id");
    let comments = format!("/api/issues/{issue_id}/comments");
    let secret = as_agent
        .post(&comments, json!({ "body": "the password is hunter2" }))
        .await?
        .ok()?;
    let secret_id = str_field(&secret, "id");
    let kept = node
        .admin
        .post(&comments, json!({ "body": "noted" }))
        .await?
        .ok()?;
    let kept_id = str_field(&kept, "id");
    let secret_path = format!("{comments}/{secret_id}");
    assert_eq!(found_by(&node.admin, &cid, "hunter2").await?, 1);

    // Not its author: refused with a sentence, and nothing changes.
    for query in ["", "?mode=cancel"] {
        let refused = node.admin.delete(&format!("{secret_path}{query}")).await?;
        assert_eq!(refused.status, 403, "{query}: {}", refused.body);
        let sentence = refused.body["error"].as_str().unwrap_or_default();
        assert!(sentence.contains("Only the comment author"), "{sentence}");
        assert!(sentence.contains(&agent), "names the author: {sentence}");
    }
    // Paperclip's `cancel` takes back a comment queued for a run; Roost queues none.
    let cancel = as_agent
        .delete(&format!("{secret_path}?mode=cancel"))
        .await?;
    assert_eq!(cancel.status, 409, "{}", cancel.body);
    let sentence = cancel.body["error"].as_str().unwrap_or_default();
    assert!(sentence.contains("delete it instead"), "{sentence}");
    for query in ["?mode=erase", "?force=true"] {
        let bad = as_agent.delete(&format!("{secret_path}{query}")).await?;
        assert_eq!(bad.status, 400, "{query}: {}", bad.body);
        assert!(bad.body["error"].is_string(), "{query}: {}", bad.body);
    }
    let unchanged = node.admin.get(&secret_path).await?.ok()?;
    assert_eq!(unchanged["body"], "the password is hunter2");
    assert_eq!(unchanged["deletedAt"], Value::Null, "{unchanged}");

    // Its author deletes it: the tombstone, in the comment's place.
    let deleted = as_agent.delete(&secret_path).await?.ok()?;
    assert_eq!(deleted["id"], secret_id.as_str());
    assert_eq!(deleted["body"], "");
    assert_eq!(deleted["authorAgentId"], agent.as_str());
    assert_eq!(deleted["createdAt"], secret["createdAt"]);
    assert_eq!(deleted["deletedByType"], "agent", "{deleted}");
    assert_eq!(deleted["deletedByAgentId"], agent.as_str());
    assert!(deleted["deletedAt"].is_string(), "{deleted}");
    let list = node.admin.get(&comments).await?.ok()?;
    assert_eq!(comment_ids(&list), [secret_id.clone(), kept_id.clone()]);
    assert_eq!(list[0]["body"], "", "{list}");
    assert_eq!(list[1]["body"], "noted", "{list}");
    assert_eq!(found_by(&node.admin, &cid, "hunter2").await?, 0);
    // Deleting it again answers the same tombstone; to anyone else it is still not theirs.
    let again = as_agent.delete(&secret_path).await?.ok()?;
    assert_eq!(again, deleted);
    let not_theirs = node.admin.delete(&secret_path).await?;
    assert_eq!(not_theirs.status, 403, "{}", not_theirs.body);
    let activity = node
        .admin
        .get(&format!("/api/companies/{cid}/activity"))
        .await?
        .ok()?;
    let logged: Vec<&Value> = activity
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["action"] == "issue.comment_deleted")
        .collect();
    assert_eq!(logged.len(), 1, "{activity}");
    assert_eq!(logged[0]["details"]["commentId"], secret_id.as_str());
    assert_eq!(logged[0]["details"]["source"], "author_delete");

    // Over gRPC: the same rule, and a person deletes their own comment.
    let mut grpc = control(&node).await?;
    let request = |comment: &str| DeleteCommentRequest {
        issue_id: issue_id.clone(),
        comment_id: comment.to_string(),
    };
    let (code, text) = refused(
        grpc.delete_comment(call(&key, request(&kept_id)))
            .await
            .expect_err("an agent deleted a person's comment"),
    );
    assert_eq!(code, Code::PermissionDenied, "{text}");
    let by_person = grpc
        .delete_comment(call(&node.admin_token, request(&kept_id)))
        .await?
        .into_inner();
    assert_eq!(by_person.body, "");
    assert_eq!(by_person.deleted_by_type.as_deref(), Some("user"));
    assert!(by_person.deleted_at_ms.is_some());
    let (code, _) = refused(
        grpc.delete_comment(call(&node.admin_token, request("no-such-comment")))
            .await
            .expect_err("a comment that does not exist was deleted"),
    );
    assert_eq!(code, Code::NotFound);

    // Roost's CLI: an agent is refused with the sentence; the author deletes, and the thread
    // shows the comment as deleted.
    let server = format!("http://{}", node.server().http_addr());
    let third = node
        .admin
        .post(&comments, json!({ "body": "typo" }))
        .await?
        .ok()?;
    let third_id = str_field(&third, "id");
    let delete_third = [
        "issue",
        "delete-comment",
        issue_id.as_str(),
        third_id.as_str(),
    ];
    let refused_cli = cli(&server, &key, &delete_third)?;
    assert!(!refused_cli.status.success());
    let stderr = String::from_utf8_lossy(&refused_cli.stderr);
    assert!(stderr.contains("Only the comment author"), "{stderr}");
    let by_cli = stdout_json(&cli(
        &server,
        &node.admin_token,
        &[&delete_third[..], &["--json"]].concat(),
    )?)?;
    assert_eq!(by_cli["body"], "", "{by_cli}");
    let thread = cli(
        &server,
        &node.admin_token,
        &["issue", "comments", &issue_id],
    )?;
    let thread = String::from_utf8_lossy(&thread.stdout);
    assert_eq!(thread.matches("(deleted at ").count(), 3, "{thread}");
    assert!(!thread.contains("hunter2"), "{thread}");

    // A restart reads the tombstones back.
    node.restart().await?;
    let list = node.admin.get(&comments).await?.ok()?;
    assert_eq!(comment_ids(&list), [secret_id, kept_id, third_id]);
    assert_eq!(list[0], deleted, "{list}");
    assert_eq!(list[1]["body"], "", "{list}");
    assert_eq!(list[1]["deletedByType"], "user", "{list}");
    assert!(list[1]["deletedAt"].is_string(), "{list}");
    node.shutdown().await
}

/// Paperclip's own CLI: `issue comment:delete` by the author answers the emptied comment; by
/// anyone else it fails with Paperclip's sentence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_deletes_a_comment_only_for_its_author() -> anyhow::Result<()> {
    let (cli, _dir, roost) = start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let http = Http::new(&base).with_token(&admin);
    let cid = roost.company_id.clone();
    let issue_id = todo_issue(&http, &cid, "a thread").await?;
    let (_, key) = agent_with_key(&http, &cid, "commenter").await?;
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let as_agent = |args: &[&str]| cli.run(&base, &key, args);

    let mine = op(&["issue", "comment", &issue_id, "--body", "posted too soon"])?.json()?;
    let mine_id = str_field(&mine, "id");
    let refused = as_agent(&["issue", "comment:delete", &issue_id, &mine_id])?;
    assert!(
        !refused.ok,
        "an agent deleted a person's comment: {}",
        refused.stdout
    );
    assert!(
        refused.stderr.contains("Only the comment author"),
        "{}",
        refused.stderr
    );
    let deleted = op(&["issue", "comment:delete", &issue_id, &mine_id])?.json()?;
    assert_eq!(deleted["id"], mine_id.as_str(), "{deleted}");
    assert_eq!(deleted["body"], "", "{deleted}");
    assert_eq!(deleted["deletedByType"], "user", "{deleted}");
    let listed = op(&["issue", "comments", &issue_id])?.json()?;
    assert_eq!(comment_ids(&listed), [mine_id], "{listed}");
    assert_eq!(listed[0]["body"], "", "{listed}");
    Ok(())
}

/// A comment deleted while its wake waited for a worker is taken out of the wake: the run's
/// prompt and `PAPERCLIP_WAKE_COMMENT_ID` name the comment before it, which reaches the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_comment_deleted_before_its_run_is_not_in_the_prompt() -> anyhow::Result<()> {
    let _one_cluster = one_cluster_at_a_time().await;
    let c = cluster_with_worker_leases(1, 1500).await?;
    let dir = tempfile::tempdir()?;
    let agent = create_agent(
        &c,
        "process",
        json!({
            "command": "sh",
            "args": ["-c", "cat > prompt.txt; echo \"$PAPERCLIP_WAKE_COMMENT_ID\" > wake_comment.txt"],
            "cwd": "."
        }),
    )
    .await?;
    let admin = c.admin(c.leader().await?);
    let issue = admin
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            json!({ "title": "read the thread", "assigneeAgentId": agent }),
        )
        .await?
        .ok()?;
    let comments = format!("/api/issues/{}/comments", str_field(&issue, "id"));
    let kept = admin
        .post(&comments, json!({ "body": "deploy on Friday" }))
        .await?
        .ok()?;
    let retracted = admin
        .post(
            &comments,
            json!({ "body": "use the staging password s3cret" }),
        )
        .await?
        .ok()?;
    admin
        .delete(&format!("{comments}/{}", str_field(&retracted, "id")))
        .await?
        .ok()?;
    // Only now a worker: the wake, with both comments' ids, is assigned.
    let _stop = start_worker(&c, dir.path(), c.grpc_addrs(), None).await?;
    let done = finished_run(&c, &agent).await?;
    assert_eq!(done["status"], "succeeded", "{done}");
    let prompt = std::fs::read_to_string(dir.path().join("prompt.txt"))?;
    assert!(prompt.contains("deploy on Friday"), "{prompt}");
    // Not even as an empty line naming it, nor counted.
    assert!(!prompt.contains(&str_field(&retracted, "id")), "{prompt}");
    assert!(!prompt.contains("comments in all"), "{prompt}");
    let wake_comment = std::fs::read_to_string(dir.path().join("wake_comment.txt"))?;
    assert_eq!(wake_comment.trim(), str_field(&kept, "id"));
    c.shutdown().await;
    Ok(())
}
