//! The `roost.v1.Control` service: authenticate from metadata, convert, call the service layer.
//!
//! Every handler is a thin adapter over [`Api`], which REST uses too, so both front ends share
//! checks, defaults and errors. Every failure is an [`ApiError`] turned into a status by the
//! single mapping in `crate::error`.

use roost_proto::v1 as pb;
use roost_proto::v1::control_server::Control;
use tonic::{Request, Response, Status};

use super::metadata::{authenticate_request, Credentials};
use super::{
    agent_revisions, attachments, budgets, convert, credentials, documents, governance,
    interactions, issues, memory, monitors, records, routine_triggers, routines, skills, wakes,
};
use crate::api::Api;
use crate::auth::Caller;
use crate::error::ApiError;

type Reply<T> = Result<Response<T>, Status>;

/// Calls of the service that only hand their message to a handler ([`ControlService::serve`]),
/// one line each: `name(Request) -> Reply = handler;`. Each expands to what
/// `#[tonic::async_trait]` makes of `async fn name(&self, Request<pb::Request>) -> Reply<..>`.
macro_rules! delegate {
    ($($name:ident($req:ident) -> $res:ident = $handler:path;)+) => {$(
        fn $name<'life0, 'async_trait>(
            &'life0 self,
            request: Request<pb::$req>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Reply<pb::$res>> + Send + 'async_trait>,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move { self.serve(request, $handler).await })
        }
    )+};
}

pub(crate) struct ControlService {
    api: Api,
}

impl ControlService {
    pub(crate) fn new(api: Api) -> Self {
        ControlService { api }
    }

    async fn caller<T>(&self, request: &Request<T>) -> Result<Caller, ApiError> {
        authenticate_request(&self.api, request).await
    }

    /// Authenticates the call, then hands the message to `handle`, a handler kept in a file of
    /// its subject's (`governance.rs`, `routines.rs`, `wakes.rs`, ...), which gets the service
    /// layer and the caller by value.
    async fn serve<T, R, F>(
        &self,
        request: Request<T>,
        handle: impl FnOnce(Api, Caller, T) -> F,
    ) -> Reply<R>
    where
        F: std::future::Future<Output = Result<R, ApiError>>,
    {
        let caller = self.caller(&request).await?;
        let reply = handle(self.api.clone(), caller, request.into_inner()).await?;
        Ok(Response::new(reply))
    }
}

#[tonic::async_trait]
impl Control for ControlService {
    delegate! {
        create_company(CreateCompanyRequest) -> Company = records::create_company;
        list_companies(ListCompaniesRequest) -> ListCompaniesResponse = records::list_companies;
        create_agent(CreateAgentRequest) -> Agent = records::create_agent;
        list_agents(ListAgentsRequest) -> ListAgentsResponse = records::list_agents;
        get_agent(GetAgentRequest) -> Agent = records::get_agent;
    }

