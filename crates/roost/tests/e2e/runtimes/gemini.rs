//! Gemini CLI (`@google/gemini-cli`, pinned) under the `gemini` adapter, on the Gemini API of
//! the scripted model (`GOOGLE_GEMINI_BASE_URL`).
//!
//! It needs an auth method chosen in `$HOME/.gemini/settings.json` (else it exits 41, "Invalid
//! auth method selected") and keeps its sessions per working directory under
//! `$HOME/.gemini/tmp`. It reports tokens but no cost; the worker's `[prices]` table prices
//! them. Its input tokens include the cached ones (the Gemini API's convention). An explicit
//! `model` keeps it from routing each prompt through a second model call.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const PACKAGE: &str = "@google/gemini-cli@0.61.0";
const BIN: &str = "node_modules/.bin/gemini";
const MODEL: &str = "gemini-2.5-pro";

fn installed() -> anyhow::Result<PathBuf> {
    Ok(crate::npm::install(&[PACKAGE], &[BIN])?.join(BIN))
}

fn config(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let home = state.join("home");
    std::fs::create_dir_all(home.join(".gemini"))?;
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            "privacy": { "usageStatisticsEnabled": false },
        })
        .to_string(),
    )?;
    Ok(json!({
        "command": bin.display().to_string(),
        "model": MODEL,
        "env": {
            "HOME": home.display().to_string(),
            "GOOGLE_GEMINI_BASE_URL": model.base_url(),
            "GEMINI_API_KEY": "scripted-key",
        },
    }))
}

/// Dollars per million tokens; the test's cost is computed from them.
const PRICE: Price = Price {
    input: 1.25,
    cached_input: 0.125,
    output: 10.0,
};

const GEMINI: Runtime = Runtime {
    adapter: "gemini",
    config,
    session_store: |state| state.join("home/.gemini/tmp"),
    input_includes_cached: true,
    pricing: Pricing::Configured(MODEL, PRICE),
    service: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gemini_cli_does_the_loop_resumes_its_session_and_is_priced() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&GEMINI, bin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gemini_cli_run_past_its_timeout_leaves_no_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&GEMINI, bin).await
}
