//! Agent memory on the worker: before a run, the agent's replicated memory is
//! written into its home directory (`<work_dir>/agents/<agent id>`, exported as `AGENT_HOME`)
//! and into the prompt; after it, what the agent changed in those files goes back as writes of
//! that run, with the run's key, so a dead run's edits are refused like any of its writes and a
//! concurrent edit is reported rather than overwritten. The next run, on any worker, starts from
//! the replicated copy.
//!
//! The worker talks to the REST API here as the agent (`roost-client`, the run's key): the same
//! fenced path, limits and errors as an agent's own calls.

mod home;
mod render;

use std::path::PathBuf;
use std::time::Duration;

use roost_client::{ClientTls, MemoryScope, RoostClient};
use roost_core::memory::{CompanyLive, MemoryEntry, NewMemoryEntry};
use roost_core::views::{MemorySearchHit, MemorySummary};
use roost_proto::v1::Assignment;

use crate::config::WorkerConfig;

pub(crate) use render::RECENT_BUDGET_BYTES;

/// `memory/recent.md`'s text for `entries` (newest first) within the prompt's budget, as
/// [`Memory::prepare`] writes it; no IO (`roost-bench memory` times it).
pub fn recent_entries_text(entries: &[MemoryEntry]) -> String {
    render::recent(entries, RECENT_BUDGET_BYTES)
}

/// The documents a run gets as files in its home.
const DOCUMENTS: [&str; 2] = ["STATE.md", "MEMORY.md"];
/// Log entries fetched for `memory/recent.md` (the issue's "last 100").
const RECENT_ENTRIES: usize = 100;
/// A fact in STATE.md not verified for this many days is marked stale in the prompt.
const STALE_AFTER_DAYS: i64 = 7;
/// Entries of the company's shared log fetched for `memory/company/log.md`, and the bytes of
/// them a prompt shows.
const SHARED_ENTRIES: usize = 50;
const SHARED_BUDGET_BYTES: usize = 2 * 1024;
/// Recall hits put into a prompt, and their text's cap.
const RECALL_HITS: usize = 3;
const RECALL_BUDGET_BYTES: usize = 2 * 1024;
/// Each memory request's bound: memory must not hold a run back for long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the company's shared memory goes in a home, read-only (`roost_core::home::MANAGED_DIRS`):
/// its documents, its log (`log.md`) and its live state (`live.md`).
const COMPANY_DIR: &str = "memory/company";
/// What an agent writes for its company's shared log, as `entry.md` for its own.
const COMPANY_ENTRY: &str = "company-entry.md";

/// A document as this run read it.
struct Document {
    name: &'static str,
    version: u64,
    content: String,
}

/// The agent's memory as the run started: what was written to its home, for the prompt and
/// for telling the agent's edits apart at the end.
pub(crate) struct Memory {
    home: PathBuf,
    client: RoostClient,
    summary: MemorySummary,
    documents: Vec<Document>,
    /// The company's shared documents that exist (docs/memory.md: memory per agent and per
    /// company). An administrator writes them; a run reads them.
    company: Vec<Document>,
    /// The company's shared log (newest first) and live state, as the run started.
    shared_log: Vec<MemoryEntry>,
    company_live: Option<CompanyLive>,
    company_id: String,
    current_task: String,
    coordinates: String,
    entries: Vec<MemoryEntry>,
    /// What recall found for the wake's issue in the agent's older memory.
    recalled: Vec<MemorySearchHit>,
    /// The home files as restored (`home.rs`); `None` if restoring failed, and then nothing
    /// is saved either (a save would drop what was not restored).
    home_files: Option<home::RestoredHome>,
    /// Why restoring the home files failed, for the run's log.
    home_problem: Option<String>,
    /// Why the company's shared log or live state could not be read, for the run's log.
    shared_problem: Option<String>,
}

/// A document's text for the prompt: STATE.md with its stale facts marked.
fn push_document(text: &mut String, d: &Document, now: roost_core::Timestamp) {
    if d.content.trim().is_empty() {
        text.push_str("(empty)\n");
    } else if d.name == "STATE.md" {
        text.push_str(&render::mark_stale_facts(&d.content, now, STALE_AFTER_DAYS));
    } else {
        text.push_str(&d.content);
        text.push('\n');
    }
}

