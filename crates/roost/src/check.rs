//! `roost server --check` and `roost run-worker --check`: the summary of a configuration that
//! loaded and passed every check a start makes (`config.rs`, `preflight.rs`,
//! `WorkerConfig::validate`), for a person (`text`) or a script (`--json`). Nothing here binds
//! a socket or opens a data dir.

use roost_server::ServerConfig;
use roost_worker::WorkerConfig;
use serde_json::{json, Value};

/// Prints `report` as JSON, or `text` for a person.
pub fn print(report: &Value, text: &str, as_json: bool) {
    if as_json {
        println!("{report:#}");
    } else {
        print!("{text}");
    }
}

/// Whether this node forms the cluster on its first start, as `Server::start` decides: the
/// lowest of `initial_members`, or `bootstrap` without members.
fn forms_cluster(config: &ServerConfig) -> bool {
    match config.initial_members.iter().map(|m| m.id).min() {
        Some(lowest) => lowest == config.node_id,
        None => config.bootstrap,
    }
}

/// A server config as JSON: what the node will be, once started.
pub fn server_report(config: &ServerConfig) -> Value {
    let advertised = |a: &Option<String>, listen: &String| a.clone().unwrap_or(listen.clone());
    json!({
        "node_id": config.node_id,
        "data_dir": config.data_dir,
        "listen": {
            "http": config.http_listen,
            "grpc": config.grpc_listen,
            "peer": config.peer_listen,
        },
        "advertise": {
            "http": advertised(&config.advertise_http, &config.http_listen),
            "grpc": advertised(&config.advertise_grpc, &config.grpc_listen),
            "peer": advertised(&config.advertise_peer, &config.peer_listen),
        },
        "members": config.initial_members,
        "forms_cluster": forms_cluster(config),
        "tls": config.tls.enabled(),
        "insecure_plaintext": config.insecure_plaintext,
        "runtime_threads": config.runtime_threads,
        "shutdown_grace_secs": config.shutdown_grace_secs,
        "warnings": warnings(config),
    })
}

/// What a start warns of in this config (it starts all the same).
fn warnings(config: &ServerConfig) -> Vec<String> {
    crate::preflight::unadvertised_wildcards(config)
        .into_iter()
        .map(|setting| {
            format!(
                "{setting} is every interface and advertise_{} is unset: a node added later \
                 could not dial this one",
                setting.trim_end_matches("_listen")
            )
        })
        .collect()
}

/// A server config for a person: a few lines.
pub fn server_text(config: &ServerConfig) -> String {
    let members = if config.initial_members.is_empty() {
        if config.bootstrap {
            "none: forms a one-node cluster on its first start".to_string()
        } else {
            "none: waits to be added (roost cluster add-node)".to_string()
        }
    } else {
        let peers: Vec<String> = config
            .initial_members
            .iter()
            .map(|m| format!("{} at {}", m.id, m.peer_addr))
            .collect();
        let role = if forms_cluster(config) {
            "this node forms the cluster"
        } else {
            "the lowest id forms the cluster"
        };
        format!("{} ({role})", peers.join(", "))
    };
    let tls = match (&config.tls.ca_file, config.tls.enabled()) {
        (Some(ca), true) => format!("on (CA {})", ca.display()),
        (_, true) => "on".to_string(),
        (_, false) if config.insecure_plaintext => "off (insecure_plaintext)".to_string(),
        (_, false) => "off (loopback only)".to_string(),
    };
    let r = server_report(config);
    let notes: String = warnings(config)
        .iter()
        .map(|w| format!("  warning     {w}\n"))
        .collect();
    format!(
        "config OK: node {}\n  listen      http {}, grpc {}, peer {}\n  advertise   http {}, \
         grpc {}, peer {}\n  members     {members}\n  TLS         {tls}\n  data dir    {} (not \
         opened by --check)\n  stop grace  {} s\n{notes}",
        config.node_id,
        config.http_listen,
        config.grpc_listen,
        config.peer_listen,
        r["advertise"]["http"].as_str().unwrap_or_default(),
        r["advertise"]["grpc"].as_str().unwrap_or_default(),
        r["advertise"]["peer"].as_str().unwrap_or_default(),
        config.data_dir.display(),
        config.shutdown_grace_secs,
    )
}

