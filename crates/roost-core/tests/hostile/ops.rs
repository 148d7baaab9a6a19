//! What a generated step asks for: small selectors (which object, which text, which number)
//! that `world.rs` resolves against the state when the step is applied. Selectors rather than
//! finished commands keep sequences valid often enough to reach deep states, and shrink well.

use roost_core::*;

/// Which object a field names.
#[derive(Clone, Copy, Debug)]
pub enum Id {
    /// The n-th existing object of the field's kind, whatever its company.
    Existing(u8),
    /// The sender's own: its agent, run, worker or company, or the n-th object of its
    /// company (any object for an administrator), so sequences often make sense.
    Mine(u8),
    /// An id from a small pool per kind, so later steps name it again.
    Pool(u8),
    /// A value no honest client sends ([`hostile_id`]).
    Hostile(u8),
}

/// Ids no honest client sends: empty, at and past the 64-character limit, path-like, NUL,
/// non-ASCII, the id a run's settled cost event takes, and a few hundred KB.
pub fn hostile_id(n: u8) -> String {
    match n % 9 {
        0 => String::new(),
        1 => " ".into(),
        2 => "x".repeat(64),
        3 => "x".repeat(65),
        4 => "../../etc/passwd".into(),
        5 => "id\u{0}nul".into(),
        6 => "Ärger-ü".into(),
        7 => "run-ru0".into(),
        _ => "y".repeat(300_000),
    }
}

/// A text field's value.
#[derive(Clone, Copy, Debug)]
pub enum Text {
    Word(u8),
    Empty,
    Blank,
    /// Control characters and a right-to-left override.
    Control,
    /// Exactly this many characters: the pool holds each limit the rules know and one past it.
    Long(u32),
    /// 300 KB.
    Huge,
}

/// Ordinary words, mentions of agents of every company included.
pub const WORDS: &[&str] = &[
    "alpha",
    "Bravo team",
    "@a1 please look",
    "@b1 hello from elsewhere",
    "@A2 @a2 @d1",
    "ship it",
    "mail bob@example.com",
    "engineer",
    "ÄÖÜ ümlaut ☃",
];

pub const LONG: &[u32] = &[
    10, 11, 50, 51, 64, 65, 100, 101, 128, 129, 200, 201, 500, 501, 4000, 4001, 16384, 16385,
    100_000, 100_001,
];

impl Text {
    pub fn render(self) -> String {
        match self {
            Text::Word(n) => WORDS[n as usize % WORDS.len()].into(),
            Text::Empty => String::new(),
            Text::Blank => " \t\n ".into(),
            Text::Control => "a\u{0}b\u{1b}[2J\u{202e}c\r\n".into(),
            Text::Long(n) => "é".repeat(n as usize),
            Text::Huge => "z".repeat(300_000),
        }
    }
}

/// Keys sent as `Idempotency-Key`: a small pool, so tenants and command kinds reuse them.
pub fn key(n: u8) -> String {
    match n % 8 {
        0 => "k1".into(),
        1 => "k2".into(),
        2 => "k3".into(),
        3 => String::new(),
        4 => "k".repeat(128),
        5 => "k".repeat(129),
        6 => "ключ".into(),
        _ => "K1".into(),
    }
}

/// A JSON value for `adapterConfig` and wake payloads.
#[derive(Clone, Copy, Debug)]
pub enum Json {
    Empty,
    Small,
    Null,
    Array,
    /// Arrays nested this deep (at most 120: the REST parser stops at 128).
    Deep(u8),
    Huge,
    ForceFresh,
}

impl Json {
    pub fn render(self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Json::Empty => json!({}),
            Json::Small => {
                json!({ "command": "run.sh", "env": { "TOKEN": "secret" }, "n": u64::MAX })
            }
            Json::Null => serde_json::Value::Null,
            Json::Array => json!([1, -1, i64::MIN, 1.5, "x"]),
            Json::Deep(d) => {
                let mut v = json!(0);
                for _ in 0..(d % 120) {
                    v = json!([v]);
                }
                json!({ "deep": v })
            }
            Json::Huge => json!({ "blob": "j".repeat(300_000) }),
            Json::ForceFresh => json!({ "forceFreshSession": true }),
        }
    }
}