/// The company's shared documents that exist, read as the run's agent.
async fn company_documents(
    client: &RoostClient,
    company_id: &str,
) -> Result<Vec<Document>, String> {
    let mut found = Vec::new();
    for name in DOCUMENTS {
        match client
            .memory_document(&MemoryScope::Company(company_id), name)
            .await
        {
            Ok(d) => found.push(Document {
                name,
                version: d.version,
                content: d.content,
            }),
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(format!("memory: reading the company's {name}: {e}")),
        }
    }
    Ok(found)
}

/// The company's shared log, newest first, and its live state (none while never saved), read
/// as the run's agent. Context for the prompt only: on an error the caller goes on without
/// them (as without recall) rather than start the run without the agent's own memory.
async fn company_shared(
    client: &RoostClient,
    company_id: &str,
) -> Result<(Vec<MemoryEntry>, Option<CompanyLive>), String> {
    let log = client
        .memory_entries(&MemoryScope::Company(company_id), Some(SHARED_ENTRIES))
        .await
        .map_err(|e| format!("memory: reading the company's shared log: {e}"))?;
    let live = match client.company_memory_live(company_id).await {
        Ok(live) => Some(live),
        Err(e) if e.status() == Some(404) => None,
        Err(e) => return Err(format!("memory: reading the company's live state: {e}")),
    };
    Ok((log, live))
}

/// The agent's home directory on this worker.
pub(crate) fn home_of(config: &WorkerConfig, agent_id: &str) -> PathBuf {
    config.work_dir.join("agents").join(safe_name(agent_id))
}

