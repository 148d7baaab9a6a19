//! The rows one apply writes, gathered per table and written with a few multi-row statements
//! instead of one statement per change (a batch of 64 checkouts used to make several hundred),
//! each prepared once and kept in the write connection's statement cache.
//!
//! Only the last write of a row survives (a run assigned, started and finished in one apply is
//! written once), which is what the row-at-a-time writes left in the file too. Tables have no
//! foreign keys, so the order between tables does not matter.

use std::collections::{BTreeMap, BTreeSet};

use roost_core::home::HomeChange;
use roost_core::memory::MemoryChange;
use roost_core::{Change, Comment, CommentTombstone};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::OptionalExtension;

use crate::error::Error;
use crate::search::{self, SearchRow};

/// Statement sizes, largest first: a fixed few, so the prepared-statement cache holds them all.
const ROWS_PER_STATEMENT: [usize; 4] = [64, 16, 4, 1];

#[derive(Clone, Debug)]
enum Cell {
    Text(String),
    MaybeText(Option<String>),
    Int(i64),
    Blob(Vec<u8>),
}

impl rusqlite::ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Cell::Text(s) | Cell::MaybeText(Some(s)) => ValueRef::Text(s.as_bytes()),
            Cell::MaybeText(None) => ValueRef::Null,
            Cell::Int(n) => ValueRef::Integer(*n),
            Cell::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// What a second write of the same key does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnConflict {
    /// The later write wins: an upsert on the first column, the table's primary key. Unlike
    /// `INSERT OR REPLACE` (a delete, then an insert into the table and its key index), it
    /// rewrites the row in place and leaves the key index alone.
    Replace,
    /// The first write wins, a row already in the file too (`INSERT OR IGNORE`).
    Ignore,
    /// Appended rows with unique keys (`INSERT`): a duplicate is an error, as before.
    Fail,
}

struct Table {
    name: &'static str,
    columns: &'static str,
    width: usize,
    on_conflict: OnConflict,
    /// Replace/Ignore rows by key; Fail rows keyed by their position.
    keyed: BTreeMap<String, Vec<Cell>>,
    appended: Vec<Vec<Cell>>,
}

impl Table {
    fn insert(&mut self, key: String, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.width);
        match self.on_conflict {
            OnConflict::Replace => {
                self.keyed.insert(key, row);
            }
            OnConflict::Ignore => {
                self.keyed.entry(key).or_insert(row);
            }
            OnConflict::Fail => self.appended.push(row),
        }
    }

    fn rows(&self) -> Vec<&Vec<Cell>> {
        self.keyed.values().chain(self.appended.iter()).collect()
    }

    /// The statement writing `rows` rows at once.
    fn statement(&self, rows: usize) -> String {
        let one = format!("({})", vec!["?"; self.width].join(", "));
        let values = vec![one; rows].join(", ");
        let (name, columns) = (self.name, self.columns);
        match self.on_conflict {
            OnConflict::Replace => {
                let mut names = columns.split(',').map(str::trim);
                let key = names.next().unwrap_or("id");
                let updates: Vec<String> = names.map(|c| format!("{c} = excluded.{c}")).collect();
                format!(
                    "INSERT INTO {name} ({columns}) VALUES {values} ON CONFLICT({key}) DO UPDATE SET {}",
                    updates.join(", ")
                )
            }
            OnConflict::Ignore => {
                format!("INSERT OR IGNORE INTO {name} ({columns}) VALUES {values}")
            }
            OnConflict::Fail => format!("INSERT INTO {name} ({columns}) VALUES {values}"),
        }
    }
}

