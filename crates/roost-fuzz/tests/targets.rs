//! Each fuzz target driven for a bounded number of mutants of its seed corpus
//! (`fuzz/corpus/<target>/`, shared with cargo-fuzz): `ROOST_FUZZ_STEPS` of them (default
//! 50,000), from `ROOST_FUZZ_SEED` (default: drawn and printed). A panic fails the test with
//! the seed and the input in hex; `ROOST_FUZZ_SEED=<seed> cargo test -p roost-fuzz` replays.

use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;

use roost_fuzz::driver::{drive, load_corpus};
use roost_fuzz::TARGETS;
use roost_server::rest_fuzzing;

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(name);
    let corpus = load_corpus(&dir);
    assert!(!corpus.is_empty(), "no seed corpus in {}", dir.display());
    corpus
}

fn setting(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn fuzz(name: &str) {
    let target = TARGETS.iter().find(|t| t.name == name).expect("a target");
    let corpus = corpus(name);
    let seed = setting("ROOST_FUZZ_SEED").unwrap_or_else(|| RandomState::new().hash_one(name));
    let steps = setting("ROOST_FUZZ_STEPS").unwrap_or(50_000) as u32;
    eprintln!(
        "{name}: seed {seed}, {steps} mutants of {} seeds",
        corpus.len()
    );
    if let Err(failure) = drive(target.run, &corpus, seed, steps) {
        panic!("{name} panicked at {failure}\n replay: ROOST_FUZZ_SEED={seed} cargo test -p roost-fuzz --test targets {name}");
    }
}

#[test]
fn rest_body() {
    fuzz("rest_body");
}

#[test]
fn rest_query() {
    fuzz("rest_query");
}

#[test]
fn rest_headers() {
    fuzz("rest_headers");
}

#[test]
fn raft_payload() {
    fuzz("raft_payload");
}

#[test]
fn envelope() {
    fuzz("envelope");
}

/// Every target has a corpus, and the seeds are valid input, so mutants start from requests
/// the parsers accept (a seed that a changed request type refuses would leave its fields
/// unexplored).
#[test]
fn seeds_are_accepted() {
    for target in TARGETS {
        assert!(!corpus(target.name).is_empty());
    }
    for seed in corpus("rest_body") {
        let (name, body) = split(&seed);
        let n = rest_fuzzing::BODIES
            .iter()
            .position(|b| *b == name)
            .expect("a known body");
        let parsed = rest_fuzzing::parse_body(n, body);
        assert!(parsed.is_ok(), "{name}: {:?}", parsed.err());
    }
    for seed in corpus("rest_query") {
        let (name, query) = split(&seed);
        let n = rest_fuzzing::QUERIES
            .iter()
            .position(|q| *q == name)
            .expect("a known query");
        let parsed = rest_fuzzing::parse_query(n, query);
        assert!(parsed.is_ok(), "{name}: {:?}", parsed.err());
    }
    for seed in corpus("raft_payload") {
        let payload = match seed.first() {
            Some(b'{' | b'"') => roost_proto::v1::RaftPayload {
                json: seed.clone(),
                data: Vec::new(),
                seq: 0,
            },
            _ => prost::Message::decode(seed.as_slice()).expect("a protobuf payload"),
        };
        let text = String::from_utf8_lossy(&payload.json).into_owned();
        assert!(
            roost_raft::decode_raft_payload(&payload) > 0,
            "decodes as no message: {text}"
        );
    }
    for seed in corpus("envelope") {
        let env = serde_json::from_slice::<roost_core::Envelope>(&seed);
        assert!(
            env.is_ok(),
            "{}: {:?}",
            String::from_utf8_lossy(&seed),
            env.err()
        );
    }
}

fn split(seed: &[u8]) -> (&str, &[u8]) {
    let i = seed.iter().position(|b| *b == b'\n').expect("a name line");
    (
        std::str::from_utf8(&seed[..i]).expect("a name"),
        &seed[i + 1..],
    )
}
