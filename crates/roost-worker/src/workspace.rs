//! The run's workspace: a work directory per agent and task on this worker
//! (`<work_dir>/workspaces/<agent id>/<task key>`), where the agent process starts and its
//! skills are written (`skills.rs`), so two tasks of one agent never share files. An agent's
//! `adapterConfig.cwd` overrides it (Paperclip's setting for a fixed project directory); a
//! relative one is under `work_dir` on whichever worker runs it (`"."` is `work_dir` itself).
//! Workspaces untouched for `workspace_retention_hours` are removed at the next run's start.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use roost_proto::v1::Assignment;

use crate::config::WorkerConfig;

pub(crate) const WORKSPACES_DIR: &str = "workspaces";

/// A name made safe to be one path component: ids and task keys are printable, but nothing
/// from the cluster is trusted to be.
fn component(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "_".into(),
        rest => rest.to_string(),
    }
}

/// The agent's `adapterConfig.cwd`, if it names one.
fn configured_cwd(a: &Assignment) -> Option<String> {
    let config: serde_json::Value = serde_json::from_str(&a.adapter_config_json).ok()?;
    config["cwd"]
        .as_str()
        .filter(|c| !c.trim().is_empty())
        .map(str::to_string)
}

/// Where `a` runs on this worker (no IO).
pub(crate) fn path_of(config: &WorkerConfig, a: &Assignment) -> PathBuf {
    match configured_cwd(a) {
        Some(c) => config.work_dir.join(c),
        None => config
            .work_dir
            .join(WORKSPACES_DIR)
            .join(component(&a.agent_id))
            .join(component(if a.task_key.is_empty() {
                "_none"
            } else {
                &a.task_key
            })),
    }
}

/// The workspace of `a` on this worker, made if missing and marked used now.
pub(crate) fn prepare(config: &WorkerConfig, a: &Assignment) -> Result<PathBuf, String> {
    let dir = path_of(config, a);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create the workspace {}: {e}", dir.display()))?;
    // Its modification time is its last use, which retention reads.
    let now = std::fs::File::open(&dir).and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = now {
        tracing::debug!(dir = %dir.display(), error = %e, "workspace time not set");
    }
    Ok(dir)
}

/// Removes workspaces under `work_dir` last used longer than `retention` ago, but never
/// `keep`; returns the ones removed.
pub(crate) fn clean(work_dir: &Path, retention: Duration, keep: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(agents) = std::fs::read_dir(work_dir.join(WORKSPACES_DIR)) else {
        return removed;
    };
    let now = SystemTime::now();
    for agent in agents.flatten() {
        let Ok(tasks) = std::fs::read_dir(agent.path()) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let idle = task
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok());
            if path != keep && idle.is_some_and(|idle| idle > retention) {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => removed.push(path),
                    Err(e) => {
                        tracing::warn!(dir = %path.display(), error = %e, "workspace not removed")
                    }
                }
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(agent: &str, task: &str) -> Assignment {
        Assignment {
            agent_id: agent.into(),
            task_key: task.into(),
            ..Default::default()
        }
    }

    #[test]
    fn each_agent_and_task_gets_its_own_directory_and_odd_names_stay_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = WorkerConfig {
            work_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let a = prepare(&config, &assignment("a1", "issue-1")).expect("a");
        let b = prepare(&config, &assignment("a1", "issue-2")).expect("b");
        assert_ne!(a, b);
        let odd = prepare(&config, &assignment("../..", "../../etc")).expect("odd");
        assert!(
            odd.starts_with(dir.path().join(WORKSPACES_DIR)),
            "{}",
            odd.display()
        );
        let fixed = dir.path().join("project");
        let mut with_cwd = assignment("a1", "issue-1");
        with_cwd.adapter_config_json = serde_json::json!({ "cwd": fixed }).to_string();
        let c = prepare(&config, &with_cwd).expect("cwd");
        assert_eq!(c, fixed);
        with_cwd.adapter_config_json = serde_json::json!({ "cwd": "." }).to_string();
        assert_eq!(path_of(&config, &with_cwd), dir.path().join("."));
    }

    #[test]
    fn workspaces_idle_past_retention_are_removed_but_not_the_current_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = WorkerConfig {
            work_dir: dir.path().to_path_buf(),
            ..Default::default()
        };
        let old = prepare(&config, &assignment("a1", "old")).expect("old");
        let current = prepare(&config, &assignment("a1", "now")).expect("now");
        let long_ago = SystemTime::now() - Duration::from_secs(3 * 3600);
        for d in [&old, &current] {
            std::fs::File::open(d)
                .and_then(|f| f.set_modified(long_ago))
                .expect("age it");
        }
        let removed = clean(dir.path(), Duration::from_secs(3600), &current);
        assert_eq!(removed, std::slice::from_ref(&old));
        assert!(!old.exists() && current.exists());
    }
}
