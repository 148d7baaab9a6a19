//! What belongs to a company: the rows an agent of another company must not change, and the
//! companies an outcome shows objects of.

use std::collections::{BTreeMap, BTreeSet};

use roost_core::state::CommentRef;
use roost_core::*;

/// Every row that does not belong to one company, cloned: what an agent of that company must
/// never change. Workers and instance-wide credentials belong to no company, so to none.
#[derive(PartialEq)]
pub struct Foreign {
    companies: BTreeMap<String, Company>,
    agents: BTreeMap<String, Agent>,
    issues: BTreeMap<String, Issue>,
    runs: BTreeMap<String, Run>,
    wakes: BTreeMap<String, Wake>,
    comments: BTreeMap<String, CommentRef>,
    credentials: BTreeMap<String, Credential>,
    workers: BTreeMap<String, Worker>,
    policies: BTreeMap<String, BudgetPolicy>,
    costs: BTreeMap<String, CostEvent>,
    incidents: BTreeMap<String, BudgetIncident>,
    memory_entries: BTreeMap<String, memory::MemoryEntry>,
    memory_documents: BTreeMap<String, memory::MemoryDocument>,
    memory_live: BTreeMap<String, memory::MemoryLive>,
    company_live: BTreeMap<String, memory::CompanyLive>,
    approvals: BTreeMap<String, approval::Approval>,
    goals: BTreeMap<String, project::Goal>,
    projects: BTreeMap<String, project::Project>,
    skills: BTreeMap<String, roost_core::skill::Skill>,
    labels: BTreeMap<String, roost_core::label::Label>,
    issue_documents: BTreeMap<String, document::IssueDocument>,
    interactions: BTreeMap<String, interaction::Interaction>,
    attachments: BTreeMap<String, attachment::IssueAttachment>,
    uploads: BTreeMap<String, attachment::Upload>,
    work_products: BTreeMap<String, work_product::WorkProduct>,
    homes: BTreeMap<String, home::AgentHome>,
    home_chunks: BTreeMap<String, home::HomeChunk>,
    routines: BTreeMap<String, routine::Routine>,
    triggers: BTreeMap<String, routine::RoutineTrigger>,
    routine_runs: BTreeMap<String, routine::RoutineRun>,
}

fn not_of<T: Clone>(
    map: &BTreeMap<String, T>,
    company: &str,
    owner: impl Fn(&T) -> Option<&str>,
) -> BTreeMap<String, T> {
    map.iter()
        .filter(|(_, row)| owner(row) != Some(company))
        .map(|(id, row)| (id.clone(), row.clone()))
        .collect()
}

/// The first id whose row differs between `a` and `b`.
fn differs<T: PartialEq + std::fmt::Debug>(
    table: &str,
    a: &BTreeMap<String, T>,
    b: &BTreeMap<String, T>,
) -> Option<String> {
    let ids: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    ids.into_iter()
        .find(|id| a.get(*id) != b.get(*id))
        .map(|id| {
            let show = |r: Option<&T>| format!("{r:?}").chars().take(800).collect::<String>();
            format!(
                "{table} {id}: before {}\n after {}",
                show(a.get(id)),
                show(b.get(id))
            )
        })
}

impl Foreign {
    pub fn of(s: &State, c: &str) -> Foreign {
        Foreign {
            companies: not_of(&s.companies, c, |r| Some(&r.id)),
            agents: not_of(&s.agents, c, |r| Some(&r.company_id)),
            issues: not_of(
                &(s.issues.values())
                    .map(|i| (i.id.clone(), i.into_owned()))
                    .collect(),
                c,
                |r| Some(&r.company_id),
            ),
            runs: not_of(&s.runs, c, |r| Some(&r.company_id)),
            wakes: not_of(&s.wakes, c, |r| Some(&r.company_id)),
            comments: not_of(&s.comments, c, |r| Some(&r.company_id)),
            credentials: not_of(&s.credentials, c, |r| r.company_id.as_deref()),
            workers: not_of(&s.workers, c, |_| None),
            policies: not_of(&s.budget_policies, c, |r| Some(&r.company_id)),
            costs: not_of(&s.cost_events, c, |r| Some(&r.company_id)),
            incidents: not_of(&s.budget_incidents, c, |r| Some(&r.company_id)),
            memory_entries: not_of(&s.memory.entries, c, |r| Some(&r.company_id)),
            memory_documents: not_of(&s.memory.documents, c, |r| Some(&r.company_id)),
            memory_live: not_of(&s.memory.live, c, |r| Some(&r.company_id)),
            company_live: not_of(&s.memory.company_live, c, |r| Some(&r.company_id)),
            approvals: not_of(&s.approvals.approvals, c, |r| Some(&r.company_id)),
            goals: not_of(&s.goals, c, |r| Some(&r.company_id)),
            projects: not_of(&s.projects, c, |r| Some(&r.company_id)),
            skills: not_of(&s.skills, c, |r| Some(&r.company_id)),
            labels: not_of(&s.labels, c, |r| Some(&r.company_id)),
            issue_documents: not_of(&s.documents.documents, c, |r| Some(&r.company_id)),
            interactions: not_of(&s.interactions.pending, c, |r| Some(&r.company_id)),
            attachments: not_of(&s.attachments.attachments, c, |r| Some(&r.company_id)),
            uploads: not_of(&s.attachments.uploads, c, |r| Some(&r.company_id)),
            work_products: not_of(&s.work_products.products, c, |r| Some(&r.company_id)),
            homes: not_of(&s.home.homes, c, |r| Some(&r.company_id)),
            home_chunks: not_of(&s.home.chunks, c, |r| Some(&r.company_id)),
            routines: not_of(&s.routines.routines, c, |r| Some(&r.company_id)),
            triggers: not_of(&s.routines.triggers, c, |r| Some(&r.company_id)),
            routine_runs: not_of(&s.routines.runs, c, |r| Some(&r.company_id)),
        }
    }

