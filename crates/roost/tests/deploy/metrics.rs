//! The Grafana dashboard and the Prometheus alert rules: every PromQL expression parses and
//! names only series a real `roost` node exports at `/metrics`.

use std::collections::BTreeSet;
use std::time::Duration;

use roost_testkit::RoostProcess;
use serde_json::Value;

use crate::validators::{validators, Validators};
use crate::{deploy_dir, read, roost_binary};

/// What Prometheus itself records for every scrape: the only series the rules may name that a
/// node does not export.
const PROMETHEUS_SERIES: &[&str] = &["up"];

/// What a Grafana expression is as PromQL: its variables replaced by values of their kind.
fn grafana_to_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

/// Every metric name a real node exports at /metrics, with its samples' suffixes.
async fn exported_series() -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let node = RoostProcess::spawn_dev(&roost_binary(), dir.path(), Duration::from_secs(60))
        .expect("roost dev starts");
    let client = reqwest::Client::new();
    // A REST request first, so the request counter and histogram have samples.
    let listed = client
        .get(format!("{}/api/companies", node.base_url))
        .bearer_auth(&node.admin_token)
        .send()
        .await
        .unwrap();
    assert!(listed.status().is_success(), "{}", listed.status());
    let body = client
        .get(format!("{}/metrics", node.base_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut names = BTreeSet::new();
    for line in body.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        names.insert(line[..end].to_string());
    }
    assert!(
        names.contains("roost_raft_term") && names.contains("roost_http_requests_total"),
        "{body}"
    );
    names
}

fn check_exprs(v: &Validators, what: &str, exprs: &[String], exported: &BTreeSet<String>) {
    assert!(!exprs.is_empty(), "{what}: no expressions found");
    for (expr, answer) in exprs.iter().zip(v.promql(exprs)) {
        let names = answer.unwrap_or_else(|e| panic!("{what}: {expr:?} is not PromQL: {e}"));
        assert!(!names.is_empty(), "{what}: {expr:?} selects nothing");
        for name in names {
            assert!(
                exported.contains(&name) || PROMETHEUS_SERIES.contains(&name.as_str()),
                "{what}: {expr:?} names {name}, which a node does not export"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_alerts_name_only_series_a_node_exports() {
    let v = tokio::task::spawn_blocking(validators).await.unwrap();
    let exported = exported_series().await;

    // The parser is strict: a typo is caught, so a pass means something.
    let probe = v.promql(&["sum(rate(roost_raft_term[5m])".to_string()]);
    assert!(probe[0].is_err(), "{probe:?}");

    // Dashboard: every panel's targets and the variables' queries.
    let path = deploy_dir().join("grafana/roost-dashboard.json");
    let dashboard: Value = serde_json::from_str(&read(&path)).unwrap();
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
    assert!(dashboard["schemaVersion"].as_u64().is_some());
    let mut exprs = Vec::new();
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "panel ids repeat"
        );
        assert!(
            panel["gridPos"]["w"].as_u64().is_some(),
            "{}",
            panel["title"]
        );
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", panel["title"]);
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for t in targets {
            exprs.push(grafana_to_promql(t["expr"].as_str().unwrap()));
        }
    }
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            let query = var["query"]["query"].as_str().unwrap();
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.rsplit_once(','))
                .map(|(metric, _)| metric.to_string())
                .unwrap_or_else(|| panic!("unexpected variable query {query}"));
            exprs.push(inner);
        }
    }
    check_exprs(v, "grafana/roost-dashboard.json", &exprs, &exported);

    // Alert rules.
    let path = deploy_dir().join("prometheus/alerts.yaml");
    let [rules]: [Value; 1] = v.yaml(&path).try_into().expect("one YAML document");
    let mut exprs = Vec::new();
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_array().unwrap() {
        assert!(group["name"].is_string());
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().expect("alerting rules only");
            assert!(alerts.insert(name.to_string()), "{name} twice");
            let keys: BTreeSet<&str> = rule
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let known: BTreeSet<&str> = [
                "alert",
                "expr",
                "for",
                "keep_firing_for",
                "labels",
                "annotations",
            ]
            .into();
            assert!(keys.is_subset(&known), "{name}: unknown keys {keys:?}");
            let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
            assert!(
                ["warning", "critical"].contains(&severity),
                "{name}: severity"
            );
            assert!(
                rule["annotations"]["summary"].is_string(),
                "{name}: summary"
            );
            assert!(rule["for"].is_string(), "{name}: for");
            exprs.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    check_exprs(v, "prometheus/alerts.yaml", &exprs, &exported);
    for wanted in [
        "RoostNoLeader",
        "RoostLeaderFlapping",
        "RoostApplyLag",
        "RoostNodeNotReady",
        "RoostHighErrorRate",
        "RoostOpenFilesHigh",
    ] {
        assert!(alerts.contains(wanted), "no {wanted} in {alerts:?}");
    }
}
