//! Resolving the core steps (`hostile/ops.rs`) into commands against the world's state; the
//! governance and home steps are `governance.rs`'s.

use std::collections::BTreeMap;

use roost_core::command::{AgentPatch, CompanyPatch, NewComment, NewCostEvent};
use roost_core::*;

use super::super::ops::{self, Id, Op, Text};
use super::{hash_of, Kind, World};

impl World {
    pub(super) fn command(&self, op: &Op, actor: &Actor) -> Command {
        let pick = |kind, id| self.pick(actor, kind, id);
        let opt = |kind, id: &Option<Id>| id.map(|id| self.pick(actor, kind, id));
        match op {
            Op::CreateCompany { id, name, prefix } => Command::CreateCompany {
                id: pick(Kind::Company, *id),
                name: name.render(),
                issue_prefix: prefix.render(),
            },
            Op::CreateCredential {
                id,
                kind,
                name,
                agent,
                hash,
            } => Command::CreateCredential {
                id: pick(Kind::Credential, *id),
                kind: *kind,
                name: name.render(),
                agent_id: opt(Kind::Agent, agent),
                token_hash: if *hash % 8 == 7 {
                    "g".repeat(64)
                } else {
                    hash_of(*hash)
                },
            },
            Op::CreateAgent {
                id,
                company,
                name,
                role,
                title,
                adapter,
                config,
                heartbeat,
                label,
            } => Command::CreateAgent {
                id: pick(Kind::Agent, *id),
                company_id: pick(Kind::Company, *company),
                name: name.render(),
                role: role.render(),
                title: title.map(Text::render),
                adapter_type: *adapter,
                adapter_config: config.render(),
                heartbeat: policy(heartbeat),
                placement_labels: label.iter().map(|l| (l.render(), l.render())).collect(),
            },
            Op::UpdateAgent {
                agent,
                name,
                adapter,
                config,
                heartbeat,
                loop_breaker,
                ceo,
                grant,
            } => Command::UpdateAgent {
                agent_id: pick(Kind::Agent, *agent),
                patch: match grant {
                    Some(can) => AgentPatch {
                        can_create_agents: Some(*can),
                        ..Default::default()
                    },
                    None => AgentPatch {
                        name: name.map(Text::render),
                        role: ceo.then(|| "ceo".to_string()),
                        adapter_type: *adapter,
                        adapter_config: config.map(|c| c.render()),
                        heartbeat: heartbeat.as_ref().map(policy),
                        loop_breaker: *loop_breaker,
                        ..Default::default()
                    },
                },
            },
            Op::PauseAgent { agent, reason } => Command::PauseAgent {
                agent_id: pick(Kind::Agent, *agent),
                reason: *reason,
            },
            Op::ResumeAgent { agent } => Command::ResumeAgent {
                agent_id: pick(Kind::Agent, *agent),
            },
            Op::ResetAgentSession { agent, task_key } => Command::ResetAgentSession {
                agent_id: pick(Kind::Agent, *agent),
                task_key: task_key.map(|t| t.render()),
            },
            Op::DeleteAgent { agent } => Command::DeleteAgent {
                agent_id: pick(Kind::Agent, *agent),
            },
            Op::TerminateAgent { agent } => Command::TerminateAgent {
                agent_id: pick(Kind::Agent, *agent),
            },
            Op::CreateIssue {
                id,
                company,
                fields,
            } => Command::CreateIssue {
                id: pick(Kind::Issue, *id),
                company_id: pick(Kind::Company, *company),
                fields: self.patch(actor, fields),
            },
            Op::UpdateIssue {
                issue,
                fields,
                comment,
            } => Command::UpdateIssue {
                issue_id: pick(Kind::Issue, *issue),
                patch: self.patch(actor, fields),
                comment: comment.map(|(id, body)| NewComment {
                    id: pick(Kind::Comment, id),
                    body: body.render(),
                }),
            },
            Op::AddComment { issue, id, body } => Command::AddComment {
                issue_id: pick(Kind::Issue, *issue),
                comment: NewComment {
                    id: pick(Kind::Comment, *id),
                    body: body.render(),
                },
            },
            Op::DeleteComment { issue, comment } => {
                let issue_id = pick(Kind::Issue, *issue);
                // Mostly a comment of that issue: drawn apart, nearly every pair is refused.
                let of_issue: Vec<&String> = (self.state.comments.iter())
                    .filter(|(_, c)| c.issue_id == issue_id)
                    .map(|(id, _)| id)
                    .collect();
                let comment_id = match comment {
                    Id::Mine(n) if !of_issue.is_empty() => {
                        of_issue[*n as usize % of_issue.len()].clone()
                    }
                    other => pick(Kind::Comment, *other),
                };
                Command::DeleteComment {
                    issue_id,
                    comment_id,
                }
            }
            Op::LinkApproval {
                approval,
                issue,
                linked,
            } => Command::LinkApprovalIssue {
                approval_id: pick(Kind::Approval, *approval),
                issue_id: pick(Kind::Issue, *issue),
                linked: *linked,
            },
            Op::IssueDocument {
                issue,
                key,
                kind,
                id,
                body,
            } => {
                use roost_core::document::{DocumentOp, DocumentText, MARKDOWN};
                let issue_id = pick(Kind::Issue, *issue);
                let key = ["plan", "notes", "Bad Key"][usize::from(*key % 3)].to_string();
                let doc = self.state.documents.get(&issue_id, &key);
                let latest = doc.map(|d| d.latest_revision_id.clone());
                let first = latest.as_ref().map(|_| format!("rev-first-{}", *kind % 3));
                let text = DocumentText {
                    title: Some(body.render()),
                    format: MARKDOWN.into(),
                    body: body.render(),
                };
                let new = pick(Kind::Comment, *id);
                let op = match kind % 8 {
                    0..=2 => DocumentOp::Put {
                        document_id: format!("doc-{new}"),
                        revision_id: format!("rev-{new}"),
                        text,
                        change_summary: None,
                        // Mostly the latest revision; sometimes the first (stale) or none.
                        base_revision_id: if kind % 8 == 2 { first } else { latest },
                    },
                    3 => DocumentOp::Restore {
                        document_id: doc.map_or_else(|| new.clone(), |d| d.id.clone()),
                        from_revision_id: first.clone().unwrap_or_else(|| new.clone()),
                        from_revision_number: u64::from(*kind % 3),
                        revision_id: format!("rev-{new}"),
                        text,
                    },
                    4 => DocumentOp::Lock,
                    5 | 6 => DocumentOp::Unlock,
                    _ => DocumentOp::Delete,
                };
                Command::IssueDocument { issue_id, key, op }
            }
            Op::Deliverable {
                issue,
                kind,
                id,
                body,
            } => self.deliverable(
                pick(Kind::Issue, *issue),
                *kind,
                pick(Kind::Comment, *id),
                body,
                actor,
            ),
            Op::IssueInteraction {
                issue,
                kind,
                id,
                body,
            } => self.interaction(
                pick(Kind::Issue, *issue),
                *kind,
                pick(Kind::Comment, *id),
                body,
            ),
            Op::Checkout {
                issue,
                agent,
                expected,
            } => Command::Checkout {
                issue_id: pick(Kind::Issue, *issue),
                agent_id: pick(Kind::Agent, *agent),
                expected_statuses: expected.clone(),
            },
            Op::Release { issue } => Command::Release {
                issue_id: pick(Kind::Issue, *issue),
            },
            Op::DeleteIssue { issue } => Command::DeleteIssue {
                issue_id: pick(Kind::Issue, *issue),
            },
            Op::UpdateCompany {
                company,
                name,
                status,
                loop_breaker,
            } => Command::UpdateCompany {
                company_id: pick(Kind::Company, *company),
                patch: CompanyPatch {
                    name: name.as_ref().map(|n| n.render()),
                    status: Some(*status),
                    loop_breaker: *loop_breaker,
                    ..Default::default()
                },
            },
            Op::StartRun {
                id,
                agent,
                issue,
                source,
            } => Command::StartRun {
                id: pick(Kind::Run, *id),
                agent_id: pick(Kind::Agent, *agent),
                issue_id: opt(Kind::Issue, issue),
                invocation_source: source.render(),
            },
            Op::FinishRun {
                run,
                status,
                error,
                usage,
                session,
                log,
            } => Command::FinishRun {
                run_id: pick(Kind::Run, *run),
                status: *status,
                error: error.map(Text::render),
                report: RunReport {
                    usage: *usage,
                    session_id: session.map(Text::render),
                    session_reset: false,
                    log_tail: log.map(Text::render).unwrap_or_default(),
                    log_bytes: usage.output_tokens,
                    summary: error.map(Text::render),
                    // Hostile paths too: control characters, 300 KB.
                    workspace_path: session.map(Text::render),
                },
            },
            Op::SetBudgetPolicy {
                id,
                company,
                agent_scope,
                window,
                amount,
                warn,
                hard,
            } => {
                let (scope_type, scope_id, company_id) = match agent_scope {
                    Some(agent) => {
                        let agent = pick(Kind::Agent, *agent);
                        (
                            BudgetScopeType::Agent,
                            agent.clone(),
                            self.company_of(actor, &agent, *company),
                        )
                    }
                    None => {
                        let company = pick(Kind::Company, company.unwrap_or(Id::Mine(0)));
                        (BudgetScopeType::Company, company.clone(), company)
                    }
                };
                Command::SetBudgetPolicy {
                    id: pick(Kind::Policy, *id),
                    company_id,
                    scope_type,
                    scope_id,
                    window_kind: *window,
                    amount: *amount,
                    warn_percent: *warn,
                    hard_stop_enabled: *hard,
                }
            }
            Op::RecordCostEvent {
                id,
                company,
                agent,
                issue,
                run,
                provider,
                tokens,
                cents,
                occurred,
            } => {
                let agent_id = pick(Kind::Agent, *agent);
                Command::RecordCostEvent {
                    event: NewCostEvent {
                        id: pick(Kind::Cost, *id),
                        company_id: self.company_of(actor, &agent_id, *company),
                        agent_id,
                        issue_id: opt(Kind::Issue, issue),
                        heartbeat_run_id: opt(Kind::Run, run),
                        provider: provider.render(),
                        model: "m".into(),
                        input_tokens: *tokens,
                        cached_input_tokens: tokens / 2,
                        output_tokens: tokens / 3,
                        cost_cents: *cents,
                        occurred_at: occurred.map(Timestamp),
                        // The provider's hostile text as the biller too, on half the draws.
                        biller: (tokens % 2 == 1).then(|| provider.render()),
                        billing_type: None,
                    },
                }
            }
            Op::ResolveBudgetIncident {
                incident,
                action,
                amount,
            } => Command::ResolveBudgetIncident {
                incident_id: pick(Kind::Incident, *incident),
                action: *action,
                amount: *amount,
            },
            Op::ReportUsage { run, usage } => Command::ReportUsage {
                run_id: pick(Kind::Run, *run),
                usage: *usage,
            },
            Op::Wakeup {
                id,
                agent,
                issue,
                reason,
                payload,
                wake_key,
            } => Command::Wakeup {
                id: pick(Kind::Wake, *id),
                agent_id: pick(Kind::Agent, *agent),
                issue_id: opt(Kind::Issue, issue),
                reason: *reason,
                payload: payload.render(),
                wake_key: wake_key.map(ops::key),
            },
            Op::TimerTick { agent, wake } => Command::TimerTick {
                agent_id: pick(Kind::Agent, *agent),
                wake_id: pick(Kind::Wake, *wake),
            },
            Op::AssignRun {
                wake,
                run,
                worker,
                token,
            } => Command::AssignRun {
                // As the dispatcher does, mostly a queued wake.
                wake_id: match wake {
                    Id::Existing(n) => {
                        let queued: Vec<&Wake> = self.state.queued_wakes().collect();
                        match queued.len() {
                            0 => pick(Kind::Wake, *wake),
                            len => queued[*n as usize % len].id.clone(),
                        }
                    }
                    _ => pick(Kind::Wake, *wake),
                },
                run_id: pick(Kind::Run, *run),
                worker_id: pick(Kind::Worker, *worker),
                token_hash: token.map(hash_of),
            },
            Op::AddRunToken { run, token } => Command::AddRunToken {
                run_id: pick(Kind::Run, *run),
                token_hash: hash_of(*token),
            },
            Op::RunStarted { run } => Command::RunStarted {
                run_id: pick(Kind::Run, *run),
            },
            Op::RegisterWorker {
                id,
                name,
                adapters,
                slots,
                version,
            } => Command::RegisterWorker {
                worker_id: pick(Kind::Worker, *id),
                name: name.render(),
                adapters: adapters.clone(),
                labels: BTreeMap::from([("zone".to_string(), name.render())]),
                slots: *slots,
                version: version.render(),
            },
            Op::WorkerLost { worker } => Command::WorkerLost {
                worker_id: pick(Kind::Worker, *worker),
            },
            Op::AppendMemoryEntry {
                id,
                agent,
                issue,
                what,
                error,
                shared,
            } => Command::AppendMemoryEntry {
                id: pick(Kind::Comment, *id),
                agent_id: pick(Kind::Agent, *agent),
                entry: roost_core::memory::NewMemoryEntry {
                    issue_id: opt(Kind::Issue, issue),
                    what: what.render(),
                    did: String::new(),
                    next: String::new(),
                    errors: vec![error.render()],
                },
                shared: *shared,
            },
            Op::PutMemoryDocument {
                company,
                agent,
                name,
                content,
                expected,
            } => {
                let agent_id = opt(Kind::Agent, agent);
                let company_id = match &agent_id {
                    Some(a) => self.company_of(actor, a, *company),
                    None => pick(Kind::Company, company.unwrap_or(Id::Mine(0))),
                };
                Command::PutMemoryDocument {
                    company_id,
                    agent_id,
                    name: ["MEMORY.md", "STATE.md", "NOTES.md", ""][*name as usize % 4].into(),
                    content: content.render(),
                    expected_version: u64::from(*expected % 4),
                }
            }
            Op::SetMemoryLive {
                agent,
                doing,
                coordinates,
            } => Command::SetMemoryLive {
                agent_id: pick(Kind::Agent, *agent),
                current_task: doing.map(|d| roost_core::memory::CurrentTask {
                    doing: d.render(),
                    last: vec![d.render()],
                    next: Vec::new(),
                }),
                coordinates: coordinates.map(ops::Json::render),
            },
            Op::SetCompanyMemoryLive {
                company,
                doing,
                coordinates,
            } => Command::SetCompanyMemoryLive {
                company_id: pick(Kind::Company, *company),
                current_task: doing.map(|d| roost_core::memory::CurrentTask {
                    doing: d.render(),
                    last: Vec::new(),
                    next: vec![d.render()],
                }),
                coordinates: coordinates.map(ops::Json::render),
            },
            Op::Governance(g) => self.governance(g, actor),
            Op::Batch { .. } => unreachable!("batches are resolved by envelope()"),
        }
    }
}

fn policy(h: &ops::Heartbeat) -> HeartbeatPolicy {
    HeartbeatPolicy {
        enabled: h.enabled,
        interval_sec: h.interval_sec,
        wake_on_demand: h.wake_on_demand,
        max_concurrent_runs: h.max_concurrent_runs,
        skip_when_idle: h.skip_when_idle,
        run_reserve_cents: h.run_reserve_cents,
        max_daily_runs: h.daily.map(|(runs, _)| runs),
        max_daily_cost_cents: h.daily.map(|(_, cents)| cents),
    }
}
