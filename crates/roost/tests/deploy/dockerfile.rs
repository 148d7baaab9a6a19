//! The Dockerfile: a multi-stage build whose runtime stage runs as a non-root user.

use std::path::Path;

use crate::{deploy_dir, read};

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
    // Cargo reads the build's settings (SQLite's compile flags) from .cargo/config.toml under
    // the directory it runs in: without it the image's SQLite would be built another way.
    assert!(
        build
            .iter()
            .any(|(w, r)| w == "COPY" && r.split_whitespace().next() == Some(".cargo")),
        "the build stage copies .cargo/ (config.toml: SQLite's compile flags)"
    );
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
