//! Routines: Paperclip's routines, their triggers and the history of their
//! runs, as replicated rows; the schedule math (`cron` in an IANA time zone, `every`, `at`),
//! the per-routine stagger and the webhook signature check. All pure: the rules that fire a
//! routine are in `rules/routine.rs`, the bounds in [`check`].

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::entity::{string_enum, Priority};
use crate::error::DomainError;
use crate::time::Timestamp;

/// Catch-up firings at most after downtime (`enqueue_missed_with_cap`), as Paperclip.
pub const MAX_CATCH_UP_RUNS: u32 = 25;
pub const MAX_ROUTINES_PER_COMPANY: usize = 1_000;
pub const MAX_TRIGGERS_PER_ROUTINE: usize = 20;
/// Runs kept per routine: the oldest finished one is dropped past it.
pub const MAX_RUNS_KEPT_PER_ROUTINE: usize = 500;
pub const MAX_ROUTINE_TITLE_CHARS: usize = 200;
pub const MAX_ROUTINE_DESCRIPTION_CHARS: usize = 100_000;
pub const MAX_SCHEDULE_CHARS: usize = 200;
pub const MAX_TIMEZONE_CHARS: usize = 64;
pub const MAX_LABEL_CHARS: usize = 120;
/// `variables`, a run's `payload` and its `variables`, as JSON text.
pub const MAX_ROUTINE_JSON_BYTES: usize = 64 * 1024;
pub const MAX_SECRET_CHARS: usize = 256;
/// The shortest `every` period and the longest one.
pub const MIN_EVERY_MS: i64 = 1_000;
pub const MAX_EVERY_MS: i64 = 366 * 24 * 3600 * 1000;
/// The default spread of a routine's firings after their nominal instant (`stagger_ms`).
pub const DEFAULT_STAGGER_WINDOW_MS: u64 = 5_000;

string_enum!(RoutineStatus { Active => "active", Paused => "paused", Archived => "archived" });
string_enum!(ConcurrencyPolicy {
    CoalesceIfActive => "coalesce_if_active",
    AlwaysEnqueue => "always_enqueue",
    SkipIfActive => "skip_if_active",
});
string_enum!(CatchUpPolicy { SkipMissed => "skip_missed", EnqueueMissedWithCap => "enqueue_missed_with_cap" });
string_enum!(TriggerKind { Schedule => "schedule", Webhook => "webhook", Api => "api" });
string_enum!(SigningMode {
    None => "none",
    Bearer => "bearer",
    HmacSha256 => "hmac_sha256",
    GithubHmac => "github_hmac",
});
string_enum!(RoutineRunStatus {
    Received => "received",
    Coalesced => "coalesced",
    Skipped => "skipped",
    IssueCreated => "issue_created",
    Completed => "completed",
    Failed => "failed",
});
string_enum!(RunSource { Schedule => "schedule", Manual => "manual", Api => "api", Webhook => "webhook" });
string_enum!(RoutineAction { Issue => "issue", Wake => "wake" });

fn default_true() -> bool {
    true
}

fn default_alert_after() -> u32 {
    3
}

/// A routine: what a firing does (open an issue from its template, or wake its agent) and its
/// policies. Paperclip's fields; `action`, `failureAlertAfter` and the counters are Roost's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Routine {
    pub id: String,
    pub company_id: String,
    pub title: String,
    pub description: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub priority: Priority,
    pub status: RoutineStatus,
    pub concurrency_policy: ConcurrencyPolicy,
    pub catch_up_policy: CatchUpPolicy,
    /// Kept as sent (Paperclip's variable definitions); `{{name}}` in the title and description
    /// is replaced by a run's value or the variable's `defaultValue`.
    pub variables: serde_json::Value,
    pub project_id: Option<String>,
    pub goal_id: Option<String>,
    pub parent_issue_id: Option<String>,
    pub action: RoutineAction,
    /// Failures in a row that open an alert issue (0: never).
    #[serde(default = "default_alert_after")]
    pub failure_alert_after: u32,
    #[serde(default)]
    pub consecutive_failures: u32,
    /// This streak of failures has had its alert (cleared by a success).
    #[serde(default)]
    pub alerted: bool,
    pub alert_issue_id: Option<String>,
    /// The issue (or wake) the last firing opened: what "active" looks at.
    pub last_issue_id: Option<String>,
    pub last_wake_id: Option<String>,
    pub last_triggered_at: Option<Timestamp>,
    pub created_by_agent_id: Option<String>,
    pub created_by_user_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A trigger of a routine. `secret` is a webhook's shared secret: stored (HMAC needs it) and
