//! `roost server --check` and `roost run-worker --check`: a config a start accepts is
//! summarised (exit 0) without a socket bound or a file written; one a start refuses is
//! refused with the very error the start prints (exit 1).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::configs::{roost_check, Certs, JOIN_TOKEN};
use crate::{roost_binary, text};

/// Runs `roost` with `args` and no environment but `env`; a process still running after
/// `limit` is killed and the test fails (a config that should have been refused started).
fn roost_bounded(args: &[&str], config: &Path, env: &[(&str, &str)], limit: Duration) -> Output {
    let mut child = Command::new(roost_binary())
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "roost {args:?} --config {} still running after {limit:?}: {}",
                config.display(),
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A node of its own on loopback ports held by this test, with TLS from `certs`.
fn node_config(dir: &Path, certs: &Certs, ports: [u16; 3]) -> String {
    let [http, grpc, peer] = ports;
    certs.put_in(&format!(
        "node_id = 1\ndata_dir = \"{}\"\nhttp_listen = \"127.0.0.1:{http}\"\n\
         grpc_listen = \"127.0.0.1:{grpc}\"\npeer_listen = \"127.0.0.1:{peer}\"\n\
         shutdown_grace_secs = 20\n\n[tls]\nca_file = \"ca\"\ncert_file = \"c\"\nkey_file = \"k\"\n",
        dir.join("data").display()
    ))
}

#[test]
fn server_check_summarises_a_good_config_binding_and_writing_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let certs = Certs::make(&scratch.path().join("certs"));
    // The node's three ports stay taken: a check that bound one would fail.
    let held: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports = [0, 1, 2].map(|i| held[i].local_addr().unwrap().port());
    let config = node_config(scratch.path(), &certs, ports);

    let out = roost_check(&config, scratch.path(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["node_id"], 1);
    assert_eq!(
        summary["listen"]["http"],
        format!("127.0.0.1:{}", ports[0]).as_str()
    );
    assert_eq!(
        summary["advertise"]["peer"],
        format!("127.0.0.1:{}", ports[2]).as_str()
    );
    assert_eq!(summary["tls"], true);
    assert_eq!(summary["forms_cluster"], true);
    assert_eq!(summary["members"], serde_json::json!([]));
    assert_eq!(summary["shutdown_grace_secs"], 20);

    // The same for a person; then environment over the file, flags over the environment.
    let path = scratch.path().join("server.toml");
    let env = [("ROOST_SHUTDOWN_GRACE_SECS", "7")];
    let limit = Duration::from_secs(30);
    let out = roost_bounded(&["server", "--check"], &path, &env, limit);
    let summary = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for wanted in [
        "config OK: node 1",
        &format!("http 127.0.0.1:{}", ports[0]),
        "members     none: forms a one-node cluster on its first start",
        "TLS         on (CA ",
        "stop grace  7 s",
    ] {
        assert!(summary.contains(wanted), "{wanted:?} not in\n{summary}");
    }
    let args = ["server", "--check", "--shutdown-grace-secs", "3"];
    let out = roost_bounded(&args, &path, &env, limit);
    assert!(text(&out.stdout).contains("stop grace  3 s"));
    assert!(
        !scratch.path().join("data").exists(),
        "--check made the data dir"
    );
}

/// Bad configs, each refused by a start and by `--check` with the same message and status.
#[test]
fn server_check_refuses_what_a_start_refuses_with_its_error() {
    let scratch = tempfile::tempdir().unwrap();
    let certs = Certs::make(&scratch.path().join("certs"));
    let good = node_config(scratch.path(), &certs, [17480, 17481, 17482]);
    let member = "\n[[initial_members]]\nid = 2\nhttp_addr = \"n2:1\"\ngrpc_addr = \"n2:2\"\n\
                  peer_addr = \"n2:3\"\n";
    let cases = [
        (
            format!("listen_http = 1\n{good}"),
            "unknown field `listen_http`",
        ),
        (
            "http_listen = \"0.0.0.0:17480\"\n".to_string(),
            "refusing to serve plaintext on 0.0.0.0:17480",
        ),
        (
            format!("advertise_http = \"0.0.0.0:17480\"\n{good}"),
            "advertise_http = \"0.0.0.0:17480\": expected the host:port",
        ),
        (
            good.replace("127.0.0.1:17481", "127.0.0.1"),
            "grpc_listen = \"127.0.0.1\": expected host:port",
        ),
        (
            format!("{good}{member}"),
            "node_id = 1 is not among initial_members (ids 2)",
        ),
        (
            good.replace("node-1-key.pem", "missing-key.pem"),
            "missing-key.pem: cannot read it",
        ),
        (
            good.replace("[tls]", "[raft]\nelection_timeout_min_ms = 700\n\n[tls]"),
            "[raft] election_timeout_min_ms = 700 must be less than election_timeout_max_ms",
        ),
        (
            good.replace("shutdown_grace_secs = 20", "shutdown_grace_secs = 0"),
            "shutdown_grace_secs = 0: must be 1 to 600 seconds",
        ),
    ];
    let path = scratch.path().join("server.toml");
    let limit = Duration::from_secs(30);
    for (config, error) in &cases {
        std::fs::write(&path, config).unwrap();
        let check = roost_bounded(&["server", "--check"], &path, &[], limit);
        let start = roost_bounded(&["server"], &path, &[], limit);
        let said = text(&check.stderr);
        assert!(said.contains(error), "{error:?} not in {said}\n{config}");
        assert_eq!(check.status.code(), Some(1), "{said}");
        assert_eq!(start.status.code(), Some(1), "{config}");
        assert_eq!(said, text(&start.stderr), "--check and a start differ");
        assert!(check.stdout.is_empty(), "{}", text(&check.stdout));
    }
    assert!(!scratch.path().join("data").exists());
}

#[test]
fn worker_check_summarises_a_good_config_and_refuses_a_bad_one_as_a_start_does() {
    let scratch = tempfile::tempdir().unwrap();
    let certs = Certs::make(&scratch.path().join("certs"));
    let work = scratch.path().join("work");
    let good = certs.put_in(&format!(
        "worker_id = \"w-1\"\nservers = [\"127.0.0.1:1\"]\napi_url = \"https://127.0.0.1:2\"\n\
         work_dir = \"{}\"\nshutdown_grace_secs = 20\n\n[tls]\nca_file = \"ca\"\n\
         cert_file = \"c\"\nkey_file = \"k\"\n",
        work.display()
    ));
    let out = roost_check(&good, scratch.path(), &[JOIN_TOKEN]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["worker_id"], "w-1");
    assert_eq!(summary["tls"], true);
    assert_eq!(summary["client_certificate"], true);
    assert_eq!(summary["has_credential"], false);
    assert_eq!(summary["shutdown_grace_secs"], 20);
    let path = scratch.path().join("worker.toml");
    let limit = Duration::from_secs(30);
    let out = roost_bounded(&["run-worker", "--check"], &path, &[JOIN_TOKEN], limit);
    assert!(
        text(&out.stdout).contains("config OK: worker w-1"),
        "{}",
        text(&out.stdout)
    );
    assert!(!work.exists(), "--check made the work dir");

    let cases = [
        (good.clone(), vec![], "join_token is required"),
        (
            good.replace("worker_id = \"w-1\"", "worker_id = \"w-1\"\nslot = 2"),
            vec![JOIN_TOKEN],
            "unknown field `slot`",
        ),
        (
            good.replace("shutdown_grace_secs = 20", "shutdown_grace_secs = 601"),
            vec![JOIN_TOKEN],
            "shutdown_grace_secs = 601",
        ),
        (
            good.replace("worker-w.pem", "worker-missing.pem"),
            vec![JOIN_TOKEN],
            "invalid worker configuration: tls.cert_file",
        ),
    ];
    for (config, env, error) in &cases {
        std::fs::write(&path, config).unwrap();
        let check = roost_bounded(&["run-worker", "--check"], &path, env, limit);
        let start = roost_bounded(&["run-worker"], &path, env, limit);
        let said = text(&check.stderr);
        assert!(said.contains(error), "{error:?} not in {said}\n{config}");
        assert_eq!(check.status.code(), Some(1), "{said}");
        assert_eq!(start.status.code(), Some(1), "{config}");
        assert_eq!(said, text(&start.stderr), "--check and a start differ");
    }
    assert!(!work.exists(), "a refused start made the work dir");
}
