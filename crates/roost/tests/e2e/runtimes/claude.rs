//! Claude Code (`@anthropic-ai/claude-code`, pinned) under the `claude` adapter.
//!
//! It reports its own cost: for the scripted model `claude-sonnet-4-5` it charges Anthropic's
//! published price ($3 per million input tokens, $0.30 cached, $15 output) per call, which the
//! worker keeps ("cost reported by the runtime"), so no `[prices]` entry is needed.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const PACKAGE: &str = "@anthropic-ai/claude-code@2.1.332";
const BIN: &str = "node_modules/.bin/claude";
const MODEL: &str = "claude-sonnet-4-5";

fn installed() -> anyhow::Result<PathBuf> {
    Ok(crate::npm::install(&[PACKAGE], &[BIN])?.join(BIN))
}

fn config(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let home = state.join("home");
    std::fs::create_dir_all(&home)?;
    Ok(json!({
        "command": bin.display().to_string(),
        "model": MODEL,
        "env": {
            "HOME": home.display().to_string(),
            "ANTHROPIC_BASE_URL": model.base_url(),
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            // CI runs as root, where Claude Code skips its permission prompts only in a
            // sandbox it is told about.
            "IS_SANDBOX": "1",
        },
    }))
}

const CLAUDE: Runtime = Runtime {
    adapter: "claude",
    config,
    session_store: |state| state.join("home/.claude/projects"),
    input_includes_cached: false,
    // Anthropic's published price for the model, which Claude Code reports itself.
    pricing: Pricing::Reported(Price {
        input: 3.0,
        cached_input: 0.3,
        output: 15.0,
    }),
    service: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_does_the_loop_resumes_its_session_and_reports_its_cost() -> anyhow::Result<()>
{
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&CLAUDE, bin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claude_code_run_past_its_timeout_leaves_no_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&CLAUDE, bin).await
}
