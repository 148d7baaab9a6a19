//! Closed issues that have left memory (`issue_map.rs`) are the same state as closed issues
//! kept in it: one replica that lets them go and one that keeps them apply the same commands to
//! the same outcomes and the same state hash, whatever the commands do to closed issues.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::command::*;
use crate::entity::*;
use crate::issue_map::IssueRows;
use crate::project::{GoalPatch, ProjectPatch};
use crate::state::{Change, State};
use crate::time::Timestamp;

use super::test_world::*;

/// The issue rows a store would hold, as JSON, as the store writes them.
#[derive(Default)]
struct Rows(Mutex<BTreeMap<String, String>>);

impl IssueRows for Rows {
    fn issue(&self, id: &str) -> Result<Issue, String> {
        let rows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let row = rows.get(id).ok_or("no such row")?;
        serde_json::from_str(row).map_err(|e| e.to_string())
    }
}

/// Two replicas of one world: `kept` holds every issue in memory; `cold` lets closed ones go
/// after every command, as a store does once their rows are written.
struct Pair {
    kept: World,
    cold: State,
    rows: Arc<Rows>,
}

impl Pair {
    fn new() -> Pair {
        let kept = world();
        let rows = Arc::new(Rows::default());
        let mut cold = kept.state.clone();
        for issue in cold
            .issues
            .values()
            .map(|i| i.into_owned())
            .collect::<Vec<_>>()
        {
            rows.write(&issue);
        }
        cold.read_closed_issues_from(rows.clone());
        Pair { kept, cold, rows }
    }

    /// Applies `command` to both and checks they agree; returns the outcome.
    fn run(&mut self, actor: Actor, command: Command) -> Result<Outcome, crate::DomainError> {
        self.kept.index += 1;
        let index = self.kept.index;
        let env = Envelope {
            request_id: None,
            at: Timestamp(1_000 * index as i64),
            actor,
            command,
            idempotency_key: None,
        };
        let kept = self.kept.state.apply(index, &env);
        let cold = self.cold.apply(index, &env);
        assert_eq!(
            format!("{:?}", kept.outcome),
            format!("{:?}", cold.outcome),
            "{:?}",
            env.command
        );
        for change in &cold.changes {
            match change {
                Change::Issue(i) => self.rows.write(i),
                Change::IssueDeleted(id) => self.rows.drop_row(id),
                _ => {}
            }
        }
        for change in &cold.changes {
            if let Change::Issue(i) = change {
                self.cold.forget_closed_issue(&i.id);
            }
        }
        assert_eq!(
            self.kept.state.hash(),
            self.cold.hash(),
            "{:?}",
            env.command
        );
        kept.outcome
    }

    fn ok(&mut self, actor: Actor, command: Command) -> Outcome {
        match self.run(actor, command.clone()) {
            Ok(o) => o,
            Err(e) => panic!("{command:?} failed: {e:?}"),
        }
    }

    fn create(&mut self, id: &str, patch: IssuePatch) {
        let fields = IssuePatch {
            title: Some(format!("issue {id}")),
            description: Some(Some(format!("what {id} is about"))),
            ..patch
        };
        self.ok(
            admin(),
            Command::CreateIssue {
                id: id.into(),
                company_id: "c1".into(),
                fields,
            },
        );
    }

    fn in_memory(&self, id: &str) -> bool {
        !self.cold.issues.is_cold(id)
    }
}

impl Rows {
    fn write(&self, issue: &Issue) {
        let row = serde_json::to_string(issue).unwrap_or_else(|e| panic!("{e}"));
        let mut rows = self.0.lock().unwrap_or_else(|p| p.into_inner());
        rows.insert(issue.id.clone(), row);
    }