/// A worker config as JSON.
pub fn worker_report(config: &WorkerConfig) -> Value {
    json!({
        "worker_id": config.worker_id,
        "servers": config.servers,
        "api_url": config.api_url,
        "tls": config.tls.ca_file.is_some(),
        "client_certificate": config.tls.cert_file.is_some(),
        "work_dir": config.work_dir,
        "credential_file": config.credential_file(),
        "has_credential": config.credential_file().exists(),
        "slots": config.slots,
        "shutdown_grace_secs": config.shutdown_grace_secs,
    })
}

/// A worker config for a person.
pub fn worker_text(config: &WorkerConfig) -> String {
    let tls = match (&config.tls.ca_file, &config.tls.cert_file) {
        (Some(ca), Some(_)) => format!("on (CA {}, with its own certificate)", ca.display()),
        (Some(ca), None) => format!("on (CA {})", ca.display()),
        (None, _) => "off".to_string(),
    };
    let credential = config.credential_file();
    let credential = if credential.exists() {
        format!("{}", credential.display())
    } else {
        format!(
            "{} (made at the first start, for the join token)",
            credential.display()
        )
    };
    format!(
        "config OK: worker {}\n  servers     {}\n  api url     {}\n  TLS         {tls}\n  \
         work dir    {} (not opened by --check)\n  credential  {credential}\n  slots       {}\n  \
         stop grace  {} s\n",
        config.worker_id,
        config.servers.join(", "),
        config.api_url,
        config.work_dir.display(),
        config.slots,
        config.shutdown_grace_secs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_server::MemberConfig;

    #[test]
    fn a_server_summary_names_the_node_its_addresses_members_and_tls() {
        let mut config = ServerConfig {
            node_id: 2,
            advertise_peer: Some("node-2:7482".into()),
            ..ServerConfig::default()
        };
        config.initial_members = (1..=3)
            .map(|id| MemberConfig {
                id,
                http_addr: format!("node-{id}:7480"),
                grpc_addr: format!("node-{id}:7481"),
                peer_addr: format!("node-{id}:7482"),
            })
            .collect();
        let report = server_report(&config);
        assert_eq!(report["node_id"], 2);
        assert_eq!(report["listen"]["http"], "127.0.0.1:7480");
        assert_eq!(report["advertise"]["http"], "127.0.0.1:7480");
        assert_eq!(report["advertise"]["peer"], "node-2:7482");
        assert_eq!(report["members"][2]["peer_addr"], "node-3:7482");
        assert_eq!(report["forms_cluster"], false);
        assert_eq!(report["tls"], false);
        assert_eq!(report["data_dir"], "roost-data");
        let text = server_text(&config);
        for wanted in [
            "config OK: node 2",
            "peer 127.0.0.1:7482",
            "peer node-2:7482",
            "3 at node-3:7482 (the lowest id forms the cluster)",
            "TLS         off (loopback only)",
            "data dir    roost-data",
            "stop grace  10 s",
        ] {
            assert!(text.contains(wanted), "{wanted:?} not in\n{text}");
        }
        assert!(server_text(&ServerConfig::default()).contains("forms a one-node cluster"));
        assert_eq!(report["warnings"], serde_json::json!([]));
        let open = ServerConfig {
            http_listen: "0.0.0.0:7480".into(),
            ..ServerConfig::default()
        };
        assert!(
            server_text(&open).contains("warning     http_listen is every interface"),
            "{}",
            server_text(&open)
        );
    }

    #[test]
    fn a_worker_summary_names_its_servers_tls_and_credential() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = WorkerConfig {
            worker_id: "w-1".into(),
            work_dir: dir.path().to_path_buf(),
            ..WorkerConfig::default()
        };
        config.tls.ca_file = Some("ca.pem".into());
        let report = worker_report(&config);
        assert_eq!(report["worker_id"], "w-1");
        assert_eq!(report["tls"], true);
        assert_eq!(report["has_credential"], false);
        let text = worker_text(&config);
        assert!(text.contains("config OK: worker w-1"), "{text}");
        assert!(text.contains("TLS         on (CA ca.pem)"), "{text}");
        assert!(text.contains("made at the first start"), "{text}");
    }
}
