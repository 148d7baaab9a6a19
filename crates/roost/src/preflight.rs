//! What a start checks of a server config beyond the loader (`config.rs`), before it binds a
//! socket or opens the data dir: the addresses (their form, the node's own member entry, a
//! name to advertise for a wildcard listener), the Raft timing and the TLS files.
//! `roost server --check` runs the same functions, so it refuses exactly what a start refuses,
//! with the same message.

use std::net::IpAddr;

use anyhow::bail;
use roost_server::ServerConfig;

/// Every check of this module, in the order a start runs them.
pub fn server(config: &ServerConfig) -> anyhow::Result<()> {
    addresses(config)?;
    raft_timing(config)?;
    tls_files(config)
}

/// `host:port` with a port number and a host (an IPv6 address in brackets): what the
/// listeners bind and the other nodes dial.
fn host_and_port(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    let needs_brackets = host.contains(':') || host.starts_with('[') || host.ends_with(']');
    if host.is_empty() || (needs_brackets && !bracketed) {
        return None;
    }
    Some((host, port))
}

/// An address that names every interface (`0.0.0.0`, `[::]`): a node can listen there, but
/// no other machine can dial it.
fn is_wildcard(host: &str) -> bool {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
}

/// The listen and advertised addresses, and the node's place among `initial_members`.
pub fn addresses(config: &ServerConfig) -> anyhow::Result<()> {
    let sides = [
        (
            "http",
            &config.http_listen,
            &config.advertise_http,
            "http_addr",
        ),
        (
            "grpc",
            &config.grpc_listen,
            &config.advertise_grpc,
            "grpc_addr",
        ),
        (
            "peer",
            &config.peer_listen,
            &config.advertise_peer,
            "peer_addr",
        ),
    ];
    for (side, listen, advertised, _) in sides {
        let Some((host, _)) = host_and_port(listen) else {
            bail!("{side}_listen = {listen:?}: expected host:port (for example 127.0.0.1:7480)");
        };
        match advertised {
            Some(a) if host_and_port(a).is_none_or(|(h, p)| p == 0 || is_wildcard(h)) => bail!(
                "advertise_{side} = {a:?}: expected the host:port other nodes and clients \
                 dial (a name or address, not a wildcard, and a port other than 0)"
            ),
            // A cluster's members are checked below; a node of its own may listen on every
            // interface unadvertised (`run_server` warns: a node added later could not dial it).
            None if is_wildcard(host) && !config.initial_members.is_empty() => bail!(
                "{side}_listen = {listen} listens on every interface, which no other machine \
                 can dial: set advertise_{side} to the host:port the others reach this node at"
            ),
            _ => {}
        }
    }
    if config.initial_members.is_empty() {
        return Ok(());
    }
    let mut ids = std::collections::BTreeSet::new();
    for m in &config.initial_members {
        if m.id == 0 || !ids.insert(m.id) {
            bail!(
                "initial_members: id {} is {}: every member needs an id of its own, from 1",
                m.id,
                if m.id == 0 {
                    "not a node id"
                } else {
                    "listed twice"
                }
            );
        }
        for (key, addr) in [
            ("http_addr", &m.http_addr),
            ("grpc_addr", &m.grpc_addr),
            ("peer_addr", &m.peer_addr),
        ] {
            if host_and_port(addr).is_none_or(|(h, p)| p == 0 || is_wildcard(h)) {
                bail!(
                    "initial_members: node {} has {key} = {addr:?}: expected the host:port the \
                     others dial",
                    m.id
                );
            }
        }
    }
    let Some(me) = config
        .initial_members
        .iter()
        .find(|m| m.id == config.node_id)
    else {
        bail!(
            "node_id = {} is not among initial_members (ids {}): list this node there, or leave \
             initial_members out (with bootstrap = false) and add it with `roost cluster \
             add-node`",
            config.node_id,
            ids.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    // The cluster is formed with the members' addresses; this node announces its own. Two
    // answers would leave the others dialling an address this node does not serve.
    for (side, listen, advertised, key) in sides {
        let member_addr = match key {
            "http_addr" => &me.http_addr,
            "grpc_addr" => &me.grpc_addr,
            _ => &me.peer_addr,
        };
        let reached = advertised.as_ref().unwrap_or(listen);
        if reached != member_addr {
            let from = if advertised.is_some() {
                format!("advertise_{side}")
            } else {
                format!("{side}_listen, advertise_{side} being unset")
            };
            bail!(
                "initial_members: node {} has {key} = {member_addr}, but this node says it is \
                 reached at {reached} ({from}): make them the same address",
                config.node_id
            );
        }
    }
    Ok(())
}

/// The listen settings on every interface with no address advertised in their place.
pub fn unadvertised_wildcards(config: &ServerConfig) -> Vec<&'static str> {
    [
        ("http_listen", &config.http_listen, &config.advertise_http),
        ("grpc_listen", &config.grpc_listen, &config.advertise_grpc),
        ("peer_listen", &config.peer_listen, &config.advertise_peer),
    ]
    .into_iter()
    .filter(|(_, listen, advertised)| {
        advertised.is_none() && host_and_port(listen).is_some_and(|(h, _)| is_wildcard(h))
    })
    .map(|(setting, _, _)| setting)
    .collect()
}

/// `[raft]` timing as openraft 0.9 checks it when the Raft core starts (its
/// `Config::validate`), reported before the data dir is opened and naming the keys.
pub fn raft_timing(config: &ServerConfig) -> anyhow::Result<()> {
    let t = &config.raft;
    // The defaults changed (30, 100-150 ms; they were 100, 350-600): a config that sets one key
    // alone may now clash with the others' defaults, so the message says to set all three.
    const ALL_THREE: &str = "set heartbeat_interval_ms, election_timeout_min_ms and \
                             election_timeout_max_ms together (defaults 30, 100, 150; \
                             docs/cluster.md)";
    let message = if t.heartbeat_interval_ms == 0 {
        format!("[raft] heartbeat_interval_ms must be at least 1; {ALL_THREE}")
    } else if t.election_timeout_min_ms >= t.election_timeout_max_ms {
        format!(
            "[raft] election_timeout_min_ms = {} must be less than election_timeout_max_ms = {}; \
             {ALL_THREE}",
            t.election_timeout_min_ms, t.election_timeout_max_ms
        )
    } else if t.election_timeout_min_ms <= t.heartbeat_interval_ms {
        format!(
            "[raft] election_timeout_min_ms = {} must be more than heartbeat_interval_ms = {} \
             (followers would stand for election between heartbeats); {ALL_THREE}",
            t.election_timeout_min_ms, t.heartbeat_interval_ms
        )
    } else {
        return Ok(());
    };
    Err(roost_server::Error::Raft(roost_raft::Error::Config { message }).into())
}

/// Reads `[tls]` as the node's listeners do (roost-server's `NodeTls::load`): each file
/// readable, PEM of the right kind, the key fitting the certificate, the CA usable to check
/// clients. The errors name the file and its setting.
pub fn tls_files(config: &ServerConfig) -> anyhow::Result<()> {
    let tls = &config.tls;
    let (Some(cert_file), Some(key_file)) = (&tls.cert_file, &tls.key_file) else {
        return Ok(());
    };
    let identity = roost_tls::Identity {
        cert_file,
        cert_setting: "tls.cert_file",
        key_file,
        key_setting: "tls.key_file",
    };
    let ca = tls.ca_file.as_deref().map(|p| (p, "tls.ca_file"));
    let read = || -> Result<(), roost_tls::Error> {
        roost_tls::server_config(&identity, ca, roost_tls::ClientCerts::Required, &[b"h2"])?;
        roost_tls::read_checked_pem(cert_file, "tls.cert_file", roost_tls::PemKind::Certificates)?;
        roost_tls::read_checked_pem(key_file, "tls.key_file", roost_tls::PemKind::PrivateKey)?;
        if let Some(ca) = &tls.ca_file {
            roost_tls::read_checked_pem(ca, "tls.ca_file", roost_tls::PemKind::Certificates)?;
        }
        Ok(())
    };
    // Worded as `Server::start` words it (`roost_server::Error::Tls`), without repeating the
    // cause: an `anyhow` chain printed with `{:#}` would show it twice.
    read().map_err(|e| anyhow::anyhow!("{}", roost_server::Error::Tls(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_server::MemberConfig;

    fn member(id: u64, host: &str) -> MemberConfig {
        MemberConfig {
            id,
            http_addr: format!("{host}:7480"),
            grpc_addr: format!("{host}:7481"),
            peer_addr: format!("{host}:7482"),
        }
    }

    /// Node 1 of three, listening on every interface and advertising `node-1`.
    fn three_nodes() -> ServerConfig {
        ServerConfig {
            http_listen: "0.0.0.0:7480".into(),
            grpc_listen: "0.0.0.0:7481".into(),
            peer_listen: "[::]:7482".into(),
            advertise_http: Some("node-1:7480".into()),
            advertise_grpc: Some("node-1:7481".into()),
            advertise_peer: Some("node-1:7482".into()),
            initial_members: vec![
                member(1, "node-1"),
                member(2, "node-2"),
                member(3, "node-3"),
            ],
            ..ServerConfig::default()
        }
    }

    fn refused(config: &ServerConfig) -> String {
        match addresses(config) {
            Ok(()) => panic!("accepted: {config:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(host_and_port("127.0.0.1:7480"), Some(("127.0.0.1", 7480)));
        assert_eq!(host_and_port("[::1]:0"), Some(("[::1]", 0)));
        assert_eq!(host_and_port("node-1:7480"), Some(("node-1", 7480)));
        for bad in [
            "7480",
            ":7480",
            "node-1:",
            "node-1:http",
            "::1:7480",
            "[]:1",
            "h:70000",
        ] {
            assert_eq!(host_and_port(bad), None, "{bad}");
        }
        let config = ServerConfig {
            grpc_listen: "127.0.0.1".into(),
            ..ServerConfig::default()
        };
        assert!(refused(&config).contains("grpc_listen = \"127.0.0.1\""));
    }

    #[test]
    fn a_node_among_its_members_at_its_advertised_addresses_passes() {
        assert!(addresses(&three_nodes()).is_ok());
        assert!(addresses(&ServerConfig::default()).is_ok());
        // Loopback listeners named as they are in the member list need no advertise_*.
        let mut local = ServerConfig::default();
        local.initial_members = vec![MemberConfig {
            id: 1,
            http_addr: local.http_listen.clone(),
            grpc_addr: local.grpc_listen.clone(),
            peer_addr: local.peer_listen.clone(),
        }];
        assert!(addresses(&local).is_ok());
    }

    #[test]
    fn a_wildcard_listener_needs_an_advertised_address() {
        let mut config = three_nodes();
        config.advertise_peer = None;
        let err = refused(&config);
        assert!(
            err.contains("peer_listen = [::]:7482") && err.contains("set advertise_peer"),
            "{err}"
        );
        config.advertise_peer = Some("0.0.0.0:7482".into());
        assert!(refused(&config).contains("advertise_peer"));
        // A node of its own may: it dials nobody, and a start warns.
        config.initial_members.clear();
        config.advertise_peer = None;
        assert!(addresses(&config).is_ok());
        assert_eq!(unadvertised_wildcards(&config), ["peer_listen"]);
        assert!(unadvertised_wildcards(&three_nodes()).is_empty());
    }

    #[test]
    fn a_node_missing_from_its_members_or_elsewhere_in_them_is_refused() {
        let mut config = three_nodes();
        config.node_id = 4;
        let err = refused(&config);
        assert!(
            err.contains("node_id = 4 is not among initial_members (ids 1, 2, 3)"),
            "{err}"
        );
        let mut config = three_nodes();
        config.advertise_grpc = Some("node-9:7481".into());
        let err = refused(&config);
        assert!(
            err.contains("grpc_addr = node-1:7481") && err.contains("node-9:7481"),
            "{err}"
        );
        let mut config = three_nodes();
        config.initial_members[2].id = 2;
        assert!(refused(&config).contains("id 2 is listed twice"));
        let mut config = three_nodes();
        config.initial_members[1].peer_addr = "node-2".into();
        assert!(refused(&config).contains("node 2 has peer_addr = \"node-2\""));
    }

    #[test]
    fn raft_timing_is_checked_naming_the_keys() {
        let mut config = ServerConfig::default();
        assert!(raft_timing(&config).is_ok());
        config.raft.election_timeout_min_ms = config.raft.election_timeout_max_ms;
        let err = raft_timing(&config).unwrap_err().to_string();
        assert!(
            err.starts_with("invalid raft configuration: [raft] election_timeout_min_ms"),
            "{err}"
        );
        let mut config = ServerConfig::default();
        config.raft.heartbeat_interval_ms = config.raft.election_timeout_min_ms;
        let err = raft_timing(&config).unwrap_err().to_string();
        assert!(err.contains("heartbeat_interval_ms"), "{err}");
    }

    /// Regression: a config written for the old defaults that sets one key alone (as the fault
    /// suite's did: `heartbeat_interval_ms = 100`) now clashes with the new ones; the refusal
    /// says to set the three together. A zero heartbeat (a busy loop in openraft's tick and
    /// the read retry) is refused too.
    #[test]
    fn a_raft_key_set_alone_against_the_new_defaults_is_refused_saying_set_all_three() {
        let mut config = ServerConfig::default();
        config.raft.heartbeat_interval_ms = 100;
        let err = raft_timing(&config).unwrap_err().to_string();
        assert!(err.contains("set heartbeat_interval_ms, election_timeout_min_ms and election_timeout_max_ms together"), "{err}");
        let mut config = ServerConfig::default();
        config.raft.election_timeout_min_ms = 350;
        let err = raft_timing(&config).unwrap_err().to_string();
        assert!(err.contains("together (defaults 30, 100, 150"), "{err}");
        let mut config = ServerConfig::default();
        config.raft.heartbeat_interval_ms = 0;
        let err = raft_timing(&config).unwrap_err().to_string();
        assert!(
            err.contains("heartbeat_interval_ms must be at least 1"),
            "{err}"
        );
    }

    #[test]
    fn tls_files_must_be_readable_pem_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ServerConfig::default();
        assert!(tls_files(&config).is_ok(), "no TLS, no files to read");
        config.tls.ca_file = Some(dir.path().join("ca.pem"));
        config.tls.cert_file = Some(dir.path().join("node-1.pem"));
        config.tls.key_file = Some(dir.path().join("node-1-key.pem"));
        let err = format!("{:#}", tls_files(&config).unwrap_err());
        assert!(
            err.starts_with("TLS: ") && err.contains("tls.cert_file"),
            "{err}"
        );
        std::fs::write(dir.path().join("node-1.pem"), "not PEM").unwrap();
        let err = format!("{:#}", tls_files(&config).unwrap_err());
        assert!(err.contains("node-1.pem"), "{err}");
    }
}