/// never shown ([`trigger_view`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineTrigger {
    pub id: String,
    pub company_id: String,
    pub routine_id: String,
    pub kind: TriggerKind,
    pub label: Option<String>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// `m h dom mon dow`, `every <duration>` or `at <RFC 3339 time>`.
    pub cron_expression: Option<String>,
    pub timezone: Option<String>,
    /// The next nominal firing instant: apply fires it once and moves it on.
    pub next_run_at: Option<Timestamp>,
    pub last_fired_at: Option<Timestamp>,
    pub last_result: Option<String>,
    /// Firings in a row made after their successor was due already (catch-up).
    #[serde(default)]
    pub late_firings: u32,
    pub public_id: Option<String>,
    pub signing_mode: Option<SigningMode>,
    pub replay_window_sec: Option<u32>,
    #[serde(default)]
    pub secret: Option<String>,
    pub last_rotated_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One firing of a routine and its outcome (Paperclip's `routine_runs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutineRun {
    pub id: String,
    pub company_id: String,
    pub routine_id: String,
    pub trigger_id: Option<String>,
    pub source: RunSource,
    pub status: RoutineRunStatus,
    /// When the firing was applied (the command's time).
    pub triggered_at: Timestamp,
    /// A schedule firing's nominal instant (Roost): each is fired once.
    pub scheduled_for: Option<Timestamp>,
    pub idempotency_key: Option<String>,
    pub trigger_payload: serde_json::Value,
    pub linked_issue_id: Option<String>,
    pub linked_wake_id: Option<String>,
    pub coalesced_into_run_id: Option<String>,
    pub failure_reason: Option<String>,
    pub completed_at: Option<Timestamp>,
    /// The slot of the command that made it: a routine's runs in order.
    pub seq: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A row a routine rule writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoutineChange {
    Routine(Routine),
    Trigger(RoutineTrigger),
    TriggerDeleted(String),
    Run(RoutineRun),
    RunDropped(String),
}

/// Routines, triggers and runs with their derived indexes.
#[derive(Clone, Debug, Default)]
pub struct RoutineState {
    pub routines: BTreeMap<String, Routine>,
    pub triggers: BTreeMap<String, RoutineTrigger>,
    pub runs: BTreeMap<String, RoutineRun>,
    trigger_by_public_id: BTreeMap<String, String>,
    /// (routine, seq) → run id: a routine's history in order.
    runs_by_routine: BTreeMap<(String, u64), String>,
    /// Issue → the run that opened it (status `issue_created`), to follow its outcome.
    run_by_issue: BTreeMap<String, String>,
    /// Routines per company (the quota).
    per_company: BTreeMap<String, usize>,
}

impl RoutineState {
    pub fn put(&mut self, change: RoutineChange) {
        match change {
            RoutineChange::Routine(r) => {
                if !self.routines.contains_key(&r.id) {
                    *self.per_company.entry(r.company_id.clone()).or_default() += 1;
                }
                self.routines.insert(r.id.clone(), r);
            }
            RoutineChange::Trigger(t) => {
                if let Some(old) = self.triggers.get(&t.id) {
                    if let Some(p) = &old.public_id {
                        self.trigger_by_public_id.remove(p);
                    }
                }
                if let Some(p) = &t.public_id {
                    self.trigger_by_public_id.insert(p.clone(), t.id.clone());
                }
                self.triggers.insert(t.id.clone(), t);
            }
            RoutineChange::TriggerDeleted(id) => {
                if let Some(old) = self.triggers.remove(&id) {
                    if let Some(p) = &old.public_id {
                        self.trigger_by_public_id.remove(p);
                    }
                }
            }
            RoutineChange::Run(r) => {
                if let Some(issue) = &r.linked_issue_id {
                    if r.status == RoutineRunStatus::IssueCreated {
                        self.run_by_issue.insert(issue.clone(), r.id.clone());
                    } else if self.run_by_issue.get(issue) == Some(&r.id) {
                        self.run_by_issue.remove(issue);
                    }
                }
                self.runs_by_routine
                    .insert((r.routine_id.clone(), r.seq), r.id.clone());
                self.runs.insert(r.id.clone(), r);
            }
            RoutineChange::RunDropped(id) => {
                if let Some(old) = self.runs.remove(&id) {
                    self.runs_by_routine
                        .remove(&(old.routine_id.clone(), old.seq));
                    if let Some(issue) = &old.linked_issue_id {
                        if self.run_by_issue.get(issue) == Some(&id) {
                            self.run_by_issue.remove(issue);
                        }
                    }
                }
            }
        }
    }

    pub fn trigger_by_public_id(&self, public_id: &str) -> Option<&RoutineTrigger> {
        self.trigger_by_public_id
            .get(public_id)
            .and_then(|id| self.triggers.get(id))
    }

    /// A routine's runs, newest first.
    pub fn runs_of<'a>(&'a self, routine_id: &str) -> impl Iterator<Item = &'a RoutineRun> {
        let range = (routine_id.to_string(), 0)..=(routine_id.to_string(), u64::MAX);
        self.runs_by_routine
            .range(range)
            .rev()
            .filter_map(|(_, id)| self.runs.get(id))
    }

    pub fn triggers_of<'a>(
        &'a self,
        routine_id: &'a str,
    ) -> impl Iterator<Item = &'a RoutineTrigger> {
        self.triggers
            .values()
            .filter(move |t| t.routine_id == routine_id)
    }

    /// The run that opened `issue_id` and waits for its outcome.
    pub fn run_for_issue(&self, issue_id: &str) -> Option<&RoutineRun> {
        self.run_by_issue
            .get(issue_id)
            .and_then(|id| self.runs.get(id))
    }

    pub fn count_of_company(&self, company_id: &str) -> usize {
        self.per_company.get(company_id).copied().unwrap_or(0)
    }
}

