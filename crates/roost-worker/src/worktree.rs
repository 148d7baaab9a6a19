//! A workspace as a git worktree, when the agent's `adapterConfig.repository` names one (a URL
//! or a path git can clone; `ref` picks the commit, default the remote's HEAD). The worker keeps
//! one bare mirror per repository (`<work_dir>/repos/<name>.git`), fetched before each run, and
//! adds a detached worktree of it for each task, so every task of the agent starts from the same
//! code on whichever worker runs it and never shares a checkout with another task.

use std::path::{Path, PathBuf};

use tokio::process::Command;

pub(crate) const REPOS_DIR: &str = "repos";

/// The agent's repository and ref, if its config names a repository.
pub(crate) fn configured(adapter_config_json: &str) -> Option<(String, Option<String>)> {
    let config: serde_json::Value = serde_json::from_str(adapter_config_json).ok()?;
    let repository = config["repository"].as_str()?.trim();
    if repository.is_empty() {
        return None;
    }
    let git_ref = config["ref"]
        .as_str()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string);
    Some((repository.to_string(), git_ref))
}

/// The mirror's directory name: readable, and distinct for distinct repositories.
fn mirror_name(repository: &str) -> String {
    use sha2::{Digest, Sha256};
    let tail: String = repository
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(40)
        .collect();
    let digest = Sha256::digest(repository.as_bytes());
    format!("{tail}-{}.git", hex::encode(&digest[..6]))
}

async fn git(args: &[&str], cwd: Option<&Path>) -> Result<String, String> {
    let mut command = Command::new("git");
    command.args(args).env("GIT_TERMINAL_PROMPT", "0");
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let out = command
        .output()
        .await
        .map_err(|e| format!("cannot run git ({e}); install git on this worker"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "git {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Makes `workspace` a worktree of `repository` at `git_ref` unless it already is one (a task's
/// later runs keep its checkout and whatever the agent did in it). Returns a line for the log.
pub(crate) async fn ensure(
    work_dir: &Path,
    workspace: &Path,
    repository: &str,
    git_ref: Option<&str>,
) -> Result<Option<String>, String> {
    if workspace.join(".git").exists() {
        return Ok(None);
    }
    let repos = work_dir.join(REPOS_DIR);
    std::fs::create_dir_all(&repos)
        .map_err(|e| format!("cannot create {}: {e}", repos.display()))?;
    let mirror: PathBuf = repos.join(mirror_name(repository));
    let mirror_arg = mirror.display().to_string();
    if mirror.exists() {
        git(
            &["--git-dir", &mirror_arg, "fetch", "--prune", "origin"],
            None,
        )
        .await?;
        // Worktrees whose directories retention removed.
        git(&["--git-dir", &mirror_arg, "worktree", "prune"], None).await?;
    } else {
        git(&["clone", "--mirror", "--", repository, &mirror_arg], None).await?;
    }
    let commit = git(
        &[
            "--git-dir",
            &mirror_arg,
            "rev-parse",
            "--verify",
            &format!("{}^{{commit}}", git_ref.unwrap_or("HEAD")),
        ],
        None,
    )
    .await
    .map_err(|e| {
        format!(
            "the repository has no ref {}: {e}",
            git_ref.unwrap_or("HEAD")
        )
    })?;
    let workspace_arg = workspace.display().to_string();
    git(
        &[
            "--git-dir",
            &mirror_arg,
            "worktree",
            "add",
            "--detach",
            "--force",
            &workspace_arg,
            &commit,
        ],
        None,
    )
    .await?;
    Ok(Some(format!(
        "workspace is a worktree of {repository} at {}",
        &commit[..commit.len().min(12)]
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn repo_with_a_commit(dir: &Path) -> String {
        let repo = dir.join("origin");
        std::fs::create_dir_all(&repo).expect("mkdir");
        for args in [
            vec!["init", "-q", "-b", "main"],
            vec![
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "one",
            ],
        ] {
            git(&args, Some(&repo)).await.expect("git");
        }
        std::fs::write(repo.join("README.md"), "hello\n").expect("write");
        git(&["add", "README.md"], Some(&repo)).await.expect("add");
        git(
            &[
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "-m",
                "two",
            ],
            Some(&repo),
        )
        .await
        .expect("commit");
        repo.display().to_string()
    }

    #[tokio::test]
    async fn each_task_gets_a_worktree_of_the_repository_and_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = repo_with_a_commit(dir.path()).await;
        let work = dir.path().join("work");
        let (a, b) = (work.join("ws/a"), work.join("ws/b"));
        for ws in [&a, &b] {
            std::fs::create_dir_all(ws).expect("mkdir");
            let note = ensure(&work, ws, &repo, None).await.expect("worktree");
            assert!(note.is_some_and(|n| n.contains("worktree")));
            assert_eq!(
                std::fs::read_to_string(ws.join("README.md")).expect("read"),
                "hello\n"
            );
        }
        // A later run of the same task keeps what the agent changed.
        std::fs::write(a.join("README.md"), "changed\n").expect("write");
        assert_eq!(ensure(&work, &a, &repo, None).await.expect("again"), None);
        assert_eq!(
            std::fs::read_to_string(a.join("README.md")).expect("read"),
            "changed\n"
        );
        assert_eq!(
            std::fs::read_to_string(b.join("README.md")).expect("read"),
            "hello\n"
        );
    }

    #[tokio::test]
    async fn a_missing_repository_or_ref_is_a_sentence_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).expect("mkdir");
        let missing = dir.path().join("nope").display().to_string();
        let err = ensure(dir.path(), &ws, &missing, None).await.unwrap_err();
        assert!(err.contains("git clone failed"), "{err}");
        let repo = repo_with_a_commit(dir.path()).await;
        let err = ensure(dir.path(), &ws, &repo, Some("no-such-branch"))
            .await
            .unwrap_err();
        assert!(err.contains("no ref no-such-branch"), "{err}");
    }

    #[test]
    fn the_config_names_a_repository_and_a_ref() {
        assert_eq!(
            configured(r#"{"repository": "https://example.com/acme/app.git", "ref": "main"}"#),
            Some((
                "https://example.com/acme/app.git".into(),
                Some("main".into())
            ))
        );
        assert_eq!(configured(r#"{"repository": " "}"#), None);
        assert_eq!(configured("not json"), None);
        assert_ne!(mirror_name("a/app.git"), mirror_name("b/app.git"));
        assert!(mirror_name("git@example.com:acme/app.git").starts_with("app-"));
    }
}
