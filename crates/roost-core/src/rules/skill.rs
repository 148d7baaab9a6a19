//! Company skills and their assignment to agents (types in `skill.rs`).
//!
//! - Administrators write skills and assign them; a skill is code another agent will run, so
//!   no agent installs one (agents read their company's skills over the API).
//! - A skill's key is unique in its company and never changes; it always holds `SKILL.md`;
//!   its files and bytes stay under the caps, and so do the skills of every agent that holds it
//!   (what one run's assignment carries to its worker).
//! - Deleting a skill unassigns it from every agent in the same command.

use std::collections::BTreeMap;

use serde_json::json;

use super::{require_id, require_text, Ctx};
use crate::command::Outcome;
use crate::entity::Agent;
use crate::error::DomainError;
use crate::limits::{MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::skill::*;
use crate::state::{ActivityNote, Change, Decision};

fn note(company_id: &str, id: &str, details: serde_json::Value) -> ActivityNote {
    ActivityNote {
        company_id: Some(company_id.into()),
        entity_type: "skill",
        entity_id: id.into(),
        details,
    }
}

fn description(value: Option<&String>) -> Result<Option<String>, DomainError> {
    match value {
        Some(d) if d.chars().count() > MAX_DESCRIPTION_CHARS => Err(DomainError::invalid(
            "description",
            format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        )),
        other => Ok(other.cloned()),
    }
}

/// The files must fit one skill and keep `SKILL.md`.
fn check_files(files: &BTreeMap<String, String>) -> Result<(), DomainError> {
    if !files.contains_key(SKILL_FILE) {
        return Err(DomainError::invalid(
            "files",
            format!("a skill must keep its {SKILL_FILE}"),
        ));
    }
    if files.len() > MAX_SKILL_FILES {
        return Err(DomainError::too_large(
            "files",
            MAX_SKILL_FILES as u64,
            "files",
        ));
    }
    if files_size(files) > MAX_SKILL_BYTES {
        return Err(DomainError::too_large(
            "files",
            MAX_SKILL_BYTES as u64,
            "bytes",
        ));
    }
    Ok(())
}

/// The bytes of `keys`' skills in `company_id`, with `changed` counted as it would become.
fn assigned_bytes(ctx: &Ctx<'_>, company_id: &str, keys: &[String], changed: &Skill) -> usize {
    keys.iter()
        .filter_map(|key| {
            if *key == changed.key {
                Some(changed.size())
            } else {
                skill_by_key(ctx, company_id, key).map(Skill::size)
            }
        })
        .sum()
}

pub(crate) fn skill_by_key<'a>(ctx: &Ctx<'a>, company_id: &str, key: &str) -> Option<&'a Skill> {
    ctx.state
        .skills
        .values()
        .find(|s| s.company_id == company_id && s.key == key)
}

fn agent_cap_error(agent: &Agent) -> DomainError {
    DomainError::too_large(
        format!("the skills of agent {}", agent.name),
        MAX_AGENT_SKILL_BYTES as u64,
        "bytes",
    )
}

pub(crate) fn create(
    ctx: &Ctx<'_>,
    id: &str,
    company_id: &str,
    fields: &SkillCreate,
) -> Result<Decision, DomainError> {
    require_id("id", id)?;
    ctx.state
        .companies
        .get(company_id)
        .ok_or_else(|| DomainError::not_found("company", company_id))?;
    ctx.require_company(company_id, "skill", id)?;
    ctx.require_admin("create a skill")?;
    if ctx.state.skills.contains_key(id) {
        return Err(DomainError::conflict(format!("skill {id} already exists")));
    }
    let name = require_text("name", &fields.name, MAX_NAME_CHARS)?;
    let key = match &fields.slug {
        Some(slug) => slug.clone(),
        None => slug_of(&name),
    };
    if let Some(problem) = slug_problem(&key) {
        return Err(DomainError::invalid("slug", problem));
    }
    if skill_by_key(ctx, company_id, &key).is_some() {
        return Err(DomainError::conflict(format!(
            "this company already has a skill with the slug {key}"
        )));
    }
    let count = ctx
        .state
        .skills
        .values()
        .filter(|s| s.company_id == company_id)
        .count();
    if count >= MAX_SKILLS_PER_COMPANY {
        return Err(DomainError::quota(
            "skills_per_company",
            MAX_SKILLS_PER_COMPANY as u64,
            format!("a company holds at most {MAX_SKILLS_PER_COMPANY} skills; delete one first"),
        ));
    }
    let description = description(fields.description.as_ref())?;
    let mut files = fields.files.clone();
    let markdown = match &fields.markdown {
        Some(m) => m.clone(),
        None => files
            .get(SKILL_FILE)
            .cloned()
            .unwrap_or_else(|| default_markdown(&key, &name, description.as_deref())),
    };
    files.insert(SKILL_FILE.into(), markdown);
    check_files(&files)?;
    let skill = Skill {
        id: id.into(),
        company_id: company_id.into(),
        key,
        name,
        description,
        version: 1,
        files,
        created_at: ctx.now(),
        updated_at: ctx.now(),
    };
    Ok(Decision {
        note: note(
            company_id,
            id,
            json!({ "key": skill.key, "version": 1, "bytes": skill.size() }),
        ),
        outcome: Outcome::Skill(skill.clone()),
        changes: vec![Change::Skill(skill)],
    })
}

