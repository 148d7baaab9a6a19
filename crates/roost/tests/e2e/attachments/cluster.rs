//! An attachment's bytes, uploaded through the leader or a follower, the same on every node.

use super::*;

/// Waits until every node of `c` serves `path` and checks each served `expected`, byte for byte.
async fn same_on_every_node(c: &TestCluster, path: &str, expected: &[u8]) -> anyhow::Result<()> {
    for id in c.ids() {
        let base = c.admin(id).base().to_string();
        let served = wait_for(&format!("node {id} to serve {path}"), WAIT, || async {
            let got = download(&base, &c.admin_token, path, None).await.ok()?;
            (got.status == 200).then_some(got.bytes)
        })
        .await?;
        assert!(
            served == expected,
            "node {id} served other bytes: {}",
            first_difference(&served, expected)
        );
    }
    Ok(())
}

/// An attachment's bytes travel with the log: uploaded through the leader or a follower, every
/// node of a 3-node cluster serves the same bytes, and a delete reaches every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachment_bytes_are_the_same_on_every_node() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let leader = c.leader().await?;
    let follower = c
        .ids()
        .into_iter()
        .find(|id| *id != leader)
        .ok_or_else(|| anyhow::anyhow!("no follower"))?;
    let issue = c
        .admin(leader)
        .post(
            &format!("/api/companies/{}/issues", c.company_id),
            json!({ "title": "a replicated deliverable", "status": "todo" }),
        )
        .await?
        .ok()?;
    let issue = str_field(&issue, "id");
    let uploads = format!("/api/companies/{}/issues/{issue}/attachments", c.company_id);
    let files = tempfile::tempdir()?;

    // Through the leader, and through a follower (as a load balancer in front of any node
    // would send it); every node serves each file's exact bytes.
    let mut uploaded = Vec::new();
    let sends = [
        (leader, "render.bin", 0x5eed),
        (follower, "take-2.bin", 0xbeef),
    ];
    for (through, name, seed) in sends {
        let bytes = pseudo_random(1024 * 1024 + 7, seed);
        let path = file_with(files.path(), name, &bytes)?;
        let a = answered(
            upload(
                c.admin(through).base(),
                &uploads,
                &c.admin_token,
                None,
                &[file_part(&path, "application/octet-stream")],
            )
            .await?,
            201,
        );
        check_attachment(
            &a,
            &issue,
            &c.company_id,
            name,
            "application/octet-stream",
            &bytes,
        )
        .await?;
        same_on_every_node(&c, &str_field(&a, "contentPath"), &bytes).await?;
        uploaded.push(a);
    }

    // A delete reaches every node.
    let first = str_field(&uploaded[0], "id");
    answered(
        c.admin(leader)
            .delete(&format!("/api/attachments/{first}"))
            .await?,
        200,
    );
    let content = str_field(&uploaded[0], "contentPath");
    for id in c.ids() {
        let base = c.admin(id).base().to_string();
        wait_for(&format!("node {id} to drop {content}"), WAIT, || async {
            let got = download(&base, &c.admin_token, &content, None).await.ok()?;
            (got.status == 404).then_some(())
        })
        .await?;
    }
    c.converged(WAIT).await?;
    c.shutdown().await;
    Ok(())
}