/// The rows of one apply, ready to be written in one go.
#[derive(Default)]
pub(crate) struct RowBatch {
    tables: BTreeMap<&'static str, Table>,
    /// Idempotency keys whose last change was `Forgotten`.
    forgotten: BTreeSet<String>,
    /// Rows whose last change dropped them, by table (memory entries and document versions).
    dropped: BTreeMap<&'static str, BTreeSet<String>>,
    /// Deleted issues, whose comments are deleted with them.
    deleted_issues: BTreeSet<String>,
    /// Deleted issue documents, whose revisions are deleted with them.
    deleted_documents: BTreeSet<String>,
    /// Removed attachments and given-up uploads, whose chunks are deleted with them.
    deleted_attachments: BTreeSet<String>,
    /// Comments deleted by their authors, by id: their rows are emptied after the tables are
    /// written, so a comment written and deleted in one batch is emptied too.
    tombstones: BTreeMap<String, CommentTombstone>,
    /// The memory search index's texts by key (`search.rs`): `None` drops one.
    search: BTreeMap<String, Option<SearchRow>>,
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::corrupt("entity", e))
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_string())
}

impl RowBatch {
    fn table(
        &mut self,
        name: &'static str,
        columns: &'static str,
        on_conflict: OnConflict,
    ) -> &mut Table {
        self.tables.entry(name).or_insert_with(|| Table {
            name,
            columns,
            width: columns.split(',').count(),
            on_conflict,
            keyed: BTreeMap::new(),
            appended: Vec::new(),
        })
    }

    fn put(
        &mut self,
        name: &'static str,
        columns: &'static str,
        on_conflict: OnConflict,
        row: Vec<Cell>,
    ) {
        let key = match row.first() {
            Some(Cell::Text(k)) => k.clone(),
            _ => String::new(),
        };
        self.table(name, columns, on_conflict).insert(key, row);
    }

    /// A row dropped: deleted, unless a later change of this batch writes it again.
    fn drop_row(&mut self, name: &'static str, key: &str) {
        if let Some(t) = self.tables.get_mut(name) {
            t.keyed.remove(key);
        }
        self.dropped
            .entry(name)
            .or_default()
            .insert(key.to_string());
    }

    /// An upsert of a row a change of this batch may have dropped before.
    fn put_kept(&mut self, name: &'static str, columns: &'static str, row: Vec<Cell>) {
        if let (Some(set), Some(Cell::Text(key))) = (self.dropped.get_mut(name), row.first()) {
            set.remove(key);
        }
        self.put(name, columns, OnConflict::Replace, row);
    }

    /// Issue attachments, and the chunks of their bytes (`roost_core::attachment`).
    fn add_attachment(
        &mut self,
        change: &roost_core::attachment::AttachmentChange,
    ) -> Result<(), Error> {
        use roost_core::attachment::AttachmentChange as A;
        match change {
            A::Chunk { chunk, content } => self.put_kept(
                "attachment_chunks",
                "key, attachment_id, company_id, data, bytes",
                vec![
                    Cell::Text(chunk.key()),
                    text(&chunk.attachment_id),
                    text(&chunk.company_id),
                    Cell::Text(json(chunk)?),
                    Cell::Blob(content.clone()),
                ],
            ),
            A::Added(a) => self.put_kept(
                "issue_attachments",
                "id, company_id, issue_id, data",
                vec![
                    text(&a.id),
                    text(&a.company_id),
                    text(&a.issue_id),
                    Cell::Text(json(a)?),
                ],
            ),
            A::Removed(id) => {
                self.drop_row("issue_attachments", id);
                // Its chunks written earlier in this batch go too: the batch's deletes run
                // before its inserts.
                if let Some(t) = self.tables.get_mut("attachment_chunks") {
                    t.keyed
                        .retain(|_, row| !matches!(row.get(1), Some(Cell::Text(a)) if a == id));
                }
                self.deleted_attachments.insert(id.clone());
            }
        }
        Ok(())
    }

