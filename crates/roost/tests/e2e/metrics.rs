//! `/metrics`: the Prometheus text format, read by a strict parser below; the
//! named series are there, hold no tenant's ids, and move under load.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use roost_testkit::{wait_for, TestCluster, TestNode};
use serde_json::json;

/// One sample line.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition.
#[derive(Debug, Default)]
struct Scrape {
    samples: Vec<Sample>,
    /// Family name → type, from `# TYPE`.
    types: BTreeMap<String, String>,
}

fn valid_name(name: &str, colon: bool) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
}

/// `{a="x",b="y"}` from just after `{`; returns the labels and what follows `}`.
fn parse_labels(mut rest: &str) -> anyhow::Result<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| anyhow::anyhow!("label without `=`: {rest}"))?;
        let name = &rest[..eq];
        anyhow::ensure!(valid_name(name, false), "bad label name {name:?}");
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or_else(|| anyhow::anyhow!("label value not quoted: {rest}"))?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => anyhow::bail!("bad escape {other:?} in a label value"),
                },
                Some((_, c)) => value.push(c),
                None => anyhow::bail!("unterminated label value"),
            }
        };
        anyhow::ensure!(
            labels.insert(name.to_string(), value).is_none(),
            "label {name} twice"
        );
        rest = &rest[end + 1..];
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else {
            anyhow::ensure!(rest.starts_with('}'), "expected `,` or `}}`: {rest}");
        }
    }
}

fn parse_value(text: &str) -> anyhow::Result<f64> {
    Ok(match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => text
            .parse()
            .map_err(|e| anyhow::anyhow!("bad value {text:?}: {e}"))?,
    })
}

/// The family a sample belongs to, given the declared types.
fn family_of<'a>(name: &'a str, types: &BTreeMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    for suffix in ["_total", "_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            let ok = match types.get(base).map(String::as_str) {
                Some("counter") => suffix == "_total",
                Some("histogram") => suffix != "_total",
                _ => false,
            };
            if ok {
                return Some(base);
            }
        }
    }
    None
}

/// The Prometheus text format (0.0.4), strictly: every sample belongs to a family declared
/// with `# HELP` and `# TYPE` before it, names and labels are well formed, no series repeats,
/// and histograms' buckets are cumulative and end at `+Inf` equal to `_count`.
fn parse(text: &str) -> anyhow::Result<Scrape> {
    let mut scrape = Scrape::default();
    let mut helped = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("HELP"), Some(name), Some(help)) => {
                    anyhow::ensure!(valid_name(name, true), "bad name in {line}");
                    anyhow::ensure!(!help.trim().is_empty(), "empty HELP: {line}");
                    anyhow::ensure!(helped.insert(name.to_string()), "HELP twice: {line}");
                }
                (Some("TYPE"), Some(name), Some(kind)) => {
                    anyhow::ensure!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                        "bad TYPE: {line}"
                    );
                    anyhow::ensure!(helped.contains(name), "TYPE before HELP: {line}");
                    anyhow::ensure!(
                        scrape
                            .types
                            .insert(name.to_string(), kind.to_string())
                            .is_none(),
                        "TYPE twice: {line}"
                    );
                }
                _ => {}
            }
            continue;
        }
        anyhow::ensure!(!line.starts_with('#'), "malformed comment: {line}");
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| anyhow::anyhow!("no value: {line}"))?;
        let name = &line[..name_end];
        anyhow::ensure!(valid_name(name, true), "bad metric name in {line}");
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(after) => parse_labels(after)?,
            None => (BTreeMap::new(), &line[name_end..]),
        };
        let mut fields = rest
            .strip_prefix(' ')
            .ok_or_else(|| anyhow::anyhow!("no space before the value: {line}"))?
            .split(' ');
        let value = parse_value(fields.next().unwrap_or(""))?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .map_err(|e| anyhow::anyhow!("bad timestamp in {line}: {e}"))?;
        }
        anyhow::ensure!(fields.next().is_none(), "trailing fields: {line}");
        anyhow::ensure!(
            family_of(name, &scrape.types).is_some(),
            "sample of an undeclared family: {line}"
        );
        anyhow::ensure!(
            seen.insert(format!("{name}{labels:?}")),
            "series twice: {line}"
        );
        scrape.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    check_histograms(&scrape)?;
    Ok(scrape)
}