pub(crate) fn update(ctx: &Ctx<'_>, id: &str, patch: &SkillPatch) -> Result<Decision, DomainError> {
    let current = ctx
        .state
        .skills
        .get(id)
        .ok_or_else(|| DomainError::not_found("skill", id))?;
    ctx.require_company(&current.company_id, "skill", id)?;
    ctx.require_admin("change a skill")?;
    let mut skill = current.clone();
    if let Some(name) = &patch.name {
        skill.name = require_text("name", name, MAX_NAME_CHARS)?;
    }
    if let Some(d) = &patch.description {
        skill.description = description(d.as_ref())?;
    }
    for (path, content) in &patch.files {
        match content {
            Some(c) => skill.files.insert(path.clone(), c.clone()),
            None => skill.files.remove(path),
        };
    }
    check_files(&skill.files)?;
    if skill == *current {
        // Nothing changed: no new version for workers to write.
        return Ok(Decision {
            note: note(&skill.company_id, id, json!({ "unchanged": true })),
            outcome: Outcome::Skill(skill),
            changes: Vec::new(),
        });
    }
    for agent in holders(ctx, &skill) {
        if assigned_bytes(ctx, &skill.company_id, &agent.desired_skills, &skill)
            > MAX_AGENT_SKILL_BYTES
        {
            return Err(agent_cap_error(agent));
        }
    }
    skill.version = skill.version.saturating_add(1);
    skill.updated_at = ctx.now();
    Ok(Decision {
        note: note(
            &skill.company_id,
            id,
            json!({ "key": skill.key, "version": skill.version, "bytes": skill.size() }),
        ),
        outcome: Outcome::Skill(skill.clone()),
        changes: vec![Change::Skill(skill)],
    })
}

/// The agents of the skill's company that hold it.
fn holders<'a>(ctx: &Ctx<'a>, skill: &'a Skill) -> impl Iterator<Item = &'a Agent> {
    ctx.state
        .agents
        .values()
        .filter(move |a| a.company_id == skill.company_id && a.desired_skills.contains(&skill.key))
}

pub(crate) fn delete(ctx: &Ctx<'_>, id: &str) -> Result<Decision, DomainError> {
    let skill = ctx
        .state
        .skills
        .get(id)
        .ok_or_else(|| DomainError::not_found("skill", id))?;
    ctx.require_company(&skill.company_id, "skill", id)?;
    ctx.require_admin("delete a skill")?;
    let mut changes: Vec<Change> = holders(ctx, skill)
        .map(|agent| {
            let mut a = agent.clone();
            a.desired_skills.retain(|k| *k != skill.key);
            a.updated_at = ctx.now();
            Change::Agent(a)
        })
        .collect();
    let unassigned = changes.len();
    changes.push(Change::SkillDeleted(id.into()));
    Ok(Decision {
        note: note(
            &skill.company_id,
            id,
            json!({ "deleted": true, "key": skill.key, "unassignedFrom": unassigned }),
        ),
        outcome: Outcome::Skill(skill.clone()),
        changes,
    })
}

pub(crate) fn set_agent_skills(
    ctx: &Ctx<'_>,
    agent_id: &str,
    keys: &[String],
) -> Result<Decision, DomainError> {
    let agent = ctx
        .state
        .agents
        .get(agent_id)
        .ok_or_else(|| DomainError::not_found("agent", agent_id))?;
    ctx.require_company(&agent.company_id, "agent", agent_id)?;
    ctx.require_admin("assign skills")?;
    let mut wanted: Vec<String> = Vec::new();
    for key in keys {
        if skill_by_key(ctx, &agent.company_id, key).is_none() {
            return Err(DomainError::invalid(
                "desiredSkills",
                format!("this company has no skill {key:?}; create it first"),
            ));
        }
        if !wanted.contains(key) {
            wanted.push(key.clone());
        }
    }
    if wanted.len() > MAX_AGENT_SKILLS {
        return Err(DomainError::too_large(
            "desiredSkills",
            MAX_AGENT_SKILLS as u64,
            "skills",
        ));
    }
    let bytes: usize = wanted
        .iter()
        .filter_map(|k| skill_by_key(ctx, &agent.company_id, k))
        .map(Skill::size)
        .sum();
    if bytes > MAX_AGENT_SKILL_BYTES {
        return Err(agent_cap_error(agent));
    }
    let mut a = agent.clone();
    a.desired_skills = wanted;
    if a.desired_skills != agent.desired_skills {
        a.updated_at = ctx.now();
    }
    Ok(Decision {
        note: ActivityNote {
            company_id: Some(a.company_id.clone()),
            entity_type: "agent",
            entity_id: a.id.clone(),
            details: json!({ "desiredSkills": a.desired_skills }),
        },
        outcome: Outcome::Agent(a.clone()),
        changes: vec![Change::Agent(a)],
    })
}
