//! A data directory belongs to one node: its Raft log and vote are that node's identity.

use roost_store::Error;

/// Regression: a node started with another node's data directory (a config copied from node 1
/// to node 2 with its `data_dir` left unchanged) opened it and served with that node's vote
/// and log, so one Raft identity could vote twice in a term.
#[tokio::test]
async fn another_nodes_data_directory_is_refused_and_left_unchanged() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    drop(roost_store::open(dir.path(), 1).await?);
    let files = ["raft-log.db", "raft-log.db-wal", "state.db", "state.db-wal"]
        .map(|name| dir.path().join(name));
    let read_all = || {
        files
            .iter()
            .map(|f| std::fs::read(f).ok())
            .collect::<Vec<_>>()
    };
    let before = read_all();
    match roost_store::open(dir.path(), 2).await {
        Err(e @ Error::OtherNode { .. }) => {
            let said = e.to_string();
            assert!(
                said.contains("node 1's Raft log") && said.contains("node_id = 1"),
                "{said}"
            );
        }
        Err(other) => anyhow::bail!("refused for another reason: {other}"),
        Ok(_) => anyhow::bail!("node 2 opened node 1's data directory"),
    }
    assert!(
        read_all() == before,
        "the refusal wrote to the log or the state"
    );
    drop(roost_store::open(dir.path(), 1).await?);
    Ok(())
}

/// A log written before logs named their node is taken by the first node to open it.
#[tokio::test]
async fn a_log_without_a_node_id_is_taken_by_the_node_that_opens_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    drop(roost_store::open(dir.path(), 3).await?);
    rusqlite::Connection::open(dir.path().join("raft-log.db"))?
        .execute("DELETE FROM meta WHERE key = 'node_id'", [])?;
    drop(roost_store::open(dir.path(), 2).await?);
    assert!(matches!(
        roost_store::open(dir.path(), 3).await,
        Err(Error::OtherNode {
            found: 2,
            configured: 3,
            ..
        })
    ));
    Ok(())
}
