//! What a command produced: the reply apply hands back to the proposer, and what a keyed
//! command's retry is answered with (`idempotency.rs`).

use serde::{Deserialize, Serialize};

use crate::entity::*;

/// What a successful command produced, returned to the proposer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
// Outcomes are built once per command and moved, never stored in bulk: boxing the large
// variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    Company(Company),
    Credential(Credential),
    Agent(Agent),
    Issue {
        /// The issue as the command left it. Shared (`Arc`) so that a rule can hand the same
        /// allocation to its change, to memory and to the reply, as checkout and release do.
        issue: std::sync::Arc<Issue>,
        comment: Option<Comment>,
    },
    Comment(Comment),
    /// A document as the command left it; `body` when the command wrote one (a put or a
    /// restore); `redirected_from` the locked document's key an agent's write went beside.
    IssueDocument {
        document: crate::document::IssueDocument,
        body: Option<String>,
        created: bool,
        redirected_from: Option<String>,
    },
    Attachment(crate::attachment::IssueAttachment),
    /// A chunk of an upload in progress, as stored (without its bytes).
    AttachmentChunk(crate::attachment::AttachmentChunk),
    WorkProduct(crate::work_product::WorkProduct),
    /// An interaction as the command left it; `created` false for a repeat of its create.
    Interaction {
        interaction: crate::interaction::Interaction,
        created: bool,
    },
    Run(Run),
    Wake(Wake),
    Worker(Worker),
    BudgetPolicy(BudgetPolicy),
    CostEvent(CostEvent),
    BudgetIncident(BudgetIncident),
    Routine(crate::routine_command::RoutineOutcome),
    MemoryEntry(crate::memory::MemoryEntry),
    MemoryDocument(crate::memory::MemoryDocument),
    MemoryLive(crate::memory::MemoryLive),
    CompanyMemoryLive(crate::memory::CompanyLive),
    /// The hashes of the chunks an upload carried, in its order.
    HomeChunks(Vec<String>),
    Goal(crate::project::Goal),
    Project(crate::project::Project),
    Skill(crate::skill::Skill),
    Label(crate::label::Label),
    Approval(crate::approval::Approval),
    ApprovalComment(crate::approval::ApprovalComment),
    /// A hire: the agent and, when the company requires board approval, its approval.
    Hire {
        agent: Agent,
        approval: Option<crate::approval::Approval>,
    },
    AgentHome(crate::home::AgentHome),
    /// A keyed command seen before, with the same request: its answer is the first outcome,
    /// kept in the row of this (scoped) key in `state.db`, not in memory
    /// (`idempotency.rs`). The node that proposed it reads the row before it answers
    /// (`roost-raft/src/node.rs`), so no caller of a write ever sees this variant.
    Repeated {
        key: String,
        /// When the key was first used: the row read must be that use's, not a later one's
        /// after the key expired and was used again.
        at: crate::time::Timestamp,
    },
}

impl Outcome {
    /// The variant's name, for messages that must not print the object itself.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Company(_) => "company",
            Outcome::Credential(_) => "credential",
            Outcome::Agent(_) => "agent",
            Outcome::Issue { .. } => "issue",
            Outcome::Comment(_) => "comment",
            Outcome::IssueDocument { .. } => "issue_document",
            Outcome::Interaction { .. } => "interaction",
            Outcome::Attachment(_) => "attachment",
            Outcome::AttachmentChunk(_) => "attachment_chunk",
            Outcome::WorkProduct(_) => "work_product",
            Outcome::Run(_) => "run",
            Outcome::Wake(_) => "wake",
            Outcome::Worker(_) => "worker",
            Outcome::BudgetPolicy(_) => "budget_policy",
            Outcome::CostEvent(_) => "cost_event",
            Outcome::BudgetIncident(_) => "budget_incident",
            Outcome::Routine(_) => "routine",
            Outcome::MemoryEntry(_) => "memory_entry",
            Outcome::MemoryDocument(_) => "memory_document",
            Outcome::MemoryLive(_) => "memory_live",
            Outcome::CompanyMemoryLive(_) => "company_memory_live",
            Outcome::HomeChunks(_) => "home_chunks",
            Outcome::Goal(_) => "goal",
            Outcome::Project(_) => "project",
            Outcome::Skill(_) => "skill",
            Outcome::Label(_) => "label",
            Outcome::Approval(_) => "approval",
            Outcome::ApprovalComment(_) => "approval_comment",
            Outcome::Hire { .. } => "hire",
            Outcome::AgentHome(_) => "agent_home",
            Outcome::Repeated { .. } => "repeated",
        }
    }
}