/// A trigger as the API shows it: everything but the secret (`hasSecret` says whether one is
/// set).
pub fn trigger_view(t: &RoutineTrigger) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap_or(serde_json::Value::Null);
    if let Some(map) = v.as_object_mut() {
        map.remove("secret");
        map.remove("lateFirings");
        map.insert(
            "hasSecret".into(),
            serde_json::Value::Bool(t.secret.is_some()),
        );
    }
    v
}

/// Instants a schedule is computed for, in ms: 0001-01-01 to 9999-12-31 UTC, inside chrono's
/// range whatever the time zone's offset.
const SCHEDULE_RANGE_MS: (i64, i64) = (-62_135_596_800_000, 253_402_300_800_000);

/// A parsed schedule.
#[derive(Clone, Debug)]
pub enum Schedule {
    Cron {
        cron: Box<croner::Cron>,
        tz: chrono_tz::Tz,
    },
    /// Every `period_ms` from `anchor` (the trigger's creation).
    Every {
        period_ms: i64,
        anchor: Timestamp,
    },
    At(Timestamp),
}

/// `90s`, `5m`, `2h`, `1d`, `1h30m`, `500ms` → milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("a duration such as 30s, 5m, 2h or 1d is required".into());
    }
    let (mut total, mut digits, mut rest) = (0i64, String::new(), text);
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() {
            digits.push(c);
            rest = &rest[1..];
            continue;
        }
        let (unit_ms, len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            match c {
                's' => (1_000, 1),
                'm' => (60_000, 1),
                'h' => (3_600_000, 1),
                'd' => (86_400_000, 1),
                _ => {
                    return Err(format!(
                        "`{text}` is not a duration: use units ms, s, m, h, d"
                    ))
                }
            }
        };
        let n: i64 = digits
            .parse()
            .map_err(|_| format!("`{text}` is not a duration: a number must precede each unit"))?;
        digits.clear();
        total = n
            .checked_mul(unit_ms)
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(|| format!("`{text}` is too long a duration"))?;
        rest = &rest[len..];
    }
    if !digits.is_empty() {
        return Err(format!(
            "`{text}` needs a unit after its last number (s, m, h, d)"
        ));
    }
    Ok(total)
}