    fn drop_row(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

fn patch_status(status: IssueStatus) -> IssuePatch {
    IssuePatch {
        status: Some(status),
        ..Default::default()
    }
}

#[test]
fn closed_issues_read_back_from_rows_are_the_state_they_were_in_memory() {
    let mut p = Pair::new();
    p.ok(
        admin(),
        Command::CreateGoal {
            id: "g1".into(),
            company_id: "c1".into(),
            fields: GoalPatch {
                title: Some("ship".into()),
                ..Default::default()
            },
        },
    );
    p.ok(
        admin(),
        Command::CreateProject {
            id: "p1".into(),
            company_id: "c1".into(),
            fields: ProjectPatch {
                name: Some("roost".into()),
                ..Default::default()
            },
        },
    );
    p.create(
        "parent",
        IssuePatch {
            status: Some(IssueStatus::Todo),
            assignee_agent_id: Some(Some("a1".into())),
            goal_id: Some(Some("g1".into())),
            ..Default::default()
        },
    );
    for k in ["k1", "k2"] {
        p.create(
            k,
            IssuePatch {
                parent_id: Some(Some("parent".into())),
                assignee_agent_id: Some(Some("a2".into())),
                project_id: Some(Some("p1".into())),
                goal_id: Some(Some("g1".into())),
                ..Default::default()
            },
        );
    }
    p.create(
        "later",
        IssuePatch {
            blocked_by_issue_ids: Some(vec!["k1".into()]),
            assignee_agent_id: Some(Some("a1".into())),
            ..Default::default()
        },
    );
    // Closing k1 leaves it in the rows only; the issue it blocked and its parent still see it.
    p.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "k1".into(),
            patch: patch_status(IssueStatus::Done),
            comment: Some(NewComment {
                id: "cm1".into(),
                body: "done; @a1 the next one is free".into(),
            }),
        },
    );
    assert!(!p.in_memory("k1"), "a closed issue leaves memory");
    assert!(p.in_memory("later") && p.in_memory("parent"));
    let read = p.cold.issues.get("k1").map(|i| i.into_owned());
    assert_eq!(read.as_ref(), p.kept.state.issues.get("k1").as_deref());
    assert_eq!(
        read.and_then(|i| i.description),
        Some("what k1 is about".to_string())
    );
    // A closed issue found by its identifier, commented on, edited while closed, in a list.
    let identifier = p.kept.state.issues["k1"].identifier.clone();
    assert_eq!(
        p.cold
            .issue_by_ref(&identifier.to_lowercase())
            .map(|i| i.id.clone()),
        Some("k1".to_string())
    );
    p.ok(
        agent_actor("a2", "c1", None),
        Command::AddComment {
            issue_id: "k1".into(),
            comment: NewComment {
                id: "cm2".into(),
                body: "one more note".into(),
            },
        },
    );
    p.ok(
        admin(),
        Command::UpdateIssue {
            issue_id: "k1".into(),
            patch: IssuePatch {
                title: Some("k1, renamed when done".into()),
                ..Default::default()
            },
            comment: None,
        },
    );
    assert!(
        !p.in_memory("k1"),
        "an edit that leaves it closed lets it go again"
    );
    let children: Vec<String> = p
        .cold
        .children_of("parent")
        .map(|i| i.title.clone())
        .collect();
    assert_eq!(children, ["k1, renamed when done", "issue k2"]);
    // Reopened, it is back in memory; closed with its sibling, the parent's assignee is woken.
    p.ok(admin(), status_update("k1", IssueStatus::Todo));
    assert!(p.in_memory("k1"));
    p.ok(admin(), status_update("k1", IssueStatus::Cancelled));
    p.ok(admin(), status_update("k2", IssueStatus::Done));
    assert!(!p.in_memory("k1") && !p.in_memory("k2"));
    // A checkout of a closed issue, refused or not, decides the same on both.
    let _ = p.run(
        agent_actor("a2", "c1", None),
        Command::Checkout {
            issue_id: "k2".into(),
            agent_id: "a2".into(),
            expected_statuses: vec![IssueStatus::Done],
        },
    );
    // Deleting the goal and the project clears them from closed issues too.
    p.ok(
        admin(),
        Command::DeleteGoal {
            goal_id: "g1".into(),
        },
    );
    p.ok(
        admin(),
        Command::DeleteProject {
            project_id: "p1".into(),
        },
    );
    assert_eq!(
        p.cold.issues.get("k2").and_then(|i| i.goal_id.clone()),
        None
    );
    // Deleting a closed parent and a closed child.
    p.ok(admin(), status_update("parent", IssueStatus::Done));
    p.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "k2".into(),
        },
    );
    p.ok(
        admin(),
        Command::DeleteIssue {
            issue_id: "parent".into(),
        },
    );
    assert!(p.cold.issues.get("k2").is_none());
    assert_eq!(p.cold.issues.len(), p.kept.state.issues.len());
    assert!(
        p.cold.issues.cold_len() >= 1,
        "k1 is still in the rows only"
    );
}

/// A closed issue read back from its row loses a deleted label as one kept in memory does,
/// to the same state hash (the label index names it while it lives in `state.db` only).
#[test]
fn a_deleted_label_leaves_closed_issues_that_left_memory() {
    let mut p = Pair::new();
    p.ok(
        admin(),
        Command::CreateLabel {
            id: "l1".into(),
            company_id: "c1".into(),
            name: "bug".into(),
            color: "#ff0000".into(),
        },
    );
    let labelled = IssuePatch {
        paperclip: Some([("labelIds".to_string(), serde_json::json!(["l1"]))].into()),
        ..patch_status(IssueStatus::Done)
    };
    p.create("k1", labelled);
    assert!(!p.in_memory("k1"));
    p.ok(
        admin(),
        Command::DeleteLabel {
            label_id: "l1".into(),
        },
    );
    let read = p.cold.issues.get("k1").map(|i| i.into_owned());
    assert_eq!(
        read.and_then(|i| i.paperclip.get("labelIds").cloned()),
        Some(serde_json::json!([]))
    );
}
