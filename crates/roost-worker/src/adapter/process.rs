//! The `process` adapter: any command, the prompt on stdin, the run environment set.

use std::path::Path;

use super::child::{self, Spec};
use super::{process_environment, CommonConfig, Ended, Run};
use crate::prompt::{self, Session};

/// Runs the agent's command; `payload_file` holds the wake payload (`wake_payload.rs`).
pub(crate) async fn run(run: &mut Run<'_>, payload_file: &Path) -> Ended {
    let a = run.assignment;
    let config = match CommonConfig::parse(&a.adapter_config_json) {
        Ok(c) => c,
        Err(e) => return Ended::failed(e),
    };
    if config.command.is_empty() {
        return Ended::failed("adapterConfig.command is empty".into());
    }
    let env = process_environment(a, run.config, payload_file, &config.env);
    let spec = Spec {
        program: &config.command,
        args: config.args.clone(),
        env,
        cwd: &run.workspace,
        stdin: prompt::compose(
            a,
            Session::Fresh,
            config.bootstrap_prompt.as_deref(),
            run.memory.as_ref(),
        ),
        timeout: config.timeout(),
        grace: config.grace(run.config),
    };
    let exit = child::run(spec, &mut run.stop, &mut run.log, &mut |_, _| {}).await;
    let mut ended = Ended::from_exit(&exit);
    ended.summary = run.log.last_line();
    ended
}
