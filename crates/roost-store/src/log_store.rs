//! The Raft log and vote in `raft-log.db`. Appends are committed (fsynced, `synchronous=FULL`)
//! before openraft is told they are durable.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogId, RaftLogReader, StorageError, Vote};
use sqlx::sqlite::SqlitePool;
use sqlx::Row;

use crate::db;
use crate::error::{log_err, read_log_err, vote_err, Error};
use crate::types::TypeConfig;

type NodeId = u64;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log (idx INTEGER PRIMARY KEY, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

#[derive(Clone)]
pub struct LogStore {
    pool: SqlitePool,
}

impl LogStore {
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let pool = db::open_writer(path).await?;
        sqlx::raw_sql(SCHEMA)
            .execute(&pool)
            .await
            .map_err(Error::sql("create log schema"))?;
        Ok(LogStore { pool })
    }

    async fn meta<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        let row = sqlx::query("SELECT value FROM meta WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(Error::sql("read log meta"))?;
        match row {
            None => Ok(None),
            Some(row) => {
                let text: String = row.get(0);
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| Error::corrupt("log meta", e))
            }
        }
    }

    async fn set_meta<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<(), Error> {
        let text = serde_json::to_string(value).map_err(|e| Error::corrupt("log meta", e))?;
        sqlx::query("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(text)
            .execute(&self.pool)
            .await
            .map_err(Error::sql("write log meta"))?;
        Ok(())
    }

    async fn read_range(
        &self,
        start: u64,
        end_exclusive: Option<u64>,
    ) -> Result<Vec<Entry<TypeConfig>>, Error> {
        let end = end_exclusive.map(|e| e as i64).unwrap_or(i64::MAX);
        let rows = sqlx::query("SELECT entry FROM log WHERE idx >= ? AND idx < ? ORDER BY idx")
            .bind(start as i64)
            .bind(end)
            .fetch_all(&self.pool)
            .await
            .map_err(Error::sql("read log"))?;
        rows.iter()
            .map(|row| {
                let text: &str = row.get(0);
                serde_json::from_str(text).map_err(|e| Error::corrupt("log entry", e))
            })
            .collect()
    }

    async fn last_entry(&self) -> Result<Option<Entry<TypeConfig>>, Error> {
        let row = sqlx::query("SELECT entry FROM log ORDER BY idx DESC LIMIT 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(Error::sql("read last log entry"))?;
        row.map(|row| {
            let text: &str = row.get(0);
            serde_json::from_str(text).map_err(|e| Error::corrupt("log entry", e))
        })
        .transpose()
    }

    async fn append_entries(&self, entries: Vec<Entry<TypeConfig>>) -> Result<(), Error> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(Error::sql("begin append"))?;
        for entry in &entries {
            let text = serde_json::to_string(entry).map_err(|e| Error::corrupt("log entry", e))?;
            sqlx::query("INSERT OR REPLACE INTO log (idx, entry) VALUES (?, ?)")
                .bind(entry.get_log_id().index as i64)
                .bind(text)
                .execute(&mut *tx)
                .await
                .map_err(Error::sql("append"))?;
        }
        tx.commit().await.map_err(Error::sql("commit append"))
    }
}

fn range_to_bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => Some(e.saturating_add(1)),
        Bound::Excluded(e) => Some(*e),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let (start, end) = range_to_bounds(&range);
        self.read_range(start, end).await.map_err(read_log_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last_purged: Option<LogId<NodeId>> =
            self.meta("last_purged").await.map_err(read_log_err)?;
        let last = self
            .last_entry()
            .await
            .map_err(read_log_err)?
            .map(|e| *e.get_log_id());
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.set_meta("vote", vote).await.map_err(vote_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.meta("vote").await.map_err(vote_err)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.set_meta("committed", &committed)
            .await
            .map_err(log_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self
            .meta::<Option<LogId<NodeId>>>("committed")
            .await
            .map_err(read_log_err)?
            .flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let result = self.append_entries(entries.into_iter().collect()).await;
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(log_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        sqlx::query("DELETE FROM log WHERE idx >= ?")
            .bind(log_id.index as i64)
            .execute(&self.pool)
            .await
            .map_err(Error::sql("truncate"))
            .map_err(log_err)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let text =
            serde_json::to_string(&log_id).map_err(|e| log_err(Error::corrupt("log id", e)))?;
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(Error::sql("begin purge"))
            .map_err(log_err)?;
        sqlx::query("INSERT INTO meta (key, value) VALUES ('last_purged', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(Error::sql("record purge"))
            .map_err(log_err)?;
        sqlx::query("DELETE FROM log WHERE idx <= ?")
            .bind(log_id.index as i64)
            .execute(&mut *tx)
            .await
            .map_err(Error::sql("purge"))
            .map_err(log_err)?;
        tx.commit()
            .await
            .map_err(Error::sql("commit purge"))
            .map_err(log_err)
    }
}