fn check_histograms(scrape: &Scrape) -> anyhow::Result<()> {
    for (family, _) in scrape.types.iter().filter(|(_, t)| *t == "histogram") {
        // Series by their labels other than `le`.
        let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for s in &scrape.samples {
            if s.name == format!("{family}_bucket") {
                let le = s
                    .labels
                    .get("le")
                    .ok_or_else(|| anyhow::anyhow!("{family} bucket without le"))?;
                let mut rest = s.labels.clone();
                rest.remove("le");
                buckets
                    .entry(format!("{rest:?}"))
                    .or_default()
                    .push((parse_value(le)?, s.value));
            }
        }
        for (series, mut bs) in buckets {
            bs.sort_by(|a, b| a.0.total_cmp(&b.0));
            anyhow::ensure!(
                bs.windows(2).all(|w| w[0].1 <= w[1].1),
                "{family}{series}: buckets not cumulative"
            );
            let (last_le, last) = bs.last().copied().unwrap_or((0.0, 0.0));
            anyhow::ensure!(last_le == f64::INFINITY, "{family}{series}: no +Inf bucket");
            let count = scrape
                .samples
                .iter()
                .find(|s| {
                    s.name == format!("{family}_count") && format!("{:?}", s.labels) == series
                })
                .ok_or_else(|| anyhow::anyhow!("{family}{series}: no _count"))?;
            anyhow::ensure!(
                count.value == last,
                "{family}{series}: +Inf bucket {last} but count {}",
                count.value
            );
        }
    }
    Ok(())
}

impl Scrape {
    /// The sum of `name`'s samples whose labels include `labels`; `None` when there are none.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .collect();
        (!matching.is_empty()).then(|| matching.iter().sum())
    }

    fn get(&self, name: &str) -> anyhow::Result<f64> {
        self.sum(name, &[])
            .ok_or_else(|| anyhow::anyhow!("no series {name}"))
    }
}

/// Scrapes `base`'s `/metrics` and parses it; also checks the content type.
async fn scrape(base: &str) -> anyhow::Result<Scrape> {
    let reply = reqwest::get(format!("{base}/metrics")).await?;
    anyhow::ensure!(
        reply.status() == 200,
        "/metrics answered {}",
        reply.status()
    );
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    anyhow::ensure!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "content type {content_type}"
    );
    let text = reply.text().await?;
    parse(&text).map_err(|e| anyhow::anyhow!("{e}\n{text}"))
}

