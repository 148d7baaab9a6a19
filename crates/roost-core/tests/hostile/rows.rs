//! The rows the store would hold after the same changes as a `State`, to load a `State` from
//! as a restarted node does.

use std::collections::BTreeMap;

use roost_core::idempotency::Remembered;
use roost_core::state::CommentRef;
use roost_core::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The rows the store would hold after the same changes (`roost-store/src/row_batch.rs`):
/// each written as JSON and read back, the later write winning, cost events and comments
/// first-write-wins, forgotten keys deleted.
#[derive(Default)]
pub struct Rows {
    /// The activity log's last entry: its sequence number and hash.
    activity_seq: u64,
    activity_head: Option<String>,
    companies: BTreeMap<String, Company>,
    agents: BTreeMap<String, Agent>,
    issues: BTreeMap<String, Issue>,
    runs: BTreeMap<String, Run>,
    credentials: BTreeMap<String, Credential>,
    comments: BTreeMap<String, CommentRef>,
    remembered: BTreeMap<String, Remembered>,
    wakes: BTreeMap<String, Wake>,
    workers: BTreeMap<String, Worker>,
    policies: BTreeMap<String, BudgetPolicy>,
    costs: BTreeMap<String, CostEvent>,
    incidents: BTreeMap<String, BudgetIncident>,
    memory_entries: BTreeMap<String, memory::MemoryEntry>,
    memory_documents: BTreeMap<String, memory::MemoryDocument>,
    memory_live: BTreeMap<String, memory::MemoryLive>,
    memory_company_live: BTreeMap<String, memory::CompanyLive>,
    agent_homes: BTreeMap<String, home::AgentHome>,
    home_chunks: BTreeMap<String, home::HomeChunk>,
    approvals: BTreeMap<String, approval::Approval>,
    goals: BTreeMap<String, project::Goal>,
    projects: BTreeMap<String, project::Project>,
    skills: BTreeMap<String, roost_core::skill::Skill>,
    labels: BTreeMap<String, roost_core::label::Label>,
    issue_documents: BTreeMap<String, document::IssueDocument>,
    interactions: BTreeMap<String, interaction::Interaction>,
    attachments: BTreeMap<String, attachment::IssueAttachment>,
    attachment_chunks: BTreeMap<String, attachment::AttachmentChunk>,
    work_products: BTreeMap<String, work_product::WorkProduct>,
    routines: BTreeMap<String, routine::Routine>,
    triggers: BTreeMap<String, routine::RoutineTrigger>,
    routine_runs: BTreeMap<String, routine::RoutineRun>,
    /// Rows that did not survive their JSON form, or a second insert the store refuses.
    pub problems: Vec<String>,
}

impl Rows {
    fn stored<T: Serialize + DeserializeOwned>(
        &mut self,
        table: &str,
        id: &str,
        row: &T,
    ) -> Option<T> {
        let text = serde_json::to_string(row).expect("rows serialize");
        match serde_json::from_str(&text) {
            Ok(back) => Some(back),
            Err(e) => {
                let id: String = id.chars().take(40).collect();
                self.problems.push(format!(
                    "{table} row {id:?} does not read back from its JSON: {e}"
                ));
                None
            }
        }
    }

