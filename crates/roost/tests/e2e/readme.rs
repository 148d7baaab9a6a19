//! The README's five-minute walkthrough, run as printed against a real `roost dev`.
//!
//! Every ```sh block of the walkthrough section is run, in order, by one `bash -euo pipefail`
//! in the directory `roost dev` was started from, with the README's default URL swapped for the
//! process's ephemeral one. The script's output must then show each step's result, in order.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use roost_testkit::RoostProcess;

use crate::support::roost_binary;

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
const SECTION: &str = "## Five-minute walkthrough";
const DEFAULT_URL: &str = "http://127.0.0.1:7480";
const START_DEADLINE: Duration = Duration::from_secs(60);
const SCRIPT_DEADLINE: Duration = Duration::from_secs(120);

/// What the walkthrough's output must show, in this order: one marker per step whose failure
/// would not stop the script (curl prints an error body and exits 0; a refused checkout is
/// expected to fail).
const MARKERS: &[&str] = &[
    // issue create -q
    "RST-1\nRST-2\n",
    // inbox-lite
    r#""identifier":"RST-1""#,
    "] 200\n",
    // checkout
    r#""status":"in_progress""#,
    r#""checkout":{"agentId""#,
    "} 200\n",
    // heartbeat-context
    r#""activeRun":{"#,
    "} 200\n",
    // comment
    r#""body":"Parser written, tests pass.""#,
    "} 201\n",
    // the second agent's checkout
    "error: RST-1 is checked out by coder in run ",
    "(checkout_conflict, HTTP 409)",
    // PATCH to done with a comment
    r#""status":"done""#,
    r#""body":"Merged.""#,
    "} 200\n",
    // run finish
    "status:    succeeded",
    // the late write
    r#""code":"stale_run""#,
    "} 409\n",
    // issue list, activity, audit verify
    "RST-1  done",
    "RST-2  todo",
    "agent:coder",
    "activity chain intact: ",
];

/// The ```sh blocks of the walkthrough section, in order.
fn walkthrough_blocks(readme: &str) -> Vec<String> {
    let start = readme
        .find(SECTION)
        .unwrap_or_else(|| panic!("README.md has no `{SECTION}` section"));
    let section = &readme[start + SECTION.len()..];
    let section = match section.find("\n## ") {
        Some(end) => &section[..end],
        None => section,
    };
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        match current.as_mut() {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    assert!(
        current.is_none(),
        "an unclosed ```sh block in the walkthrough"
    );
    blocks
}

/// Runs `script` with bash in `dir`; returns its exit status and its stdout and stderr, merged
/// in the order they were written.
fn run_bash(
    dir: &Path,
    script: &str,
    envs: &[(&str, String)],
) -> anyhow::Result<(std::process::ExitStatus, String)> {
    // One pipe for both streams keeps error messages next to the step that printed them; the
    // trap says which command failed when one does.
    let prelude =
        "exec 2>&1\ntrap 'echo \"walkthrough failed at line $LINENO: $BASH_COMMAND\"' ERR\n";
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c"])
        .arg(format!("{prelude}{script}"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // Nothing from the test's own environment may stand in for what the walkthrough sets.
    for var in [
        "ROOST_TOKEN",
        "ROOST_RUN_ID",
        "ROOST_DEV_DIR",
        "ROOST_SERVER",
    ] {
        command.env_remove(var);
    }
    command.envs(envs.iter().map(|(k, v)| (k, v)));
    let mut child = command.spawn()?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > SCRIPT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the walkthrough did not finish within {SCRIPT_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = reader.join().unwrap_or_default();
    Ok((status, output))
}

#[test]
fn readme_walkthrough_runs_as_printed() -> anyhow::Result<()> {
    let blocks = walkthrough_blocks(README);
    assert!(
        blocks.len() >= 10,
        "expected the walkthrough's steps, found {} ```sh blocks",
        blocks.len()
    );

    // `roost dev` in `dir` keeps its data and token in `dir/.roost`, as the README's terminal 1.
    let dir = tempfile::tempdir()?;
    let process =
        RoostProcess::spawn_dev(&roost_binary(), &dir.path().join(".roost"), START_DEADLINE)?;
    let script = blocks.concat().replace(DEFAULT_URL, &process.base_url);

    let binary = roost_binary();
    let bin_dir = binary.parent().expect("the binary has a directory");
    let path = match std::env::var_os("PATH") {
        Some(path) => {
            let dirs = std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path));
            std::env::join_paths(dirs)?
        }
        None => bin_dir.as_os_str().to_owned(),
    };
    let started = Instant::now();
    let (status, output) = run_bash(
        dir.path(),
        &script,
        &[
            ("PATH", path.to_string_lossy().into_owned()),
            ("ROOST_SERVER", process.base_url.clone()),
        ],
    )?;
    eprintln!("the walkthrough ran in {:?}", started.elapsed());
    assert!(
        status.success(),
        "the walkthrough failed ({status}):\n{output}\n--- script ---\n{script}"
    );

    let mut rest = output.as_str();
    for marker in MARKERS {
        match rest.find(marker) {
            Some(at) => rest = &rest[at + marker.len()..],
            None => panic!(
                "the walkthrough's output lacks {marker:?} after the previous step's:\n{output}"
            ),
        }
    }
    Ok(())
}

#[test]
fn only_sh_blocks_of_the_walkthrough_section_are_taken() {
    let readme = "\
# X

```sh
cargo run -p roost -- dev
```

## Five-minute walkthrough

Step one:

```sh
echo one
```

```text
one
```

```sh
echo two
echo three
```

## Next

```sh
echo never
```
";
    assert_eq!(
        walkthrough_blocks(readme),
        ["echo one\n", "echo two\necho three\n"]
    );
}
