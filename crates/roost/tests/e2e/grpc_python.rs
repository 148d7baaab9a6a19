//! The protos are usable outside Rust: a Python client generated from `proto/roost/v1/*.proto`
//! by grpcio-tools (pinned PyPI packages in a venv under `target/tmp/grpc-python`, installed
//! once per checkout under a file lock, as `tests/deploy/validators.rs` does) drives a real node
//! with `python/drive_roost.py`: an agent, an issue, a run, the agent's checkout and comment in
//! that run, read back; grpc.health.v1 and server reflection (grpcio's v1alpha client).
//!
//! Not covered: the `Watch` stream, which Roost does not have yet.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use roost_testkit::TestNode;

const GRPCIO: &str = "grpcio==1.85.1";
const GRPCIO_TOOLS: &str = "grpcio-tools==1.85.1";
const GRPCIO_HEALTH: &str = "grpcio-health-checking==1.85.1";
const GRPCIO_REFLECTION: &str = "grpcio-reflection==1.85.1";
const PROTOBUF: &str = "protobuf==7.36.2";

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/e2e/python/drive_roost.py"
);
const SCRIPT_DEADLINE: Duration = Duration::from_secs(120);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(command: &mut Command) -> anyhow::Result<Output> {
    command
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {command:?}: {e}"))
}

/// The venv's python with the pinned packages, installed once per checkout (under a file lock:
/// test binaries may run at once).
fn python() -> anyhow::Result<PathBuf> {
    let usable = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output();
    anyhow::ensure!(
        usable.as_ref().is_ok_and(|o| o.status.success()),
        "this test needs python3 with venv and ensurepip: install them (Debian/Ubuntu: \
         `apt-get install python3 python3-venv`; .ci/run does this) ({})",
        match &usable {
            Ok(o) => text(&o.stderr),
            Err(e) => e.to_string(),
        }
    );
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("grpc-python");
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let venv = root.join("venv");
    let python = venv.join("bin/python");
    let packages = [
        GRPCIO,
        GRPCIO_TOOLS,
        GRPCIO_HEALTH,
        GRPCIO_REFLECTION,
        PROTOBUF,
    ];
    let done = root.join(format!(
        ".installed-{}",
        packages.join("-").replace(['=', '.'], "_")
    ));
    if !done.exists() {
        let out = run(Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv))?;
        anyhow::ensure!(
            out.status.success(),
            "python3 -m venv failed (install python3-venv): {}",
            text(&out.stderr)
        );
        let out = run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages))?;
        anyhow::ensure!(
            out.status.success(),
            "pip install {} failed: {}",
            packages.join(" "),
            text(&out.stderr)
        );
        std::fs::write(&done, "")?;
    }
    Ok(python)
}

/// Python modules for every `.proto` of `proto/roost/v1`, by grpcio-tools' protoc, in `out`.
fn generate_stubs(python: &Path, out: &Path) -> anyhow::Result<()> {
    let proto_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let mut protos: Vec<PathBuf> = std::fs::read_dir(proto_root.join("roost/v1"))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    protos.retain(|p| p.extension().is_some_and(|e| e == "proto"));
    protos.sort();
    anyhow::ensure!(protos.len() >= 4, "proto files not found: {protos:?}");
    let out_arg = out.display().to_string();
    let out = run(Command::new(python)
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto_root.display()))
        .arg(format!("--python_out={out_arg}"))
        .arg(format!("--grpc_python_out={out_arg}"))
        .args(&protos))?;
    anyhow::ensure!(
        out.status.success(),
        "grpc_tools.protoc failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    Ok(())
}

