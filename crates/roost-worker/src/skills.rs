//! Writes the agent's company skills (the assignment's `skills`) into its run's workspace
//! where its runtime reads them, before every run, so an agent finds the same skills on any
//! worker. The worker owns only the skill directories it wrote (named in [`MANIFEST`]): a skill
//! unassigned since is removed, a changed one rewritten, and anything else left alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use roost_core::AdapterType;
use roost_proto::v1::SkillFiles;

/// Lists the skill keys this worker wrote into a skills directory, one per line.
pub(crate) const MANIFEST: &str = ".roost-skills";
/// In each skill directory: the version written, so an unchanged skill is not rewritten.
const VERSION_FILE: &str = ".roost-version";

/// Where, relative to the workspace, each runtime reads project skills. Runtimes without a
/// documented project location get `.agents/skills`, named to them by `ROOST_SKILLS_DIR`.
pub(crate) fn dir_for(adapter_type: Option<AdapterType>) -> &'static str {
    match adapter_type {
        Some(AdapterType::Claude) => ".claude/skills",
        Some(AdapterType::Gemini) => ".gemini/skills",
        Some(AdapterType::OpenCode) => ".opencode/skills",
        _ => ".agents/skills",
    }
}

/// What a sync did, for the run log.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Synced {
    pub written: Vec<String>,
    pub kept: Vec<String>,
    pub removed: Vec<String>,
}

impl Synced {
    pub(crate) fn note(&self, dir: &Path) -> Option<String> {
        if self.written.is_empty() && self.kept.is_empty() && self.removed.is_empty() {
            return None;
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        };
        Some(format!(
            "skills in {}: written {}; unchanged {}; removed {}",
            dir.display(),
            list(&self.written),
            list(&self.kept),
            list(&self.removed)
        ))
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("cannot {what} {}: {e}", path.display())
}

/// Makes `dir` hold exactly `skills` among the directories this worker manages there.
pub(crate) fn sync(dir: &Path, skills: &[SkillFiles]) -> Result<Synced, String> {
    let manifest = dir.join(MANIFEST);
    let before: BTreeSet<String> = std::fs::read_to_string(&manifest)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut synced = Synced::default();
    let wanted: BTreeSet<&str> = skills.iter().map(|s| s.key.as_str()).collect();
    for key in &before {
        if !wanted.contains(key.as_str()) && safe_name(key) {
            let path = dir.join(key);
            if path.exists() {
                std::fs::remove_dir_all(&path).map_err(|e| io("remove", &path, e))?;
            }
            synced.removed.push(key.clone());
        }
    }
    if !skills.is_empty() {
        std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    }
    for skill in skills {
        if !safe_name(&skill.key) {
            return Err(format!(
                "the skill key {:?} cannot name a directory",
                skill.key
            ));
        }
        let path = dir.join(&skill.key);
        let version = skill.version.to_string();
        let current = std::fs::read_to_string(path.join(VERSION_FILE)).ok();
        if before.contains(&skill.key) && current.as_deref() == Some(version.as_str()) {
            synced.kept.push(skill.key.clone());
            continue;
        }
        write_skill(&path, skill, &version)?;
        synced.written.push(skill.key.clone());
    }
    if !(before.is_empty() && skills.is_empty()) {
        let list: String = skills.iter().map(|s| format!("{}\n", s.key)).collect();
        std::fs::write(&manifest, list).map_err(|e| io("write", &manifest, e))?;
    }
    Ok(synced)
}

/// A key is one path component (the server checks it too: `roost-core/src/skill.rs`).
fn safe_name(key: &str) -> bool {
    !key.is_empty() && !key.starts_with('.') && !key.contains(['/', '\\', '\0'])
}

/// Replaces the skill's directory with its files, written beside it first so a failure leaves
/// the old version whole.
fn write_skill(path: &Path, skill: &SkillFiles, version: &str) -> Result<(), String> {
    let staging = path.with_extension("roost-new");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| io("remove", &staging, e))?;
    }
    if let Some(rel) = skill
        .files
        .keys()
        .find(|rel| roost_core::skill::file_path_problem(rel).is_some())
    {
        return Err(format!(
            "skill {} has an unsafe file path {rel:?}",
            skill.key
        ));
    }
    for (rel, content) in &skill.files {
        let file: PathBuf = staging.join(rel);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
        }
        std::fs::write(&file, content).map_err(|e| io("write", &file, e))?;
    }
    std::fs::write(staging.join(VERSION_FILE), version).map_err(|e| io("write", &staging, e))?;
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(|e| io("remove", path, e))?;
    }
    std::fs::rename(&staging, path).map_err(|e| io("move", &staging, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(key: &str, version: u64, files: &[(&str, &str)]) -> SkillFiles {
        SkillFiles {
            key: key.into(),
            version,
            files: files
                .iter()
                .map(|(p, c)| (p.to_string(), c.to_string()))
                .collect(),
        }
    }

    #[test]
    fn skills_are_written_kept_rewritten_and_removed_and_others_are_left_alone() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join(".claude/skills");
        std::fs::create_dir_all(dir.join("mine")).expect("mkdir");
        std::fs::write(dir.join("mine/SKILL.md"), "installed by hand").expect("write");

        let a1 = skill(
            "deploy",
            1,
            &[("SKILL.md", "v1"), ("scripts/go.sh", "echo go")],
        );
        let b1 = skill("review", 1, &[("SKILL.md", "review")]);
        let s = sync(&dir, &[a1, b1.clone()]).expect("sync");
        assert_eq!(s.written, ["deploy", "review"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("deploy/scripts/go.sh")).expect("read"),
            "echo go"
        );

        let a2 = skill("deploy", 2, &[("SKILL.md", "v2")]);
        let s = sync(&dir, &[a2, b1]).expect("sync");
        assert_eq!(
            (s.written.as_slice(), s.kept.as_slice()),
            (&["deploy".to_string()][..], &["review".to_string()][..])
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("deploy/SKILL.md")).expect("read"),
            "v2"
        );
        assert!(
            !dir.join("deploy/scripts").exists(),
            "the old version's files go"
        );

        let s = sync(&dir, &[]).expect("sync");
        assert_eq!(s.removed, ["deploy", "review"]);
        assert!(!dir.join("deploy").exists() && !dir.join("review").exists());
        assert!(
            dir.join("mine/SKILL.md").exists(),
            "a skill not written by the worker stays"
        );
    }

    #[test]
    fn an_unsafe_key_or_path_is_refused_and_writes_nothing() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("skills");
        assert!(sync(&dir, &[skill("../x", 1, &[("SKILL.md", "x")])]).is_err());
        assert!(sync(&dir, &[skill("x", 1, &[("../../etc/passwd", "x")])]).is_err());
        assert!(!root.path().join("etc").exists());
        assert!(!dir.join("x").exists());
    }
}
