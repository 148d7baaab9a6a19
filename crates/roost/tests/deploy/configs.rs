//! Every TOML config under deploy/ (and inside the Kubernetes ConfigMap), loaded and checked by
//! `roost server --check` / `roost run-worker --check` exactly as a start would, with
//! certificates from `roost cert` in place of the deployment's; how a cluster's configs agree;
//! and the relation every platform's stop timeout must keep with `shutdown_grace_secs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use roost_server::ServerConfig;
use roost_worker::WorkerConfig;
use serde_json::Value;

use crate::validators::{validators, Validators};
use crate::{deploy_dir, files_under, host, read, roost_binary, run, text};

/// What a platform's stop timeout must leave beyond a process's `shutdown_grace_secs`: the
/// watchdog ends an overrunning stop 2 s past the grace (`HARD_MARGIN`,
/// crates/roost/src/stopping.rs), and the process still has to exit and be reaped.
pub(crate) const STOP_MARGIN_SECS: u64 = 5;

/// The platform (`what`) waits `timeout_secs` before it kills a process whose config gives it
/// `grace_secs` to stop cleanly: a clean stop must fit, with [`STOP_MARGIN_SECS`] to spare.
pub(crate) fn assert_stop_covers_grace(what: &str, timeout_secs: u64, grace_secs: u64) {
    assert!(
        timeout_secs >= grace_secs + STOP_MARGIN_SECS,
        "{what}: the stop timeout of {timeout_secs}s does not cover shutdown_grace_secs = \
         {grace_secs} plus {STOP_MARGIN_SECS}s: the process would be killed mid-stop"
    );
}

/// Every TOML config in deploy/: the files, and the ConfigMap's entries (with the worker's
/// `@POD_NAME@` replaced as the pod's start command does).
fn deploy_configs(v: &Validators) -> Vec<(String, String)> {
    let mut configs: Vec<(String, String)> = files_under(&deploy_dir(), ".toml")
        .into_iter()
        .map(|p| (p.display().to_string(), read(&p)))
        .collect();
    for path in files_under(&deploy_dir().join("kubernetes"), ".yaml") {
        for doc in v.yaml(&path) {
            if doc["kind"] != "ConfigMap" {
                continue;
            }
            for (key, value) in doc["data"].as_object().into_iter().flatten() {
                if key.ends_with(".toml") {
                    configs.push((
                        format!("{} ({key})", path.display()),
                        value
                            .as_str()
                            .unwrap()
                            .replace("@POD_NAME@", "roost-worker-0"),
                    ));
                }
            }
        }
    }
    configs
}

pub(crate) fn is_worker_config(text: &str) -> bool {
    let value: toml::Value = toml::from_str(text).unwrap();
    value.get("worker_id").is_some()
}

/// A CA, a node certificate and a worker certificate from `roost cert`, standing in for the
/// deployment's files (a check reads them as a start does).
pub(crate) struct Certs {
    ca: PathBuf,
    node: (PathBuf, PathBuf),
    worker: (PathBuf, PathBuf),
}

impl Certs {
    pub(crate) fn make(dir: &Path) -> Certs {
        for args in [
            vec!["cert", "init", "--dir"],
            vec![
                "cert",
                "issue",
                "node",
                "--id",
                "1",
                "--host",
                "localhost",
                "--dir",
            ],
            vec!["cert", "issue", "worker", "--name", "w", "--dir"],
        ] {
            let out = run(Command::new(roost_binary()).args(&args).arg(dir));
            assert!(
                out.status.success(),
                "roost {args:?}: {}",
                text(&out.stderr)
            );
        }
        Certs {
            ca: dir.join("ca.pem"),
            node: (dir.join("node-1.pem"), dir.join("node-1-key.pem")),
            worker: (dir.join("worker-w.pem"), dir.join("worker-w-key.pem")),
        }
    }

    /// `text` with the files of its `[tls]` (those it names) replaced by these.
    pub(crate) fn put_in(&self, text: &str) -> String {
        let mut config: toml::Table = toml::from_str(text).unwrap();
        let (cert, key) = if config.contains_key("worker_id") {
            &self.worker
        } else {
            &self.node
        };
        if let Some(tls) = config.get_mut("tls").and_then(toml::Value::as_table_mut) {
            for (setting, path) in [
                ("ca_file", &self.ca),
                ("cert_file", cert),
                ("key_file", key),
            ] {
                if tls.contains_key(setting) {
                    tls.insert(setting.into(), path.display().to_string().into());
                }
            }
        }
        toml::to_string(&config).unwrap()
    }
}

/// `roost server --check --json` (or `roost run-worker ...` for a worker's config) on `text`
/// written to `dir`, with no environment but `env`.
pub(crate) fn roost_check(text: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let worker = is_worker_config(text);
    let path = dir.join(if worker { "worker.toml" } else { "server.toml" });
    std::fs::write(&path, text).unwrap();
    run(Command::new(roost_binary())
        .env_clear()
        .envs(env.iter().copied())
        .arg(if worker { "run-worker" } else { "server" })
        .arg("--config")
        .arg(&path)
        .args(["--check", "--json"]))
}

