//! Company skills: keys unique per company, `SKILL.md` kept, caps per skill and per agent,
//! administrators only, and deletion unassigning everywhere.

use std::collections::BTreeMap;

use super::test_world::*;
use crate::command::*;
use crate::skill::*;

fn create(w: &mut World, id: &str, name: &str) -> Result<Skill, crate::DomainError> {
    match w.run(
        admin(),
        Command::CreateSkill {
            id: id.into(),
            company_id: "c1".into(),
            fields: SkillCreate {
                name: name.into(),
                markdown: Some(format!("---\nname: {id}\n---\n")),
                ..Default::default()
            },
        },
    )? {
        Outcome::Skill(s) => Ok(s),
        other => panic!("unexpected {other:?}"),
    }
}

fn assign(w: &mut World, keys: &[&str]) -> Result<Outcome, crate::DomainError> {
    w.run(
        admin(),
        Command::SetAgentSkills {
            agent_id: "a1".into(),
            skills: keys.iter().map(|k| k.to_string()).collect(),
        },
    )
}

fn write(
    w: &mut World,
    id: &str,
    path: &str,
    content: Option<String>,
) -> Result<Outcome, crate::DomainError> {
    w.run(
        admin(),
        Command::UpdateSkill {
            skill_id: id.into(),
            patch: SkillPatch {
                files: BTreeMap::from([(path.to_string(), content)]),
                ..Default::default()
            },
        },
    )
}

#[test]
fn a_skill_gets_a_slug_key_and_version_one_and_a_second_with_the_same_slug_is_refused() {
    let mut w = world();
    let s = create(&mut w, "s1", "Release Notes").expect("created");
    assert_eq!((s.key.as_str(), s.version), ("release-notes", 1));
    assert!(s.files.contains_key(SKILL_FILE));
    let before = w.state.skills.clone();
    let err = create(&mut w, "s2", "release notes").unwrap_err();
    assert_eq!(err.code(), "conflict", "{err}");
    assert_eq!(w.state.skills, before);
}

#[test]
fn a_file_change_bumps_the_version_and_an_unchanged_write_does_not() {
    let mut w = world();
    create(&mut w, "s1", "Deploy").expect("created");
    write(&mut w, "s1", "scripts/run.sh", Some("echo hi".into())).expect("written");
    assert_eq!(w.state.skills["s1"].version, 2);
    write(&mut w, "s1", "scripts/run.sh", Some("echo hi".into())).expect("same");
    assert_eq!(w.state.skills["s1"].version, 2);
    let err = write(&mut w, "s1", SKILL_FILE, None).unwrap_err();
    assert!(err.to_string().contains("SKILL.md"), "{err}");
    let err = write(&mut w, "s1", "../escape", Some("x".into())).unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    assert_eq!(w.state.skills["s1"].version, 2);
}

#[test]
fn a_skill_past_its_byte_cap_is_refused_and_at_the_cap_is_taken() {
    let mut w = world();
    create(&mut w, "s1", "Big").expect("created");
    let md = w.state.skills["s1"].files[SKILL_FILE].len();
    let at = "x".repeat(MAX_SKILL_BYTES - md);
    write(&mut w, "s1", "big.txt", Some(at.clone())).expect("at the cap");
    let err = write(&mut w, "s1", "one-more.txt", Some("x".into())).unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
}

#[test]
fn only_an_administrator_writes_or_assigns_skills() {
    let mut w = world();
    create(&mut w, "s1", "Deploy").expect("created");
    let agent = agent_actor("a1", "c1", None);
    let err = w
        .run(
            agent.clone(),
            Command::SetAgentSkills {
                agent_id: "a1".into(),
                skills: vec!["deploy".into()],
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
    let err = w
        .run(
            agent,
            Command::DeleteSkill {
                skill_id: "s1".into(),
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
}

#[test]
fn assigning_an_unknown_key_is_refused_and_deleting_a_skill_unassigns_it() {
    let mut w = world();
    create(&mut w, "s1", "Deploy").expect("created");
    create(&mut w, "s2", "Review").expect("created");
    let err = assign(&mut w, &["deploy", "nope"]).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
    assert!(w.state.agents["a1"].desired_skills.is_empty());
    assign(&mut w, &["deploy", "review", "deploy"]).expect("assigned");
    assert_eq!(w.state.agents["a1"].desired_skills, ["deploy", "review"]);
    w.ok(
        admin(),
        Command::DeleteSkill {
            skill_id: "s1".into(),
        },
    );
    assert_eq!(w.state.agents["a1"].desired_skills, ["review"]);
    assert!(!w.state.skills.contains_key("s1"));
}

#[test]
fn a_skill_cannot_grow_an_agents_skills_past_what_one_assignment_carries() {
    let mut w = world();
    let mut keys = Vec::new();
    // Four skills near their cap fit the agent's 1 MiB; a fifth grown as large does not.
    for i in 0..5 {
        let id = format!("s{i}");
        let s = create(&mut w, &id, &format!("skill {i}")).expect("created");
        keys.push(s.key);
        if i < 4 {
            write(
                &mut w,
                &id,
                "big.txt",
                Some("x".repeat(MAX_SKILL_BYTES - 1000)),
            )
            .expect("big");
        }
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    assign(&mut w, &refs).expect("under the agent cap");
    let err = write(
        &mut w,
        "s4",
        "big.txt",
        Some("x".repeat(MAX_SKILL_BYTES - 1000)),
    )
    .unwrap_err();
    assert_eq!(err.code(), "too_large", "{err}");
    assert_eq!(w.state.skills["s4"].version, 1);
}