    fn add_home(&mut self, change: &HomeChange) -> Result<(), Error> {
        match change {
            HomeChange::Home(h) => self.put(
                "agent_homes",
                "agent_id, company_id, data",
                OnConflict::Replace,
                vec![text(&h.agent_id), text(&h.company_id), Cell::Text(json(h)?)],
            ),
            HomeChange::Chunk(c, bytes) => self.put_kept(
                "home_chunks",
                "key, company_id, data, bytes",
                vec![
                    Cell::Text(c.key()),
                    text(&c.company_id),
                    Cell::Text(json(c)?),
                    Cell::Blob(bytes.0.clone()),
                ],
            ),
            HomeChange::ChunkDropped(key) => self.drop_row("home_chunks", key),
        }
        Ok(())
    }

    /// Issue documents and their revisions (`roost_core::document`).
    fn add_document(&mut self, change: &roost_core::document::DocumentChange) -> Result<(), Error> {
        use roost_core::document::DocumentChange as D;
        match change {
            D::Document(d) => self.put_kept(
                "issue_documents",
                "id, company_id, issue_id, data",
                vec![
                    text(&d.id),
                    text(&d.company_id),
                    text(&d.issue_id),
                    Cell::Text(json(d)?),
                ],
            ),
            D::Revision(r) => self.put(
                "document_revisions",
                "id, company_id, document_id, revision_number, data",
                OnConflict::Ignore,
                vec![
                    text(&r.id),
                    text(&r.company_id),
                    text(&r.document_id),
                    Cell::Int(i64::try_from(r.revision_number).unwrap_or(i64::MAX)),
                    Cell::Text(json(r)?),
                ],
            ),
            D::Deleted(id) => {
                self.drop_row("issue_documents", id);
                // Its revisions written earlier in this batch go too: the batch's deletes
                // run before its inserts.
                if let Some(t) = self.tables.get_mut("document_revisions") {
                    t.keyed
                        .retain(|_, row| !matches!(row.get(2), Some(Cell::Text(d)) if d == id));
                }
                self.deleted_documents.insert(id.clone());
            }
        }
        Ok(())
    }

    /// Issue-thread interactions (`roost_core::interaction`): every one's row, pending or not.
    fn add_interaction(
        &mut self,
        change: &roost_core::interaction::InteractionChange,
    ) -> Result<(), Error> {
        use roost_core::interaction::InteractionChange as I;
        match change {
            I::Interaction(i) => self.put_kept(
                "issue_interactions",
                "id, company_id, issue_id, idempotency_key, status, created_at, data",
                vec![
                    text(&i.id),
                    text(&i.company_id),
                    text(&i.issue_id),
                    Cell::MaybeText(i.idempotency_key.clone()),
                    text(i.status.as_str()),
                    Cell::Int(i.created_at.millis()),
                    Cell::Text(json(i)?),
                ],
            ),
            I::Deleted(id) => self.drop_row("issue_interactions", id),
        }
        Ok(())
    }

    /// Routines, triggers and runs (`roost_core::routine`).
    fn add_routine(&mut self, change: &roost_core::routine::RoutineChange) -> Result<(), Error> {
        use roost_core::routine::RoutineChange as R;
        match change {
            R::Routine(r) => self.put_kept(
                "routines",
                "id, company_id, data",
                vec![text(&r.id), text(&r.company_id), Cell::Text(json(r)?)],
            ),
            R::Trigger(t) => self.put_kept(
                "routine_triggers",
                "id, company_id, routine_id, data",
                vec![
                    text(&t.id),
                    text(&t.company_id),
                    text(&t.routine_id),
                    Cell::Text(json(t)?),
                ],
            ),
            R::TriggerDeleted(id) => self.drop_row("routine_triggers", id),
            R::Run(r) => self.put_kept(
                "routine_runs",
                "id, company_id, routine_id, data",
                vec![
                    text(&r.id),
                    text(&r.company_id),
                    text(&r.routine_id),
                    Cell::Text(json(r)?),
                ],
            ),
            R::RunDropped(id) => self.drop_row("routine_runs", id),
        }
        Ok(())
    }

