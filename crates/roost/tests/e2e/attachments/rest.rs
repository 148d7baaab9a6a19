//! Uploads over multipart (curl, as agents send them), downloads with their headers and
//! ranges, refusals that change nothing, and who may touch an issue's attachments.

use super::*;
use crate::support::agent_with_key;

/// The attachment routes over REST, with curl's multipart as a client sends it: what is kept,
/// the order, the bytes and headers served, every refusal (and that it changed nothing), who may
/// touch an issue's files, and what a delete of a file or of its issue leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_upload_list_download_range_and_delete_over_rest() -> anyhow::Result<()> {
    let _heavy = crate::support::one_cluster_at_a_time().await;
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let cid = node.company_id.clone();
    let issue = todo_issue(&node, "the quarterly report").await?;
    let uploads = format!("/api/companies/{cid}/issues/{issue}/attachments");
    let list_path = format!("/api/issues/{issue}/attachments");
    let content = |id: &str| format!("/api/attachments/{id}/content");
    let files = tempfile::tempdir()?;

    // A text file, an image, and a Word document its client sent as generic bytes (kept under
    // the office type its name says).
    let notes = b"Revenue up 12%.\nCosts flat.\n".to_vec();
    let mut chart = b"\x89PNG\r\n\x1a\n".to_vec();
    chart.extend(0..=255u8);
    let plan = b"PK\x03\x04 a plan, zipped".to_vec();
    let sent = [
        ("notes.txt", "text/plain", &notes, "text/plain"),
        ("chart.png", "image/png", &chart, "image/png"),
        ("plan.docx", "application/octet-stream", &plan, DOCX),
    ];
    let mut ids = Vec::new();
    let mut paths = Vec::new();
    for (name, sent_type, bytes, kept_type) in sent {
        let path = file_with(files.path(), name, bytes)?;
        let reply = upload(
            &base,
            &uploads,
            &admin,
            None,
            &[file_part(&path, sent_type)],
        )
        .await?;
        let a = answered(reply, 201);
        ids.push(check_attachment(&a, &issue, &cid, name, kept_type, bytes).await?);
        assert!(a["originatingRunId"].is_null(), "{a}");
        assert!(a["createdByAgentId"].is_null(), "{a}");
        paths.push(path);
        clock_past(&a["createdAt"]).await?;
    }
    let (notes_id, chart_id, plan_id) = (ids[0].clone(), ids[1].clone(), ids[2].clone());
    let (notes_path, chart_path) = (paths[0].clone(), paths[1].clone());
    let listed = node.admin.get(&list_path).await?.ok()?;
    assert_eq!(
        strs(&listed, "id"),
        [plan_id.as_str(), chart_id.as_str(), notes_id.as_str()],
        "newest first: {listed}"
    );

    // The bytes as sent; shown in place when a browser can, saved when asked to.
    let got = download(&base, &admin, &content(&notes_id), None).await?;
    assert_eq!(got.status, 200);
    assert_eq!(got.bytes, notes);
    assert_eq!(got.content_type(), "text/plain");
    assert_disposition(&got, "inline", "notes.txt");
    assert_eq!(got.header("x-content-type-options"), "nosniff");
    assert_eq!(got.header("accept-ranges"), "bytes");
    let saved = download(
        &base,
        &admin,
        &format!("{}?download=1", content(&notes_id)),
        None,
    )
    .await?;
    assert_eq!(saved.status, 200);
    assert_eq!(saved.bytes, notes);
    assert_disposition(&saved, "attachment", "notes.txt");
    let image = download(&base, &admin, &content(&chart_id), None).await?;
    assert_eq!(image.status, 200);
    assert_eq!(image.bytes, chart);
    assert_eq!(image.content_type(), "image/png");
    assert_disposition(&image, "inline", "chart.png");
    let document = download(&base, &admin, &content(&plan_id), None).await?;
    assert_eq!(document.status, 200);
    assert_eq!(document.bytes, plan);
    assert_eq!(document.content_type(), DOCX);
    assert_disposition(&document, "attachment", "plan.docx");
    // A video its client sent as generic bytes: kept so, served as the video its name says
    // and shown in place (a player opens it), as Paperclip serves it.
    let clip = b"\x00\x00\x00\x14ftypqt  a screen recording".to_vec();
    let clip_path = file_with(files.path(), "demo.mov", &clip)?;
    let reply = upload(
        &base,
        &uploads,
        &admin,
        None,
        &[file_part(&clip_path, "application/octet-stream")],
    )
    .await?;
    let a = answered(reply, 201);
    let clip_id = check_attachment(
        &a,
        &issue,
        &cid,
        "demo.mov",
        "application/octet-stream",
        &clip,
    )
    .await?;
    let video = download(&base, &admin, &content(&clip_id), None).await?;
    assert_eq!(
        (video.status, video.bytes.as_slice()),
        (200, clip.as_slice())
    );
    assert_eq!(video.content_type(), "video/quicktime");
    assert_disposition(&video, "inline", "demo.mov");
    answered(
        node.admin
            .delete(&format!("/api/attachments/{clip_id}"))
            .await?,
        200,
    );

    // One range of bytes; a range past the end is refused and says the size.
    let total = chart.len();
    let part = download(&base, &admin, &content(&chart_id), Some("bytes=8-15")).await?;
    assert_eq!(part.status, 206);
    assert_eq!(part.bytes.as_slice(), &chart[8..16]);
    assert_eq!(part.header("content-range"), format!("bytes 8-15/{total}"));
    let beyond = format!("bytes={total}-{}", total + 9);
    let past = download(&base, &admin, &content(&chart_id), Some(beyond.as_str())).await?;
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), format!("bytes */{total}"));

    // Refused uploads, each saying why, and none of them changed the list.
    let before = node.admin.get(&list_path).await?.ok()?;
    let no_file = answered(
        upload(
            &base,
            &uploads,
            &admin,
            None,
            &[format!("issueCommentId={NO_SUCH_ID}")],
        )
        .await?,
        400,
    );
    assert!(error_of(&no_file).contains("file"), "{no_file}");
    // A file naming a comment that is not there: refused before any of its bytes are sent.
    let orphan = file_with(files.path(), "orphan.txt", b"for no comment")?;
    let unknown = answered(
        upload(
            &base,
            &uploads,
            &admin,
            None,
            &[
                file_part(&orphan, "text/plain"),
                format!("issueCommentId={NO_SUCH_ID}"),
            ],
        )
        .await?,
        404,
    );
    assert!(error_of(&unknown).contains("comment"), "{unknown}");
    let empty = file_with(files.path(), "empty.txt", b"")?;
    answered(
        upload(
            &base,
            &uploads,
            &admin,
            None,
            &[file_part(&empty, "text/plain")],
        )
        .await?,
        422,
    );
    let over_limit = vec![7u8; LIMIT + 1];
    let over = file_with(files.path(), "over.bin", &over_limit)?;
    let too_big = answered(
        upload(
            &base,
            &uploads,
            &admin,
            None,
            &[file_part(&over, "application/octet-stream")],
        )
        .await?,
        422,
    );
    assert!(
        error_of(&too_big).contains("larger than the 10 MB limit"),
        "{too_big}"
    );
    let elsewhere = node
        .admin
        .post("/api/companies", json!({ "name": "Elsewhere Inc" }))
        .await?
        .ok()?;
    let other_cid = str_field(&elsewhere, "id");
    let wrong_company = answered(
        upload(
            &base,
            &format!("/api/companies/{other_cid}/issues/{issue}/attachments"),
            &admin,
            None,
            &[file_part(&notes_path, "text/plain")],
        )
        .await?,
        422,
    );
    assert!(
        error_of(&wrong_company).contains("Issue does not belong to company"),
        "{wrong_company}"
    );
    answered(
        upload(
            &base,
            &format!("/api/companies/{cid}/issues/{NO_SUCH_ID}/attachments"),
            &admin,
            None,
            &[file_part(&notes_path, "text/plain")],
        )
        .await?,
        404,
    );
    let after = node.admin.get(&list_path).await?.ok()?;
    assert_eq!(after, before, "a refused upload changed the list");

    // A file of exactly the limit is taken, whole.
    let full = vec![9u8; LIMIT];
    let full_path = file_with(files.path(), "full.bin", &full)?;
    let at_limit = answered(
        upload(
            &base,
            &uploads,
            &admin,
            None,
            &[file_part(&full_path, "application/octet-stream")],
        )
        .await?,
        201,
    );
    let at_limit_id = check_attachment(
        &at_limit,
        &issue,
        &cid,
        "full.bin",
        "application/octet-stream",
        &full,
    )
    .await?;
    let whole = download(&base, &admin, &content(&at_limit_id), None).await?;
    assert_eq!(whole.status, 200);
    assert!(whole.bytes == full, "{} bytes came back", whole.bytes.len());
    answered(
        node.admin
            .delete(&format!("/api/attachments/{at_limit_id}"))
            .await?,
        200,
    );

    // Another company's agent finds nothing: not the list, the bytes, a delete or an upload.
    let (_, outsider_key) = agent_with_key(&node.admin, &other_cid, "outsider").await?;
    let outsider = node.http().with_token(&outsider_key);
    assert_eq!(outsider.get(&list_path).await?.status.as_u16(), 404);
    let peek = download(&base, &outsider_key, &content(&notes_id), None).await?;
    assert_eq!(peek.status, 404);
    let removal = outsider
        .delete(&format!("/api/attachments/{notes_id}"))
        .await?;
    assert_eq!(removal.status.as_u16(), 404, "{}", removal.body);
    let sneaked = upload(
        &base,
        &uploads,
        &outsider_key,
        None,
        &[file_part(&notes_path, "text/plain")],
    )
    .await?;
    assert_eq!(sneaked.status.as_u16(), 404, "{}", sneaked.body);
    let after = node.admin.get(&list_path).await?.ok()?;
    assert_eq!(after, before, "another company's agent changed the list");

    // An issue another agent's live run holds: an agent's upload and delete there are refused
    // (409), the holder's upload is taken and names its run.
    let held = todo_issue(&node, "held by a run").await?;
    let held_uploads = format!("/api/companies/{cid}/issues/{held}/attachments");
    let kept = answered(
        upload(
            &base,
            &held_uploads,
            &admin,
            None,
            &[file_part(&notes_path, "text/plain")],
        )
        .await?,
        201,
    );
    let kept_id = str_field(&kept, "id");
    let (holder, holder_key) = node.agent("holder").await?;
    let holder_run = node.start_run(&holder).await?;
    node.http()
        .with_token(&holder_key)
        .with_run(&holder_run)
        .post(
            &format!("/api/issues/{held}/checkout"),
            json!({ "agentId": holder, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    let (bystander, bystander_key) = node.agent("bystander").await?;
    let bystander_run = node.start_run(&bystander).await?;
    let refused = upload(
        &base,
        &held_uploads,
        &bystander_key,
        Some(bystander_run.as_str()),
        &[file_part(&chart_path, "image/png")],
    )
    .await?;
    assert_eq!(refused.status.as_u16(), 409, "{}", refused.body);
    let refused = node
        .http()
        .with_token(&bystander_key)
        .with_run(&bystander_run)
        .delete(&format!("/api/attachments/{kept_id}"))
        .await?;
    assert_eq!(refused.status.as_u16(), 409, "{}", refused.body);
    clock_past(&kept["createdAt"]).await?;
    let by_holder = answered(
        upload(
            &base,
            &held_uploads,
            &holder_key,
            Some(holder_run.as_str()),
            &[file_part(&chart_path, "image/png")],
        )
        .await?,
        201,
    );
    assert_eq!(
        by_holder["originatingRunId"],
        holder_run.as_str(),
        "{by_holder}"
    );
    assert_eq!(
        by_holder["createdByAgentId"],
        holder.as_str(),
        "{by_holder}"
    );
    assert!(by_holder["createdByUserId"].is_null(), "{by_holder}");
    let held_list = node
        .admin
        .get(&format!("/api/issues/{held}/attachments"))
        .await?
        .ok()?;
    assert_eq!(
        strs(&held_list, "id"),
        [str_field(&by_holder, "id").as_str(), kept_id.as_str()],
        "{held_list}"
    );

    // A delete takes the bytes with it.
    let deleted = answered(
        node.admin
            .delete(&format!("/api/attachments/{plan_id}"))
            .await?,
        200,
    );
    assert_eq!(deleted["ok"], true, "{deleted}");
    let gone = download(&base, &admin, &content(&plan_id), None).await?;
    assert_eq!(gone.status, 404);
    let listed = node.admin.get(&list_path).await?.ok()?;
    assert_eq!(
        strs(&listed, "id"),
        [chart_id.as_str(), notes_id.as_str()],
        "{listed}"
    );

    // Deleting the issue deletes its attachments.
    node.admin
        .delete(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    for id in [&chart_id, &notes_id] {
        let gone = download(&base, &admin, &content(id), None).await?;
        assert_eq!(gone.status, 404, "attachment {id} outlived its issue");
    }
    Ok(())
}
