//! The one way the end-to-end tests install npm packages: pinned versions, from the registry,
//! with the system's npm, into `target/tmp/npm-<packages>` once per checkout (under a file
//! lock, since tests run in parallel; a marker file says the install finished). A file a package
//! ships but no install exposes comes from its tarball, fetched the same way ([`pack_file`]).
//! CI's `.ci/run` makes sure npm is there.

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
        let out = output(
            npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&root)
                .args(packages),
        )?;
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

/// Runs an npm command to its end; no npm at all says how to install it.
fn output(npm: &mut Command) -> anyhow::Result<std::process::Output> {
    npm.output().map_err(|e| {
        anyhow::anyhow!(
            "cannot run npm ({e}): install Node.js and npm (apt-get install npm), as .ci/run does"
        )
    })
}

/// Fetches `package` (`name@version`, pinned) with `npm pack` into `target/tmp/npm-pack-<name>`
/// once per checkout (under a file lock; a marker file names the tarball once `npm pack` has
/// finished) and returns the path of `package/<inner>` unpacked from it with the system's `tar`,
/// checked to exist. Only the file asked for is unpacked: such a tarball can be large (Paperclip's
/// server unpacks to 267 MB).
pub fn pack_file(package: &str, inner: &str) -> anyhow::Result<PathBuf> {
    let name = package.trim_start_matches('@').replace(['@', '/'], "-");
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("npm-pack-{name}"));
    std::fs::create_dir_all(&root)?;
    let lock = std::fs::File::create(root.join(".lock"))?;
    lock.lock()?;
    let marker = root.join(".packed");
    let packed = std::fs::read_to_string(&marker)
        .ok()
        .map(|file| root.join(file.trim()))
        .filter(|tarball| tarball.is_file());
    let tarball = match packed {
        Some(tarball) => tarball,
        None => {
            let out = output(
                Command::new("npm")
                    .args(["pack", "--json", package, "--pack-destination"])
                    .arg(&root),
            )?;
            anyhow::ensure!(
                out.status.success(),
                "npm pack {package} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            // `--json`: one entry per package packed, naming the tarball it wrote.
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
                anyhow::anyhow!(
                    "npm pack {package} printed no JSON ({e}): {}",
                    String::from_utf8_lossy(&out.stdout)
                )
            })?;
            let file = report[0]["filename"]
                .as_str()
                .ok_or_else(|| anyhow::anyhow!("npm pack {package} named no tarball: {report}"))?;
            let tarball = root.join(file);
            anyhow::ensure!(
                tarball.is_file(),
                "npm pack {package} made no {}",
                tarball.display()
            );
            std::fs::write(&marker, file)?;
            tarball
        }
    };
    let path = root.join("package").join(inner);
    if !path.is_file() {
        // Unpacked beside, then moved into place: an interrupted unpack leaves no partial file
        // where a later run would take it for the whole one.
        let member = format!("package/{inner}");
        let scratch = tempfile::tempdir_in(&root)?;
        let out = Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(scratch.path())
            .arg(&member)
            .output()
            .map_err(|e| anyhow::anyhow!("cannot run tar ({e})"))?;
        anyhow::ensure!(
            out.status.success(),
            "tar could not unpack {member} from {}: {}",
            tarball.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::rename(scratch.path().join(&member), &path)?;
    }
    anyhow::ensure!(
        path.is_file(),
        "{package} ships no {inner} ({} is missing)",
        path.display()
    );
    Ok(path)
}
