//! The proptest strategies that generate [`Step`]s: mostly ordinary values, sometimes the
//! edges (ids, texts, numbers, times, keys) a hostile client sends.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use roost_core::*;

use super::ops::*;

/// The id of an object a command creates: mostly fresh.
pub fn new_id() -> impl Strategy<Value = Id> {
    prop_oneof![
        8 => any::<u8>().prop_map(Id::Pool),
        1 => any::<u8>().prop_map(Id::Existing),
        1 => any::<u8>().prop_map(Id::Hostile),
    ]
}

pub fn id() -> impl Strategy<Value = Id> {
    prop_oneof![
        6 => any::<u8>().prop_map(Id::Existing),
        4 => any::<u8>().prop_map(Id::Mine),
        2 => any::<u8>().prop_map(Id::Pool),
        1 => any::<u8>().prop_map(Id::Hostile),
    ]
}

pub fn text() -> impl Strategy<Value = Text> {
    prop_oneof![
        12 => any::<u8>().prop_map(Text::Word),
        1 => Just(Text::Empty),
        1 => Just(Text::Blank),
        1 => Just(Text::Control),
        2 => select(LONG).prop_map(Text::Long),
        // Rare: a few per sequence keeps a case in milliseconds.
        1 => Just(Text::Huge),
    ]
}

pub fn json() -> impl Strategy<Value = Json> {
    prop_oneof![
        4 => Just(Json::Empty),
        3 => Just(Json::Small),
        1 => Just(Json::Null),
        1 => Just(Json::Array),
        1 => any::<u8>().prop_map(Json::Deep),
        1 => Just(Json::Huge),
        1 => Just(Json::ForceFresh),
    ]
}

/// Cents, tokens and amounts: small ones and the edges of u64 and i64.
pub fn big() -> impl Strategy<Value = u64> {
    prop_oneof![
        30 => 0..2_000u64,
        2 => Just(1_000_000_000_000u64),
        2 => Just(1_000_000_000_001u64),
        1 => Just(0u64),
        2 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(u64::MAX / 2 + 1),
        1 => Just(i64::MAX as u64),
        1 => Just(i64::MAX as u64 + 1),
        1 => any::<u64>(),
    ]
}

fn small32() -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => 0..60u32,
        1 => Just(u32::MAX),
        1 => Just(1000u32),
        1 => Just(1001u32),
        1 => any::<u32>(),
    ]
}

/// Cents: mostly small, often the largest any field may hold (ten billion dollars, so sums of
/// them approach u64 only through many events), sometimes past it.
pub fn cents() -> impl Strategy<Value = u64> {
    prop_oneof![
        20 => 0..2_000u64,
        3 => Just(1_000_000_000_000u64),
        1 => Just(1_000_000_000_001u64),
        2 => Just(u64::MAX),
        1 => big(),
    ]
}

/// Token counts: mostly plausible.
fn tokens() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0..1_000_000u64, 1 => big()]
}

/// A reference to what the sender would name: mostly its own.
pub fn mine_id() -> impl Strategy<Value = Id> {
    prop_oneof![
        6 => any::<u8>().prop_map(Id::Mine),
        2 => any::<u8>().prop_map(Id::Existing),
        1 => any::<u8>().prop_map(Id::Pool),
        1 => any::<u8>().prop_map(Id::Hostile),
    ]
}

/// Mostly valid percentages, sometimes not.
fn percent() -> impl Strategy<Value = u8> {
    prop_oneof![6 => 1..=100u8, 1 => Just(0u8), 1 => any::<u8>()]
}

/// Times no clock gives: the ends of i64, around zero, and just past chrono's range.
const HOSTILE_TIMES: &[i64] = &[
    0,
    -1,
    i64::MIN,
    i64::MAX,
    i64::MAX - 1,
    8_210_266_876_799_999,
    8_210_266_876_800_000,
    -8_334_601_228_800_001,
    253_402_300_800_000,
];