/// Who sends a step.
#[derive(Clone, Copy, Debug)]
pub enum Who {
    Admin,
    System,
    /// The n-th existing worker (or a pooled worker id).
    Worker(u8),
    /// The n-th existing agent, with its own company, for the run named by `run`.
    Agent {
        agent: u8,
        run: RunOf,
    },
}

#[derive(Clone, Copy, Debug)]
pub enum RunOf {
    None,
    /// The n-th run of this agent.
    Own(u8),
    /// The n-th run of any agent, any company.
    Any(u8),
    Hostile(u8),
}

/// The envelope's time.
#[derive(Clone, Copy, Debug)]
pub enum When {
    /// The clock moves on this many seconds.
    Later(u16),
    /// Past the idempotency retention window.
    NextDay,
    /// Into the next budget month.
    NextMonth,
    /// This one envelope carries this time; the clock stays.
    Hostile(i64),
}

#[derive(Clone, Debug)]
pub struct Step {
    pub who: Who,
    pub when: When,
    pub key: Option<u8>,
    pub op: Op,
}

#[derive(Clone, Debug)]
pub struct IssueFields {
    pub title: Option<Text>,
    pub description: Option<Option<Text>>,
    pub status: Option<IssueStatus>,
    pub priority: Option<Priority>,
    pub assignee_agent: Option<Option<Id>>,
    pub assignee_user: Option<Option<Text>>,
    pub parent: Option<Option<Id>>,
    pub blocked_by: Option<Vec<Id>>,
    pub billing_code: Option<Option<Text>>,
}

#[derive(Clone, Debug)]
pub struct Heartbeat {
    pub enabled: bool,
    pub interval_sec: u64,
    pub wake_on_demand: bool,
    pub max_concurrent_runs: u32,
    pub skip_when_idle: bool,
    pub run_reserve_cents: u64,
    /// The daily caps, none most often.
    pub daily: Option<(u32, u64)>,
}