    async fn update_agent(&self, request: Request<pb::UpdateAgentRequest>) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let (agent_id, patch) = convert::agent_patch(request.into_inner())?;
        let agent = self.api.update_agent(&caller, &agent_id, patch).await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }

    async fn pause_agent(&self, request: Request<pb::PauseAgentRequest>) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let body = request.get_ref();
        let reason = convert::pause_reason(body.reason)?;
        let agent = self
            .api
            .pause_agent(&caller, &body.agent_id, reason)
            .await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }

    async fn reset_agent_session(
        &self,
        request: Request<pb::ResetAgentSessionRequest>,
    ) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let r = request.into_inner();
        let task_key = r
            .task_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let agent = self
            .api
            .reset_agent_session(&caller, &r.agent_id, task_key)
            .await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }

    async fn resume_agent(&self, request: Request<pb::ResumeAgentRequest>) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let agent = self
            .api
            .resume_agent(&caller, &request.get_ref().agent_id)
            .await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }

    async fn terminate_agent(
        &self,
        request: Request<pb::TerminateAgentRequest>,
    ) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let agent = self
            .api
            .terminate_agent(&caller, &request.get_ref().agent_id)
            .await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }

    delegate! {
        delete_agent(DeleteAgentRequest) -> Agent = records::delete_agent;
        list_agent_config_revisions(ListAgentConfigRevisionsRequest)
            -> ListAgentConfigRevisionsResponse = agent_revisions::list;
        get_agent_config_revision(GetAgentConfigRevisionRequest)
            -> AgentConfigRevision = agent_revisions::get;
        rollback_agent_config(RollbackAgentConfigRequest) -> Agent = agent_revisions::rollback;
    }

    async fn create_agent_key(
        &self,
        request: Request<pb::CreateAgentKeyRequest>,
    ) -> Reply<pb::CreateAgentKeyResponse> {
        let caller = self.caller(&request).await?;
        let body = request.into_inner();
        let name = convert::key_name(body.name);
        let (credential, token) = self
            .api
            .create_agent_key(&caller, &body.agent_id, &name)
            .await?;
        Ok(Response::new(convert::created_key_to_proto(
            credential, token,
        )))
    }

    delegate! {
        create_admin_token(CreateAdminTokenRequest)
            -> CreateAdminTokenResponse = credentials::create_admin_token;
        list_credentials(ListCredentialsRequest) -> ListCredentialsResponse = credentials::list;
        revoke_credential(RevokeCredentialRequest) -> CredentialInfo = credentials::revoke;
    }

    // Issues and comments: handlers in issues.rs.
    delegate! {
        create_issue(CreateIssueRequest) -> Issue = issues::create;
        list_issues(ListIssuesRequest) -> ListIssuesResponse = issues::list;
        get_issue(GetIssueRequest) -> Issue = issues::get;
        update_issue(UpdateIssueRequest) -> UpdateIssueResponse = issues::update;
        add_comment(AddCommentRequest) -> Comment = issues::add_comment;
        list_comments(ListCommentsRequest) -> ListCommentsResponse = issues::list_comments;
        get_comment(GetCommentRequest) -> Comment = issues::get_comment;
        delete_comment(DeleteCommentRequest) -> Comment = issues::delete_comment;
        checkout(CheckoutRequest) -> Issue = issues::checkout;
        release(ReleaseRequest) -> Issue = issues::release;
    }

    async fn start_run(&self, request: Request<pb::StartRunRequest>) -> Reply<pb::Run> {
        let caller = self.caller(&request).await?;
        let body = request.into_inner();
        let issue_id = convert::optional_id(body.issue_id);
        let run = self
            .api
            .start_run(&caller, &body.agent_id, issue_id.as_deref())
            .await?;
        Ok(Response::new(convert::run_to_proto(run.into_run())))
    }

    async fn finish_run(&self, request: Request<pb::FinishRunRequest>) -> Reply<pb::Run> {
        let caller = self.caller(&request).await?;
        let body = request.into_inner();
        let status = convert::run_status(body.status)?;
        let run = self
            .api
            .finish_run(&caller, &body.run_id, status, body.error)
            .await?;
        Ok(Response::new(convert::run_to_proto(run.into_run())))
    }

    async fn get_run(&self, request: Request<pb::GetRunRequest>) -> Reply<pb::Run> {
        let caller = self.caller(&request).await?;
        let run = self.api.get_run(&caller, &request.get_ref().run_id).await?;
        Ok(Response::new(convert::run_to_proto(run.into_run())))
    }

    delegate! {
        set_budget_policy(SetBudgetPolicyRequest) -> BudgetPolicy = budgets::set_policy;
        get_budget_overview(GetBudgetOverviewRequest) -> BudgetOverview = budgets::overview;
        resolve_budget_incident(ResolveBudgetIncidentRequest) -> BudgetIncident = budgets::resolve;
        record_cost_event(RecordCostEventRequest) -> CostEvent = budgets::record_cost;
        get_memory_summary(GetMemorySummaryRequest) -> MemorySummary = memory::summary;
        list_memory_entries(ListMemoryEntriesRequest)
            -> ListMemoryEntriesResponse = memory::entries;
        append_memory_entry(AppendMemoryEntryRequest) -> MemoryEntry = memory::append;
        get_memory_document(GetMemoryDocumentRequest) -> MemoryDocument = memory::document;
        put_memory_document(PutMemoryDocumentRequest) -> MemoryDocument = memory::put_document;
        search_memory(SearchMemoryRequest) -> SearchMemoryResponse = memory::search;
        get_company_memory_live(GetCompanyMemoryLiveRequest) -> MemoryLive = memory::company_live;
    }

    // Goals, projects and approvals: handlers in governance.rs.

    delegate! {
        create_goal(CreateGoalRequest) -> Goal = governance::create_goal;
        get_goal(GetGoalRequest) -> Goal = governance::get_goal;
        list_goals(ListGoalsRequest) -> ListGoalsResponse = governance::list_goals;
        update_goal(UpdateGoalRequest) -> Goal = governance::update_goal;
        delete_goal(DeleteGoalRequest) -> Goal = governance::delete_goal;
        create_project(CreateProjectRequest) -> Project = governance::create_project;
        get_project(GetProjectRequest) -> Project = governance::get_project;
        list_projects(ListProjectsRequest) -> ListProjectsResponse = governance::list_projects;
        update_project(UpdateProjectRequest) -> Project = governance::update_project;
        delete_project(DeleteProjectRequest) -> Project = governance::delete_project;
        pause_project(PauseProjectRequest) -> Project = governance::pause_project;
        resume_project(ResumeProjectRequest) -> Project = governance::resume_project;
        create_approval(CreateApprovalRequest) -> Approval = governance::create_approval;
        get_approval(GetApprovalRequest) -> Approval = governance::get_approval;
        list_approvals(ListApprovalsRequest) -> ListApprovalsResponse = governance::list_approvals;
        decide_approval(DecideApprovalRequest) -> Approval = governance::decide_approval;
        resubmit_approval(ResubmitApprovalRequest) -> Approval = governance::resubmit_approval;
        add_approval_comment(AddApprovalCommentRequest)
            -> ApprovalComment = governance::add_approval_comment;
        list_approval_comments(ListApprovalCommentsRequest)
            -> ListApprovalCommentsResponse = governance::list_approval_comments;
        link_issue_approval(LinkIssueApprovalRequest) -> Approval = governance::link_issue_approval;
        unlink_issue_approval(LinkIssueApprovalRequest)
            -> Approval = governance::unlink_issue_approval;
        hire_agent(HireAgentRequest) -> HireAgentResponse = governance::hire_agent;
    }

    // Routines: handlers in routines.rs.

    delegate! {
        list_routines(ListRoutinesRequest) -> ListRoutinesResponse = routines::list_routines;
        get_routine(GetRoutineRequest) -> Routine = routines::get_routine;
        create_routine(CreateRoutineRequest) -> Routine = routines::create_routine;
        update_routine(UpdateRoutineRequest) -> Routine = routines::update_routine;
        run_routine(RunRoutineRequest) -> RoutineRun = routines::run_routine;
        list_routine_runs(ListRoutineRunsRequest)
            -> ListRoutineRunsResponse = routines::list_routine_runs;
        set_memory_live(SetMemoryLiveRequest) -> MemoryLive = memory::set_live;
        list_memory_document_versions(ListMemoryDocumentVersionsRequest)
            -> ListMemoryDocumentVersionsResponse = memory::document_versions;
    }

    // Routine triggers: handlers in routine_triggers.rs.

    delegate! {
        list_routine_triggers(ListRoutineTriggersRequest)
            -> ListRoutineTriggersResponse = routine_triggers::list;
        create_routine_trigger(CreateRoutineTriggerRequest)
            -> RoutineTriggerSecret = routine_triggers::create;
        update_routine_trigger(UpdateRoutineTriggerRequest)
            -> RoutineTrigger = routine_triggers::update;
        delete_routine_trigger(DeleteRoutineTriggerRequest)
            -> DeleteRoutineTriggerResponse = routine_triggers::delete;
        rotate_routine_trigger_secret(RotateRoutineTriggerSecretRequest)
            -> RoutineTriggerSecret = routine_triggers::rotate_secret;
    }

    // Issue documents: handlers in documents.rs.
    delegate! {
        list_issue_documents(ListIssueDocumentsRequest)
            -> ListIssueDocumentsResponse = documents::list;
        get_issue_document(GetIssueDocumentRequest) -> IssueDocument = documents::get;
        put_issue_document(PutIssueDocumentRequest) -> PutIssueDocumentResponse = documents::put;
        list_document_revisions(ListDocumentRevisionsRequest)
            -> ListDocumentRevisionsResponse = documents::revisions;
        restore_issue_document(RestoreIssueDocumentRequest) -> IssueDocument = documents::restore;
        lock_issue_document(LockIssueDocumentRequest) -> IssueDocument = documents::lock;
        unlock_issue_document(UnlockIssueDocumentRequest) -> IssueDocument = documents::unlock;
        delete_issue_document(DeleteIssueDocumentRequest) -> IssueDocument = documents::delete;
    }

    // Attachments and work products: handlers in attachments.rs.
    async fn upload_issue_attachment(
        &self,
        request: Request<tonic::Streaming<pb::UploadIssueAttachmentChunk>>,
    ) -> Reply<pb::IssueAttachment> {
        self.serve(request, attachments::upload).await
    }
    delegate! {
        list_issue_attachments(ListIssueAttachmentsRequest)
            -> ListIssueAttachmentsResponse = attachments::list;
        get_issue_attachment_content(GetIssueAttachmentContentRequest)
            -> IssueAttachmentContent = attachments::content;
        delete_issue_attachment(DeleteIssueAttachmentRequest) -> IssueAttachment = attachments::delete;
        list_work_products(ListWorkProductsRequest)
            -> ListWorkProductsResponse = attachments::list_products;
        create_work_product(CreateWorkProductRequest) -> WorkProduct = attachments::create_product;
        update_work_product(UpdateWorkProductRequest) -> WorkProduct = attachments::update_product;
        delete_work_product(DeleteWorkProductRequest) -> WorkProduct = attachments::delete_product;
    }

    // Issue-thread interactions: handlers in interactions.rs.
    delegate! {
        list_issue_interactions(ListIssueInteractionsRequest)
            -> ListIssueInteractionsResponse = interactions::list;
        create_issue_interaction(CreateIssueInteractionRequest)
            -> CreateIssueInteractionResponse = interactions::create;
        accept_issue_interaction(AcceptIssueInteractionRequest)
            -> IssueInteraction = interactions::accept;
        reject_issue_interaction(RejectIssueInteractionRequest)
            -> IssueInteraction = interactions::reject;
        respond_issue_interaction(RespondIssueInteractionRequest)
            -> IssueInteraction = interactions::respond;
        submit_issue_interaction_verdicts(SubmitIssueInteractionVerdictsRequest)
            -> IssueInteraction = interactions::verdicts;
        withdraw_issue_interaction(WithdrawIssueInteractionRequest)
            -> IssueInteraction = interactions::withdraw;
        skip_issue_interaction(SkipIssueInteractionRequest) -> IssueInteraction = interactions::skip;
        cancel_issue_interaction(CancelIssueInteractionRequest)
            -> IssueInteraction = interactions::cancel;
    }

    // Issue monitors: handlers in monitors.rs.
    delegate! {
        schedule_issue_monitor(ScheduleIssueMonitorRequest) -> Issue = monitors::schedule;
        clear_issue_monitor(ClearIssueMonitorRequest) -> Issue = monitors::clear;
        check_issue_monitor(CheckIssueMonitorRequest) -> Issue = monitors::check;
    }

    // Labels: handlers in governance.rs.
    delegate! {
        list_labels(ListLabelsRequest) -> ListLabelsResponse = governance::list_labels;
        create_label(CreateLabelRequest) -> Label = governance::create_label;
        delete_label(DeleteLabelRequest) -> Label = governance::delete_label;
    }

    // Skills: handlers in skills.rs.
    delegate! {
        list_skills(ListSkillsRequest) -> ListSkillsResponse = skills::list;
        get_skill(GetSkillRequest) -> Skill = skills::get;
        create_skill(CreateSkillRequest) -> Skill = skills::create;
        update_skill(UpdateSkillRequest) -> Skill = skills::update;
        delete_skill(DeleteSkillRequest) -> Skill = skills::delete;
        get_agent_skills(GetAgentSkillsRequest) -> AgentSkills = skills::agent_skills;
        set_agent_skills(SetAgentSkillsRequest) -> AgentSkills = skills::set_agent_skills;
    }

    // Wakes and workers: handlers in wakes.rs.

    delegate! {
        wakeup(WakeupRequest) -> WakeupResponse = wakes::wakeup;
        list_wakes(ListWakesRequest) -> ListWakesResponse = wakes::list_wakes;
        get_wake(GetWakeRequest) -> Wake = wakes::get_wake;
        list_workers(ListWorkersRequest) -> ListWorkersResponse = wakes::list_workers;
        create_worker_join_token(CreateWorkerJoinTokenRequest)
            -> CreateWorkerJoinTokenResponse = wakes::create_join_token;
        revoke_worker(RevokeWorkerRequest) -> CredentialInfo = wakes::revoke_worker;
    }

    // Companies, issues and runs: handlers in records.rs.

    delegate! {
        get_company(GetCompanyRequest) -> Company = records::get_company;
        update_company(UpdateCompanyRequest) -> Company = records::update_company;
        delete_issue(DeleteIssueRequest) -> Issue = records::delete_issue;
        get_inbox(GetInboxRequest) -> GetInboxResponse = records::get_inbox;
        get_heartbeat_context(GetHeartbeatContextRequest)
            -> HeartbeatContext = records::get_heartbeat_context;
        cancel_run(CancelRunRequest) -> Run = records::cancel_run;
        get_cost_summary(GetCostSummaryRequest) -> CostSummary = budgets::cost_summary;
    }

    type WatchStream = futures::stream::BoxStream<'static, Result<pb::ActivityEntry, Status>>;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Reply<Self::WatchStream> {
        let caller = self.caller(&request).await?;
        Ok(Response::new(
            super::events::watch(&self.api, &caller, request.into_inner()).await?,
        ))
    }

    type StreamRunLogStream = futures::stream::BoxStream<'static, Result<pb::RunLogChunk, Status>>;

    async fn stream_run_log(
        &self,
        request: Request<pb::StreamRunLogRequest>,
    ) -> Reply<Self::StreamRunLogStream> {
        use futures::StreamExt;
        let caller = self.caller(&request).await?;
        let credentials = Credentials::from_metadata(request.metadata())?;
        let body = request.into_inner();
        let stream = self
            .api
            .run_log(
                &caller,
                credentials.token.as_deref(),
                &body.run_id,
                body.offset,
                body.follow,
            )
            .await?;
        Ok(Response::new(
            stream
                .map(|chunk| {
                    chunk
                        .map(|c| pb::RunLogChunk {
                            offset: c.offset,
                            data: c.data,
                            ended: c.ended,
                        })
                        .map_err(Status::from)
                })
                .boxed(),
        ))
    }

    delegate! {
        list_runs(ListRunsRequest) -> ListRunsResponse = records::list_runs;
        list_activity(ListActivityRequest) -> ListActivityResponse = records::list_activity;
    }

    async fn verify_audit(
        &self,
        request: Request<pb::VerifyAuditRequest>,
    ) -> Reply<pb::VerifyAuditResponse> {
        let caller = self.caller(&request).await?;
        let report = self.api.verify_audit(&caller).await?;
        Ok(Response::new(convert::audit_report_to_proto(report)))
    }

    async fn get_me(&self, request: Request<pb::GetMeRequest>) -> Reply<pb::Agent> {
        let caller = self.caller(&request).await?;
        let agent = self.api.me(&caller).await?;
        Ok(Response::new(convert::agent_to_proto(agent)))
    }
}