pub fn hostile_time() -> impl Strategy<Value = i64> {
    select(HOSTILE_TIMES)
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        16 => any::<u16>().prop_map(When::Later),
        1 => Just(When::NextDay),
        1 => Just(When::NextMonth),
        1 => hostile_time().prop_map(When::Hostile),
    ]
}

fn who() -> impl Strategy<Value = Who> {
    let run = prop_oneof![
        2 => Just(RunOf::None),
        3 => any::<u8>().prop_map(RunOf::Own),
        2 => any::<u8>().prop_map(RunOf::Any),
        1 => any::<u8>().prop_map(RunOf::Hostile),
    ];
    prop_oneof![
        8 => Just(Who::Admin),
        1 => Just(Who::System),
        2 => any::<u8>().prop_map(Who::Worker),
        9 => (any::<u8>(), run).prop_map(|(agent, run)| Who::Agent { agent, run }),
    ]
}

fn heartbeat() -> impl Strategy<Value = Heartbeat> {
    let interval = prop_oneof![
        8 => Just(10u64),
        8 => 0..4000u64,
        1 => Just(366 * 24 * 60 * 60u64),
        1 => Just(366 * 24 * 60 * 60 + 1u64),
        1 => Just(i64::MAX as u64),
        1 => Just(u64::MAX),
        1 => Just(i64::MAX as u64 / 1000 + 1),
        1 => any::<u64>(),
    ];
    (
        prop::bool::weighted(0.4),
        interval,
        any::<bool>(),
        small32(),
        any::<bool>(),
        cents(),
        prop::option::weighted(0.2, (small32(), cents())),
    )
        .prop_map(
            |(
                enabled,
                interval_sec,
                wake_on_demand,
                max_concurrent_runs,
                skip_when_idle,
                run_reserve_cents,
                daily,
            )| Heartbeat {
                enabled,
                interval_sec,
                wake_on_demand,
                max_concurrent_runs,
                skip_when_idle,
                run_reserve_cents,
                daily,
            },
        )
}

fn status() -> impl Strategy<Value = IssueStatus> {
    select(IssueStatus::ALL)
}

fn issue_fields() -> impl Strategy<Value = IssueFields> {
    (
        prop::option::weighted(0.8, text()),
        prop::option::of(prop::option::of(text())),
        prop::option::of(status()),
        prop::option::of(select(Priority::ALL)),
        prop::option::of(prop::option::weighted(0.8, id())),
        prop::option::weighted(0.1, prop::option::of(text())),
        prop::option::weighted(0.3, prop::option::of(id())),
        prop::option::weighted(0.3, vec(id(), 0..4)),
        prop::option::weighted(0.2, prop::option::of(text())),
    )
        .prop_map(
            |(
                title,
                description,
                status,
                priority,
                assignee_agent,
                assignee_user,
                parent,
                blocked_by,
                billing_code,
            )| {
                IssueFields {
                    title,
                    description,
                    status,
                    priority,
                    assignee_agent,
                    assignee_user,
                    parent,
                    blocked_by,
                    billing_code,
                }
            },
        )
}

/// Usage whose counters are out of range together or not at all, so most reports are
/// valid; the cost in micro-dollars ranges on its own.
fn usage() -> impl Strategy<Value = Usage> {
    (tokens(), prop_oneof![3 => 0..50_000_000u64, 1 => big()]).prop_map(|(tokens, micro)| Usage {
        input_tokens: tokens,
        cached_input_tokens: tokens / 2,
        output_tokens: tokens / 3,
        cost_micro_usd: micro,
    })
}

/// Mostly the reasons a wakeup may give.
fn wake_reason() -> impl Strategy<Value = WakeReason> {
    prop_oneof![
        6 => Just(WakeReason::OnDemand),
        1 => Just(WakeReason::Routine),
        2 => select(WakeReason::ALL),
    ]
}

/// An optional reference, mostly absent.
fn few_id() -> impl Strategy<Value = Option<Id>> {
    prop::option::weighted(0.3, id())
}

