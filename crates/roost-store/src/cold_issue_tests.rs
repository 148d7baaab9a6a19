//! Closed issues leave memory once their rows are written and are read back from `state.db`
//! (`roost-core/src/issue_map.rs`): through the write connection before a commit, after a
//! restart, and back into memory when one is reopened.

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use roost_core::command::IssuePatch;
use roost_core::{Command, IssueStatus};
use sqlx::Connection;
use std::time::Duration;

use super::tests::{company_entry, system_entry};
use super::StateMachineStore;

/// The hash of the state `dir/state.db` holds, every issue loaded into memory (no rows read
/// back): what a node that never let a closed issue go would hold.
async fn hash_all_in_memory(dir: &std::path::Path) -> String {
    let url = format!("sqlite://{}?mode=ro", dir.join("state.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open state.db");
    let state = crate::rows::load_state(&mut conn, None)
        .await
        .expect("load");
    assert_eq!(state.issues.cold_len(), 0);
    state.hash()
}

fn delete(index: u64, id: &str) -> openraft::Entry<crate::types::TypeConfig> {
    system_entry(
        index,
        Command::DeleteIssue {
            issue_id: id.into(),
        },
    )
}

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
    assert_eq!(before_restart, hash_all_in_memory(dir.path()).await);
    let (_sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(reader.applied_index(), 7);
    assert_eq!(
        reader.read(|s| (s.issues.cold_len(), s.issues.len())),
        (2, 3),
        "a restart loads closed issues out of memory"
    );
    assert_eq!(reader.read(|s| s.hash()), before_restart);
}

/// One batch that closes, edits, deletes and re-creates issues: memory lets go only of those
/// still closed at its end, and their rows read back as the last change of the batch left them.
#[tokio::test]
async fn a_batch_that_closes_edits_and_deletes_issues_leaves_rows_that_read_back_as_memory_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let retitle = |index: u64, id: &str| {
        system_entry(
            index,
            Command::UpdateIssue {
                issue_id: id.into(),
                patch: IssuePatch {
                    title: Some(format!("{id}, edited while done")),
                    ..Default::default()
                },
                comment: None,
            },
        )
    };
    sm.apply([
        company_entry(1, "c1", "ACM"),
        create(2, "edited", IssueStatus::Todo),
        set_status(3, "edited", IssueStatus::Done),
        retitle(4, "edited"),
        create(5, "gone", IssueStatus::Done),
        delete(6, "gone"),
        create(7, "back", IssueStatus::Done),
        set_status(8, "back", IssueStatus::Todo),
    ])
    .await
    .expect("apply");
    let slots = reader.read(|s| {
        let cold = |id: &str| s.issues.is_cold(id);
        (cold("edited"), s.issues.contains_key("gone"), cold("back"))
    });
    assert_eq!(slots, (true, false, false));
    let title = reader.read(|s| s.issues.get("edited").map(|i| i.title.clone()));
    assert_eq!(title.as_deref(), Some("edited, edited while done"));
    let held = reader.read(|s| s.hash());
    reader.flush().expect("commit");
    assert_eq!(held, hash_all_in_memory(dir.path()).await);
}

/// A follower that installs a snapshot holding closed issues reads them from its own copy,
/// and its state is the sender's.
#[tokio::test]
async fn a_snapshot_with_closed_issues_installs_with_them_out_of_memory() {
    let (leader_dir, follower_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let (mut leader, leader_reader) = StateMachineStore::open(leader_dir.path())
        .await
        .expect("open");
    leader
        .apply([
            company_entry(1, "c1", "ACM"),
            create(2, "done", IssueStatus::Done),
            create(3, "open", IssueStatus::Todo),
        ])
        .await
        .expect("apply");
    let mut builder = leader.get_snapshot_builder().await;
    builder.build_snapshot().await.expect("build");
    let sent = leader
        .get_current_snapshot()
        .await
        .expect("read")
        .expect("a snapshot");
    let (mut follower, reader) = StateMachineStore::open(follower_dir.path())
        .await
        .expect("open");
    follower
        .apply([
            company_entry(1, "c1", "OLD"),
            create(2, "stale", IssueStatus::Done),
        ])
        .await
        .expect("apply");
    assert!(reader.read(|s| s.issues.is_cold("stale")));
    follower
        .install_snapshot(&sent.meta, sent.snapshot)
        .await
        .expect("install");
    let read = reader.read(|s| {
        let done = s.issues.get("done").map(|i| i.description.clone());
        (
            s.issues.is_cold("done"),
            done,
            s.issues.contains_key("stale"),
        )
    });
    assert_eq!(
        read,
        (true, Some(Some("what done is about".to_string())), false)
    );
    assert_eq!(reader.state_hash(), leader_reader.state_hash());
}

/// A restart loads issues a page at a time and lets each closed one go at once: every issue is
/// there after it, open ones in memory, and the state is the one a full load holds.
#[tokio::test]
async fn a_restart_loads_issues_page_by_page_and_holds_only_the_open_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
        let mut entries = vec![company_entry(1, "c1", "ACM")];
        for n in 0..10u64 {
            let status = if n % 3 == 0 {
                IssueStatus::Todo
            } else {
                IssueStatus::Done
            };
            entries.push(create(2 + n, &format!("i{n}"), status));
        }
        sm.apply(entries).await.expect("apply");
        assert!(reader.wait_applied(11, Duration::from_secs(10)).await);
    }
    let (_sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    let slots = reader.read(|s| {
        (0..10)
            .map(|n| s.issues.is_cold(&format!("i{n}")))
            .collect::<Vec<_>>()
    });
    let closed: Vec<bool> = (0..10).map(|n| n % 3 != 0).collect();
    assert_eq!(
        slots, closed,
        "closed issues out of memory, open ones in it"
    );
    assert_eq!(reader.read(|s| s.issues.len()), 10);
    assert_eq!(
        reader.read(|s| s.hash()),
        hash_all_in_memory(dir.path()).await
    );
}
