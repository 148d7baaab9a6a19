//! Issue lists, filters and the agent inbox read pages in issue-number order from indexes that
//! follow creation, reassignment and re-parenting.

use serde_json::{json, Value};

use roost_testkit::{Http, TestNode};

use crate::support::str_field;

async fn ids(http: &Http, path: &str) -> anyhow::Result<Vec<String>> {
    let list = http.get(path).await?.ok()?;
    Ok(list
        .as_array()
        .map(|a| a.iter().map(|i| str_field(i, "id")).collect())
        .unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_and_the_inbox_follow_issue_order_limits_filters_and_reassignment(
) -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let (a, a_key) = node.agent("lister-a").await?;
    let (b, _) = node.agent("lister-b").await?;
    let mut made = Vec::new();
    for n in 0..12 {
        let assignee = if n % 2 == 0 { &a } else { &b };
        let status = if n == 10 { "done" } else { "todo" };
        let body =
            json!({ "title": format!("issue {n}"), "status": status, "assigneeAgentId": assignee });
        made.push(str_field(&node.issue(body).await?, "id"));
    }
    let child_body = json!({ "title": "child", "status": "todo", "parentId": made[1] });
    let child = str_field(&node.issue(child_body).await?, "id");
    let base = format!("/api/companies/{}/issues", node.company_id);
    let admin = &node.admin;

    assert_eq!(ids(admin, &format!("{base}?limit=5")).await?, made[..5]);
    let a_todo: Vec<String> = [0, 2, 4, 6, 8].iter().map(|n| made[*n].clone()).collect();
    assert_eq!(
        ids(admin, &format!("{base}?assigneeAgentId={a}&status=todo")).await?,
        a_todo,
        "issue 10 is done and b's are not a's"
    );
    assert_eq!(
        ids(
            admin,
            &format!("{base}?assigneeAgentId={a}&status=todo&limit=2")
        )
        .await?,
        a_todo[..2]
    );
    assert_eq!(
        ids(admin, &format!("{base}?parentId={}", made[1])).await?,
        std::slice::from_ref(&child)
    );

    // Issue 0 moves to b and the child moves under issue 3: every list follows.
    let moved = json!({ "assigneeAgentId": b });
    admin
        .patch(&format!("/api/issues/{}", made[0]), moved)
        .await?
        .ok()?;
    let reparented = json!({ "parentId": made[3] });
    admin
        .patch(&format!("/api/issues/{child}"), reparented)
        .await?
        .ok()?;
    assert_eq!(
        ids(admin, &format!("{base}?assigneeAgentId={a}&status=todo")).await?,
        a_todo[1..]
    );
    assert!(ids(admin, &format!("{base}?parentId={}", made[1]))
        .await?
        .is_empty());
    assert_eq!(
        ids(admin, &format!("{base}?parentId={}", made[3])).await?,
        [child]
    );
    let inbox: Value = node
        .http()
        .with_token(&a_key)
        .get("/api/agents/me/inbox-lite")
        .await?
        .ok()?;
    let inbox_ids: Vec<String> = inbox
        .as_array()
        .map(|v| v.iter().map(|i| str_field(i, "id")).collect())
        .unwrap_or_default();
    assert_eq!(inbox_ids, a_todo[1..], "a's open issues, in order");
    node.shutdown().await?;
    Ok(())
}

/// Paperclip's list filters `projectId`, `q` and `offset` (and `parentIssueId`) were refused
/// as unknown fields: its CLI's `issue list --project-id` and its skill's search got a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paperclips_project_search_and_offset_filters_were_refused() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("/api/companies/{}/issues", node.company_id);
    let project = node
        .admin
        .post(
            &format!("/api/companies/{}/projects", node.company_id),
            json!({ "name": "Launch" }),
        )
        .await?
        .ok()?;
    let project_id = str_field(&project, "id");
    let mut made = Vec::new();
    for (n, title, description, in_project) in [
        (0, "Fix the login page", "", true),
        (1, "Write release notes", "mentions the LOGIN flow", false),
        (2, "Tidy the build", "", true),
    ] {
        let mut body = json!({ "title": title, "status": "todo", "description": description });
        if in_project {
            body["projectId"] = json!(project_id);
        }
        made.push((n, str_field(&node.issue(body).await?, "id")));
    }
    let id = |n: usize| made[n].1.clone();
    assert_eq!(
        ids(&node.admin, &format!("{base}?projectId={project_id}")).await?,
        [id(0), id(2)]
    );
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=login")).await?,
        [id(0), id(1)],
        "title or description, any case"
    );
    assert_eq!(
        ids(
            &node.admin,
            &format!("{base}?projectId={project_id}&q=login")
        )
        .await?,
        [id(0)],
        "a search within a project"
    );
    assert_eq!(
        ids(&node.admin, &format!("{base}?offset=1&limit=1")).await?,
        [id(1)]
    );
    let unknown = node.admin.get(&format!("{base}?colour=red")).await?;
    assert_eq!(unknown.status.as_u16(), 400, "{}", unknown.body);
    node.shutdown().await
}

