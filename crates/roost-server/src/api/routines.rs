//! Routines in Paperclip's shapes: CRUD, triggers (a webhook's secret shown
//! once, at creation or rotation), manual/API runs, the history of runs, and the public
//! webhook, whose signature this node checks before it proposes anything
//! (`roost_core::routine::verify_webhook`). Administrators write; agents read their company's
//! routines and may run them. The state machine re-checks every write (`rules/routine.rs`).

use roost_core::routine::{
    trigger_view, verify_webhook, Routine, RoutineRun, RunSource, WebhookRequest,
};
use roost_core::routine_command::{
    NewTrigger, RoutineCommand, RoutineFields, RoutineOutcome, RoutinePatch, RunRequest,
    TriggerPatch,
};
use roost_core::{Actor, ActorKind, Command, Outcome, State};
use serde_json::{json, Value};

use super::{expect_outcome, new_id, Api};
use crate::auth::Caller;
use crate::error::ApiError;

/// Runs a history page holds unless asked otherwise, and at most (Paperclip: 50 and 200).
pub const DEFAULT_RUN_PAGE: usize = 50;
pub const MAX_RUN_PAGE: usize = 200;

/// A run as Paperclip lists it: the row, its linked issue's summary and its trigger's kind.
pub fn run_view(s: &State, run: &RoutineRun) -> Value {
    let mut v = serde_json::to_value(run).unwrap_or(Value::Null);
    let issue = run.linked_issue_id.as_ref().and_then(|id| s.issues.get(id));
    let trigger = run
        .trigger_id
        .as_ref()
        .and_then(|id| s.routines.triggers.get(id));
    if let Some(map) = v.as_object_mut() {
        map.remove("seq");
        map.insert(
            "linkedIssue".into(),
            issue.map_or(Value::Null, |i| {
                json!({ "id": i.id, "identifier": i.identifier, "title": i.title,
                        "status": i.status, "priority": i.priority, "updatedAt": i.updated_at })
            }),
        );
        map.insert(
            "trigger".into(),
            match (&run.trigger_id, trigger) {
                (Some(id), t) => json!({ "id": id, "kind": t.map(|t| t.kind),
                                         "label": t.and_then(|t| t.label.clone()) }),
                (None, _) => Value::Null,
            },
        );
    }
    v
}

/// A routine with its triggers (no secrets) and, in `detail`, its recent runs; in a list its
/// last run.
fn routine_view(s: &State, r: &Routine, detail: bool) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    let triggers: Vec<Value> = s.routines.triggers_of(&r.id).map(trigger_view).collect();
    let active = r
        .last_issue_id
        .as_ref()
        .and_then(|id| s.issues.get(id))
        .filter(|i| !i.status.is_terminal())
        .map(|i| json!({ "id": i.id, "identifier": i.identifier, "title": i.title, "status": i.status }));
    if let Some(map) = v.as_object_mut() {
        map.insert("triggers".into(), Value::Array(triggers));
        map.insert("activeIssue".into(), active.unwrap_or(Value::Null));
        if detail {
            let recent: Vec<Value> = s
                .routines
                .runs_of(&r.id)
                .take(25)
                .map(|run| run_view(s, run))
                .collect();
            map.insert("recentRuns".into(), Value::Array(recent));
        } else {
            let last = s.routines.runs_of(&r.id).next().map(|run| run_view(s, run));
            map.insert("lastRun".into(), last.unwrap_or(Value::Null));
        }
    }
    v
}

/// A new secret for a webhook trigger, shown once.
fn new_secret() -> String {
    crate::auth::generate_token("rwh_")
}

fn secret_material(public_id: Option<&str>, secret: &str) -> Value {
    json!({
        "webhookUrl": public_id.map(|p| format!("/api/routine-triggers/public/{p}/fire")),
        "webhookSecret": secret,
    })
}

impl Api {
    async fn submit_routine(
        &self,
        caller: &Caller,
        cmd: RoutineCommand,
    ) -> Result<RoutineOutcome, ApiError> {
        let outcome = self
            .submit(caller, Command::Routine { routine: cmd })
            .await?;
        expect_outcome!(outcome, Outcome::Routine(o) => o)
    }

    /// The routine `id` if the caller may see it.
    async fn visible_routine(&self, caller: &Caller, id: &str) -> Result<Routine, ApiError> {
        self.barrier().await?;
        let r = self
            .reader()
            .read(|s| s.routines.routines.get(id).cloned())
            .ok_or_else(|| ApiError::not_found("routine", id))?;
        caller.check_company(&r.company_id, "routine", id)?;
        Ok(r)
    }

