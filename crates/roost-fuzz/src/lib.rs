//! Fuzz targets for what a node parses from the network: REST request bodies, query strings
//! and caller headers, Raft payloads between nodes, and the command envelopes in log entries.
//! Each target is a plain function over bytes that must not panic; `fuzz/fuzz_targets/` runs
//! them under cargo-fuzz (libFuzzer), and `tests/targets.rs` drives each for a bounded number
//! of mutations of the seed corpus in `fuzz/corpus/<target>/` in every `cargo test`.

pub mod driver;

use std::sync::OnceLock;

use prost::Message;
use roost_core::command::IssuePatch;
use roost_core::{Actor, ActorKind, AdapterType, Command, Envelope, State, Timestamp};
use roost_proto::v1::RaftPayload;
use roost_server::rest_fuzzing;

/// A target: its name (its directories under `fuzz/`) and its function.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "rest_body",
        run: rest_body,
    },
    Target {
        name: "rest_query",
        run: rest_query,
    },
    Target {
        name: "rest_headers",
        run: rest_headers,
    },
    Target {
        name: "raft_payload",
        run: raft_payload,
    },
    Target {
        name: "envelope",
        run: envelope,
    },
];

/// Splits `<name>\n<rest>`: which of `names` an input is for (an unknown name still picks
/// one, by its length) and the bytes after the first line.
fn named<'a>(data: &'a [u8], names: &[&str]) -> (usize, &'a [u8]) {
    let (head, rest) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let n = names
        .iter()
        .position(|name| name.as_bytes() == head)
        .unwrap_or(head.len());
    (n, rest)
}

/// `<body name>\n<body>`: a JSON body for one route (`rest_fuzzing::BODIES`).
pub fn rest_body(data: &[u8]) {
    let (n, body) = named(data, rest_fuzzing::BODIES);
    let _ = rest_fuzzing::parse_body(n, body);
}

/// `<query name>\n<query string>` (`rest_fuzzing::QUERIES`).
pub fn rest_query(data: &[u8]) {
    let (n, query) = named(data, rest_fuzzing::QUERIES);
    let _ = rest_fuzzing::parse_query(n, query);
}

/// `<Authorization>\n<run id>\n<Idempotency-Key>`: header values.
pub fn rest_headers(data: &[u8]) {
    let mut values = data.splitn(3, |b| *b == b'\n');
    let auth = values.next().unwrap_or_default();
    let run = values.next().unwrap_or_default();
    let key = values.next().unwrap_or_default();
    let _ = rest_fuzzing::parse_headers(auth, run, key);
}

/// A `RaftPayload` as it arrives (protobuf), or the JSON it
/// carries (`{` or `"` first): decoded as every request and reply nodes exchange.
pub fn raft_payload(data: &[u8]) {
    let payload = if matches!(data.first(), Some(b'{' | b'"')) {
        RaftPayload {
            json: data.to_vec(),
            data: Vec::new(),
            seq: 0,
        }
    } else {
        match RaftPayload::decode(data) {
            Ok(payload) => payload,
            Err(_) => return,
        }
    };
    roost_raft::decode_raft_payload(&payload);
}

/// The state `envelope` applies to: two companies, an agent in each, an issue, a run.
fn small_state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| {
        let admin = Actor {
            kind: ActorKind::User,
            id: "admin".into(),
            credential_id: Some("cred-admin".into()),
            run_id: None,
            company_id: None,
        };
        let commands = [
            Command::CreateCompany {
                id: "c1".into(),
                name: "Acme".into(),
                issue_prefix: "ACM".into(),
            },
            Command::CreateCompany {
                id: "c2".into(),
                name: "Other".into(),
                issue_prefix: "OTH".into(),
            },
            agent("a1", "c1"),
            agent("b1", "c2"),
            Command::CreateIssue {
                id: "i1".into(),
                company_id: "c1".into(),
                fields: IssuePatch {
                    title: Some("one".into()),
                    ..Default::default()
                },
            },
            Command::StartRun {
                id: "r1".into(),
                agent_id: "a1".into(),
                issue_id: None,
                invocation_source: "on_demand".into(),
            },
        ];
        let mut state = State::new();
        for (n, command) in commands.into_iter().enumerate() {
            let env = Envelope {
                request_id: None,
                at: Timestamp(1_767_225_600_000),
                actor: admin.clone(),
                command,
                idempotency_key: None,
            };
            state.apply_entry(n as u64 + 1, &env);
        }
        state
    })
}

fn agent(id: &str, company: &str) -> Command {
    Command::CreateAgent {
        id: id.into(),
        company_id: company.into(),
        name: id.into(),
        role: "engineer".into(),
        title: None,
        adapter_type: AdapterType::Process,
        adapter_config: serde_json::json!({}),
        heartbeat: Default::default(),
        placement_labels: Default::default(),
    }
}

/// A log entry's envelope (JSON, as the Raft log and AppendEntries carry it). One that
/// decodes must encode to JSON that decodes to it again (the log is read back after a
/// restart), and applying it must not panic.
pub fn envelope(data: &[u8]) {
    let Ok(env) = serde_json::from_slice::<Envelope>(data) else {
        return;
    };
    let json = serde_json::to_vec(&env).expect("a decoded envelope encodes");
    match serde_json::from_slice::<Envelope>(&json) {
        Ok(back) => assert!(
            back == env,
            "the envelope changed through its JSON: {}",
            String::from_utf8_lossy(&json)
        ),
        Err(e) => panic!(
            "an accepted envelope encodes to JSON that does not decode ({e}): {}",
            String::from_utf8_lossy(&json)
        ),
    }
    let mut state = small_state().clone();
    state.apply_entry(100, &env);
}
