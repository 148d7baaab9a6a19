//! Runs one agent process under supervision: its own process group, the prompt on stdin, every
//! output line to the run log (and to the adapter's parser), and SIGTERM then SIGKILL after the
//! grace period when the run is stopped or times out.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::runlog::RunLog;

/// Which stream a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// What to run.
pub(crate) struct Spec<'a> {
    pub program: &'a str,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: &'a Path,
    pub stdin: String,
    pub timeout: Option<Duration>,
    pub grace: Duration,
}

/// How the process ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    Exited {
        code: Option<i32>,
        success: bool,
    },
    /// Stopped by the worker for this reason (cancelled, self_fenced, shutting down).
    Stopped(&'static str),
    TimedOut,
    NotStarted(String),
}

/// The reason a run is stopped when its worker is shutting down (`session.rs`).
pub(crate) const SHUTTING_DOWN: &str = "worker shutting down";
/// SIGTERM to SIGKILL when the worker is shutting down: its whole stop is bounded by
/// `shutdown_grace_secs`, which an agent's own `graceSec` must not stretch.
const SHUTDOWN_KILL_AFTER: Duration = Duration::from_secs(1);

fn signal_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created for the
    // agent; it touches no memory of ours.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

/// A process's parent and start time (clock ticks since boot) from `/proc/<pid>/stat`.
fn stat_of(stat: &str) -> Option<(i32, u64)> {
    // The command name is in parentheses and may hold anything: the fields after its last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), ..., starttime (22).
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// Every process descended from `root`, with its start time, read from `/proc`. An agent CLI
/// may start its tools in sessions of their own (Claude Code's Bash tool, Codex's terminals),
/// out of reach of a signal to its process group.
fn descendants(root: u32) -> Vec<(i32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all: Vec<(i32, i32, u64)> = dir
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (ppid, start) = stat_of(&stat)?;
            Some((pid, ppid, start))
        })
        .collect();
    let mut found: Vec<(i32, u64)> = Vec::new();
    let mut parents = vec![root as i32];
    while let Some(parent) = parents.pop() {
        for (pid, ppid, start) in &all {
            if *ppid == parent && !found.iter().any(|(p, _)| p == pid) {
                found.push((*pid, *start));
                parents.push(*pid);
            }
        }
    }
    found
}

/// Signals each process of `tree` that is still the one recorded (same start time), and the
/// process group it leads.
fn signal_tree(tree: &[(i32, u64)], signal: i32) {
    for (pid, start) in tree {
        let same = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| stat_of(&s))
            .is_some_and(|(_, s)| s == *start);
        if same {
            // SAFETY: kill(2) and getpgid(2) on a process of the agent's tree; no memory of
            // ours is touched.
            unsafe {
                if libc::getpgid(*pid) == *pid {
                    libc::kill(-*pid, signal);
                }
                libc::kill(*pid, signal);
            }
        }
    }
}

async fn forward_lines(
    stream: Stream,
    reader: impl AsyncRead + Unpin,
    lines: mpsc::Sender<(Stream, Vec<u8>)>,
) {
    let mut reader = BufReader::new(reader);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if lines.send((stream, line)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Runs `spec` to its end or until `stop` fires. Each output line goes to `log` and then to
/// `on_line`. `stop` is borrowed so an adapter can run a second process in the same run.
pub(crate) async fn run(
    spec: Spec<'_>,
    stop: &mut oneshot::Receiver<&'static str>,
    log: &mut RunLog,
    on_line: &mut (dyn FnMut(Stream, &str) + Send),
) -> Exit {
    let mut command = tokio::process::Command::new(spec.program);
    command
        .args(&spec.args)
        .current_dir(spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the new process; it allocates
    // nothing and is async-signal-safe. If the worker is killed, its agents get SIGTERM.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => return Exit::NotStarted(format!("cannot start {}: {e}", spec.program)),
    };
    let pid = child.id().unwrap_or(0);
    if let Some(mut stdin) = child.stdin.take() {
        let text = spec.stdin;
        tokio::spawn(async move {
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let (tx, mut lines) = mpsc::channel(256);
    if let Some(out) = child.stdout.take() {
        tokio::spawn(forward_lines(Stream::Stdout, out, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(forward_lines(Stream::Stderr, err, tx));
    }
    let mut take_line = |log: &mut RunLog, (stream, line): (Stream, Vec<u8>)| {
        log.write(&line);
        on_line(stream, String::from_utf8_lossy(&line).trim_end());
    };
    let timeout = tokio::time::sleep(spec.timeout.unwrap_or(Duration::MAX / 4));
    tokio::pin!(timeout);
    let mut flush = tokio::time::interval(Duration::from_millis(200));
    let why = loop {
        tokio::select! {
            Some(line) = lines.recv() => take_line(log, line),
            status = child.wait() => {
                // The output that was written before the exit; bounded, since a grandchild
                // may hold the pipes open.
                let drain = tokio::time::sleep(Duration::from_secs(1));
                tokio::pin!(drain);
                loop {
                    tokio::select! {
                        line = lines.recv() => match line {
                            Some(line) => take_line(log, line),
                            None => break,
                        },
                        () = &mut drain => break,
                    }
                }
                log.flush();
                return match status {
                    Ok(s) => Exit::Exited { code: s.code(), success: s.success() },
                    Err(e) => Exit::NotStarted(format!("wait failed: {e}")),
                };
            }
            why = &mut *stop => break why.unwrap_or("cancelled"),
            () = &mut timeout => break "timed_out",
            _ = flush.tick() => log.flush(),
        }
    };
    // The tree as it is now: once the agent exits, what it left running is no longer its own.
    let mut tree = descendants(pid);
    signal_group(pid, libc::SIGTERM);
    signal_tree(&tree, libc::SIGTERM);
    let grace = if why == SHUTTING_DOWN {
        spec.grace.min(SHUTDOWN_KILL_AFTER)
    } else {
        spec.grace
    };
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tree.extend(descendants(pid));
        signal_group(pid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    // Whatever is left in the group or the tree (it ignored SIGTERM, or outlived its parent)
    // goes too.
    signal_group(pid, libc::SIGKILL);
    signal_tree(&tree, libc::SIGKILL);
    while let Ok(line) = lines.try_recv() {
        take_line(log, line);
    }
    log.flush();
    if why == "timed_out" {
        Exit::TimedOut
    } else {
        Exit::Stopped(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_parent_and_start_whatever_the_command_name() {
        let stat = "4242 (tail (x) y) S 4200 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                    987654 8192 100 18446744073709551615";
        assert_eq!(stat_of(stat), Some((4200, 987654)));
        assert_eq!(stat_of("garbage"), None);
    }

    #[test]
    fn the_tree_of_this_process_holds_a_child_it_started() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let tree = descendants(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            tree.iter().any(|(pid, _)| *pid == child.id() as i32),
            "{tree:?}"
        );
    }
}
