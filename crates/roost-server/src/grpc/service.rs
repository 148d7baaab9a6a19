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
    attachments, budgets, convert, credentials, documents, governance, interactions, issues,
    memory, monitors, records, routine_triggers, routines, skills, wakes,
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
    async fn create_company(
        &self,
        request: Request<pb::CreateCompanyRequest>,
    ) -> Reply<pb::Company> {
        self.serve(request, records::create_company).await
    }

    async fn list_companies(
        &self,
        request: Request<pb::ListCompaniesRequest>,
    ) -> Reply<pb::ListCompaniesResponse> {
        self.serve(request, records::list_companies).await
    }

    async fn create_agent(&self, request: Request<pb::CreateAgentRequest>) -> Reply<pb::Agent> {
        self.serve(request, records::create_agent).await
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Reply<pb::ListAgentsResponse> {
        self.serve(request, records::list_agents).await
    }

    async fn get_agent(&self, request: Request<pb::GetAgentRequest>) -> Reply<pb::Agent> {
        self.serve(request, records::get_agent).await
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

    async fn delete_agent(&self, request: Request<pb::DeleteAgentRequest>) -> Reply<pb::Agent> {
        self.serve(request, records::delete_agent).await
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

    async fn create_admin_token(
        &self,
        request: Request<pb::CreateAdminTokenRequest>,
    ) -> Reply<pb::CreateAdminTokenResponse> {
        self.serve(request, credentials::create_admin_token).await
    }

    async fn list_credentials(
        &self,
        request: Request<pb::ListCredentialsRequest>,
    ) -> Reply<pb::ListCredentialsResponse> {
        self.serve(request, credentials::list).await
    }

    async fn revoke_credential(
        &self,
        request: Request<pb::RevokeCredentialRequest>,
    ) -> Reply<pb::CredentialInfo> {
        self.serve(request, credentials::revoke).await
    }

    // Issues and comments: handlers in issues.rs.
    async fn create_issue(&self, request: Request<pb::CreateIssueRequest>) -> Reply<pb::Issue> {
        self.serve(request, issues::create).await
    }

    async fn list_issues(
        &self,
        request: Request<pb::ListIssuesRequest>,
    ) -> Reply<pb::ListIssuesResponse> {
        self.serve(request, issues::list).await
    }

    async fn get_issue(&self, request: Request<pb::GetIssueRequest>) -> Reply<pb::Issue> {
        self.serve(request, issues::get).await
    }

    async fn update_issue(
        &self,
        request: Request<pb::UpdateIssueRequest>,
    ) -> Reply<pb::UpdateIssueResponse> {
        self.serve(request, issues::update).await
    }

    async fn add_comment(&self, request: Request<pb::AddCommentRequest>) -> Reply<pb::Comment> {
        self.serve(request, issues::add_comment).await
    }

    async fn list_comments(
        &self,
        request: Request<pb::ListCommentsRequest>,
    ) -> Reply<pb::ListCommentsResponse> {
        self.serve(request, issues::list_comments).await
    }

    async fn get_comment(&self, request: Request<pb::GetCommentRequest>) -> Reply<pb::Comment> {
        self.serve(request, issues::get_comment).await
    }

    async fn checkout(&self, request: Request<pb::CheckoutRequest>) -> Reply<pb::Issue> {
        self.serve(request, issues::checkout).await
    }

    async fn release(&self, request: Request<pb::ReleaseRequest>) -> Reply<pb::Issue> {
        self.serve(request, issues::release).await
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

    async fn set_budget_policy(
        &self,
        request: Request<pb::SetBudgetPolicyRequest>,
    ) -> Reply<pb::BudgetPolicy> {
        self.serve(request, budgets::set_policy).await
    }

    async fn get_budget_overview(
        &self,
        request: Request<pb::GetBudgetOverviewRequest>,
    ) -> Reply<pb::BudgetOverview> {
        self.serve(request, budgets::overview).await
    }

    async fn resolve_budget_incident(
        &self,
        request: Request<pb::ResolveBudgetIncidentRequest>,
    ) -> Reply<pb::BudgetIncident> {
        self.serve(request, budgets::resolve).await
    }

    async fn record_cost_event(
        &self,
        request: Request<pb::RecordCostEventRequest>,
    ) -> Reply<pb::CostEvent> {
        self.serve(request, budgets::record_cost).await
    }

    async fn get_memory_summary(
        &self,
        request: Request<pb::GetMemorySummaryRequest>,
    ) -> Reply<pb::MemorySummary> {
        self.serve(request, memory::summary).await
    }

    async fn list_memory_entries(
        &self,
        request: Request<pb::ListMemoryEntriesRequest>,
    ) -> Reply<pb::ListMemoryEntriesResponse> {
        self.serve(request, memory::entries).await
    }

    async fn append_memory_entry(
        &self,
        request: Request<pb::AppendMemoryEntryRequest>,
    ) -> Reply<pb::MemoryEntry> {
        self.serve(request, memory::append).await
    }

    async fn get_memory_document(
        &self,
        request: Request<pb::GetMemoryDocumentRequest>,
    ) -> Reply<pb::MemoryDocument> {
        self.serve(request, memory::document).await
    }

    async fn put_memory_document(
        &self,
        request: Request<pb::PutMemoryDocumentRequest>,
    ) -> Reply<pb::MemoryDocument> {
        self.serve(request, memory::put_document).await
    }

    async fn search_memory(
        &self,
        request: Request<pb::SearchMemoryRequest>,
    ) -> Reply<pb::SearchMemoryResponse> {
        self.serve(request, memory::search).await
    }

    async fn get_company_memory_live(
        &self,
        request: Request<pb::GetCompanyMemoryLiveRequest>,
    ) -> Reply<pb::MemoryLive> {
        self.serve(request, memory::company_live).await
    }

    // Goals, projects and approvals: handlers in governance.rs.

    async fn create_goal(&self, request: Request<pb::CreateGoalRequest>) -> Reply<pb::Goal> {
        self.serve(request, governance::create_goal).await
    }

    async fn get_goal(&self, request: Request<pb::GetGoalRequest>) -> Reply<pb::Goal> {
        self.serve(request, governance::get_goal).await
    }

    async fn list_goals(
        &self,
        request: Request<pb::ListGoalsRequest>,
    ) -> Reply<pb::ListGoalsResponse> {
        self.serve(request, governance::list_goals).await
    }

    async fn update_goal(&self, request: Request<pb::UpdateGoalRequest>) -> Reply<pb::Goal> {
        self.serve(request, governance::update_goal).await
    }

    async fn delete_goal(&self, request: Request<pb::DeleteGoalRequest>) -> Reply<pb::Goal> {
        self.serve(request, governance::delete_goal).await
    }

    async fn create_project(
        &self,
        request: Request<pb::CreateProjectRequest>,
    ) -> Reply<pb::Project> {
        self.serve(request, governance::create_project).await
    }

    async fn get_project(&self, request: Request<pb::GetProjectRequest>) -> Reply<pb::Project> {
        self.serve(request, governance::get_project).await
    }

    async fn list_projects(
        &self,
        request: Request<pb::ListProjectsRequest>,
    ) -> Reply<pb::ListProjectsResponse> {
        self.serve(request, governance::list_projects).await
    }

    async fn update_project(
        &self,
        request: Request<pb::UpdateProjectRequest>,
    ) -> Reply<pb::Project> {
        self.serve(request, governance::update_project).await
    }

    async fn delete_project(
        &self,
        request: Request<pb::DeleteProjectRequest>,
    ) -> Reply<pb::Project> {
        self.serve(request, governance::delete_project).await
    }

    async fn pause_project(&self, request: Request<pb::PauseProjectRequest>) -> Reply<pb::Project> {
        self.serve(request, governance::pause_project).await
    }

    async fn resume_project(
        &self,
        request: Request<pb::ResumeProjectRequest>,
    ) -> Reply<pb::Project> {
        self.serve(request, governance::resume_project).await
    }

    async fn create_approval(
        &self,
        request: Request<pb::CreateApprovalRequest>,
    ) -> Reply<pb::Approval> {
        self.serve(request, governance::create_approval).await
    }

    async fn get_approval(&self, request: Request<pb::GetApprovalRequest>) -> Reply<pb::Approval> {
        self.serve(request, governance::get_approval).await
    }

    async fn list_approvals(
        &self,
        request: Request<pb::ListApprovalsRequest>,
    ) -> Reply<pb::ListApprovalsResponse> {
        self.serve(request, governance::list_approvals).await
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Reply<pb::Approval> {
        self.serve(request, governance::decide_approval).await
    }

    async fn resubmit_approval(
        &self,
        request: Request<pb::ResubmitApprovalRequest>,
    ) -> Reply<pb::Approval> {
        self.serve(request, governance::resubmit_approval).await
    }

    async fn add_approval_comment(
        &self,
        request: Request<pb::AddApprovalCommentRequest>,
    ) -> Reply<pb::ApprovalComment> {
        self.serve(request, governance::add_approval_comment).await
    }

    async fn list_approval_comments(
        &self,
        request: Request<pb::ListApprovalCommentsRequest>,
    ) -> Reply<pb::ListApprovalCommentsResponse> {
        self.serve(request, governance::list_approval_comments)
            .await
    }

    async fn link_issue_approval(
        &self,
        request: Request<pb::LinkIssueApprovalRequest>,
    ) -> Reply<pb::Approval> {
        self.serve(request, governance::link_issue_approval).await
    }

    async fn unlink_issue_approval(
        &self,
        request: Request<pb::LinkIssueApprovalRequest>,
    ) -> Reply<pb::Approval> {
        self.serve(request, governance::unlink_issue_approval).await
    }

    async fn hire_agent(
        &self,
        request: Request<pb::HireAgentRequest>,
    ) -> Reply<pb::HireAgentResponse> {
        self.serve(request, governance::hire_agent).await
    }

    // Routines: handlers in routines.rs.

    async fn list_routines(
        &self,
        request: Request<pb::ListRoutinesRequest>,
    ) -> Reply<pb::ListRoutinesResponse> {
        self.serve(request, routines::list_routines).await
    }

    async fn get_routine(&self, request: Request<pb::GetRoutineRequest>) -> Reply<pb::Routine> {
        self.serve(request, routines::get_routine).await
    }

    async fn create_routine(
        &self,
        request: Request<pb::CreateRoutineRequest>,
    ) -> Reply<pb::Routine> {
        self.serve(request, routines::create_routine).await
    }

    async fn update_routine(
        &self,
        request: Request<pb::UpdateRoutineRequest>,
    ) -> Reply<pb::Routine> {
        self.serve(request, routines::update_routine).await
    }

    async fn run_routine(&self, request: Request<pb::RunRoutineRequest>) -> Reply<pb::RoutineRun> {
        self.serve(request, routines::run_routine).await
    }

    async fn list_routine_runs(
        &self,
        request: Request<pb::ListRoutineRunsRequest>,
    ) -> Reply<pb::ListRoutineRunsResponse> {
        self.serve(request, routines::list_routine_runs).await
    }

    async fn set_memory_live(
        &self,
        request: Request<pb::SetMemoryLiveRequest>,
    ) -> Reply<pb::MemoryLive> {
        self.serve(request, memory::set_live).await
    }

    async fn list_memory_document_versions(
        &self,
        request: Request<pb::ListMemoryDocumentVersionsRequest>,
    ) -> Reply<pb::ListMemoryDocumentVersionsResponse> {
        self.serve(request, memory::document_versions).await
    }

    // Routine triggers: handlers in routine_triggers.rs.

    async fn list_routine_triggers(
        &self,
        request: Request<pb::ListRoutineTriggersRequest>,
    ) -> Reply<pb::ListRoutineTriggersResponse> {
        self.serve(request, routine_triggers::list).await
    }

    async fn create_routine_trigger(
        &self,
        request: Request<pb::CreateRoutineTriggerRequest>,
    ) -> Reply<pb::RoutineTriggerSecret> {
        self.serve(request, routine_triggers::create).await
    }

    async fn update_routine_trigger(
        &self,
        request: Request<pb::UpdateRoutineTriggerRequest>,
    ) -> Reply<pb::RoutineTrigger> {
        self.serve(request, routine_triggers::update).await
    }

    async fn delete_routine_trigger(
        &self,
        request: Request<pb::DeleteRoutineTriggerRequest>,
    ) -> Reply<pb::DeleteRoutineTriggerResponse> {
        self.serve(request, routine_triggers::delete).await
    }

    async fn rotate_routine_trigger_secret(
        &self,
        request: Request<pb::RotateRoutineTriggerSecretRequest>,
    ) -> Reply<pb::RoutineTriggerSecret> {
        self.serve(request, routine_triggers::rotate_secret).await
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

    async fn wakeup(&self, request: Request<pb::WakeupRequest>) -> Reply<pb::WakeupResponse> {
        self.serve(request, wakes::wakeup).await
    }

    async fn list_wakes(
        &self,
        request: Request<pb::ListWakesRequest>,
    ) -> Reply<pb::ListWakesResponse> {
        self.serve(request, wakes::list_wakes).await
    }

    async fn get_wake(&self, request: Request<pb::GetWakeRequest>) -> Reply<pb::Wake> {
        self.serve(request, wakes::get_wake).await
    }

    async fn list_workers(
        &self,
        request: Request<pb::ListWorkersRequest>,
    ) -> Reply<pb::ListWorkersResponse> {
        self.serve(request, wakes::list_workers).await
    }

    async fn create_worker_join_token(
        &self,
        request: Request<pb::CreateWorkerJoinTokenRequest>,
    ) -> Reply<pb::CreateWorkerJoinTokenResponse> {
        self.serve(request, wakes::create_join_token).await
    }

    async fn revoke_worker(
        &self,
        request: Request<pb::RevokeWorkerRequest>,
    ) -> Reply<pb::CredentialInfo> {
        self.serve(request, wakes::revoke_worker).await
    }

    // Companies, issues and runs: handlers in records.rs.

    async fn get_company(&self, request: Request<pb::GetCompanyRequest>) -> Reply<pb::Company> {
        self.serve(request, records::get_company).await
    }

    async fn update_company(
        &self,
        request: Request<pb::UpdateCompanyRequest>,
    ) -> Reply<pb::Company> {
        self.serve(request, records::update_company).await
    }

    async fn delete_issue(&self, request: Request<pb::DeleteIssueRequest>) -> Reply<pb::Issue> {
        self.serve(request, records::delete_issue).await
    }

    async fn get_inbox(
        &self,
        request: Request<pb::GetInboxRequest>,
    ) -> Reply<pb::GetInboxResponse> {
        self.serve(request, records::get_inbox).await
    }

    async fn get_heartbeat_context(
        &self,
        request: Request<pb::GetHeartbeatContextRequest>,
    ) -> Reply<pb::HeartbeatContext> {
        self.serve(request, records::get_heartbeat_context).await
    }

    async fn cancel_run(&self, request: Request<pb::CancelRunRequest>) -> Reply<pb::Run> {
        self.serve(request, records::cancel_run).await
    }

    async fn get_cost_summary(
        &self,
        request: Request<pb::GetCostSummaryRequest>,
    ) -> Reply<pb::CostSummary> {
        self.serve(request, budgets::cost_summary).await
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

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Reply<pb::ListRunsResponse> {
        self.serve(request, records::list_runs).await
    }

    async fn list_activity(
        &self,
        request: Request<pb::ListActivityRequest>,
    ) -> Reply<pb::ListActivityResponse> {
        self.serve(request, records::list_activity).await
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