/// Paperclip's `q` finds an issue by its comments too; Roost's read titles, identifiers and
/// descriptions only, so an agent searching for what was said in a thread found nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_missed_issues_whose_comments_hold_the_text() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = format!("/api/companies/{}/issues", node.company_id);
    let mut made = Vec::new();
    for (title, status) in [
        ("Fix the login page", "todo"),
        ("Tidy the build", "todo"),
        ("Ship the docs", "done"),
        ("Plan the offsite", "todo"),
    ] {
        made.push(str_field(
            &node
                .issue(json!({ "title": title, "status": status }))
                .await?,
            "id",
        ));
    }
    for (n, body) in [
        (1, "The LOGIN form breaks the build"),
        (2, "login copy reviewed"),
        (3, "budget is 100% spent, Über alles"),
    ] {
        node.admin
            .post(
                &format!("/api/issues/{}/comments", made[n]),
                json!({ "body": body }),
            )
            .await?
            .ok()?;
    }
    let id = |n: usize| made[n].clone();
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=login")).await?,
        [id(0), id(1)],
        "its title, or a comment in any case; open issues only without a status"
    );
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=login&status=done")).await?,
        [id(2)],
        "a closed issue's comments when its status is asked for"
    );
    // Wildcards of SQL are the text itself: `1%0` is not `1`, anything, then `0`, and `*` or
    // `?` is no match-all.
    assert!(ids(&node.admin, &format!("{base}?q=%2A")).await?.is_empty());
    assert!(ids(&node.admin, &format!("{base}?q=%3F")).await?.is_empty());
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=100%25")).await?,
        [id(3)]
    );
    assert!(ids(&node.admin, &format!("{base}?q=1%250"))
        .await?
        .is_empty());
    assert!(ids(&node.admin, &format!("{base}?q=0_%25"))
        .await?
        .is_empty());
    // Letters beyond ASCII in any case, as in a title.
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=%C3%BCBER")).await?,
        [id(3)]
    );
    let long = node
        .admin
        .get(&format!("{base}?q={}", "x".repeat(1_001)))
        .await?;
    assert_eq!(long.status.as_u16(), 400, "{}", long.body);
    assert_eq!(
        ids(&node.admin, &format!("{base}?q=login&offset=1&limit=1")).await?,
        [id(1)],
        "pages count comment matches"
    );
    node.shutdown().await
}

/// Paperclip's `GET /api/issues/{id}` carries `blockedBy`, `blocks` and `ancestors`, and its
/// skill reads the blockers there; Roost sent the bare issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issue_read_lacked_its_blockers_blocked_issues_and_ancestors() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let parent = str_field(&node.issue(json!({ "title": "epic" })).await?, "id");
    let blocker = str_field(&node.issue(json!({ "title": "schema" })).await?, "id");
    let body = json!({ "title": "api", "parentId": parent, "blockedByIssueIds": [blocker] });
    let dependent = str_field(&node.issue(body).await?, "id");
    let read = node
        .admin
        .get(&format!("/api/issues/{dependent}"))
        .await?
        .ok()?;
    assert_eq!(
        read["id"],
        dependent.as_str(),
        "the issue's own fields stay on top"
    );
    assert_eq!(read["blockedBy"][0]["id"], blocker.as_str(), "{read}");
    assert_eq!(read["blockedBy"][0]["status"], "backlog", "{read}");
    assert_eq!(read["ancestors"][0]["id"], parent.as_str(), "{read}");
    assert_eq!(read["blocks"], json!([]), "{read}");
    let blocking = node
        .admin
        .get(&format!("/api/issues/{blocker}"))
        .await?
        .ok()?;
    assert_eq!(
        blocking["blocks"][0]["id"],
        dependent.as_str(),
        "{blocking}"
    );
    node.shutdown().await
}