    fn add_memory(&mut self, change: &MemoryChange) -> Result<(), Error> {
        self.index_memory(change);
        match change {
            MemoryChange::Entry(e) => self.put_kept(
                "memory_entries",
                "id, company_id, agent_id, data",
                vec![
                    text(&e.id),
                    text(&e.company_id),
                    text(&e.agent_id),
                    Cell::Text(json(e)?),
                ],
            ),
            MemoryChange::EntryDropped(id) => self.drop_row("memory_entries", id),
            MemoryChange::Document(d) => self.put_kept(
                "memory_documents",
                "key, company_id, data",
                vec![
                    Cell::Text(d.key()),
                    text(&d.company_id),
                    Cell::Text(json(d)?),
                ],
            ),
            MemoryChange::DocumentDropped(key) => self.drop_row("memory_documents", key),
            MemoryChange::Live(l) => self.put_kept(
                "memory_live",
                "agent_id, company_id, data",
                vec![text(&l.agent_id), text(&l.company_id), Cell::Text(json(l)?)],
            ),
            MemoryChange::CompanyLive(l) => self.put_kept(
                "memory_company_live",
                "company_id, data",
                vec![text(&l.company_id), Cell::Text(json(l)?)],
            ),
        }
        Ok(())
    }

    /// What a memory change does to the search index. A document's versions only grow and
    /// only the oldest are dropped, so the last version written is the current one.
    fn index_memory(&mut self, change: &MemoryChange) {
        match change {
            MemoryChange::Entry(e) => {
                if let Some(row) = SearchRow::entry(e) {
                    self.search.insert(row.key.clone(), Some(row));
                }
            }
            MemoryChange::EntryDropped(id) => {
                self.search.insert(SearchRow::entry_key(id), None);
            }
            MemoryChange::Document(d) => {
                if let Some(row) = SearchRow::document(d) {
                    self.search.insert(row.key.clone(), Some(row));
                }
            }
            MemoryChange::DocumentDropped(_)
            | MemoryChange::Live(_)
            | MemoryChange::CompanyLive(_) => {}
        }
    }