/// The series issue 26 names, by their exposed names (counters with `_total`, histograms by
/// `_count`).
const NAMED: &[&str] = &[
    "roost_raft_term",
    "roost_raft_last_log_index",
    "roost_raft_committed_index",
    "roost_raft_applied_index",
    "roost_raft_snapshot_index",
    "roost_raft_is_leader",
    "roost_raft_leader_changes_total",
    "roost_raft_members",
    "roost_raft_voters",
    "roost_write_latency_seconds_count",
    "roost_write_batch_size_count",
    "roost_http_requests_total",
    "roost_http_request_duration_seconds_count",
    "roost_apply_duration_seconds_count",
    "roost_snapshot_build_duration_seconds_count",
    "roost_raft_log_bytes",
    "roost_state_bytes",
    "roost_worker_leases_expired_total",
    "roost_grpc_requests_total",
    "roost_grpc_request_duration_seconds_count",
    "roost_issues",
    "roost_runs",
    "roost_agents",
    "roost_workers",
    "roost_wakes_queued",
    "roost_wakes",
    "roost_wakes_by_reason",
    "roost_budget_reserved_cents",
    "roost_spend_month_cents",
    "roost_budget_incidents_open",
    "roost_approvals_pending",
    "roost_issues_in_state_db_only",
    "roost_workers_connected",
    "roost_workers_relayed",
    "roost_process_open_fds",
    "roost_process_resident_memory_bytes",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_name_every_series_and_move_under_load() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let base = node.http().base().to_string();
    // Traffic before the first scrape, so the request series exist: REST, and gRPC calls
    // that succeed and fail.
    node.admin
        .get(&format!("/api/companies/{}/issues", node.company_id))
        .await?
        .ok()?;
    let mut grpc = crate::support::control(&node).await?;
    let get_issue = |id: &str| {
        crate::support::authed(
            &node.admin_token,
            None,
            roost_proto::v1::GetIssueRequest {
                issue_id: id.into(),
            },
        )
    };
    let missing = grpc.get_issue(get_issue("no-such-issue")?).await;
    assert_eq!(
        missing.map(|_| ()).map_err(|s| s.code()),
        Err(tonic::Code::NotFound)
    );
    let before = scrape(&base).await?;
    for name in NAMED {
        before.get(name)?;
    }
    assert_eq!(before.get("roost_raft_is_leader")?, 1.0);
    assert_eq!(before.get("roost_raft_members")?, 1.0);
    assert_eq!(before.get("roost_raft_voters")?, 1.0);
    assert!(before.get("roost_raft_leader_changes_total")? >= 1.0);
    assert!(before.get("roost_raft_term")? >= 1.0);
    assert!(before.get("roost_process_open_fds")? > 0.0);
    assert!(before.get("roost_process_resident_memory_bytes")? > 0.0);
    let get_issue_method = "/roost.v1.Control/GetIssue";
    assert_eq!(
        before.sum(
            "roost_grpc_requests_total",
            &[("method", get_issue_method), ("code", "NOT_FOUND")]
        ),
        Some(1.0),
        "{:?}",
        before.samples
    );
    // Every status is a series, zero or not.
    for status in ["backlog", "todo", "in_progress", "done", "cancelled"] {
        assert!(before.sum("roost_issues", &[("status", status)]).is_some());
    }
    for status in ["queued", "running", "succeeded", "lost"] {
        assert!(before.sum("roost_runs", &[("status", status)]).is_some());
    }
    // The route is a template, never a path holding a tenant's id.
    let issues_route = "/api/companies/{cid}/issues";
    assert!(
        before
            .sum(
                "roost_http_requests_total",
                &[("route", issues_route), ("method", "GET"), ("code", "2xx")]
            )
            .is_some(),
        "{:?}",
        before.samples
    );
    for s in &before.samples {
        for value in s.labels.values() {
            assert!(
                !value.contains(&node.company_id),
                "{} carries the company's id: {value}",
                s.name
            );
        }
    }

    // Load: issues, an agent and a run.
    const ISSUES: usize = 5;
    for i in 0..ISSUES {
        node.issue(json!({ "title": format!("metrics {i}") }))
            .await?;
    }
    let (agent, _) = node.agent("metered").await?;
    node.start_run(&agent).await?;
    let listed = node
        .admin
        .get(&format!("/api/companies/{}/issues", node.company_id))
        .await?
        .ok()?;
    let some_issue = listed[0]["id"].as_str().unwrap_or_default().to_string();
    grpc.get_issue(get_issue(&some_issue)?).await?;

    let issues_before = before.get("roost_issues")?;
    let runs_before = before.get("roost_runs")?;
    let agents_before = before.get("roost_agents")?;
    let applied_before = before.get("roost_raft_applied_index")?;
    let writes_before = before.get("roost_write_latency_seconds_count")?;
    let entries_before = before.get("roost_write_batch_size_count")?;
    let posts_before = before
        .sum(
            "roost_http_requests_total",
            &[("route", issues_route), ("method", "POST")],
        )
        .unwrap_or(0.0);
    let after = wait_for(
        "the metrics to show the new issues, agent and run",
        TestNode::default_timeout(),
        || async {
            let s = scrape(&base).await.ok()?;
            let grown = s.get("roost_issues").ok()? >= issues_before + ISSUES as f64
                && s.get("roost_runs").ok()? > runs_before
                && s.get("roost_agents").ok()? > agents_before;
            grown.then_some(s)
        },
    )
    .await?;
    assert_eq!(
        after.sum(
            "roost_http_requests_total",
            &[("route", issues_route), ("method", "POST"), ("code", "2xx")]
        ),
        Some(posts_before + ISSUES as f64),
        "one POST counted per issue created"
    );
    assert!(after.get("roost_raft_applied_index")? > applied_before);
    assert!(after.get("roost_raft_committed_index")? >= after.get("roost_raft_applied_index")?);
    assert!(after.get("roost_raft_last_log_index")? >= after.get("roost_raft_applied_index")?);
    // Each write through the proposer is timed; each entry it proposed counted.
    assert!(after.get("roost_write_latency_seconds_count")? >= writes_before + ISSUES as f64);
    assert!(after.get("roost_write_batch_size_count")? > entries_before);
    assert!(
        after.get("roost_apply_duration_seconds_count")?
            > before.get("roost_apply_duration_seconds_count")?
    );
    assert!(after.get("roost_raft_log_bytes")? > 0.0);
    assert!(after.get("roost_state_bytes")? > 0.0);
    assert!(
        after.get("roost_http_request_duration_seconds_count")?
            > before.get("roost_http_request_duration_seconds_count")?
    );
    assert_eq!(
        after.sum(
            "roost_grpc_requests_total",
            &[("method", get_issue_method), ("code", "OK")]
        ),
        Some(1.0),
        "a gRPC call that succeeded is counted OK"
    );
    assert!(
        after.sum(
            "roost_grpc_request_duration_seconds_count",
            &[("method", get_issue_method)]
        ) >= Some(2.0)
    );
    // Spend, reservations and wakes move with a cost event, the run and a wake.
    assert!(
        after.get("roost_budget_reserved_cents")? >= before.get("roost_budget_reserved_cents")?
    );
    let spent_before = after.get("roost_spend_month_cents")?;
    let wakes_before = after
        .sum("roost_wakes_by_reason", &[("reason", "on_demand")])
        .unwrap_or(0.0);
    node.admin
        .post(
            &format!("/api/companies/{}/cost-events", node.company_id),
            json!({ "agentId": agent, "provider": "anthropic", "costCents": 7 }),
        )
        .await?
        .ok()?;
    node.admin
        .post(&format!("/api/agents/{agent}/wakeup"), json!({}))
        .await?
        .ok()?;
    wait_for(
        "spend and wakes to move",
        TestNode::default_timeout(),
        || async {
            let s = scrape(&base).await.ok()?;
            let moved = s.get("roost_spend_month_cents").ok()? >= spent_before + 7.0
                && s.sum("roost_wakes_by_reason", &[("reason", "on_demand")])? > wakes_before;
            moved.then_some(())
        },
    )
    .await?;
    // An unknown path is counted under one label, not its own.
    node.admin.get("/api/no/such/route/at/all").await?;
    let unmatched = wait_for(
        "the unknown route to be counted",
        TestNode::default_timeout(),
        || async {
            let s = scrape(&base).await.ok()?;
            s.sum("roost_http_requests_total", &[("route", "unmatched")])
        },
    )
    .await?;
    assert!(unmatched >= 1.0);
    node.shutdown().await
}