    async fn routine_json(&self, id: &str, detail: bool) -> Result<Value, ApiError> {
        self.reader()
            .read(|s| {
                s.routines
                    .routines
                    .get(id)
                    .map(|r| routine_view(s, r, detail))
            })
            .ok_or_else(|| ApiError::not_found("routine", id))
    }

    pub async fn create_routine(
        &self,
        caller: &Caller,
        company_id: &str,
        fields: RoutineFields,
    ) -> Result<Value, ApiError> {
        caller.require_admin()?;
        caller.check_company(company_id, "company", company_id)?;
        let cmd = RoutineCommand::Create {
            id: new_id(),
            company_id: company_id.into(),
            fields,
        };
        match self.submit_routine(caller, cmd).await? {
            RoutineOutcome::Routine { routine } => self.routine_json(&routine.id, true).await,
            other => Err(ApiError::internal(format!(
                "unexpected routine outcome {other:?}"
            ))),
        }
    }

    pub async fn list_routines(
        &self,
        caller: &Caller,
        company_id: &str,
    ) -> Result<Vec<Value>, ApiError> {
        caller.check_company(company_id, "company", company_id)?;
        self.barrier().await?;
        self.reader().read(|s| {
            if !s.companies.contains_key(company_id) {
                return Err(ApiError::not_found("company", company_id));
            }
            let mut rows: Vec<&Routine> = s
                .routines
                .routines
                .values()
                .filter(|r| r.company_id == company_id)
                .collect();
            // Paperclip: the most recently updated first.
            rows.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.title.cmp(&b.title)));
            Ok(rows
                .into_iter()
                .map(|r| routine_view(s, r, false))
                .collect())
        })
    }

    pub async fn get_routine(&self, caller: &Caller, id: &str) -> Result<Value, ApiError> {
        self.visible_routine(caller, id).await?;
        self.routine_json(id, true).await
    }

    pub async fn update_routine(
        &self,
        caller: &Caller,
        id: &str,
        patch: RoutinePatch,
    ) -> Result<Value, ApiError> {
        caller.require_admin()?;
        self.visible_routine(caller, id).await?;
        let cmd = RoutineCommand::Update {
            routine_id: id.into(),
            patch,
        };
        self.submit_routine(caller, cmd).await?;
        self.routine_json(id, true).await
    }

    pub async fn routine_runs(
        &self,
        caller: &Caller,
        id: &str,
        limit: Option<usize>,
    ) -> Result<Vec<Value>, ApiError> {
        self.visible_routine(caller, id).await?;
        let limit = limit.unwrap_or(DEFAULT_RUN_PAGE).clamp(1, MAX_RUN_PAGE);
        Ok(self.reader().read(|s| {
            s.routines
                .runs_of(id)
                .take(limit)
                .map(|run| run_view(s, run))
                .collect()
        }))
    }

    pub async fn routine_triggers(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Vec<Value>, ApiError> {
        self.visible_routine(caller, id).await?;
        Ok(self
            .reader()
            .read(|s| s.routines.triggers_of(id).map(trigger_view).collect()))
    }

    /// Creates a trigger; a signed webhook's secret is made here and shown in this answer only.
    pub async fn create_trigger(
        &self,
        caller: &Caller,
        routine_id: &str,
        mut trigger: NewTrigger,
    ) -> Result<Value, ApiError> {
        caller.require_admin()?;
        self.visible_routine(caller, routine_id).await?;
        let mut secret = None;
        if trigger.kind == roost_core::routine::TriggerKind::Webhook {
            trigger.public_id = Some(uuid::Uuid::new_v4().simple().to_string());
            if trigger.signing_mode != Some(roost_core::routine::SigningMode::None) {
                secret = Some(new_secret());
            }
            trigger.secret = secret.clone();
        }
        let cmd = RoutineCommand::CreateTrigger {
            id: new_id(),
            routine_id: routine_id.into(),
            trigger,
        };
        match self.submit_routine(caller, cmd).await? {
            RoutineOutcome::Trigger { trigger } => {
                let material = match &trigger.secret {
                    // A retry answered from the first outcome shows the secret that was stored.
                    Some(s) => secret_material(trigger.public_id.as_deref(), s),
                    None if trigger.public_id.is_some() => json!({
                        "webhookUrl": format!("/api/routine-triggers/public/{}/fire",
                                              trigger.public_id.as_deref().unwrap_or_default()),
                        "webhookSecret": null,
                    }),
                    None => Value::Null,
                };
                Ok(json!({ "trigger": trigger_view(&trigger), "secretMaterial": material }))
            }
            other => Err(ApiError::internal(format!(
                "unexpected routine outcome {other:?}"
            ))),
        }
    }

    async fn visible_trigger(&self, caller: &Caller, id: &str) -> Result<(), ApiError> {
        caller.require_admin()?;
        self.barrier().await?;
        let company = self
            .reader()
            .read(|s| s.routines.triggers.get(id).map(|t| t.company_id.clone()))
            .ok_or_else(|| ApiError::not_found("routine trigger", id))?;
        caller.check_company(&company, "routine trigger", id)
    }

    pub async fn update_trigger(
        &self,
        caller: &Caller,
        id: &str,
        patch: TriggerPatch,
    ) -> Result<Value, ApiError> {
        self.visible_trigger(caller, id).await?;
        let cmd = RoutineCommand::UpdateTrigger {
            trigger_id: id.into(),
            patch,
        };
        match self.submit_routine(caller, cmd).await? {
            RoutineOutcome::Trigger { trigger } => Ok(trigger_view(&trigger)),
            other => Err(ApiError::internal(format!(
                "unexpected routine outcome {other:?}"
            ))),
        }
    }

    pub async fn delete_trigger(&self, caller: &Caller, id: &str) -> Result<(), ApiError> {
        self.visible_trigger(caller, id).await?;
        let cmd = RoutineCommand::DeleteTrigger {
            trigger_id: id.into(),
        };
        self.submit_routine(caller, cmd).await.map(|_| ())
    }

    pub async fn rotate_trigger_secret(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Value, ApiError> {
        self.visible_trigger(caller, id).await?;
        let secret = new_secret();
        let cmd = RoutineCommand::RotateSecret {
            trigger_id: id.into(),
            secret,
        };
        match self.submit_routine(caller, cmd).await? {
            RoutineOutcome::Trigger { trigger } => Ok(json!({
                "trigger": trigger_view(&trigger),
                "secretMaterial": secret_material(trigger.public_id.as_deref(),
                                                  trigger.secret.as_deref().unwrap_or_default()),
            })),
            other => Err(ApiError::internal(format!(
                "unexpected routine outcome {other:?}"
            ))),
        }
    }

    /// `POST /api/routines/{id}/run` (source `manual` or `api`).
    pub async fn run_routine(
        &self,
        caller: &Caller,
        request: RunRequest,
    ) -> Result<Value, ApiError> {
        self.visible_routine(caller, &request.routine_id).await?;
        if !matches!(request.source, RunSource::Manual | RunSource::Api) {
            return Err(ApiError::bad_request("source must be `manual` or `api`"));
        }
        self.dispatch_run(caller, request).await
    }

    async fn dispatch_run(&self, caller: &Caller, request: RunRequest) -> Result<Value, ApiError> {
        let cmd = RoutineCommand::Run {
            request,
            run_id: new_id(),
            issue_id: new_id(),
        };
        match self.submit_routine(caller, cmd).await? {
            RoutineOutcome::Run { run } => Ok(self.reader().read(|s| run_view(s, &run))),
            other => Err(ApiError::internal(format!(
                "unexpected routine outcome {other:?}"
            ))),
        }
    }

    /// The public webhook: no credential; the trigger's signing mode is checked here, at this
    /// node's time, before anything is proposed. A bad signature is `401` and changes nothing.
    pub async fn fire_webhook(
        &self,
        public_id: &str,
        req: WebhookRequest<'_>,
        idempotency_key: Option<String>,
    ) -> Result<Value, ApiError> {
        self.barrier().await?;
        let trigger = self
            .reader()
            .read(|s| s.routines.trigger_by_public_id(public_id).cloned())
            .filter(|t| t.kind == roost_core::routine::TriggerKind::Webhook)
            .ok_or_else(|| ApiError::not_found("routine trigger", public_id))?;
        verify_webhook(&trigger, &req, super::now()).map_err(ApiError::unauthorized)?;
        let payload: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(req.body)
                .map_err(|e| ApiError::bad_request(format!("the webhook body is not JSON: {e}")))?
        };
        let variables = payload.get("variables").cloned().unwrap_or(Value::Null);
        let caller = Caller {
            actor: Actor {
                kind: ActorKind::System,
                id: "routine-webhook".into(),
                credential_id: None,
                run_id: None,
                company_id: Some(trigger.company_id.clone()),
            },
            idempotency_key: None,
        };
        let request = RunRequest {
            routine_id: trigger.routine_id.clone(),
            trigger_id: Some(trigger.id.clone()),
            source: RunSource::Webhook,
            payload,
            variables,
            assignee_agent_id: None,
            idempotency_key,
        };
        self.dispatch_run(&caller, request).await
    }
}
