//! The recorded client history: one [`Op`] per client operation, stored as JSON lines.
//!
//! One line per operation, for example:
//!
//! ```json
//! {"id":7,"process":2,"call_ns":1500,"return_ns":2300,"action":{"kind":"checkout","issue_id":"i1","agent_id":"a1","run_id":"r1"},"outcome":{"type":"ok","token":42}}
//! {"id":8,"process":3,"call_ns":1600,"return_ns":9000,"action":{"kind":"comment","issue_id":"i1"},"outcome":{"type":"unknown","reason":"timeout"}}
//! ```
//!
//! Recording rules the checkers rely on:
//! - `call_ns` and `return_ns` are read from one monotonic clock for all processes. For an
//!   `unknown` outcome `return_ns` is when the client gave up.
//! - A request retried with the same `Idempotency-Key` is ONE operation, from the first
//!   attempt's call to the last attempt's return: a retry answers with the first outcome, so
//!   recording the attempts separately would make an old token look new.
//! - Every way a run can end is recorded as a [`Action::RunEnd`] (ending a run releases its
//!   checkouts). A run that may end out of the client's sight (its worker is cut off, killed or
//!   paused) gets a `run_end` with outcome `unknown`, called when that fault began; otherwise
//!   its checkout counts as held until the end of the history.

use std::collections::HashMap;
use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Identifies an operation within one history.
pub type OpId = u64;

/// One client operation: what was asked, when, and what came back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Unique within the history.
    pub id: OpId,
    /// The client (logical process) that issued it.
    pub process: u64,
    /// When the request was sent (monotonic nanoseconds).
    pub call_ns: i64,
    /// When the response arrived, or the client gave up (`unknown`).
    pub return_ns: i64,
    pub action: Action,
    pub outcome: Outcome,
}

impl Op {
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok(_))
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self.outcome, Outcome::Unknown { .. })
    }

    /// The result of an `ok` operation.
    pub fn ok_result(&self) -> Option<&OkResult> {
        match &self.outcome {
            Outcome::Ok(result) => Some(result),
            _ => None,
        }
    }

    /// This operation returned strictly before `other` was called (equal times: concurrent).
    pub fn precedes(&self, other: &Op) -> bool {
        self.return_ns < other.call_ns
    }

    /// The operation as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("an Op always serializes")
    }
}

/// What the client asked for, with its arguments. Tagged by `kind` in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// `POST /api/issues/{issue}/checkout` by `agent_id` within `run_id`.
    Checkout {
        issue_id: String,
        agent_id: String,
        run_id: String,
    },
    /// `POST /api/issues/{issue}/release`, within `run_id` (`None`: an administrator).
    Release {
        issue_id: String,
        #[serde(default)]
        run_id: Option<String>,
    },
    /// A run ended (finished, cancelled, timed out or lost): it releases all its checkouts.
    RunEnd { run_id: String },
    /// A comment posted on an issue.
    Comment {
        issue_id: String,
        #[serde(default)]
        run_id: Option<String>,
    },
    /// A cost event reported by an agent.
    CostReport {
        agent_id: String,
        #[serde(default)]
        run_id: Option<String>,
        amount_cents: u64,
    },
    /// `POST /api/agents/me/memory/entries` by `agent_id` within `run_id`: a memory log entry.
    MemoryEntry {
        agent_id: String,
        #[serde(default)]
        run_id: Option<String>,
    },
    /// `POST /api/agents/{agent}/wakeup`.
    Wake {
        agent_id: String,
        #[serde(default)]
        issue_id: Option<String>,
    },
    /// A read of a node's applied index and state hash.
    ReadState { node: String },
    /// Anything else the workload does; `write` says whether it proposes a command.
    Other { name: String, write: bool },
}

impl Action {
    /// Proposes a command to the cluster (everything but reads).
    pub fn is_write(&self) -> bool {
        match self {
            Action::ReadState { .. } => false,
            Action::Other { write, .. } => *write,
            _ => true,
        }
    }