/// An id as one path component (ids are UUIDs; anything else is made harmless).
fn safe_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Memory {
    /// Fetches the agent's memory as the run's agent and writes it into its home.
    pub(crate) async fn prepare(a: &Assignment, config: &WorkerConfig) -> Result<Memory, String> {
        let tls = ClientTls {
            ca_file: config.tls.ca_file.clone(),
            ..Default::default()
        };
        let client = RoostClient::with_tls(&config.api_url, &a.run_token, &tls)
            .and_then(|c| c.with_run_id(&a.run_id))
            .map_err(|e| format!("memory: {e}"))?
            .with_timeout(REQUEST_TIMEOUT);
        let agent = a.agent_id.as_str();
        let summary = client
            .memory_summary(agent)
            .await
            .map_err(|e| format!("memory: reading the agent's memory: {e}"))?;
        let entries = client
            .memory_entries(&MemoryScope::Agent(agent), Some(RECENT_ENTRIES))
            .await
            .map_err(|e| format!("memory: reading the log entries: {e}"))?;
        let mut documents = Vec::new();
        for name in DOCUMENTS {
            let version = summary
                .documents
                .iter()
                .find(|d| d.name == name)
                .map_or(0, |d| d.version);
            let content = if version == 0 {
                String::new()
            } else {
                client
                    .memory_document(&MemoryScope::Agent(agent), name)
                    .await
                    .map_err(|e| format!("memory: reading {name}: {e}"))?
                    .content
            };
            documents.push(Document {
                name,
                version,
                content,
            });
        }
        let company = company_documents(&client, &a.company_id).await?;
        let (shared_log, company_live, shared_problem) =
            match company_shared(&client, &a.company_id).await {
                Ok((log, live)) => (log, live, None),
                Err(e) => (
                    Vec::new(),
                    None,
                    Some(format!("{e}; the run starts without it")),
                ),
            };
        let recalled = recall(&client, a).await;
        let home_dir = home_of(config, agent);
        let (home_files, home_problem) = match home::restore(&client, agent, &home_dir).await {
            Ok(restored) => (Some(restored), None),
            Err(e) => (
                None,
                Some(format!("{e}; the run starts without its home files")),
            ),
        };
        let live = summary.live.as_ref();
        let current_task = render::current_task(live.and_then(|l| l.parts.current_task.as_ref()));
        let coordinates = live
            .and_then(|l| l.parts.coordinates.as_ref())
            .map_or_else(|| "{}\n".to_string(), |c| format!("{c:#}\n"));
        let memory = Memory {
            home: home_dir,
            client,
            summary,
            documents,
            company,
            shared_log,
            company_live,
            company_id: a.company_id.clone(),
            current_task,
            coordinates,
            entries,
            recalled,
            home_files,
            home_problem,
            shared_problem,
        };
        memory
            .write_files()
            .map_err(|e| format!("memory: writing {}: {e}", memory.home.display()))?;
        Ok(memory)
    }

    fn write_files(&self) -> std::io::Result<()> {
        let dir = self.home.join("memory");
        std::fs::create_dir_all(&dir)?;
        for d in &self.documents {
            std::fs::write(self.home.join(d.name), &d.content)?;
        }
        std::fs::write(
            dir.join("recent.md"),
            render::recent(&self.entries, RECENT_BUDGET_BYTES),
        )?;
        std::fs::write(dir.join("current-task.md"), &self.current_task)?;
        std::fs::write(dir.join("coordinates.json"), &self.coordinates)?;
        // An entry file left by an earlier run on this worker was harvested or refused then.
        let _ = std::fs::remove_file(dir.join("entry.md"));
        let _ = std::fs::remove_file(dir.join(COMPANY_ENTRY));
        // The company's memory as it is now: a document removed since an earlier run goes.
        let company = self.home.join(COMPANY_DIR);
        match std::fs::remove_dir_all(&company) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut files: Vec<(&str, String)> = self
            .company
            .iter()
            .map(|d| (d.name, d.content.clone()))
            .collect();
        if !self.shared_log.is_empty() {
            let log = render::shared_log(&self.shared_log, usize::MAX, &self.company_id);
            files.push(("log.md", log));
        }
        if let Some(live) = &self.company_live {
            files.push(("live.md", render::company_live(live)));
        }
        if !files.is_empty() {
            std::fs::create_dir_all(&company)?;
        }
        for (name, content) in files {
            let path = company.join(name);
            std::fs::write(&path, content)?;
            // Read-only: an edit there is not saved, and the mode says so before the agent
            // loses one.
            let mut mode = std::fs::metadata(&path)?.permissions();
            mode.set_readonly(true);
            std::fs::set_permissions(&path, mode)?;
        }
        Ok(())
    }

    /// The prompt's memory part that changes only when the documents do (placed first, so a
    /// model's prompt cache keeps it across runs).
    pub(crate) fn boot_text(&self) -> String {
        let mut text = format!(
            "Your memory follows you between machines. It lives in $AGENT_HOME ({}):\n\
             - STATE.md: canonical facts and the commands that verify them. Read it first and \
             verify what you rely on.\n\
             - MEMORY.md: your curated long-term memory.\n\
             - memory/recent.md: your latest log entries, newest first.\n\
             - memory/current-task.md: what you are doing, the last three things done, the next \
             three steps. Keep it current.\n\
             - memory/coordinates.json: where things are (small JSON).\n\
             Roost saves your edits to those files when the run ends. Log this run in \
             memory/entry.md with the sections `# What`, `# Did`, `# Next` and `# Errors` (errors \
             verbatim, one per line), or POST /api/agents/me/memory/entries.\n\
             Any other files you keep under $AGENT_HOME (notes, a PARA tree, daily logs) are \
             saved too when the run ends and are there in your next run, on whichever machine \
             it runs (up to {} bytes in all).\n",
            self.home.display(),
            self.home_files.as_ref().map_or(0, |h| h.view.max_bytes)
        );
        let now = roost_core::Timestamp(now_ms());
        for d in &self.documents {
            text.push_str(&format!("\n## {} (version {})\n", d.name, d.version));
            push_document(&mut text, d, now);
        }
        let cid = &self.company_id;
        text.push_str(&format!(
            "\nYour company's shared memory, read-only, is in $AGENT_HOME/{COMPANY_DIR} (edits \
             there are not saved): the documents an administrator keeps, the log its agents \
             write to together (log.md) and its live state (live.md). To tell the other agents \
             what this run learned or did that they need, write memory/{COMPANY_ENTRY} with \
             the sections of entry.md, or POST /api/companies/{cid}/memory/entries; to change \
             what the company is doing now, PUT /api/companies/{cid}/memory/live with \
             currentTask and coordinates.\n"
        ));
        for d in &self.company {
            text.push_str(&format!(
                "\n## Company {} (version {})\n",
                d.name, d.version
            ));
            push_document(&mut text, d, now);
        }
        text
    }

    /// The prompt's memory part of this run: the door, the current task and recent entries.
    pub(crate) fn now_text(&self) -> String {
        let r = &self.summary.recovery;
        let mut text = format!(
            "## Where you are: {} (confidence {:.2})\n{}\n",
            r.door.as_str(),
            r.confidence,
            r.why
        );
        text.push_str("\nCurrent task (memory/current-task.md):\n");
        text.push_str(&self.current_task);
        let shown: &[MemoryEntry] = match r.door {
            roost_core::memory::Door::Resume => &self.entries[..self.entries.len().min(3)],
            roost_core::memory::Door::CatchUp => {
                let day_ago = now_ms() - 24 * 3_600_000;
                let n = self
                    .entries
                    .iter()
                    .take_while(|e| e.created_at.0 >= day_ago)
                    .count();
                &self.entries[..n]
            }
            roost_core::memory::Door::Rebuild => &self.entries,
        };
        if !shown.is_empty() {
            text.push_str("\nRecent log entries, newest first:\n");
            text.push_str(&render::recent(shown, RECENT_BUDGET_BYTES));
        }
        if let Some(live) = &self.company_live {
            text.push_str("\nYour company now (memory/company/live.md):\n");
            text.push_str(&render::company_live(live));
        }
        if !self.shared_log.is_empty() {
            text.push_str("\nYour company's shared log, newest first:\n");
            text.push_str(&render::shared_log(
                &self.shared_log,
                SHARED_BUDGET_BYTES,
                &self.company_id,
            ));
        }
        if !self.recalled.is_empty() {
            text.push_str(
                "\nRecalled from your memory for this issue (best matches first; \
                 GET /api/agents/me/memory/search?q= finds more):\n",
            );
            text.push_str(&render::recalled(&self.recalled, RECALL_BUDGET_BYTES));
        }
        text
    }

    /// What the run's log should say about the start: home files fetched, or why not, and
    /// why the company's shared memory is missing, if it is.
    pub(crate) fn start_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = match (&self.home_files, &self.home_problem) {
            (_, Some(problem)) => vec![problem.clone()],
            (Some(h), None) if h.fetched + h.removed > 0 => vec![format!(
                "home: restored version {} ({} files fetched, {} removed)",
                h.view.home.version, h.fetched, h.removed
            )],
            _ => Vec::new(),
        };
        notes.extend(self.shared_problem.clone());
        notes
    }

    /// Saves what the agent changed in its home as writes of this run, and the run's log entry
    /// (the agent's `memory/entry.md`, or one made from the run's end when the agent logged
    /// nothing). Returns one line per thing saved or refused.
    pub(crate) async fn harvest(
        &self,
        a: &Assignment,
        status: &str,
        error: &str,
        summary: Option<&str>,
    ) -> Harvest {
        let mut notes = Harvest::default();
        let scope = MemoryScope::Agent(&a.agent_id);
        for d in &self.documents {
            let Ok(now) = std::fs::read_to_string(self.home.join(d.name)) else {
                continue;
            };
            if now == d.content {
                continue;
            }
            match self
                .client
                .put_memory_document(&scope, d.name, &now, d.version)
                .await
            {
                Ok(saved) => notes.saved.push(format!(
                    "memory: saved {} version {}",
                    d.name, saved.version
                )),
                Err(e) if e.status() == Some(409) => {
                    let kept = self.keep_conflict(&a.run_id, d.name, &now);
                    notes.problems.push(format!(
                        "memory: {} changed on the server since this run read version {}; this \
                         run's edit was not saved (kept in {kept}): {e}",
                        d.name, d.version
                    ));
                }
                Err(e) => notes
                    .problems
                    .push(format!("memory: {} not saved: {e}", d.name)),
            }
        }
        let dir = self.home.join("memory");
        let task_text = std::fs::read_to_string(dir.join("current-task.md")).unwrap_or_default();
        let task = (task_text != self.current_task)
            .then(|| render::parse_current_task(&task_text))
            .flatten();
        let coords_text = std::fs::read_to_string(dir.join("coordinates.json")).unwrap_or_default();
        let coords = if coords_text.trim() == self.coordinates.trim() {
            None
        } else {
            match serde_json::from_str::<serde_json::Value>(&coords_text) {
                Ok(v) => Some(v),
                Err(e) => {
                    notes.problems.push(format!(
                        "memory: coordinates.json is not JSON ({e}); not saved"
                    ));
                    None
                }
            }
        };
        if task.is_some() || coords.is_some() {
            match self
                .client
                .set_memory_live(task.as_ref(), coords.as_ref())
                .await
            {
                Ok(_) => notes.saved.push("memory: saved the live state".into()),
                Err(e) => notes
                    .problems
                    .push(format!("memory: live state not saved: {e}")),
            }
        }
        if let Some(restored) = &self.home_files {
            match home::save(&self.client, &restored.view, &self.home).await {
                Ok(Some(saved)) => notes.saved.push(format!(
                    "home: saved version {} ({} files, {} bytes)",
                    saved.home.version,
                    saved.home.files.len(),
                    saved.home.bytes
                )),
                Ok(None) => {}
                Err(problem) => notes.problems.push(problem),
            }
        }
        let issue = a.issue_id.as_deref();
        let written = std::fs::read_to_string(dir.join("entry.md"))
            .ok()
            .and_then(|t| render::parse_entry(&t, issue));
        let _ = std::fs::remove_file(dir.join("entry.md"));
        let entry = match written {
            Some(entry) => Some(entry),
            None if self.logged_during_run(&a.agent_id, &a.run_id).await => None,
            None => Some(fallback_entry(a, status, error, summary)),
        };
        if let Some(entry) = entry {
            match self.client.append_memory_entry(&entry).await {
                Ok(saved) => notes
                    .saved
                    .push(format!("memory: logged entry {}", saved.id)),
                Err(e) => notes
                    .problems
                    .push(format!("memory: log entry not saved: {e}")),
            }
        }
        let shared = std::fs::read_to_string(dir.join(COMPANY_ENTRY))
            .ok()
            .and_then(|t| render::parse_entry(&t, issue));
        let _ = std::fs::remove_file(dir.join(COMPANY_ENTRY));
        if let Some(entry) = shared {
            match self
                .client
                .append_shared_memory_entry(&a.company_id, &entry)
                .await
            {
                Ok(saved) => notes.saved.push(format!(
                    "memory: logged entry {} in the company's shared log",
                    saved.id
                )),
                Err(e) => notes.problems.push(format!(
                    "memory: entry for the company's shared log not saved: {e}"
                )),
            }
        }
        notes
    }

    /// Whether the agent logged an entry through the API during this run.
    async fn logged_during_run(&self, agent_id: &str, run_id: &str) -> bool {
        self.client
            .memory_entries(&MemoryScope::Agent(agent_id), Some(10))
            .await
            .is_ok_and(|entries| entries.iter().any(|e| e.run_id == run_id))
    }

    /// Keeps an edit the server refused beside the home, so the agent's work is not lost.
    fn keep_conflict(&self, run_id: &str, name: &str, content: &str) -> String {
        let dir = self.home.join("memory").join("conflicts");
        let path = dir.join(format!("{}-{name}", safe_name(run_id)));
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, content)) {
            Ok(()) => path.display().to_string(),
            Err(e) => format!("nowhere: {e}"),
        }
    }
}

