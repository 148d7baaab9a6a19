//! OpenCode (`opencode-ai`, pinned) under the `opencode` adapter, on an
//! `@ai-sdk/openai-compatible` provider pointed at the scripted model's Chat Completions.
//!
//! The provider comes in `OPENCODE_CONFIG_CONTENT`; OpenCode fetches the provider's npm package
//! on first use (into `XDG_CACHE_HOME`, shared by the tests) and keeps its sessions under
//! `XDG_DATA_HOME/opencode`, per test. It prices calls from its own model list, which does not
//! know the scripted model (cost 0), so the worker's `[prices]` table prices its tokens. Its
//! input tokens leave out the cached ones. An untitled new session would cost a model call for
//! its title that its events never report; the adapter titles new sessions (`--title`), and
//! the test's one model call per step checks that no such call is made.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const PACKAGE: &str = "opencode-ai@1.18.33";
const BIN: &str = "node_modules/.bin/opencode";
const MODEL: &str = "scripted/scripted-model";

fn installed() -> anyhow::Result<PathBuf> {
    Ok(crate::npm::install(&[PACKAGE], &[BIN])?.join(BIN))
}

fn config(bin: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let dir = |name: &str| -> anyhow::Result<String> {
        let path = state.join(name);
        std::fs::create_dir_all(&path)?;
        Ok(path.display().to_string())
    };
    // The provider package OpenCode installs on first use, kept between tests.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("opencode-cache");
    std::fs::create_dir_all(&cache)?;
    let provider = json!({
        "provider": { "scripted": {
            "npm": "@ai-sdk/openai-compatible",
            "options": { "baseURL": format!("{}/v1", model.base_url()), "apiKey": "scripted-key" },
            "models": { "scripted-model": {} },
        } },
        "model": MODEL,
        "autoupdate": false,
        "share": "disabled",
    });
    Ok(json!({
        "command": bin.display().to_string(),
        "model": MODEL,
        "env": {
            "HOME": dir("home")?,
            "XDG_DATA_HOME": dir("data")?,
            "XDG_CONFIG_HOME": dir("config")?,
            "XDG_STATE_HOME": dir("xdg-state")?,
            "XDG_CACHE_HOME": cache.display().to_string(),
            "OPENCODE_CONFIG_CONTENT": provider.to_string(),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        },
    }))
}

/// Dollars per million tokens; the test's cost is computed from them.
const PRICE: Price = Price {
    input: 2.0,
    cached_input: 0.5,
    output: 8.0,
};

const OPENCODE: Runtime = Runtime {
    adapter: "opencode",
    config,
    session_store: |state| state.join("data/opencode"),
    input_includes_cached: false,
    pricing: Pricing::Configured(MODEL, PRICE),
    service: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_does_the_loop_resumes_its_session_and_is_priced() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&OPENCODE, bin).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_opencode_run_past_its_timeout_leaves_no_process() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let bin = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&OPENCODE, bin).await
}
