//! Issue documents over gRPC and through `roost issue document`: the same rules as REST
//! (`paperclip_cli.rs` drives REST with Paperclip's own CLI).

use roost_proto::v1::{
    DeleteIssueDocumentRequest, ListDocumentRevisionsRequest, ListIssueDocumentsRequest,
    LockIssueDocumentRequest, PutIssueDocumentRequest, RestoreIssueDocumentRequest,
    UnlockIssueDocumentRequest,
};
use serde_json::json;
use tonic::Code;

use roost_testkit::TestNode;

use crate::grpc_wakes::{call, refused};
use crate::processes::{cli, stdout_json};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_issue_documents_refuse_a_stale_base_and_leave_locking_to_administrators(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let admin = node.admin_token.clone();
    let mut grpc = control(&node).await?;
    let (_, key) = node.agent("grpc-planner").await?;
    let issue = node
        .issue(json!({ "title": "plan", "status": "todo" }))
        .await?;
    let issue_id = str_field(&issue, "identifier");
    let put = |body: &str, base: Option<String>| PutIssueDocumentRequest {
        issue_id: issue_id.clone(),
        key: "Plan ".into(),
        title: Some("Plan".into()),
        body: body.into(),
        base_revision_id: base,
        ..Default::default()
    };

    let created = grpc
        .put_issue_document(call(&key, put("v1", None)))
        .await?
        .into_inner();
    assert!(created.created);
    let v1 = created.document.expect("the document");
    assert_eq!((v1.key.as_str(), v1.format.as_str()), ("plan", "markdown"));
    let (code, text) = refused(
        grpc.put_issue_document(call(&key, put("blind", None)))
            .await
            .expect_err("an update without a base was saved"),
    );
    assert_eq!(code, Code::Aborted, "{text}");
    assert!(text.contains("baseRevisionId"), "{text}");
    let v2 = grpc
        .put_issue_document(call(&key, put("v2", Some(v1.latest_revision_id.clone()))))
        .await?
        .into_inner();
    assert!(!v2.created);
    let listed = grpc
        .list_issue_documents(call(
            &key,
            ListIssueDocumentsRequest {
                issue_id: issue_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(listed.documents.len(), 1);
    assert_eq!(listed.documents[0].body, "v2");
    let revisions = grpc
        .list_document_revisions(call(
            &key,
            ListDocumentRevisionsRequest {
                issue_id: issue_id.clone(),
                key: "plan".into(),
            },
        ))
        .await?
        .into_inner()
        .revisions;
    let numbers: Vec<u64> = revisions.iter().map(|r| r.revision_number).collect();
    assert_eq!(numbers, [2, 1]);
    let restored = grpc
        .restore_issue_document(call(
            &key,
            RestoreIssueDocumentRequest {
                issue_id: issue_id.clone(),
                key: "plan".into(),
                revision_id: v1.latest_revision_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        (restored.body.as_str(), restored.latest_revision_number),
        ("v1", 3)
    );

    let lock = LockIssueDocumentRequest {
        issue_id: issue_id.clone(),
        key: "plan".into(),
    };
    let (code, _) = refused(
        grpc.lock_issue_document(call(&key, lock.clone()))
            .await
            .expect_err("an agent locked a document"),
    );
    assert_eq!(code, Code::PermissionDenied);
    let locked = grpc
        .lock_issue_document(call(&admin, lock))
        .await?
        .into_inner();
    assert!(locked.locked_at_ms.is_some());
    let unlocked = grpc
        .unlock_issue_document(call(
            &admin,
            UnlockIssueDocumentRequest {
                issue_id: issue_id.clone(),
                key: "plan".into(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(unlocked.locked_at_ms, None);
    grpc.delete_issue_document(call(
        &admin,
        DeleteIssueDocumentRequest {
            issue_id: issue_id.clone(),
            key: "plan".into(),
        },
    ))
    .await?;
    let listed = grpc
        .list_issue_documents(call(&key, ListIssueDocumentsRequest { issue_id }))
        .await?
        .into_inner();
    assert!(listed.documents.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roosts_cli_puts_shows_restores_and_deletes_an_issue_document() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let issue = node
        .issue(json!({ "title": "ship it", "status": "todo" }))
        .await?;
    let ident = str_field(&issue, "identifier");
    let run = |args: &[&str]| cli(&base, &admin, args);

    let saved = run(&[
        "issue", "document", "put", &ident, "plan", "--body", "step one", "--quiet",
    ])?;
    anyhow::ensure!(
        saved.status.success(),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );
    let r1 = String::from_utf8(saved.stdout)?.trim().to_string();
    let refused = run(&[
        "issue",
        "document",
        "put",
        &ident,
        "plan",
        "--body",
        "overwrite",
    ])?;
    assert!(
        !refused.status.success(),
        "an update without --base-revision was saved"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("baseRevisionId"), "{err}");
    let v2 = stdout_json(&run(&[
        "issue",
        "document",
        "put",
        &ident,
        "plan",
        "--body",
        "step two",
        "--base-revision",
        &r1,
        "--json",
    ])?)?;
    assert_eq!(v2["latestRevisionNumber"], 2, "{v2}");
    let shown = run(&["issue", "document", "show", &ident, "plan"])?;
    let shown = String::from_utf8(shown.stdout)?;
    assert!(
        shown.contains("step two") && shown.contains("revision"),
        "{shown}"
    );
    let history = stdout_json(&run(&[
        "issue", "document", "history", &ident, "plan", "--json",
    ])?)?;
    assert_eq!(history.as_array().map(Vec::len), Some(2), "{history}");
    let restored = stdout_json(&run(&[
        "issue", "document", "restore", &ident, "plan", &r1, "--json",
    ])?)?;
    assert_eq!(restored["body"], "step one", "{restored}");
    let unconfirmed = run(&["issue", "document", "delete", &ident, "plan"])?;
    assert!(!unconfirmed.status.success());
    assert!(String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes"));
    stdout_json(&run(&[
        "issue", "document", "delete", &ident, "plan", "--yes", "--json",
    ])?)?;
    let listed = run(&["issue", "document", "list", &ident])?;
    assert_eq!(String::from_utf8(listed.stdout)?, "no documents\n");
    Ok(())
}