    /// The issue it acts on, if any.
    pub fn issue_id(&self) -> Option<&str> {
        match self {
            Action::Checkout { issue_id, .. }
            | Action::Release { issue_id, .. }
            | Action::Comment { issue_id, .. } => Some(issue_id),
            Action::Wake { issue_id, .. } => issue_id.as_deref(),
            _ => None,
        }
    }
}

/// How the operation ended. Tagged by `type` in JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    /// It happened, with these results.
    Ok(OkResult),
    /// It definitely did not happen (a 4xx answer such as 409 conflict).
    Failed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// It may or may not have happened (timeout, connection reset, 503).
    Unknown {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// Result fields of an `ok` operation; each action fills the ones it has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OkResult {
    /// Checkout: the fencing token returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Comment: the id of the comment created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment_id: Option<String>,
    /// Cost report: the id of the cost event created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_event_id: Option<String>,
    /// Wake: the id of the wake created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_id: Option<String>,
    /// Memory entry: its id and its sequence number among the agent's entries (the server
    /// keeps an agent's newest entries only, so an entry may later be dropped by newer ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_entry_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_entry_seq: Option<u64>,
    /// Read state: the applied index and the state hash that belongs to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_hash: Option<String>,
}

/// A whole history, in the order recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub ops: Vec<Op>,
}

