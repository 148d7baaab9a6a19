//! The systemd units: `systemd-analyze verify` with any warning a failure, systemd's own
//! exposure score, the hardening they promise, and stop timeouts that cover the configs' grace.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use roost_server::ServerConfig;
use roost_worker::WorkerConfig;

use crate::configs::assert_stop_covers_grace;
use crate::{deploy_dir, read, roost_binary, text};

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
    // Stopping: the node's shutdown_grace_secs (requests in flight, leadership handed over,
    // Raft stopped), with room to exit, before systemd sends SIGKILL.
    let server_config: ServerConfig =
        toml::from_str(&read(&units.join("roost-server.toml"))).unwrap();
    let stop = seconds(one(&server, "TimeoutStopSec", "roost-server.service"));
    assert_stop_covers_grace(
        "roost-server.service (TimeoutStopSec)",
        stop,
        server_config.shutdown_grace_secs,
    );
    // The worker: its agents get the worker's shutdown_grace_secs, and each its grace_sec
    // between SIGTERM and SIGKILL, before systemd kills what is left.
    let worker = unit_settings(&read(&units.join("roost-worker.service")));
    assert_eq!(one(&worker, "KillMode", "roost-worker.service"), "mixed");
    let worker_config: WorkerConfig =
        toml::from_str(&read(&units.join("roost-worker.toml"))).unwrap();
    let stop = seconds(one(&worker, "TimeoutStopSec", "roost-worker.service"));
    assert_stop_covers_grace(
        "roost-worker.service (TimeoutStopSec)",
        stop,
        worker_config.shutdown_grace_secs,
    );
    assert!(
        stop > worker_config.grace_sec + 5,
        "roost-worker.service: TimeoutStopSec={stop}s is not past the agents' grace_sec={}",
        worker_config.grace_sec
    );
}
