//! Checkout leases: the race, fencing tokens and stale runs.

use serde_json::json;

use roost_testkit::TestNode;

use crate::support::*;

/// Two agents race for one issue, 100 rounds: exactly one wins each round, the loser gets 409
/// naming the holder, and the fencing token of every win is larger than the one before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_agents_race_for_one_issue_and_exactly_one_wins_each_round() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "contended").await?;
    let (a, a_key) = node.agent("racer-a").await?;
    let (b, b_key) = node.agent("racer-b").await?;
    let mut last_token = 0u64;
    for round in 0..100 {
        let run_a = node.start_run(&a).await?;
        let run_b = node.start_run(&b).await?;
        let http_a = node.http().with_token(&a_key).with_run(&run_a);
        let http_b = node.http().with_token(&b_key).with_run(&run_b);
        let path = format!("/api/issues/{issue}/checkout");
        let body_a = json!({ "agentId": a, "expectedStatuses": ["todo"] });
        let body_b = json!({ "agentId": b, "expectedStatuses": ["todo"] });
        let (pa, pb) = (path.clone(), path.clone());
        let ta = tokio::spawn(async move { http_a.post(&pa, body_a).await });
        let tb = tokio::spawn(async move { http_b.post(&pb, body_b).await });
        let (ra, rb) = (ta.await??, tb.await??);

        let (winner, loser, winner_agent, winner_run, winner_http) =
            match (ra.status.as_u16(), rb.status.as_u16()) {
                (200, 409) => (
                    ra,
                    rb,
                    &a,
                    &run_a,
                    node.http().with_token(&a_key).with_run(&run_a),
                ),
                (409, 200) => (
                    rb,
                    ra,
                    &b,
                    &run_b,
                    node.http().with_token(&b_key).with_run(&run_b),
                ),
                other => anyhow::bail!(
                    "round {round}: expected one 200 and one 409, got {other:?}: {} / {}",
                    ra.body,
                    rb.body
                ),
            };
        assert_eq!(
            loser.code(),
            "checkout_conflict",
            "round {round}: {}",
            loser.body
        );
        assert_eq!(
            loser.body["details"]["assigneeAgentId"],
            json!(winner_agent),
            "round {round}"
        );
        assert_eq!(
            loser.body["details"]["checkoutRunId"],
            json!(winner_run),
            "round {round}"
        );
        let token = winner.body["checkout"]["token"].as_u64().unwrap_or(0);
        assert!(
            token > last_token,
            "round {round}: token {token} not above {last_token}"
        );
        assert_eq!(
            loser.body["details"]["checkoutToken"],
            json!(token),
            "round {round}"
        );
        last_token = token;
        winner_http
            .post(&format!("/api/issues/{issue}/release"), json!({}))
            .await?
            .ok()?;
    }
    node.shutdown().await
}

#[tokio::test]
async fn the_same_run_checking_out_again_gets_the_same_token() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "idempotent").await?;
    let s = agent_session(&node, "solo").await?;
    let body = json!({ "agentId": s.agent_id, "expectedStatuses": ["todo"] });
    let first = s
        .http
        .post(&format!("/api/issues/{issue}/checkout"), body.clone())
        .await?
        .ok()?;
    let head = activity_head(&node).await?;
    let again = s
        .http
        .post(&format!("/api/issues/{issue}/checkout"), body)
        .await?
        .ok()?;
    assert_eq!(first["checkout"]["token"], again["checkout"]["token"]);
    assert_eq!(
        activity_head(&node).await?,
        head,
        "a repeated checkout writes nothing"
    );
    node.shutdown().await
}

/// A write made for a run that has ended is refused with `409 stale_run` and changes nothing.
#[tokio::test]
async fn writes_for_a_run_that_ended_are_fenced_with_stale_run() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "fenced").await?;
    let s = agent_session(&node, "worker-bee").await?;
    s.http
        .post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": s.agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
    node.admin
        .post(
            &format!("/api/heartbeat-runs/{}/finish", s.run_id),
            json!({ "status": "lost" }),
        )
        .await?
        .ok()?;

    let before_issue = node
        .admin
        .get(&format!("/api/issues/{issue}"))
        .await?
        .ok()?;
    let before_head = activity_head(&node).await?;
    let attempts = [
        s.http
            .post(
                &format!("/api/issues/{issue}/comments"),
                json!({ "body": "late news" }),
            )
            .await?,
        s.http
            .patch(
                &format!("/api/issues/{issue}"),
                json!({ "status": "done", "comment": "finished" }),
            )
            .await?,
        s.http
            .post(&format!("/api/issues/{issue}/release"), json!({}))
            .await?,
        s.http
            .post(
                &format!("/api/issues/{issue}/checkout"),
                json!({ "agentId": s.agent_id, "expectedStatuses": ["in_progress"] }),
            )
            .await?,
    ];
    for reply in attempts {
        assert_eq!(reply.status.as_u16(), 409, "{}", reply.body);
        assert_eq!(reply.code(), "stale_run", "{}", reply.body);
        assert_eq!(reply.body["details"]["runId"], json!(s.run_id));
    }
    assert_eq!(
        node.admin
            .get(&format!("/api/issues/{issue}"))
            .await?
            .ok()?,
        before_issue
    );
    assert_eq!(activity_head(&node).await?, before_head);
    let comments = node
        .admin
        .get(&format!("/api/issues/{issue}/comments"))
        .await?
        .ok()?;
    assert_eq!(comments.as_array().map(Vec::len), Some(0));
    node.shutdown().await
}

/// The run that ended released its checkout in the same command: the next agent is not blocked.
#[tokio::test]
async fn a_dead_holder_never_blocks_the_next_checkout() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let issue = todo_issue(&node, "handover").await?;
    let first = agent_session(&node, "first").await?;
    let second = agent_session(&node, "second").await?;
    let checkout = |s: &AgentSession| json!({ "agentId": s.agent_id, "expectedStatuses": ["todo", "in_progress"] });
    let won = first
        .http
        .post(&format!("/api/issues/{issue}/checkout"), checkout(&first))
        .await?
        .ok()?;
    node.admin
        .post(
            &format!("/api/heartbeat-runs/{}/finish", first.run_id),
            json!({ "status": "failed" }),
        )
        .await?
        .ok()?;
    let next = second
        .http
        .post(&format!("/api/issues/{issue}/checkout"), checkout(&second))
        .await?
        .ok()?;
    assert!(next["checkout"]["token"].as_u64() > won["checkout"]["token"].as_u64());
    assert_eq!(next["assigneeAgentId"], json!(second.agent_id));
    node.shutdown().await
}
