//! The company skill calls of `roost.v1.Control`: each calls the [`Api`] function its
//! REST twin calls (`rest/skills.rs`), so authorization, validation and errors are the same.
//! REST's Paperclip shapes (file inventories, per-file reads and writes, the agent's skill
//! snapshot) become typed messages: a skill with its files, one update for names and files.

use roost_core::skill::{Skill, SkillCreate, SkillPatch};
use roost_core::Agent;
use roost_proto::v1 as pb;

use super::convert::clearable;
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Answer<T> = Result<T, ApiError>;

/// A skill; its files' content only `with_content`, and the ids of the agents that want it.
fn skill_to_proto(s: Skill, with_content: bool, holders: &[Agent]) -> pb::Skill {
    let files = s
        .files
        .into_iter()
        .map(|(path, content)| pb::SkillFile {
            path,
            bytes: content.len() as u64,
            content: if with_content { content } else { String::new() },
        })
        .collect();
    pb::Skill {
        id: s.id,
        company_id: s.company_id,
        key: s.key,
        name: s.name,
        description: s.description,
        version: s.version,
        files,
        created_at_ms: s.created_at.millis(),
        updated_at_ms: s.updated_at.millis(),
        agent_ids: holders.iter().map(|a| a.id.clone()).collect(),
    }
}

fn agent_skills_to_proto(agent: Agent, skills: Vec<Skill>) -> pb::AgentSkills {
    let skills = skills
        .into_iter()
        .map(|s| pb::AgentSkill {
            desired: agent.desired_skills.contains(&s.key),
            key: s.key,
            name: s.name,
            version: s.version,
            description: s.description,
        })
        .collect();
    pb::AgentSkills {
        agent_id: agent.id,
        desired_skills: agent.desired_skills,
        skills,
    }
}

pub(super) async fn list(
    api: Api,
    caller: Caller,
    r: pb::ListSkillsRequest,
) -> Answer<pb::ListSkillsResponse> {
    let skills = api.list_skills(&caller, &r.company_id).await?;
    Ok(pb::ListSkillsResponse {
        skills: skills
            .into_iter()
            .map(|s| skill_to_proto(s, false, &[]))
            .collect(),
    })
}

pub(super) async fn get(api: Api, caller: Caller, r: pb::GetSkillRequest) -> Answer<pb::Skill> {
    let (skill, holders) = api.get_skill(&caller, &r.company_id, &r.skill_id).await?;
    Ok(skill_to_proto(skill, true, &holders))
}

pub(super) async fn create(
    api: Api,
    caller: Caller,
    r: pb::CreateSkillRequest,
) -> Answer<pb::Skill> {
    let fields = SkillCreate {
        name: r.name,
        slug: r.slug,
        description: r.description,
        markdown: r.markdown,
        files: r.files.into_iter().collect(),
    };
    let skill = api.create_skill(&caller, &r.company_id, fields).await?;
    Ok(skill_to_proto(skill, true, &[]))
}

pub(super) async fn update(
    api: Api,
    caller: Caller,
    r: pb::UpdateSkillRequest,
) -> Answer<pb::Skill> {
    caller.require_admin()?;
    // A file to remove must exist, as REST's `DELETE .../files?path=` requires.
    let (before, _) = api.get_skill(&caller, &r.company_id, &r.skill_id).await?;
    if let Some(missing) = r
        .remove_files
        .iter()
        .find(|p| !before.files.contains_key(*p))
    {
        let file = format!("{}/{missing}", before.key);
        return Err(ApiError::not_found("skill file", &file));
    }
    let written = r.write_files.into_iter().map(|(p, c)| (p, Some(c)));
    let removed = r.remove_files.into_iter().map(|p| (p, None));
    let patch = SkillPatch {
        name: r.name,
        description: clearable(r.description),
        files: written.chain(removed).collect(),
    };
    api.update_skill(&caller, &r.company_id, &r.skill_id, patch)
        .await?;
    get(
        api,
        caller,
        pb::GetSkillRequest {
            company_id: r.company_id,
            skill_id: r.skill_id,
        },
    )
    .await
}

pub(super) async fn delete(
    api: Api,
    caller: Caller,
    r: pb::DeleteSkillRequest,
) -> Answer<pb::Skill> {
    let skill = api
        .delete_skill(&caller, &r.company_id, &r.skill_id)
        .await?;
    Ok(skill_to_proto(skill, false, &[]))
}

pub(super) async fn agent_skills(
    api: Api,
    caller: Caller,
    r: pb::GetAgentSkillsRequest,
) -> Answer<pb::AgentSkills> {
    let (agent, skills) = api.agent_skills(&caller, &r.agent_id).await?;
    Ok(agent_skills_to_proto(agent, skills))
}

pub(super) async fn set_agent_skills(
    api: Api,
    caller: Caller,
    r: pb::SetAgentSkillsRequest,
) -> Answer<pb::AgentSkills> {
    let (agent, skills) = api
        .set_agent_skills(&caller, &r.agent_id, r.desired_skills)
        .await?;
    Ok(agent_skills_to_proto(agent, skills))
}

#[cfg(test)]
mod tests {
    use roost_core::Timestamp;

    use super::*;

    #[test]
    fn a_listed_skill_shows_its_files_sizes_without_their_content() {
        let skill = Skill {
            id: "s".into(),
            company_id: "c".into(),
            key: "deploy".into(),
            name: "Deploy".into(),
            description: None,
            version: 2,
            files: [("SKILL.md".to_string(), "# Deploy".to_string())].into(),
            created_at: Timestamp(1),
            updated_at: Timestamp(2),
        };
        let listed = skill_to_proto(skill.clone(), false, &[]);
        assert_eq!(listed.files[0].bytes, 8);
        assert!(listed.files[0].content.is_empty());
        let read = skill_to_proto(skill, true, &[]);
        assert_eq!(read.files[0].content, "# Deploy");
    }
}
