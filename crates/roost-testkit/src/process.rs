//! A real `roost dev` process, for tests that kill it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct RoostProcess {
    child: Child,
    pub base_url: String,
    pub admin_token: String,
    pub company_id: String,
}

impl RoostProcess {
    /// Starts `roost dev` in `dir` on ephemeral ports and waits until it prints its URL.
    pub fn spawn_dev(
        binary: &Path,
        dir: &Path,
        deadline: Duration,
    ) -> anyhow::Result<RoostProcess> {
        Self::spawn_dev_with(binary, dir, deadline, &[])
    }

    /// [`RoostProcess::spawn_dev`] with more `roost dev` flags (`--shutdown-grace-secs 3`).
    pub fn spawn_dev_with(
        binary: &Path,
        dir: &Path,
        deadline: Duration,
        flags: &[&str],
    ) -> anyhow::Result<RoostProcess> {
        Self::spawn(binary, dir, deadline, flags, &[])
    }

    /// [`RoostProcess::spawn_dev`] with more environment (`ROOST_OTLP_ENDPOINT`).
    pub fn spawn_dev_with_env(
        binary: &Path,
        dir: &Path,
        deadline: Duration,
        env: &[(&str, &str)],
    ) -> anyhow::Result<RoostProcess> {
        Self::spawn(binary, dir, deadline, &[], env)
    }

    fn spawn(
        binary: &Path,
        dir: &Path,
        deadline: Duration,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<RoostProcess> {
        let mut child = Command::new(binary)
            .args(["dev", "--dir"])
            .arg(dir)
            .args([
                "--http-listen",
                "127.0.0.1:0",
                "--grpc-listen",
                "127.0.0.1:0",
            ])
            .args(flags)
            .env("ROOST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Drain until EOF even after the caller stops listening: closing the pipe early
            // would make the server's next write to stdout fail.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut base_url = None;
        let mut company_id = None;
        let start = std::time::Instant::now();
        while base_url.is_none() || company_id.is_none() {
            let left = deadline.checked_sub(start.elapsed()).unwrap_or_default();
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => {
                    let _ = child.kill();
                    anyhow::bail!("roost dev did not print its address within {deadline:?}");
                }
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["API", url] => base_url = url.strip_suffix("/api").map(str::to_string),
                ["Company", .., "id", id] => company_id = Some(id.to_string()),
                _ => {}
            }
        }
        let admin_token = std::fs::read_to_string(dir.join("admin-token"))?
            .trim()
            .to_string();
        Ok(RoostProcess {
            child,
            base_url: base_url.unwrap_or_default(),
            admin_token,
            company_id: company_id.unwrap_or_default(),
        })
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill_9(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`libc::SIGTERM`, `libc::SIGINT`) to the process.
    pub fn signal(&self, signal: i32) -> anyhow::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id())?;
        // SAFETY: kill(2) with our own child's pid and a signal number has no memory effects.
        anyhow::ensure!(
            unsafe { libc::kill(pid, signal) } == 0,
            "kill({pid}, {signal}) failed"
        );
        Ok(())
    }

    /// The exit status, once the process has ended (`None` while it runs).
    pub fn exit_status(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

impl Drop for RoostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
