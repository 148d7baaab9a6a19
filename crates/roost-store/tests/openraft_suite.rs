//! openraft's own storage conformance suite, run against the SQLite log and state machine.

use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageError;
use roost_store::{LogStore, StateMachineStore, TypeConfig};

struct SqliteBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for SqliteBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let (log, sm, _reader) = roost_store::open(dir.path(), 1).await.expect("open store");
        Ok((dir, log, sm))
    }
}

#[test]
fn sqlite_store_passes_openraft_suite() -> anyhow::Result<()> {
    Suite::test_all(SqliteBuilder)
        .map_err(|e| anyhow::anyhow!("openraft storage suite failed: {e}"))
}