    /// Adds one change; the last change of a row wins.
    pub(crate) fn add(&mut self, change: &Change) -> Result<(), Error> {
        use OnConflict::*;
        match change {
            Change::Company(c) => self.put(
                "companies",
                "id, data",
                Replace,
                vec![text(&c.id), Cell::Text(json(c)?)],
            ),
            Change::Agent(a) => self.put(
                "agents",
                "id, company_id, data",
                Replace,
                vec![text(&a.id), text(&a.company_id), Cell::Text(json(a)?)],
            ),
            Change::Issue(i) => self.put(
                "issues",
                "id, company_id, identifier, status, data",
                Replace,
                vec![
                    text(&i.id),
                    text(&i.company_id),
                    text(&i.identifier),
                    text(i.status.as_str()),
                    Cell::Text(json(i)?),
                ],
            ),
            Change::IssueDeleted(id) => {
                self.drop_row("issues", id);
                // Its comments' rows go, so a deletion of one earlier in this batch has nothing
                // left to empty.
                self.tombstones.retain(|_, t| t.issue_id != *id);
                // Comments of the issue written earlier in this batch go too.
                if let Some(t) = self.tables.get_mut("comments") {
                    t.appended
                        .retain(|row| !matches!(row.get(2), Some(Cell::Text(i)) if i == id));
                }
                // So do its interactions' rows (answered ones are not in memory to name).
                if let Some(t) = self.tables.get_mut("issue_interactions") {
                    t.keyed
                        .retain(|_, row| !matches!(row.get(2), Some(Cell::Text(i)) if i == id));
                }
                self.search.retain(|_, row| {
                    !matches!(row, Some(r) if r.kind == roost_core::views::MemoryHitKind::Comment
                        && r.issue_id.as_ref() == Some(id))
                });
                self.deleted_issues.insert(id.clone());
            }
            Change::Run(r) => self.put(
                "runs",
                "id, company_id, agent_id, status, data",
                Replace,
                vec![
                    text(&r.id),
                    text(&r.company_id),
                    text(&r.agent_id),
                    text(r.status.as_str()),
                    Cell::Text(json(r)?),
                ],
            ),
            Change::Credential(c) => self.put(
                "credentials",
                "id, data",
                Replace,
                vec![text(&c.id), Cell::Text(json(c)?)],
            ),
            Change::Comment(c) => {
                if let Some(row) = SearchRow::comment(c) {
                    self.search.insert(row.key.clone(), Some(row));
                }
                self.put(
                    "comments",
                    "id, company_id, issue_id, data",
                    Fail,
                    vec![
                        text(&c.id),
                        text(&c.company_id),
                        text(&c.issue_id),
                        Cell::Text(json(c)?),
                    ],
                )
            }
            Change::CommentTombstoned(t) => {
                self.search.insert(search::comment_key(&t.comment_id), None);
                self.tombstones.insert(t.comment_id.clone(), t.clone());
            }
            Change::Activity(a) => self.put(
                "activity",
                "seq, log_index, company_id, at, actor_type, actor_id, credential_id, run_id, \
                 action, entity_type, entity_id, details, prev_hash, hash",
                Fail,
                vec![
                    Cell::Int(a.seq as i64),
                    Cell::Int(a.log_index as i64),
                    Cell::MaybeText(a.company_id.clone()),
                    Cell::Int(a.at.millis()),
                    text(&a.actor_type),
                    text(&a.actor_id),
                    Cell::MaybeText(a.credential_id.clone()),
                    Cell::MaybeText(a.run_id.clone()),
                    text(&a.action),
                    text(&a.entity_type),
                    text(&a.entity_id),
                    Cell::Text(json(&a.details)?),
                    text(&a.prev_hash),
                    text(&a.hash),
                ],
            ),
            Change::Remembered(r) => {
                self.forgotten.remove(&r.key);
                self.put(
                    "idempotency",
                    "key, at, data",
                    Replace,
                    vec![text(&r.key), Cell::Int(r.at.millis()), Cell::Text(json(r)?)],
                );
            }
            Change::Forgotten(key) => {
                if let Some(t) = self.tables.get_mut("idempotency") {
                    t.keyed.remove(key);
                }
                self.forgotten.insert(key.clone());
            }
            Change::Wake(w) => self.put(
                "wakes",
                "id, company_id, agent_id, status, data",
                Replace,
                vec![
                    text(&w.id),
                    text(&w.company_id),
                    text(&w.agent_id),
                    text(w.status.as_str()),
                    Cell::Text(json(w)?),
                ],
            ),
            Change::Worker(w) => self.put(
                "workers",
                "id, data",
                Replace,
                vec![text(&w.id), Cell::Text(json(w)?)],
            ),
            Change::BudgetPolicy(b) => self.put(
                "budget_policies",
                "id, company_id, data",
                Replace,
                vec![text(&b.id), text(&b.company_id), Cell::Text(json(b)?)],
            ),
            Change::CostEvent(e) => self.put(
                "cost_events",
                "id, company_id, agent_id, data",
                Ignore,
                vec![
                    text(&e.id),
                    text(&e.company_id),
                    text(&e.agent_id),
                    Cell::Text(json(e)?),
                ],
            ),
            Change::BudgetIncident(i) => self.put(
                "budget_incidents",
                "id, company_id, data",
                Replace,
                vec![text(&i.id), text(&i.company_id), Cell::Text(json(i)?)],
            ),
            Change::Memory(m) => self.add_memory(m)?,
            Change::Routine(r) => self.add_routine(r)?,
            Change::Home(h) => self.add_home(h)?,
            Change::Goal(g) => self.put_kept(
                "goals",
                "id, company_id, data",
                vec![text(&g.id), text(&g.company_id), Cell::Text(json(g)?)],
            ),
            Change::GoalDeleted(id) => self.drop_row("goals", id),
            Change::Project(p) => self.put_kept(
                "projects",
                "id, company_id, data",
                vec![text(&p.id), text(&p.company_id), Cell::Text(json(p)?)],
            ),
            Change::ProjectDeleted(id) => self.drop_row("projects", id),
            Change::Skill(k) => self.put_kept(
                "skills",
                "id, company_id, data",
                vec![text(&k.id), text(&k.company_id), Cell::Text(json(k)?)],
            ),
            Change::SkillDeleted(id) => self.drop_row("skills", id),
            Change::Label(l) => self.put_kept(
                "labels",
                "id, company_id, data",
                vec![text(&l.id), text(&l.company_id), Cell::Text(json(l)?)],
            ),
            Change::LabelDeleted(id) => self.drop_row("labels", id),
            Change::Document(d) => self.add_document(d)?,
            Change::Attachment(a) => self.add_attachment(a)?,
            Change::WorkProduct(roost_core::work_product::WorkProductChange::Put(w)) => self
                .put_kept(
                    "work_products",
                    "id, company_id, issue_id, data",
                    vec![
                        text(&w.id),
                        text(&w.company_id),
                        text(&w.issue_id),
                        Cell::Text(json(w)?),
                    ],
                ),
            Change::WorkProduct(roost_core::work_product::WorkProductChange::Removed(id)) => {
                self.drop_row("work_products", id)
            }
            Change::Interaction(i) => self.add_interaction(i)?,
            Change::AgentRevision(r) => self.put(
                "agent_config_revisions",
                "id, company_id, agent_id, seq, data",
                OnConflict::Ignore,
                vec![
                    text(&r.id),
                    text(&r.company_id),
                    text(&r.agent_id),
                    Cell::Int(i64::try_from(r.seq).unwrap_or(i64::MAX)),
                    Cell::Text(json(r)?),
                ],
            ),
            Change::Approval(a) => self.put(
                "approvals",
                "id, company_id, data",
                Replace,
                vec![text(&a.id), text(&a.company_id), Cell::Text(json(a)?)],
            ),
        }
        Ok(())
    }