    /// The first row that differs, named by table and id.
    pub fn first_difference(&self, b: &Foreign) -> Option<String> {
        let a = self;
        differs("companies", &a.companies, &b.companies)
            .or_else(|| differs("agents", &a.agents, &b.agents))
            .or_else(|| differs("issues", &a.issues, &b.issues))
            .or_else(|| differs("runs", &a.runs, &b.runs))
            .or_else(|| differs("wakes", &a.wakes, &b.wakes))
            .or_else(|| differs("comments", &a.comments, &b.comments))
            .or_else(|| differs("credentials", &a.credentials, &b.credentials))
            .or_else(|| differs("workers", &a.workers, &b.workers))
            .or_else(|| differs("budget_policies", &a.policies, &b.policies))
            .or_else(|| differs("cost_events", &a.costs, &b.costs))
            .or_else(|| differs("budget_incidents", &a.incidents, &b.incidents))
            .or_else(|| differs("memory_entries", &a.memory_entries, &b.memory_entries))
            .or_else(|| differs("memory_documents", &a.memory_documents, &b.memory_documents))
            .or_else(|| differs("memory_live", &a.memory_live, &b.memory_live))
            .or_else(|| differs("memory_company_live", &a.company_live, &b.company_live))
            .or_else(|| differs("approvals", &a.approvals, &b.approvals))
            .or_else(|| differs("goals", &a.goals, &b.goals))
            .or_else(|| differs("projects", &a.projects, &b.projects))
            .or_else(|| differs("skills", &a.skills, &b.skills))
            .or_else(|| differs("labels", &a.labels, &b.labels))
            .or_else(|| differs("issue_documents", &a.issue_documents, &b.issue_documents))
            .or_else(|| differs("issue_interactions", &a.interactions, &b.interactions))
            .or_else(|| differs("issue_attachments", &a.attachments, &b.attachments))
            .or_else(|| differs("attachment_uploads", &a.uploads, &b.uploads))
            .or_else(|| differs("work_products", &a.work_products, &b.work_products))
            .or_else(|| differs("agent_homes", &a.homes, &b.homes))
            .or_else(|| differs("home_chunks", &a.home_chunks, &b.home_chunks))
            .or_else(|| differs("routines", &a.routines, &b.routines))
            .or_else(|| differs("routine_triggers", &a.triggers, &b.triggers))
            .or_else(|| differs("routine_runs", &a.routine_runs, &b.routine_runs))
    }
}

/// The companies an outcome shows objects of; `None` for instance-wide objects (workers,
/// admin tokens), which no agent is shown either.
pub fn outcome_companies(o: &Outcome) -> Vec<Option<String>> {
    match o {
        Outcome::Company(c) => vec![Some(c.id.clone())],
        Outcome::Credential(c) => vec![c.company_id.clone()],
        Outcome::Agent(a) => vec![Some(a.company_id.clone())],
        Outcome::Issue { issue, comment } => {
            let mut v = vec![Some(issue.company_id.clone())];
            v.extend(comment.iter().map(|c| Some(c.company_id.clone())));
            v
        }
        Outcome::Comment(c) => vec![Some(c.company_id.clone())],
        Outcome::IssueDocument { document, .. } => vec![Some(document.company_id.clone())],
        Outcome::Interaction { interaction, .. } => vec![Some(interaction.company_id.clone())],
        Outcome::Attachment(a) => vec![Some(a.company_id.clone())],
        Outcome::AttachmentChunk(c) => vec![Some(c.company_id.clone())],
        Outcome::WorkProduct(w) => vec![Some(w.company_id.clone())],
        Outcome::Run(r) => vec![Some(r.company_id.clone())],
        Outcome::Wake(w) => vec![Some(w.company_id.clone())],
        Outcome::Worker(_) => vec![None],
        Outcome::BudgetPolicy(p) => vec![Some(p.company_id.clone())],
        Outcome::CostEvent(e) => vec![Some(e.company_id.clone())],
        Outcome::BudgetIncident(i) => vec![Some(i.company_id.clone())],
        Outcome::MemoryEntry(e) => vec![Some(e.company_id.clone())],
        Outcome::MemoryDocument(d) => vec![Some(d.company_id.clone())],
        Outcome::MemoryLive(l) => vec![Some(l.company_id.clone())],
        Outcome::CompanyMemoryLive(l) => vec![Some(l.company_id.clone())],
        Outcome::Routine(r) => vec![r.company_id().map(str::to_string)],
        // Chunk hashes carry no company; the upload itself was checked against the agent.
        Outcome::HomeChunks(_) => vec![],
        Outcome::Goal(g) => vec![Some(g.company_id.clone())],
        Outcome::Project(p) => vec![Some(p.company_id.clone())],
        Outcome::Skill(s) => vec![Some(s.company_id.clone())],
        Outcome::Label(l) => vec![Some(l.company_id.clone())],
        Outcome::Approval(a) => vec![Some(a.company_id.clone())],
        // A comment carries no company; the command was checked against its approval's.
        Outcome::ApprovalComment(_) => vec![],
        Outcome::Hire { agent, approval } => {
            let mut v = vec![Some(agent.company_id.clone())];
            v.extend(approval.iter().map(|a| Some(a.company_id.clone())));
            v
        }
        Outcome::AgentHome(h) => vec![Some(h.company_id.clone())],
        // The first outcome of a key scoped to the same credential and company, checked when
        // it was first applied.
        Outcome::Repeated { .. } => vec![],
    }
}
