//! What the CLI adapters (`claude`, `codex`, `gemini`, `opencode`, `hermes`) share: build the
//! command line, parse what the CLI prints (JSON events; Hermes plain text) for the session id,
//! usage, cost and result, resume the saved session,
//! and when the CLI refuses it start a fresh session in the same run with a hand-off note.

use roost_core::RunStatus;
use std::collections::BTreeMap;
use std::path::Path;

use roost_proto::v1::RunUsage;

use super::child::{self, Exit, Spec, Stream};
use super::{process_environment, raise_usage, CommonConfig, Ended, Run};
use crate::config::Price;
use crate::prompt::{self, Session};

/// What one CLI invocation printed that the cluster cares about.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    pub session_id: Option<String>,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    /// The model the CLI said it used (Claude Code's init event), else `adapterConfig.model`
    /// names it for the price table.
    pub model: Option<String>,
    /// Tokens the resumed session had used before this invocation, for a CLI that prints the
    /// session's running totals (Codex), as (input, cached input, output).
    pub session_tokens_before: (u64, u64, u64),
    /// The last API message whose usage was counted (Claude Code prints a message once per
    /// content block).
    pub last_message: Option<String>,
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
    /// Before an invocation: what the parser needs to know first (Codex: the resumed
    /// session's token totals so far).
    fn before_attempt(&self, _config: &CommonConfig, _resume: Option<&str>, _parsed: &mut Parsed) {}
    /// Whether the CLI's input token count includes its cached input tokens (OpenAI's
    /// convention; Anthropic's counts them apart), for the price table.
    fn input_includes_cached(&self) -> bool {
        false
    }
    /// Reads one line of the CLI's standard error: error text, unless the CLI prints more there
    /// (Hermes its session id, Gemini its notices).
    fn parse_stderr(&self, line: &str, parsed: &mut Parsed) {
        parsed.add_error(line);
    }
    /// For a CLI that reads no prompt on stdin (Hermes), the arguments that carry it instead,
    /// appended to [`SessionCli::args`]; stdin then stays empty.
    fn prompt_args(&self, _prompt: &str) -> Option<Vec<String>> {
        None
    }
}

/// Whether the CLI's error text says the saved session cannot be resumed (expired, deleted,
/// made on another machine).
pub(crate) fn refused_resume(errors: &str) -> bool {
    let text = errors.to_lowercase();
    text.contains("no conversation found")
        || text.contains("unknown session")
        || text.contains("no rollout found")
        // Gemini CLI: an id it does not know, or no saved session at all in this directory.
        || text.contains("invalid session identifier")
        || text.contains("no previous sessions found")
        || (text.contains("session") && text.contains("not found"))
}

pub(crate) fn micro_usd(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1_000_000.0).round() as u64
    } else {
        0
    }
}