/// One command, every variant of [`Command`].
#[derive(Clone, Debug)]
pub enum Op {
    CreateCompany {
        id: Id,
        name: Text,
        prefix: Text,
    },
    CreateCredential {
        id: Id,
        kind: CredentialKind,
        name: Text,
        agent: Option<Id>,
        hash: u8,
    },
    CreateAgent {
        id: Id,
        company: Id,
        name: Text,
        role: Text,
        title: Option<Text>,
        adapter: AdapterType,
        config: Json,
        heartbeat: Heartbeat,
        label: Option<Text>,
    },
    UpdateAgent {
        agent: Id,
        name: Option<Text>,
        adapter: Option<AdapterType>,
        config: Option<Json>,
        heartbeat: Option<Heartbeat>,
        /// Small counts make the loop breaker trip inside a sequence; large ones pass its bounds.
        loop_breaker: Option<roost_core::loop_breaker::LoopBreaker>,
        /// Makes the agent its company's ceo (accepted from an administrator only).
        ceo: bool,
        /// A ceo's grant of `canCreateAgents`, sent alone (the only patch a ceo agent may send).
        grant: Option<bool>,
    },
    PauseAgent {
        agent: Id,
        reason: PauseReason,
    },
    ResumeAgent {
        agent: Id,
    },
    ResetAgentSession {
        agent: Id,
        task_key: Option<Text>,
    },
    DeleteAgent {
        agent: Id,
    },
    TerminateAgent {
        agent: Id,
    },
    CreateIssue {
        id: Id,
        company: Id,
        fields: IssueFields,
    },
    UpdateIssue {
        issue: Id,
        fields: IssueFields,
        comment: Option<(Id, Text)>,
    },
    AddComment {
        issue: Id,
        id: Id,
        body: Text,
    },
    DeleteComment {
        issue: Id,
        comment: Id,
    },
    /// Links or unlinks an approval and an issue.
    LinkApproval {
        approval: Id,
        issue: Id,
        linked: bool,
    },
    /// An issue document op: `kind` picks put (with the latest revision as base, a stale or
    /// no base), restore, lock, unlock or delete; `key` a key of a few, one of them invalid.
    IssueDocument {
        issue: Id,
        key: u8,
        kind: u8,
        id: Id,
        body: Text,
    },
    /// An attachment or work product op (`world/deliverables.rs`): `kind` picks an upload, a
    /// removal, a work product's create, update or deletion.
    Deliverable {
        issue: Id,
        kind: u8,
        id: Id,
        body: Text,
    },
    /// An interaction op: `kind` picks a create (of each kind, one bound to the issue's plan,
    /// one with a bad payload, some keyed), an accept, a reject, a respond, verdicts or a
    /// withdraw, skip or cancel of one of the issue's pending cards (or of a made-up one).
    IssueInteraction {
        issue: Id,
        kind: u8,
        id: Id,
        body: Text,
    },
    Checkout {
        issue: Id,
        agent: Id,
        expected: Vec<IssueStatus>,
    },
    Release {
        issue: Id,
    },
    DeleteIssue {
        issue: Id,
    },
    UpdateCompany {
        company: Id,
        name: Option<Text>,
        status: CompanyStatus,
        loop_breaker: Option<roost_core::loop_breaker::LoopBreaker>,
    },
    StartRun {
        id: Id,
        agent: Id,
        issue: Option<Id>,
        source: Text,
    },
    FinishRun {
        run: Id,
        status: RunStatus,
        error: Option<Text>,
        usage: Usage,
        session: Option<Text>,
        log: Option<Text>,
    },
    /// `company: None`: the scope agent's company (or any company for a company budget).
    SetBudgetPolicy {
        id: Id,
        company: Option<Id>,
        agent_scope: Option<Id>,
        window: BudgetWindow,
        amount: u64,
        warn: u8,
        hard: bool,
    },
    /// `company: None`: the agent's company.
    RecordCostEvent {
        id: Id,
        company: Option<Id>,
        agent: Id,
        issue: Option<Id>,
        run: Option<Id>,
        provider: Text,
        tokens: u64,
        cents: u64,
        occurred: Option<i64>,
    },
    ResolveBudgetIncident {
        incident: Id,
        action: IncidentAction,
        amount: Option<u64>,
    },
    ReportUsage {
        run: Id,
        usage: Usage,
    },
    Wakeup {
        id: Id,
        agent: Id,
        issue: Option<Id>,
        reason: WakeReason,
        payload: Json,
        wake_key: Option<u8>,
    },
    TimerTick {
        agent: Id,
        wake: Id,
    },
    AssignRun {
        wake: Id,
        run: Id,
        worker: Id,
        token: Option<u8>,
    },
    AddRunToken {
        run: Id,
        token: u8,
    },
    RunStarted {
        run: Id,
    },
    RegisterWorker {
        id: Id,
        name: Text,
        adapters: Vec<AdapterType>,
        slots: u32,
        version: Text,
    },
    WorkerLost {
        worker: Id,
    },
    /// `shared`: to the agent's company's log.
    AppendMemoryEntry {
        id: Id,
        agent: Id,
        issue: Option<Id>,
        what: Text,
        error: Text,
        shared: bool,
    },
    /// `agent: None` is the company's shared scope; `name` picks from valid and invalid names.
    PutMemoryDocument {
        company: Option<Id>,
        agent: Option<Id>,
        name: u8,
        content: Text,
        expected: u8,
    },
    SetMemoryLive {
        agent: Id,
        doing: Option<Text>,
        coordinates: Option<Json>,
    },
    SetCompanyMemoryLive {
        company: Id,
        doing: Option<Text>,
        coordinates: Option<Json>,
    },
    /// Goals, projects, approvals, the org chart, routines, the agent's home.
    Governance(super::governance::GovOp),
    /// Several steps in one log entry; `nested` puts a batch inside it (always refused).
    Batch {
        steps: Vec<Step>,
        nested: bool,
    },
}