/// The best matches for the wake's issue (its title) among the agent's entries, documents and
/// the comments of its other issues; nothing when the wake has no issue or search fails (a
/// prompt without recall is still a prompt).
async fn recall(client: &RoostClient, a: &Assignment) -> Vec<MemorySearchHit> {
    let Some(issue) = &a.issue else {
        return Vec::new();
    };
    let limit = u32::try_from(RECALL_HITS * 3).unwrap_or(10);
    let Ok(hits) = client
        .memory_search(&a.agent_id, &issue.title, Some(limit), true)
        .await
    else {
        return Vec::new();
    };
    // The wake already carries its own issue's new comments.
    hits.into_iter()
        .filter(|h| {
            !(h.kind == roost_core::views::MemoryHitKind::Comment
                && h.issue_id.is_some()
                && h.issue_id == a.issue_id)
        })
        .take(RECALL_HITS)
        .collect()
}

/// What a harvest did: the writes made, and what was refused or not sent (which the run's log
/// shows, as the agent's work may be at stake).
#[derive(Default)]
pub(crate) struct Harvest {
    pub saved: Vec<String>,
    pub problems: Vec<String>,
}

/// The entry a run gets when its agent logged none: why it ran, how it ended, its summary or
/// error verbatim.
fn fallback_entry(
    a: &Assignment,
    status: &str,
    error: &str,
    summary: Option<&str>,
) -> NewMemoryEntry {
    let about = a
        .issue
        .as_ref()
        .map(|i| format!(" on {} ({})", i.identifier, i.title))
        .unwrap_or_default();
    NewMemoryEntry {
        issue_id: a.issue_id.clone(),
        what: format!(
            "run woken by {}{about} ended {status}",
            crate::adapter::wake_reason(a)
        ),
        did: summary.unwrap_or_default().chars().take(2_000).collect(),
        next: String::new(),
        errors: if error.is_empty() {
            Vec::new()
        } else {
            vec![error.chars().take(2_000).collect()]
        },
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
