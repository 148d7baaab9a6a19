//! Goals and projects: hierarchy without cycles, company scoping, issues that carry them, and a
//! paused project holding its issues' runs.

use super::test_world::*;
use crate::command::*;
use crate::entity::*;
use crate::project::*;
use crate::scheduling::claim_blocker;

fn goal(w: &mut World, id: &str, parent: Option<&str>) -> Result<Goal, crate::DomainError> {
    match w.run(
        admin(),
        Command::CreateGoal {
            id: id.into(),
            company_id: "c1".into(),
            fields: GoalPatch {
                title: Some(format!("goal {id}")),
                level: Some(GoalLevel::Company),
                parent_id: parent.map(|p| Some(p.to_string())),
                ..Default::default()
            },
        },
    )? {
        Outcome::Goal(g) => Ok(g),
        other => panic!("unexpected {other:?}"),
    }
}

fn project(w: &mut World, id: &str, goals: &[&str]) -> Project {
    match w.ok(
        agent_actor("a1", "c1", None),
        Command::CreateProject {
            id: id.into(),
            company_id: "c1".into(),
            fields: ProjectPatch {
                name: Some("Launch".into()),
                lead_agent_id: Some(Some("a1".into())),
                goal_ids: Some(goals.iter().map(|g| g.to_string()).collect()),
                ..Default::default()
            },
        },
    ) {
        Outcome::Project(p) => p,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_goal_cannot_become_its_own_ancestor() {
    let mut w = world();
    goal(&mut w, "g1", None).expect("root");
    goal(&mut w, "g2", Some("g1")).expect("child");
    let err = w
        .run(
            admin(),
            Command::UpdateGoal {
                goal_id: "g1".into(),
                patch: GoalPatch {
                    parent_id: Some(Some("g2".into())),
                    ..Default::default()
                },
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("sub-goals"), "{err}");
    let err = goal(&mut w, "g3", Some("nope")).unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[test]
fn issues_carry_a_project_and_goal_of_their_company_and_lose_them_when_deleted() {
    let mut w = world();
    goal(&mut w, "g1", None).expect("goal");
    let p = project(&mut w, "p1", &["g1"]);
    assert_eq!(p.goal_id.as_deref(), Some("g1"));
    let issue = w.issue(
        "i1",
        "c1",
        IssuePatch {
            project_id: Some(Some("p1".into())),
            goal_id: Some(Some("g1".into())),
            ..Default::default()
        },
    );
    assert_eq!(issue.project_id.as_deref(), Some("p1"));
    let err = w
        .run(
            agent_actor("b1", "c2", None),
            Command::CreateIssue {
                id: "i2".into(),
                company_id: "c2".into(),
                fields: IssuePatch {
                    title: Some("x".into()),
                    project_id: Some(Some("p1".into())),
                    ..Default::default()
                },
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "not_found", "another company's project");
    w.ok(
        admin(),
        Command::DeleteGoal {
            goal_id: "g1".into(),
        },
    );
    assert_eq!(w.state.issues["i1"].goal_id, None);
    assert!(w.state.projects["p1"].goal_ids.is_empty());
    w.ok(
        admin(),
        Command::DeleteProject {
            project_id: "p1".into(),
        },
    );
    assert_eq!(w.state.issues["i1"].project_id, None);
    let err = w
        .run(
            agent_actor("a1", "c1", None),
            Command::DeleteGoal {
                goal_id: "g9".into(),
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
}

#[test]
fn a_paused_project_holds_its_issues_runs_until_resumed() {
    let mut w = world();
    project(&mut w, "p1", &[]);
    w.ok(
        admin(),
        Command::UpdateProject {
            project_id: "p1".into(),
            patch: ProjectPatch {
                paused: Some(true),
                pause_reason: Some(Some("waiting for legal".into())),
                ..Default::default()
            },
        },
    );
    w.issue(
        "i1",
        "c1",
        IssuePatch {
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some("a1".into())),
            project_id: Some(Some("p1".into())),
            ..Default::default()
        },
    );
    let wake = pending(&w, "a1")[0].clone();
    let why = claim_blocker(&w.state, &wake).expect("held");
    assert!(why.contains("paused: waiting for legal"), "{why}");
    assert!(claim(&mut w, "a1", "r1").is_err(), "no run while paused");
    w.ok(
        admin(),
        Command::UpdateProject {
            project_id: "p1".into(),
            patch: ProjectPatch {
                paused: Some(false),
                ..Default::default()
            },
        },
    );
    assert_eq!(claim_blocker(&w.state, &wake), None);
    claim(&mut w, "a1", "r1").expect("runs once resumed");
}
