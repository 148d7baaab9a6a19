//! Roost's domain: types, commands and the pure, deterministic rules that apply them.
//!
//! Nothing here does IO, reads a clock or draws randomness. Ids and timestamps arrive inside
//! the [`Envelope`] of each command, stamped before it was proposed to Raft, so every replica
//! that applies the same entries reaches byte-identical state.

pub mod activity;
pub mod adapter_config;
pub mod agent_day;
pub mod agent_revision;
pub mod approval;
pub mod attachment;
mod audit;
pub mod cluster_view;
pub mod command;
pub mod document;
pub mod entity;
pub mod error;
pub mod home;
pub mod idempotency;
pub mod interaction;
mod issue_index;
pub mod issue_map;
pub mod label;
pub mod limits;
pub mod loop_breaker;
pub mod memory;
pub mod monitor;
mod outcome;
pub mod project;
pub mod routine;
pub mod routine_command;
pub(crate) mod rules;
mod set_index;
pub mod skill;
pub mod state;
mod state_hash;
mod state_queries;
pub mod tally;
pub mod time;
pub mod views;
mod wake_index;
pub mod work_product;

pub use command::{Actor, ActorKind, Command, Envelope, Outcome};
pub use entity::*;
pub use error::DomainError;
pub use issue_map::IssueRows;
pub use state::{Applied, Change, State, StateRows};
pub use time::Timestamp;

/// Scheduling rules the leader's dispatcher and timer consult before proposing.
pub mod scheduling {
    pub use crate::rules::budget::{budget_blocker, exhausted, hard_incident_open};
    pub use crate::rules::routine_due::{alerts_due, due_firings, DueFiring};
    pub use crate::rules::run::{
        claim_blocker, quota_blocker, session_to_resume, worker_fits, worker_suits,
    };
    pub use crate::rules::wake::next_tick;
}

/// Stranded work: the issues the leader's recovery timer wakes or blocks
/// (`rules/recovery.rs`).
pub mod recovery {
    pub use crate::rules::recovery::{
        due, recoveries_due, IssueRecovery, Step, DEFAULT_RECOVER_SECS, MAX_RECOVERIES,
        MAX_RECOVER_SECS,
    };
}

/// The org chart: reporting lines, chains of command, the tree, escalations due
/// (`rules/org.rs`).
pub mod org {
    pub use crate::rules::org::{
        blocked_since, chain_of_command, escalations_due, org_tree, OrgNode, DEFAULT_ESCALATE_SECS,
        MAX_ESCALATE_SECS,
    };
}