fn opt_id() -> impl Strategy<Value = Option<Id>> {
    prop::option::of(id())
}

fn create_company() -> impl Strategy<Value = Op> {
    (new_id(), text(), text()).prop_map(|(id, name, prefix)| Op::CreateCompany { id, name, prefix })
}

fn create_credential() -> impl Strategy<Value = Op> {
    (
        new_id(),
        select(CredentialKind::ALL),
        text(),
        opt_id(),
        any::<u8>(),
    )
        .prop_map(|(id, kind, name, agent, hash)| Op::CreateCredential {
            id,
            kind,
            name,
            agent,
            hash,
        })
}

fn create_agent() -> impl Strategy<Value = Op> {
    (
        new_id(),
        id(),
        text(),
        text(),
        prop::option::of(text()),
        select(AdapterType::ALL),
        json(),
        heartbeat(),
        prop::option::weighted(0.2, text()),
    )
        .prop_map(
            |(id, company, name, role, title, adapter, config, heartbeat, label)| Op::CreateAgent {
                id,
                company,
                name,
                role,
                title,
                adapter,
                config,
                heartbeat,
                label,
            },
        )
}

fn update_agent() -> impl Strategy<Value = Op> {
    (
        id(),
        prop::option::weighted(0.2, text()),
        prop::option::of(select(AdapterType::ALL)),
        prop::option::weighted(0.3, json()),
        prop::option::weighted(0.7, heartbeat()),
        prop::option::weighted(0.5, loop_breaker()),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.2, any::<bool>()),
    )
        .prop_map(
            |(agent, name, adapter, config, heartbeat, loop_breaker, ceo, grant)| Op::UpdateAgent {
                agent,
                name,
                adapter,
                config,
                heartbeat,
                loop_breaker,
                ceo,
                grant,
            },
        )
}

/// A loop-breaker count: mostly tiny (trips within a few steps), sometimes past the bound.
fn loop_count() -> impl Strategy<Value = Option<u32>> {
    prop::option::weighted(0.8, prop_oneof![6 => 0..4u32, 1 => any::<u32>()])
}

/// A loop-breaker window in minutes: mostly in range, sometimes past the day it may span.
fn loop_window() -> impl Strategy<Value = Option<u32>> {
    prop::option::of(prop_oneof![6 => 0..120u32, 1 => any::<u32>()])
}

fn loop_breaker() -> impl Strategy<Value = roost_core::loop_breaker::LoopBreaker> {
    (
        prop::option::of(any::<bool>()),
        loop_window(),
        loop_count(),
        loop_count(),
        loop_window(),
        loop_count(),
    )
        .prop_map(|(enabled, window, issue, ping_pong, run_window, runs)| {
            roost_core::loop_breaker::LoopBreaker {
                enabled,
                window_minutes: window,
                issue_wakes: issue,
                ping_pong_wakes: ping_pong,
                run_window_minutes: run_window,
                run_wakes: runs,
            }
        })
}

fn pause_agent() -> impl Strategy<Value = Op> {
    (id(), select(PauseReason::ALL)).prop_map(|(agent, reason)| Op::PauseAgent { agent, reason })
}

fn resume_agent() -> impl Strategy<Value = Op> {
    id().prop_map(|agent| Op::ResumeAgent { agent })
}

fn reset_agent_session() -> impl Strategy<Value = Op> {
    (id(), prop::option::of(text()))
        .prop_map(|(agent, task_key)| Op::ResetAgentSession { agent, task_key })
}

fn terminate_agent() -> impl Strategy<Value = Op> {
    id().prop_map(|agent| Op::TerminateAgent { agent })
}

fn delete_agent() -> impl Strategy<Value = Op> {
    id().prop_map(|agent| Op::DeleteAgent { agent })
}

fn create_issue() -> impl Strategy<Value = Op> {
    (new_id(), mine_id(), issue_fields()).prop_map(|(id, company, fields)| Op::CreateIssue {
        id,
        company,
        fields,
    })
}

