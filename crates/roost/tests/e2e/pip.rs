//! The one way the end-to-end tests install Python packages: pinned versions, from PyPI, into a
//! virtual environment made with the system's `python3 -m venv` at `target/tmp/pip-<packages>`
//! once per checkout (under a file lock, since tests run in parallel; a marker file says the
//! install finished). CI's `.ci/run` has python3 with venv.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Installs `packages` (each `name==version`, pinned) into a venv and returns its root
/// (`<root>/bin/...`). `expect` lists paths under the root the install must have made (a
/// console script), checked after every install.
pub fn install(packages: &[&str], expect: &[&str]) -> anyhow::Result<PathBuf> {
    let name: Vec<String> = packages.iter().map(|p| p.replace("==", "-")).collect();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pip-{}", name.join("+")));
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let done = root.join(".installed");
    let missing = || expect.iter().map(|e| root.join(e)).find(|p| !p.exists());
    if !done.exists() || missing().is_some() {
        let run = |program: &Path, args: &[&str]| -> anyhow::Result<()> {
            let out = Command::new(program).args(args).output().map_err(|e| {
                anyhow::anyhow!(
                    "cannot run {} ({e}): install python3 with venv (apt-get install \
                     python3-venv), as .ci/run does",
                    program.display()
                )
            })?;
            anyhow::ensure!(
                out.status.success(),
                "{} {} failed: {}",
                program.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
            Ok(())
        };
        let root_arg = root.to_string_lossy().into_owned();
        run(Path::new("python3"), &["-m", "venv", &root_arg])?;
        let mut args = vec!["install", "--disable-pip-version-check", "--quiet"];
        args.extend(packages);
        run(&root.join("bin/pip"), &args)?;
        if let Some(path) = missing() {
            anyhow::bail!(
                "pip install {} made no {}",
                packages.join(" "),
                path.display()
            );
        }
        std::fs::write(&done, "")?;
    }
    Ok(root)
}