    pub fn absorb(&mut self, changes: &[Change]) {
        macro_rules! upsert {
            ($map:ident, $table:literal, $row:expr, $key:expr) => {{
                if let Some(back) = self.stored($table, &$key, $row) {
                    self.$map.insert($key.clone(), back);
                }
            }};
        }
        for change in changes {
            match change {
                Change::Company(r) => upsert!(companies, "companies", r, r.id),
                Change::Agent(r) => upsert!(agents, "agents", r, r.id),
                Change::Issue(r) => upsert!(issues, "issues", &**r, r.id),
                Change::IssueDeleted(id) => {
                    // As the store does: the issue's row and its comments' rows go.
                    self.issues.remove(id);
                    self.comments.retain(|_, c| c.issue_id != *id);
                    self.interactions.retain(|_, i| i.issue_id != *id);
                }
                Change::Run(r) => upsert!(runs, "runs", r, r.id),
                Change::Credential(r) => upsert!(credentials, "credentials", r, r.id),
                Change::Wake(r) => upsert!(wakes, "wakes", r, r.id),
                Change::Worker(r) => upsert!(workers, "workers", r, r.id),
                Change::BudgetPolicy(r) => upsert!(policies, "budget_policies", r, r.id),
                Change::BudgetIncident(r) => upsert!(incidents, "budget_incidents", r, r.id),
                Change::Remembered(r) => upsert!(remembered, "idempotency", r, r.key),
                Change::Forgotten(key) => {
                    self.remembered.remove(key);
                }
                Change::CostEvent(r) => {
                    if !self.costs.contains_key(&r.id) {
                        upsert!(costs, "cost_events", r, r.id)
                    }
                }
                Change::Comment(c) => {
                    if self.comments.contains_key(&c.id) {
                        self.problems.push(format!(
                            "comment {} inserted twice (the store refuses it)",
                            c.id
                        ));
                    }
                    let comment = CommentRef {
                        issue_id: c.issue_id.clone(),
                        company_id: c.company_id.clone(),
                        deleted: c.deleted_at.is_some(),
                    };
                    self.comments.insert(c.id.clone(), comment);
                }
                Change::CommentTombstoned(t) => match self.comments.get_mut(&t.comment_id) {
                    // The store's update of a row it does not hold would write nothing.
                    None => self.problems.push(format!(
                        "comment {} deleted but never written",
                        t.comment_id
                    )),
                    Some(c) if c.issue_id != t.issue_id => self.problems.push(format!(
                        "comment {} deleted from issue {}, not its own",
                        t.comment_id, t.issue_id
                    )),
                    Some(c) => c.deleted = true,
                },
                Change::Memory(m) => match m {
                    memory::MemoryChange::Entry(r) => {
                        upsert!(memory_entries, "memory_entries", r, r.id)
                    }
                    memory::MemoryChange::EntryDropped(id) => {
                        self.memory_entries.remove(id);
                    }
                    memory::MemoryChange::Document(r) => {
                        let key = r.key();
                        upsert!(memory_documents, "memory_documents", r, key)
                    }
                    memory::MemoryChange::DocumentDropped(key) => {
                        self.memory_documents.remove(key);
                    }
                    memory::MemoryChange::Live(r) => {
                        upsert!(memory_live, "memory_live", r, r.agent_id)
                    }
                    memory::MemoryChange::CompanyLive(r) => {
                        upsert!(memory_company_live, "memory_company_live", r, r.company_id)
                    }
                },
                Change::Routine(r) => match r {
                    routine::RoutineChange::Routine(r) => upsert!(routines, "routines", r, r.id),
                    routine::RoutineChange::Trigger(r) => {
                        upsert!(triggers, "routine_triggers", r, r.id)
                    }
                    routine::RoutineChange::TriggerDeleted(id) => {
                        self.triggers.remove(id);
                    }
                    routine::RoutineChange::Run(r) => {
                        upsert!(routine_runs, "routine_runs", r, r.id)
                    }
                    routine::RoutineChange::RunDropped(id) => {
                        self.routine_runs.remove(id);
                    }
                },
                Change::Approval(r) => upsert!(approvals, "approvals", r, r.id),
                Change::Goal(r) => upsert!(goals, "goals", r, r.id),
                Change::GoalDeleted(id) => {
                    self.goals.remove(id);
                }
                Change::Project(r) => upsert!(projects, "projects", r, r.id),
                Change::ProjectDeleted(id) => {
                    self.projects.remove(id);
                }
                Change::Skill(r) => upsert!(skills, "skills", r, r.id),
                Change::Document(d) => match d {
                    document::DocumentChange::Document(r) => {
                        upsert!(issue_documents, "issue_documents", r, r.id)
                    }
                    // A revision's body is not in memory: only its JSON form is checked.
                    document::DocumentChange::Revision(r) => {
                        self.stored("document_revisions", &r.id, r);
                    }
                    document::DocumentChange::Deleted(id) => {
                        self.issue_documents.remove(id);
                    }
                },
                Change::SkillDeleted(id) => {
                    self.skills.remove(id);
                }
                // Not in memory either: only its JSON form is checked.
                Change::AgentRevision(r) => {
                    self.stored("agent_config_revisions", &r.id, r);
                }
                Change::Label(r) => upsert!(labels, "labels", r, r.id),
                Change::LabelDeleted(id) => {
                    self.labels.remove(id);
                }
                Change::Interaction(i) => match i {
                    interaction::InteractionChange::Interaction(r) => {
                        upsert!(interactions, "issue_interactions", r, r.id)
                    }
                    interaction::InteractionChange::Deleted(id) => {
                        self.interactions.remove(id);
                    }
                },
                Change::Attachment(a) => match a {
                    attachment::AttachmentChange::Chunk { chunk: r, .. } => {
                        let key = r.key();
                        upsert!(attachment_chunks, "attachment_chunks", r, key)
                    }
                    attachment::AttachmentChange::Added(r) => {
                        upsert!(attachments, "issue_attachments", r, r.id)
                    }
                    attachment::AttachmentChange::Removed(id) => {
                        self.attachments.remove(id);
                        self.attachment_chunks.retain(|_, c| c.attachment_id != *id);
                    }
                },
                Change::WorkProduct(w) => match w {
                    work_product::WorkProductChange::Put(r) => {
                        upsert!(work_products, "work_products", r, r.id)
                    }
                    work_product::WorkProductChange::Removed(id) => {
                        self.work_products.remove(id);
                    }
                },
                Change::Home(h) => match h {
                    home::HomeChange::Home(r) => {
                        upsert!(agent_homes, "agent_homes", r, r.agent_id)
                    }
                    home::HomeChange::Chunk(r, _) => {
                        let key = r.key();
                        upsert!(home_chunks, "home_chunks", r, key)
                    }
                    home::HomeChange::ChunkDropped(key) => {
                        self.home_chunks.remove(key);
                    }
                },
                Change::Activity(a) => {
                    self.activity_seq = a.seq;
                    self.activity_head = Some(a.hash.clone());
                }
            }
        }
    }

