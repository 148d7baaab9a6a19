//! What the CLI adapters (`claude`, `codex`) share: build the command line, parse the JSON
//! events the CLI prints for the session id, usage, cost and result, resume the saved session,
//! and when the CLI refuses it start a fresh session in the same run with a hand-off note.

use std::path::Path;

use roost_proto::v1::RunUsage;

use super::child::{self, Exit, Spec, Stream};
use super::{process_environment, raise_usage, CommonConfig, Ended, Run};
use crate::prompt::{self, Session};

/// What one CLI invocation printed that the cluster cares about.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    pub session_id: Option<String>,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    pub summary: Option<String>,
    /// Error text from the CLI (its error events and stderr), kept short.
    pub errors: String,
}

impl Parsed {
    pub(crate) fn add_error(&mut self, text: &str) {
        if self.errors.len() < 4096 && !text.trim().is_empty() {
            self.errors.push_str(text.trim());
            self.errors.push('\n');
        }
    }
}

pub(crate) trait SessionCli: Sync {
    fn default_command(&self) -> &'static str;
    fn args(&self, config: &CommonConfig, resume: Option<&str>) -> Vec<String>;
    /// Reads one line of the CLI's standard output.
    fn parse_line(&self, line: &str, parsed: &mut Parsed);
}

/// Whether the CLI's error text says the saved session cannot be resumed (expired, deleted,
/// made on another machine).
pub(crate) fn refused_resume(errors: &str) -> bool {
    let text = errors.to_lowercase();
    text.contains("no conversation found")
        || text.contains("unknown session")
        || text.contains("no rollout found")
        || (text.contains("session") && text.contains("not found"))
}

pub(crate) fn micro_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1_000_000.0).round() as u64
    } else {
        0
    }
}

struct Attempt {
    exit: Exit,
    parsed: Parsed,
}

async fn attempt(
    run: &mut Run<'_>,
    cli: &dyn SessionCli,
    config: &CommonConfig,
    resume: Option<&str>,
    session: Session<'_>,
    base: RunUsage,
    payload_file: &Path,
) -> Attempt {
    let a = run.assignment;
    let env = process_environment(a, run.config, payload_file, &config.env);
    let program = if config.command.is_empty() {
        cli.default_command()
    } else {
        config.command.as_str()
    };
    let spec = Spec {
        program,
        args: cli.args(config, resume),
        env,
        cwd: &run.config.work_dir,
        stdin: prompt::compose(
            a,
            session,
            config.bootstrap_prompt.as_deref(),
            run.memory.as_ref(),
        ),
        timeout: config.timeout(),
        grace: config.grace(run.config),
    };
    let mut parsed = Parsed::default();
    let usage = run.usage.clone();
    let mut on_line = |stream: Stream, line: &str| {
        match stream {
            Stream::Stdout => cli.parse_line(line, &mut parsed),
            Stream::Stderr => parsed.add_error(line),
        }
        let totals = RunUsage {
            input_tokens: base.input_tokens + parsed.input_tokens,
            cached_input_tokens: base.cached_input_tokens + parsed.cached_input_tokens,
            output_tokens: base.output_tokens + parsed.output_tokens,
            cost_micro_usd: base.cost_micro_usd + parsed.cost_usd.map(micro_usd).unwrap_or(0),
            ..Default::default()
        };
        raise_usage(&usage, &totals);
    };
    let exit = child::run(spec, &mut run.stop, &mut run.log, &mut on_line).await;
    Attempt { exit, parsed }
}

/// Runs the CLI, and a fresh session after a refused resume; `payload_file` holds the wake
/// payload (`wake_payload.rs`).
pub(crate) async fn run(run: &mut Run<'_>, cli: &dyn SessionCli, payload_file: &Path) -> Ended {
    let config = match CommonConfig::parse(&run.assignment.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return Ended::failed(e),
    };
    let saved = run.assignment.session_id.clone();
    let saved = (!saved.is_empty()).then_some(saved);
    let rotated = run.assignment.session_rotated.clone();
    let first_session = if saved.is_some() {
        Session::Resumed
    } else if !rotated.is_empty() {
        Session::Rotated { why: &rotated }
    } else {
        Session::Fresh
    };
    let base = RunUsage::default();
    let first = attempt(
        run,
        cli,
        &config,
        saved.as_deref(),
        first_session,
        base,
        payload_file,
    )
    .await;
    let refused = matches!(first.exit, Exit::Exited { success: false, .. })
        && refused_resume(&first.parsed.errors);
    let (done, reset) = match saved.as_deref() {
        Some(old) if refused => {
            let why = first
                .parsed
                .errors
                .lines()
                .next()
                .unwrap_or("refused")
                .to_string();
            run.log.note(&format!(
                "session {old} could not be resumed ({why}); starting a fresh session"
            ));
            let base = run.usage.lock().map(|u| u.clone()).unwrap_or_default();
            let handed_off = Session::HandedOff { id: old, why: &why };
            (
                attempt(run, cli, &config, None, handed_off, base, payload_file).await,
                true,
            )
        }
        _ => (first, false),
    };
    let mut ended = Ended::from_exit(&done.exit);
    if ended.status == "failed" {
        if let Some(line) = done.parsed.errors.lines().next() {
            ended.error = format!("{}: {line}", ended.error);
        }
    }
    ended.session_id = done.parsed.session_id.or(if reset { None } else { saved });
    ended.session_reset = reset;
    ended.summary = done.parsed.summary.or_else(|| run.log.last_line());
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_recognised_and_other_failures_are_not() {
        assert!(refused_resume(
            "No conversation found with session ID: 123e4567"
        ));
        assert!(refused_resume("Error: thread/session abc not found"));
        assert!(!refused_resume("Error: rate limited, try again later"));
        assert!(!refused_resume(""));
    }

    #[test]
    fn dollars_become_millionths_and_nonsense_becomes_zero() {
        assert_eq!(micro_usd(0.012345), 12_345);
        assert_eq!(micro_usd(-1.0), 0);
        assert_eq!(micro_usd(f64::NAN), 0);
    }
}