fn update_issue() -> impl Strategy<Value = Op> {
    (
        mine_id(),
        issue_fields(),
        prop::option::weighted(0.3, (new_id(), text())),
    )
        .prop_map(|(issue, fields, comment)| Op::UpdateIssue {
            issue,
            fields,
            comment,
        })
}

fn add_comment() -> impl Strategy<Value = Op> {
    (mine_id(), new_id(), text()).prop_map(|(issue, id, body)| Op::AddComment { issue, id, body })
}

fn delete_comment() -> impl Strategy<Value = Op> {
    (mine_id(), mine_id()).prop_map(|(issue, comment)| Op::DeleteComment { issue, comment })
}

fn link_approval() -> impl Strategy<Value = Op> {
    (mine_id(), mine_id(), any::<bool>()).prop_map(|(approval, issue, linked)| Op::LinkApproval {
        approval,
        issue,
        linked,
    })
}

fn issue_document() -> impl Strategy<Value = Op> {
    (mine_id(), any::<u8>(), any::<u8>(), new_id(), text()).prop_map(
        |(issue, key, kind, id, body)| Op::IssueDocument {
            issue,
            key,
            kind,
            id,
            body,
        },
    )
}

fn deliverable() -> impl Strategy<Value = Op> {
    (mine_id(), any::<u8>(), new_id(), text()).prop_map(|(issue, kind, id, body)| Op::Deliverable {
        issue,
        kind,
        id,
        body,
    })
}

fn issue_interaction() -> impl Strategy<Value = Op> {
    (mine_id(), any::<u8>(), new_id(), text()).prop_map(|(issue, kind, id, body)| {
        Op::IssueInteraction {
            issue,
            kind,
            id,
            body,
        }
    })
}

fn checkout() -> impl Strategy<Value = Op> {
    let expected = prop_oneof![
        6 => Just(vec![IssueStatus::Todo, IssueStatus::Backlog]),
        3 => vec(status(), 1..4),
        1 => Just(Vec::new()),
    ];
    (mine_id(), mine_id(), expected).prop_map(|(issue, agent, expected)| Op::Checkout {
        issue,
        agent,
        expected,
    })
}

fn release() -> impl Strategy<Value = Op> {
    mine_id().prop_map(|issue| Op::Release { issue })
}

fn delete_issue() -> impl Strategy<Value = Op> {
    mine_id().prop_map(|issue| Op::DeleteIssue { issue })
}

fn update_company() -> impl Strategy<Value = Op> {
    (
        mine_id(),
        proptest::option::of(text()),
        select(vec![
            CompanyStatus::Active,
            CompanyStatus::Active,
            CompanyStatus::Paused,
            CompanyStatus::Archived,
        ]),
        prop::option::weighted(0.5, loop_breaker()),
    )
        .prop_map(|(company, name, status, loop_breaker)| Op::UpdateCompany {
            company,
            name,
            status,
            loop_breaker,
        })
}

fn start_run() -> impl Strategy<Value = Op> {
    (new_id(), id(), few_id(), text()).prop_map(|(id, agent, issue, source)| Op::StartRun {
        id,
        agent,
        issue,
        source,
    })
}

fn finish_run() -> impl Strategy<Value = Op> {
    (
        id(),
        select(RunStatus::ALL),
        prop::option::of(text()),
        usage(),
        prop::option::weighted(0.3, text()),
        prop::option::weighted(0.2, text()),
    )
        .prop_map(|(run, status, error, usage, session, log)| Op::FinishRun {
            run,
            status,
            error,
            usage,
            session,
            log,
        })
}

fn set_budget_policy() -> impl Strategy<Value = Op> {
    (
        new_id(),
        prop::option::weighted(0.3, id()),
        opt_id(),
        select(BudgetWindow::ALL),
        cents(),
        percent(),
        any::<bool>(),
    )
        .prop_map(|(id, company, agent_scope, window, amount, warn, hard)| {
            Op::SetBudgetPolicy {
                id,
                company,
                agent_scope,
                window,
                amount,
                warn,
                hard,
            }
        })
}

