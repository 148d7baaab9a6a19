//! For benchmarks and tools only (`roost-bench memory`): a `state.db` written and read outside
//! Raft, through the same code a node uses. Rows go through `RowBatch` (`row_batch.rs`), so the
//! memory search index (`search.rs`) is written with them; searches and the state load are the
//! node's own (`search::search`, `rows::load_state`). A server never uses this.

use std::path::{Path, PathBuf};

use roost_core::state::State;
use roost_core::views::MemorySearchHit;
use roost_core::Change;
use sqlx::Connection;

use crate::error::Error;
use crate::row_batch::RowBatch;
use crate::search::SearchQuery;

/// A fresh or existing `state.db` with the node's schema, its write connection and readers.
pub struct BulkDb {
    path: PathBuf,
    writer: rusqlite::Connection,
    pool: sqlx::SqlitePool,
}

impl BulkDb {
    /// Opens `path` (created if missing) with the node's pragmas, schema and search index.
    pub async fn open(path: &Path, readers: u32) -> Result<BulkDb, Error> {
        let writer = crate::db::open_write_connection(path)?;
        writer
            .execute_batch(crate::rows::SCHEMA)
            .map_err(Error::write("create schema"))?;
        crate::search::ensure(&writer)?;
        let pool = crate::db::open_readers(path, readers.max(1)).await?;
        Ok(BulkDb {
            path: path.to_path_buf(),
            writer,
            pool,
        })
    }

    /// Writes `changes` in one transaction, as one apply writes its rows.
    pub fn write(&self, changes: &[Change]) -> Result<(), Error> {
        let mut batch = RowBatch::default();
        for c in changes {
            batch.add(c)?;
        }
        let tx = self
            .writer
            .unchecked_transaction()
            .map_err(Error::write("begin"))?;
        batch.write(&tx)?;
        tx.commit().map_err(Error::write("commit"))
    }

    /// Checkpoints the WAL into `state.db` and truncates it, so the file's size is the data's.
    pub fn checkpoint(&self) -> Result<(), Error> {
        self.writer
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(Error::write("checkpoint"))
    }

    /// Bytes of `state.db` (without its WAL).
    pub fn file_bytes(&self) -> Result<u64, Error> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| Error::corrupt("state.db size", e))
    }

    /// Bytes of the pages of the tables and indexes whose names start with `prefix`, from
    /// SQLite's `dbstat` table; `None` when the linked SQLite lacks it.
    pub fn bytes_of_tables(&self, prefix: &str) -> Option<u64> {
        self.writer
            .query_row(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE ?1 || '%'",
                [prefix],
                |r| r.get::<_, i64>(0),
            )
            .ok()
            .map(|n| n as u64)
    }

    /// The node's search (`search.rs`).
    pub async fn search(
        &self,
        company_id: &str,
        agent_id: &str,
        assigned_issue_ids: &[String],
        query: &SearchQuery,
        limit: u32,
    ) -> Result<Vec<MemorySearchHit>, Error> {
        crate::search::search(
            &self.pool,
            company_id,
            agent_id,
            assigned_issue_ids,
            query,
            limit,
        )
        .await
    }

    /// The in-memory state as a node loads it when it opens `state.db` (`rows.rs`).
    pub async fn load_state(&self) -> Result<State, Error> {
        let mut conn = self.pool.acquire().await.map_err(Error::sql("acquire"))?;
        // One read: a tool may load a file that is being written.
        let mut tx = conn.begin().await.map_err(Error::sql("begin the load"))?;
        let state = crate::rows::load_state(&mut tx, None).await?;
        tx.commit().await.map_err(Error::sql("end the load"))?;
        Ok(state)
    }
}