/// The invocation's cost in USD and the run log's line saying where it came from: the CLI's
/// own figure, else the worker's `[prices]` for the model, else none.
pub(crate) fn cost_of(
    parsed: &Parsed,
    model: Option<&str>,
    prices: &BTreeMap<String, Price>,
    input_includes_cached: bool,
) -> (Option<f64>, String) {
    if let Some(cost) = parsed.cost_usd {
        return (
            Some(cost),
            format!("cost reported by the runtime: {cost} USD"),
        );
    }
    let Some(model) = model else {
        return (
            None,
            "no cost: the runtime named no model (set adapterConfig.model to price it)".into(),
        );
    };
    let Some(price) = prices.get(model) else {
        return (
            None,
            format!("no cost: no price configured for model {model}"),
        );
    };
    let cached = parsed.cached_input_tokens;
    let uncached = if input_includes_cached {
        parsed.input_tokens.saturating_sub(cached)
    } else {
        parsed.input_tokens
    };
    let usd = (uncached as f64 * price.input
        + cached as f64 * price.cached_input
        + parsed.output_tokens as f64 * price.output)
        / 1_000_000.0;
    let tokens = uncached + cached + parsed.output_tokens;
    (
        Some(usd),
        format!(
            "cost computed from {tokens} tokens at the configured price for model {model}: \
             {usd} USD"
        ),
    )
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
    let prompt = prompt::compose(
        a,
        session,
        config.bootstrap_prompt.as_deref(),
        run.memory.as_ref(),
    );
    let mut args = cli.args(config, resume);
    let stdin = match cli.prompt_args(&prompt) {
        Some(extra) => {
            args.extend(extra);
            String::new()
        }
        None => prompt,
    };
    let spec = Spec {
        program,
        args,
        env,
        cwd: &run.workspace,
        stdin,
        timeout: config.timeout(),
        grace: config.grace(run.config),
    };
    let mut parsed = Parsed::default();
    cli.before_attempt(config, resume, &mut parsed);
    let usage = run.usage.clone();
    let mut on_line = |stream: Stream, line: &str| {
        match stream {
            Stream::Stdout => cli.parse_line(line, &mut parsed),
            Stream::Stderr => cli.parse_stderr(line, &mut parsed),
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
    let model = parsed.model.clone().or_else(|| config.model.clone());
    let (cost, note) = cost_of(
        &parsed,
        model.as_deref(),
        &run.config.prices,
        cli.input_includes_cached(),
    );
    run.log.note(&note);
    if parsed.cost_usd.is_none() {
        parsed.cost_usd = cost;
        let totals = RunUsage {
            input_tokens: base.input_tokens + parsed.input_tokens,
            cached_input_tokens: base.cached_input_tokens + parsed.cached_input_tokens,
            output_tokens: base.output_tokens + parsed.output_tokens,
            cost_micro_usd: base.cost_micro_usd + cost.map(micro_usd).unwrap_or(0),
            ..Default::default()
        };
        raise_usage(&run.usage, &totals);
    }
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
    let first_session = Session::assigned(run.assignment);
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
    if ended.status == RunStatus::Failed {
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

    #[test]
    fn a_cost_is_the_runtimes_own_else_priced_from_the_table_else_none() {
        use super::super::{claude::Claude, codex::Codex};
        let prices: BTreeMap<String, Price> = [(
            "gpt-5-codex".to_string(),
            Price {
                input: 1.25,
                cached_input: 0.125,
                output: 10.0,
            },
        )]
        .into();
        let tokens = Parsed {
            input_tokens: 2400,
            cached_input_tokens: 400,
            output_tokens: 100,
            ..Parsed::default()
        };
        // Codex's input includes the cached tokens: 2000 at 1.25, 400 at 0.125, 100 at 10.
        let (cost, note) = cost_of(
            &tokens,
            Some("gpt-5-codex"),
            &prices,
            Codex.input_includes_cached(),
        );
        assert_eq!(cost.map(micro_usd), Some(3550));
        assert!(
            note.starts_with(
                "cost computed from 2500 tokens at the configured price for model gpt-5-codex"
            ),
            "{note}"
        );
        // Anthropic's does not: 2400 at 1.25.
        let (cost, _) = cost_of(
            &tokens,
            Some("gpt-5-codex"),
            &prices,
            Claude.input_includes_cached(),
        );
        assert_eq!(cost.map(micro_usd), Some(4050));
        let reported = Parsed {
            cost_usd: Some(0.00762),
            ..Parsed::default()
        };
        let (cost, note) = cost_of(
            &reported,
            Some("gpt-5-codex"),
            &prices,
            Codex.input_includes_cached(),
        );
        assert_eq!(cost, Some(0.00762));
        assert!(note.starts_with("cost reported by the runtime"), "{note}");
        let (cost, note) = cost_of(&tokens, Some("o9"), &prices, Codex.input_includes_cached());
        assert_eq!(cost, None);
        assert_eq!(note, "no cost: no price configured for model o9");
        let (cost, note) = cost_of(&tokens, None, &prices, Codex.input_includes_cached());
        assert_eq!(cost, None);
        assert!(note.contains("adapterConfig.model"), "{note}");
    }
}