fn record_cost_event() -> impl Strategy<Value = Op> {
    (
        new_id(),
        prop::option::weighted(0.3, id()),
        mine_id(),
        few_id(),
        few_id(),
        text(),
        tokens(),
        cents(),
        prop::option::weighted(0.2, hostile_time()),
    )
        .prop_map(
            |(id, company, agent, issue, run, provider, tokens, cents, occurred)| {
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
                }
            },
        )
}

fn resolve_budget_incident() -> impl Strategy<Value = Op> {
    (id(), select(IncidentAction::ALL), prop::option::of(cents())).prop_map(
        |(incident, action, amount)| Op::ResolveBudgetIncident {
            incident,
            action,
            amount,
        },
    )
}

fn report_usage() -> impl Strategy<Value = Op> {
    (id(), usage()).prop_map(|(run, usage)| Op::ReportUsage { run, usage })
}

fn wakeup() -> impl Strategy<Value = Op> {
    (
        new_id(),
        mine_id(),
        few_id(),
        wake_reason(),
        json(),
        prop::option::weighted(0.3, any::<u8>()),
    )
        .prop_map(|(id, agent, issue, reason, payload, wake_key)| Op::Wakeup {
            id,
            agent,
            issue,
            reason,
            payload,
            wake_key,
        })
}

fn timer_tick() -> impl Strategy<Value = Op> {
    (id(), new_id()).prop_map(|(agent, wake)| Op::TimerTick { agent, wake })
}

fn assign_run() -> impl Strategy<Value = Op> {
    (id(), new_id(), id(), prop::option::of(any::<u8>())).prop_map(|(wake, run, worker, token)| {
        Op::AssignRun {
            wake,
            run,
            worker,
            token,
        }
    })
}

fn add_run_token() -> impl Strategy<Value = Op> {
    (id(), any::<u8>()).prop_map(|(run, token)| Op::AddRunToken { run, token })
}

fn run_started() -> impl Strategy<Value = Op> {
    id().prop_map(|run| Op::RunStarted { run })
}

fn register_worker() -> impl Strategy<Value = Op> {
    (
        id(),
        text(),
        vec(select(AdapterType::ALL), 0..3),
        small32(),
        text(),
    )
        .prop_map(|(id, name, adapters, slots, version)| Op::RegisterWorker {
            id,
            name,
            adapters,
            slots,
            version,
        })
}

fn worker_lost() -> impl Strategy<Value = Op> {
    id().prop_map(|worker| Op::WorkerLost { worker })
}

fn append_memory_entry() -> impl Strategy<Value = Op> {
    (
        new_id(),
        mine_id(),
        few_id(),
        text(),
        text(),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(id, agent, issue, what, error, shared)| Op::AppendMemoryEntry {
                id,
                agent,
                issue,
                what,
                error,
                shared,
            },
        )
}

fn put_memory_document() -> impl Strategy<Value = Op> {
    (
        few_id(),
        prop::option::weighted(0.8, mine_id()),
        any::<u8>(),
        text(),
        any::<u8>(),
    )
        .prop_map(
            |(company, agent, name, content, expected)| Op::PutMemoryDocument {
                company,
                agent,
                name,
                content,
                expected,
            },
        )
}

fn set_memory_live() -> impl Strategy<Value = Op> {
    (
        mine_id(),
        prop::option::weighted(0.8, text()),
        prop::option::weighted(0.5, json()),
    )
        .prop_map(|(agent, doing, coordinates)| Op::SetMemoryLive {
            agent,
            doing,
            coordinates,
        })
}

fn set_company_memory_live() -> impl Strategy<Value = Op> {
    (
        id(),
        prop::option::weighted(0.8, text()),
        prop::option::weighted(0.5, json()),
    )
        .prop_map(|(company, doing, coordinates)| Op::SetCompanyMemoryLive {
            company,
            doing,
            coordinates,
        })
}

