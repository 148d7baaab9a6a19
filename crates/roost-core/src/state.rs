//! The replicated state held in memory by every node, and `apply`, the only function that
//! changes it. `apply` returns the row-level [`Change`]s so the store can persist exactly what
//! changed in the same SQLite transaction that records the applied log index.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::activity::{ActivityEntry, GENESIS_HASH};
use crate::command::{Command, Envelope, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::home::HomeChange;
use crate::idempotency::{fingerprint, scoped_key, IdempotencyTable, Remembered, MAX_KEY_LEN};
use crate::memory::{MemoryChange, MemoryDocument, MemoryEntry, MemoryLive, MemoryState};
use crate::rules;
use crate::state_hash::{row_of, RowDigests, Table};

/// A row the store must write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
// Changes live only between apply and the SQLite write; see `Outcome`.
#[allow(clippy::large_enum_variant)]
pub enum Change {
    Company(Company),
    Agent(Agent),
    /// Shared with the command's outcome and with memory: one issue, no copies.
    Issue(Arc<Issue>),
    /// An issue removed with its comments (its id).
    IssueDeleted(String),
    Run(Run),
    Credential(Credential),
    Comment(Comment),
    /// A comment's body emptied by its author, its row kept with who and when
    /// (`rules/comment.rs`); unlike the `*Deleted` changes, no row goes.
    CommentTombstoned(CommentTombstone),
    Activity(ActivityEntry),
    /// The outcome of a keyed command, kept for retries.
    Remembered(Remembered),
    /// A remembered key past its retention window.
    Forgotten(String),
    Wake(Wake),
    Worker(Worker),
    BudgetPolicy(BudgetPolicy),
    CostEvent(CostEvent),
    BudgetIncident(BudgetIncident),
    /// Agent memory: an entry, a document version or live state, written or dropped.
    Memory(MemoryChange),
    /// A routine, trigger or routine run (`routine.rs`).
    Routine(crate::routine::RoutineChange),
    /// An agent's home files (`home.rs`): a manifest, or a chunk written or dropped.
    Home(crate::home::HomeChange),
    Approval(crate::approval::Approval),
    Goal(crate::project::Goal),
    Project(crate::project::Project),
    /// A goal or project removed (its id).
    GoalDeleted(String),
    ProjectDeleted(String),
    /// A company skill written, or removed (its id) (`skill.rs`).
    Skill(crate::skill::Skill),
    SkillDeleted(String),
    /// An issue label written, or removed (its id) (`label.rs`).
    Label(crate::label::Label),
    LabelDeleted(String),
    /// An issue document's summary or revision, or its removal (`document.rs`).
    Document(crate::document::DocumentChange),
    /// An issue-thread interaction's row, or a pending one's removal (`interaction.rs`).
    Interaction(crate::interaction::InteractionChange),
    /// An issue attachment added with its bytes, or removed (`attachment.rs`).
    Attachment(crate::attachment::AttachmentChange),
    /// An issue work product written or removed (`work_product.rs`).
    WorkProduct(crate::work_product::WorkProductChange),
    /// A change of an agent's configuration recorded (`agent_revision.rs`): a row of
    /// `state.db` only.
    AgentRevision(Box<crate::agent_revision::AgentConfigRevision>),
}

/// Commands one log entry carries at most. The command at `position` in the entry at log
/// index `index` has the slot `index * SLOTS_PER_ENTRY + position`: slots order every command
/// ever applied, and fencing tokens and generated ids are slots.
pub const SLOTS_PER_ENTRY: u64 = 1000;

/// The slot of the command at `position` in the entry at `index`.
pub fn slot(index: u64, position: u64) -> u64 {
    index
        .saturating_mul(SLOTS_PER_ENTRY)
        .saturating_add(position)
}

/// The result of applying one command.
#[derive(Clone, Debug)]
pub struct Applied {
    pub outcome: Result<Outcome, DomainError>,
    pub changes: Vec<Change>,
}

/// A comment as far as the rules need it; bodies and authors live only in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommentRef {
    pub issue_id: String,
    pub company_id: String,
    /// Deleted by its author (`rules/comment.rs`). Left out of the digest while false, so a
    /// live comment's row digests as it did before deletion existed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// What an accepted command asks the activity log to record.
#[derive(Clone, Debug)]
pub(crate) struct ActivityNote {
    pub company_id: Option<String>,
    pub entity_type: &'static str,
    pub entity_id: String,
    pub details: serde_json::Value,
}

/// Everything a rule decided: the reply, the rows to write and the audit note.
pub(crate) struct Decision {
    pub outcome: Outcome,
    pub changes: Vec<Change>,
    pub note: ActivityNote,
}

/// Everything the store persists, to rebuild a [`State`] from.
#[derive(Clone, Debug, Default)]
pub struct StateRows {
    pub companies: Vec<Company>,
    pub agents: Vec<Agent>,
    pub issues: Vec<Issue>,
    pub runs: Vec<Run>,
    pub credentials: Vec<Credential>,
    pub comments: Vec<(String, CommentRef)>,
    pub remembered: Vec<Remembered>,
    pub wakes: Vec<Wake>,
    pub workers: Vec<Worker>,
    pub budget_policies: Vec<BudgetPolicy>,
    pub cost_events: Vec<CostEvent>,
    pub budget_incidents: Vec<BudgetIncident>,
    pub memory_entries: Vec<MemoryEntry>,
    pub memory_documents: Vec<MemoryDocument>,
    pub memory_live: Vec<MemoryLive>,
    pub memory_company_live: Vec<crate::memory::CompanyLive>,
    /// Chunks before homes: a chunk no loaded home names is pending.
    pub home_chunks: Vec<crate::home::HomeChunk>,
    pub agent_homes: Vec<crate::home::AgentHome>,
    pub approvals: Vec<crate::approval::Approval>,
    pub goals: Vec<crate::project::Goal>,
    pub projects: Vec<crate::project::Project>,
    pub skills: Vec<crate::skill::Skill>,
    pub labels: Vec<crate::label::Label>,
    pub issue_documents: Vec<crate::document::IssueDocument>,
    pub issue_attachments: Vec<crate::attachment::IssueAttachment>,
    /// The chunks of uploads in progress (not those of finished attachments).
    pub attachment_chunks: Vec<crate::attachment::AttachmentChunk>,
    pub work_products: Vec<crate::work_product::WorkProduct>,
    /// Interactions still pending: memory keeps no other.
    pub pending_interactions: Vec<crate::interaction::Interaction>,
    pub activity_seq: u64,
    pub activity_head: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct State {
    pub companies: BTreeMap<String, Company>,
    pub agents: BTreeMap<String, Agent>,
    /// By id, boxed (`issue_map.rs`).
    pub issues: crate::issue_map::IssueMap,
    pub runs: BTreeMap<String, Run>,
    pub credentials: BTreeMap<String, Credential>,
    pub comments: BTreeMap<String, CommentRef>,
    pub wakes: BTreeMap<String, Wake>,
    pub workers: BTreeMap<String, Worker>,
    pub budget_policies: BTreeMap<String, BudgetPolicy>,
    pub cost_events: BTreeMap<String, CostEvent>,
    pub budget_incidents: BTreeMap<String, BudgetIncident>,
    /// Agents' and companies' memory (`memory.rs`).
    pub memory: MemoryState,
    /// Routines, their triggers and runs (`routine.rs`).
    pub routines: crate::routine::RoutineState,
    /// Agents' home files (`home.rs`).
    pub home: crate::home::HomeState,
    /// Approvals (`approval.rs`).
    pub approvals: crate::approval::ApprovalState,
    /// Goals and projects by id (`project.rs`).
    pub goals: BTreeMap<String, crate::project::Goal>,
    pub projects: BTreeMap<String, crate::project::Project>,
    /// Company skills by id (`skill.rs`).
    pub skills: BTreeMap<String, crate::skill::Skill>,
    /// Issue labels by id (`label.rs`).
    pub labels: BTreeMap<String, crate::label::Label>,
    /// Issue documents' summaries (`document.rs`).
    pub documents: crate::document::DocumentState,
    /// Issue attachments' summaries (`attachment.rs`).
    pub attachments: crate::attachment::AttachmentState,
    /// Issue work products (`work_product.rs`).
    pub work_products: crate::work_product::WorkProductState,
    /// Pending issue-thread interactions (`interaction.rs`).
    pub interactions: crate::interaction::InteractionState,
    pub activity_seq: u64,
    pub activity_head: String,
    pub idempotency: IdempotencyTable,
    /// The log index of the last entry applied (any entry, commands or Raft's own), so that
    /// a hash and the index it belongs to can be read together.
    pub applied_index: u64,
    // Indexes derived from the maps above; rebuilt on load, never persisted.
    pub(crate) credential_by_hash: BTreeMap<String, String>,
    /// Issue ids by company, then issue number: lists read a page without scanning every
    /// issue, and an identifier (`PREFIX-N`) resolves through its company's prefix to its number
    /// (`State::issue_by_ref`). Keyed by number alone under the company, an issue's entry costs
    /// no copy of its company's id, and a lookup compares numbers, not strings.
    pub(crate) issues_by_number: BTreeMap<String, BTreeMap<u64, String>>,
    /// Issue ids by (assignee agent, issue number): an agent's inbox.
    pub(crate) issues_by_assignee: BTreeMap<(String, u64), String>,
    /// Issue ids by (parent issue, issue number): an issue's children.
    pub(crate) issues_by_parent: BTreeMap<(String, u64), String>,
    /// The open issues (neither done nor cancelled) by (company, issue number) and by
    /// (assignee, issue number): lists of open work and an agent's inbox read these, so their
    /// cost follows the open issues, not every issue the company ever closed.
    pub(crate) open_by_number: BTreeMap<(String, u64), String>,
    pub(crate) open_by_assignee: BTreeMap<(String, u64), String>,
    /// (blocker, blocked issue) for every `blockedByIssueIds` entry: closing an issue finds
    /// the issues it blocked without scanning every issue.
    pub(crate) issues_blocked_by: BTreeSet<(String, String)>,
    /// Issue ids by goal and by project: deleting one clears its issues without reading every
    /// issue of the company, most of which may live in `state.db` only (`issue_map.rs`).
    pub(crate) issues_by_goal: crate::set_index::SetIndex,
    pub(crate) issues_by_project: crate::set_index::SetIndex,
    /// Issue ids by label (`labelIds`): deleting a label and listing by one read these.
    pub(crate) issues_by_label: crate::set_index::SetIndex,
    pub(crate) checkouts_by_run: BTreeMap<String, BTreeSet<String>>,
    pub(crate) company_by_prefix: BTreeMap<String, String>,
    /// The one pending (queued or deferred) wake per (agent, issue).
    pub(crate) pending_wakes: BTreeMap<(String, Option<String>), String>,
    /// Every pending wake for an issue, by issue: deleting the issue cancels them all. Not
    /// derived from `pending_wakes`, which holds one per agent and issue, where rows written
    /// before `rules/wake_merge_tests.rs`'s fix can hold two.
    pub(crate) pending_by_issue: BTreeMap<String, BTreeSet<String>>,
    /// Queued wakes in claim order.
    pub(crate) queued_wakes: BTreeSet<(u64, String)>,
    pub(crate) wake_keys: BTreeMap<(String, String), String>,
    /// Deferred wakes by the run they wait for.
    pub(crate) deferred_on_run: BTreeMap<String, BTreeSet<String>>,
    pub(crate) live_runs: BTreeSet<String>,
    /// Comment ids by issue: an issue's count, and what its deletion drops without walking
    /// every comment of every issue.
    pub(crate) comments_of_issue: BTreeMap<String, BTreeSet<String>>,
    pub(crate) run_by_token: BTreeMap<String, String>,
    /// Cents spent per (scope key, window key): every cost event counts in its company's and
    /// its agent's month and lifetime.
    pub(crate) spend: BTreeMap<(String, i64), u64>,
    /// Issues neither done nor cancelled, per company (the open-issue quota).
    pub(crate) open_issues: BTreeMap<String, usize>,
    /// Issues and runs by status, wakes by status and by reason: what a metrics scrape reads.
    pub(crate) issue_statuses: crate::tally::Tally,
    pub(crate) run_statuses: crate::tally::Tally,
    pub(crate) wake_statuses: crate::tally::Tally,
    pub(crate) wake_reasons: crate::tally::Tally,
    /// Ids of the issues in status `blocked`: the escalation timer reads only these
    /// (`rules/org.rs`).
    pub(crate) blocked_issues: BTreeSet<String>,
    /// Ids of the issues with a scheduled monitor: the monitor sweep reads only these
    /// (`rules/monitor.rs`).
    pub(crate) monitored_issues: BTreeSet<String>,
    /// Runs created per (company, clock hour) (the runs-per-hour quota).
    pub(crate) runs_per_hour: BTreeMap<(String, i64), u32>,
    /// Runs created and cost events' cents per (agent, UTC day): the agent's daily caps.
    pub(crate) agent_days: BTreeMap<(String, i64), crate::agent_day::AgentDay>,
    /// Counted wakes of the last day, for the loop breaker (`loop_breaker.rs`): derived from
    /// the wakes, rebuilt on load, pruned by time.
    pub(crate) recent_wakes: crate::loop_breaker::RecentWakes,
    /// The rows' digests behind [`State::hash`], updated lazily from the rows `put` marks.
    pub(crate) row_digests: RowDigests,
}

/// The spend index entries a cost event adds to.
fn spend_keys(e: &CostEvent) -> Vec<(String, i64)> {
    let month = BudgetWindow::CalendarMonthUtc.key(e.occurred_at);
    let mut scopes = vec![
        scope_key(BudgetScopeType::Company, &e.company_id),
        scope_key(BudgetScopeType::Agent, &e.agent_id),
    ];
    scopes.extend(
        e.project_id
            .as_deref()
            .map(|p| scope_key(BudgetScopeType::Project, p)),
    );
    scopes
        .into_iter()
        .flat_map(|s| [(s.clone(), month), (s, LIFETIME_WINDOW)])
        .collect()
}

impl State {
    pub fn new() -> Self {
        State {
            activity_head: GENESIS_HASH.to_string(),
            ..Default::default()
        }
    }

    /// Adds the routine rows (`routine.rs`) to a state [`State::from_rows`] built.
    pub fn load_routines(
        &mut self,
        routines: Vec<crate::routine::Routine>,
        triggers: Vec<crate::routine::RoutineTrigger>,
        runs: Vec<crate::routine::RoutineRun>,
    ) {
        use crate::routine::RoutineChange as R;
        let rows = routines
            .into_iter()
            .map(R::Routine)
            .chain(triggers.into_iter().map(R::Trigger))
            .chain(runs.into_iter().map(R::Run));
        for row in rows {
            self.put(Change::Routine(row));
        }
    }

    /// Rebuilds a state from persisted rows.
    pub fn from_rows(rows: StateRows) -> Self {
        let mut state = State::new();
        let puts =
            rows.companies
                .into_iter()
                .map(Change::Company)
                .chain(rows.agents.into_iter().map(Change::Agent))
                .chain(rows.issues.into_iter().map(|i| Change::Issue(Arc::new(i))))
                .chain(rows.runs.into_iter().map(Change::Run))
                .chain(rows.credentials.into_iter().map(Change::Credential))
                .chain(rows.remembered.into_iter().map(Change::Remembered))
                .chain(rows.wakes.into_iter().map(Change::Wake))
                .chain(rows.workers.into_iter().map(Change::Worker))
                .chain(rows.budget_policies.into_iter().map(Change::BudgetPolicy))
                .chain(rows.cost_events.into_iter().map(Change::CostEvent))
                .chain(
                    rows.budget_incidents
                        .into_iter()
                        .map(Change::BudgetIncident),
                )
                .chain(
                    rows.memory_entries
                        .into_iter()
                        .map(|e| Change::Memory(MemoryChange::Entry(e))),
                )
                .chain(
                    rows.memory_documents
                        .into_iter()
                        .map(|d| Change::Memory(MemoryChange::Document(d))),
                )
                .chain(
                    rows.memory_live
                        .into_iter()
                        .map(|l| Change::Memory(MemoryChange::Live(l))),
                )
                .chain(
                    rows.memory_company_live
                        .into_iter()
                        .map(|l| Change::Memory(MemoryChange::CompanyLive(l))),
                )
                .chain(rows.home_chunks.into_iter().map(|c| {
                    Change::Home(HomeChange::Chunk(c, crate::home::ChunkBytes(Vec::new())))
                }))
                .chain(
                    rows.agent_homes
                        .into_iter()
                        .map(|h| Change::Home(HomeChange::Home(h))),
                )
                .chain(rows.approvals.into_iter().map(Change::Approval))
                .chain(rows.goals.into_iter().map(Change::Goal))
                .chain(rows.projects.into_iter().map(Change::Project))
                .chain(rows.skills.into_iter().map(Change::Skill))
                .chain(rows.labels.into_iter().map(Change::Label))
                .chain(
                    rows.issue_documents
                        .into_iter()
                        .map(|d| Change::Document(crate::document::DocumentChange::Document(d))),
                )
                .chain(rows.pending_interactions.into_iter().map(|i| {
                    Change::Interaction(crate::interaction::InteractionChange::Interaction(i))
                }))
                .chain(
                    rows.work_products.into_iter().map(|w| {
                        Change::WorkProduct(crate::work_product::WorkProductChange::Put(w))
                    }),
                );
        for a in rows.issue_attachments {
            state.row_digests.touch(Table::IssueAttachment, &a.id);
            state.attachments.insert(a);
        }
        for c in rows.attachment_chunks {
            state
                .row_digests
                .touch(Table::AttachmentUpload, &c.attachment_id);
            state.attachments.chunk(&c);
        }
        for change in puts {
            state.put(change);
        }
        for (id, comment) in rows.comments {
            crate::set_index::link(&mut state.comments_of_issue, &comment.issue_id, &id);
            state.comments.insert(id, comment);
        }
        state.activity_seq = rows.activity_seq;
        state.activity_head = rows
            .activity_head
            .unwrap_or_else(|| GENESIS_HASH.to_string());
        state
    }

    /// Applies the entry committed at Raft log index `index`: one envelope, or each envelope
    /// of a [`Command::Batch`] in order. One [`Applied`] per envelope.
    pub fn apply_entry(&mut self, index: u64, env: &Envelope) -> Vec<Applied> {
        let Command::Batch { envelopes } = &env.command else {
            return vec![self.apply(index, env)];
        };
        envelopes
            .iter()
            .enumerate()
            .map(|(position, inner)| {
                if position as u64 >= SLOTS_PER_ENTRY {
                    self.applied_index = index;
                    return Applied {
                        outcome: Err(DomainError::invalid(
                            "batch",
                            format!("at most {SLOTS_PER_ENTRY} commands per log entry"),
                        )),
                        changes: Vec::new(),
                    };
                }
                self.apply_at(index, position as u64, inner)
            })
            .collect()
    }

    /// Applies the command in `env`, alone in the entry at Raft log index `index`. A refused
    /// command changes nothing and records nothing; a keyed command seen before, with the same
    /// request, changes nothing and answers [`Outcome::Repeated`] (its first outcome is in the
    /// key's row in `state.db`).
    pub fn apply(&mut self, index: u64, env: &Envelope) -> Applied {
        self.apply_at(index, 0, env)
    }

    fn apply_at(&mut self, index: u64, position: u64, env: &Envelope) -> Applied {
        let slot = slot(index, position);
        self.applied_index = index;
        let mut changes: Vec<Change> = self
            .idempotency
            .expired(env.at)
            .into_iter()
            .map(Change::Forgotten)
            .collect();
        for change in &changes {
            self.put_copy(change);
        }
        let Some(key) = &env.idempotency_key else {
            let mut applied = self.apply_command(index, slot, env);
            changes.append(&mut applied.changes);
            return Applied {
                outcome: applied.outcome,
                changes,
            };
        };
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            let e = DomainError::invalid(
                "idempotencyKey",
                format!("must be 1-{MAX_KEY_LEN} characters"),
            );
            return Applied {
                outcome: Err(e),
                changes,
            };
        }
        let scoped = scoped_key(&env.actor, &env.command, key);
        let print = fingerprint(&env.command);
        if let Some(first) = self.idempotency.get(&scoped) {
            let outcome = if first.is_other_request(&print) {
                Err(DomainError::IdempotencyKeyReused)
            } else {
                Ok(Outcome::Repeated {
                    key: scoped,
                    at: first.at,
                })
            };
            return Applied { outcome, changes };
        }
        let mut applied = self.apply_command(index, slot, env);
        changes.append(&mut applied.changes);
        let remembered = Change::Remembered(Remembered {
            key: scoped,
            at: env.at,
            index,
            outcome: applied.outcome.clone(),
            fingerprint: Some(print),
        });
        self.put_copy(&remembered);
        changes.push(remembered);
        Applied {
            outcome: applied.outcome,
            changes,
        }
    }

    fn apply_command(&mut self, index: u64, slot: u64, env: &Envelope) -> Applied {
        match rules::decide(self, slot, env) {
            Err(e) => Applied {
                outcome: Err(e),
                changes: Vec::new(),
            },
            // An idempotent repeat (the same run checking out again) changes nothing and so
            // records nothing.
            Ok(Decision {
                outcome, changes, ..
            }) if changes.is_empty() => Applied {
                outcome: Ok(outcome),
                changes,
            },
            Ok(Decision {
                mut outcome,
                mut changes,
                note,
            }) => {
                rules::loop_breaker::stamp_status_changes(self, &mut changes, &mut outcome, env.at);
                // A routine run learns its issue's outcome in the same command (`rules/routine.rs`).
                rules::routine::follow_issues_of(self, slot, env, &mut changes);
                let entries = crate::audit::record(self, index, env, note, &changes);
                changes.extend(entries.into_iter().map(Change::Activity));
                for change in &changes {
                    self.put_copy(change);
                }
                Applied {
                    outcome: Ok(outcome),
                    changes,
                }
            }
        }
    }

    /// Marks the row `change` writes for the state's hash.
    fn touch(&mut self, change: &Change) {
        if let Some((table, key)) = row_of(change) {
            self.row_digests.touch(table, key);
        }
        if let Change::Memory(MemoryChange::Document(d)) = change {
            self.row_digests.touch(Table::MemoryDocument, &d.key());
        }
        if let Change::Home(HomeChange::Chunk(c, _)) = change {
            self.row_digests.touch(Table::HomeChunk, &c.key());
        }
        match change {
            Change::Attachment(crate::attachment::AttachmentChange::Added(a)) => {
                self.row_digests.touch(Table::AttachmentUpload, &a.id);
            }
            Change::Attachment(crate::attachment::AttachmentChange::Removed(id)) => {
                self.row_digests.touch(Table::AttachmentUpload, id);
            }
            _ => {}
        }
    }

    /// [`State::put`] for a change the caller keeps too (the store writes its rows), copying
    /// only what memory holds: an activity entry lives only in state.db, and a comment only
    /// as its issue, company and whether it was deleted ([`CommentRef`]). Apply's share of a cluster's samples at 64 clients fell from
    /// 13.3% to 11.2% (BENCHMARKS.md, "Where a write's CPU goes at 64 clients").
    fn put_copy(&mut self, change: &Change) {
        match change {
            // Marks nothing today (an activity entry is no row of the hash: its sequence and
            // head are hashed apart); kept so that a row given to it later is marked.
            Change::Activity(_) => self.touch(change),
            Change::Comment(c) => {
                self.touch(change);
                self.link_comment(c);
            }
            // A revision's body is written to state.db only, as an agent's config revision.
            Change::Document(crate::document::DocumentChange::Revision(_))
            | Change::AgentRevision(_) => {}
            // An attachment's bytes too: memory keeps its summary, never a copy of them.
            Change::Attachment(a) => {
                self.touch(change);
                self.attachments.put(a);
            }
            _ => self.put(change.clone()),
        }
    }

    fn link_comment(&mut self, c: &Comment) {
        crate::set_index::link(&mut self.comments_of_issue, &c.issue_id, &c.id);
        self.comments.insert(
            c.id.clone(),
            CommentRef {
                issue_id: c.issue_id.clone(),
                company_id: c.company_id.clone(),
                deleted: c.deleted_at.is_some(),
            },
        );
    }

    pub(crate) fn put(&mut self, change: Change) {
        self.touch(&change);
        match change {
            Change::Company(c) => {
                self.company_by_prefix
                    .insert(c.issue_prefix.clone(), c.id.clone());
                self.companies.insert(c.id.clone(), c);
            }
            Change::Agent(a) => {
                self.agents.insert(a.id.clone(), a);
            }
            Change::Issue(i) => self.put_issue(i),
            Change::IssueDeleted(id) => self.delete_issue(&id),
            Change::Run(r) => {
                let old_status = self.runs.get(&r.id).map(|o| o.status.as_str());
                self.run_statuses.moved(old_status, Some(r.status.as_str()));
                if old_status.is_none() {
                    let hour = crate::limits::hour_of(r.created_at);
                    let n = self
                        .runs_per_hour
                        .entry((r.company_id.clone(), hour))
                        .or_default();
                    *n = n.saturating_add(1);
                    self.count_agent_day(&r.agent_id, r.created_at, 1, 0);
                }
                for hash in &r.token_hashes {
                    self.run_by_token.insert(hash.clone(), r.id.clone());
                }
                if r.status.is_live() {
                    self.live_runs.insert(r.id.clone());
                } else {
                    self.live_runs.remove(&r.id);
                }
                self.runs.insert(r.id.clone(), r);
            }
            Change::Wake(w) => self.put_wake(w),
            Change::Worker(w) => {
                self.workers.insert(w.id.clone(), w);
            }
            Change::BudgetPolicy(p) => {
                self.budget_policies.insert(p.id.clone(), p);
            }
            Change::CostEvent(e) => {
                // Cost events are written once, never changed.
                if !self.cost_events.contains_key(&e.id) {
                    for (scope, window) in spend_keys(&e) {
                        let spent = self.spend.entry((scope, window)).or_default();
                        *spent = spent.saturating_add(e.cost_cents);
                    }
                    // By `occurredAt`, as Paperclip's daily cap and Roost's monthly budgets
                    // count it.
                    self.count_agent_day(&e.agent_id, e.occurred_at, 0, e.cost_cents);
                    self.cost_events.insert(e.id.clone(), e);
                }
            }
            Change::BudgetIncident(i) => {
                self.budget_incidents.insert(i.id.clone(), i);
            }
            Change::Credential(c) => {
                self.credential_by_hash
                    .insert(c.token_hash.clone(), c.id.clone());
                self.credentials.insert(c.id.clone(), c);
            }
            Change::Comment(c) => self.link_comment(&c),
            Change::CommentTombstoned(t) => {
                if let Some(comment) = self.comments.get_mut(&t.comment_id) {
                    comment.deleted = true;
                }
            }
            Change::Memory(m) => self.memory.put(m),
            Change::Routine(r) => self.routines.put(r),
            Change::Home(h) => self.home.put(h),
            Change::Approval(a) => self.approvals.put(a),
            Change::Goal(g) => {
                self.goals.insert(g.id.clone(), g);
            }
            Change::GoalDeleted(id) => {
                self.goals.remove(&id);
            }
            Change::Project(p) => {
                self.projects.insert(p.id.clone(), p);
            }
            Change::ProjectDeleted(id) => {
                self.projects.remove(&id);
            }
            Change::Skill(k) => {
                self.skills.insert(k.id.clone(), k);
            }
            Change::SkillDeleted(id) => {
                self.skills.remove(&id);
            }
            Change::Label(l) => {
                self.labels.insert(l.id.clone(), l);
            }
            Change::LabelDeleted(id) => {
                self.labels.remove(&id);
            }
            Change::Document(d) => self.documents.put(d),
            Change::Interaction(i) => self.interactions.put(i),
            Change::Attachment(a) => self.attachments.put(&a),
            Change::WorkProduct(w) => self.work_products.put(&w),
            Change::Activity(_) | Change::AgentRevision(_) => {}
            Change::Remembered(r) => self.idempotency.insert(r),
            Change::Forgotten(key) => self.idempotency.remove(&key),
        }
    }
}
