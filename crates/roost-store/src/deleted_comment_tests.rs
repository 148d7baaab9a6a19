//! A comment deleted by its author across a restart: the state loaded from `state.db` marks it
//! deleted (`rows.rs`), hash for hash with the node that applied the deletion.

use roost_core::command::{IssuePatch, NewComment};
use roost_core::Command;

use super::tests::{company_entry, system_entry};
use super::StateMachineStore;
use openraft::storage::RaftStateMachine;

/// A comment deleted by its author is still deleted after a restart: the state loaded from the
/// file (`rows.rs` reads the mark from the comment's row) digests as the node held it.
#[tokio::test]
async fn a_deleted_comment_is_still_deleted_after_a_restart() {
    let comment = |index: u64, id: &str| {
        system_entry(
            index,
            Command::AddComment {
                issue_id: "i1".into(),
                comment: NewComment {
                    id: id.into(),
                    body: format!("comment {id}"),
                },
            },
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let before = {
        let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
        sm.apply([
            company_entry(1, "c1", "A"),
            system_entry(
                2,
                Command::CreateIssue {
                    id: "i1".into(),
                    company_id: "c1".into(),
                    fields: IssuePatch {
                        title: Some("a thread".into()),
                        ..Default::default()
                    },
                },
            ),
            comment(3, "m1"),
            comment(4, "m2"),
            system_entry(
                5,
                Command::DeleteComment {
                    issue_id: "i1".into(),
                    comment_id: "m1".into(),
                },
            ),
        ])
        .await
        .expect("apply");
        assert!(reader.read(|s| s.comments["m1"].deleted));
        reader.read(|s| s.hash())
    };
    let (_sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(reader.applied_index(), 5);
    assert_eq!(
        reader.read(|s| (s.comments["m1"].deleted, s.comments["m2"].deleted)),
        (true, false)
    );
    assert_eq!(reader.read(|s| s.hash()), before);
}