/// Each node reports its own view: one leader among three, every node seeing three voters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_of_a_cluster_serves_its_own_metrics() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let c = TestCluster::start(3).await?;
    let leader = c.leader().await?;
    let ids = c.ids();
    let leaders = wait_for(
        "every node to report the leader",
        Duration::from_secs(20),
        || async {
            let mut leaders = 0.0;
            for id in &ids {
                let s = scrape(c.http(*id).base()).await.ok()?;
                if s.get("roost_raft_voters").ok()? != 3.0 {
                    return None;
                }
                leaders += s.get("roost_raft_is_leader").ok()?;
                if *id == leader && s.get("roost_raft_is_leader").ok()? != 1.0 {
                    return None;
                }
            }
            Some(leaders)
        },
    )
    .await?;
    assert_eq!(leaders, 1.0);
    c.shutdown().await;
    Ok(())
}

/// The parser above is strict: what a sloppy exporter might write is refused.
#[test]
fn the_parser_refuses_malformed_expositions() {
    let ok = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n";
    assert!(parse(ok).is_ok());
    for bad in [
        // No HELP or TYPE.
        "a 1\n",
        // A series twice.
        "# HELP g G.\n# TYPE g gauge\ng 1\ng 2\n",
        // An unquoted label value.
        "# HELP g G.\n# TYPE g gauge\ng{x=1} 1\n",
        // Not a number.
        "# HELP g G.\n# TYPE g gauge\ng one\n",
        // Buckets not cumulative, and +Inf not the count.
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n\
         h_sum 1\nh_count 1\n",
        "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
