//! Work products with Paperclip's rules, and attachments and work products through
//! Paperclip's real CLI.

use super::*;

/// Work products with Paperclip's rules: its defaults, one primary per type, the list's order,
/// its schema's refusals, artifacts backed by an attachment of their own issue, the artifact a
/// run's upload makes (and that the same run's post updates), and runs an agent may name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_products_follow_paperclips_rules() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin.clone();
    let cid = node.company_id.clone();
    let issue = todo_issue(&node, "release 1.4").await?;
    let products = format!("/api/issues/{issue}/work-products");
    let one = |id: &str| format!("/api/work-products/{id}");

    // A pull request, with Paperclip's defaults for what it did not send.
    let pr1 = answered(
        admin
            .post(
                &products,
                json!({
                    "type": "pull_request",
                    "provider": "github",
                    "title": "Release 1.4",
                    "url": "https://github.com/acme/app/pull/41",
                    "externalId": "41",
                    "isPrimary": true,
                }),
            )
            .await?,
        201,
    );
    let pr1_id = str_field(&pr1, "id");
    assert!(!pr1_id.is_empty(), "{pr1}");
    assert_eq!(pr1["companyId"], cid.as_str(), "{pr1}");
    assert_eq!(pr1["issueId"], issue.as_str(), "{pr1}");
    assert_eq!(pr1["type"], "pull_request", "{pr1}");
    assert_eq!(pr1["provider"], "github", "{pr1}");
    assert_eq!(pr1["title"], "Release 1.4", "{pr1}");
    assert_eq!(pr1["url"], "https://github.com/acme/app/pull/41", "{pr1}");
    assert_eq!(pr1["externalId"], "41", "{pr1}");
    assert_eq!(pr1["status"], "active", "{pr1}");
    assert_eq!(pr1["reviewState"], "none", "{pr1}");
    assert_eq!(pr1["isPrimary"], true, "{pr1}");
    assert_eq!(pr1["healthStatus"], "unknown", "{pr1}");
    for empty in [
        "projectId",
        "executionWorkspaceId",
        "runtimeServiceId",
        "summary",
        "metadata",
        "sourceTrust",
        "createdByRunId",
    ] {
        assert!(pr1[empty].is_null(), "{empty}: {pr1}");
    }
    assert!(
        pr1["createdAt"].is_string() && pr1["updatedAt"].is_string(),
        "{pr1}"
    );

    // One primary per type: a second primary pull request takes over from the first; the
    // branch's stays.
    clock_past(&pr1["updatedAt"]).await?;
    let branch = answered(
        admin
            .post(
                &products,
                json!({
                    "type": "branch",
                    "provider": "github",
                    "title": "release/1.4",
                    "isPrimary": true,
                }),
            )
            .await?,
        201,
    );
    let branch_id = str_field(&branch, "id");
    clock_past(&branch["updatedAt"]).await?;
    let pr2 = answered(
        admin
            .post(
                &products,
                json!({
                    "type": "pull_request",
                    "provider": "github",
                    "title": "Hotfix for 1.4",
                    "url": "https://github.com/acme/app/pull/42",
                    "isPrimary": true,
                }),
            )
            .await?,
        201,
    );
    let pr2_id = str_field(&pr2, "id");
    let listed = work_products(&admin, &issue).await?;
    assert_eq!(
        strs(&listed, "id"),
        [pr2_id.as_str(), branch_id.as_str(), pr1_id.as_str()],
        "primary first, then most recently updated: {listed}"
    );
    assert_eq!(primaries(&listed), [true, true, false], "{listed}");

    // An update that makes the first primary again takes it back, the same way.
    clock_past(&pr2["updatedAt"]).await?;
    let patched = answered(
        admin
            .patch(
                &one(&pr1_id),
                json!({
                    "isPrimary": true,
                    "status": "ready_for_review",
                    "reviewState": "needs_board_review",
                }),
            )
            .await?,
        200,
    );
    assert_eq!(patched["id"], pr1_id.as_str(), "{patched}");
    assert_eq!(patched["isPrimary"], true, "{patched}");
    assert_eq!(patched["status"], "ready_for_review", "{patched}");
    assert_eq!(patched["reviewState"], "needs_board_review", "{patched}");
    assert_eq!(
        patched["title"], "Release 1.4",
        "what it did not send stays: {patched}"
    );
    assert_eq!(patched["url"], pr1["url"], "{patched}");
    let listed = work_products(&admin, &issue).await?;
    assert_eq!(
        strs(&listed, "id"),
        [pr1_id.as_str(), branch_id.as_str(), pr2_id.as_str()],
        "{listed}"
    );
    assert_eq!(primaries(&listed), [true, true, false], "{listed}");

    // Past the primaries, the most recently updated first.
    clock_past(&patched["updatedAt"]).await?;
    let notes = answered(
        admin
            .post(
                &products,
                json!({
                    "type": "document",
                    "provider": "notion",
                    "title": "Release notes",
                    "summary": "What changed in 1.4",
                }),
            )
            .await?,
        201,
    );
    let notes_id = str_field(&notes, "id");
    assert_eq!(notes["isPrimary"], false, "{notes}");
    assert_eq!(notes["summary"], "What changed in 1.4", "{notes}");
    let listed = work_products(&admin, &issue).await?;
    assert_eq!(
        strs(&listed, "id"),
        [
            pr1_id.as_str(),
            branch_id.as_str(),
            notes_id.as_str(),
            pr2_id.as_str()
        ],
        "{listed}"
    );
    clock_past(&notes["updatedAt"]).await?;
    let merged = answered(
        admin
            .patch(&one(&pr2_id), json!({ "status": "merged" }))
            .await?,
        200,
    );
    assert_eq!(merged["status"], "merged", "{merged}");
    assert_eq!(merged["isPrimary"], false, "{merged}");
    let listed = work_products(&admin, &issue).await?;
    assert_eq!(
        strs(&listed, "id"),
        [
            pr1_id.as_str(),
            branch_id.as_str(),
            pr2_id.as_str(),
            notes_id.as_str()
        ],
        "{listed}"
    );

    // Paperclip's schema: refused as bad input, and nothing changed.
    let before = work_products(&admin, &issue).await?;
    for bad in [
        json!({ "type": "video", "provider": "github", "title": "x" }),
        json!({ "type": "branch", "provider": "github" }),
        json!({ "type": "branch", "provider": "github", "title": "" }),
        json!({ "type": "branch", "provider": "", "title": "x" }),
        json!({ "type": "branch", "provider": "github", "title": "x", "status": "shipped" }),
        json!({ "type": "branch", "provider": "github", "title": "x", "reviewState": "maybe" }),
        json!({ "type": "branch", "provider": "github", "title": "x", "healthStatus": "fine" }),
    ] {
        let reply = admin.post(&products, bad.clone()).await?;
        assert_eq!(reply.status.as_u16(), 400, "{bad}: {}", reply.body);
    }
    let reply = admin
        .patch(&one(&pr1_id), json!({ "type": "video" }))
        .await?;
    assert_eq!(reply.status.as_u16(), 400, "{}", reply.body);
    let reply = admin
        .patch(&one(NO_SUCH_ID), json!({ "status": "closed" }))
        .await?;
    assert_eq!(reply.status.as_u16(), 404, "{}", reply.body);
    assert_eq!(
        work_products(&admin, &issue).await?,
        before,
        "a refused write changed the list"
    );

    // A Paperclip artifact is backed by an attachment of its own issue; its metadata is the
    // attachment's, whatever the client sent.
    let files = tempfile::tempdir()?;
    let report_path = file_with(files.path(), "release.md", b"# Release 1.4\n\nShipped.\n")?;
    let uploads = |issue: &str| format!("/api/companies/{cid}/issues/{issue}/attachments");
    let report = answered(
        upload(
            &base,
            &uploads(&issue),
            &node.admin_token,
            None,
            &[file_part(&report_path, "text/markdown")],
        )
        .await?,
        201,
    );
    let elsewhere = todo_issue(&node, "another release").await?;
    let foreign = answered(
        upload(
            &base,
            &uploads(&elsewhere),
            &node.admin_token,
            None,
            &[file_part(&report_path, "text/markdown")],
        )
        .await?,
        201,
    );
    let refused = admin
        .post(
            &products,
            json!({
                "type": "artifact",
                "provider": "paperclip",
                "title": "Another issue's file",
                "metadata": { "attachmentId": foreign["id"] },
            }),
        )
        .await?;
    assert_eq!(refused.status.as_u16(), 422, "{}", refused.body);
    let artifact = answered(
        admin
            .post(
                &products,
                json!({
                    "type": "artifact",
                    "provider": "paperclip",
                    "title": "Release report",
                    "metadata": {
                        "attachmentId": report["id"],
                        "contentPath": "/somewhere/else",
                        "byteSize": 1,
                    },
                }),
            )
            .await?,
        201,
    );
    assert_eq!(
        artifact["metadata"],
        artifact_metadata(&report),
        "{artifact}"
    );
    assert!(artifact["createdByRunId"].is_null(), "{artifact}");

    // A run's upload makes its artifact work product; the same run's post for that file (what
    // Paperclip's helper sends next) updates it rather than making a second.
    let (agent, key) = node.agent("deliverer").await?;
    let run = node.start_run(&agent).await?;
    let sales = b"week,shipped\n1,3\n2,5\n";
    let sales_path = file_with(files.path(), "sales.csv", sales)?;
    let uploaded = answered(
        upload(
            &base,
            &uploads(&issue),
            &key,
            Some(run.as_str()),
            &[file_part(&sales_path, "text/csv")],
        )
        .await?,
        201,
    );
    let uploaded_id =
        check_attachment(&uploaded, &issue, &cid, "sales.csv", "text/csv", sales).await?;
    assert_eq!(uploaded["originatingRunId"], run.as_str(), "{uploaded}");
    assert_eq!(uploaded["createdByAgentId"], agent.as_str(), "{uploaded}");
    assert!(uploaded["createdByUserId"].is_null(), "{uploaded}");
    let of_upload = |list: &Value| -> Vec<Value> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["externalId"] == uploaded_id.as_str())
            .cloned()
            .collect()
    };
    let made = of_upload(&work_products(&admin, &issue).await?);
    assert_eq!(made.len(), 1, "{made:#?}");
    let auto = &made[0];
    assert_eq!(auto["type"], "artifact", "{auto}");
    assert_eq!(auto["provider"], "paperclip", "{auto}");
    assert_eq!(auto["title"], "sales.csv", "{auto}");
    assert_eq!(auto["status"], "active", "{auto}");
    assert_eq!(auto["reviewState"], "none", "{auto}");
    assert_eq!(auto["isPrimary"], false, "{auto}");
    assert_eq!(auto["healthStatus"], "unknown", "{auto}");
    assert_eq!(auto["createdByRunId"], run.as_str(), "{auto}");
    assert_eq!(auto["metadata"], artifact_metadata(&uploaded), "{auto}");
    let as_agent = node.http().with_token(&key).with_run(&run);
    let updated = answered(
        as_agent
            .post(
                &products,
                json!({
                    "type": "artifact",
                    "provider": "paperclip",
                    "title": "Sales chart",
                    "status": "ready_for_review",
                    "reviewState": "none",
                    "isPrimary": true,
                    "healthStatus": "unknown",
                    "createdByRunId": run,
                    "metadata": artifact_metadata(&uploaded),
                }),
            )
            .await?,
        201,
    );
    assert_eq!(updated["id"], auto["id"], "{updated}");
    assert_eq!(updated["title"], "Sales chart", "{updated}");
    assert_eq!(updated["status"], "ready_for_review", "{updated}");
    assert_eq!(updated["isPrimary"], true, "{updated}");
    assert_eq!(updated["externalId"], uploaded_id.as_str(), "{updated}");
    assert_eq!(updated["createdByRunId"], run.as_str(), "{updated}");
    let made = of_upload(&work_products(&admin, &issue).await?);
    assert_eq!(
        made.len(),
        1,
        "a second work product for one file: {made:#?}"
    );
    // An agent's work product names its own run, no other.
    let (other, _) = node.agent("someone-else").await?;
    let other_run = node.start_run(&other).await?;
    let forged = as_agent
        .post(
            &products,
            json!({
                "type": "branch",
                "provider": "github",
                "title": "not mine",
                "createdByRunId": other_run,
            }),
        )
        .await?;
    assert_eq!(forged.status.as_u16(), 403, "{}", forged.body);

    // A delete answers with what it removed.
    let removed = answered(admin.delete(&one(&notes_id)).await?, 200);
    assert_eq!(removed["id"], notes_id.as_str(), "{removed}");
    assert_eq!(removed["title"], "Release notes", "{removed}");
    let listed = work_products(&admin, &issue).await?;
    assert!(
        !strs(&listed, "id").contains(&notes_id.as_str()),
        "{listed}"
    );
    let again = admin.delete(&one(&notes_id)).await?;
    assert_eq!(again.status.as_u16(), 404, "{}", again.body);
    Ok(())
}