    /// Writes every row on `conn` (inside the caller's transaction) and empties the batch.
    pub(crate) fn write(&mut self, conn: &rusqlite::Connection) -> Result<(), Error> {
        let forgotten: Vec<String> = std::mem::take(&mut self.forgotten).into_iter().collect();
        for keys in forgotten.chunks(ROWS_PER_STATEMENT[0]) {
            let marks = vec!["?"; keys.len()].join(", ");
            let sql = format!("DELETE FROM idempotency WHERE key IN ({marks})");
            conn.prepare_cached(&sql)
                .and_then(|mut statement| {
                    statement.execute(rusqlite::params_from_iter(keys.iter()))
                })
                .map_err(Error::write("write change"))?;
        }
        let deleted: Vec<String> = std::mem::take(&mut self.deleted_issues)
            .into_iter()
            .collect();
        for ids in deleted.chunks(ROWS_PER_STATEMENT[0]) {
            let marks = vec!["?"; ids.len()].join(", ");
            for table in ["comments", "issue_interactions"] {
                let sql = format!("DELETE FROM {table} WHERE issue_id IN ({marks})");
                conn.prepare_cached(&sql)
                    .and_then(|mut statement| {
                        statement.execute(rusqlite::params_from_iter(ids.iter()))
                    })
                    .map_err(Error::write("write change"))?;
            }
        }
        for id in &deleted {
            search::remove_issue_comments(conn, id)?;
        }
        let documents: Vec<String> = std::mem::take(&mut self.deleted_documents)
            .into_iter()
            .collect();
        for ids in documents.chunks(ROWS_PER_STATEMENT[0]) {
            let marks = vec!["?"; ids.len()].join(", ");
            let sql = format!("DELETE FROM document_revisions WHERE document_id IN ({marks})");
            conn.prepare_cached(&sql)
                .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(ids.iter())))
                .map_err(Error::write("write change"))?;
        }
        let attachments: Vec<String> = std::mem::take(&mut self.deleted_attachments)
            .into_iter()
            .collect();
        for ids in attachments.chunks(ROWS_PER_STATEMENT[0]) {
            let marks = vec!["?"; ids.len()].join(", ");
            let sql = format!("DELETE FROM attachment_chunks WHERE attachment_id IN ({marks})");
            conn.prepare_cached(&sql)
                .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(ids.iter())))
                .map_err(Error::write("write change"))?;
        }
        for (key, row) in std::mem::take(&mut self.search) {
            match row {
                Some(row) => search::put(conn, &row)?,
                None => search::remove(conn, &key)?,
            }
        }
        for (name, keys) in std::mem::take(&mut self.dropped) {
            let key_column = if name == "memory_documents" || name == "home_chunks" {
                "key"
            } else {
                "id"
            };
            let keys: Vec<String> = keys.into_iter().collect();
            for chunk in keys.chunks(ROWS_PER_STATEMENT[0]) {
                let marks = vec!["?"; chunk.len()].join(", ");
                let sql = format!("DELETE FROM {name} WHERE {key_column} IN ({marks})");
                conn.prepare_cached(&sql)
                    .and_then(|mut statement| {
                        statement.execute(rusqlite::params_from_iter(chunk.iter()))
                    })
                    .map_err(Error::write("write change"))?;
            }
        }
        for table in std::mem::take(&mut self.tables).into_values() {
            write_table(conn, &table)?;
        }
        for tombstone in std::mem::take(&mut self.tombstones).into_values() {
            write_tombstone(conn, &tombstone)?;
        }
        Ok(())
    }
}

