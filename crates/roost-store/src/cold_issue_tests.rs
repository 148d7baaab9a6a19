//! Closed issues leave memory once their rows are written and are read back from `state.db`
//! (`roost-core/src/issue_map.rs`): through the write connection before a commit, after a
//! restart, and back into memory when one is reopened.

use openraft::storage::RaftStateMachine;
use roost_core::command::IssuePatch;
use roost_core::{Command, IssueStatus};
use std::time::Duration;

use super::tests::{company_entry, system_entry};
use super::StateMachineStore;

fn create(index: u64, id: &str, status: IssueStatus) -> openraft::Entry<crate::types::TypeConfig> {
    system_entry(
        index,
        Command::CreateIssue {
            id: id.into(),
            company_id: "c1".into(),
            fields: IssuePatch {
                title: Some(format!("issue {id}")),
                description: Some(Some(format!("what {id} is about"))),
                status: Some(status),
                ..Default::default()
            },
        },
    )
}

fn set_status(
    index: u64,
    id: &str,
    status: IssueStatus,
) -> openraft::Entry<crate::types::TypeConfig> {
    system_entry(
        index,
        Command::UpdateIssue {
            issue_id: id.into(),
            patch: IssuePatch {
                status: Some(status),
                ..Default::default()
            },
            comment: None,
        },
    )
}

#[tokio::test]
async fn a_closed_issue_leaves_memory_and_reads_back_the_same_before_and_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before_restart = {
        let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
        sm.apply([
            company_entry(1, "c1", "ACM"),
            create(2, "done", IssueStatus::Done),
            create(3, "open", IssueStatus::Todo),
            create(4, "reopened", IssueStatus::Todo),
            set_status(5, "reopened", IssueStatus::Done),
        ])
        .await
        .expect("apply");
        assert!(reader.wait_applied(5, Duration::from_secs(10)).await);
        let cold = |id: &str| reader.read(|s| s.issues.is_cold(id));
        assert!(cold("done") && cold("reopened") && !cold("open"));
        // Read back through the write connection, whether or not the commit has run.
        let done = reader.read(|s| s.issues.get("done").map(|i| i.into_owned()));
        let done = done.expect("the closed issue is still there");
        assert_eq!(
            (done.status, done.description.as_deref()),
            (IssueStatus::Done, Some("what done is about"))
        );
        assert_eq!(
            reader.read(|s| s.issue_by_ref("ACM-1").map(|i| i.id.clone())),
            Some("done".to_string())
        );
        // Reopened, it is in memory again, with everything it had.
        sm.apply([set_status(6, "reopened", IssueStatus::Todo)])
            .await
            .expect("apply");
        assert!(!cold("reopened"));
        let reopened = reader.read(|s| s.issues["reopened"].clone());
        assert_eq!(reopened.title, "issue reopened");
        sm.apply([set_status(7, "open", IssueStatus::Cancelled)])
            .await
            .expect("apply");
        assert!(cold("open"));
        reader.read(|s| s.hash())
    };
    let (_sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(reader.applied_index(), 7);
    assert_eq!(
        reader.read(|s| (s.issues.cold_len(), s.issues.len())),
        (2, 3),
        "a restart loads closed issues out of memory"
    );
    assert_eq!(reader.read(|s| s.hash()), before_restart);
}
