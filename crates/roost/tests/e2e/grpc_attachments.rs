//! Attachments and work products over gRPC and roost's own CLI: an upload streamed in chunks
//! past one message's 4 MiB bound, the same bytes through REST, the size bound refused with
//! nothing stored, work products with REST's rules; and `roost issue attachment|work-product`.

use roost_proto::v1::{
    self as pb, CreateWorkProductRequest, DeleteIssueAttachmentRequest, DeleteWorkProductRequest,
    GetIssueAttachmentContentRequest, ListIssueAttachmentsRequest, ListWorkProductsRequest,
    UpdateWorkProductRequest, UploadIssueAttachmentChunk, WorkProductFields,
};
use serde_json::json;
use tonic::Code;

use roost_testkit::TestNode;

use crate::attachments::pseudo_random;
use crate::grpc_wakes::{call, refused};
use crate::processes::{cli, stdout_json};
use crate::support::*;

/// `bytes` as an upload's messages of at most `chunk` bytes each, the first naming the file.
fn chunks(issue: &str, name: &str, bytes: &[u8], chunk: usize) -> Vec<UploadIssueAttachmentChunk> {
    bytes
        .chunks(chunk)
        .enumerate()
        .map(|(i, data)| UploadIssueAttachmentChunk {
            issue_id: if i == 0 { issue.into() } else { String::new() },
            original_filename: (i == 0).then(|| name.to_string()),
            content_type: (i == 0).then(|| "application/octet-stream".to_string()),
            issue_comment_id: None,
            data: data.to_vec(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_streams_an_upload_past_one_messages_bound_and_serves_rests_bytes(
) -> anyhow::Result<()> {
    let _heavy = crate::support::one_cluster_at_a_time().await;
    let node = TestNode::start().await?;
    let token = node.admin_token.clone();
    // A file's bytes come back in one message: past gRPC's default 4 MiB, a client reading big
    // files raises its own bound (the server sends up to 64 MiB).
    let mut grpc = control(&node)
        .await?
        .max_decoding_message_size(16 * 1024 * 1024);
    let issue = todo_issue(&node, "deliverables over gRPC").await?;

    // Five MiB in 1 MiB messages: more than one message may carry.
    let bytes = pseudo_random(5 * 1024 * 1024, 7);
    let stream = tokio_stream::iter(chunks(&issue, "model.bin", &bytes, 1024 * 1024));
    let uploaded = grpc
        .upload_issue_attachment(call(&token, stream))
        .await?
        .into_inner();
    assert_eq!(uploaded.byte_size, bytes.len() as u64);
    assert_eq!(uploaded.original_filename.as_deref(), Some("model.bin"));
    assert_eq!(uploaded.issue_id, issue);
    assert_eq!(
        uploaded.content_path,
        format!("/api/attachments/{}/content", uploaded.id)
    );

    // The same bytes from gRPC and from REST.
    let content = grpc
        .get_issue_attachment_content(call(
            &token,
            GetIssueAttachmentContentRequest {
                attachment_id: uploaded.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert!(content.content == bytes, "gRPC served other bytes");
    let rest = node
        .admin
        .raw(
            reqwest::Method::GET,
            &format!("/api/attachments/{}/content", uploaded.id),
            None,
        )
        .await?;
    assert_eq!(rest.status, 200);
    let listed = node
        .admin
        .get(&format!("/api/issues/{issue}/attachments"))
        .await?
        .ok()?;
    assert_eq!(listed[0]["sha256"], json!(uploaded.sha256), "{listed}");

    // Past 10 MiB the stream is refused and nothing is stored.
    let big = pseudo_random(10 * 1024 * 1024 + 1, 9);
    let stream = tokio_stream::iter(chunks(&issue, "too-big.bin", &big, 2 * 1024 * 1024));
    let status = grpc
        .upload_issue_attachment(call(&token, stream))
        .await
        .expect_err("an upload past 10 MiB was stored");
    let (code, text) = refused(status);
    assert_eq!(code, Code::FailedPrecondition, "{text}");
    assert!(text.contains("10 MB limit"), "{text}");
    let list = grpc
        .list_issue_attachments(call(
            &token,
            ListIssueAttachmentsRequest {
                issue_id: issue.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(list.attachments.len(), 1);

    // Work products with REST's rules: one primary per type, `clear` nulls a field.
    let pr = |title: &str| CreateWorkProductRequest {
        issue_id: issue.clone(),
        fields: Some(WorkProductFields {
            r#type: Some("pull_request".into()),
            provider: Some("github".into()),
            title: Some(title.into()),
            url: Some("https://github.com/acme/app/pull/7".into()),
            is_primary: Some(true),
            metadata_json: Some(r#"{"number": 7}"#.into()),
            ..Default::default()
        }),
    };
    let first = grpc
        .create_work_product(call(&token, pr("first")))
        .await?
        .into_inner();
    let second = grpc
        .create_work_product(call(&token, pr("second")))
        .await?
        .into_inner();
    assert_eq!(first.status, "active");
    let listed = grpc
        .list_work_products(call(
            &token,
            ListWorkProductsRequest {
                issue_id: issue.clone(),
            },
        ))
        .await?
        .into_inner()
        .work_products;
    let primary: Vec<(&str, bool)> = listed
        .iter()
        .map(|w| (w.title.as_str(), w.is_primary))
        .collect();
    assert_eq!(primary, [("second", true), ("first", false)]);
    let updated = grpc
        .update_work_product(call(
            &token,
            UpdateWorkProductRequest {
                work_product_id: first.id.clone(),
                fields: Some(WorkProductFields {
                    status: Some("merged".into()),
                    clear: vec!["url".into()],
                    ..Default::default()
                }),
            },
        ))
        .await?
        .into_inner();
    assert_eq!((updated.status.as_str(), updated.url), ("merged", None));
    let (code, text) = refused(
        grpc.update_work_product(call(
            &token,
            UpdateWorkProductRequest {
                work_product_id: first.id.clone(),
                fields: Some(WorkProductFields {
                    status: Some("shipped".into()),
                    ..Default::default()
                }),
            },
        ))
        .await
        .expect_err("an unknown status was accepted"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    let removed = grpc
        .delete_work_product(call(
            &token,
            DeleteWorkProductRequest {
                work_product_id: second.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(removed.id, second.id);

    // Deleting the attachment takes its bytes: REST answers 404 for them.
    let gone: pb::IssueAttachment = grpc
        .delete_issue_attachment(call(
            &token,
            DeleteIssueAttachmentRequest {
                attachment_id: uploaded.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(gone.id, uploaded.id);
    let rest = node
        .admin
        .raw(
            reqwest::Method::GET,
            &format!("/api/attachments/{}/content", uploaded.id),
            None,
        )
        .await?;
    assert_eq!(rest.status, 404);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roosts_cli_uploads_downloads_and_records_work_products() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "deliverables from the CLI").await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let run = |args: &[&str]| cli(&base, &admin, args);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("report.md");
    std::fs::write(&file, "# Report\n\nall green\n")?;
    let path = file.to_string_lossy().into_owned();

    let uploaded = stdout_json(&run(&[
        "issue",
        "attachment",
        "upload",
        &issue,
        &path,
        "--json",
    ])?)?;
    let id = str_field(&uploaded, "id");
    assert_eq!(uploaded["contentType"], "text/markdown", "{uploaded}");
    assert_eq!(uploaded["originalFilename"], "report.md", "{uploaded}");
    let listed = run(&["issue", "attachment", "list", &issue])?;
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains(&id) && text.contains("report.md"), "{text}");
    let out = dir.path().join("copy.md");
    let copy = out.to_string_lossy().into_owned();
    stdout_json(&run(&[
        "issue",
        "attachment",
        "download",
        &id,
        "--out",
        &copy,
        "--json",
    ])?)?;
    assert_eq!(std::fs::read(&out)?, std::fs::read(&file)?);

    let metadata = json!({ "attachmentId": id }).to_string();
    let product = stdout_json(&run(&[
        "issue",
        "work-product",
        "create",
        &issue,
        "--type",
        "artifact",
        "--provider",
        "paperclip",
        "--title",
        "Weekly report",
        "--metadata",
        &metadata,
        "--primary",
        "--json",
    ])?)?;
    assert_eq!(
        product["metadata"]["downloadPath"],
        json!(format!("/api/attachments/{id}/content?download=1")),
        "{product}"
    );
    let wp = str_field(&product, "id");
    let updated = stdout_json(&run(&[
        "issue",
        "work-product",
        "update",
        &wp,
        "--status",
        "ready_for_review",
        "--json",
    ])?)?;
    assert_eq!(updated["status"], "ready_for_review", "{updated}");
    let bad = run(&[
        "issue",
        "work-product",
        "update",
        &wp,
        "--status",
        "shipped",
    ])?;
    assert!(!bad.status.success(), "an unknown status was accepted");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("status"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    stdout_json(&run(&["issue", "work-product", "delete", &wp, "--json"])?)?;
    let refused = run(&["issue", "attachment", "delete", &id])?;
    assert!(
        !refused.status.success(),
        "a delete without --yes went ahead"
    );
    stdout_json(&run(&[
        "issue",
        "attachment",
        "delete",
        &id,
        "--yes",
        "--json",
    ])?)?;
    let empty = node
        .admin
        .get(&format!("/api/issues/{issue}/attachments"))
        .await?
        .ok()?;
    assert_eq!(empty, json!([]));
    Ok(())
}
