//! The replicated state held in memory by every node, and `apply`, the only function that
//! changes it. `apply` returns the row-level [`Change`]s so the store can persist exactly what
//! changed in the same SQLite transaction that records the applied log index.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::activity::{ActivityEntry, GENESIS_HASH};
use crate::command::{Envelope, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::rules;

/// A row the store must write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    Company(Company),
    Agent(Agent),
    Issue(Issue),
    Run(Run),
    Credential(Credential),
    Comment(Comment),
    Activity(ActivityEntry),
}

/// The result of applying one entry.
#[derive(Clone, Debug)]
pub struct Applied {
    pub outcome: Result<Outcome, DomainError>,
    pub changes: Vec<Change>,
}

/// A comment as far as the rules need it; bodies live only in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommentRef {
    pub issue_id: String,
    pub company_id: String,
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

#[derive(Clone, Debug, Default)]
pub struct State {
    pub companies: BTreeMap<String, Company>,
    pub agents: BTreeMap<String, Agent>,
    pub issues: BTreeMap<String, Issue>,
    pub runs: BTreeMap<String, Run>,
    pub credentials: BTreeMap<String, Credential>,
    pub comments: BTreeMap<String, CommentRef>,
    pub activity_seq: u64,
    pub activity_head: String,
    // Indexes derived from the maps above; rebuilt on load, never persisted.
    pub(crate) credential_by_hash: BTreeMap<String, String>,
    pub(crate) issue_by_identifier: BTreeMap<String, String>,
    pub(crate) checkouts_by_run: BTreeMap<String, BTreeSet<String>>,
    pub(crate) company_by_prefix: BTreeMap<String, String>,
}

impl State {
    pub fn new() -> Self {
        State { activity_head: GENESIS_HASH.to_string(), ..Default::default() }
    }

    /// Rebuilds a state from persisted rows.
    #[allow(clippy::too_many_arguments)]
    pub fn from_rows(
        companies: Vec<Company>,
        agents: Vec<Agent>,
        issues: Vec<Issue>,
        runs: Vec<Run>,
        credentials: Vec<Credential>,
        comments: Vec<(String, CommentRef)>,
        activity_seq: u64,
        activity_head: Option<String>,
    ) -> Self {
        let mut state = State::new();
        for c in companies {
            state.put(Change::Company(c));
        }
        for a in agents {
            state.put(Change::Agent(a));
        }
        for i in issues {
            state.put(Change::Issue(i));
        }
        for r in runs {
            state.put(Change::Run(r));
        }
        for c in credentials {
            state.put(Change::Credential(c));
        }
        state.comments.extend(comments);
        state.activity_seq = activity_seq;
        state.activity_head = activity_head.unwrap_or_else(|| GENESIS_HASH.to_string());
        state
    }

    /// Applies the command in `env`, committed at Raft log index `index`. A refused command
    /// changes nothing and records nothing.
    pub fn apply(&mut self, index: u64, env: &Envelope) -> Applied {
        match rules::decide(self, index, env) {
            Err(e) => Applied { outcome: Err(e), changes: Vec::new() },
            // An idempotent repeat (the same run checking out again) changes nothing and so
            // records nothing.
            Ok(Decision { outcome, changes, .. }) if changes.is_empty() => Applied { outcome: Ok(outcome), changes },
            Ok(Decision { outcome, mut changes, note }) => {
                let mut entry = ActivityEntry {
                    seq: self.activity_seq + 1,
                    log_index: index,
                    company_id: note.company_id,
                    at: env.at,
                    actor_type: env.actor.kind.as_str().to_string(),
                    actor_id: env.actor.id.clone(),
                    credential_id: env.actor.credential_id.clone(),
                    run_id: env.actor.run_id.clone(),
                    action: env.command.name().to_string(),
                    entity_type: note.entity_type.to_string(),
                    entity_id: note.entity_id,
                    details: note.details,
                    prev_hash: self.activity_head.clone(),
                    hash: String::new(),
                };
                entry.hash = entry.compute_hash();
                self.activity_seq = entry.seq;
                self.activity_head = entry.hash.clone();
                changes.push(Change::Activity(entry));
                for change in &changes {
                    self.put(change.clone());
                }
                Applied { outcome: Ok(outcome), changes }
            }
        }
    }

    fn put(&mut self, change: Change) {
        match change {
            Change::Company(c) => {
                self.company_by_prefix.insert(c.issue_prefix.clone(), c.id.clone());
                self.companies.insert(c.id.clone(), c);
            }
            Change::Agent(a) => {
                self.agents.insert(a.id.clone(), a);
            }
            Change::Issue(i) => {
                if let Some(old) = self.issues.get(&i.id) {
                    if let Some(c) = &old.checkout {
                        if let Some(set) = self.checkouts_by_run.get_mut(&c.run_id) {
                            set.remove(&old.id);
                            if set.is_empty() {
                                self.checkouts_by_run.remove(&c.run_id);
                            }
                        }
                    }
                }
                if let Some(c) = &i.checkout {
                    self.checkouts_by_run.entry(c.run_id.clone()).or_default().insert(i.id.clone());
                }
                self.issue_by_identifier.insert(i.identifier.clone(), i.id.clone());
                self.issues.insert(i.id.clone(), i);
            }
            Change::Run(r) => {
                self.runs.insert(r.id.clone(), r);
            }
            Change::Credential(c) => {
                self.credential_by_hash.insert(c.token_hash.clone(), c.id.clone());
                self.credentials.insert(c.id.clone(), c);
            }
            Change::Comment(c) => {
                self.comments
                    .insert(c.id.clone(), CommentRef { issue_id: c.issue_id.clone(), company_id: c.company_id.clone() });
            }
            Change::Activity(_) => {}
        }
    }

    pub fn credential_by_token_hash(&self, hash: &str) -> Option<&Credential> {
        self.credential_by_hash.get(hash).and_then(|id| self.credentials.get(id))
    }

    /// Looks an issue up by its id or by its `PREFIX-N` identifier.
    pub fn issue_by_ref(&self, id_or_identifier: &str) -> Option<&Issue> {
        self.issues.get(id_or_identifier).or_else(|| {
            self.issue_by_identifier.get(&id_or_identifier.to_ascii_uppercase()).and_then(|id| self.issues.get(id))
        })
    }

    /// Issues whose checkout is held by `run_id`.
    pub fn issues_checked_out_by(&self, run_id: &str) -> impl Iterator<Item = &Issue> {
        self.checkouts_by_run.get(run_id).into_iter().flatten().filter_map(|id| self.issues.get(id))
    }

    pub fn company_by_prefix(&self, prefix: &str) -> Option<&Company> {
        self.company_by_prefix.get(prefix).and_then(|id| self.companies.get(id))
    }
}
