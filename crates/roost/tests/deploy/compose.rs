//! `compose.yaml`: Docker Compose's own loader (`docker-compose config`), then how its nodes,
//! workers, configs and certificates fit together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use roost_server::ServerConfig;
use roost_worker::WorkerConfig;
use serde_json::Value;

use crate::configs::{assert_stop_covers_grace, is_worker_config};
use crate::validators::validators;
use crate::{deploy_dir, host, read, run, text};

/// Seconds in a duration as `docker-compose config` writes it (Go's `time.Duration`: `20s`,
/// `1m30s`, `1h0m0s`).
fn go_duration_secs(value: &str) -> u64 {
    let mut total = 0;
    let mut number = String::new();
    for c in value.chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let n: u64 = number
                    .parse()
                    .unwrap_or_else(|_| panic!("not a duration: {value}"));
                total += n * [("h", 3600), ("m", 60), ("s", 1)]
                    .into_iter()
                    .find(|(u, _)| u.starts_with(c))
                    .map_or(0, |(_, f)| f);
                number.clear();
            }
            _ => panic!("not a whole-second duration: {value}"),
        }
    }
    assert!(number.is_empty(), "not a duration: {value}");
    total
}

/// A service's `stop_grace_period` in seconds (Compose's default, 10 s, when it sets none).
fn stop_grace_period(name: &str, service: &Value) -> u64 {
    match service["stop_grace_period"].as_str() {
        Some(v) => go_duration_secs(v),
        None => panic!("{name}: no stop_grace_period (Compose's 10 s would cut a stop short)"),
    }
}

#[test]
fn go_durations_are_read_in_seconds() {
    assert_eq!(go_duration_secs("20s"), 20);
    assert_eq!(go_duration_secs("1m30s"), 90);
    assert_eq!(go_duration_secs("1h0m0s"), 3600);
}

#[test]
fn compose_file_is_valid_and_wires_three_nodes_and_two_workers() {
    let v = validators();
    let compose = deploy_dir().join("compose.yaml");
    let out = run(Command::new(&v.docker_compose)
        .args(["--file"])
        .arg(&compose)
        .args(["config", "--format", "json"])
        .env("HOME", tempfile::tempdir().unwrap().path())
        .env_remove("COMPOSE_FILE")
        .env_remove("COMPOSE_PROJECT_NAME"));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "docker-compose config: {}{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    let model: Value = serde_json::from_slice(&out.stdout).unwrap();
    let services = model["services"].as_object().unwrap();
    let configs = model["configs"].as_object().unwrap();
    let config_file = |service: &Value| -> String {
        let source = service["configs"][0]["source"].as_str().unwrap();
        assert_eq!(
            service["configs"][0]["target"], "/etc/roost/roost.toml",
            "{source}"
        );
        read(Path::new(configs[source]["file"].as_str().unwrap()))
    };
    let entrypoint = |s: &Value| s["entrypoint"].to_string() + &s["command"].to_string();
    let mut nodes = BTreeMap::new();
    let mut workers = BTreeSet::new();
    for (name, service) in services {
        assert_eq!(service["image"], "roost:local", "{name}");
        if service["configs"].is_null() {
            continue;
        }
        let text = config_file(service);
        if is_worker_config(&text) {
            let config: WorkerConfig = toml::from_str(&text).unwrap();
            assert!(entrypoint(service).contains("run-worker"), "{name}");
            assert_eq!(config.worker_id, *name, "{name}: worker id");
            assert_stop_covers_grace(
                &format!("compose.yaml {name} (stop_grace_period)"),
                stop_grace_period(name, service),
                config.shutdown_grace_secs,
            );
            for server in &config.servers {
                assert!(services.contains_key(host(server)), "{name}: {server}");
            }
            assert!(services["certs"]["command"]
                .to_string()
                .contains("roost cert issue worker"));
            workers.insert(name.clone());
        } else {
            let config: ServerConfig = toml::from_str(&text).unwrap();
            assert_eq!(
                config.advertise_peer.as_deref().map(host),
                Some(name.as_str()),
                "{name}: peers reach it by its service name"
            );
            assert!(
                service["healthcheck"]["test"]
                    .to_string()
                    .contains("/readyz"),
                "{name}: healthy means ready"
            );
            assert_eq!(
                service["depends_on"]["certs"]["condition"],
                "service_completed_successfully"
            );
            assert_stop_covers_grace(
                &format!("compose.yaml {name} (stop_grace_period)"),
                stop_grace_period(name, service),
                config.shutdown_grace_secs,
            );
            nodes.insert(config.node_id, name.clone());
        }
    }
    assert_eq!(nodes.len(), 3, "nodes: {nodes:?}");
    assert_eq!(workers.len(), 2, "workers: {workers:?}");
    // The certificates name every node as the others reach it.
    let certs = services["certs"]["command"].to_string();
    assert!(certs.contains("roost cert init"), "{certs}");
    assert!(
        certs.contains("--host node-$"),
        "the node certificates name node-N: {certs}"
    );
}
