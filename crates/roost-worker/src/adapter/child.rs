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
    signal_group(pid, libc::SIGTERM);
    let grace = if why == SHUTTING_DOWN {
        spec.grace.min(SHUTDOWN_KILL_AFTER)
    } else {
        spec.grace
    };
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    // Whatever is left in the group (it ignored SIGTERM, or outlived its parent) goes too.
    signal_group(pid, libc::SIGKILL);
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
