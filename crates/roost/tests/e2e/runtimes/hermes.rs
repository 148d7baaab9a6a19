//! Hermes Agent (`hermes-agent` from PyPI, pinned, in a venv made by `pip.rs`) under the
//! `hermes` adapter, on a `custom` provider pointed at the scripted model's Chat Completions.
//!
//! Its model comes from `$HERMES_HOME/config.yaml`; before a session it probes the server's
//! model APIs (`/api/v1/models`, `/api/show`, `/v1/models`). It keeps its sessions in
//! `$HERMES_HOME/state.db` (SQLite). It prints no usage: the adapter reads the session's totals
//! with `hermes sessions export` after the run. Hermes knows no price for the scripted model,
//! so the worker's `[prices]` table prices its tokens; its input tokens leave out the cached
//! ones.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const PACKAGE: &str = "hermes-agent==0.19.0";
const BIN: &str = "bin/hermes";
const MODEL: &str = "scripted-model";

fn installed() -> anyhow::Result<PathBuf> {
    Ok(crate::pip::install(&[PACKAGE], &[BIN])?.join(BIN))
}

fn config(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let hermes_home = state.join("hermes-home");
    let home = state.join("home");
    std::fs::create_dir_all(&hermes_home)?;
    std::fs::create_dir_all(&home)?;
    std::fs::write(
        hermes_home.join("config.yaml"),
        format!(
            "model:\n  provider: custom\n  base_url: {}/v1\n  default: {MODEL}\n  api_key: scripted-key\n",
            model.base_url()
        ),
    )?;
    Ok(json!({
        "command": bin.display().to_string(),
        "model": MODEL,
        "env": {
            "HOME": home.display().to_string(),
            "HERMES_HOME": hermes_home.display().to_string(),
        },
    }))
}

/// Dollars per million tokens; the test's cost is computed from them.
const PRICE: Price = Price {
    input: 3.0,
    cached_input: 0.3,
    output: 15.0,
};

const HERMES: Runtime = Runtime {
    adapter: "hermes",
    config,
    session_store: |state| state.join("hermes-home/state.db"),
    input_includes_cached: false,
    pricing: Pricing::Configured(MODEL, PRICE),
    service: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hermes_does_the_loop_resumes_its_session_and_is_priced() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&HERMES, bin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hermes_run_past_its_timeout_leaves_no_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&HERMES, bin).await
}