impl Schedule {
    /// Parses a trigger's `cronExpression`: five cron fields (in `timezone`, IANA, default UTC),
    /// `every <duration>` (from `anchor`) or `at <RFC 3339 time>`.
    pub fn parse(
        expression: &str,
        timezone: Option<&str>,
        anchor: Timestamp,
    ) -> Result<Schedule, String> {
        let expr = expression.trim();
        if let Some(d) = expr.strip_prefix("every ") {
            let period_ms = parse_duration_ms(d)?;
            if !(MIN_EVERY_MS..=MAX_EVERY_MS).contains(&period_ms) {
                return Err("an `every` period must be between 1s and 366d".into());
            }
            return Ok(Schedule::Every { period_ms, anchor });
        }
        if let Some(t) = expr.strip_prefix("at ") {
            let at = Timestamp::parse_rfc3339(t.trim()).ok_or_else(|| {
                format!(
                    "`{}` is not an RFC 3339 time such as 2030-01-01T09:00:00Z",
                    t.trim()
                )
            })?;
            return Ok(Schedule::At(at));
        }
        let fields = expr.split_whitespace().count();
        if fields != 5 {
            return Err(format!(
                "`{expr}` has {fields} fields; a cron expression has 5 (minute hour day-of-month month day-of-week), or use `every 5m` / `at 2030-01-01T09:00:00Z`"
            ));
        }
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| format!("`{expr}` is not a valid cron expression: {e}"))?;
        let tz_name = timezone
            .map(str::trim)
            .filter(|z| !z.is_empty())
            .unwrap_or("UTC");
        let tz = chrono_tz::Tz::from_str(tz_name).map_err(|_| {
            format!("`{tz_name}` is not an IANA time zone such as Europe/Paris or UTC")
        })?;
        Ok(Schedule::Cron {
            cron: Box::new(cron),
            tz,
        })
    }

    /// The first instant strictly after `t`, if any (none outside years 1 to 9999: a time zone's
    /// offset past chrono's range panicked in apply, on every replica).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        if !(SCHEDULE_RANGE_MS.0..SCHEDULE_RANGE_MS.1).contains(&t.0) {
            return None;
        }
        match self {
            Schedule::At(at) => (*at > t).then_some(*at),
            Schedule::Every { period_ms, anchor } => {
                if t < *anchor {
                    return Some(Timestamp(anchor.0.saturating_add(*period_ms)));
                }
                let k = t.0.saturating_sub(anchor.0) / period_ms + 1;
                Some(Timestamp(
                    anchor.0.saturating_add(k.saturating_mul(*period_ms)),
                ))
            }
            Schedule::Cron { cron, tz } => {
                let utc = chrono::DateTime::from_timestamp_millis(t.0)?;
                let local = utc.with_timezone(tz);
                let next = cron.find_next_occurrence(&local, false).ok()?;
                let ms = next.timestamp_millis();
                // Croner works in whole seconds: never return `t` itself or before.
                if ms > t.0 {
                    Some(Timestamp(ms))
                } else {
                    self.next_after(Timestamp((t.0 / 1000 + 1) * 1000))
                }
            }
        }
    }

    /// The first instant of a trigger created at `created`: an `at` time as given (even if it
    /// is already past: it fires at once), otherwise the first one after creation.
    pub fn first(&self, created: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::At(at) => Some(*at),
            _ => self.next_after(created),
        }
    }
}

/// The delay after its nominal instant at which the leader proposes a routine's firing: a
/// hash of the routine id into `[0, window_ms)`, so routines due at the same instant spread
/// out, each always by the same amount (a new leader staggers alike).
pub fn stagger_ms(routine_id: &str, window_ms: u64) -> i64 {
    if window_ms == 0 {
        return 0;
    }
    let digest = Sha256::digest(routine_id.as_bytes());
    let mut word = [0u8; 8];
    word.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(word) % window_ms) as i64
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for part in message {
        inner.update(part);
    }
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// Compares in time independent of where the bytes differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a webhook request carried for its signature check.
#[derive(Clone, Debug, Default)]
pub struct WebhookRequest<'a> {
    pub authorization: Option<&'a str>,
    /// `X-Paperclip-Signature` (`sha256=<hex>` or `<hex>`).
    pub signature: Option<&'a str>,
    /// `X-Hub-Signature-256`, for `github_hmac`.
    pub hub_signature: Option<&'a str>,
    /// `X-Paperclip-Timestamp`: Unix seconds (or milliseconds).
    pub timestamp: Option<&'a str>,
    pub body: &'a [u8],
}

