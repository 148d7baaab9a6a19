//! Paperclip's own artifact helper (`scripts/paperclip-upload-artifact.sh` of its skill), run
//! unchanged by an agent of a `roost dev`: the file, its attachment and its work product.

use super::*;
use crate::support::roost_binary;
use roost_testkit::RoostProcess;

/// The agent of the first test: writes its report where it runs, then hands it over with
/// Paperclip's helper script, as Paperclip's skill tells an agent of a non-native adapter to
/// deliver a file. The helper's JSON answer goes to `$OUT` and its complaints to `$ERR`, for
/// the test (the helper takes `--output json`; it has no `--json`).
const REPORTER: &str = r#"set -e
printf '%s' "$REPORT" > report.md
bash "$HELPER" report.md --title "Weekly report" --summary "Three tasks shipped" \
    --output json > "$OUT" 2> "$ERR"
"#;
const REPORT: &str = "# Weekly report\n\n- Shipped attachments: 3 of 3 tasks done.\n";

/// What the helper printed, for failure messages.
fn helper_output(out: &Path, err: &Path) -> String {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("({e})"));
    format!(
        "--- helper stdout ---\n{}\n--- helper stderr ---\n{}",
        read(out),
        read(err)
    )
}

/// What a run printed (the chunks of its log events), for failure messages.
async fn run_output(admin: &Http, run: &str) -> String {
    let Ok(Ok(events)) = admin
        .get(&format!("/api/heartbeat-runs/{run}/events"))
        .await
        .map(Reply::ok)
    else {
        return "(no run log)".into();
    };
    let chunks: String = events
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["payload"]["chunk"].as_str())
        .collect();
    format!("--- run {run} log ---\n{chunks}")
}

/// Paperclip's `paperclip-upload-artifact.sh` (its skill's way to hand over a file), unchanged,
/// run by a `process` agent of a real `roost dev` with the run's environment: the file is the
/// issue's attachment, made by the run, and its one work product is the one the upload made,
/// updated by the helper's post from the same run (not a second one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_artifact_helper_uploads_a_deliverable_and_its_work_product(
) -> anyhow::Result<()> {
    let helper =
        tokio::task::spawn_blocking(|| crate::npm::pack_file(PAPERCLIP_SERVER, UPLOAD_HELPER))
            .await??;
    let dir = tempfile::tempdir()?;
    let roost = RoostProcess::spawn_dev(&roost_binary(), dir.path(), WAIT)?;
    let admin = Http::new(&roost.base_url).with_token(&roost.admin_token);
    let cid = roost.company_id.clone();
    let out = dir.path().join("helper.json");
    let err = dir.path().join("helper.err");

    let agent = admin
        .post(
            &format!("/api/companies/{cid}/agents"),
            json!({
                "name": "reporter",
                "role": "engineer",
                "adapterType": "process",
                "adapterConfig": {
                    "command": "sh",
                    "args": ["-c", REPORTER],
                    "env": {
                        "HELPER": helper,
                        "OUT": out,
                        "ERR": err,
                        "REPORT": REPORT,
                        // The helper's per-upload lock files, away from the machine's /tmp.
                        "PAPERCLIP_HELPER_STATE_DIR": dir.path().join("helper-state"),
                    },
                },
            }),
        )
        .await?
        .ok()?;
    let agent = str_field(&agent, "id");
    // Assigned and `todo`: this wakes the agent, and the dev worker runs it.
    let issue = admin
        .post(
            &format!("/api/companies/{cid}/issues"),
            json!({
                "title": "Write the weekly report",
                "status": "todo",
                "assigneeAgentId": agent,
            }),
        )
        .await?
        .ok()?;
    let issue = str_field(&issue, "id");

    // Until the run has ended: the helper's work product post comes after its upload, so the
    // attachment alone being listed would race it.
    let runs = crate::support::runs_ended(&admin, &cid, &agent, WAIT)
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", helper_output(&out, &err)))?;
    assert_eq!(runs.len(), 1, "one run for one assignment: {runs:#?}");
    let run = &runs[0];
    let run_id = str_field(run, "id");
    let said = format!(
        "{}\n{}",
        helper_output(&out, &err),
        run_output(&admin, &run_id).await
    );
    assert_eq!(run["status"], "succeeded", "{run}\n{said}");
    assert_eq!(run["issueId"], issue.as_str(), "{run}");

    // The file is the issue's one attachment, made by the agent in that run.
    let listed = admin
        .get(&format!("/api/issues/{issue}/attachments"))
        .await?
        .ok()?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}\n{said}");
    let attachment = &listed[0];
    let id = check_attachment(
        attachment,
        &issue,
        &cid,
        "report.md",
        "text/markdown",
        REPORT.as_bytes(),
    )
    .await?;
    assert_eq!(
        attachment["originatingRunId"],
        run_id.as_str(),
        "{attachment}"
    );
    assert_eq!(
        attachment["createdByAgentId"],
        agent.as_str(),
        "{attachment}"
    );
    assert!(attachment["createdByUserId"].is_null(), "{attachment}");
    let content = str_field(attachment, "contentPath");
    let got = download(&roost.base_url, &roost.admin_token, &content, None).await?;
    assert_eq!(got.status, 200);
    assert_eq!(got.bytes, REPORT.as_bytes(), "the bytes the agent wrote");

    // One work product: the artifact the run's upload made, with what the helper posted.
    let products = work_products(&admin, &issue).await?;
    assert_eq!(
        products.as_array().map(Vec::len),
        Some(1),
        "{products}\n{said}"
    );
    let product = &products[0];
    assert_eq!(product["type"], "artifact", "{product}");
    assert_eq!(product["provider"], "paperclip", "{product}");
    assert_eq!(product["externalId"], id.as_str(), "{product}");
    assert_eq!(product["title"], "Weekly report", "{product}");
    assert_eq!(product["summary"], "Three tasks shipped", "{product}");
    // The helper's defaults: ready for review, primary for its type.
    assert_eq!(product["status"], "ready_for_review", "{product}");
    assert_eq!(product["isPrimary"], true, "{product}");
    assert_eq!(product["reviewState"], "none", "{product}");
    assert_eq!(product["healthStatus"], "unknown", "{product}");
    assert_eq!(product["createdByRunId"], run_id.as_str(), "{product}");
    assert_eq!(product["issueId"], issue.as_str(), "{product}");
    assert_eq!(
        product["metadata"]["attachmentId"],
        id.as_str(),
        "{product}"
    );
    assert_eq!(
        product["metadata"]["downloadPath"],
        format!("{content}?download=1"),
        "{product}"
    );
    assert_eq!(
        product["metadata"],
        artifact_metadata(attachment),
        "{product}"
    );

    // The helper's own answer names both.
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(&out)?)
        .map_err(|e| anyhow::anyhow!("the helper's answer is not JSON ({e})\n{said}"))?;
    assert_eq!(answer["attachment"]["id"], id.as_str(), "{answer}");
    assert_eq!(answer["workProduct"]["id"], product["id"], "{answer}");
    Ok(())
}
