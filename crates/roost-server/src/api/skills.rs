//! Company skills and their assignment to agents: read by every member of
//! the company, written and assigned by administrators (`roost-core/src/rules/skill.rs`).

use roost_core::skill::{Skill, SkillCreate, SkillPatch};
use roost_core::{Agent, Command, Outcome};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

impl Api {
    pub async fn list_skills(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Skill>, ApiError> {
        self.get_company(caller, company_id).await?;
        let mut skills: Vec<Skill> = self.reader().read(|s| {
            s.skills
                .values()
                .filter(|k| k.company_id == company_id)
                .cloned()
                .collect()
        });
        skills.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(skills)
    }

    /// The skill `id` of `company_id` (a skill of another company is not found), with the
    /// company's agents that hold it.
    pub async fn get_skill(
        &self,
        caller: &Caller,
        company_id: &str,
        id: &str,
    ) -> Result<(Skill, Vec<Agent>), ApiError> {
        self.barrier().await?;
        let found = self.reader().read(|s| {
            let skill = s.skills.get(id).filter(|k| k.company_id == company_id)?;
            let holders = s
                .agents
                .values()
                .filter(|a| a.company_id == company_id && a.desired_skills.contains(&skill.key))
                .cloned()
                .collect::<Vec<_>>();
            Some((skill.clone(), holders))
        });
        let (skill, holders) = found.ok_or_else(|| ApiError::not_found("skill", id))?;
        caller.check_company(&skill.company_id, "skill", id)?;
        Ok((skill, holders))
    }

    pub async fn create_skill(
        &self,
        caller: &Caller,
        company_id: &str,
        fields: SkillCreate,
    ) -> Result<Skill, ApiError> {
        caller.require_admin()?;
        let command = Command::CreateSkill {
            id: new_id(),
            company_id: company_id.into(),
            fields,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Skill(s) => s)
    }

    pub async fn update_skill(
        &self,
        caller: &Caller,
        company_id: &str,
        id: &str,
        patch: SkillPatch,
    ) -> Result<Skill, ApiError> {
        caller.require_admin()?;
        self.get_skill(caller, company_id, id).await?;
        let command = Command::UpdateSkill {
            skill_id: id.into(),
            patch,
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Skill(s) => s)
    }

    pub async fn delete_skill(
        &self,
        caller: &Caller,
        company_id: &str,
        id: &str,
    ) -> Result<Skill, ApiError> {
        caller.require_admin()?;
        self.get_skill(caller, company_id, id).await?;
        let command = Command::DeleteSkill {
            skill_id: id.into(),
        };
        expect_outcome!(self.submit(caller, command).await?, Outcome::Skill(s) => s)
    }

    /// The agent and its company's skills, for the agent's skill snapshot.
    pub async fn agent_skills(
        &self,
        caller: &Caller,
        agent_id: &str,
    ) -> Result<(Agent, Vec<Skill>), ApiError> {
        let agent = self.get_agent(caller, agent_id).await?;
        let skills = self.list_skills(caller, &agent.company_id).await?;
        Ok((agent, skills))
    }

    pub async fn set_agent_skills(
        &self,
        caller: &Caller,
        agent_id: &str,
        keys: Vec<String>,
    ) -> Result<(Agent, Vec<Skill>), ApiError> {
        caller.require_admin()?;
        let command = Command::SetAgentSkills {
            agent_id: agent_id.into(),
            skills: keys,
        };
        let agent = expect_outcome!(self.submit(caller, command).await?, Outcome::Agent(a) => a)?;
        let skills = self.list_skills(caller, &agent.company_id).await?;
        Ok((agent, skills))
    }
}