/// Paperclip's `issue attachment:*` and `issue work-product*` commands, unchanged, against a
/// `roost dev`: the file goes up and comes back the same, work products are made, changed,
/// listed primary first and deleted, and a deleted attachment cannot be downloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_cli_uploads_downloads_and_deletes_attachments_and_work_products(
) -> anyhow::Result<()> {
    let (cli, _dir, roost) = crate::paperclip_cli::start().await?;
    let base = roost.base_url.clone();
    let admin = roost.admin_token.clone();
    let op = |args: &[&str]| cli.run(&base, &admin, args);
    let http = Http::new(&base).with_token(&admin);
    let cid = roost.company_id.clone();
    let issue = crate::paperclip_cli::todo_issue(&http, &cid, "the board deck").await?;
    let files = tempfile::tempdir()?;
    let revenue = b"quarter,revenue\nQ1,120\nQ2,135\n";
    let file = file_with(files.path(), "revenue.csv", revenue)?;
    let file = file.to_string_lossy().into_owned();

    let uploaded = op(&[
        "issue",
        "attachment:upload",
        &issue,
        "-C",
        &cid,
        "--file",
        &file,
    ])?
    .json()?;
    let id = check_attachment(&uploaded, &issue, &cid, "revenue.csv", "text/csv", revenue).await?;
    assert!(uploaded["originatingRunId"].is_null(), "{uploaded}");
    let listed = op(&["issue", "attachments", &issue])?.json()?;
    assert_eq!(strs(&listed, "id"), [id.as_str()], "{listed}");
    let out = files.path().join("downloaded.csv");
    let out = out.to_string_lossy().into_owned();
    let saved = op(&["issue", "attachment:download", &id, "--out", &out])?.json()?;
    assert_eq!(saved["bytes"], revenue.len() as u64, "{saved}");
    assert_eq!(std::fs::read(&out)?, revenue, "the file came back changed");
    // The board's upload is no run's: no work product of its own.
    let products = op(&["issue", "work-products", &issue])?.json()?;
    assert_eq!(products, json!([]), "{products}");

    let pr = op(&[
        "issue",
        "work-product:create",
        &issue,
        "--payload-json",
        r#"{"type":"pull_request","provider":"github","title":"Deck numbers","url":"https://github.com/acme/deck/pull/7","isPrimary":true}"#,
    ])?
    .json()?;
    let pr_id = str_field(&pr, "id");
    assert_eq!(pr["issueId"], issue.as_str(), "{pr}");
    assert_eq!(pr["title"], "Deck numbers", "{pr}");
    assert_eq!(pr["isPrimary"], true, "{pr}");
    assert_eq!(pr["status"], "active", "{pr}");
    let payload = json!({
        "type": "artifact",
        "provider": "paperclip",
        "title": "Revenue table",
        "metadata": { "attachmentId": id },
    })
    .to_string();
    let artifact = op(&[
        "issue",
        "work-product:create",
        &issue,
        "--payload-json",
        &payload,
    ])?
    .json()?;
    let artifact_id = str_field(&artifact, "id");
    assert_eq!(
        artifact["metadata"],
        artifact_metadata(&uploaded),
        "{artifact}"
    );
    let updated = op(&[
        "issue",
        "work-product:update",
        &artifact_id,
        "--payload-json",
        r#"{"status":"ready_for_review"}"#,
    ])?
    .json()?;
    assert_eq!(updated["id"], artifact_id.as_str(), "{updated}");
    assert_eq!(updated["status"], "ready_for_review", "{updated}");
    assert_eq!(updated["title"], "Revenue table", "{updated}");
    let products = op(&["issue", "work-products", &issue])?.json()?;
    assert_eq!(
        strs(&products, "id"),
        [pr_id.as_str(), artifact_id.as_str()],
        "the primary first: {products}"
    );

    let removed = op(&["issue", "work-product:delete", &artifact_id])?.json()?;
    assert_eq!(removed["id"], artifact_id.as_str(), "{removed}");
    let products = op(&["issue", "work-products", &issue])?.json()?;
    assert_eq!(strs(&products, "id"), [pr_id.as_str()], "{products}");
    let deleted = op(&["issue", "attachment:delete", &id])?.json()?;
    assert_eq!(deleted["ok"], true, "{deleted}");
    let listed = op(&["issue", "attachments", &issue])?.json()?;
    assert_eq!(listed, json!([]), "{listed}");
    let again = files.path().join("again.csv");
    let again = again.to_string_lossy().into_owned();
    let missing = op(&["issue", "attachment:download", &id, "--out", &again])?;
    assert!(
        !missing.ok,
        "a deleted attachment was downloaded: {}",
        missing.stdout
    );
    assert!(missing.stderr.contains("404"), "{}", missing.stderr);
    Ok(())
}
