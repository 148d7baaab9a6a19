//! Codex (`@openai/codex`, pinned) under the `codex` adapter, on a custom model provider
//! speaking the Responses API.
//!
//! It reports tokens but no cost; the worker's `[prices]` table prices them. Its input tokens
//! include the cached ones (OpenAI's convention), which the price applies to apart.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const PACKAGE: &str = "@openai/codex@0.171.0";
const BIN: &str = "node_modules/.bin/codex";
const MODEL: &str = "gpt-5-codex";

fn installed() -> anyhow::Result<PathBuf> {
    Ok(crate::npm::install(&[PACKAGE], &[BIN])?.join(BIN))
}

fn config(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let codex_home = state.join("codex-home");
    let home = state.join("home");
    std::fs::create_dir_all(&codex_home)?;
    std::fs::create_dir_all(&home)?;
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            r#"model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = "{}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
"#,
            model.base_url()
        ),
    )?;
    Ok(json!({
        "command": bin.display().to_string(),
        "model": MODEL,
        "env": {
            "HOME": home.display().to_string(),
            "CODEX_HOME": codex_home.display().to_string(),
            "SCRIPTED_API_KEY": "sk-scripted",
        },
    }))
}

/// Dollars per million tokens; the test's cost is computed from them.
const PRICE: Price = Price {
    input: 1.25,
    cached_input: 0.125,
    output: 10.0,
};

const CODEX: Runtime = Runtime {
    adapter: "codex",
    config,
    session_store: |state| state.join("codex-home/sessions"),
    input_includes_cached: true,
    pricing: Pricing::Configured(MODEL, PRICE),
    service: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_does_the_loop_resumes_its_thread_and_is_priced() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&CODEX, bin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_codex_run_past_its_timeout_leaves_no_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&CODEX, bin).await
}
