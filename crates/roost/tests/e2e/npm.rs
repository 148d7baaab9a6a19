//! The one way the end-to-end tests install npm packages: pinned versions, from the registry,
//! with the system's npm, into `target/tmp/npm-<packages>` once per checkout (under a file
//! lock, since tests run in parallel; a marker file says the install finished). CI's `.ci/run`
//! makes sure npm is there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Installs `packages` (each `name@version`, pinned) and returns the prefix they are installed
/// under (`<prefix>/node_modules/...`). `expect` lists paths under the prefix the install must
/// have made (an entry script, a binary), checked after every install.
pub fn install(packages: &[&str], expect: &[&str]) -> anyhow::Result<PathBuf> {
    install_with(None, packages, expect)
}

/// [`install`] with npm's lifecycle scripts run by `node` (the binary of a Node installed by
/// [`install`]), for packages whose install scripts refuse the system's older Node.
pub fn install_on(node: &Path, packages: &[&str], expect: &[&str]) -> anyhow::Result<PathBuf> {
    install_with(Some(node), packages, expect)
}

fn install_with(
    node: Option<&Path>,
    packages: &[&str],
    expect: &[&str],
) -> anyhow::Result<PathBuf> {
    let name: Vec<String> = packages
        .iter()
        .map(|p| p.trim_start_matches('@').replace(['@', '/'], "-"))
        .collect();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("npm-{}", name.join("+")));
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let done = root.join(".installed");
    let missing = || expect.iter().map(|e| root.join(e)).find(|p| !p.exists());
    if !done.exists() || missing().is_some() {
        let mut npm = Command::new("npm");
        if let Some(bin) = node.and_then(Path::parent) {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![bin.to_path_buf()];
            dirs.extend(std::env::split_paths(&path));
            npm.env("PATH", std::env::join_paths(dirs)?);
        }
        let out = npm
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .args(packages)
            .output()
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot run npm ({e}): install Node.js and npm (apt-get install npm), as \
                     .ci/run does"
                )
            })?;
        anyhow::ensure!(
            out.status.success(),
            "npm install {} failed: {}",
            packages.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(path) = missing() {
            anyhow::bail!(
                "npm install {} made no {}: {}",
                packages.join(" "),
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::write(&done, "")?;
    }
    Ok(root)
}
