//! Attachments and uploads in progress across a restart: what a reopened `state.db` loads
//! (the attachments' summaries, an unfinished upload's chunks) is the state that applied them,
//! hash for hash, and the upload goes on from where it was.

use std::time::Duration;

use base64::Engine;
use openraft::storage::RaftStateMachine;
use openraft::Entry;
use roost_core::attachment::AttachmentUpload;
use roost_core::command::IssuePatch;
use roost_core::{Command, IssueStatus};
use sha2::{Digest, Sha256};

use super::tests::{company_entry, system_entry};
use super::StateMachineStore;
use crate::types::TypeConfig;

fn chunk(index: u64, attachment: &str, n: u32, bytes: &[u8]) -> Entry<TypeConfig> {
    system_entry(
        index,
        Command::PutAttachmentChunk {
            issue_id: "i1".into(),
            attachment_id: attachment.into(),
            index: n,
            content: base64::engine::general_purpose::STANDARD.encode(bytes),
        },
    )
}

fn finish(index: u64, attachment: &str, parts: &[&[u8]]) -> Entry<TypeConfig> {
    let whole = parts.concat();
    system_entry(
        index,
        Command::AddIssueAttachment {
            issue_id: "i1".into(),
            attachment_id: attachment.into(),
            work_product_id: format!("wp-{attachment}"),
            upload: AttachmentUpload {
                original_filename: Some(format!("{attachment}.txt")),
                content_type: "text/plain".into(),
                issue_comment_id: None,
                chunks: parts.len() as u32,
                byte_size: whole.len() as u64,
                sha256: hex::encode(Sha256::digest(&whole)),
            },
        },
    )
}

async fn apply_all(sm: &mut StateMachineStore, entries: Vec<Entry<TypeConfig>>) {
    for applied in sm.apply(entries).await.expect("apply") {
        if let Some(Err(e)) = &applied.result {
            panic!("entry {} was refused: {e}", applied.index);
        }
    }
}

#[tokio::test]
async fn attachments_and_an_unfinished_upload_read_back_the_same_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("open");
    let (first, second): (&[u8], &[u8]) = (b"a finished file, ", b"in two chunks");
    let issue = system_entry(
        2,
        Command::CreateIssue {
            id: "i1".into(),
            company_id: "c1".into(),
            fields: IssuePatch {
                title: Some("the report".into()),
                status: Some(IssueStatus::Todo),
                ..Default::default()
            },
        },
    );
    let half: &[u8] = b"the first part of an upload";
    apply_all(
        &mut sm,
        vec![
            company_entry(1, "c1", "A"),
            issue,
            chunk(3, "done", 0, first),
            chunk(4, "done", 1, second),
            finish(5, "done", &[first, second]),
            chunk(6, "half", 0, half),
        ],
    )
    .await;
    assert!(reader.wait_applied(6, Duration::from_secs(10)).await);
    let counts = |r: &crate::StateReader| {
        r.read(|s| (s.attachments.attachments.len(), s.attachments.uploads.len()))
    };
    assert_eq!(
        counts(&reader),
        (1, 1),
        "one attachment, one upload in progress"
    );
    let before = reader.state_hash();
    drop((sm, reader));

    let (mut sm, reader) = StateMachineStore::open(dir.path()).await.expect("reopen");
    assert_eq!(
        reader.state_hash(),
        before,
        "the reopened state hashes as the applied one"
    );
    assert_eq!(counts(&reader), (1, 1));
    // The upload goes on from its first chunk, and its file is whole.
    let rest: &[u8] = b", and its end";
    apply_all(
        &mut sm,
        vec![chunk(7, "half", 1, rest), finish(8, "half", &[half, rest])],
    )
    .await;
    assert!(reader.wait_applied(8, Duration::from_secs(10)).await);
    assert_eq!(counts(&reader), (2, 0));
}