/// The join token a deployment gives a worker's first start (`ROOST_JOIN_TOKEN`).
pub(crate) const JOIN_TOKEN: (&str, &str) = ("ROOST_JOIN_TOKEN", "rst_join_placeholder");

/// The summary of a config `--check` accepted.
fn accepted(name: &str, out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{name}: refused: {}{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: --json printed no JSON ({e}): {}",
            text(&out.stdout)
        )
    })
}

#[test]
fn every_config_under_deploy_loads() {
    let v = validators();
    let scratch = tempfile::tempdir().unwrap();
    let certs = Certs::make(&scratch.path().join("certs"));
    let configs = deploy_configs(v);
    let mut servers = 0;
    let mut workers = 0;
    for (name, text) in &configs {
        let summary = accepted(
            name,
            &roost_check(&certs.put_in(text), scratch.path(), &[JOIN_TOKEN]),
        );
        if is_worker_config(text) {
            workers += 1;
            let config: WorkerConfig =
                toml::from_str(text).unwrap_or_else(|e| panic!("{name}: not a worker config: {e}"));
            assert_eq!(summary["worker_id"], config.worker_id.as_str(), "{name}");
            assert!(
                config.tls.ca_file.is_some() && config.tls.cert_file.is_some(),
                "{name}: a deployed worker checks the servers and presents its certificate"
            );
            assert!(
                config.api_url.starts_with("https://"),
                "{name}: agents reach the API over TLS"
            );
        } else {
            servers += 1;
            let config: ServerConfig = toml::from_str(text).unwrap();
            assert_eq!(summary["node_id"], config.node_id, "{name}");
            assert_eq!(summary["tls"], true, "{name}: a deployed node serves TLS");
            // The check refuses a node missing from its members or found elsewhere in them;
            // said again here, so a change to the check cannot let deploy/ drift.
            if let Some(me) = config
                .initial_members
                .iter()
                .find(|m| m.id == config.node_id)
            {
                for (advertised, member, listen) in [
                    (&config.advertise_http, &me.http_addr, &config.http_listen),
                    (&config.advertise_grpc, &me.grpc_addr, &config.grpc_listen),
                    (&config.advertise_peer, &me.peer_addr, &config.peer_listen),
                ] {
                    let reached = advertised.as_ref().unwrap_or(listen);
                    assert_eq!(
                        reached, member,
                        "{name}: node {} is reached at {reached}, its member entry says \
                         {member}",
                        config.node_id
                    );
                }
            } else {
                assert!(
                    config.initial_members.is_empty(),
                    "{name}: node {} is not among its initial_members",
                    config.node_id
                );
            }
            for listen in [
                &config.http_listen,
                &config.grpc_listen,
                &config.peer_listen,
            ] {
                if host(listen) == "0.0.0.0" || host(listen) == "[::]" {
                    assert!(
                        config.advertise_http.is_some()
                            && config.advertise_grpc.is_some()
                            && config.advertise_peer.is_some(),
                        "{name}: a node listening on every interface advertises its name"
                    );
                }
            }
        }
    }
    // deploy/*.toml (4 nodes, 1 worker), compose (3 + 2), systemd (1 + 1), Kubernetes (3 + 1).
    assert!(
        servers >= 11 && workers >= 5,
        "{servers} server and {workers} worker configs found"
    );

    // The nodes of one cluster (configs with the same members) have ids of their own.
    let mut clusters: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for (name, text) in &configs {
        if is_worker_config(text) {
            continue;
        }
        let config: ServerConfig = toml::from_str(text).unwrap();
        if !config.initial_members.is_empty() {
            clusters
                .entry(format!("{:?}", config.initial_members))
                .or_default()
                .push((config.node_id, name.clone()));
        }
    }
    for nodes in clusters.values() {
        let ids: BTreeSet<u64> = nodes.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), nodes.len(), "two configs of one node: {nodes:?}");
    }
}

/// The check above can fail: an unknown key and plaintext off loopback are refused (exit 1),
/// and so is a sample config whose certificate files are missing.
#[test]
fn the_config_check_refuses_a_bad_config() {
    let scratch = tempfile::tempdir().unwrap();
    for (config, error) in [
        ("node_id = 1\nlisten_http = \"0.0.0.0:1\"\n", "listen_http"),
        (
            "node_id = 1\nhttp_listen = \"0.0.0.0:1\"\n",
            "refusing to serve plaintext",
        ),
        (
            &read(&deploy_dir().join("systemd/roost-server.toml")),
            "tls.cert_file = /etc/roost/certs/node-1.pem: cannot read it",
        ),
        (
            &read(&deploy_dir().join("systemd/roost-worker.toml")),
            "invalid worker configuration: tls.ca_file",
        ),
    ] {
        let out = roost_check(config, scratch.path(), &[JOIN_TOKEN]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{config}: {stderr}");
        assert!(stderr.contains(error), "{error:?} not in {stderr}");
        assert!(out.stdout.is_empty(), "a refused config prints no summary");
    }
}