    /// The state a restarted node would load from these rows.
    pub fn load(&self) -> State {
        fn all<T: Clone>(m: &BTreeMap<String, T>) -> Vec<T> {
            m.values().cloned().collect()
        }
        let mut state = State::from_rows(StateRows {
            companies: all(&self.companies),
            agents: all(&self.agents),
            issues: all(&self.issues),
            runs: all(&self.runs),
            credentials: all(&self.credentials),
            comments: self
                .comments
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            remembered: all(&self.remembered),
            wakes: all(&self.wakes),
            workers: all(&self.workers),
            budget_policies: all(&self.policies),
            cost_events: all(&self.costs),
            budget_incidents: all(&self.incidents),
            memory_entries: all(&self.memory_entries),
            memory_documents: all(&self.memory_documents),
            memory_live: all(&self.memory_live),
            memory_company_live: all(&self.memory_company_live),
            home_chunks: all(&self.home_chunks),
            agent_homes: all(&self.agent_homes),
            approvals: all(&self.approvals),
            goals: all(&self.goals),
            projects: all(&self.projects),
            skills: all(&self.skills),
            labels: all(&self.labels),
            issue_documents: all(&self.issue_documents),
            issue_attachments: all(&self.attachments),
            // As the store loads them: the chunks of uploads not yet made attachments.
            attachment_chunks: self
                .attachment_chunks
                .values()
                .filter(|c| !self.attachments.contains_key(&c.attachment_id))
                .cloned()
                .collect(),
            work_products: all(&self.work_products),
            // As the store loads them: the pending ones.
            pending_interactions: self
                .interactions
                .values()
                .filter(|i| i.status == interaction::InteractionStatus::Pending)
                .cloned()
                .collect(),
            activity_seq: self.activity_seq,
            activity_head: self.activity_head.clone(),
        });
        // As the store loads them (`roost-store/src/rows.rs`): after the other rows.
        state.load_routines(
            all(&self.routines),
            all(&self.triggers),
            all(&self.routine_runs),
        );
        state
    }
}
