//! Workers: registration, and the consequences of a lost lease.

use std::collections::BTreeMap;

use serde_json::json;

use super::wake::{enqueue, Pending, WakeRequest};
use super::{end_run, require_id, require_text, Ctx};
use crate::command::{ActorKind, Outcome};
use crate::entity::*;
use crate::error::DomainError;
use crate::state::{ActivityNote, Change, Decision};

fn require_worker_or_admin(ctx: &Ctx<'_>, worker_id: &str) -> Result<(), DomainError> {
    match ctx.actor.kind {
        ActorKind::User | ActorKind::System => Ok(()),
        ActorKind::Worker if ctx.actor.id == worker_id => Ok(()),
        _ => Err(DomainError::forbidden(
            "only the worker itself or an administrator can do this",
        )),
    }
}

pub(crate) fn register(
    ctx: &Ctx<'_>,
    worker_id: &str,
    name: &str,
    adapters: &[AdapterType],
    labels: &BTreeMap<String, String>,
    slots: u32,
    version: &str,
) -> Result<Decision, DomainError> {
    require_id("workerId", worker_id)?;
    require_worker_or_admin(ctx, worker_id)?;
    // The join token's expiry, revocation and use count; a first use binds the worker id.
    let bound = super::credential::admit_worker(ctx, worker_id)?;
    let name = require_text("name", name, 100)?;
    if adapters.is_empty() {
        return Err(DomainError::invalid(
            "adapters",
            "name at least one adapter",
        ));
    }
    if slots == 0 || slots > 1000 {
        return Err(DomainError::invalid("slots", "must be between 1 and 1000"));
    }
    let worker = Worker {
        id: worker_id.into(),
        name,
        adapters: adapters.to_vec(),
        labels: labels.clone(),
        slots,
        version: version.chars().take(64).collect(),
        status: WorkerStatus::Online,
        registered_at: ctx.now(),
        lost_at: None,
    };
    let note = ActivityNote {
        company_id: None,
        entity_type: "worker",
        entity_id: worker.id.clone(),
        details: json!({ "adapters": worker.adapters, "slots": slots, "labels": labels }),
    };
    Ok(Decision {
        outcome: Outcome::Worker(worker.clone()),
        changes: bound.into_iter().chain([Change::Worker(worker)]).collect(),
        note,
    })
}

/// The leader saw the worker's lease expire: each of its live runs is `lost` (releasing its
/// checkouts) and, unless it was itself a retry, its wake is tried once more.
pub(crate) fn lost(ctx: &Ctx<'_>, worker_id: &str) -> Result<Decision, DomainError> {
    ctx.require_admin("declare a worker lost")?;
    let worker = ctx
        .state
        .workers
        .get(worker_id)
        .ok_or_else(|| DomainError::not_found("worker", worker_id))?;
    let mut changes = Vec::new();
    let runs: Vec<Run> = ctx
        .state
        .live_runs()
        .filter(|r| r.worker_id.as_deref() == Some(worker_id))
        .cloned()
        .collect();
    let mut retried = Vec::new();
    for run in &runs {
        changes.extend(end_run(ctx, run, RunStatus::Lost, Some("worker_lost")));
    }
    for run in &runs {
        if run.retry_of_run_id.is_some() {
            continue; // retried once already
        }
        let req = WakeRequest {
            id: format!("{}-retry", run.id),
            agent_id: run.agent_id.clone(),
            issue_id: run.issue_id.clone(),
            reason: WakeReason::ProcessLostRetry,
            comment_ids: run.comment_ids.clone(),
            payload: run.payload.clone(),
            idempotency_key: None,
            retry_of_run_id: Some(run.id.clone()),
        };
        let wake = enqueue(
            ctx,
            &mut Pending {
                changes: &mut changes,
            },
            req,
        )?;
        retried.push(wake.id);
    }
    let mut w = worker.clone();
    w.status = WorkerStatus::Lost;
    w.lost_at = Some(ctx.now());
    changes.push(Change::Worker(w.clone()));
    let lost_runs: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let note = ActivityNote {
        company_id: None,
        entity_type: "worker",
        entity_id: worker_id.into(),
        details: json!({ "lostRuns": lost_runs, "retryWakes": retried }),
    };
    Ok(Decision {
        outcome: Outcome::Worker(w),
        changes,
        note,
    })
}