/// Empties a comment's row as its tombstone says. The row keeps its place in the thread
/// (`seq`), and is read and rewritten whole so that its JSON stays what serde writes.
fn write_tombstone(conn: &rusqlite::Connection, t: &CommentTombstone) -> Result<(), Error> {
    let data: Option<String> = conn
        .prepare_cached("SELECT data FROM comments WHERE id = ?1")
        .and_then(|mut s| s.query_row([&t.comment_id], |r| r.get(0)).optional())
        .map_err(Error::write("read a deleted comment"))?;
    let Some(data) = data else {
        // Memory holds a comment for every row and the batch drops the tombstones of the issues
        // it deletes, so a missing row means state.db lost one.
        tracing::warn!(comment = %t.comment_id, "a deleted comment has no row in state.db");
        return Ok(());
    };
    let mut comment: Comment =
        serde_json::from_str(&data).map_err(|e| Error::corrupt("comment", e))?;
    t.apply_to(&mut comment);
    let data = json(&comment)?;
    conn.prepare_cached("UPDATE comments SET data = ?1 WHERE id = ?2")
        .and_then(|mut s| s.execute([&data, &t.comment_id]))
        .map_err(Error::write("write a deleted comment"))?;
    Ok(())
}

fn write_table(conn: &rusqlite::Connection, table: &Table) -> Result<(), Error> {
    let rows = table.rows();
    let mut rest = &rows[..];
    while !rest.is_empty() {
        let size = ROWS_PER_STATEMENT
            .into_iter()
            .find(|n| *n <= rest.len())
            .unwrap_or(1);
        let (chunk, after) = rest.split_at(size);
        rest = after;
        let cells = chunk.iter().flat_map(|row| row.iter());
        conn.prepare_cached(&table.statement(chunk.len()))
            .and_then(|mut statement| statement.execute(rusqlite::params_from_iter(cells)))
            .map_err(Error::write("write change"))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "row_batch_tests.rs"]
mod tests;
