//! Company skills: a directory tree with a `SKILL.md`, versioned and
//! size-capped, kept in the replicated state and assigned to agents by key, so a worker writes
//! the same skills wherever the agent runs. Paperclip's shapes (`/companies/{cid}/skills`,
//! `/agents/{id}/skills/sync`); the rules are in `rules/skill.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The file every skill has: what the runtime reads first.
pub const SKILL_FILE: &str = "SKILL.md";

/// Skills a company may hold.
pub const MAX_SKILLS_PER_COMPANY: usize = 200;
/// Files of one skill, and their bytes together.
pub const MAX_SKILL_FILES: usize = 64;
pub const MAX_SKILL_BYTES: usize = 256 * 1024;
/// A file path inside a skill, and a slug.
pub const MAX_SKILL_PATH_BYTES: usize = 256;
pub const MAX_SKILL_SLUG_CHARS: usize = 64;
/// Skills assigned to one agent, and their bytes together: what one run's assignment carries
/// to its worker.
pub const MAX_AGENT_SKILLS: usize = 32;
pub const MAX_AGENT_SKILL_BYTES: usize = 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    pub id: String,
    pub company_id: String,
    /// Unique in the company; what agents' `desiredSkills` name and the directory the worker
    /// writes it to. Paperclip's `key` and `slug` are the same here.
    pub key: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Starts at 1; every change of a file, the name or the description adds one.
    pub version: u64,
    /// Path (relative, `/`-separated) to UTF-8 content; always holds [`SKILL_FILE`].
    pub files: BTreeMap<String, String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Skill {
    /// The bytes of its files together.
    pub fn size(&self) -> usize {
        files_size(&self.files)
    }
}

pub fn files_size(files: &BTreeMap<String, String>) -> usize {
    files.values().map(String::len).sum()
}

/// A skill as created: Paperclip's `{name, slug?, description?, markdown?}`, plus `files` for
/// the rest of the tree. `markdown` is the `SKILL.md`; without it one is written from the name
/// and description.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillCreate {
    pub name: String,
    #[serde(default)]
    pub slug: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub markdown: Option<String>,
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// A change to a skill: a new name or description, files written (`Some`) or removed (`None`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillPatch {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::command::nullable"
    )]
    pub description: Option<Option<String>>,
    #[serde(default)]
    pub files: BTreeMap<String, Option<String>>,
}

/// The slug a name makes: lower-case letters, digits and single dashes, at most
/// [`MAX_SKILL_SLUG_CHARS`].
pub fn slug_of(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= MAX_SKILL_SLUG_CHARS {
            break;
        }
    }
    slug.trim_end_matches('-').to_string()
}

/// Why `slug` cannot name a skill, if it cannot: it becomes a directory name on every worker.
pub fn slug_problem(slug: &str) -> Option<String> {
    let ok = !slug.is_empty()
        && slug.len() <= MAX_SKILL_SLUG_CHARS
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !slug.starts_with(['-', '_']);
    (!ok).then(|| {
        format!(
            "the skill slug {slug:?} must be 1 to {MAX_SKILL_SLUG_CHARS} lower-case letters, \
             digits, '-' or '_', starting with a letter or digit"
        )
    })
}

/// Why `path` cannot name a file of a skill, if it cannot.
pub fn file_path_problem(path: &str) -> Option<String> {
    if path.len() > MAX_SKILL_PATH_BYTES {
        return Some(format!(
            "the skill file path {:?}... is longer than {MAX_SKILL_PATH_BYTES} bytes",
            path.chars().take(40).collect::<String>()
        ));
    }
    crate::home::relative_path_problem(path)
}

/// The `SKILL.md` written for a skill created without one: Claude Code's front matter.
pub fn default_markdown(key: &str, name: &str, description: Option<&str>) -> String {
    let description = description.unwrap_or(name).replace('\n', " ");
    format!("---\nname: {key}\ndescription: {description}\n---\n\n# {name}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_make_slugs_that_pass_and_odd_slugs_do_not() {
        assert_eq!(slug_of("Release Notes: v2!"), "release-notes-v2");
        assert_eq!(slug_of("  --Ünïcode  "), "n-code");
        assert!(slug_problem(&slug_of("Release Notes: v2!")).is_none());
        for bad in ["", "-x", "A", "a/b", "a b", &"x".repeat(65)] {
            assert!(slug_problem(bad).is_some(), "{bad:?}");
        }
        assert!(slug_problem(&"x".repeat(64)).is_none());
    }

    #[test]
    fn skill_paths_are_relative_and_bounded() {
        assert!(file_path_problem("references/api.md").is_none());
        for bad in ["/etc/passwd", "../x", "a//b", "a/./b", ""] {
            assert!(file_path_problem(bad).is_some(), "{bad:?}");
        }
        assert!(file_path_problem(&"a".repeat(257)).is_some());
    }
}
