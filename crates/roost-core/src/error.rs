//! Why a command was refused. Refusals are part of the replicated outcome: every replica refuses
//! the same command for the same reason and changes nothing.

use serde::{Deserialize, Serialize};

/// The class of a refusal; the server maps each class to one HTTP status and one gRPC code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    BadRequest,
    Forbidden,
    NotFound,
    Conflict,
    Unprocessable,
    TooLarge,
    TooMany,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum DomainError {
    #[error("invalid {field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{message}")]
    Forbidden { message: String },
    #[error("{entity} {id} not found")]
    NotFound { entity: String, id: String },
    #[error("{entity} {id} already exists")]
    AlreadyExists { entity: String, id: String },
    #[error("issue {issue_id} is checked out by agent {holder_agent_id} (run {holder_run_id})")]
    CheckoutConflict {
        issue_id: String,
        status: String,
        holder_agent_id: String,
        holder_run_id: String,
        token: u64,
    },
    #[error("issue {issue_id} has status {status}, expected one of {expected:?}")]
    StatusConflict {
        issue_id: String,
        status: String,
        expected: Vec<String>,
    },
    #[error("run {run_id} is {status}: writes for it are fenced")]
    StaleRun { run_id: String, status: String },
    #[error("{message}")]
    Conflict { message: String },
    #[error("{message}")]
    Invariant { rule: String, message: String },
    #[error("{field} is too large: at most {limit} {unit}")]
    TooLarge {
        field: String,
        limit: u64,
        unit: String,
    },
    /// A per-company quota (`limits.rs`) is used up.
    #[error("{message}")]
    QuotaExceeded {
        quota: String,
        limit: u64,
        message: String,
    },
    #[error("this Idempotency-Key was already used for a different request; send a new key for a new request")]
    IdempotencyKeyReused,
}

impl DomainError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        DomainError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn not_found(entity: &str, id: &str) -> Self {
        DomainError::NotFound {
            entity: entity.into(),
            id: id.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        DomainError::Forbidden {
            message: message.into(),
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        DomainError::Conflict {
            message: message.into(),
        }
    }

    pub fn invariant(rule: &str, message: impl Into<String>) -> Self {
        DomainError::Invariant {
            rule: rule.into(),
            message: message.into(),
        }
    }

    pub fn too_large(field: impl Into<String>, limit: u64, unit: impl Into<String>) -> Self {
        DomainError::TooLarge {
            field: field.into(),
            limit,
            unit: unit.into(),
        }
    }

    /// Room for one more `what` (a plural: "documents") on issue `identifier`, which holds
    /// `count` of the `limit` it may: once full, a quota refusal that says what the caller can
    /// do instead (`remedy`). The one shape of every per-issue bound.
    pub fn room_on_issue(
        quota: &str,
        what: &str,
        (count, limit): (usize, usize),
        identifier: &str,
        remedy: &str,
    ) -> Result<(), DomainError> {
        if count < limit {
            return Ok(());
        }
        Err(DomainError::quota(
            quota,
            limit as u64,
            format!("issue {identifier} has {limit} {what}, the most it may have; {remedy}"),
        ))
    }

    pub fn quota(quota: &str, limit: u64, message: impl Into<String>) -> Self {
        DomainError::QuotaExceeded {
            quota: quota.into(),
            limit,
            message: message.into(),
        }
    }

    pub fn class(&self) -> ErrorClass {
        match self {
            DomainError::Invalid { .. } => ErrorClass::BadRequest,
            DomainError::Forbidden { .. } => ErrorClass::Forbidden,
            DomainError::NotFound { .. } => ErrorClass::NotFound,
            DomainError::AlreadyExists { .. }
            | DomainError::CheckoutConflict { .. }
            | DomainError::StatusConflict { .. }
            | DomainError::StaleRun { .. }
            | DomainError::Conflict { .. } => ErrorClass::Conflict,
            DomainError::Invariant { .. } | DomainError::IdempotencyKeyReused => {
                ErrorClass::Unprocessable
            }
            DomainError::TooLarge { .. } => ErrorClass::TooLarge,
            DomainError::QuotaExceeded { .. } => ErrorClass::TooMany,
        }
    }

    /// The stable machine-readable code in the `error` field of an API error.
    pub fn code(&self) -> &'static str {
        match self {
            DomainError::Invalid { .. } => "bad_request",
            DomainError::Forbidden { .. } => "forbidden",
            DomainError::NotFound { .. } => "not_found",
            DomainError::AlreadyExists { .. } => "already_exists",
            DomainError::CheckoutConflict { .. } => "checkout_conflict",
            DomainError::StatusConflict { .. } => "status_conflict",
            DomainError::StaleRun { .. } => "stale_run",
            DomainError::Conflict { .. } => "conflict",
            DomainError::Invariant { .. } => "invariant_violation",
            DomainError::TooLarge { .. } => "too_large",
            DomainError::QuotaExceeded { .. } => "quota_exceeded",
            DomainError::IdempotencyKeyReused => "idempotency_key_reused",
        }
    }

    /// Structured fields for the `details` of an API error.
    pub fn details(&self) -> serde_json::Value {
        match self {
            DomainError::Invalid { field, .. } => serde_json::json!({ "field": field }),
            DomainError::NotFound { entity, id } | DomainError::AlreadyExists { entity, id } => {
                serde_json::json!({ "entity": entity, "id": id })
            }
            DomainError::CheckoutConflict {
                issue_id,
                status,
                holder_agent_id,
                holder_run_id,
                token,
            } => {
                serde_json::json!({
                    "issueId": issue_id,
                    "status": status,
                    "assigneeAgentId": holder_agent_id,
                    "checkoutRunId": holder_run_id,
                    "executionRunId": holder_run_id,
                    "checkoutToken": token,
                })
            }
            DomainError::StatusConflict {
                issue_id,
                status,
                expected,
            } => {
                serde_json::json!({ "issueId": issue_id, "status": status, "expectedStatuses": expected })
            }
            DomainError::StaleRun { run_id, status } => {
                serde_json::json!({ "runId": run_id, "status": status })
            }
            DomainError::Invariant { rule, .. } => serde_json::json!({ "rule": rule }),
            DomainError::TooLarge { field, limit, unit } => {
                serde_json::json!({ "field": field, "limit": limit, "unit": unit })
            }
            DomainError::QuotaExceeded { quota, limit, .. } => {
                serde_json::json!({ "quota": quota, "limit": limit })
            }
            DomainError::Forbidden { .. }
            | DomainError::Conflict { .. }
            | DomainError::IdempotencyKeyReused => serde_json::Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DomainError;

    /// Every per-issue bound (documents, interactions, attachments, work products) refuses
    /// with one shape: its quota name and limit, and a sentence naming the issue and what to do.
    #[test]
    fn an_issue_with_room_passes_and_a_full_one_says_which_and_what_to_do() {
        let room = |count| {
            DomainError::room_on_issue(
                "documents_per_issue",
                "documents",
                (count, 100),
                "ACM-7",
                "update one of them",
            )
        };
        assert!(room(99).is_ok());
        assert_eq!(
            room(100),
            Err(DomainError::QuotaExceeded {
                quota: "documents_per_issue".into(),
                limit: 100,
                message: "issue ACM-7 has 100 documents, the most it may have; update one of them"
                    .into(),
            })
        );
    }
}