#[tokio::test]
async fn a_python_client_generated_from_the_protos_checks_out_and_comments() -> anyhow::Result<()> {
    let python = tokio::task::spawn_blocking(python).await??;
    let stubs = tempfile::tempdir()?;
    {
        let (python, stubs) = (python.clone(), stubs.path().to_path_buf());
        tokio::task::spawn_blocking(move || generate_stubs(&python, &stubs)).await??;
    }

    let node = TestNode::start().await?;
    let child = tokio::process::Command::new(&python)
        .arg(SCRIPT)
        .arg(stubs.path())
        .arg(node.server().grpc_addr().to_string())
        .arg(&node.company_id)
        .env("ROOST_ADMIN_TOKEN", &node.admin_token)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(SCRIPT_DEADLINE, child)
        .await
        .map_err(|_| anyhow::anyhow!("drive_roost.py did not finish in {SCRIPT_DEADLINE:?}"))??;
    anyhow::ensure!(
        out.status.success(),
        "drive_roost.py failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let got: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
        anyhow::anyhow!(
            "drive_roost.py printed no JSON ({e}):\n{stdout}{}",
            text(&out.stderr)
        )
    })?;

    // The board, driven from Python.
    let (agent, run) = (&got["agent_id"], &got["run_id"]);
    assert!(agent.as_str().is_some_and(|a| !a.is_empty()), "{got}");
    assert!(
        got["identifier"]
            .as_str()
            .is_some_and(|i| i.starts_with("TST-")),
        "{got}"
    );
    assert_eq!(got["checkout_status"], "ISSUE_STATUS_IN_PROGRESS", "{got}");
    assert_eq!(got["holder"]["agent_id"], *agent, "{got}");
    assert_eq!(got["holder"]["run_id"], *run, "{got}");
    assert!(
        got["holder"]["token"].as_u64().is_some_and(|t| t > 0),
        "{got}"
    );
    assert_eq!(got["holder"]["token"], got["checkout_token"], "{got}");
    assert_eq!(got["comment"]["body"], "hello from python", "{got}");
    assert_eq!(got["comment"]["author_agent_id"], *agent, "{got}");
    assert_eq!(got["comment"]["created_by_run_id"], *run, "{got}");
    assert_eq!(
        got["comments_read"],
        serde_json::json!([{
            "id": got["comment"]["id"],
            "body": "hello from python",
            "author_agent_id": agent,
        }]),
        "{got}"
    );
    assert_eq!(got["unauthenticated"], "UNAUTHENTICATED", "{got}");

    // The Watch stream: the backlog in order, then the checkout and the comment, live.
    let backlog: Vec<u64> = got["backlog_seqs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        !backlog.is_empty() && backlog.windows(2).all(|w| w[0] < w[1]),
        "{got}"
    );
    let watched: Vec<(&str, &str)> = got["watched"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["action"].as_str()?, e["entity_id"].as_str()?)))
        .collect();
    let issue = got["issue_id"].as_str().unwrap_or_default();
    assert!(watched.contains(&("issue.checked_out", issue)), "{got}");
    assert!(
        watched.iter().any(|(a, _)| *a == "issue.comment_added"),
        "{got}"
    );
    let first_live = got["watched"][0]["seq"].as_u64().unwrap_or(0);
    assert!(first_live > *backlog.last().unwrap_or(&0), "{got}");
    assert_eq!(got["cluster_leader"], 1, "{got}");

    // Health: the server and each Roost service of the client listener; Raft is not there.
    assert_eq!(got["health"], "SERVING", "{got}");
    assert_eq!(
        got["health_services"],
        serde_json::json!({
            "roost.v1.Control": "SERVING",
            "roost.v1.Cluster": "SERVING",
            "roost.v1.Worker": "SERVING",
        }),
        "{got}"
    );
    assert_eq!(got["health_raft"], "NOT_FOUND", "{got}");

    // Reflection: what the listener serves, and the messages behind it.
    assert_eq!(
        got["services"],
        serde_json::json!([
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "roost.v1.Cluster",
            "roost.v1.Control",
            "roost.v1.Worker",
        ]),
        "{got}"
    );
    let methods = got["control_methods"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for method in ["Checkout", "AddComment", "ListComments", "CreateIssue"] {
        assert!(methods.iter().any(|m| m == method), "{method}: {got}");
    }
    assert_eq!(got["checkout_input"], "roost.v1.CheckoutRequest", "{got}");
    node.shutdown().await
}

/// The services the client listener lists through reflection, sorted.
const LISTED: [&str; 6] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    "roost.v1.Cluster",
    "roost.v1.Control",
    "roost.v1.Worker",
];

async fn health_of(
    client: &mut tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    service: &str,
) -> Result<i32, tonic::Code> {
    client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map(|r| r.into_inner().status)
        .map_err(|s| s.code())
}

/// Waits until the server and every Roost service have `status`.
async fn wait_health(
    client: &mut tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    status: tonic_health::pb::health_check_response::ServingStatus,
) -> anyhow::Result<()> {
    let until = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut all = true;
        for service in [
            "",
            "roost.v1.Control",
            "roost.v1.Cluster",
            "roost.v1.Worker",
        ] {
            all &= health_of(client, service).await == Ok(status as i32);
        }
        if all {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < until,
            "health did not become {status:?}: {:?}",
            health_of(client, "").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// grpc.health.v1 follows `/readyz` (without a credential), Raft is not on the client port, and
/// reflection v1 (grpcurl's first choice) lists what the listener serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_follows_readiness_and_reflection_v1_lists_the_services() -> anyhow::Result<()>
{
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let node = TestNode::start().await?;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", node.server().grpc_addr()))?
            .connect()
            .await?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    wait_health(&mut health, ServingStatus::Serving).await?;
    assert_eq!(
        health_of(&mut health, "roost.v1.Raft").await,
        Err(tonic::Code::NotFound)
    );

    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await?
        .into_inner();
    let reply = replies
        .message()
        .await?
        .and_then(|r| r.message_response)
        .ok_or_else(|| anyhow::anyhow!("no reflection reply"))?;
    let MessageResponse::ListServicesResponse(list) = reply else {
        anyhow::bail!("not a service list: {reply:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(names, LISTED);

    // Not ready (its Raft core stopped, as `/readyz` shows): NOT_SERVING within a check or two.
    node.server().api().node().shutdown().await;
    wait_health(&mut health, ServingStatus::NotServing).await?;
    node.shutdown().await
}