/// Checks a webhook request against its trigger, at `now`, as Paperclip does: `none` accepts
/// (the public id is the secret), `bearer` wants `Authorization: Bearer <secret>`,
/// `hmac_sha256` wants `hex(HMAC(secret, "<timestamp>." + body))` with the timestamp within the
/// replay window (default 300 s) of `now`, `github_hmac` `hex(HMAC(secret, body))`. The error is
/// the sentence for the 401.
pub fn verify_webhook(
    trigger: &RoutineTrigger,
    req: &WebhookRequest<'_>,
    now: Timestamp,
) -> Result<(), String> {
    let mode = trigger.signing_mode.unwrap_or(SigningMode::Bearer);
    if mode == SigningMode::None {
        return Ok(());
    }
    let secret = trigger
        .secret
        .as_deref()
        .ok_or("this webhook trigger has no secret; rotate its secret first")?;
    let hex_of = |s: &str| s.trim().trim_start_matches("sha256=").to_ascii_lowercase();
    match mode {
        SigningMode::None => Ok(()),
        SigningMode::Bearer => {
            let expected = format!("Bearer {secret}");
            let given = req.authorization.unwrap_or("").trim();
            if constant_time_eq(given.as_bytes(), expected.as_bytes()) {
                Ok(())
            } else {
                Err("the Authorization header must be `Bearer <the trigger's secret>`".into())
            }
        }
        SigningMode::GithubHmac => {
            let given = req
                .hub_signature
                .or(req.signature)
                .ok_or("the X-Hub-Signature-256 header is missing")?;
            let expected = hex::encode(hmac_sha256(secret.as_bytes(), &[req.body]));
            if constant_time_eq(hex_of(given).as_bytes(), expected.as_bytes()) {
                Ok(())
            } else {
                Err("the signature does not match HMAC-SHA256 of the body with the trigger's secret".into())
            }
        }
        SigningMode::HmacSha256 => {
            let (Some(given), Some(ts)) = (req.signature, req.timestamp) else {
                return Err(
                    "X-Paperclip-Signature and X-Paperclip-Timestamp are both required".into(),
                );
            };
            let ts = ts.trim();
            let raw: i64 = ts
                .parse()
                .map_err(|_| "X-Paperclip-Timestamp must be Unix seconds".to_string())?;
            let at_ms = if raw > 1_000_000_000_000 {
                raw
            } else {
                raw.saturating_mul(1000)
            };
            let window_ms = i64::from(trigger.replay_window_sec.unwrap_or(300)) * 1000;
            if now.0.saturating_sub(at_ms).abs() > window_ms {
                return Err(format!(
                    "X-Paperclip-Timestamp is outside the replay window of {} s; sign with the current time",
                    window_ms / 1000
                ));
            }
            let expected = hex::encode(hmac_sha256(
                secret.as_bytes(),
                &[ts.as_bytes(), b".", req.body],
            ));
            if constant_time_eq(hex_of(given).as_bytes(), expected.as_bytes()) {
                Ok(())
            } else {
                Err("the signature does not match HMAC-SHA256 of `<timestamp>.<body>` with the trigger's secret".into())
            }
        }
    }
}

/// Replaces `{{name}}` (spaces allowed inside the braces) by `values[name]`; other text stays.
pub fn interpolate(template: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = rest[start + 2..start + 2 + len].trim();
        out.push_str(&rest[..start]);
        match values.get(name) {
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[start..start + 2 + len + 2]),
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The values of a routine's variables for one run: each definition's `defaultValue`, over
/// which `given` (a run's `variables`, or a webhook payload's) wins.
pub fn variable_values(
    definitions: &serde_json::Value,
    given: &serde_json::Value,
) -> BTreeMap<String, String> {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let mut values = BTreeMap::new();
    for def in definitions.as_array().into_iter().flatten() {
        if let (Some(name), Some(v)) = (
            def.get("name").and_then(|n| n.as_str()),
            def.get("defaultValue").and_then(text),
        ) {
            values.insert(name.to_string(), v);
        }
    }
    for (name, v) in given.as_object().into_iter().flatten() {
        if let Some(v) = text(v) {
            values.insert(name.clone(), v);
        }
    }
    values
}

pub(crate) fn json_bytes(field: &str, value: &serde_json::Value) -> Result<(), DomainError> {
    let len = serde_json::to_vec(value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if len > MAX_ROUTINE_JSON_BYTES {
        return Err(DomainError::too_large(
            field,
            MAX_ROUTINE_JSON_BYTES as u64,
            "bytes of JSON",
        ));
    }
    Ok(())
}

pub(crate) fn chars(field: &str, value: Option<&str>, max: usize) -> Result<(), DomainError> {
    if value.is_some_and(|v| v.chars().count() > max) {
        return Err(DomainError::too_large(field, max as u64, "characters"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "routine_tests.rs"]
mod tests;