/// One command of any kind, weighted towards the ones tenants send most.
fn leaf_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => create_company(),
        1 => create_credential(),
        3 => create_agent(),
        3 => update_agent(),
        1 => pause_agent(),
        1 => resume_agent(),
        1 => reset_agent_session(),
        1 => terminate_agent(),
        1 => delete_agent(),
        5 => create_issue(),
        5 => update_issue(),
        3 => add_comment(),
        1 => delete_comment(),
        4 => checkout(),
        2 => release(),
        1 => delete_issue(),
        1 => update_company(),
        3 => start_run(),
        3 => finish_run(),
        3 => set_budget_policy(),
        6 => record_cost_event(),
        2 => resolve_budget_incident(),
        3 => report_usage(),
        4 => wakeup(),
        2 => timer_tick(),
        4 => assign_run(),
        1 => add_run_token(),
        2 => run_started(),
        1 => register_worker(),
        1 => worker_lost(),
        3 => append_memory_entry(),
        2 => put_memory_document(),
        2 => issue_document(),
        2 => issue_interaction(),
        4 => deliverable(),
        1 => link_approval(),
        2 => set_memory_live(),
        1 => set_company_memory_live(),
        12 => super::governance::gov_op().prop_map(Op::Governance),
    ]
}

/// Who would send `op`: an administrator (or the system) for what only they may do, a worker
/// for a run's progress, an agent for issue work, costs and wakes.
fn natural(op: &Op, who: Who, n: u8) -> Who {
    let agent = match who {
        Who::Agent { .. } => who,
        _ => Who::Agent {
            agent: n,
            run: RunOf::Own(n),
        },
    };
    match op {
        Op::RunStarted { .. } | Op::ReportUsage { .. } | Op::RegisterWorker { .. } => {
            Who::Worker(n)
        }
        Op::FinishRun { .. } if n.is_multiple_of(2) => Who::Worker(n),
        Op::CreateIssue { .. }
        | Op::UpdateIssue { .. }
        | Op::AddComment { .. }
        | Op::DeleteComment { .. }
        | Op::IssueDocument { .. }
        | Op::IssueInteraction { .. }
        | Op::Deliverable { .. }
        | Op::Checkout { .. }
        | Op::Release { .. }
        | Op::RecordCostEvent { .. }
        | Op::Wakeup { .. }
        | Op::AppendMemoryEntry { .. }
        | Op::SetMemoryLive { .. }
        | Op::SetCompanyMemoryLive { .. } => agent,
        Op::PutMemoryDocument { .. } if n.is_multiple_of(2) => agent,
        // A lone grant is a ceo agent's write; a role of ceo only an administrator's.
        Op::UpdateAgent { grant: Some(_), .. } => agent,
        Op::Governance(g) if super::governance::agent_sends(g) => agent,
        _ if n.is_multiple_of(8) => Who::System,
        _ => Who::Admin,
    }
}

fn leaf_step() -> impl Strategy<Value = Step> {
    (
        who(),
        any::<u8>(),
        when(),
        prop::option::weighted(0.25, any::<u8>()),
        leaf_op(),
    )
        .prop_map(|(who, n, when, key, op)| {
            // Six in ten steps come from whoever would send them; the rest from anyone.
            let who = if n % 10 < 6 {
                natural(&op, who, n / 10)
            } else {
                who
            };
            Step { who, when, key, op }
        })
}

pub fn step() -> impl Strategy<Value = Step> {
    let batch = (vec(leaf_step(), 0..4), prop::bool::weighted(0.1), when()).prop_map(
        |(steps, nested, when)| Step {
            who: Who::System,
            when,
            key: None,
            op: Op::Batch { steps, nested },
        },
    );
    prop_oneof![12 => leaf_step(), 1 => batch]
}

/// A sequence of steps from every tenant.
pub fn steps(max: usize) -> impl Strategy<Value = Vec<Step>> {
    vec(step(), 1..max)
}