impl History {
    /// Reads JSON lines (blank lines are skipped) and validates them (see [`History::validate`]).
    /// An error names the 1-based line.
    pub fn read_jsonl(reader: impl BufRead) -> Result<History, Error> {
        let mut ops = Vec::new();
        let mut lines = Vec::new();
        for (index, line) in reader.lines().enumerate() {
            let number = index + 1;
            let line = line.map_err(|source| Error::Io {
                line: number,
                source,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let op: Op = serde_json::from_str(&line).map_err(|source| Error::Json {
                line: number,
                source,
            })?;
            ops.push(op);
            lines.push(number);
        }
        check_ops(&ops, |position| lines[position])?;
        Ok(History { ops })
    }

    /// [`History::read_jsonl`] on a string.
    pub fn parse_jsonl(text: &str) -> Result<History, Error> {
        History::read_jsonl(text.as_bytes())
    }

    /// Ids are unique and no operation returns before it is called. Errors name the
    /// operation's 1-based position.
    pub fn validate(&self) -> Result<(), Error> {
        check_ops(&self.ops, |position| position + 1)
    }

    /// Writes one JSON line per operation.
    pub fn write_jsonl(&self, mut writer: impl Write) -> std::io::Result<()> {
        for op in &self.ops {
            writeln!(writer, "{}", op.to_json_line())?;
        }
        Ok(())
    }
}

impl From<Vec<Op>> for History {
    fn from(ops: Vec<Op>) -> Self {
        History { ops }
    }
}

fn check_ops(ops: &[Op], line_of: impl Fn(usize) -> usize) -> Result<(), Error> {
    let mut seen: HashMap<OpId, usize> = HashMap::new();
    for (position, op) in ops.iter().enumerate() {
        let line = line_of(position);
        if let Some(&first) = seen.get(&op.id) {
            return Err(Error::DuplicateId {
                line,
                id: op.id,
                first,
            });
        }
        seen.insert(op.id, line);
        if op.return_ns < op.call_ns {
            return Err(Error::ReturnBeforeCall {
                line,
                id: op.id,
                call_ns: op.call_ns,
                return_ns: op.return_ns,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKOUT: &str = r#"{"id":7,"process":2,"call_ns":1500,"return_ns":2300,"action":{"kind":"checkout","issue_id":"i1","agent_id":"a1","run_id":"r1"},"outcome":{"type":"ok","token":42}}"#;
    const COMMENT: &str = r#"{"id":8,"process":3,"call_ns":1600,"return_ns":9000,"action":{"kind":"comment","issue_id":"i1"},"outcome":{"type":"unknown","reason":"timeout"}}"#;
    const FAILED: &str = r#"{"id":9,"process":3,"call_ns":9100,"return_ns":9200,"action":{"kind":"release","issue_id":"i1","run_id":"r2"},"outcome":{"type":"failed","status":409}}"#;

    #[test]
    fn parses_the_documented_format() {
        let history = History::parse_jsonl(&format!("{CHECKOUT}\n{COMMENT}\n{FAILED}\n")).unwrap();
        assert_eq!(history.ops.len(), 3);
        let checkout = &history.ops[0];
        assert_eq!(
            checkout.action,
            Action::Checkout {
                issue_id: "i1".into(),
                agent_id: "a1".into(),
                run_id: "r1".into()
            }
        );
        assert_eq!(checkout.ok_result().unwrap().token, Some(42));
        assert!(history.ops[1].is_unknown());
        assert_eq!(
            history.ops[2].outcome,
            Outcome::Failed {
                status: Some(409),
                error: None
            }
        );
        assert_eq!(history.ops[2].action.issue_id(), Some("i1"));
    }

    #[test]
    fn round_trips_through_json_lines() {
        let history = History::parse_jsonl(&format!("{CHECKOUT}\n{COMMENT}\n{FAILED}")).unwrap();
        let mut out = Vec::new();
        history.write_jsonl(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().next().unwrap(), CHECKOUT);
        assert_eq!(History::parse_jsonl(&text).unwrap(), history);
    }

    #[test]
    fn skips_blank_lines_and_counts_them() {
        let text = format!("\n{CHECKOUT}\n   \n{{\"id\": 8, oops}}\n");
        match History::parse_jsonl(&text) {
            Err(Error::Json { line, .. }) => assert_eq!(line, 4),
            other => panic!("expected a JSON error on line 4, got {other:?}"),
        }
    }

    #[test]
    fn malformed_line_reports_its_line_number() {
        let bad = r#"{"id":10,"process":1,"call_ns":1,"return_ns":2,"action":{"kind":"teleport"},"outcome":{"type":"ok"}}"#;
        let err = History::parse_jsonl(&format!("{CHECKOUT}\n{COMMENT}\n{bad}\n")).unwrap_err();
        assert!(matches!(err, Error::Json { line: 3, .. }), "{err}");
        assert!(err.to_string().starts_with("line 3:"), "{err}");
    }

    #[test]
    fn rejects_duplicate_ids() {
        let err = History::parse_jsonl(&format!("{CHECKOUT}\n{CHECKOUT}\n")).unwrap_err();
        assert!(
            matches!(
                err,
                Error::DuplicateId {
                    line: 2,
                    id: 7,
                    first: 1
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn rejects_return_before_call() {
        let backwards = CHECKOUT.replace("\"return_ns\":2300", "\"return_ns\":1000");
        let err = History::parse_jsonl(&backwards).unwrap_err();
        assert!(
            matches!(err, Error::ReturnBeforeCall { line: 1, id: 7, .. }),
            "{err}"
        );
        let in_memory = History::parse_jsonl(CHECKOUT).unwrap();
        let mut ops = in_memory.ops.clone();
        ops.push(Op {
            return_ns: 0,
            id: 99,
            ..ops[0].clone()
        });
        assert!(matches!(
            History::from(ops).validate(),
            Err(Error::ReturnBeforeCall {
                line: 2,
                id: 99,
                ..
            })
        ));
    }

    #[test]
    fn reads_are_not_writes() {
        assert!(!Action::ReadState { node: "n1".into() }.is_write());
        assert!(!Action::Other {
            name: "list".into(),
            write: false
        }
        .is_write());
        assert!(Action::RunEnd { run_id: "r".into() }.is_write());
    }
}
