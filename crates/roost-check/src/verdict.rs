//! What a checker returns: the violations it found, naming the operations involved.

use std::fmt;

use serde::Serialize;

use crate::history::OpId;

/// One broken property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The checker that found it (the `NAME` of its module).
    pub checker: &'static str,
    /// What it is about: `issue <id>`, `replica <node>`, `scope <key>`, `wake <id>`, ...
    pub subject: String,
    pub message: String,
    /// The history operations involved (may be empty when only final states are involved).
    pub ops: Vec<OpId>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.checker, self.subject, self.message)?;
        if !self.ops.is_empty() {
            let ids: Vec<String> = self.ops.iter().map(|id| id.to_string()).collect();
            write!(f, " (ops {})", ids.join(", "))?;
        }
        Ok(())
    }
}

/// A checker's result. It passed only if there are no violations and nothing was left
/// unchecked; `inconclusive` lists what could not be checked (e.g. too large) and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub checker: &'static str,
    pub violations: Vec<Violation>,
    pub inconclusive: Vec<String>,
}

impl Verdict {
    pub fn new(checker: &'static str) -> Self {
        Verdict {
            checker,
            violations: Vec::new(),
            inconclusive: Vec::new(),
        }
    }

    /// No violation and nothing left unchecked.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty() && self.inconclusive.is_empty()
    }

    /// The violations, if any; an inconclusive verdict without violations is `Ok`.
    pub fn into_result(self) -> Result<(), Vec<Violation>> {
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(self.violations)
        }
    }

    pub(crate) fn violation(
        &mut self,
        subject: impl Into<String>,
        message: impl Into<String>,
        ops: Vec<OpId>,
    ) {
        self.violations.push(Violation {
            checker: self.checker,
            subject: subject.into(),
            message: message.into(),
            ops,
        });
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if !self.violations.is_empty() {
            "FAILED"
        } else if !self.inconclusive.is_empty() {
            "INCONCLUSIVE"
        } else {
            "ok"
        };
        write!(f, "{}: {status}", self.checker)?;
        for v in &self.violations {
            write!(f, "\n  {v}")?;
        }
        for why in &self.inconclusive {
            write!(f, "\n  not checked: {why}")?;
        }
        Ok(())
    }
}
